/**
 * A workspace's recent admissions and transaction conflicts, every process's reports summed, and
 * the ledger's hook that shrinks a cooled workspace's slices from them.
 *
 * Item (ledger table): `WS#<ws>` / `SLICESTATS`, beside slice 0 but not on it (slice 0 is the
 * hottest item a workspace has; this one is written once a minute or once per
 * {@link FLUSH_ADMISSIONS} admissions per process). It keeps {@link STATS_BUCKETS} one-minute
 * buckets in a ring: `m<k>` (the epoch minute the bucket holds), `a<k>` admissions, `c<k>` of
 * them met a conflict, k = minute mod {@link STATS_BUCKETS}. A bucket left from an earlier lap is
 * recognised by its minute and overwritten.
 *
 * The decision is `shrunkSliceCount` (`lambdas/core/slice-shrink.ts`); the consolidation is
 * `consolidateSlices` (`ledger.ts`), each move conditioned on what was read.
 */
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { DocumentSender } from '../adapters/dynamo-wire';
import { SHRINK_QUIET_MS, recentLoad, shrunkSliceCount, type SliceLoad, type SliceLoadBucket } from '../core/slice-shrink';
import { sliceKey, slicePk } from './keys';

/** Sort key of a workspace's admission statistics, in slice 0's partition. */
export const SLICE_STATS_SK = 'SLICESTATS';
/**
 * One-minute buckets kept: the span shrinking judges and five more, so a bucket older than the
 * span is still there to show the reports cover it (a ring of exactly the span would overwrite
 * that proof at every turn of the minute).
 */
export const STATS_BUCKETS = 20;
/** A process reports a workspace's counts after this many admissions there… */
export const FLUSH_ADMISSIONS = 200;
/** …or at its first admission this long after its last report. */
export const FLUSH_INTERVAL_MS = 60_000;

function num(v: unknown): number {
  return typeof v === 'number' ? v : 0;
}

function isConditionFailure(err: unknown): boolean {
  return err instanceof Error && err.name === 'ConditionalCheckFailedException';
}

/** The buckets of a stats item as read. */
function bucketsOf(item: Record<string, unknown> | undefined): SliceLoadBucket[] {
  if (item === undefined) return [];
  const out: SliceLoadBucket[] = [];
  for (let k = 0; k < STATS_BUCKETS; k += 1) {
    if (typeof item[`m${k}`] !== 'number') continue;
    out.push({ minute: num(item[`m${k}`]), admissions: num(item[`a${k}`]), conflicts: num(item[`c${k}`]) });
  }
  return out;
}

/**
 * Adds one process's counts to the current minute's bucket and returns every bucket after. Two
 * conditional updates at most: add to the bucket if it holds this minute, else take it over if
 * it holds an older one (or none); a writer that took it over first is added to on a last try.
 */
export async function addSliceStats(db: DocumentSender, ledgerTable: string, workspaceId: string, counts: { admissions: number; conflicts: number }, now: number): Promise<SliceLoadBucket[]> {
  const minute = Math.floor(now / 60_000);
  const k = minute % STATS_BUCKETS;
  const key = { pk: slicePk(workspaceId, 0), sk: SLICE_STATS_SK };
  const names = { '#m': `m${k}`, '#a': `a${k}`, '#c': `c${k}` };
  const values = { ':m': minute, ':a': counts.admissions, ':c': counts.conflicts };
  const add = async (): Promise<SliceLoadBucket[] | undefined> => {
    try {
      const out = await db.send(
        new UpdateCommand({ TableName: ledgerTable, Key: key, UpdateExpression: 'ADD #a :a, #c :c', ConditionExpression: '#m = :m', ExpressionAttributeNames: names, ExpressionAttributeValues: values, ReturnValues: 'ALL_NEW' }),
      );
      return bucketsOf(out.Attributes);
    } catch (err) {
      if (isConditionFailure(err)) return undefined;
      throw err;
    }
  };
  const added = await add();
  if (added !== undefined) return added;
  try {
    const out = await db.send(
      new UpdateCommand({
        TableName: ledgerTable,
        Key: key,
        UpdateExpression: 'SET #m = :m, #a = :a, #c = :c',
        // Only a bucket of an earlier lap (or none) is taken over: this minute's counts are added to.
        ConditionExpression: 'attribute_not_exists(#m) OR #m < :m',
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
        ReturnValues: 'ALL_NEW',
      }),
    );
    return bucketsOf(out.Attributes);
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
  }
  return (await add()) ?? [];
}

/** A workspace's reported buckets (eventually consistent reads are enough for a rate). */
export async function readSliceStats(db: DocumentSender, ledgerTable: string, workspaceId: string): Promise<SliceLoadBucket[]> {
  const got = await db.send(new GetCommand({ TableName: ledgerTable, Key: { pk: slicePk(workspaceId, 0), sk: SLICE_STATS_SK } }));
  return bucketsOf(got.Item);
}

/** What slice 0 says of the slice count. */
export interface SliceCountView {
  readonly count: number;
  /** The operator's floor; 1 when none was set. */
  readonly floor: number;
  /** The highest count ever active (every slice up to it is read). */
  readonly high: number;
  /** When the count last changed (epoch ms); undefined when never recorded. */
  readonly changedAt: number | undefined;
}

/** Slice 0's slice count, floor and last change, read consistently; undefined when the workspace has no ledger. */
export async function readSliceCount(db: DocumentSender, ledgerTable: string, workspaceId: string): Promise<SliceCountView | undefined> {
  const got = await db.send(new GetCommand({ TableName: ledgerTable, Key: sliceKey(workspaceId, 0), ConsistentRead: true }));
  if (got.Item === undefined) return undefined;
  const count = num(got.Item.sliceCount) || 1;
  return {
    count,
    floor: num(got.Item.sliceFloor) || 1,
    high: Math.max(count, num(got.Item.sliceHigh) || 1),
    changedAt: typeof got.Item.sliceChangedAt === 'number' ? got.Item.sliceChangedAt : undefined,
  };
}

/** Shrinks a workspace's slices from `from` to `to` (conditioned on the count still being `from`); true when it did. */
export type ConsolidateSlices = (workspaceId: string, from: number, to: number) => Promise<boolean>;

interface Tally {
  admissions: number;
  conflicts: number;
  since: number;
  busy: boolean;
  /** The slice count the process last admitted with. */
  believedCount: number;
}

/**
 * The ledger's hook: counts each admission and whether it met a conflict, per workspace, reports
 * them now and then ({@link addSliceStats}), and when the summed load says so
 * ({@link shrunkSliceCount}) shrinks the workspace's slices. Counting is in memory at admission;
 * the report is made from a settlement ({@link SliceStatsRecorder.flush}), after the reply, so it
 * never shares the window before a first byte with an admission. Never throws into either: a
 * report lost is a minute's sample lost, nothing else.
 */
export class SliceStatsRecorder {
  private readonly tallies = new Map<string, Tally>();

  /**
   * @param db the ledger's client
   * @param ledgerTable the ledger table's full name
   * @param consolidate the ledger's own consolidation (`consolidateSlices`)
   * @param clock epoch ms; wall time, not a request's, so a test's made-up instants never report
   */
  constructor(
    private readonly db: DocumentSender,
    private readonly ledgerTable: string,
    private readonly consolidate: ConsolidateSlices,
    private readonly clock: () => number = Date.now,
  ) {}

  /**
   * Counts one admission of `workspaceId`, in memory. `believedCount` is the slice count the
   * process admits with: at 1 there is nothing to shrink, and no read is spent on it.
   */
  note(workspaceId: string, conflicted: boolean, believedCount: number): void {
    let t = this.tallies.get(workspaceId);
    if (t === undefined) {
      t = { admissions: 0, conflicts: 0, since: this.clock(), busy: false, believedCount };
      this.tallies.set(workspaceId, t);
    }
    t.admissions += 1;
    if (conflicted) t.conflicts += 1;
    t.believedCount = believedCount;
  }

  /**
   * Reports what was counted for `workspaceId`, when a report is due; called after a settlement.
   *
   * @returns the report under way, if this call started one (tests await it)
   */
  flush(workspaceId: string): Promise<void> | undefined {
    const t = this.tallies.get(workspaceId);
    if (t === undefined || t.admissions === 0) return undefined;
    const now = this.clock();
    // A workspace on one slice that met no conflict has nothing to shrink and nothing to tell an
    // operator a minute at a time: it reports only every FLUSH_ADMISSIONS, so a quiet workspace pays nothing.
    const worthAMinute = t.believedCount > 1 || t.conflicts > 0;
    if (t.busy || (t.admissions < FLUSH_ADMISSIONS && (!worthAMinute || now - t.since < FLUSH_INTERVAL_MS))) return undefined;
    const counts = { admissions: t.admissions, conflicts: t.conflicts };
    t.admissions = 0;
    t.conflicts = 0;
    t.since = now;
    t.busy = true;
    const tally = t;
    return this.report(workspaceId, counts, t.believedCount, now)
      .catch(() => undefined)
      .finally(() => {
        tally.busy = false;
      });
  }

  private async report(workspaceId: string, counts: { admissions: number; conflicts: number }, believedCount: number, now: number): Promise<void> {
    const buckets = await addSliceStats(this.db, this.ledgerTable, workspaceId, counts, now);
    if (believedCount <= 1) return;
    const load: SliceLoad = recentLoad(buckets, now, SHRINK_QUIET_MS);
    // Judged first on what this process believes, so a workspace that should not shrink costs no read.
    if (shrunkSliceCount({ current: believedCount, floor: 1, load, now, changedAt: undefined }) >= believedCount) return;
    const view = await readSliceCount(this.db, this.ledgerTable, workspaceId);
    if (view === undefined) return;
    const to = shrunkSliceCount({ current: view.count, floor: view.floor, load, now, changedAt: view.changedAt });
    if (to < view.count) await this.consolidate(workspaceId, view.count, to);
  }
}
