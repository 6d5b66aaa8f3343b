/**
 * A key's credit limit and a member's monthly limit set on a window nobody tracked (no limit
 * before, so no window item was written), on DynamoDB Local with requests in flight while it is
 * set. Requests are admitted the way the gateway admits them: the limits from the record as a
 * gateway's cache holds it (`windowPlan`, the gateway's own rule), the ledger's `now` a clock that
 * moves. After the management call returns, the window's figures equal what the usage rows and
 * the open holds say, and 200 concurrent requests admit exactly what fits under it; removing the
 * limit and setting it again is as exact; an admission that started before tracking did and
 * counts nothing is refused once the arming has begun, never admitted uncounted.
 */
import { GetCommand, ScanCommand } from '@aws-sdk/lib-dynamodb';
import { wireClient } from '../../lambdas/adapters/dynamo-client';
import type { DynamoWire } from '../../lambdas/adapters/dynamo-wire';
import { KEY_SLICES } from '../../lambdas/core/key-slices';
import { windowPlan } from '../../lambdas/core/limit-arming';
import { MICROS_PER_MINOR } from '../../lambdas/core/pricing';
import { windowKeys, windowStart } from '../../lambdas/core/windows';
import type { AdmissionLimits, AdmitRequest } from '../../lambdas/gateway/ports';
import type { HoldRecord, KeyRecord, MemberRecord } from '../../lambdas/shared/records';
import { tableName } from '../../lambdas/shared/schema';
import { DynamoLedger, LedgerContentionError, readBalance, setLedgerSlices, usageRows } from '../../lambdas/store';
import type { AdminContext } from '../../lambdas/store/directory-context';
import { keySlicePk, memberPk } from '../../lambdas/store/keys';
import { addCredit, addMember, createKey, createWorkspace, setKeyCreditLimit, setMemberMonthlyLimit } from '../../local/ops';
import { testTables, type TestTables, RACE_LIMITS } from '../support/dynamo';
import { testDate } from '../support/clock';
import { OPEN, settlement } from '../support/ledger-fixtures';

let tables: TestTables;
let wire: DynamoWire;
let admin: AdminContext;
const t = (name: Parameters<typeof tableName>[1]): string => tableName(tables.prefix, name);
const ledgerTables = (): { ledger: string; usage: string } => ({ ledger: t('ledger'), usage: t('usage') });

/** The clock of everything here: a moving clock on a day of the tests' calendar, ahead of the real one (test/support/clock.ts). */
const OFFSET = testDate(10, 22, 12) - Date.now();
const clock = (): number => Date.now() + OFFSET;
/** The gateways' cache lifetime in this test (the management call waits for it, plus a margin). */
const CACHE_TTL_MS = 300;

beforeAll(async () => {
  tables = await testTables();
  wire = wireClient({ dynamoEndpoint: tables.endpoint }, tables.doc, process.env, RACE_LIMITS);
  admin = { doc: tables.doc, tablePrefix: tables.prefix, stage: 'local', now: clock, cacheTtlMs: CACHE_TTL_MS };
});

afterAll(() => {
  wire.destroy();
  tables.client.destroy();
});

jest.setTimeout(180_000);

const MINOR = MICROS_PER_MINOR;

/** A gateway's view of the caller's records: read at most CACHE_TTL_MS ago, as its cache keeps them. */
class CachedRecords {
  private key: { at: number; record: KeyRecord } | undefined;
  private member: { at: number; record: MemberRecord } | undefined;
  constructor(
    private readonly keyHash: string,
    private readonly workspaceId: string,
    private readonly memberId?: string,
  ) {}

  async limits(now: number): Promise<AdmissionLimits> {
    if (this.key === undefined || Date.now() - this.key.at >= CACHE_TTL_MS) {
      const at = Date.now();
      const got = await tables.doc.send(new GetCommand({ TableName: t('keys'), Key: { keyHash: this.keyHash }, ConsistentRead: true }));
      this.key = { at, record: got.Item as KeyRecord };
    }
    if (this.memberId !== undefined && (this.member === undefined || Date.now() - this.member.at >= CACHE_TTL_MS)) {
      const at = Date.now();
      const got = await tables.doc.send(new GetCommand({ TableName: t('workspaces'), Key: { pk: this.workspaceId, sk: `MEMBER#${this.memberId}` }, ConsistentRead: true }));
      this.member = { at, record: got.Item as MemberRecord };
    }
    // The gateway's own rule (lambdas/gateway/admit.ts).
    const k = this.key.record;
    const m = this.member?.record;
    const keyPlan = windowPlan({ limitMicros: k.creditLimitMicros, trackFrom: k.creditTrackFrom, armedFrom: k.creditArmedFrom }, k.creditWindow ?? 'monthly', now);
    const memberPlan = windowPlan({ limitMicros: m?.monthlyLimitMicros, trackFrom: m?.monthlyTrackFrom, armedFrom: m?.monthlyArmedFrom }, 'monthly', now);
    return {
      ...OPEN,
      keyWindow: k.creditWindow ?? 'monthly',
      ...(keyPlan.track ? { keyLimitMicros: keyPlan.limitMicros, keyLimitArming: keyPlan.arming, ...(keyPlan.generation === undefined ? {} : { keyWindowGeneration: keyPlan.generation }) } : {}),
      ...(memberPlan.track ? { memberLimitMicros: memberPlan.limitMicros, memberLimitArming: memberPlan.arming, ...(memberPlan.generation === undefined ? {} : { memberMonthGeneration: memberPlan.generation }) } : {}),
    };
  }
}

interface Caller {
  readonly workspaceId: string;
  readonly keyId: string;
  readonly memberId?: string;
  readonly records: CachedRecords;
}

async function caller(slices: number, member: boolean): Promise<Caller> {
  const ws = await createWorkspace(admin, { name: 'arming' });
  await addCredit(admin, { workspaceId: ws.workspaceId, minor: 100_000 });
  if (slices > 1) await setLedgerSlices(tables.doc, ledgerTables(), ws.workspaceId, slices);
  const memberId = member ? (await addMember(admin, { workspaceId: ws.workspaceId })).memberId : undefined;
  const key = await createKey(admin, { workspaceId: ws.workspaceId, ...(memberId === undefined ? {} : { memberId }) });
  const record = (await tables.doc.send(new ScanCommand({ TableName: t('keys'), ConsistentRead: true }))).Items?.find((i) => i.keyId === key.keyId) as KeyRecord;
  return { workspaceId: ws.workspaceId, keyId: key.keyId, ...(memberId === undefined ? {} : { memberId }), records: new CachedRecords(record.keyHash, ws.workspaceId, memberId) };
}

let seq = 0;
async function request(c: Caller, amountMicros: number): Promise<AdmitRequest> {
  const now = clock();
  seq += 1;
  return {
    holdId: `req_arm${seq}_${Math.random().toString(36).slice(2)}`,
    workspaceId: c.workspaceId,
    keyId: c.keyId,
    ...(c.memberId === undefined ? {} : { memberId: c.memberId }),
    family: 'chat_completions',
    requestedModel: 'local/sim-small',
    amountMicros,
    inputMicros: 1,
    byok: false,
    limits: await c.records.limits(now),
    now,
    expiresAt: now + 600_000,
  };
}

/** What the usage rows and the open holds say of the window containing `now`: settled, held. */
async function authoritative(c: Caller, kind: 'key' | 'member', now: number): Promise<{ settled: number; held: number }> {
  const from = windowStart('monthly', now);
  const mine = (r: { keyId?: string; memberId?: string }): boolean => (kind === 'key' ? r.keyId === c.keyId : r.memberId === c.memberId);
  const rows = await usageRows(tables.doc, t('usage'), c.workspaceId, { from: new Date(from).toISOString() });
  // A hold is its request's row while it is open.
  const holds = ((await tables.doc.send(new ScanCommand({ TableName: t('usage'), ConsistentRead: true }))).Items ?? []).filter((h) => h.state === 'open');
  return {
    settled: rows.filter((r) => mine(r) && !r.byok).reduce((a, r) => a + r.chargeMicros, 0),
    held: holds.filter((h) => h.workspaceId === c.workspaceId && mine(h) && h.byok !== true && Number(h.startedAt) >= from).reduce((a, h) => a + Number(h.amountMicros), 0),
  };
}

/** The window's figures as the ledger keeps them: summed over the key's slices (the key's real total), or the member's month. */
async function windowFigures(c: Caller, kind: 'key' | 'member', now: number): Promise<{ settled: number; held: number }> {
  const read = async (pk: string, sk: string): Promise<Record<string, unknown> | undefined> =>
    (await tables.doc.send(new GetCommand({ TableName: t('ledger'), Key: { pk, sk }, ConsistentRead: true }))).Item;
  if (kind === 'member') {
    const m = (await tables.doc.send(new GetCommand({ TableName: t('workspaces'), Key: { pk: c.workspaceId, sk: `MEMBER#${c.memberId}` }, ConsistentRead: true }))).Item as MemberRecord;
    const item = await read(memberPk(c.workspaceId, c.memberId ?? ''), windowKeys.member(c.memberId ?? '', now, m.monthlyTrackFrom));
    return { settled: Number(item?.settledMicros ?? 0), held: Number(item?.heldMicros ?? 0) };
  }
  const k = (await tables.doc.send(new ScanCommand({ TableName: t('keys'), ConsistentRead: true }))).Items?.find((i) => i.keyId === c.keyId) as KeyRecord;
  const sk = windowKeys.key(c.keyId, 'monthly', now, k.creditTrackFrom);
  let settled = 0;
  let held = 0;
  for (let j = 0; j < KEY_SLICES; j += 1) {
    const item = await read(keySlicePk(c.workspaceId, c.keyId, j), sk);
    settled += Number(item?.settledMicros ?? 0);
    held += Number(item?.heldMicros ?? 0);
  }
  return { settled, held };
}

/** Admits and settles in a loop until `stop`, like traffic that knows nothing of the limit being set. 503s (the arming's closed door) are retried, as a client would. */
async function traffic(ledger: DynamoLedger, c: Caller, stop: () => boolean): Promise<{ admitted: number; closed: number }> {
  let admitted = 0;
  let closed = 0;
  // At most 40 each, so the race below is bound by the limit, not by its 200 requests.
  while (!stop() && admitted < 40) {
    try {
      const out = await ledger.admit(await request(c, MINOR));
      if (!out.admitted) continue;
      admitted += 1;
      await ledger.settle(out.hold, settlement(MINOR / 2, clock()));
    } catch (err) {
      if (!(err instanceof LedgerContentionError)) throw err;
      closed += 1;
    }
  }
  return { admitted, closed };
}

async function setLimit(c: Caller, kind: 'key' | 'member', minor: number | null): Promise<void> {
  if (kind === 'key') await setKeyCreditLimit(admin, { workspaceId: c.workspaceId, keyId: c.keyId, limitMinor: minor, window: 'monthly' });
  else await setMemberMonthlyLimit(admin, { workspaceId: c.workspaceId, memberId: c.memberId ?? '', limitMinor: minor });
}

describe.each([
  ['a key credit limit', 'key', 1],
  ['a key credit limit, over 4 slices (the key over 4 key slices)', 'key', 4],
  ['a member monthly limit', 'member', 1],
] as const)('%s set on a window nobody tracked', (_name, kind, slices) => {
  it('equals the usage rows and holds once armed, with requests in flight while it was set; then admits exactly what fits', async () => {
    const c = await caller(slices, kind === 'member');
    const ledger = new DynamoLedger(wire, ledgerTables());
    // Before the limit: some requests settled, some still running (held). Nothing writes the window.
    const open: HoldRecord[] = [];
    for (let i = 0; i < 12; i += 1) {
      const out = await ledger.admit(await request(c, 2 * MINOR));
      if (!out.admitted) throw new Error('not admitted');
      if (i % 3 === 0) open.push(out.hold);
      else await ledger.settle(out.hold, settlement(MINOR + 1_234, clock()));
    }
    expect(await windowFigures(c, kind, clock())).toEqual({ settled: 0, held: 0 });

    // Traffic goes on while the limit is set: the call returns once the limit is armed.
    let stop = false;
    const workers = [traffic(ledger, c, () => stop), traffic(new DynamoLedger(wire, ledgerTables()), c, () => stop)];
    await new Promise((r) => setTimeout(r, 200));
    await setLimit(c, kind, 150);
    stop = true;
    const done = await Promise.all(workers);
    expect(done.reduce((a, d) => a + d.admitted, 0)).toBeGreaterThan(0);

    const now = clock();
    const truth = await authoritative(c, kind, now);
    expect(truth.held).toBe(open.length * 2 * MINOR);
    expect(await windowFigures(c, kind, now)).toEqual(truth);

    // 200 at once, 1 minor each: exactly what fits under settled + held of the whole window.
    const fits = Math.floor((150 * MINOR - truth.settled - truth.held) / MINOR);
    expect(fits).toBeGreaterThan(0);
    expect(fits).toBeLessThan(200);
    const requests = await Promise.all(Array.from({ length: 200 }, () => request(c, MINOR)));
    const outcomes = await Promise.all(requests.map((r) => ledger.admit(r)));
    const admitted = outcomes.filter((o) => o.admitted);
    expect(admitted).toHaveLength(fits);
    expect(new Set(outcomes.filter((o) => !o.admitted).map((o) => (o.admitted ? '' : o.refusal.kind)))).toEqual(new Set([kind === 'key' ? 'key_limit_exceeded' : 'member_limit_exceeded']));

    // Everything settles, the adopted holds from before the limit too: the window still equals the rows, nothing held.
    await Promise.all([...open, ...admitted.map((o) => (o.admitted ? o.hold : (undefined as never)))].map((h) => ledger.settle(h, settlement(MINOR / 4, clock()))));
    const end = clock();
    const settled = await authoritative(c, kind, end);
    expect(settled.held).toBe(0);
    expect(await windowFigures(c, kind, end)).toEqual(settled);
    const b = await readBalance(tables.doc, ledgerTables(), c.workspaceId, end);
    expect(b.heldMicros).toBe(0);
    expect(b.availableMicros + b.heldMicros + b.spentMicros).toBe(b.creditedMicros);
  });
});

describe('removing a limit and setting it again', () => {
  it('the new arming counts the whole window again, once: what was tracked before, what was not, what is still held', async () => {
    const c = await caller(1, false);
    const ledger = new DynamoLedger(wire, ledgerTables());
    const admitSome = async (n: number, keep: HoldRecord[]): Promise<void> => {
      for (let i = 0; i < n; i += 1) {
        const out = await ledger.admit(await request(c, 3 * MINOR));
        if (!out.admitted) throw new Error(`refused ${out.refusal.kind}`);
        if (i === 0) keep.push(out.hold);
        else await ledger.settle(out.hold, settlement(2 * MINOR, clock()));
      }
    };
    const open: HoldRecord[] = [];
    await admitSome(4, open); // untracked
    await setLimit(c, 'key', 100);
    await admitSome(4, open); // tracked under the first arming
    await setLimit(c, 'key', null);
    await new Promise((r) => setTimeout(r, CACHE_TTL_MS + 50)); // every cache forgets the limit
    await admitSome(4, open); // untracked again
    await setLimit(c, 'key', 100);
    const now = clock();
    const truth = await authoritative(c, 'key', now);
    expect(truth).toEqual({ settled: 9 * 2 * MINOR, held: 3 * 3 * MINOR });
    expect(await windowFigures(c, 'key', now)).toEqual(truth);
    // 100 − 18 − 9 = 73 fit.
    const outcomes = await Promise.all(Array.from({ length: 100 }, async () => ledger.admit(await request(c, MINOR))));
    expect(outcomes.filter((o) => o.admitted)).toHaveLength(73);
    await Promise.all([...open, ...outcomes.flatMap((o) => (o.admitted ? [o.hold] : []))].map((h) => ledger.settle(h, settlement(0, clock()))));
  });
});

describe('the door an arming closes', () => {
  it('an admission that started before tracking did and counts nothing is refused (a 503), never admitted uncounted', async () => {
    const c = await caller(1, false);
    const ledger = new DynamoLedger(wire, ledgerTables());
    const early = await request(c, MINOR); // no limit yet: it counts no window
    expect(early.limits.keyLimitMicros).toBeUndefined();
    await setLimit(c, 'key', 50);
    // It reaches the store only now (a slow request): the counter of its minute is closed to it.
    await expect(ledger.admit(early)).rejects.toBeInstanceOf(LedgerContentionError);
    const held = ((await tables.doc.send(new ScanCommand({ TableName: t('usage'), ConsistentRead: true }))).Items ?? []).filter((h) => h.requestId === early.holdId);
    expect(held).toHaveLength(0);
    // Its retry, which counts the window, is admitted and counted.
    const retry = await ledger.admit(await request(c, MINOR));
    expect(retry.admitted).toBe(true);
    expect((await windowFigures(c, 'key', clock())).held).toBe(MINOR);
    if (retry.admitted) await ledger.settle(retry.hold, settlement(0, clock()));
  });
});
