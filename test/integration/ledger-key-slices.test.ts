/**
 * One hot key over several key slices, on DynamoDB Local with real concurrency: its per-minute
 * request count and its credit limit admit exactly what a single-item design would (never more,
 * never fewer), a refusal comes only when every key slice together is full, the door's count
 * (GET requests, refusals before admission) finds headroom lent to other key slices, and a key
 * limit changed while headroom sits on other key slices is exact under the new figure.
 */
import { wireClient } from '../../lambdas/adapters/dynamo-client';
import type { DynamoWire } from '../../lambdas/adapters/dynamo-wire';
import { MICROS_PER_MINOR } from '../../lambdas/core/pricing';
import { tableName } from '../../lambdas/shared/schema';
import type { AdmissionLimits } from '../../lambdas/gateway/ports';
import { DynamoLedger, readBalance } from '../../lambdas/store';
import { KEY_SLICES, keySliceOf } from '../../lambdas/core/key-slices';
import { windowKeys } from '../../lambdas/core/windows';
import { keySlicePk, shardOf } from '../../lambdas/store/keys';
import { DeleteCommand, GetCommand, ScanCommand } from '@aws-sdk/lib-dynamodb';
import { testTables, type TestTables, RACE_LIMITS } from '../support/dynamo';
import { NOW, OPEN, admitAll, requestsTagged, settlement } from '../support/ledger-fixtures';
import { ledgerWorkspaces, warm } from '../support/ledger-workspaces';

let tables: TestTables;
let wire: DynamoWire;
const t = (name: Parameters<typeof tableName>[1]): string => tableName(tables.prefix, name);

beforeAll(async () => {
  tables = await testTables();
  wire = wireClient({ dynamoEndpoint: tables.endpoint }, tables.doc, process.env, RACE_LIMITS);
});

afterAll(() => {
  wire.destroy();
  tables.client.destroy();
});

jest.setTimeout(180_000);

const request = requestsTagged('k');

const { ledgerTables, workspace, expectSettledInvariant } = ledgerWorkspaces(() => tables);

/** The key's real totals over its key slices, read item by item after the load (nothing is moving). */
async function keyTotalsOf(ws: string, keyId: string, sk: string, used: string, given: string): Promise<{ used: number; slicesWritten: number }> {
  let total = 0;
  let written = 0;
  for (let k = 0; k < KEY_SLICES; k += 1) {
    const got = await tables.doc.send(new GetCommand({ TableName: t('ledger'), Key: { pk: keySlicePk(ws, keyId, k), sk }, ConsistentRead: true }));
    if (got.Item === undefined) continue;
    written += 1;
    total += Number(got.Item[used] ?? 0) - (k === 0 ? Number(got.Item[given] ?? 0) : 0);
  }
  return { used: total, slicesWritten: written };
}

/**
 * Does what DynamoDB's TTL may do at any moment: deletes every item of the ledger table whose
 * `ttl` is before the real clock (DynamoDB Local itself sweeps about every 10 s, so a race is
 * exposed to it by chance; this puts the sweep between two steps deterministically). Returns how
 * many items it deleted.
 */
async function collectExpired(): Promise<number> {
  const nowS = Math.floor(Date.now() / 1000);
  let deleted = 0;
  let start: Record<string, unknown> | undefined;
  do {
    const page = await tables.doc.send(
      new ScanCommand({ TableName: t('ledger'), FilterExpression: '#ttl < :now', ExpressionAttributeNames: { '#ttl': 'ttl' }, ExpressionAttributeValues: { ':now': nowS }, ExclusiveStartKey: start }),
    );
    for (const item of page.Items ?? []) {
      await tables.doc.send(new DeleteCommand({ TableName: t('ledger'), Key: { pk: item.pk, sk: item.sk } }));
      deleted += 1;
    }
    start = page.LastEvaluatedKey;
  } while (start !== undefined);
  return deleted;
}

describe('one key over several key slices', () => {
  it('200 concurrent requests against a key credit limit of 23, over 8 slices: exactly 23, the key window exact over its key slices', async () => {
    const ws = await workspace(1000, 8);
    const ledger = new DynamoLedger(wire, ledgerTables());
    const limits: AdmissionLimits = { ...OPEN, keyLimitMicros: 23 * MICROS_PER_MINOR };
    await warm(ledger, request, ws, limits);
    const { admitted, refused } = await admitAll(ledger, Array.from({ length: 200 }, () => request(ws, MICROS_PER_MINOR, { limits })));
    expect(admitted).toHaveLength(23);
    expect(new Set(refused)).toEqual(new Set(['key_limit_exceeded']));
    // The key's holds really are spread over its key slices.
    expect(new Set(admitted.map((h) => keySliceOf(h.slice ?? 0))).size).toBeGreaterThan(1);
    const sk = windowKeys.key('key_a', 'monthly', NOW);
    expect((await keyTotalsOf(ws, 'key_a', sk, 'usedMicros', 'givenMicros')).used).toBe(23 * MICROS_PER_MINOR);
    await Promise.all(admitted.map((h) => ledger.settle(h, settlement(MICROS_PER_MINOR / 2))));
    // Half of each hold came back: exactly room for 11 more at 1 minor (23 − 11.5 = 11.5 left).
    const more = await admitAll(ledger, Array.from({ length: 60 }, () => request(ws, MICROS_PER_MINOR, { limits })));
    expect(more.admitted).toHaveLength(11);
    expect(new Set(more.refused)).toEqual(new Set(['key_limit_exceeded']));
    await Promise.all(more.admitted.map((h) => ledger.settle(h, settlement(0))));
    expect((await keyTotalsOf(ws, 'key_a', sk, 'usedMicros', 'givenMicros')).used).toBe(23 * (MICROS_PER_MINOR / 2));
    await expectSettledInvariant(ws, 1000 * MICROS_PER_MINOR);
  });

  it('200 concurrent requests against a per-minute rate of 37, over 8 slices: exactly 37, then the door refuses too', async () => {
    const ws = await workspace(1000, 8);
    const ledger = new DynamoLedger(wire, ledgerTables());
    const limits: AdmissionLimits = { ...OPEN, keyRatePerMinute: 37 };
    await warm(ledger, request, ws, limits);
    // A few of the minute's own requests first, one at a time, until two key slices hold part of
    // its count: on a quiet machine key slice 0 can otherwise serve all 37 before any lending
    // lands, and the race would not be spread over the key slices it is meant to test.
    const early = new Set<number>();
    let earlyCount = 0;
    for (let i = 0; i < 30 && early.size < 2; i += 1) {
      const out = await ledger.admit(request(ws, MICROS_PER_MINOR, { limits }));
      if (!out.admitted) throw new Error(`an early request was refused: ${out.refusal.kind}`);
      earlyCount += 1;
      early.add(keySliceOf(out.hold.slice ?? 0));
      await ledger.settle(out.hold, settlement(0));
    }
    expect(early.size).toBe(2);
    const { admitted, refused } = await admitAll(ledger, Array.from({ length: 200 }, () => request(ws, MICROS_PER_MINOR, { limits })));
    const sk = windowKeys.rate('key_a', NOW);
    expect(admitted).toHaveLength(37 - earlyCount);
    expect(new Set(refused)).toEqual(new Set(['rate_limit_exceeded']));
    const counted = await keyTotalsOf(ws, 'key_a', sk, 'requests', 'given');
    expect(counted.used).toBe(37);
    expect(counted.slicesWritten).toBeGreaterThan(1);
    expect((await ledger.countRequest(ws, 'key_a', 37, NOW)).retryAfterSeconds).toBeGreaterThan(0);
    await Promise.all(admitted.map((h) => ledger.settle(h, settlement(0))));
    // The next minute starts empty on every key slice.
    const next = await admitAll(ledger, Array.from({ length: 50 }, () => request(ws, MICROS_PER_MINOR, { limits, now: NOW + 60_000 })));
    expect(next.admitted).toHaveLength(37);
    await Promise.all(next.admitted.map((h) => ledger.settle(h, settlement(0, NOW + 61_000))));
    await expectSettledInvariant(ws, 1000 * MICROS_PER_MINOR);
  });

  it('a TTL sweep between two waves of one minute does not reset its count: 37, then none', async () => {
    const ws = await workspace(1000, 8);
    const ledger = new DynamoLedger(wire, ledgerTables());
    const limits: AdmissionLimits = { ...OPEN, keyRatePerMinute: 37 };
    await warm(ledger, request, ws, limits);
    const first = await admitAll(ledger, Array.from({ length: 100 }, () => request(ws, MICROS_PER_MINOR, { limits })));
    expect(first.admitted).toHaveLength(37);
    // The store's TTL collects expired items whenever it runs: here, between the two waves. The
    // minute's counters must not be among them (with a test clock behind the real one, they were).
    await collectExpired();
    const second = await admitAll(ledger, Array.from({ length: 100 }, () => request(ws, MICROS_PER_MINOR, { limits })));
    expect(second.admitted).toHaveLength(0);
    expect(new Set(second.refused)).toEqual(new Set(['rate_limit_exceeded']));
    expect((await keyTotalsOf(ws, 'key_a', windowKeys.rate('key_a', NOW), 'requests', 'given')).used).toBe(37);
    await Promise.all([...first.admitted, ...second.admitted].map((h) => ledger.settle(h, settlement(0))));
    await expectSettledInvariant(ws, 1000 * MICROS_PER_MINOR);
  });

  it('the door counts into headroom lent to other key slices, and refuses only when every key slice is full', async () => {
    const ws = await workspace(1000, 8);
    const ledger = new DynamoLedger(wire, ledgerTables());
    const limits: AdmissionLimits = { ...OPEN, keyRatePerMinute: 40 };
    const minute = NOW + 5 * 60_000;
    const a = await admitAll(ledger, Array.from({ length: 10 }, () => request(ws, MICROS_PER_MINOR, { limits, now: minute })));
    expect(a.admitted).toHaveLength(10);
    const door = await Promise.all(Array.from({ length: 60 }, () => ledger.countRequest(ws, 'key_a', 40, minute + 1000)));
    expect(door.filter((d) => d.retryAfterSeconds === undefined)).toHaveLength(30);
    expect((await keyTotalsOf(ws, 'key_a', windowKeys.rate('key_a', minute), 'requests', 'given')).used).toBe(40);
    await Promise.all(a.admitted.map((h) => ledger.settle(h, settlement(0, minute + 2000))));
  });

  it('a running hold on key slice j grows by borrowing key-window and month headroom from the other slices, and only the whole refuses', async () => {
    const ws = await workspace(1000, 8);
    const ledger = new DynamoLedger(wire, ledgerTables());
    const limits: AdmissionLimits = { ...OPEN, keyLimitMicros: 40 * MICROS_PER_MINOR, workspaceLimitMicros: 30 * MICROS_PER_MINOR };
    // A hold placed on a slice other than 0 (so on key slice j > 0), with what the first lending left there.
    let holdId = '';
    do holdId = `req_ext_${Math.random().toString(36).slice(2)}`;
    while (keySliceOf(shardOf(holdId, 8)) === 0);
    const out = await ledger.admit(request(ws, MICROS_PER_MINOR, { limits, holdId }));
    if (!out.admitted) throw new Error('not admitted');
    const slice = out.hold.slice ?? 0;
    expect(keySliceOf(slice)).not.toBe(0);
    // 10 more is beyond what either share on its slice was lent (a fair eighth of the rest), within the whole.
    expect(await ledger.extend(out.hold, 10 * MICROS_PER_MINOR, limits, NOW + 1000)).toBe(true);
    // The workspace month (30) is what binds now: 11 used, 20 more would be 31; 19 fits exactly.
    expect(await ledger.extend(out.hold, 20 * MICROS_PER_MINOR, limits, NOW + 2000)).toBe(false);
    expect(await ledger.extend(out.hold, 19 * MICROS_PER_MINOR, limits, NOW + 3000)).toBe(true);
    expect(await ledger.extend(out.hold, 1, limits, NOW + 4000)).toBe(false);
    const grown = { ...out.hold, amountMicros: 30 * MICROS_PER_MINOR };
    expect((await keyTotalsOf(ws, 'key_a', windowKeys.key('key_a', 'monthly', NOW), 'usedMicros', 'givenMicros')).used).toBe(30 * MICROS_PER_MINOR);
    expect((await readBalance(tables.doc, ledgerTables(), ws, NOW)).heldMicros).toBe(30 * MICROS_PER_MINOR);
    expect(await ledger.settle(grown, settlement(30 * MICROS_PER_MINOR, NOW + 5000))).toBe(true);
    const spread = await ledger.readSlices(ws, NOW);
    expect(spread.slices.reduce((a, s) => a + s.month.usedMicros, 0)).toBe(30 * MICROS_PER_MINOR);
    await expectSettledInvariant(ws, 1000 * MICROS_PER_MINOR);
  });

  it('a key limit lowered while headroom sits on other key slices is exact under the new figure', async () => {
    const ws = await workspace(1000, 6);
    const ledger = new DynamoLedger(wire, ledgerTables());
    const first: AdmissionLimits = { ...OPEN, keyLimitMicros: 40 * MICROS_PER_MINOR };
    const a = await admitAll(ledger, Array.from({ length: 20 }, () => request(ws, MICROS_PER_MINOR, { limits: first })));
    expect(a.admitted).toHaveLength(20);
    const lowered: AdmissionLimits = { ...OPEN, keyLimitMicros: 25 * MICROS_PER_MINOR };
    const b = await admitAll(ledger, Array.from({ length: 60 }, () => request(ws, MICROS_PER_MINOR, { limits: lowered })));
    expect(b.admitted).toHaveLength(5);
    expect(new Set(b.refused)).toEqual(new Set(['key_limit_exceeded']));
    const raised: AdmissionLimits = { ...OPEN, keyLimitMicros: 30 * MICROS_PER_MINOR };
    const c = await admitAll(ledger, Array.from({ length: 60 }, () => request(ws, MICROS_PER_MINOR, { limits: raised })));
    expect(c.admitted).toHaveLength(5);
    await Promise.all([...a.admitted, ...b.admitted, ...c.admitted].map((h) => ledger.settle(h, settlement(MICROS_PER_MINOR))));
    await expectSettledInvariant(ws, 1000 * MICROS_PER_MINOR);
  });
});
