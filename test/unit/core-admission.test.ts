/**
 * The admission decisions over slices, table-driven, no store: the refusal in SPEC's order and
 * always on the whole workspace, the moves a rebalance makes (never creating or destroying a
 * unit), and when the slice count grows.
 */
import { grownSliceCount, planRebalance, refusalFor, sliceAfterConflict, type AdmissionAsk, type AdmissionSnapshot, type SliceView } from '../../lambdas/core/admission';
import { settlementAmounts } from '../../lambdas/core/settlement';
import type { AdmissionLimits } from '../../lambdas/gateway/ports';

const NOW = Date.UTC(2026, 10, 22, 12, 0, 0);
const SECOND = NOW / 1000;
const OPEN: AdmissionLimits = { keyWindow: 'monthly', spendRateCapMicros: 1_000, keyRatePerMinute: 10 };
const EMPTY_MONTH = { exists: false, settledMicros: 0, heldMicros: 0, usedMicros: 0, roomMicros: 0, limitMicros: -1 };

function slice(n: number, over: Partial<SliceView> = {}): SliceView {
  return { slice: n, availableMicros: 0, heldMicros: 0, spentMicros: 0, creditedMicros: 0, rateRoom: 0, rateTotal: 0, slots: [], month: EMPTY_MONTH, ...over };
}

function snap(slices: SliceView[], over: Partial<AdmissionSnapshot> = {}): AdmissionSnapshot {
  return { slices, active: slices.length, keyRequests: 0, ...over };
}

const ask = (need: number, limits: Partial<AdmissionLimits> = {}, over: Partial<AdmissionAsk> = {}): AdmissionAsk => ({
  needMicros: need,
  limits: { ...OPEN, ...limits },
  byok: false,
  hasMember: true,
  now: NOW,
  ...over,
});

describe('refusalFor: SPEC order, on the whole workspace', () => {
  test.each<[string, AdmissionSnapshot, AdmissionAsk, unknown]>([
    ['fits across slices: no refusal', snap([slice(0, { availableMicros: 60 }), slice(1, { availableMicros: 50 })]), ask(100), undefined],
    ['credit summed over slices', snap([slice(0, { availableMicros: 60 }), slice(1, { availableMicros: 30 })]), ask(100), { kind: 'insufficient_credit', availableMicros: 90 }],
    ['retired slices still count', snap([slice(0, { availableMicros: 60 }), slice(1, { availableMicros: 40 })], { active: 1 }), ask(100), undefined],
    ['the request rate comes first, even out of credit', snap([slice(0)], { keyRequests: 10 }), ask(100), { kind: 'rate_limit_exceeded', retryAfterSeconds: 60 }],
    ['BYOK: only the request rate', snap([slice(0)]), ask(100, {}, { byok: true }), undefined],
    [
      'key limit before member and month',
      snap([slice(0, { availableMicros: 1_000 })], { keyWindow: { settledMicros: 5, heldMicros: 90, usedMicros: 95 }, memberMonth: { settledMicros: 0, heldMicros: 0, usedMicros: 999 } }),
      ask(10, { keyLimitMicros: 100, memberLimitMicros: 100 }),
      { kind: 'key_limit_exceeded', settledMicros: 5, heldMicros: 90, limitMicros: 100 },
    ],
    [
      'member month',
      snap([slice(0, { availableMicros: 1_000 })], { memberMonth: { settledMicros: 0, heldMicros: 0, usedMicros: 95 } }),
      ask(10, { memberLimitMicros: 100 }),
      { kind: 'member_limit_exceeded', usedMicros: 95, limitMicros: 100 },
    ],
    [
      'workspace month summed over slices',
      snap([slice(0, { availableMicros: 1_000, month: { ...EMPTY_MONTH, exists: true, usedMicros: 50 } }), slice(1, { month: { ...EMPTY_MONTH, exists: true, usedMicros: 45 } })]),
      ask(10, { workspaceLimitMicros: 100 }),
      { kind: 'workspace_limit_exceeded', usedMicros: 95, limitMicros: 100 },
    ],
    [
      'spend rate: live slots summed over slices; expired ones do not count',
      snap([
        slice(0, { availableMicros: 1_000, slots: [{ slot: 0, second: SECOND - 10, micros: 500 }, { slot: 1, second: SECOND - 70, micros: 900 }] }),
        slice(1, { slots: [{ slot: 2, second: SECOND - 30, micros: 450 }] }),
      ]),
      ask(60),
      { kind: 'spend_rate_exceeded', retryAfterSeconds: 31, capMicros: 1_000 },
    ],
    ['402 wins over 429', snap([slice(0, { availableMicros: 10, slots: [{ slot: 0, second: SECOND, micros: 1_000 }] })]), ask(100), { kind: 'insufficient_credit', availableMicros: 10 }],
  ])('%s', (_name, snapshot, a, expected) => {
    expect(refusalFor(snapshot, a)).toEqual(expected);
  });
});

describe('planRebalance: moves that cannot create or destroy a unit', () => {
  const total = (plan: ReturnType<typeof planRebalance>, key: 'availableDelta' | 'rateDelta' | 'monthDelta'): number => plan.edits.reduce((a, e) => a + e[key], 0);

  test.each<[string, AdmissionSnapshot, number, AdmissionAsk]>([
    ['credit from the richest', snap([slice(0, { availableMicros: 900 }), slice(1, { availableMicros: 5 }), slice(2, { availableMicros: 300 })]), 1, ask(100, { spendRateCapMicros: 1e9 })],
    ['a retired slice empties first', snap([slice(0, { availableMicros: 900 }), slice(1), slice(2, { availableMicros: 70 })], { active: 2 }), 1, ask(50, { spendRateCapMicros: 1e9 })],
    ['spend headroom, never written, from slice 0', snap([slice(0, { availableMicros: 900 }), slice(1, { availableMicros: 900 })]), 1, ask(100)],
    [
      'month headroom under the same limit',
      snap([slice(0, { availableMicros: 900, month: { ...EMPTY_MONTH, exists: true, roomMicros: 400, limitMicros: 500, usedMicros: 100 } }), slice(1, { availableMicros: 900 })]),
      1,
      ask(100, { workspaceLimitMicros: 500, spendRateCapMicros: 1e9 }),
    ],
  ])('%s: the deltas sum to zero and the target can cover the need', (_name, snapshot, target, a) => {
    const plan = planRebalance(snapshot, target, a);
    expect(total(plan, 'availableDelta')).toBe(0);
    expect(total(plan, 'rateDelta')).toBe(0);
    expect(total(plan, 'monthDelta')).toBe(0);
    const t = plan.edits.find((e) => e.slice === target);
    const before = snapshot.slices[target] as SliceView;
    expect(before.availableMicros + (t?.availableDelta ?? 0)).toBeGreaterThanOrEqual(a.needMicros);
    for (const e of plan.edits) {
      const s = snapshot.slices[e.slice] as SliceView;
      expect(s.availableMicros + e.availableDelta).toBeGreaterThanOrEqual(0); // a giver never goes below zero
      if (e.slice >= snapshot.active) expect(s.availableMicros + e.availableDelta).toBe(0);
    }
  });

  test('a cap that changed rewrites every slice: the target gets the cap less what is live anywhere', () => {
    const snapshot = snap([
      slice(0, { availableMicros: 900, rateCap: 2_000, rateRoom: 1_500, rateTotal: 500, slots: [{ slot: 0, second: SECOND - 5, micros: 500 }] }),
      slice(1, { rateCap: 2_000, rateRoom: 200, rateTotal: 300, slots: [{ slot: 1, second: SECOND - 3, micros: 300 }] }),
    ]);
    const plan = planRebalance(snapshot, 1, ask(100));
    expect(plan.edits.map((e) => [e.slice, e.rateSet])).toEqual([
      [0, 0],
      [1, 1_000 - 800],
    ]);
  });

  test('in a region, a changed cap rewrites the headroom from its capacity: its share plus what transfers moved there under the new cap, less what is live', () => {
    const snapshot = snap([
      slice(0, { availableMicros: 900, rateCap: 2_000, rateRoom: 1_500, rateTotal: 500, slots: [{ slot: 0, second: SECOND - 5, micros: 500 }] }),
      slice(1, { rateCap: 2_000, rateRoom: 200, rateTotal: 300, slots: [{ slot: 1, second: SECOND - 3, micros: 300 }] }),
    ]);
    // 400 received under the new cap (it was set before, then changed and set again): kept, not undone by the rewrite.
    expect(planRebalance(snapshot, 1, ask(100, { spendRateMovedMicros: 400 })).edits.map((e) => [e.slice, e.rateSet])).toEqual([
      [0, 0],
      [1, 1_000 + 400 - 800],
    ]);
    // 150 given away under it: the rewrite leaves it given.
    expect(planRebalance(snapshot, 0, ask(10, { spendRateMovedMicros: -150 })).edits.map((e) => [e.slice, e.rateSet])).toEqual([
      [0, 1_000 - 150 - 800],
      [1, 0],
    ]);
  });

  test("a region's spend-rate refusal is decided on its capacity (share plus what moved there), not its share alone", () => {
    const live = snap([slice(0, { availableMicros: 1_000, rateCap: 1_000, rateRoom: 300, rateTotal: 900, slots: [{ slot: 0, second: SECOND - 10, micros: 900 }] })]);
    expect(refusalFor(live, ask(200))).toEqual({ kind: 'spend_rate_exceeded', retryAfterSeconds: 51, capMicros: 1_000 });
    expect(refusalFor(live, ask(200, { spendRateMovedMicros: 200 }))).toBeUndefined();
    // A need above the share but within the capacity can fit; one above the capacity never does.
    expect(refusalFor(snap([slice(0, { availableMicros: 5_000 })]), ask(1_500, { spendRateMovedMicros: 600 }))).toBeUndefined();
    expect(refusalFor(snap([slice(0, { availableMicros: 5_000 })]), ask(1_500, { spendRateMovedMicros: -1 }))).toMatchObject({ kind: 'spend_rate_exceeded' });
  });

  test('expired slots are pruned on every slice the plan touches', () => {
    const old = { slot: 7, second: SECOND - 100, micros: 300 };
    const plan = planRebalance(snap([slice(0, { availableMicros: 900, rateCap: 1_000, rateRoom: 700, rateTotal: 300, slots: [old] })]), 0, ask(800));
    expect(plan.edits[0]?.prune).toEqual([old]);
  });
});

describe('grownSliceCount', () => {
  test.each([
    [1, 0, 200, 1],
    [1, 40, 200, 1], // one in five: not yet
    [1, 41, 200, 2],
    [4, 100, 200, 6],
    [32, 200, 200, 32],
    [1, 30, 40, 1], // too few admissions to judge
    [1, 26, 50, 2], // more than half: doubles
    [4, 101, 200, 8],
    [12, 50, 50, 24],
    [20, 50, 50, 32], // doubling stops at the most (32 in this table)
    [1, 11, 50, 2], // just over one in five of the smallest window
  ])('count %i with %i conflicts in %i admissions grows to %i', (current, conflicts, admissions, expected) => {
    expect(grownSliceCount(current, conflicts, admissions, 32)).toBe(expected);
  });
});

describe('sliceAfterConflict', () => {
  test.each([
    // slice, active, draw, next
    [0, 1, 0.5, 0], // one slice: nowhere else to go
    [0, 2, 0, 1],
    [1, 2, 0.99, 0],
    [3, 8, 0, 4], // the next one up
    [3, 8, 0.999, 2], // the one below, around the ring
    [7, 8, 0.5, 3],
    [47, 48, 0, 0],
  ])('slice %i of %i, draw %f: tries %i', (slice, active, draw, next) => {
    expect(sliceAfterConflict(slice, active, draw)).toBe(next);
  });

  test('never the slice it met, always one of the active ones', () => {
    for (const active of [2, 3, 8, 48]) {
      for (let slice = 0; slice < active; slice += 1) {
        for (const draw of [0, 0.1, 0.5, 0.9, 0.999999]) {
          const next = sliceAfterConflict(slice, active, draw);
          expect(next).not.toBe(slice);
          expect(next).toBeGreaterThanOrEqual(0);
          expect(next).toBeLessThan(active);
        }
      }
    }
  });
});

describe('settlementAmounts', () => {
  test.each([
    // hold, wanted, available, charge, uncollected, release, deficit
    [100, 40, undefined, 40, 0, 60, 0],
    [100, 150, undefined, 150, 0, -50, 50],
    [100, 150, 20, 120, 30, -20, 20],
    [100, 150, 0, 100, 50, 0, 0],
    [100, -5, undefined, 0, 0, 100, 0],
  ])('hold %i, charge %i, available %s', (hold, wanted, available, charge, uncollected, release, deficit) => {
    expect(settlementAmounts(hold, wanted, available)).toEqual({ chargeMicros: charge, uncollectedMicros: uncollected, releaseMicros: release, deficitMicros: deficit });
  });
});
