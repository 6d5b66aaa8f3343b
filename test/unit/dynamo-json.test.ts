/**
 * The one-pass writer of DynamoDB JSON against what it replaces: `JSON.stringify` of the command
 * with `@aws-sdk/util-dynamodb`'s `marshall` applied (removeUndefinedValues). Byte for byte, over
 * generated documents that hold every plain value, the values marshall treats specially (sets,
 * binary, BigInt, NumberValue, numbers it refuses, class instances) and keys that need escaping;
 * and the same error where marshall throws one. The request bodies' equality with the SDK's own
 * serialiser is in `dynamo-wire.test.ts`.
 */
import fc from 'fast-check';
import { NumberValue } from '@aws-sdk/lib-dynamodb';
import { marshall, type NativeAttributeValue } from '@aws-sdk/util-dynamodb';
import { attributeMapJson, entryJson, transactWriteJson } from '../../lambdas/adapters/dynamo-json';

type Json = Record<string, unknown>;
const MARSHAL = { removeUndefinedValues: true } as const;

/** What DynamoWire sent before the writer: marshall, then JSON.stringify. */
const reference = {
  map: (doc: unknown): string => JSON.stringify(marshall(doc as Record<string, NativeAttributeValue>, MARSHAL)),
  entry(entry: Json): Json {
    const out: Json = { ...entry };
    if (entry.Key !== undefined) out.Key = marshall(entry.Key as Record<string, NativeAttributeValue>, MARSHAL);
    if (entry.Item !== undefined) out.Item = marshall(entry.Item as Record<string, NativeAttributeValue>, MARSHAL);
    if (entry.ExpressionAttributeValues !== undefined) out.ExpressionAttributeValues = marshall(entry.ExpressionAttributeValues as Record<string, NativeAttributeValue>, MARSHAL);
    return out;
  },
  transact(input: Json, token: string): string {
    const items = ((input.TransactItems as Json[] | undefined) ?? []).map((item) => {
      const out: Json = {};
      for (const [kind, entry] of Object.entries(item)) if (entry !== undefined) out[kind] = reference.entry(entry as Json);
      return out;
    });
    return JSON.stringify({ ...input, TransactItems: items, ClientRequestToken: token });
  },
};

/** The string either side produced, or the message of what it threw. */
function outcome(f: () => string): string {
  try {
    return `ok ${f()}`;
  } catch (err) {
    return `threw ${(err as Error).message}`;
  }
}

class Custom {
  constructor(readonly a: number) {}
}

const key = fc.oneof(
  { weight: 6, arbitrary: fc.string({ maxLength: 12 }) },
  { weight: 2, arbitrary: fc.constantFrom('pk', 'sk', '#ttl', ':v1', '0', '10', '2', 'a"b', 'line\nbreak', 'é😀', 'constructor', 'toString') },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 6 }) },
);
const plain = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.string({ unit: 'binary', maxLength: 8 }),
  fc.integer(),
  fc.maxSafeInteger(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom(0, -0, 1e-7, 1.5, 2 ** 53 - 1, -(2 ** 53 - 1), 1e21),
  fc.boolean(),
  fc.constant(null),
  fc.constant(undefined),
);
/** What marshall treats apart, or refuses; rare, so most documents take the one-pass path. */
const special = fc.oneof(
  fc.constantFrom(Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53, -(2 ** 60), 10n ** 30n, new NumberValue('12345678901234567890'), () => 1),
  fc.uint8Array({ maxLength: 4 }),
  fc.uniqueArray(fc.string({ maxLength: 4 }), { minLength: 1, maxLength: 3 }).map((xs) => new Set(xs)),
  fc.uniqueArray(fc.integer(), { minLength: 1, maxLength: 3 }).map((xs) => new Set(xs)),
  fc.constant(new Set()),
  fc.integer().map((a) => new Custom(a)),
  fc.constant(new Date(0)),
  fc.constant(new Map([['a', 1]])),
  fc.constant(Object.assign(Object.create(null) as object, { x: 1 })),
  fc.constant(JSON.parse('{"__proto__":{"x":1}}') as unknown),
);
const { doc: document } = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: 'small', withCrossShrink: true }, { weight: 20, arbitrary: plain }, { weight: 1, arbitrary: special }, { weight: 3, arbitrary: tie('list') }, { weight: 3, arbitrary: tie('doc') }),
  list: fc.array(tie('value'), { maxLength: 4 }),
  doc: fc.dictionary(key, tie('value'), { maxKeys: 5 }),
}));

describe('attributeMapJson', () => {
  it('writes what JSON.stringify(marshall(doc)) writes, byte for byte, or throws what marshall throws', () => {
    fc.assert(
      fc.property(document, (doc) => {
        expect(outcome(() => attributeMapJson(doc))).toBe(outcome(() => reference.map(doc)));
      }),
      { numRuns: 1_500 },
    );
  });

  it.each([
    ['a ledger update', { ':v1': 3910, ':v2': -3910, ':v3': 1_795_712_459, ':v4': 5_000_000_000, ':n': 'MONTH#2026-11' }],
    ['a hold', { holdId: 'req_6c5c', windows: ['KEYWIN#k#M2026-11', 'MONTH#2026-11'], byok: false, memberId: undefined, meta: { a: 1, b: [true, null, undefined] } }],
    ['escapes and unicode', { 'a"b': 'line\nbreak\t"quoted"\\', é: 'héllo ✓ 😀', '\u0000': '\u2028' }],
    ['integer-like keys, ordered as JavaScript orders them', { b: 1, 10: 2, a: 3, 2: 4 }],
    ['an empty map, list and string', { m: {}, l: [], s: '' }],
    ['a set, binary and a big number, through marshall', { s: new Set(['x', 'y']), b: Buffer.from('hi'), n: 10n ** 20n }],
  ])('%s', (_name, doc) => {
    expect(attributeMapJson(doc)).toBe(reference.map(doc));
  });

  it('refuses what marshall refuses, with its message', () => {
    for (const bad of [{ n: Number.NaN }, { n: 2 ** 53 }, { c: new Custom(1) }, { s: new Set() }]) {
      expect(outcome(() => attributeMapJson(bad))).toMatch(/^threw /);
      expect(outcome(() => attributeMapJson(bad))).toBe(outcome(() => reference.map(bad)));
    }
  });
});

const entry = fc.record(
  {
    TableName: fc.constantFrom('ledger', 'holds', 'usage'),
    Key: document,
    Item: document,
    UpdateExpression: fc.string({ maxLength: 30 }),
    ConditionExpression: fc.string({ maxLength: 30 }),
    ExpressionAttributeNames: fc.dictionary(key, fc.string({ maxLength: 8 }), { maxKeys: 3 }),
    ExpressionAttributeValues: document,
    ReturnValuesOnConditionCheckFailure: fc.constantFrom('ALL_OLD', 'NONE', undefined),
    ConsistentRead: fc.boolean(),
  },
  { requiredKeys: ['TableName'] },
);

describe('entryJson and transactWriteJson', () => {
  it('write an entry as JSON.stringify of it marshalled', () => {
    fc.assert(
      fc.property(entry, (e) => {
        expect(outcome(() => entryJson(e))).toBe(outcome(() => JSON.stringify(reference.entry(e))));
      }),
      { numRuns: 1_000 },
    );
  });

  it('write a transaction as before: fields in order, its items marshalled, the token in place or last', () => {
    const item = fc.dictionary(fc.constantFrom('Put', 'Update', 'Delete', 'ConditionCheck'), fc.oneof({ weight: 5, arbitrary: entry }, { weight: 1, arbitrary: fc.constant(undefined) }), { maxKeys: 2 });
    const input = fc.record(
      {
        ClientRequestToken: fc.oneof(fc.uuid(), fc.constant(undefined)),
        TransactItems: fc.oneof({ weight: 8, arbitrary: fc.array(item, { maxLength: 6 }) }, { weight: 1, arbitrary: fc.constant(undefined) }),
        ReturnConsumedCapacity: fc.constantFrom('TOTAL', 'NONE'),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(input, fc.boolean(), fc.uuid(), (given, reorder, token) => {
        // Field order matters to the bytes: try the token before and after the items.
        const ordered: Json = reorder ? Object.fromEntries(Object.entries(given).reverse()) : given;
        expect(outcome(() => transactWriteJson(ordered, token))).toBe(outcome(() => reference.transact(ordered, token)));
      }),
      { numRuns: 1_000 },
    );
  });

  it('spell every UTF-16 code unit in a string, a key and a value as JSON.stringify does', () => {
    for (let unit = 0; unit <= 0xffff; unit += 1) {
      const text = `a${String.fromCharCode(unit)}b`;
      const e: Json = { TableName: text, Key: { [text]: text } };
      const got = entryJson(e);
      if (got !== JSON.stringify(reference.entry(e))) throw new Error(`code unit ${unit.toString(16)}: ${got}`);
    }
    // A pair of surrogates (one character) and a lone one, in every position.
    for (const text of ['😀', 'x😀', '\ud83dx', 'x\ude00', '\ude00\ud83d']) expect(entryJson({ TableName: text })).toBe(JSON.stringify({ TableName: text }));
  });

  it('writes a frozen field as JSON.stringify does, once remembered and whenever it could change', () => {
    // The expression builder hands every command of one text the same frozen names: the same bytes each time.
    const names = Object.freeze({ '#a': 'availableMicros', '#b': 'x"y' });
    for (let i = 0; i < 3; i += 1) expect(entryJson({ TableName: 't', ExpressionAttributeNames: names })).toBe(JSON.stringify({ TableName: 't', ExpressionAttributeNames: names }));
    fc.assert(
      fc.property(entry, (e) => {
        const frozen: Json = { ...e, ...(e.ExpressionAttributeNames !== undefined ? { ExpressionAttributeNames: Object.freeze({ ...(e.ExpressionAttributeNames as Json) }) } : {}) };
        expect(outcome(() => entryJson(frozen))).toBe(outcome(() => entryJson(e)));
        expect(outcome(() => entryJson(frozen))).toBe(outcome(() => JSON.stringify(reference.entry(frozen))));
      }),
      { numRuns: 300 },
    );
    // Frozen but able to change what it writes: a nested object, a getter, a prototype's toJSON. Each is written afresh.
    const inner = { n: 1 };
    const nested = Object.freeze({ inner });
    let current = 0;
    const getter = Object.freeze(Object.defineProperty({}, 'g', { enumerable: true, get: () => current }));
    const proto = { toJSON: () => ({ at: current }) };
    const withProto = Object.freeze(Object.create(proto) as object);
    for (const value of [nested, getter, withProto]) {
      const first = entryJson({ ExpressionAttributeNames: value });
      inner.n += 1;
      current += 1;
      const second = entryJson({ ExpressionAttributeNames: value });
      expect(second).not.toBe(first);
      expect(second).toBe(JSON.stringify({ ExpressionAttributeNames: value }));
    }
  });

  it('writes a ledger admission as the marshall path does', () => {
    const admission: Json = {
      TransactItems: [
        {
          Update: {
            TableName: 'ledger',
            Key: { pk: 'WS#ws_1', sk: 'BALANCE' },
            UpdateExpression: 'SET #s11 = :v6 ADD #availableMicros :v3, #heldMicros :v4',
            ConditionExpression: '(#availableMicros >= :v1) AND (attribute_not_exists(#s11) OR #s11 = :v5)',
            ExpressionAttributeNames: { '#availableMicros': 'availableMicros', '#heldMicros': 'heldMicros', '#s11': 's11' },
            ExpressionAttributeValues: { ':v1': 3910, ':v3': -3910, ':v4': 3910, ':v5': 1_795_712_459, ':v6': 1_795_712_459 },
            ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
          },
        },
        { Put: { TableName: 'holds', Item: { holdId: 'req_1', windows: ['MONTH#2026-11'], byok: false, memberId: undefined }, ConditionExpression: 'attribute_not_exists(holdId)' } },
      ],
    };
    const token = '6c5c2a24-f2f9-4316-9980-b6000000abcd';
    expect(transactWriteJson(admission, token)).toBe(reference.transact(admission, token));
    expect(JSON.parse(transactWriteJson(admission, token))).toMatchObject({ ClientRequestToken: token, TransactItems: [{ Update: { Key: { pk: { S: 'WS#ws_1' } } } }, { Put: { Item: { holdId: { S: 'req_1' }, byok: { BOOL: false } } } }] });
  });
});
