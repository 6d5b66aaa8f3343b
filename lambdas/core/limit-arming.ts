/**
 * When a key's or a member's window is tracked, and when its limit is enforced: pure, no store.
 *
 * A key window or member month exists only to enforce a limit, so without one nothing writes it
 * (reports come from the usage rows and rollups). SPEC still says a limit counts what was settled
 * plus what is held **in the current window**, so a limit set on a window nobody tracked is
 * armed before it is enforced:
 *
 * 1. Setting it records the limit and `trackFrom` = now + the gateways' cache lifetime + a
 *    margin. Every gateway has the new record by then, and from `trackFrom` (by the request's own
 *    time) every admission counts the window: its items are this arming's own (their sort key
 *    carries `trackFrom` as a generation), so nothing an earlier, removed limit left is counted.
 * 2. After `trackFrom`, the arming closes the door on the requests that started before it and
 *    counted nothing: the key's request counters of the last minutes are marked, and an
 *    admission that does not count the window is refused by that mark (a 503, which the client
 *    retries and the retry counts). It then adopts every such request still open (its hold gets
 *    the window; the hold's amount goes on the window, so its settlement lands there), and adds
 *    what the settled ones were charged (their usage rows) to the window. Then the window is
 *    marked armed, in one transaction with that sum.
 * 3. From the mark on, the limit is enforced: a write that only counts is refused by it, and the
 *    record says `armedFrom` so gateways enforce from the start once they read it.
 *
 * Until then a client sees the limit as not yet set (its requests are admitted and counted);
 * from then on exactly what fits under settled plus held of the whole window. A window that
 * begins at or after `trackFrom` was counted from its start, so it is enforced at once.
 */
import type { WindowCadence } from '../shared/records';
import { windowStart } from './windows';

/** Added to the gateways' cache lifetime before tracking starts: clock skew and a slow record write. */
export const ARMING_MARGIN_MS = 1_000;

/**
 * Minutes before `trackFrom`'s (and the one after) whose request counters an arming marks: an
 * admission's own time is taken before its checks and its transaction, and both are bounded by
 * the store client's call budgets (10 s a call), far inside this.
 */
export const ARMING_MINUTES_BEFORE = 3;

/** A limit as its record holds it. */
export interface LimitRecord {
  readonly limitMicros?: number;
  /** When tracking began, for a limit set on an untracked window; absent: tracked all along (or no limit). */
  readonly trackFrom?: number;
  /** Equal to `trackFrom` once armed. */
  readonly armedFrom?: number;
}

/** What an admission at `now` does with a window: nothing, count it, or count it and enforce its limit. */
export type WindowPlan =
  | { readonly track: false }
  | {
      readonly track: true;
      readonly limitMicros: number;
      /** Counted; enforced only once the ledger sees the arming's base written. */
      readonly arming: boolean;
      /** The window items' generation (`trackFrom`), when the limit was armed. */
      readonly generation?: number;
    };

/** The plan for a window of `cadence` at `now` under `limit`. */
export function windowPlan(limit: LimitRecord, cadence: WindowCadence, now: number): WindowPlan {
  if (limit.limitMicros === undefined) return { track: false };
  if (limit.trackFrom === undefined) return { track: true, limitMicros: limit.limitMicros, arming: false };
  if (now < limit.trackFrom) return { track: false };
  const armed = limit.armedFrom === limit.trackFrom || windowStart(cadence, now) >= limit.trackFrom;
  return { track: true, limitMicros: limit.limitMicros, arming: !armed, generation: limit.trackFrom };
}

/** The `trackFrom` of a limit set at `now`, for gateways caching records `cacheTtlMs`. */
export function trackFromFor(now: number, cacheTtlMs: number): number {
  return now + cacheTtlMs + ARMING_MARGIN_MS;
}

/** The minutes (epoch minute numbers) whose request counters an arming from `trackFrom` marks. */
export function armingMinutes(trackFrom: number): number[] {
  const minute = Math.floor(trackFrom / 60_000);
  return Array.from({ length: ARMING_MINUTES_BEFORE + 2 }, (_, i) => minute - ARMING_MINUTES_BEFORE + i);
}

/** Whether a limit changed from `before` to a limit over `cadence` must be armed again (it was not tracked, or its window changed). */
export function needsArming(before: { readonly limitMicros?: number; readonly cadence?: WindowCadence }, cadence: WindowCadence): boolean {
  return before.limitMicros === undefined || (before.cadence ?? 'monthly') !== cadence;
}

/**
 * Whether an arming's marks on the request counters (the minutes {@link armingMinutes} names) can
 * still refuse an admission at `now`: only one whose own time falls in a marked minute reads them,
 * and its time is taken at most a store call's budget (10 s) before its write; a minute past the
 * last marked minute covers that. After it, taking the marks off changes nothing.
 */
export function armingMarksLive(trackFrom: number, now: number): boolean {
  const last = Math.max(...armingMinutes(trackFrom));
  return now < (last + 2) * 60_000;
}
