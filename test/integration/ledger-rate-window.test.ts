/**
 * The key's per-minute request rate counted on key slice 0's window item (issue 21: one write
 * fewer per admission with a key limit), on DynamoDB Local with real concurrency, through the
 * ledger as the gateway drives it (`keyRateWindow` decides where a minute counts):
 *
 * - a 200-way race under a key limit admits exactly the rate, on one slice (no counter item is
 *   written at all) and over 8 key slices (key slice 0's share on the window, the others' on their
 *   counters, lending between them), the door's count and BYOK admissions counted in the same place;
 * - a new minute starts over, and a slot left from five minutes before is started over in the
 *   write's second form;
 * - a member's limit armed while the key's requests count on its window closes that window to an
 *   admission that does not count the member's month (the arming's door), and only for its minutes;
 * - a key limit removed mid-minute: every gateway, with the old record or the new, counts the rest
 *   of the minute on the old window, so the minute's rate stays exact.
 */
import { GetCommand, ScanCommand } from '@aws-sdk/lib-dynamodb';
import { wireClient } from '../../lambdas/adapters/dynamo-client';
import type { DynamoWire } from '../../lambdas/adapters/dynamo-wire';
import { KEY_SLICES, keySliceOf } from '../../lambdas/core/key-slices';
import { windowPlan } from '../../lambdas/core/limit-arming';
import { MICROS_PER_MINOR } from '../../lambdas/core/pricing';
import { keyRateWindow, windowKeys } from '../../lambdas/core/windows';
import type { AdmissionLimits, AdmitRequest } from '../../lambdas/gateway/ports';
import type { KeyRecord, MemberRecord } from '../../lambdas/shared/records';
import { tableName } from '../../lambdas/shared/schema';
import { DynamoLedger, LedgerContentionError } from '../../lambdas/store';
import type { AdminContext } from '../../lambdas/store/directory-context';
import { COUNT_SLOTS, countSlotName, minuteGiven, minuteRequests } from '../../lambdas/store/items';
import { keySlicePk } from '../../lambdas/store/keys';
import { addCredit, addMember, createKey, createWorkspace, setKeyCreditLimit, setMemberMonthlyLimit } from '../../local/ops';
import { testTables, type TestTables, RACE_LIMITS } from '../support/dynamo';
import { testDate } from '../support/clock';
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

jest.setTimeout(240_000);

const MINOR = MICROS_PER_MINOR;
const request = requestsTagged('w');
const { ledgerTables, workspace, expectSettledInvariant } = ledgerWorkspaces(() => tables);
const minuteOf = (ms: number): number => Math.floor(ms / 60_000);

async function read(pk: string, sk: string): Promise<Record<string, unknown> | undefined> {
  return (await tables.doc.send(new GetCommand({ TableName: t('ledger'), Key: { pk, sk }, ConsistentRead: true }))).Item;
}

/** The minute's requests over every key slice: key slice 0's on the window (less what it lent), the others' on their counters. */
async function minuteTotal(ws: string, keyId: string, windowSk: string, at: number): Promise<{ total: number; counterOnZero: boolean }> {
  const minute = minuteOf(at);
  const zero = await read(keySlicePk(ws, keyId, 0), windowSk);
  let total = minuteRequests(zero, minute) - minuteGiven(zero, minute);
  for (let k = 1; k < KEY_SLICES; k += 1) total += Number((await read(keySlicePk(ws, keyId, k), windowKeys.rate(keyId, at)))?.requests ?? 0);
  const counterOnZero = (await read(keySlicePk(ws, keyId, 0), windowKeys.rate(keyId, at))) !== undefined;
  return { total, counterOnZero };
}

/** Limits with a key credit limit whose window counts the minute of `at`. */
function keyLimited(at: number, rate: number): AdmissionLimits {
  return { ...OPEN, keyLimitMicros: 1_000 * MINOR, keyRatePerMinute: rate, keyRateWindow: windowKeys.key('key_a', 'monthly', at) };
}

describe('the rate on the key window item', () => {
  it('one slice: 200 concurrent requests at a rate of 37 admit exactly 37, with no counter item; the next minute 37 again', async () => {
    const ws = await workspace(1000, 1);
    const ledger = new DynamoLedger(wire, ledgerTables());
    const sk = windowKeys.key('key_a', 'monthly', NOW);
    const { admitted, refused } = await admitAll(ledger, Array.from({ length: 200 }, () => request(ws, MINOR, { limits: keyLimited(NOW, 37) })));
    expect(admitted).toHaveLength(37);
    expect(new Set(refused)).toEqual(new Set(['rate_limit_exceeded']));
    const counted = await minuteTotal(ws, 'key_a', sk, NOW);
    expect(counted).toEqual({ total: 37, counterOnZero: false });
    // The door counts there too: the minute is full.
    expect((await ledger.countRequest(ws, 'key_a', 37, NOW + 1000, sk)).retryAfterSeconds).toBeGreaterThan(0);
    // The window's money counted every admitted request once.
    expect((await read(keySlicePk(ws, 'key_a', 0), sk))?.usedMicros).toBe(37 * MINOR);
    const next = NOW + 60_000;
    const more = await admitAll(ledger, Array.from({ length: 100 }, () => request(ws, MINOR, { limits: keyLimited(next, 37), now: next })));
    expect(more.admitted).toHaveLength(37);
    expect(await minuteTotal(ws, 'key_a', sk, next)).toEqual({ total: 37, counterOnZero: false });
    await Promise.all([...admitted, ...more.admitted].map((h) => ledger.settle(h, settlement(0, next + 1000))));
    await expectSettledInvariant(ws, 1000 * MINOR);
  });

  it('a slot left from sixty minutes before starts over: exactly the rate again, under a race', async () => {
    const ws = await workspace(1000, 1);
    const ledger = new DynamoLedger(wire, ledgerTables());
    const sk = windowKeys.key('key_a', 'monthly', NOW);
    const first = await admitAll(ledger, Array.from({ length: 5 }, () => request(ws, MINOR, { limits: keyLimited(NOW, 11) })));
    expect(first.admitted).toHaveLength(5);
    // The key's next requests come the minute before sixty on (that write keeps its minute after), then sixty on: the same slot holds minute 0's figure.
    const later = NOW + COUNT_SLOTS * 60_000;
    const before = await admitAll(ledger, [request(ws, MINOR, { limits: keyLimited(later - 60_000, 11), now: later - 60_000 })]);
    expect(before.admitted).toHaveLength(1);
    first.admitted.push(...before.admitted);
    const slot = countSlotName(minuteOf(later));
    expect(Math.floor(Number((await read(keySlicePk(ws, 'key_a', 0), sk))?.[slot]) / 1e7)).toBe(minuteOf(NOW));
    const race = await admitAll(ledger, Array.from({ length: 60 }, () => request(ws, MINOR, { limits: keyLimited(later, 11), now: later })));
    expect(race.admitted).toHaveLength(11);
    expect(new Set(race.refused)).toEqual(new Set(['rate_limit_exceeded']));
    expect(await minuteTotal(ws, 'key_a', sk, later)).toEqual({ total: 11, counterOnZero: false });
    await Promise.all([...first.admitted, ...race.admitted].map((h) => ledger.settle(h, settlement(0, later + 1000))));
    await expectSettledInvariant(ws, 1000 * MINOR);
  });

  it('a slot left from sixty minutes before on a key window whose limit is spent: refused for the limit, not a store fault', async () => {
    const ws = await workspace(1000, 1);
    const ledger = new DynamoLedger(wire, ledgerTables());
    const later = NOW + COUNT_SLOTS * 60_000;
    const limits = (at: number): AdmissionLimits => ({ ...keyLimited(at, 11), keyLimitMicros: 2 * MINOR });
    const a = await ledger.admit(request(ws, MINOR, { limits: limits(NOW) }));
    const b = await ledger.admit(request(ws, MINOR, { limits: limits(later - 60_000), now: later - 60_000 }));
    expect(a.admitted && b.admitted).toBe(true);
    // The slot of `later` holds minute 0's count and the window is full: the second form alone would not do.
    const out = await ledger.admit(request(ws, MINOR, { limits: limits(later), now: later }));
    expect(out.admitted).toBe(false);
    if (!out.admitted) expect(out.refusal.kind).toBe('key_limit_exceeded');
    await Promise.all([a, b].flatMap((o) => (o.admitted ? [ledger.settle(o.hold, settlement(0, later + 1000))] : [])));
    await expectSettledInvariant(ws, 1000 * MINOR);
  });

  it('8 key slices: 200 concurrent admissions, door counts and BYOK requests at a rate of 37 count exactly 37 over every key slice', async () => {
    const ws = await workspace(1000, 8);
    const ledger = new DynamoLedger(wire, ledgerTables());
    const sk = windowKeys.key('key_a', 'monthly', NOW);
    await warm(ledger, request, ws, keyLimited(NOW - 60_000, 37));
    // A few of the minute's own requests first, until two key slices hold part of its count (as the counter's suite does).
    const early = new Set<number>();
    let earlyCount = 0;
    for (let i = 0; i < 30 && early.size < 2; i += 1) {
      const out = await ledger.admit(request(ws, MINOR, { limits: keyLimited(NOW, 37) }));
      if (!out.admitted) throw new Error(`an early request was refused: ${out.refusal.kind}`);
      earlyCount += 1;
      early.add(keySliceOf(out.hold.slice ?? 0));
      await ledger.settle(out.hold, settlement(0));
    }
    expect(early.size).toBe(2);
    const asks = Array.from({ length: 200 }, (_, i) => request(ws, MINOR, { limits: keyLimited(NOW, 37), byok: i % 10 === 0 }));
    const [race, door] = await Promise.all([admitAll(ledger, asks), Promise.all(Array.from({ length: 40 }, () => ledger.countRequest(ws, 'key_a', 37, NOW + 500, sk)))]);
    const doorCounted = door.filter((d) => d.retryAfterSeconds === undefined).length;
    expect(race.admitted.length + doorCounted).toBe(37 - earlyCount);
    expect(new Set(race.refused)).toEqual(new Set(['rate_limit_exceeded']));
    const counted = await minuteTotal(ws, 'key_a', sk, NOW);
    expect(counted.total).toBe(37);
    expect(counted.counterOnZero).toBe(false);
    await Promise.all(race.admitted.map((h) => ledger.settle(h, settlement(0))));
    await expectSettledInvariant(ws, 1000 * MINOR);
  });
});

/** The clock of the management calls and the requests below: a moving clock that starts 3 s before a minute's turn. */
let offset = 0;
const clock = (): number => Date.now() + offset;
const CACHE_TTL_MS = 300;

/** A gateway's view of the caller's records, cached CACHE_TTL_MS, and its limits as `lambdas/gateway/admit.ts` builds them. */
class CachedRecords {
  private key: { at: number; record: KeyRecord } | undefined;
  private member: { at: number; record: MemberRecord } | undefined;
  constructor(
    private readonly keyHash: string,
    private readonly workspaceId: string,
    private readonly memberId?: string,
  ) {}

  async limits(now: number, rate: number): Promise<AdmissionLimits> {
    if (this.key === undefined || Date.now() - this.key.at >= CACHE_TTL_MS) {
      const at = Date.now();
      this.key = { at, record: (await tables.doc.send(new GetCommand({ TableName: t('keys'), Key: { keyHash: this.keyHash }, ConsistentRead: true }))).Item as KeyRecord };
    }
    if (this.memberId !== undefined && (this.member === undefined || Date.now() - this.member.at >= CACHE_TTL_MS)) {
      const at = Date.now();
      const got = await tables.doc.send(new GetCommand({ TableName: t('workspaces'), Key: { pk: this.workspaceId, sk: `MEMBER#${this.memberId}` }, ConsistentRead: true }));
      this.member = { at, record: got.Item as MemberRecord };
    }
    const k = this.key.record;
    const m = this.member?.record;
    const keyPlan = windowPlan({ limitMicros: k.creditLimitMicros, trackFrom: k.creditTrackFrom, armedFrom: k.creditArmedFrom }, k.creditWindow ?? 'monthly', now);
    const memberPlan = windowPlan({ limitMicros: m?.monthlyLimitMicros, trackFrom: m?.monthlyTrackFrom, armedFrom: m?.monthlyArmedFrom }, 'monthly', now);
    const home = keyRateWindow(k.keyId, k, now);
    return {
      ...OPEN,
      keyRatePerMinute: rate,
      keyWindow: k.creditWindow ?? 'monthly',
      ...(keyPlan.track ? { keyLimitMicros: keyPlan.limitMicros, keyLimitArming: keyPlan.arming, ...(keyPlan.generation === undefined ? {} : { keyWindowGeneration: keyPlan.generation }) } : {}),
      ...(memberPlan.track ? { memberLimitMicros: memberPlan.limitMicros, memberLimitArming: memberPlan.arming, ...(memberPlan.generation === undefined ? {} : { memberMonthGeneration: memberPlan.generation }) } : {}),
      ...(home === undefined ? {} : { keyRateWindow: home }),
    };
  }

  fresh(): void {
    this.key = undefined;
    this.member = undefined;
  }
}

interface Caller {
  readonly workspaceId: string;
  readonly keyId: string;
  readonly memberId?: string;
  readonly records: CachedRecords;
}

let admin: AdminContext;

async function caller(member: boolean): Promise<Caller> {
  const ws = await createWorkspace(admin, { name: 'rate-window' });
  await addCredit(admin, { workspaceId: ws.workspaceId, minor: 100_000 });
  const memberId = member ? (await addMember(admin, { workspaceId: ws.workspaceId })).memberId : undefined;
  const key = await createKey(admin, { workspaceId: ws.workspaceId, ...(memberId === undefined ? {} : { memberId }) });
  const record = (await tables.doc.send(new ScanCommand({ TableName: t('keys'), ConsistentRead: true }))).Items?.find((i) => i.keyId === key.keyId) as KeyRecord;
  return { workspaceId: ws.workspaceId, keyId: key.keyId, ...(memberId === undefined ? {} : { memberId }), records: new CachedRecords(record.keyHash, ws.workspaceId, memberId) };
}

let seq = 0;
async function ask(c: Caller, rate: number, at: number = clock()): Promise<AdmitRequest> {
  seq += 1;
  return {
    holdId: `req_rw${seq}_${Math.random().toString(36).slice(2)}`,
    workspaceId: c.workspaceId,
    keyId: c.keyId,
    ...(c.memberId === undefined ? {} : { memberId: c.memberId }),
    family: 'chat_completions',
    requestedModel: 'local/sim-small',
    amountMicros: MINOR,
    inputMicros: 1,
    byok: false,
    limits: await c.records.limits(at, rate),
    now: at,
    expiresAt: at + 600_000,
  };
}

const sleepUntil = async (at: number): Promise<void> => {
  const wait = at - clock();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
};

describe('limit changes and the minute the rate counts in', () => {
  let turns = 0;
  beforeEach(() => {
    // Each test starts 3 s before a minute of the tests' calendar turns (a different minute each time).
    turns += 1;
    offset = testDate(10, 23, 12, turns * 10) - 3_000 - Date.now();
    admin = { doc: tables.doc, tablePrefix: tables.prefix, stage: 'local', now: clock, cacheTtlMs: CACHE_TTL_MS };
  });

  it("a member's limit armed while the key's requests count on its window: an admission that does not count the member's month is refused there, then only that door", async () => {
    const c = await caller(true);
    const ledger = new DynamoLedger(wire, ledgerTables());
    await setKeyCreditLimit(admin, { workspaceId: c.workspaceId, keyId: c.keyId, limitMinor: 500, window: 'monthly' });
    // The next minute starts after the key limit's trackFrom: its requests count on the key window.
    const turn = (minuteOf(clock()) + 1) * 60_000;
    await sleepUntil(turn + 50);
    c.records.fresh();
    const early = await ask(c, 100);
    expect(early.limits.keyRateWindow).toBeDefined();
    expect(early.limits.memberLimitMicros).toBeUndefined();
    await setMemberMonthlyLimit(admin, { workspaceId: c.workspaceId, memberId: c.memberId ?? '', limitMinor: 300 });
    // It reaches the store only now: the key window its minute counts on is closed to it.
    await expect(ledger.admit(early)).rejects.toBeInstanceOf(LedgerContentionError);
    const rows = ((await tables.doc.send(new ScanCommand({ TableName: t('usage'), ConsistentRead: true }))).Items ?? []).filter((h) => h.requestId === early.holdId);
    expect(rows).toHaveLength(0);
    // Its retry counts the member's month and the key window: admitted, its request counted once on the window.
    c.records.fresh();
    const retry = await ask(c, 100);
    expect(retry.limits.memberLimitMicros).toBeDefined();
    const out = await ledger.admit(retry);
    expect(out.admitted).toBe(true);
    const item = await read(keySlicePk(c.workspaceId, c.keyId, 0), retry.limits.keyRateWindow ?? '');
    expect(minuteRequests(item, minuteOf(retry.now))).toBe(1);
    if (out.admitted) await ledger.settle(out.hold, settlement(0, clock()));
    // The mark closes only the arming's minutes: one that does not count the member's month three minutes on is not refused by it.
    const after = (minuteOf(retry.now) + 3) * 60_000 + 1_000;
    const late = await ask(c, 100, after);
    const uncounted = await ledger.admit({ ...late, limits: { ...late.limits, memberLimitMicros: undefined } as AdmissionLimits });
    expect(uncounted.admitted).toBe(true);
    if (uncounted.admitted) await ledger.settle(uncounted.hold, settlement(0, after + 1000));
  });

  it('a key limit removed mid-minute: the rest of the minute counts on the old window, old record or new, so the rate stays exact', async () => {
    const c = await caller(false);
    const ledger = new DynamoLedger(wire, ledgerTables());
    await setKeyCreditLimit(admin, { workspaceId: c.workspaceId, keyId: c.keyId, limitMinor: 500, window: 'monthly' });
    const turn = (minuteOf(clock()) + 1) * 60_000;
    await sleepUntil(turn + 50);
    c.records.fresh();
    // Six of the minute's ten counted on the window, and one more request a gateway with the old record still holds.
    const before = await admitAll(ledger, await Promise.all(Array.from({ length: 6 }, () => ask(c, 10))));
    expect(before.admitted).toHaveLength(6);
    const stale = await ask(c, 10);
    expect(stale.limits.keyRateWindow).toBeDefined();
    await setKeyCreditLimit(admin, { workspaceId: c.workspaceId, keyId: c.keyId, limitMinor: null });
    c.records.fresh();
    const fresh = await Promise.all(Array.from({ length: 20 }, () => ask(c, 10)));
    // The new record has no limit, and still counts this minute where the old one did.
    expect(fresh[0]?.limits.keyLimitMicros).toBeUndefined();
    expect(fresh[0]?.limits.keyRateWindow).toBe(stale.limits.keyRateWindow);
    const [old, now] = await Promise.all([ledger.admit(stale), admitAll(ledger, fresh)]);
    const admitted = now.admitted.length + (old.admitted ? 1 : 0);
    expect(admitted).toBe(4);
    const item = await read(keySlicePk(c.workspaceId, c.keyId, 0), stale.limits.keyRateWindow ?? '');
    expect(minuteRequests(item, minuteOf(stale.now))).toBe(10);
    // Nothing counted on the minute's counter (the key limit's arming may have left its mark's item there, with no count).
    expect((await read(keySlicePk(c.workspaceId, c.keyId, 0), windowKeys.rate(c.keyId, stale.now)))?.requests).toBeUndefined();
    await Promise.all([...before.admitted, ...now.admitted, ...(old.admitted ? [old.hold] : [])].map((h) => ledger.settle(h, settlement(0, clock()))));
  });
});
