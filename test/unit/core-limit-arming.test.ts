/** When a key window or member month is counted and when its limit is enforced (`lambdas/core/limit-arming.ts`), by table. */
import { ARMING_MARGIN_MS, ARMING_MINUTES_BEFORE, armingMinutes, needsArming, trackFromFor, windowPlan, type LimitRecord, type WindowPlan } from '../../lambdas/core/limit-arming';
import type { WindowCadence } from '../../lambdas/shared/records';

const DAY = 86_400_000;
/** 22 November 2026, noon UTC: a Sunday, in the middle of its month and ISO week. */
const T = Date.UTC(2026, 10, 22, 12);

describe('windowPlan', () => {
  test.each<[string, LimitRecord, WindowCadence, number, WindowPlan]>([
    ['no limit: nothing is written', {}, 'monthly', T, { track: false }],
    ['a limit tracked all along (no arming on record): counted and enforced', { limitMicros: 5 }, 'monthly', T, { track: true, limitMicros: 5, arming: false }],
    ['an arming not yet started: nothing is written yet', { limitMicros: 5, trackFrom: T + 1 }, 'monthly', T, { track: false }],
    ['from trackFrom: counted, not yet enforced', { limitMicros: 5, trackFrom: T }, 'monthly', T, { track: true, limitMicros: 5, arming: true, generation: T }],
    ['armed: enforced', { limitMicros: 5, trackFrom: T, armedFrom: T }, 'monthly', T + 1, { track: true, limitMicros: 5, arming: false, generation: T }],
    ['an armedFrom of an earlier arming does not arm this one', { limitMicros: 5, trackFrom: T, armedFrom: T - DAY }, 'monthly', T + 1, { track: true, limitMicros: 5, arming: true, generation: T }],
    ['the next month was counted from its start: enforced, armed or not', { limitMicros: 5, trackFrom: T }, 'monthly', Date.UTC(2026, 11, 1), { track: true, limitMicros: 5, arming: false, generation: T }],
    ['the next day, for a daily window', { limitMicros: 5, trackFrom: T }, 'daily', T + DAY / 2, { track: true, limitMicros: 5, arming: false, generation: T }],
    ['still the same week, for a weekly window (Monday the 23rd starts the next)', { limitMicros: 5, trackFrom: Date.UTC(2026, 10, 20) }, 'weekly', T, { track: true, limitMicros: 5, arming: true, generation: Date.UTC(2026, 10, 20) }],
    ['a window that never resets is armed only by its arming', { limitMicros: 5, trackFrom: T }, 'never', T + 400 * DAY, { track: true, limitMicros: 5, arming: true, generation: T }],
    ['a limit of zero is a limit', { limitMicros: 0, trackFrom: T, armedFrom: T }, 'monthly', T, { track: true, limitMicros: 0, arming: false, generation: T }],
  ])('%s', (_l, record, cadence, now, plan) => {
    expect(windowPlan(record, cadence, now)).toEqual(plan);
  });
});

describe('when an arming starts and which counters it marks', () => {
  test('tracking starts a cache lifetime and a margin after the limit is written', () => {
    expect(trackFromFor(T, 5_000)).toBe(T + 5_000 + ARMING_MARGIN_MS);
    expect(trackFromFor(T, 0)).toBe(T + ARMING_MARGIN_MS);
  });

  test('the minutes before trackFrom and the one after are marked', () => {
    const minute = Math.floor(T / 60_000);
    expect(armingMinutes(T + 30_000)).toEqual(Array.from({ length: ARMING_MINUTES_BEFORE + 2 }, (_, i) => minute - ARMING_MINUTES_BEFORE + i));
  });

  test.each<[string, { limitMicros?: number; cadence?: WindowCadence }, WindowCadence, boolean]>([
    ['no limit before: armed', {}, 'monthly', true],
    ['the same window: only the figure changes', { limitMicros: 5, cadence: 'monthly' }, 'monthly', false],
    ['a limit with no window on record counts monthly', { limitMicros: 5 }, 'monthly', false],
    ['another window: its items were never written, armed again', { limitMicros: 5, cadence: 'monthly' }, 'daily', true],
  ])('%s', (_l, before, cadence, arm) => {
    expect(needsArming(before, cadence)).toBe(arm);
  });
});
