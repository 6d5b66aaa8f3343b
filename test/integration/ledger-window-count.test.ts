/**
 * The per-key request rate carried on key slice 0's window item (issue 21, work in progress: the
 * item builders only, not yet used by the ledger's admission; docs/store.md, "Closing the
 * every-limit goal"). On DynamoDB Local, through the same conditional writes an admission would
 * send with ALL_OLD on refusal: the rate exact under a 200-way race, a new minute counted in a slot
 * of its own without any reset, a slot holding a minute five or more before overwritten on exactly
 * what the refusal returned, the window's credit limit still checked in the same write, and the
 * item kept under 1 KB.
 */
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import { tableName } from '../../lambdas/shared/schema';
import { COUNT_SLOTS, countSlotName, minuteRequests, staleCount, windowDebit, type Item, type MinuteCount } from '../../lambdas/store/items';
import { itemSize } from '../../bench/store-map-model';
import { testTables, type TestTables } from '../support/dynamo';
import { testDate } from '../support/clock';

let tables: TestTables;

beforeAll(async () => {
  tables = await testTables();
});

afterAll(() => {
  tables.client.destroy();
});

jest.setTimeout(120_000);

const MINUTE = Math.floor(testDate(10, 22, 12, 0, 0) / 60_000);
const TTL = Math.floor(testDate(11, 1) / 1000);
const RATE = 37;
const MICROS = 1_000;

interface Outcome {
  readonly ok: boolean;
  readonly old?: Item;
}

/** One admission's window write (count and credit) on `sk`; refused writes return what the item held. */
async function write(sk: string, count: MinuteCount, limitMicros: number): Promise<Outcome> {
  try {
    await tables.doc.send(
      new UpdateCommand({
        TableName: tableName(tables.prefix, 'ledger'),
        Key: { pk: 'KEY#ws#k', sk },
        ...windowDebit({ micros: MICROS, limitMicros, ttl: TTL, check: true, count }),
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
      }),
    );
    return { ok: true };
  } catch (err) {
    if ((err as { name?: string }).name !== 'ConditionalCheckFailedException') throw err;
    // The document client leaves a refusal's ALL_OLD in DynamoDB's wire form.
    const old = (err as { Item?: Parameters<typeof unmarshall>[0] }).Item;
    return { ok: false, ...(old !== undefined ? { old: unmarshall(old) as Item } : {}) };
  }
}

/** An admission as the ledger sends it: refused on a stale slot, sent again in the form that starts the minute over. */
async function admit(sk: string, minute: number, limitMicros = Number.MAX_SAFE_INTEGER): Promise<boolean> {
  const first = await write(sk, { minute, rate: RATE }, limitMicros);
  if (first.ok) return true;
  if (staleCount(first.old, minute) === undefined) return false;
  return (await write(sk, { minute, rate: RATE, reset: true }, limitMicros)).ok;
}

async function read(sk: string): Promise<Item> {
  const got = await tables.doc.send(
    new GetCommand({ TableName: tableName(tables.prefix, 'ledger'), Key: { pk: 'KEY#ws#k', sk }, ConsistentRead: true }),
  );
  return got.Item ?? {};
}

const admittedOf = (results: readonly boolean[]): number => results.filter(Boolean).length;

describe('the request count on the key window item', () => {
  it('admits exactly the rate under a 200-way race, then exactly the rate again in the next minute', async () => {
    const sk = 'KEYWIN#k#race';
    expect(admittedOf(await Promise.all(Array.from({ length: 200 }, () => admit(sk, MINUTE))))).toBe(RATE);
    expect(admittedOf(await Promise.all(Array.from({ length: 200 }, () => admit(sk, MINUTE + 1))))).toBe(RATE);
    const item = await read(sk);
    expect(minuteRequests(item, MINUTE)).toBe(RATE);
    expect(minuteRequests(item, MINUTE + 1)).toBe(RATE);
    // The window's money counted every admitted request and nothing for a refused one.
    expect(item.usedMicros).toBe(2 * RATE * MICROS);
    expect(item.heldMicros).toBe(2 * RATE * MICROS);
  });

  it('keeps at most the slots of the minute before and after, and overwrites a slot left from five minutes before', async () => {
    const sk = 'KEYWIN#k#rollover';
    for (let m = MINUTE; m < MINUTE + 4; m += 1) expect(await admit(sk, m)).toBe(true);
    let item = await read(sk);
    // Writing minute +3 removed minutes +1 and +0 (its two and three before); +2 and +3 stay.
    expect(Object.keys(item).filter((a) => /^q\d+$/.test(a)).sort()).toEqual([countSlotName(MINUTE + 2), countSlotName(MINUTE + 3)].sort());
    // A quiet key whose last write fell on the minute before: minute +3's slot comes round again
    // at minute +63 holding minute +3's count (the write at +62 keeps it, as its minute after).
    const round = MINUTE + 3 + COUNT_SLOTS;
    expect(await admit(sk, round - 1)).toBe(true);
    const first = await write(sk, { minute: round, rate: RATE }, Number.MAX_SAFE_INTEGER);
    expect(first.ok).toBe(false);
    expect(staleCount(first.old, round)).toBeDefined();
    expect(await admit(sk, round)).toBe(true);
    item = await read(sk);
    expect(minuteRequests(item, round)).toBe(1);
    expect(minuteRequests(item, MINUTE + 3)).toBe(0);
    // A second writer that saw the same stale value (someone started the minute over first) is refused, never counted twice.
    expect((await write(sk, { minute: round, rate: RATE, reset: true }, Number.MAX_SAFE_INTEGER)).ok).toBe(false);
    expect(minuteRequests(await read(sk), round)).toBe(1);
    // Only the minutes either side of the last write are left.
    expect(Object.keys(await read(sk)).filter((a) => /^q\d+$/.test(a)).sort()).toEqual([countSlotName(round - 1), countSlotName(round)].sort());
  });

  it('refuses on the credit limit in the same write, counting nothing', async () => {
    const sk = 'KEYWIN#k#limit';
    const limit = 5 * MICROS;
    const results = await Promise.all(Array.from({ length: 50 }, () => admit(sk, MINUTE, limit)));
    expect(admittedOf(results)).toBe(5);
    const item = await read(sk);
    expect(minuteRequests(item, MINUTE)).toBe(5);
    expect(item.usedMicros).toBe(limit);
  });

  it('stays under 1 KB with every count slot at its largest', async () => {
    const sk = 'KEYWIN#k#size';
    const big = Number.MAX_SAFE_INTEGER - 1;
    await tables.doc.send(
      new UpdateCommand({
        TableName: tableName(tables.prefix, 'ledger'),
        Key: { pk: 'KEY#ws#k', sk },
        UpdateExpression: 'SET settledMicros = :b, heldMicros = :b, usedMicros = :b, givenMicros = :b, armed = :b, #t = :b, closedForKey = :b, closedForMember = :b, q0 = :b, q1 = :b, q2 = :b, q3 = :b, q4 = :b, g0 = :b, g1 = :b, g2 = :b, g3 = :b, g4 = :b',
        ExpressionAttributeNames: { '#t': 'ttl' },
        ExpressionAttributeValues: { ':b': big },
      }),
    );
    const item = await read(sk);
    const bytes = itemSize(marshall(item) as Parameters<typeof itemSize>[0]);
    expect(bytes).toBeLessThan(1024);
  });

  it("stays under 1 KB with every slot at its largest and the three minute bounds a region that received room keeps (docs/regions.md)", async () => {
    const sk = 'KEYWIN#k#size-bounds';
    const big = Number.MAX_SAFE_INTEGER - 1;
    const slots = ['q57', 'q58', 'q59', 'g57', 'g58', 'g59', 'b57', 'b58', 'b59'];
    await tables.doc.send(
      new UpdateCommand({
        TableName: tableName(tables.prefix, 'ledger'),
        Key: { pk: 'KEY#ws#k', sk },
        UpdateExpression: `SET settledMicros = :b, heldMicros = :b, usedMicros = :b, givenMicros = :b, armed = :b, #t = :b, closedForKey = :b, closedForMember = :b, ${slots.map((n) => `${n} = :b`).join(', ')}`,
        ExpressionAttributeNames: { '#t': 'ttl' },
        ExpressionAttributeValues: { ':b': big },
      }),
    );
    const item = await read(sk);
    expect(Object.keys(item)).toEqual(expect.arrayContaining(slots));
    const bytes = itemSize(marshall(item) as Parameters<typeof itemSize>[0]);
    expect(bytes).toBeLessThan(1024);
  });
});
