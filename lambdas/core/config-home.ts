/**
 * The configuration home of a stage with several regions (docs/regions.md, "Configuration"): the
 * one region whose management API accepts changes. Pure: which region it is from the recorded
 * move, and whether a move may be made, with no store and no clock of its own.
 *
 * It is the stage's home region (the first of `SLUICE_REGIONS`) until an operator moves it with
 * `sluice stage config-home <region>`, which the target region's management API records on one
 * replicated item. Each region reads that item in its own replica, so a move reaches a region
 * with replication plus {@link CONFIG_HOME_CACHE_MS}.
 */

/**
 * How long a management API process keeps the configuration home it read before reading it again,
 * milliseconds: a move takes effect in the region that made it at once (the process that wrote it)
 * and in its other processes within this, and in every other region within replication plus this.
 * The gateways' record cache is as long (`SLUICE_CACHE_TTL_MS`, 5 s by default).
 */
export const CONFIG_HOME_CACHE_MS = 5_000;

/** The recorded move, as the replicated item holds it. */
export interface ConfigHomeRecord {
  /** The configuration home it names. */
  readonly region: string;
  /** 1 for the first move, one more for each move after it as the writing region read it. */
  readonly generation: number;
  /** When it was written, epoch milliseconds (the writing region's clock). */
  readonly at: number;
  /** Who moved it: the IAM principal (or `local`). */
  readonly by: string;
  /** The management request that moved it (its audit entry has the same id). */
  readonly requestId: string;
}

/**
 * The configuration home: the recorded region when it is one of the stage's regions, else the
 * stage's home region (no move recorded, or one naming a region the stage no longer lists).
 */
export function configurationHome(regions: readonly string[], record: ConfigHomeRecord | undefined): string {
  const home = regions[0];
  if (home === undefined) throw new RangeError('a stage lists at least one region');
  return record !== undefined && regions.includes(record.region) ? record.region : home;
}

/** Why a move is refused, in the management API's codes. */
export type MoveRefusal =
  | { readonly code: 'nothing_to_move'; readonly message: string }
  | { readonly code: 'invalid_argument'; readonly message: string };

/**
 * Whether the management API running in `own` may record `target` as the configuration home of a
 * stage with `regions` (undefined: one region). Only the target's own management API records a
 * move: it writes the item in its own region, which it can do while any other region (the old
 * home) is lost, and it is the home the moment it has written it. Moving to the region that is
 * already the home is allowed (it writes a new generation, which settles a split after two moves
 * at once: docs/regions.md).
 */
export function checkMove(regions: readonly string[] | undefined, own: string | undefined, target: string): MoveRefusal | undefined {
  if (regions === undefined || regions.length < 2 || own === undefined) {
    return { code: 'nothing_to_move', message: 'this stage runs in one region: its configuration home is where it runs, and there is nothing to move' };
  }
  if (!regions.includes(target)) return { code: 'invalid_argument', message: `${JSON.stringify(target)} is not one of the stage's regions (${regions.join(', ')})` };
  if (target !== own) {
    return {
      code: 'invalid_argument',
      message: `this management API is ${own}'s: a move to ${target} is recorded by ${target}'s own management API (its stack's AdminUrl), which can write it while ${own} or any other region is lost`,
    };
  }
  return undefined;
}

/** The record of a move to `region` after `before` (none: the first move). */
export function nextRecord(before: ConfigHomeRecord | undefined, move: { readonly region: string; readonly at: number; readonly by: string; readonly requestId: string }): ConfigHomeRecord {
  return { region: move.region, generation: (before?.generation ?? 0) + 1, at: move.at, by: move.by, requestId: move.requestId };
}

/** A cached value and when it was read. */
export interface Cached<T> {
  readonly value: T;
  readonly readAt: number;
}

/** Whether a configuration home read at `cached.readAt` is still used at `now`. */
export function cacheFresh<T>(cached: Cached<T> | undefined, now: number, ttlMs: number = CONFIG_HOME_CACHE_MS): cached is Cached<T> {
  return cached !== undefined && now >= cached.readAt && now - cached.readAt < ttlMs;
}
