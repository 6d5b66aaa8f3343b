/**
 * When a workspace's ledger slices may be shrunk, pure: no store, no clock of its own.
 *
 * Slices divide a hot workspace's transactions so they stop conflicting; a workspace that has
 * cooled keeps paying for them (a snapshot reads every slice, credit is spread thin so headroom
 * moves more often). Growth is quick (more than one admission in five met a conflict, see
 * `grownSliceCount`); shrinking is slow and careful, so the two do not flap:
 *
 * - nothing changes within {@link SHRINK_QUIET_MS} of the last change of the count (growth, an
 *   operator, an earlier shrink), and the load is judged over that same span;
 * - the conflict rate over the span must be at most one in {@link SHRINK_CONFLICT_DIVISOR} (a
 *   quarter of growth's threshold), and the count after shrinking must keep the rate predicted
 *   for it (conflicts grow with the transactions per slice, so by `current / target`) under that;
 * - the count after shrinking keeps at most {@link QUIET_RPS_PER_SLICE} admissions per second per
 *   slice, never goes below the operator's floor, and halves at most per step.
 */

/** Growth's threshold (`grownSliceCount` in `admission.ts`): more than this share of admissions met a conflict. */
export const GROWTH_CONFLICT_RATE = 1 / 5;
/** How long the count must have stood, and the span the load is judged over. */
export const SHRINK_QUIET_MS = 15 * 60_000;
/** The conflict rate under which shrinking is considered: one in this many admissions. */
export const SHRINK_CONFLICT_DIVISOR = 20;
/** Admissions per second one slice is left with, at most, after a shrink. */
export const QUIET_RPS_PER_SLICE = 5;

/** A workspace's admissions and conflicts in one minute, summed over every process that reported. */
export interface SliceLoadBucket {
  /** Epoch minute (epoch ms ÷ 60,000, floored). */
  readonly minute: number;
  readonly admissions: number;
  readonly conflicts: number;
}

/** The load of a span: admissions, of which conflicted, over so many milliseconds. */
export interface SliceLoad {
  readonly admissions: number;
  readonly conflicts: number;
  readonly spanMs: number;
}

/**
 * The buckets of the last `spanMs` before `now` (the current minute included), summed. The span
 * is cut to what the buckets cover (back to the start of the oldest one reported): a workspace
 * whose reports began five minutes ago has five minutes of load, not fifteen quiet ones.
 */
export function recentLoad(buckets: readonly SliceLoadBucket[], now: number, spanMs: number = SHRINK_QUIET_MS): SliceLoad {
  const nowMinute = Math.floor(now / 60_000);
  const first = nowMinute - Math.ceil(spanMs / 60_000) + 1;
  let admissions = 0;
  let conflicts = 0;
  let oldest = Number.POSITIVE_INFINITY;
  for (const b of buckets) {
    if (b.minute > nowMinute) continue;
    oldest = Math.min(oldest, b.minute);
    if (b.minute < first) continue;
    admissions += b.admissions;
    conflicts += b.conflicts;
  }
  const covered = oldest === Number.POSITIVE_INFINITY ? 0 : now - oldest * 60_000;
  return { admissions, conflicts, spanMs: Math.min(spanMs, covered) };
}

/** What the shrink decision reads. */
export interface ShrinkInput {
  /** The slice count admissions use now. */
  readonly current: number;
  /** The operator's floor (1 when none was set). */
  readonly floor: number;
  /** The load over the last {@link SHRINK_QUIET_MS}, every process's reports summed. */
  readonly load: SliceLoad;
  readonly now: number;
  /** When the count last changed (epoch ms); undefined when never recorded. */
  readonly changedAt: number | undefined;
}

/**
 * The slice count a workspace should shrink to, or `current` when it should not shrink. See the
 * module comment for the rule.
 */
export function shrunkSliceCount(input: ShrinkInput): number {
  const { current, load, now, changedAt } = input;
  const floor = Math.max(1, input.floor);
  if (current <= floor) return current;
  if (changedAt !== undefined && now - changedAt < SHRINK_QUIET_MS) return current;
  if (load.spanMs < SHRINK_QUIET_MS) return current;
  // Over growth's threshold by a margin: more slices are still earning their keep.
  if (load.conflicts * SHRINK_CONFLICT_DIVISOR > load.admissions) return current;
  const rate = load.admissions === 0 ? 0 : load.conflicts / load.admissions;
  const rps = (load.admissions * 1000) / load.spanMs;
  const target = Math.max(floor, Math.ceil(current / 2), Math.ceil(rps / QUIET_RPS_PER_SLICE), Math.ceil(current * rate * SHRINK_CONFLICT_DIVISOR));
  return target < current ? target : current;
}
