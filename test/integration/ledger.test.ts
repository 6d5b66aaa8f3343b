/**
 * The ledger on DynamoDB Local, over the lean client the gateway uses (the sweeper's tests run it
 * over the SDK's DocumentClient): every limit refuses with its code and holds nothing, races never
 * over-admit, settlement is exact and idempotent, and the invariant holds after every test:
 * credited = available + held + spent, with held back to 0.
 */
import { GetCommand, ScanCommand } from '@aws-sdk/lib-dynamodb';
import { wireClient } from '../../lambdas/adapters/dynamo-client';
import { DynamoLedger } from '../../lambdas/adapters/dynamo-ledger';
import type { DynamoWire } from '../../lambdas/adapters/dynamo-wire';
import { MICROS_PER_MINOR } from '../../lambdas/core/pricing';
import { tableName } from '../../lambdas/shared/schema';
import type { AdmissionLimits, AdmitRequest, Settlement } from '../../lambdas/gateway/ports';
import type { HoldRecord } from '../../lambdas/shared/records';
import { addCredit, createWorkspace, type AdminContext } from '../../local/ops';
import { testTables, type TestTables, RACE_LIMITS } from '../support/dynamo';
import { testDate } from '../support/clock';
import { windowKey } from '../../lambdas/store/keys';
import { monthId } from '../../lambdas/core/windows';


let tables: TestTables;
let ledger: DynamoLedger;
let wire: DynamoWire;
let admin: AdminContext;
const t = (name: Parameters<typeof tableName>[1]): string => tableName(tables.prefix, name);

beforeAll(async () => {
  tables = await testTables();
  wire = wireClient({ dynamoEndpoint: tables.endpoint }, tables.doc, process.env, RACE_LIMITS);
  ledger = new DynamoLedger(wire, { ledger: t('ledger'), usage: t('usage') });
  admin = { doc: tables.doc, tablePrefix: tables.prefix, stage: 'local' };
});

afterAll(() => {
  wire.destroy();
  tables.client.destroy();
});

/** Ahead of the real clock, so DynamoDB Local's TTL sweep never collects a counter a test relies on (test/support/clock.ts). */
const NOW = testDate(10, 22, 12, 0, 0);
const OPEN: AdmissionLimits = { keyWindow: 'monthly', spendRateCapMicros: 1e15, keyRatePerMinute: 1e9 };
const NOW_MONTH = monthId(NOW);
let seq = 0;

function request(workspaceId: string, amountMicros: number, over: Partial<AdmitRequest> = {}): AdmitRequest {
  seq += 1;
  return {
    holdId: `req_test${seq}_${Math.random().toString(36).slice(2)}`,
    workspaceId,
    keyId: 'key_a',
    family: 'chat_completions',
    requestedModel: 'local/sim-small',
    amountMicros,
    inputMicros: Math.floor(amountMicros / 4),
    byok: false,
    limits: OPEN,
    now: NOW,
    expiresAt: NOW + 600_000,
    ...over,
  };
}

function settlement(chargeMicros: number, now = NOW + 1000): Settlement {
  return { counts: { inputTokens: 10, cachedInputTokens: 0, outputTokens: 5, reasoningTokens: 0 }, chargeMicros, stream: false, status: 200, outcome: 'ok', attempts: 1, now };
}

async function workspace(creditMinor: number): Promise<string> {
  const ws = await createWorkspace(admin, { name: 'ledger-test' });
  if (creditMinor > 0) await addCredit(admin, { workspaceId: ws.workspaceId, minor: creditMinor });
  return ws.workspaceId;
}

async function balance(workspaceId: string): Promise<{ available: number; held: number; spent: number; credited: number }> {
  const out = await tables.doc.send(new GetCommand({ TableName: t('ledger'), Key: { pk: `WS#${workspaceId}`, sk: 'BALANCE' }, ConsistentRead: true }));
  const i = out.Item ?? {};
  return { available: Number(i.availableMicros ?? 0), held: Number(i.heldMicros ?? 0), spent: Number(i.spentMicros ?? 0), credited: Number(i.creditedMicros ?? 0) };
}

/** A window a hold occupies: the key's or member's item, or the slice's share of the workspace month (on the slice item). */
async function window(workspaceId: string, sk: string): Promise<{ settled: number; held: number; used: number } | undefined> {
  if (sk.startsWith('MONTH#')) {
    const month = (await ledger.readSlices(workspaceId, NOW)).slices[0]?.month;
    return month?.exists === true ? { settled: month.settledMicros, held: month.heldMicros, used: month.usedMicros } : undefined;
  }
  const out = await tables.doc.send(new GetCommand({ TableName: t('ledger'), Key: windowKey(workspaceId, 0, sk), ConsistentRead: true }));
  if (out.Item === undefined) return undefined;
  return { settled: Number(out.Item.settledMicros ?? 0), held: Number(out.Item.heldMicros ?? 0), used: Number(out.Item.usedMicros ?? 0) };
}

/** Open holds of a workspace: its requests' rows still open. */
async function openHolds(workspaceId: string): Promise<number> {
  const out = await tables.doc.send(new ScanCommand({ TableName: t('usage'), ConsistentRead: true }));
  return (out.Items ?? []).filter((h) => h.workspaceId === workspaceId && h.state === 'open').length;
}

/** The invariant, with every hold settled. */
async function expectSettledInvariant(workspaceId: string): Promise<void> {
  const b = await balance(workspaceId);
  expect(b.credited).toBe(b.available + b.held + b.spent);
  expect(b.held).toBe(0);
  expect(b.available).toBeGreaterThanOrEqual(0);
  expect(await openHolds(workspaceId)).toBe(0);
}

async function admitAll(requests: AdmitRequest[]): Promise<{ admitted: HoldRecord[]; refused: string[] }> {
  const outcomes = await Promise.all(requests.map((r) => ledger.admit(r)));
  const admitted: HoldRecord[] = [];
  const refused: string[] = [];
  for (const o of outcomes) {
    if (o.admitted) admitted.push(o.hold);
    else refused.push(o.refusal.kind);
  }
  return { admitted, refused };
}

/** Limits on the key and the member that bind nothing here: their windows are tracked (a window without a limit is not written). */
const TRACKED: AdmissionLimits = { ...OPEN, keyLimitMicros: 1e12, memberLimitMicros: 1e12 };

describe('admission and settlement', () => {
  it('holds, charges exactly, returns the rest to the balance and every window', async () => {
    const ws = await workspace(10); // 10 minor = 10,000,000 micros
    const out = await ledger.admit(request(ws, 4_000_000, { memberId: 'mem_1', limits: TRACKED }));
    expect(out.admitted).toBe(true);
    if (!out.admitted) return;
    expect(out.hold.windows).toHaveLength(3);
    expect(await balance(ws)).toEqual({ available: 6_000_000, held: 4_000_000, spent: 0, credited: 10_000_000 });
    for (const sk of out.hold.windows) expect(await window(ws, sk)).toEqual({ settled: 0, held: 4_000_000, used: 4_000_000 });
    await ledger.settle(out.hold, settlement(1_234_567));
    expect(await balance(ws)).toEqual({ available: 10_000_000 - 1_234_567, held: 0, spent: 1_234_567, credited: 10_000_000 });
    for (const sk of out.hold.windows) expect(await window(ws, sk)).toEqual({ settled: 1_234_567, held: 0, used: 1_234_567 });
    // Idempotent: a second settlement (a retry, the sweeper) changes nothing.
    await ledger.settle(out.hold, settlement(1_234_567));
    await ledger.settle(out.hold, settlement(9_999_999));
    expect((await balance(ws)).spent).toBe(1_234_567);
    await expectSettledInvariant(ws);
  });

  it('writes no key window and no member month when neither carries a limit; the workspace month is counted on the slice', async () => {
    const ws = await workspace(10);
    const out = await ledger.admit(request(ws, 3_000_000, { memberId: 'mem_1' }));
    if (!out.admitted) throw new Error('not admitted');
    expect(out.hold.windows).toEqual([`MONTH#${NOW_MONTH}`]);
    const items = await tables.doc.send(new ScanCommand({ TableName: t('ledger'), ConsistentRead: true }));
    const mine = (items.Items ?? []).filter((i) => String(i.pk).includes(`#${ws}`));
    expect(mine.map((i) => `${String(i.pk)} ${String(i.sk)}`).filter((k) => /KEYWIN|MEMBERMONTH|WSM#/.test(k))).toEqual([]);
    expect(await window(ws, `MONTH#${NOW_MONTH}`)).toEqual({ settled: 0, held: 3_000_000, used: 3_000_000 });
    await ledger.settle(out.hold, settlement(1_000_000));
    expect(await window(ws, `MONTH#${NOW_MONTH}`)).toEqual({ settled: 1_000_000, held: 0, used: 1_000_000 });
    await expectSettledInvariant(ws);
  });

  it('refuses insufficient credit and holds nothing', async () => {
    const ws = await workspace(1);
    const out = await ledger.admit(request(ws, 1_000_001));
    expect(out).toEqual({ admitted: false, refusal: { kind: 'insufficient_credit', availableMicros: 1_000_000 } });
    expect(await balance(ws)).toEqual({ available: 1_000_000, held: 0, spent: 0, credited: 1_000_000 });
    expect(await openHolds(ws)).toBe(0);
    // The exact amount fits.
    const fits = await ledger.admit(request(ws, 1_000_000));
    expect(fits.admitted).toBe(true);
    if (fits.admitted) await ledger.settle(fits.hold, settlement(0));
    await expectSettledInvariant(ws);
  });

  it('never takes the balance below zero when a charge exceeds its hold', async () => {
    const ws = await workspace(1);
    const out = await ledger.admit(request(ws, 600_000));
    if (!out.admitted) throw new Error('not admitted');
    await ledger.settle(out.hold, settlement(5_000_000));
    const b = await balance(ws);
    expect(b.available).toBe(0);
    expect(b.spent).toBe(1_000_000);
    await expectSettledInvariant(ws);
  });

  it('BYOK requests hold and charge nothing and skip every window', async () => {
    const ws = await workspace(1);
    const out = await ledger.admit(request(ws, 0, { byok: true, limits: { ...OPEN, keyLimitMicros: 1 } }));
    if (!out.admitted) throw new Error('not admitted');
    expect(out.hold.windows).toEqual([]);
    await ledger.settle(out.hold, settlement(123));
    expect(await balance(ws)).toEqual({ available: 1_000_000, held: 0, spent: 0, credited: 1_000_000 });
    await expectSettledInvariant(ws);
  });
});

describe('limits', () => {
  it('key credit limit counts settled plus held in its window; other keys keep serving', async () => {
    const ws = await workspace(100);
    const limits: AdmissionLimits = { ...OPEN, keyLimitMicros: 5_000_000, keyWindow: 'monthly' };
    const a = await ledger.admit(request(ws, 3_000_000, { limits }));
    if (!a.admitted) throw new Error('not admitted');
    await ledger.settle(a.hold, settlement(2_000_000));
    const b = await ledger.admit(request(ws, 2_500_000, { limits }));
    if (!b.admitted) throw new Error('not admitted');
    // settled 2.0 + held 2.5 + need 1.0 > 5.0
    const refused = await ledger.admit(request(ws, 1_000_000, { limits }));
    expect(refused).toEqual({ admitted: false, refusal: { kind: 'key_limit_exceeded', settledMicros: 2_000_000, heldMicros: 2_500_000, limitMicros: 5_000_000 } });
    // Another key of the same workspace is not affected.
    const other = await ledger.admit(request(ws, 1_000_000, { keyId: 'key_b', limits }));
    expect(other.admitted).toBe(true);
    if (other.admitted) await ledger.settle(other.hold, settlement(1));
    await ledger.settle(b.hold, settlement(0));
    // The hold's return frees room again: 2.0 settled + 1.0 need <= 5.0.
    const again = await ledger.admit(request(ws, 1_000_000, { limits }));
    expect(again.admitted).toBe(true);
    if (again.admitted) await ledger.settle(again.hold, settlement(0));
    await expectSettledInvariant(ws);
  });

  it('key windows roll over on UTC calendars; a never-resetting limit does not clear by waiting', async () => {
    const ws = await workspace(100);
    const endOfMonth = testDate(10, 30, 23, 59, 59, 999);
    const nextMonth = endOfMonth + 1;
    for (const cadence of ['monthly', 'never'] as const) {
      const keyId = `key_${cadence}`;
      const limits: AdmissionLimits = { ...OPEN, keyLimitMicros: 1_000_000, keyWindow: cadence };
      const first = await ledger.admit(request(ws, 1_000_000, { keyId, limits, now: endOfMonth }));
      if (!first.admitted) throw new Error('not admitted');
      await ledger.settle(first.hold, settlement(1_000_000, endOfMonth));
      const sameWindow = await ledger.admit(request(ws, 1, { keyId, limits, now: endOfMonth }));
      expect(sameWindow.admitted).toBe(false);
      const rolled = await ledger.admit(request(ws, 1, { keyId, limits, now: nextMonth }));
      expect(rolled.admitted).toBe(cadence === 'monthly');
      if (rolled.admitted) await ledger.settle(rolled.hold, settlement(1, nextMonth));
    }
    // Daily and weekly cadences roll at UTC midnight and on Monday.
    const daily: AdmissionLimits = { ...OPEN, keyLimitMicros: 10, keyWindow: 'daily' };
    const d1 = await ledger.admit(request(ws, 10, { keyId: 'key_daily', limits: daily, now: testDate(10, 22, 23, 59) }));
    expect(d1.admitted).toBe(true);
    expect((await ledger.admit(request(ws, 10, { keyId: 'key_daily', limits: daily, now: testDate(10, 22, 23, 59, 30) }))).admitted).toBe(false);
    const d2 = await ledger.admit(request(ws, 10, { keyId: 'key_daily', limits: daily, now: testDate(10, 23, 0, 0) }));
    expect(d2.admitted).toBe(true);
    const weekly: AdmissionLimits = { ...OPEN, keyLimitMicros: 10, keyWindow: 'weekly' };
    // 22 November of the test year is a Sunday (its calendar is 2026's); the next ISO week starts Monday the 23rd.
    const w1 = await ledger.admit(request(ws, 10, { keyId: 'key_weekly', limits: weekly, now: testDate(10, 17) }));
    expect((await ledger.admit(request(ws, 10, { keyId: 'key_weekly', limits: weekly, now: testDate(10, 22, 23) }))).admitted).toBe(false);
    const w2 = await ledger.admit(request(ws, 10, { keyId: 'key_weekly', limits: weekly, now: testDate(10, 23) }));
    expect(w2.admitted).toBe(true);
    for (const o of [d1, d2, w1, w2]) if (o.admitted) await ledger.settle(o.hold, settlement(0));
    await expectSettledInvariant(ws);
  });

  it('member and workspace calendar-month limits refuse with their own codes', async () => {
    const ws = await workspace(100);
    const member: AdmissionLimits = { ...OPEN, memberLimitMicros: 2_000_000 };
    const m1 = await ledger.admit(request(ws, 2_000_000, { memberId: 'mem_x', limits: member }));
    expect(m1.admitted).toBe(true);
    const m2 = await ledger.admit(request(ws, 1, { memberId: 'mem_x', limits: member }));
    expect(m2).toEqual({ admitted: false, refusal: { kind: 'member_limit_exceeded', usedMicros: 2_000_000, limitMicros: 2_000_000 } });
    // Another member is not limited by mem_x's spending.
    const m3 = await ledger.admit(request(ws, 1, { memberId: 'mem_y', limits: member }));
    expect(m3.admitted).toBe(true);
    const wsLimits: AdmissionLimits = { ...OPEN, workspaceLimitMicros: 2_000_002 };
    const w = await ledger.admit(request(ws, 2, { limits: wsLimits }));
    expect(w).toEqual({ admitted: false, refusal: { kind: 'workspace_limit_exceeded', usedMicros: 2_000_001, limitMicros: 2_000_002 } });
    // Next calendar month: both clear.
    const next = testDate(11, 1);
    const n = await ledger.admit(request(ws, 2_000_000, { memberId: 'mem_x', limits: { ...member, workspaceLimitMicros: 2_000_002 }, now: next }));
    expect(n.admitted).toBe(true);
    for (const o of [m1, m3, n]) if (o.admitted) await ledger.settle(o.hold, settlement(0));
    await expectSettledInvariant(ws);
  });

  it('the spend rate cap counts reservations for 60 s whether they settle or not; 402 wins over 429', async () => {
    const ws = await workspace(100);
    const cap: AdmissionLimits = { ...OPEN, spendRateCapMicros: 5_000_000 };
    const a = await ledger.admit(request(ws, 3_000_000, { limits: cap, now: NOW }));
    if (!a.admitted) throw new Error('not admitted');
    await ledger.settle(a.hold, settlement(0, NOW + 100)); // settled, still counts
    const b = await ledger.admit(request(ws, 2_000_000, { limits: cap, now: NOW + 10_000 }));
    expect(b.admitted).toBe(true);
    const c = await ledger.admit(request(ws, 1, { limits: cap, now: NOW + 20_000 }));
    // The first reservation (second NOW/1000) ages out 61 s after its second began.
    expect(c).toEqual({ admitted: false, refusal: { kind: 'spend_rate_exceeded', retryAfterSeconds: 41, capMicros: 5_000_000 } });
    const later = await ledger.admit(request(ws, 3_000_000, { limits: cap, now: NOW + 61_000 }));
    expect(later.admitted).toBe(true);
    // Out of credit and over the cap at once: the 402.
    const both = await ledger.admit(request(ws, 200_000_000, { limits: cap, now: NOW + 61_500 }));
    expect(both.admitted).toBe(false);
    if (!both.admitted) expect(both.refusal.kind).toBe('insufficient_credit');
    // A single request above the cap can never pass.
    const huge = await ledger.admit(request(ws, 6_000_000, { limits: cap, now: NOW + 300_000 }));
    expect(huge.admitted).toBe(false);
    if (!huge.admitted) expect(huge.refusal.kind).toBe('spend_rate_exceeded');
    for (const o of [b, later]) if (o.admitted) await ledger.settle(o.hold, settlement(0));
    await expectSettledInvariant(ws);
  });

  it('the per-key request rate refuses within the minute and clears at the next; it outranks a 402', async () => {
    const ws = await workspace(0);
    const rate: AdmissionLimits = { ...OPEN, keyRatePerMinute: 2 };
    const minute = testDate(10, 22, 12, 5, 0);
    expect((await ledger.countRequest(ws, 'key_r', 2, minute + 1000)).retryAfterSeconds).toBeUndefined();
    const second = await ledger.admit(request(ws, 1, { keyId: 'key_r', limits: rate, now: minute + 2000 }));
    // No credit: refused 402, and the refused admission did not count.
    expect(second.admitted).toBe(false);
    if (!second.admitted) expect(second.refusal.kind).toBe('insufficient_credit');
    expect((await ledger.countRequest(ws, 'key_r', 2, minute + 3000)).retryAfterSeconds).toBeUndefined();
    const third = await ledger.admit(request(ws, 1, { keyId: 'key_r', limits: rate, now: minute + 45_500 }));
    expect(third).toEqual({ admitted: false, refusal: { kind: 'rate_limit_exceeded', retryAfterSeconds: 15 } });
    expect((await ledger.countRequest(ws, 'key_r', 2, minute + 60_000)).retryAfterSeconds).toBeUndefined();
  });

  it('extends a running hold only while balance and limits allow', async () => {
    const ws = await workspace(2);
    const limits: AdmissionLimits = { ...OPEN, keyLimitMicros: 1_500_000 };
    const out = await ledger.admit(request(ws, 1_000_000, { limits }));
    if (!out.admitted) throw new Error('not admitted');
    expect(await ledger.extend(out.hold, 400_000, limits, NOW)).toBe(true);
    expect(await ledger.extend(out.hold, 200_000, limits, NOW)).toBe(false); // key limit
    expect(await ledger.extend(out.hold, 100_000, OPEN, NOW)).toBe(true);
    expect(await ledger.extend(out.hold, 600_000, OPEN, NOW)).toBe(false); // balance
    const grown = { ...out.hold, amountMicros: 1_500_000 };
    expect(await balance(ws)).toEqual({ available: 500_000, held: 1_500_000, spent: 0, credited: 2_000_000 });
    await ledger.settle(grown, settlement(1_500_000));
    await expectSettledInvariant(ws);
    expect((await balance(ws)).spent).toBe(1_500_000);
  });
});

describe('races (real concurrent transactions)', () => {
  jest.setTimeout(120_000);

  it('200 concurrent requests against a balance covering exactly 37: exactly 37 admitted', async () => {
    const ws = await workspace(37); // 37 minor; each request holds 1 minor
    const { admitted, refused } = await admitAll(Array.from({ length: 200 }, () => request(ws, MICROS_PER_MINOR)));
    expect(admitted).toHaveLength(37);
    expect(refused).toHaveLength(163);
    expect(new Set(refused)).toEqual(new Set(['insufficient_credit']));
    const b = await balance(ws);
    expect(b).toEqual({ available: 0, held: 37 * MICROS_PER_MINOR, spent: 0, credited: 37 * MICROS_PER_MINOR });
    await Promise.all(admitted.map((h, i) => ledger.settle(h, settlement(i % 2 === 0 ? 400_000 : 1_000_000))));
    const expectedSpent = admitted.reduce((acc, _h, i) => acc + (i % 2 === 0 ? 400_000 : 1_000_000), 0);
    expect((await balance(ws)).spent).toBe(expectedSpent);
    await expectSettledInvariant(ws);
  });

  it('200 concurrent requests against a key limit, a monthly limit and the spend cap admit exactly what fits', async () => {
    const cases: { name: string; limits: AdmissionLimits; memberId?: string; expected: string }[] = [
      { name: 'key', limits: { ...OPEN, keyLimitMicros: 23 * MICROS_PER_MINOR }, expected: 'key_limit_exceeded' },
      { name: 'member', limits: { ...OPEN, memberLimitMicros: 23 * MICROS_PER_MINOR }, memberId: 'mem_race', expected: 'member_limit_exceeded' },
      { name: 'workspace', limits: { ...OPEN, workspaceLimitMicros: 23 * MICROS_PER_MINOR }, expected: 'workspace_limit_exceeded' },
      { name: 'spend', limits: { ...OPEN, spendRateCapMicros: 23 * MICROS_PER_MINOR }, expected: 'spend_rate_exceeded' },
    ];
    for (const c of cases) {
      const ws = await workspace(1000);
      const { admitted, refused } = await admitAll(
        Array.from({ length: 200 }, () => request(ws, MICROS_PER_MINOR, { limits: c.limits, ...(c.memberId ? { memberId: c.memberId } : {}) })),
      );
      expect({ case: c.name, admitted: admitted.length }).toEqual({ case: c.name, admitted: 23 });
      expect(new Set(refused)).toEqual(new Set([c.expected]));
      await Promise.all(admitted.map((h) => ledger.settle(h, settlement(MICROS_PER_MINOR / 2))));
      await expectSettledInvariant(ws);
    }
  });
});
