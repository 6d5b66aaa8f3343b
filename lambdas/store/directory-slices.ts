/**
 * The slice count of a workspace's ledger, as an operator sees and sets it: the count admissions
 * use, the operator's floor (automatic growth and shrinking keep to it), the highest count ever
 * active, when it last changed, and the recent load every gateway process reported (admissions,
 * conflicts, the conflict rate), with what the automatic rules would do with it.
 */
import { GROWTH_CONFLICT_RATE, SHRINK_QUIET_MS, recentLoad, shrunkSliceCount } from '../core/slice-shrink';
import { setLedgerSlices } from './balance';
import type { AdminContext } from './directory-context';
import { nowOf, table } from './directory-context';
import { requireWorkspace } from './directory-common';
import { ValidationError, WorkspaceNotFoundError } from './directory-errors';
import { MAX_SLICES } from './keys';
import { readRegionalBalance, type RegionalBalance } from './regions-balance';
import { readSliceCount, readSliceStats } from './slice-stats';
import { requireHomeRegionItems } from './config-home';

/** A workspace's slices, for `sluice workspace slices`. */
export interface SlicesView {
  readonly workspaceId: string;
  /** Slices admissions use now. */
  readonly slices: number;
  /** The operator's setting: automatic growth starts from it, shrinking never goes below it. */
  readonly floor: number;
  /** Highest count ever active; slices up to it are still read. */
  readonly high: number;
  readonly maxSlices: number;
  /** ISO time of the last change of the count; null when none was recorded. */
  readonly changedAt: string | null;
  /** The last minutes of load as the gateway processes reported it. */
  readonly recent: {
    /** Minutes the reports cover (at most the span shrinking judges). */
    readonly minutes: number;
    readonly admissions: number;
    readonly conflicts: number;
    /** Conflicts per admission; null with no admissions. */
    readonly conflictRate: number | null;
    readonly admissionsPerSecond: number;
  };
  /** What the automatic rules would do on this load: growth's threshold, and the count shrinking would go to (null: none). */
  readonly automatic: { readonly growsAboveConflictRate: number; readonly wouldShrinkTo: number | null };
  /** In a stage with several regions: each region's money, what is in transit, and what is stranded in the regions named down. */
  readonly regions?: RegionalBalance;
}

function ledgerTables(ctx: AdminContext): { ledger: string; usage: string } {
  return { ledger: table(ctx, 'ledger'), usage: table(ctx, 'usage') };
}

/** A workspace's slice count, floor and recent load. Throws `WorkspaceNotFoundError`. */
export async function showSlices(ctx: AdminContext, input: { workspaceId: string; down?: readonly string[] }): Promise<SlicesView> {
  const { workspaceId } = input;
  await requireWorkspace(ctx, workspaceId);
  const ledger = table(ctx, 'ledger');
  const [count, buckets] = await Promise.all([readSliceCount(ctx.doc, ledger, workspaceId), readSliceStats(ctx.doc, ledger, workspaceId)]);
  if (count === undefined) throw new WorkspaceNotFoundError(workspaceId);
  const now = nowOf(ctx);
  const load = recentLoad(buckets, now, SHRINK_QUIET_MS);
  const shrinkTo = shrunkSliceCount({ current: count.count, floor: count.floor, load, now, changedAt: count.changedAt });
  return {
    workspaceId,
    slices: count.count,
    floor: count.floor,
    high: count.high,
    maxSlices: MAX_SLICES,
    changedAt: count.changedAt === undefined ? null : new Date(count.changedAt).toISOString(),
    recent: {
      // The minute under way counts as one.
      minutes: Math.ceil(load.spanMs / 60_000),
      admissions: load.admissions,
      conflicts: load.conflicts,
      conflictRate: load.admissions === 0 ? null : load.conflicts / load.admissions,
      admissionsPerSecond: load.spanMs === 0 ? 0 : (load.admissions * 1000) / load.spanMs,
    },
    automatic: { growsAboveConflictRate: GROWTH_CONFLICT_RATE, wouldShrinkTo: shrinkTo < count.count ? shrinkTo : null },
    ...(ctx.regions === undefined ? {} : { regions: await readRegionalBalance(ctx.doc, ledgerTables(ctx), ctx.regions, workspaceId, input.down ?? []) }),
  };
}

/**
 * Sets a workspace's slice count and floor (1..{@link MAX_SLICES}). Lowering it consolidates the
 * retired slices into slice 0 at once, each move conditioned on what was read, so no unit is lost
 * under load. Returns the view after, and the count before.
 */
export async function setSlices(ctx: AdminContext, input: { workspaceId: string; count: number }): Promise<SlicesView & { readonly previous: number }> {
  const { workspaceId, count } = input;
  if (!Number.isSafeInteger(count) || count < 1 || count > MAX_SLICES) throw new ValidationError(`a workspace has 1 to ${MAX_SLICES} ledger slices, got ${String(count)}`);
  // The count and the consolidation are the home region's slice items'.
  requireHomeRegionItems(ctx, "setting a workspace's slice count");
  await requireWorkspace(ctx, workspaceId);
  const before = await readSliceCount(ctx.doc, table(ctx, 'ledger'), workspaceId);
  if (before === undefined) throw new WorkspaceNotFoundError(workspaceId);
  await setLedgerSlices(ctx.doc, ledgerTables(ctx), workspaceId, count);
  return { ...(await showSlices(ctx, { workspaceId })), previous: before.count };
}
