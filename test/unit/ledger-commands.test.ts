/**
 * The DynamoDB ledger's command inputs, asserted with aws-sdk-client-mock: what admission and
 * settlement ask DynamoDB to do (keys, which items carry a condition, ALL_OLD on each), and how a
 * refusal is decided from one consistent snapshot. Behaviour against a real DynamoDB (Local)
 * belongs to the integration tests.
 */
import { DynamoDBClient, TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import { BatchGetCommand, DynamoDBDocumentClient, GetCommand, TransactGetCommand, TransactWriteCommand, type TransactWriteCommandInput } from '@aws-sdk/lib-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import { mockClient } from 'aws-sdk-client-mock';
import { DynamoLedger } from '../../lambdas/adapters/dynamo-ledger';
import type { AdmissionLimits, AdmitRequest, Settlement } from '../../lambdas/gateway/ports';
import type { HoldRecord } from '../../lambdas/shared/records';
import { sliceKey, usagePk } from '../../lambdas/store/keys';
import { openRow } from '../../lambdas/store/request-rows';
import { slotName } from '../../lambdas/store/items';
import { lapFloor, lapOf, slotValue } from '../../lambdas/core/spend-rate';

const ddb = mockClient(DynamoDBDocumentClient);
const doc = DynamoDBDocumentClient.from(new DynamoDBClient({ region: 'us-east-1', credentials: { accessKeyId: 'x', secretAccessKey: 'y' } }));
const TABLES = { ledger: 'L', usage: 'U' } as const;

const NOW = Date.UTC(2026, 10, 22, 12, 34, 56, 789);
const SECOND = Math.floor(NOW / 1000);
const SLOT = SECOND % 64;
const RATE_SK = `RATE#k1#${Math.floor(NOW / 60_000)}`;
const PK = 'WS#ws1';
const KEY_PK = 'KEY#ws1#k1';
const CAP = 5000 * 1_000_000;
const MONTH = 202611;
const NEED = 2_000_000;

const LIMITS: AdmissionLimits = {
  keyLimitMicros: 10_000_000,
  keyWindow: 'monthly',
  memberLimitMicros: 50_000_000,
  workspaceLimitMicros: 100_000_000,
  spendRateCapMicros: CAP,
  keyRatePerMinute: 60,
};

const request = (over: Partial<AdmitRequest> = {}): AdmitRequest => ({
  holdId: 'req_1',
  workspaceId: 'ws1',
  keyId: 'k1',
  memberId: 'm1',
  family: 'chat_completions',
  requestedModel: 'openai/gpt-4.1',
  amountMicros: NEED,
  inputMicros: 500_000,
  byok: false,
  limits: LIMITS,
  now: NOW,
  expiresAt: NOW + 600_000,
  ...over,
});

/**
 * The store's answer to both reads of a snapshot: the consistent one (TransactGetItems, which
 * decides a refusal) and the item-by-item one (BatchGetItem, which moves are planned on).
 */
function reads(out: { Responses: { Item?: Record<string, unknown> }[] }): void {
  ddb.on(TransactGetCommand).resolves(out);
  ddb.on(BatchGetCommand).resolves({ Responses: { [TABLES.ledger]: out.Responses.flatMap((r) => (r.Item === undefined ? [] : [r.Item])) }, UnprocessedKeys: {} });
}

const cancelled = (...reasons: (string | { Code: string; Item: Record<string, unknown> })[]): TransactionCanceledException =>
  new TransactionCanceledException({
    message: 'Transaction cancelled',
    $metadata: {},
    // As DynamoDB sends them: a reason's ALL_OLD item in attribute values.
    CancellationReasons: reasons.map((r) => (typeof r === 'string' ? { Code: r } : { Code: r.Code, Item: marshall(r.Item) })),
  });

type Items = NonNullable<TransactWriteCommandInput['TransactItems']>;
const transactions = (): Items[] => ddb.commandCalls(TransactWriteCommand).map((c) => c.args[0].input.TransactItems ?? []);
const keyOf = (item: Items[number] | undefined): unknown => item?.Update?.Key ?? item?.Delete?.Key ?? item?.Put?.Item?.requestId;
/** The key of request `req_1`'s row (the id carries no start: its row starts at the admission's `now`). */
const ROW_KEY = { pk: usagePk('ws1', 'req_1'), sk: `${new Date(NOW).toISOString()}#req_1` };

/** The placeholder a builder gave an attribute (a slot's one-character name among them). */
function ref(update: { ExpressionAttributeNames?: Record<string, string> } | undefined, name: string): string {
  return Object.entries(update?.ExpressionAttributeNames ?? {}).find(([, v]) => v === name)?.[0] ?? `#${name}`;
}

/** The value a builder placeholder stands for, found by the attribute it is compared or added to. */
function valueNear(update: { UpdateExpression?: string; ConditionExpression?: string; ExpressionAttributeValues?: Record<string, unknown> } | undefined, pattern: RegExp): unknown {
  const text = `${update?.UpdateExpression ?? ''} | ${update?.ConditionExpression ?? ''}`;
  const m = pattern.exec(text);
  return m === null ? undefined : update?.ExpressionAttributeValues?.[m[1] as string];
}

beforeEach(() => {
  ddb.reset();
});

describe('admit: the transaction', () => {
  test('rate counter, hold, slice (with its month share) and the key and member windows, each conditional with ALL_OLD', async () => {
    ddb.on(TransactWriteCommand).resolves({});
    const outcome = await new DynamoLedger(doc, TABLES).admit(request());
    const all = transactions();
    expect(all).toHaveLength(1);
    const items = all[0] as Items;
    expect(items.map(keyOf)).toEqual([
      { pk: KEY_PK, sk: RATE_SK },
      'req_1',
      { pk: PK, sk: 'BALANCE' },
      { pk: 'KEY#ws1#k1', sk: 'KEYWIN#k1#M2026-11' },
      { pk: 'MEMBER#ws1#m1', sk: 'MEMBERMONTH#m1#2026-11' },
    ]);
    for (const item of items) {
      if (item.Update !== undefined) {
        expect(item.Update.ConditionExpression).toEqual(expect.any(String));
        expect(item.Update.ReturnValuesOnConditionCheckFailure).toBe('ALL_OLD');
      }
    }
    const hold: HoldRecord = {
      holdId: 'req_1',
      workspaceId: 'ws1',
      keyId: 'k1',
      memberId: 'm1',
      family: 'chat_completions',
      requestedModel: 'openai/gpt-4.1',
      amountMicros: NEED,
      inputMicros: 500_000,
      windows: ['KEYWIN#k1#M2026-11', 'MEMBERMONTH#m1#2026-11', 'MONTH#2026-11'],
      byok: false,
      createdAt: NOW,
      expiresAt: NOW + 600_000,
    };
    // The hold is the request's row, put open (`request-rows.ts`).
    expect(items[1]).toEqual({ Put: { TableName: 'U', Item: openRow(hold), ConditionExpression: 'attribute_not_exists(pk)' } });
    expect(outcome).toEqual({ admitted: true, hold });

    // The slice covers the need from its available credit, and its spend-rate headroom covers it too.
    const slice = items[2]?.Update;
    expect(valueNear(slice, /#availableMicros >= (:v\d+)/)).toBe(NEED);
    expect(valueNear(slice, /#rr >= (:v\d+)/)).toBe(NEED);
    expect(valueNear(slice, /#rc = (:v\d+)/)).toBe(CAP);
    // The reservation goes in this second's slot, which must be free or already this second's
    // (its value names the second's lap: this lap's range, with room for the amount).
    const slot = ref(slice, slotName(SLOT));
    expect(slice?.ConditionExpression).toContain(`attribute_not_exists(${slot})`);
    expect(valueNear(slice, new RegExp(`${slot} BETWEEN (:v\\d+)`))).toBe(lapFloor(SECOND));

    // Unsliced windows: used + need <= limit, as used <= limit - need.
    expect(valueNear(items[3]?.Update, /#usedMicros <= (:v\d+)/)).toBe(10_000_000 - NEED);
    expect(valueNear(items[4]?.Update, /#usedMicros <= (:v\d+)/)).toBe(50_000_000 - NEED);
    // The month share, on the slice item: headroom under the current limit covers the need.
    expect(valueNear(slice, /#mr >= (:v\d+)/)).toBe(NEED);
    expect(valueNear(slice, /#ml = (:v\d+)/)).toBe(100_000_000);
    expect(valueNear(slice, /#mo = (:v\d+)/)).toBe(MONTH);
  });

  test('a key window or member month without a limit is not written; the month share on the slice carries no limit condition', async () => {
    ddb.on(TransactWriteCommand).resolves({});
    await new DynamoLedger(doc, TABLES).admit(request({ limits: { keyWindow: 'never', spendRateCapMicros: CAP, keyRatePerMinute: 60 } }));
    const items = transactions()[0] as Items;
    expect(items.map(keyOf)).toEqual([{ pk: KEY_PK, sk: RATE_SK }, 'req_1', { pk: PK, sk: 'BALANCE' }]); // rate, hold, slice
    expect(items[2]?.Update?.ConditionExpression).not.toContain('#mr');
    // A window that never ends has no ttl (a 0 would have DynamoDB collect it at once).
    ddb.reset();
    ddb.on(TransactWriteCommand).resolves({});
    await new DynamoLedger(doc, TABLES).admit(request({ memberId: undefined, limits: { keyWindow: 'never', keyLimitMicros: 10_000_000, spendRateCapMicros: CAP, keyRatePerMinute: 60 } }));
    const withLimit = transactions()[0] as Items;
    expect(withLimit[3]?.Update?.Key).toEqual({ pk: KEY_PK, sk: 'KEYWIN#k1#ALL' });
    expect(withLimit[3]?.Update?.UpdateExpression).not.toContain('#ttl');
  });

  test('BYOK: rate counter and hold only; no slice, no window', async () => {
    ddb.on(TransactWriteCommand).resolves({});
    const outcome = await new DynamoLedger(doc, TABLES).admit(request({ byok: true }));
    const items = transactions()[0] as Items;
    expect(items).toHaveLength(2);
    expect(items[0]?.Update?.Key).toEqual({ pk: KEY_PK, sk: RATE_SK });
    expect(outcome).toMatchObject({ admitted: true, hold: { byok: true, windows: [] } });
  });

  test('a transaction conflict is retried without a read', async () => {
    ddb.on(TransactWriteCommand).rejectsOnce(cancelled('None', 'TransactionConflict', 'None', 'None', 'None')).resolves({});
    expect((await new DynamoLedger(doc, TABLES).admit(request())).admitted).toBe(true);
    expect(transactions()).toHaveLength(2);
    expect(ddb.commandCalls(TransactGetCommand)).toHaveLength(0);
  });

  test('a slot holding an aged-out second, returned as ALL_OLD, is overwritten on the retry without a read', async () => {
    const old = SECOND - 64;
    const item = { pk: PK, sk: 'BALANCE', availableMicros: 10 * NEED, heldMicros: 0, rc: CAP, rr: CAP - 700, rt: 700, rl: lapOf(old), [slotName(SLOT)]: slotValue(old, 700) };
    ddb.on(TransactWriteCommand).rejectsOnce(cancelled('None', 'None', { Code: 'ConditionalCheckFailed', Item: item }, 'None', 'None')).resolves({});
    expect((await new DynamoLedger(doc, TABLES).admit(request())).admitted).toBe(true);
    expect(ddb.commandCalls(TransactGetCommand)).toHaveLength(0);
    const retry = (transactions()[1] as Items)[2]?.Update;
    // Conditioned on exactly the aged-out second and amount that came back (one value holds both).
    expect(valueNear(retry, new RegExp(`${ref(retry, slotName(SLOT))} = (:v\\d+)\\)`))).toBe(slotValue(old, 700));
    // Its 700 return to the headroom, so only NEED - 700 must be there.
    expect(valueNear(retry, /#rr >= (:v\d+)/)).toBe(NEED - 700);
  });

  test('a slice whose guard lap no longer tells its slots apart (left alone for hours) is tidied, then written, without a read', async () => {
    const old = SECOND - 1000 * 64; // a thousand laps ago: beyond the 900 a slot's value tells apart
    const k = old % 64;
    const item = { pk: PK, sk: 'BALANCE', availableMicros: 10 * NEED, heldMicros: 0, rc: CAP, rr: CAP - 700, rt: 700, rl: lapOf(old), [slotName(k)]: slotValue(old, 700) };
    ddb.on(TransactWriteCommand).rejectsOnce(cancelled('None', 'None', { Code: 'ConditionalCheckFailed', Item: item }, 'None', 'None')).resolves({});
    expect((await new DynamoLedger(doc, TABLES).admit(request())).admitted).toBe(true);
    expect(ddb.commandCalls(TransactGetCommand)).toHaveLength(0);
    const [, tidy, again] = transactions();
    const tidied = tidy?.[0]?.Update;
    expect(tidied?.Key).toEqual({ pk: PK, sk: 'BALANCE' });
    // The aged-out slot removed on exactly what was read, its amount back to the headroom, the guard moved to this lap.
    expect(tidied?.UpdateExpression).toContain(`REMOVE ${ref(tidied, slotName(k))}`);
    expect(valueNear(tidied, new RegExp(`${ref(tidied, slotName(k))} = (:v\\d+)`))).toBe(slotValue(old, 700));
    expect(valueNear(tidied, /#rl = (:v\d+)\)/)).toBe(lapOf(old));
    expect(valueNear(tidied, /SET #rl = (:v\d+)/)).toBe(lapOf(SECOND));
    expect(valueNear(tidied, /#rt (:v\d+)/)).toBe(-700);
    // Then the admission, as it was.
    expect(again?.map(keyOf)).toEqual((transactions()[0] as Items).map(keyOf));
  });

  test("a slice whose month share is an earlier month's: the retry starts this month's share whole, conditioned on that month", async () => {
    const item = { pk: PK, sk: 'BALANCE', availableMicros: 10 * NEED, heldMicros: 0, mo: 202610, ms: 5, mh: 7, mu: 12, mr: 3, ml: 100_000_000 };
    ddb.on(TransactWriteCommand).rejectsOnce(cancelled('None', 'None', { Code: 'ConditionalCheckFailed', Item: item }, 'None', 'None')).resolves({});
    expect((await new DynamoLedger(doc, TABLES).admit(request())).admitted).toBe(true);
    expect(ddb.commandCalls(TransactGetCommand)).toHaveLength(0);
    const retry = (transactions()[1] as Items)[2]?.Update;
    expect(valueNear(retry, /#mo = (:v\d+)\)/)).toBe(202610);
    expect(valueNear(retry, /SET #mo = (:v\d+)/)).toBe(MONTH);
    // Slice 0 starts the month with the whole limit as headroom, less this need; nothing settled yet.
    expect(valueNear(retry, /#mr = (:v\d+)/)).toBe(100_000_000 - NEED);
    expect(valueNear(retry, /#mh = (:v\d+)/)).toBe(NEED);
    expect(valueNear(retry, /#ms = (:v\d+)/)).toBe(0);
  });

  test('the key at its request rate: refused from the counter ALL_OLD returned, without a read', async () => {
    ddb.on(TransactWriteCommand).rejects(cancelled({ Code: 'ConditionalCheckFailed', Item: { pk: KEY_PK, sk: RATE_SK, requests: 60 } }, 'None', 'None', 'None', 'None'));
    const outcome = await new DynamoLedger(doc, TABLES).admit(request());
    expect(outcome).toEqual({ admitted: false, refusal: { kind: 'rate_limit_exceeded', retryAfterSeconds: 4 } });
    expect(ddb.commandCalls(TransactGetCommand)).toHaveLength(0);
  });
});

describe('admit: refusals from one consistent snapshot', () => {
  const slice0 = (available: number, extra: Record<string, unknown> = {}): Record<string, unknown> => ({ pk: PK, sk: 'BALANCE', availableMicros: available, heldMicros: 0, ...extra });
  /** The keys a snapshot reads, in order. */
  const READ_KEYS = [
    { pk: PK, sk: 'BALANCE' },
    { pk: KEY_PK, sk: RATE_SK },
    { pk: KEY_PK, sk: 'KEYWIN#k1#M2026-11' },
    { pk: 'MEMBER#ws1#m1', sk: 'MEMBERMONTH#m1#2026-11' },
  ];
  /** The snapshot's responses in the order read: slice (its month share on it), rate counter, key window, member month. */
  const snapshot = (parts: { slice?: Record<string, unknown>; rate?: Record<string, unknown>; key?: Record<string, unknown>; member?: Record<string, unknown> }) => ({
    Responses: [parts.slice, parts.rate, parts.key, parts.member].map((Item, i) => (Item === undefined ? {} : { Item: { ...READ_KEYS[i], ...Item } })),
  });

  test('need above the spend rate cap: refused from the snapshot, without a transaction', async () => {
    reads(snapshot({ slice: slice0(10 * CAP) }));
    const outcome = await new DynamoLedger(doc, TABLES).admit(request({ amountMicros: CAP + 1, limits: { keyWindow: 'monthly', spendRateCapMicros: CAP, keyRatePerMinute: 60 } }));
    expect(transactions()).toHaveLength(0);
    expect(outcome).toEqual({ admitted: false, refusal: { kind: 'spend_rate_exceeded', retryAfterSeconds: 1, capMicros: CAP } });
    // One slice: every quantity is one item, read strongly consistent; no TransactGetItems.
    const read = ddb.commandCalls(BatchGetCommand)[0]?.args[0].input;
    // (This request's key and member carry no limit: their windows are not tracked, so not read.)
    expect(read?.RequestItems?.[TABLES.ledger]?.Keys).toEqual(READ_KEYS.slice(0, 2));
    expect(read?.RequestItems?.[TABLES.ledger]?.ConsistentRead).toBe(true);
    expect(ddb.commandCalls(TransactGetCommand)).toHaveLength(0);
  });

  test('need above the cap and above the balance: the 402 wins (SPEC Errors rule 2)', async () => {
    reads(snapshot({ slice: slice0(100) }));
    const outcome = await new DynamoLedger(doc, TABLES).admit(request({ amountMicros: CAP + 1 }));
    expect(transactions()).toHaveLength(0);
    expect(outcome).toEqual({ admitted: false, refusal: { kind: 'insufficient_credit', availableMicros: 100 } });
  });

  test.each<[string, Parameters<typeof snapshot>[0], unknown]>([
    ['request rate', { rate: { requests: 60 }, slice: slice0(0) }, { kind: 'rate_limit_exceeded', retryAfterSeconds: 4 }],
    ['balance', { slice: slice0(NEED - 1) }, { kind: 'insufficient_credit', availableMicros: NEED - 1 }],
    ['no balance item', {}, { kind: 'insufficient_credit', availableMicros: 0 }],
    ['key window', { slice: slice0(NEED), key: { settledMicros: 3, heldMicros: 9_000_000, usedMicros: 9_000_003 } }, { kind: 'key_limit_exceeded', settledMicros: 3, heldMicros: 9_000_000, limitMicros: 10_000_000 }],
    ['member month', { slice: slice0(NEED), member: { usedMicros: 50_000_000 - NEED + 1 } }, { kind: 'member_limit_exceeded', usedMicros: 50_000_000 - NEED + 1, limitMicros: 50_000_000 }],
    ['workspace month', { slice: slice0(NEED, { mo: MONTH, mu: 100_000_000, mr: 0, ml: 100_000_000 }) }, { kind: 'workspace_limit_exceeded', usedMicros: 100_000_000, limitMicros: 100_000_000 }],
    [
      'spend rate (a live slot)',
      { slice: slice0(CAP, { rc: CAP, rr: NEED - 1, rt: CAP - NEED + 1, rl: lapOf(SECOND), [slotName(SLOT)]: slotValue(SECOND, CAP - NEED + 1) }) },
      { kind: 'spend_rate_exceeded', retryAfterSeconds: 61, capMicros: CAP },
    ],
  ])('a refused admission is decided from the snapshot: %s', async (_l, parts, refusal) => {
    ddb.on(TransactWriteCommand).rejects(cancelled('ConditionalCheckFailed', 'None', 'ConditionalCheckFailed', 'None', 'None'));
    reads(snapshot(parts));
    const outcome = await new DynamoLedger(doc, TABLES).admit(request());
    expect(outcome).toEqual({ admitted: false, refusal });
    expect(transactions()).toHaveLength(1);
  });

  /** A workspace on two slices: slice 0 (which says so) and slice 1, as a TransactGetItems returns them in the order read. */
  const twoSlices = (available0: number, available1: number): { Responses: { Item?: Record<string, unknown> }[] } => ({
    Responses: [
      { Item: slice0(available0, { sliceCount: 2, sliceHigh: 2 }) },
      { Item: { ...sliceKey('ws1', 1), availableMicros: available1, heldMicros: 0 } },
      ...[0, 1].flatMap(() => [{}, {}]), // the key's counter and window on its two key slices
      {}, // the member month
    ],
  });

  test('a shortfall the item-by-item read shows on a sliced workspace is not a refusal when the consistent read covers it', async () => {
    // Read item by item, the slices looked short (a move was in flight); the consistent read has it.
    ddb.on(TransactWriteCommand).rejectsOnce(cancelled('None', 'None', 'ConditionalCheckFailed', 'None', 'None')).resolves({});
    reads(twoSlices(NEED - 2, 1));
    ddb.on(TransactGetCommand).resolves(twoSlices(NEED - 2, 10 * NEED));
    const outcome = await new DynamoLedger(doc, TABLES).admit(request());
    expect(outcome.admitted).toBe(true);
    expect(ddb.commandCalls(TransactGetCommand)).toHaveLength(1);
    expect(ddb.commandCalls(TransactGetCommand)[0]?.args[0].input.TransactItems?.[1]?.Get?.Key).toEqual(sliceKey('ws1', 1));
  });

  test('one slice: the shortfall of a strongly consistent item read is the refusal, with no TransactGetItems', async () => {
    ddb.on(TransactWriteCommand).rejects(cancelled('None', 'None', 'ConditionalCheckFailed', 'None', 'None'));
    reads(snapshot({ slice: slice0(NEED - 1) }));
    const outcome = await new DynamoLedger(doc, TABLES).admit(request());
    expect(outcome).toEqual({ admitted: false, refusal: { kind: 'insufficient_credit', availableMicros: NEED - 1 } });
    expect(ddb.commandCalls(TransactGetCommand)).toHaveLength(0);
  });

  test('plans from the item-by-item read alone when it shows no shortfall (no TransactGetItems to be cancelled)', async () => {
    ddb.on(TransactWriteCommand).rejectsOnce(cancelled('None', 'None', 'ConditionalCheckFailed', 'None', 'None')).resolves({});
    reads(twoSlices(NEED - 2, 10 * NEED));
    expect((await new DynamoLedger(doc, TABLES).admit(request())).admitted).toBe(true);
    expect(ddb.commandCalls(BatchGetCommand)[0]?.args[0].input.RequestItems?.[TABLES.ledger]?.ConsistentRead).toBe(true);
    expect(ddb.commandCalls(TransactGetCommand)).toHaveLength(0);
  });

  test('a consistent read cancelled for a conflict is read again, and the refusal still decided on it', async () => {
    ddb.on(TransactWriteCommand).rejects(cancelled('None', 'None', 'ConditionalCheckFailed', 'None', 'None'));
    reads(twoSlices(NEED - 2, 1));
    ddb.on(TransactGetCommand).rejectsOnce(cancelled('TransactionConflict', ...Array.from({ length: 6 }, () => 'None'))).resolves(twoSlices(NEED - 2, 1));
    let conflicts = 0;
    const outcome = await new DynamoLedger(doc, TABLES, () => (conflicts += 1)).admit(request());
    expect(outcome).toEqual({ admitted: false, refusal: { kind: 'insufficient_credit', availableMicros: NEED - 1 } });
    expect(ddb.commandCalls(TransactGetCommand)).toHaveLength(2);
    expect(conflicts).toBe(1);
  });
});

describe('extend', () => {
  const hold: HoldRecord = {
    holdId: 'req_1',
    workspaceId: 'ws1',
    keyId: 'k1',
    family: 'chat_completions',
    requestedModel: 'openai/gpt-4.1',
    amountMicros: NEED,
    inputMicros: 500_000,
    windows: ['KEYWIN#k1#M2026-11', 'MONTH#2026-11'],
    byok: false,
    createdAt: NOW,
    expiresAt: NOW + 600_000,
  };

  test('conflicts on the hold\'s slice are retried past the eight tries a shortfall gets: a running stream is not cut for a busy slice', async () => {
    const conflict = cancelled('None', 'TransactionConflict', 'None');
    let stub = ddb.on(TransactWriteCommand);
    for (let i = 0; i < 10; i += 1) stub = stub.rejectsOnce(conflict);
    stub.resolves({});
    let conflicts = 0;
    expect(await new DynamoLedger(doc, TABLES, () => (conflicts += 1)).extend(hold, 1_000, LIMITS, NOW)).toBe(true);
    expect(transactions()).toHaveLength(11);
    expect(conflicts).toBe(10);
    expect(ddb.commandCalls(TransactGetCommand)).toHaveLength(0);
  });
});

describe('settle', () => {
  const hold: HoldRecord = {
    holdId: 'req_1',
    workspaceId: 'ws1',
    keyId: 'k1',
    memberId: 'm1',
    family: 'chat_completions',
    requestedModel: 'profile/fast',
    amountMicros: NEED,
    inputMicros: 500_000,
    windows: ['KEYWIN#k1#M2026-11', 'MEMBERMONTH#m1#2026-11', 'MONTH#2026-11'],
    byok: false,
    createdAt: NOW,
    expiresAt: NOW + 600_000,
  };
  /** What the settlement sets `name` to on the row. */
  const rowSet = (update: Parameters<typeof valueNear>[0], name: string): unknown => valueNear(update, new RegExp(`#${name} = (:v\\d+)`));
  const settlement = (charge: number, over: Partial<Settlement> = {}): Settlement => ({
    counts: { inputTokens: 100, cachedInputTokens: 10, outputTokens: 50, reasoningTokens: 5 },
    chargeMicros: charge,
    servedBy: 'openai/gpt-4.1',
    provider: 'openai',
    stream: false,
    status: 200,
    outcome: 'ok',
    attempts: 1,
    now: NOW + 1234,
    ...over,
  });
  const ledgerFor = (): DynamoLedger => {
    reads({ Responses: [{}, {}] });
    return new DynamoLedger(doc, TABLES);
  };

  test('turns the open hold into its usage row, returns the rest, moves every window (the month share on the slice) by charge - hold', async () => {
    ddb.on(TransactWriteCommand).resolves({});
    const charge = 1_500_000;
    await expect(ledgerFor().settle(hold, settlement(charge))).resolves.toBe(true);
    const items = transactions()[0] as Items;
    expect(items.map(keyOf)).toEqual([
      ROW_KEY,
      { pk: PK, sk: 'BALANCE' },
      { pk: KEY_PK, sk: 'KEYWIN#k1#M2026-11' },
      { pk: 'MEMBER#ws1#m1', sk: 'MEMBERMONTH#m1#2026-11' },
    ]);
    // Conditional on the hold still being open (idempotence), on its amount and on its windows (an arming may adopt it).
    const row = items[0]?.Update;
    expect(row).toMatchObject({ TableName: 'U', ReturnValuesOnConditionCheckFailure: 'ALL_OLD' });
    expect(valueNear(row, /\(#state = (:v\d+)\)/)).toBe('open');
    expect(valueNear(row, /\(#amountMicros = (:v\d+)\)/)).toBe(NEED);
    expect(valueNear(row, /\(size\(#windows\) = (:v\d+)\)/)).toBe(3);
    const slice = items[1]?.Update;
    expect(valueNear(slice, /#availableMicros (:v\d+)/)).toBe(NEED - charge);
    expect(valueNear(slice, /#heldMicros (:v\d+)/)).toBe(-NEED);
    expect(valueNear(slice, /#spentMicros (:v\d+)/)).toBe(charge);
    expect(slice?.ConditionExpression).not.toContain('#availableMicros'); // nothing above the hold to collect
    for (const w of items.slice(2, 4)) expect(valueNear(w.Update, /#usedMicros (:v\d+)/)).toBe(charge - NEED);
    // The month share, on the slice, only while it is still the hold's month.
    expect(valueNear(slice, /#mo = (:v\d+)/)).toBe(MONTH);
    expect(valueNear(slice, /#mu (:v\d+)/)).toBe(charge - NEED);
    expect(valueNear(slice, /#mr (:v\d+)/)).toBe(NEED - charge);
    // The usage row: the settled figures set on the same item, and what only a hold needs removed.
    expect(rowSet(row, 'state')).toBe('settled');
    expect(rowSet(row, 'chargeMicros')).toBe(charge);
    expect(rowSet(row, 'holdMicros')).toBe(NEED);
    expect(rowSet(row, 'durationMs')).toBe(1234);
    expect(row?.UpdateExpression).toMatch(/REMOVE .*#expiryShard/);
    expect(row?.UpdateExpression).not.toContain('#uncollectedMicros');
    expect(row?.UpdateExpression).not.toContain('#ttl');
  });

  test('usage rows carry a ttl when a retention is configured', async () => {
    ddb.on(TransactWriteCommand).resolves({});
    reads({ Responses: [{}, {}] });
    await new DynamoLedger(doc, { ...TABLES, usageRetentionDays: 30 }).settle(hold, settlement(1));
    expect(rowSet((transactions()[0] as Items)[0]?.Update, 'ttl')).toBe(Math.floor((NOW + 1234) / 1000) + 30 * 86_400);
  });

  test('when the slice cannot cover the excess, what is there is collected and the rest recorded as uncollected', async () => {
    ddb.on(TransactWriteCommand).rejectsOnce(cancelled('None', { Code: 'ConditionalCheckFailed', Item: { pk: PK, sk: 'BALANCE', availableMicros: 300, mo: MONTH } }, 'None', 'None')).resolves({});
    await ledgerFor().settle(hold, settlement(NEED + 1000));
    const all = transactions();
    expect(all).toHaveLength(2);
    const second = all[1] as Items;
    expect(valueNear(second[1]?.Update, /#availableMicros (:v\d+)/)).toBe(-300);
    expect(valueNear(second[1]?.Update, /#availableMicros >= (:v\d+)/)).toBe(300);
    expect(rowSet(second[0]?.Update, 'chargeMicros')).toBe(NEED + 300);
    expect(rowSet(second[0]?.Update, 'uncollectedMicros')).toBe(700);
  });

  test("a hold whose month is over (the slice's share started over): settled again without the month share", async () => {
    ddb.on(TransactWriteCommand).rejectsOnce(cancelled('None', { Code: 'ConditionalCheckFailed', Item: { pk: PK, sk: 'BALANCE', availableMicros: 300, mo: 202612 } }, 'None', 'None')).resolves({});
    await expect(ledgerFor().settle(hold, settlement(1_500_000))).resolves.toBe(true);
    const [first, second] = transactions();
    expect(valueNear(first?.[1]?.Update, /#mo = (:v\d+)/)).toBe(MONTH);
    expect(second?.[1]?.Update?.UpdateExpression).not.toContain('#mu');
    expect(second?.[1]?.Update?.ConditionExpression ?? '').not.toContain('#mo');
    expect(valueNear(second?.[1]?.Update, /#spentMicros (:v\d+)/)).toBe(1_500_000);
  });

  test('already settled (the row\'s update failed and no open row came back): resolves false, one transaction', async () => {
    ddb.on(TransactWriteCommand).rejects(cancelled('ConditionalCheckFailed', 'None', 'None', 'None'));
    ddb.on(GetCommand).resolves({});
    await expect(ledgerFor().settle(hold, settlement(1))).resolves.toBe(false);
    expect(transactions()).toHaveLength(1);
  });

  test('the stored hold has grown since this copy (ALL_OLD says so): settled again at the stored amount', async () => {
    const grown = NEED + 500;
    ddb.on(TransactWriteCommand).rejectsOnce(cancelled({ Code: 'ConditionalCheckFailed', Item: { ...openRow(hold), amountMicros: grown } }, 'None', 'None', 'None')).resolves({});
    await expect(ledgerFor().settle(hold, settlement(1_000_000))).resolves.toBe(true);
    const second = transactions()[1] as Items;
    expect(valueNear(second[0]?.Update, /\(#amountMicros = (:v\d+)\)/)).toBe(grown);
    expect(valueNear(second[0]?.Update, /\(size\(#windows\) = (:v\d+)\)/)).toBe(3);
    expect(valueNear(second[1]?.Update, /#heldMicros (:v\d+)/)).toBe(-grown);
    expect(rowSet(second[0]?.Update, 'holdMicros')).toBe(grown);
    expect(rowSet(second[0]?.Update, 'chargeMicros')).toBe(1_000_000);
  });

  test('after a settlement, now and then, aged-out slots of that slice are removed and their amounts returned', async () => {
    ddb.on(TransactWriteCommand).resolves({});
    const old = SECOND - 100;
    const k = old % 64;
    reads({ Responses: [{ Item: { pk: PK, sk: 'BALANCE', availableMicros: 5, rc: CAP, rr: CAP - 900, rt: 900, rl: lapOf(old), [slotName(k)]: slotValue(old, 900) } }] });
    await new DynamoLedger(doc, TABLES).settle(hold, settlement(1));
    const tidy = transactions()[1]?.[0]?.Update;
    expect(tidy?.Key).toEqual({ pk: PK, sk: 'BALANCE' });
    const slot = ref(tidy, slotName(k));
    expect(tidy?.UpdateExpression).toContain(`REMOVE ${slot}`);
    expect(valueNear(tidy, /#rt (:v\d+)/)).toBe(-900);
    // Conditioned on exactly what was read (its second and amount), so a slot reused meanwhile is left alone.
    expect(valueNear(tidy, new RegExp(`${slot} = (:v\\d+)`))).toBe(slotValue(old, 900));
  });

  test('BYOK: the open hold becomes its usage row; no slice, no windows, no charge', async () => {
    ddb.on(TransactWriteCommand).resolves({});
    await new DynamoLedger(doc, TABLES).settle({ ...hold, byok: true, windows: [] }, settlement(999));
    const items = transactions()[0] as Items;
    expect(items.map((i) => Object.keys(i)[0])).toEqual(['Update']);
    expect(rowSet(items[0]?.Update, 'chargeMicros')).toBe(0);
    expect(rowSet(items[0]?.Update, 'byok')).toBe(true);
  });
});
