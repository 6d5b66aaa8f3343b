/**
 * The sliced ledger on DynamoDB Local, with real concurrency: a workspace split into several
 * slices admits exactly what a single-item ledger would (never more, never fewer), refuses only
 * on the whole, keeps `credited = available + held + spent` summed over slices through
 * rebalancing and through slice-count changes under load, and a hold taken on any slice by a
 * process that then died is swept exactly.
 */
import { wireClient } from '../../lambdas/adapters/dynamo-client';
import type { DynamoWire } from '../../lambdas/adapters/dynamo-wire';
import { MICROS_PER_MINOR } from '../../lambdas/core/pricing';
import { tableName } from '../../lambdas/shared/schema';
import type { AdmissionLimits } from '../../lambdas/gateway/ports';
import type { HoldRecord } from '../../lambdas/shared/records';
import { DynamoLedger, creditWorkspace, readBalance, setLedgerSlices } from '../../lambdas/store';
import { sweep } from '../../lambdas/sweeper/sweep';
import { DynamoBalancePort } from '../../lambdas/store/balance-port';
import { BelowHeldError } from '../../lambdas/store/directory-errors';
import { expiryShard } from '../../lambdas/store/keys';
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

const request = requestsTagged('s');

const { ledgerTables, workspace, expectSettledInvariant } = ledgerWorkspaces(() => tables);

describe('a workspace over several slices', () => {
  it('200 concurrent requests against a balance covering exactly 37, over 8 slices: exactly 37, refused only on the whole', async () => {
    const ws = await workspace(37, 8);
    const ledger = new DynamoLedger(wire, ledgerTables());
    // Spread the credit first: a few admissions on every slice pull money over from slice 0.
    for (let i = 0; i < 24; i += 1) {
      const warm = await ledger.admit(request(ws, 1));
      if (warm.admitted) await ledger.settle(warm.hold, settlement(0));
    }
    const spread = await ledger.readSlices(ws, NOW);
    expect(spread.slices.filter((s) => s.availableMicros > 0).length).toBeGreaterThan(1);
    const { admitted, refused } = await admitAll(ledger, Array.from({ length: 200 }, () => request(ws, MICROS_PER_MINOR)));
    expect(admitted).toHaveLength(37);
    expect(new Set(refused)).toEqual(new Set(['insufficient_credit']));
    // The holds really are spread: more than one slice took some.
    expect(new Set(admitted.map((h) => h.slice ?? 0)).size).toBeGreaterThan(1);
    const b = await readBalance(tables.doc, ledgerTables(), ws, NOW);
    expect(b).toMatchObject({ availableMicros: 0, heldMicros: 37 * MICROS_PER_MINOR, slices: 8 });
    await Promise.all(admitted.map((h, i) => ledger.settle(h, settlement(i % 2 === 0 ? 400_000 : 1_000_000))));
    await expectSettledInvariant(ws, 37 * MICROS_PER_MINOR);
    const spent = admitted.reduce((acc, _h, i) => acc + (i % 2 === 0 ? 400_000 : 1_000_000), 0);
    expect((await readBalance(tables.doc, ledgerTables(), ws, NOW)).spentMicros).toBe(spent);
  });

  it('200 concurrent requests against each limit, over 6 slices, admit exactly what fits', async () => {
    const cases: { name: string; limits: AdmissionLimits; memberId?: string; expected: string }[] = [
      { name: 'key', limits: { ...OPEN, keyLimitMicros: 23 * MICROS_PER_MINOR }, expected: 'key_limit_exceeded' },
      { name: 'member', limits: { ...OPEN, memberLimitMicros: 23 * MICROS_PER_MINOR }, memberId: 'mem_race', expected: 'member_limit_exceeded' },
      { name: 'workspace', limits: { ...OPEN, workspaceLimitMicros: 23 * MICROS_PER_MINOR }, expected: 'workspace_limit_exceeded' },
      { name: 'spend', limits: { ...OPEN, spendRateCapMicros: 23 * MICROS_PER_MINOR }, expected: 'spend_rate_exceeded' },
    ];
    for (const c of cases) {
      const ws = await workspace(1000, 6);
      const ledger = new DynamoLedger(wire, ledgerTables());
      const { admitted, refused } = await admitAll(
        ledger,
        Array.from({ length: 200 }, () => request(ws, MICROS_PER_MINOR, { limits: c.limits, ...(c.memberId ? { memberId: c.memberId } : {}) })),
      );
      expect({ case: c.name, admitted: admitted.length }).toEqual({ case: c.name, admitted: 23 });
      expect(new Set(refused)).toEqual(new Set([c.expected]));
      await Promise.all(admitted.map((h) => ledger.settle(h, settlement(MICROS_PER_MINOR / 2))));
      await expectSettledInvariant(ws, 1000 * MICROS_PER_MINOR);
    }
  });

  it('a month limit or a spend cap changed while headroom sits on other slices is exact under the new figure', async () => {
    const ws = await workspace(1000, 4);
    const ledger = new DynamoLedger(wire, ledgerTables());
    const first: AdmissionLimits = { ...OPEN, workspaceLimitMicros: 40 * MICROS_PER_MINOR, spendRateCapMicros: 40 * MICROS_PER_MINOR };
    const a = await admitAll(ledger, Array.from({ length: 20 }, () => request(ws, MICROS_PER_MINOR, { limits: first })));
    expect(a.admitted).toHaveLength(20);
    // Lowered: 20 used, room for 5 more under the month limit; the cap, lowered to 22, leaves 2.
    const lowered: AdmissionLimits = { ...OPEN, workspaceLimitMicros: 25 * MICROS_PER_MINOR, spendRateCapMicros: 22 * MICROS_PER_MINOR };
    const b = await admitAll(ledger, Array.from({ length: 30 }, () => request(ws, MICROS_PER_MINOR, { limits: lowered })));
    expect(b.admitted).toHaveLength(2);
    expect(new Set(b.refused)).toEqual(new Set(['spend_rate_exceeded']));
    // A minute later the cap has room again; the month limit now binds at 25.
    const later = NOW + 62_000;
    const c = await admitAll(ledger, Array.from({ length: 30 }, () => request(ws, MICROS_PER_MINOR, { limits: lowered, now: later })));
    expect(c.admitted).toHaveLength(3);
    expect(new Set(c.refused)).toEqual(new Set(['workspace_limit_exceeded']));
    await Promise.all([...a.admitted, ...b.admitted, ...c.admitted].map((h) => ledger.settle(h, settlement(0, later))));
    await expectSettledInvariant(ws, 1000 * MICROS_PER_MINOR);
  });

  it('rebalancing and slice-count changes under load keep credited = available + held + spent, to the unit', async () => {
    const ws = await workspace(500, 2);
    const ledger = new DynamoLedger(wire, ledgerTables());
    const other = new DynamoLedger(wire, ledgerTables()); // a second process, learning the count on its own
    let stop = false;
    const worker = async (l: DynamoLedger, i: number): Promise<number> => {
      let spent = 0;
      for (let n = 0; !stop; n += 1) {
        const out = await l.admit(request(ws, 3 * MICROS_PER_MINOR, { keyId: `key_${i % 5}` }));
        if (!out.admitted) continue;
        const charge = (n * 7919 + i) % (4 * MICROS_PER_MINOR); // sometimes above the hold
        await l.settle(out.hold, settlement(charge));
        spent += 1;
      }
      return spent;
    };
    const workers = Array.from({ length: 24 }, (_, i) => worker(i % 2 === 0 ? ledger : other, i));
    for (const count of [6, 3, 9, 1, 4]) {
      await new Promise((r) => setTimeout(r, 400));
      await setLedgerSlices(tables.doc, ledgerTables(), ws, count);
      ledger.forget(ws);
      await creditWorkspace(tables.doc, t('ledger'), { workspaceId: ws, micros: 5 * MICROS_PER_MINOR, reference: `pay_${count}` });
    }
    // The same payment reference twice adds nothing.
    expect(await creditWorkspace(tables.doc, t('ledger'), { workspaceId: ws, micros: 5 * MICROS_PER_MINOR, reference: 'pay_4' })).toBe(false);
    stop = true;
    const done = await Promise.all(workers);
    expect(done.reduce((a, b) => a + b, 0)).toBeGreaterThan(20);
    await setLedgerSlices(tables.doc, ledgerTables(), ws, 4); // drains anything a retired slice got back at settlement
    await expectSettledInvariant(ws, 525 * MICROS_PER_MINOR);
    const b = await readBalance(tables.doc, ledgerTables(), ws, NOW);
    expect(b.availableMicros).toBeGreaterThanOrEqual(0);
    expect(b.slices).toBe(4);
  });

  it('holds on every slice of a process killed between admission and settlement are swept exactly', async () => {
    const ws = await workspace(100, 5);
    const dying = new DynamoLedger(wire, ledgerTables());
    const t0 = Date.now();
    const holds: HoldRecord[] = [];
    for (let i = 0; i < 25; i += 1) {
      const out = await dying.admit(request(ws, MICROS_PER_MINOR, { now: t0 - 60_000, expiresAt: t0 - 1 }));
      if (!out.admitted) throw new Error(`refused ${out.refusal.kind}`);
      holds.push(out.hold);
    }
    // The process "dies" here: nothing settles. Holds sit on several slices and several index shards.
    expect(new Set(holds.map((h) => h.slice ?? 0)).size).toBeGreaterThan(1);
    expect(new Set(holds.map((h) => expiryShard(h.holdId))).size).toBeGreaterThan(1);
    const sweeper = new DynamoLedger(tables.doc, ledgerTables());
    const lines: string[] = [];
    const result = await sweep({ doc: tables.doc, usageTable: t('usage'), ledger: sweeper, stage: 'test', writeLine: (l) => lines.push(l) }, t0);
    expect(result).toMatchObject({ swept: 25, failed: 0, outstanding: 0, chargedMicros: 25 * Math.floor(MICROS_PER_MINOR / 4) });
    const again = await sweep({ doc: tables.doc, usageTable: t('usage'), ledger: sweeper, stage: 'test', writeLine: () => undefined }, t0);
    expect(again.swept).toBe(0);
    const b = await readBalance(tables.doc, ledgerTables(), ws, NOW);
    expect(b).toMatchObject({ heldMicros: 0, spentMicros: 25 * Math.floor(MICROS_PER_MINOR / 4), creditedMicros: 100 * MICROS_PER_MINOR });
    expect(b.availableMicros + b.heldMicros + b.spentMicros).toBe(b.creditedMicros);
  });

  it("an operator's negative adjustment takes credit that sits on other slices, and is refused only when the whole is short", async () => {
    const ws = await workspace(40, 8);
    const ledger = new DynamoLedger(wire, ledgerTables());
    await warm(ledger, request, ws, OPEN);
    const before = await ledger.readSlices(ws, NOW);
    const total = before.slices.reduce((a, x) => a + x.availableMicros, 0);
    expect(total).toBe(40 * MICROS_PER_MINOR);
    // Slice 0, where adjustments land, holds less than the whole: the old condition refused here.
    expect(before.slices[0]?.availableMicros).toBeLessThan(30 * MICROS_PER_MINOR);
    const port = new DynamoBalancePort({ doc: tables.doc, tablePrefix: tables.prefix, stage: 'local' });
    const actor = { who: 'test', requestId: 'req_adjust_slices' };
    const taken = await port.adjust({ workspaceId: ws, deltaMicros: -30 * MICROS_PER_MINOR, reason: 'refund of a double top-up', ...actor });
    expect(taken.balance).toMatchObject({ availableMicros: 10 * MICROS_PER_MINOR, creditedMicros: 10 * MICROS_PER_MINOR, heldMicros: 0 });
    // One micro-unit more than the whole has: refused, and nothing moved out of the workspace.
    await expect(port.adjust({ workspaceId: ws, deltaMicros: -(10 * MICROS_PER_MINOR + 1), reason: 'too much', who: 'test', requestId: 'req_adjust_more' })).rejects.toBeInstanceOf(BelowHeldError);
    await expectSettledInvariant(ws, 10 * MICROS_PER_MINOR);
    const after = await port.adjust({ workspaceId: ws, deltaMicros: -10 * MICROS_PER_MINOR, reason: 'the rest', who: 'test', requestId: 'req_adjust_rest' });
    expect(after.balance).toMatchObject({ availableMicros: 0, creditedMicros: 0 });
    await expectSettledInvariant(ws, 0);
  });
});
