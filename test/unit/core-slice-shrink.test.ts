/** When a workspace's ledger slices shrink: slowly, toward the operator's floor, never flapping with growth. */
import { grownSliceCount } from '../../lambdas/core/admission';
import { GROWTH_CONFLICT_RATE, QUIET_RPS_PER_SLICE, SHRINK_QUIET_MS, recentLoad, shrunkSliceCount, type ShrinkInput, type SliceLoad } from '../../lambdas/core/slice-shrink';

const NOW = Date.UTC(2027, 2, 1, 12, 0, 30);
const SPAN = SHRINK_QUIET_MS;
const load = (admissions: number, conflicts = 0): SliceLoad => ({ admissions, conflicts, spanMs: SPAN });
const at = (over: Partial<ShrinkInput>): ShrinkInput => ({ current: 16, floor: 1, load: load(0), now: NOW, changedAt: NOW - 2 * SPAN, ...over });
/** Admissions over the span at `rps` per second. */
const perSecond = (rps: number): number => Math.round((rps * SPAN) / 1000);

describe('shrunkSliceCount', () => {
  it.each<[string, Partial<ShrinkInput>, number]>([
    ['idle: halves (one step at a time)', {}, 8],
    ['idle, from 2: to 1', { current: 2 }, 1],
    ['one slice: nothing to shrink', { current: 1 }, 1],
    ['idle, at the operator floor: stays', { current: 8, floor: 8 }, 8],
    ['idle, near the floor: never below it', { current: 10, floor: 7 }, 7],
    ['above the floor only by the floor being larger: stays', { current: 4, floor: 6 }, 4],
    ['changed 14 minutes ago: too soon (hysteresis after growth)', { changedAt: NOW - 14 * 60_000 }, 16],
    ['changed exactly a span ago: may shrink', { changedAt: NOW - SPAN }, 8],
    ['never recorded a change: judged on its load', { changedAt: undefined }, 8],
    ['a span of load shorter than the quiet time: stays', { load: { admissions: 0, conflicts: 0, spanMs: SPAN - 1 } }, 16],
    ['conflicts at one in ten: stays (still earning its slices)', { load: load(1000, 100) }, 16],
    ['conflicts at one in twenty: the predicted rate after shrinking must stay low', { load: load(1000, 50) }, 16],
    ['conflicts at one in a hundred: shrinks, keeping the predicted rate under one in twenty', { load: load(1000, 10) }, 8],
    ['conflicts at one in forty: shrinks only as far as the predicted rate allows', { load: load(1000, 25) }, 8],
    [`busy but calm: keeps ${QUIET_RPS_PER_SLICE} req/s per slice at most`, { load: load(perSecond(60)) }, 12],
    ['busy at 80 req/s: 16 slices stay', { load: load(perSecond(80)) }, 16],
  ])('%s', (_name, over, expected) => {
    expect(shrunkSliceCount(at(over))).toBe(expected);
  });

  it('names growth\'s threshold as grownSliceCount applies it', () => {
    expect(grownSliceCount(4, 200 * GROWTH_CONFLICT_RATE, 200, 48)).toBe(4);
    expect(grownSliceCount(4, 200 * GROWTH_CONFLICT_RATE + 1, 200, 48)).toBeGreaterThan(4);
  });

  it('does not flap with growth: a load growth would raise is never shrunk, and a shrink never lands where growth would fire', () => {
    for (const current of [2, 3, 8, 16, 48]) {
      for (const rate of [0, 0.01, 0.03, 0.05, 0.1, 0.2, 0.3]) {
        const admissions = 1000;
        const conflicts = Math.round(admissions * rate);
        const grown = grownSliceCount(current, conflicts, admissions, 48);
        const shrunk = shrunkSliceCount(at({ current, load: load(admissions, conflicts) }));
        if (grown > current) expect(shrunk).toBe(current);
        // The rate predicted at the new count (conflicts scale with transactions per slice) is far under growth's one in five.
        if (shrunk < current) expect((rate * current) / shrunk).toBeLessThanOrEqual(1 / 20);
      }
    }
  });
});

describe('recentLoad', () => {
  const minute = Math.floor(NOW / 60_000);
  const intoMinute = NOW - minute * 60_000;
  it.each<[string, { minute: number; admissions: number; conflicts: number }[], number, number, number]>([
    ['nothing reported: no span covered', [], 0, 0, 0],
    ['this minute and the last: a minute and a half covered', [{ minute, admissions: 10, conflicts: 1 }, { minute: minute - 1, admissions: 5, conflicts: 0 }], 15, 1, 60_000 + intoMinute],
    ['the oldest minute of the span counts, the one before does not (but shows the span is covered)', [{ minute: minute - 14, admissions: 7, conflicts: 2 }, { minute: minute - 15, admissions: 100, conflicts: 100 }], 7, 2, SPAN],
    ['a minute from the future (a skewed clock) is left out', [{ minute: minute + 1, admissions: 9, conflicts: 9 }], 0, 0, 0],
  ])('%s', (_name, buckets, admissions, conflicts, spanMs) => {
    expect(recentLoad(buckets, NOW)).toEqual({ admissions, conflicts, spanMs });
  });

  it('a workspace whose reports began a few minutes ago is not judged idle', () => {
    const fresh = recentLoad([{ minute: minute - 3, admissions: 1, conflicts: 0 }], NOW);
    expect(shrunkSliceCount(at({ load: fresh }))).toBe(16);
  });
});
