/**
 * The usage aggregator's use case: adds each settled request's usage row to its workspace's daily
 * and monthly totals (overall, by key, by model), exactly once, summing a batch in memory first.
 *
 * A request's row is on the stream twice or more (its open INSERT at admission, a hold growing,
 * its change to settled); it is counted at the one record whose new image says `settled` (a
 * settled row is never written again), and a row inserted settled by the code before rows had a
 * state is counted at its INSERT. The mapping's filter hands over only those (`mapping.ts`); the
 * aggregator checks again, since a redelivery or local mode may hand it anything.
 *
 * A batch's rows are summed per totals item and each total is written once, in one transaction
 * with the record of which rows are counted (the layout is in `lambdas/store/rollups.ts`): each
 * row's id is added to its group's set (its usage partition and 20 s of settlement times),
 * conditioned on not being in it yet. Stream delivery is at least once (a retried batch, a bisected
 * one, a replay from TRIM_HORIZON, overlapping invocations), and a redelivery need not be cut as
 * the first delivery was, so the record is per row, not per batch or per stream position: when a
 * transaction is cancelled on rows already counted, those rows are dropped, the rest are summed
 * again and written. (A watermark of the last sequence number applied per stream shard would cost
 * one small write per batch, but a Lambda stream event does not say which shard it came from, and
 * sequence numbers order records only within a shard.) A transaction holds at most 100 items, so a
 * batch that needs more (one update per group plus one per distinct total) is written in runs, in
 * order.
 *
 * A workspace with many rows in one batch (a hot one) has that batch's totals written to one of
 * `ROLLUP_SHARDS` partitions of its day and month, picked from the batch's own rows, and the
 * period marked as spread first (`lambdas/store/rollups.ts`): reports sum the shards. Which shard
 * takes a row does not matter to exactly-once, which rests on the row's marker alone.
 *
 * A record that cannot be read stops the batch there; runs are written with each workspace's rows
 * together (so a batch of many workspaces shares each one's totals), and when a run's write fails
 * (retried one row at a time, to find the row), the earliest record in stream order not yet
 * counted is reported, so the event source mapping retries from it (`ReportBatchItemFailures`):
 * every record before it is counted, and those after it that were are counted once all the same.
 */
import type { AttributeValue as SdkAttributeValue } from '@aws-sdk/client-dynamodb';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { DynamoDBBatchResponse, DynamoDBRecord, DynamoDBStreamEvent } from 'aws-lambda';
import type { Outcome } from '../shared/records';
import { usagePk } from '../store/keys';
import { RollupStore, type RollupDelta } from '../store/rollups';
import { chunkRows, rollupShards, seenGroupOf, sumRows, type UsageFacts } from './totals';

export { ROLLUP_SK, rollupPk, type RollupPeriod } from '../store/rollups';

/** What {@link aggregate} runs on. */
export interface AggregateDeps {
  readonly doc: DynamoDBDocumentClient;
  /** Full name of the rollups table. */
  readonly rollupsTable: string;
  /** Epoch ms, for the markers' expiry. @default Date.now */
  readonly clock?: () => number;
  /** Where error lines go. @default a line on stderr */
  readonly writeLine?: (line: string) => void;
  /**
   * In a stage with several regions: this region and its tag (`''` in the home region). A
   * replicated row appears in every region's stream; only its own region counts it (`region` its
   * own; a row without one, written before the stage had several regions, is the home region's),
   * into rollups and counted-row groups of its own (the tag after the workspace and the usage
   * partition), which no other region writes. @default one region: every row, today's keys
   */
  readonly region?: { readonly name: string; readonly tag: string };
}

/** Whether a settlement record's row is `region`'s to count (see {@link AggregateDeps.region}). */
export function countsHere(record: DynamoDBRecord, region: { readonly name: string; readonly tag: string }): boolean {
  const of = record.dynamodb?.NewImage?.region?.S;
  return of === region.name || (of === undefined && region.tag === '');
}

/** Every outcome a usage row may carry; each has its own `outcome_<name>` counter. */
export const OUTCOMES: readonly Outcome[] = ['ok', 'provider_error', 'upstream_fault', 'client_disconnected', 'balance_exhausted', 'timeout', 'swept'];

const MAX_CONFLICT_RETRIES = 8;

/**
 * Periods this process has marked as spread over rollup shards (`workspace period id`): the
 * mark is written once per process and period, before the first write off shard 0. Bounded: a
 * mark written again costs one small write.
 */
const marked = new Set<string>();
const MAX_MARKED = 10_000;

/** Writes the spread mark of every period a run's deltas add to off shard 0, unless this process did. */
async function markSpread(store: RollupStore, deltas: readonly RollupDelta[]): Promise<void> {
  for (const d of deltas) {
    if ((d.shard ?? 0) === 0) continue;
    const id = `${d.workspaceId} ${d.period} ${d.periodId}`;
    if (marked.has(id)) continue;
    await store.markSpread(d.workspaceId, d.period, d.periodId);
    if (marked.size >= MAX_MARKED) marked.clear();
    marked.add(id);
  }
}

/** A stream record that cannot be rolled up as it is; retrying will not help, but skipping would lose spend. */
export class MalformedUsageRecordError extends Error {
  override readonly name = 'MalformedUsageRecordError';
}

function isCount(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

/**
 * Whether a record is a row's settlement (counted), or something else on the usage stream (an open
 * row's INSERT, a hold growing, a TTL REMOVE), which is passed over. A settled row is never written
 * again, so its settlement is the only record that shows it settled; a row inserted settled
 * without a state (before rows had one) is counted at its INSERT.
 */
function isSettlement(record: DynamoDBRecord): boolean {
  const state = record.dynamodb?.NewImage?.state?.S;
  if (record.eventName === 'MODIFY') return state === 'settled';
  if (record.eventName === 'INSERT') return state === 'settled' || state === undefined;
  return false;
}

/** Reads the usage row of a settlement record; throws {@link MalformedUsageRecordError} on a row it cannot trust. */
function usageFacts(record: DynamoDBRecord): UsageFacts {
  const image = record.dynamodb?.NewImage;
  if (image === undefined) throw new MalformedUsageRecordError(`${String(record.eventName)} record without a NewImage (the stream must be NEW_IMAGE)`);
  // Lambda's attribute-value type spells binary as base64 strings; usage rows hold no binary.
  const row = unmarshall(image as Record<string, SdkAttributeValue>);
  const { workspaceId, requestId, keyId, servedBy, requestedModel, outcome, byok, startedAt, durationMs } = row;
  const counts = ['inputTokens', 'cachedInputTokens', 'outputTokens', 'reasoningTokens', 'chargeMicros'] as const;
  const bad = (what: string): MalformedUsageRecordError => new MalformedUsageRecordError(`usage row ${String(requestId)}: ${what}`);
  if (typeof workspaceId !== 'string' || typeof requestId !== 'string' || typeof keyId !== 'string') throw bad('missing ids');
  if (typeof outcome !== 'string' || !(OUTCOMES as readonly string[]).includes(outcome)) throw bad(`unknown outcome ${String(outcome)}`);
  if (!isCount(startedAt)) throw bad('bad startedAt');
  const model = typeof servedBy === 'string' && servedBy !== '' ? servedBy : requestedModel;
  if (typeof model !== 'string') throw bad('no model');
  for (const name of counts) if (!isCount(row[name])) throw bad(`bad ${name}`);
  const uncollected = row.uncollectedMicros;
  return {
    workspaceId,
    requestId,
    // The row's partition as written (or as the store derives it, for a row image without one).
    usagePk: typeof row.pk === 'string' ? row.pk : usagePk(workspaceId, requestId),
    settledAt: startedAt + (isCount(durationMs) ? durationMs : 0),
    keyId,
    model,
    outcome: outcome as Outcome,
    byok: byok === true,
    startedAt,
    inputTokens: row.inputTokens as number,
    cachedInputTokens: row.cachedInputTokens as number,
    outputTokens: row.outputTokens as number,
    reasoningTokens: row.reasoningTokens as number,
    chargeMicros: row.chargeMicros as number,
    uncollectedMicros: isCount(uncollected) ? uncollected : 0,
  };
}

/** A row of the batch with the record it came from. */
interface Row {
  readonly facts: UsageFacts;
  readonly sequence: string;
}

function pause(attempt: number): Promise<void> {
  const ms = Math.min(500, 10 * 2 ** attempt) * (0.5 + Math.random());
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Adds rows (whose transaction fits) exactly once: rows already counted are dropped and the
 * rest written again; conflicts are retried with backoff.
 */
async function addRows(store: RollupStore, rows: readonly Row[], shards: ReadonlyMap<string, number>, now: number): Promise<void> {
  let left = rows;
  for (let conflicts = 0; left.length > 0; ) {
    const deltas = sumRows(
      left.map((r) => r.facts),
      shards,
    );
    // The mark first: a report that does not find it reads shard 0 alone, so nothing may be on another shard yet.
    await markSpread(store, deltas);
    const result = await store.add(
      left.map((r) => ({ requestId: r.facts.requestId, group: seenGroupOf(r.facts) })),
      deltas,
      now,
    );
    if (result.kind === 'added') return;
    if (result.kind === 'seen') {
      const seen = new Set(result.requestIds);
      left = left.filter((r) => !seen.has(r.facts.requestId));
      continue;
    }
    conflicts += 1;
    if (conflicts > MAX_CONFLICT_RETRIES) throw new Error(`rollup transaction still conflicting after ${MAX_CONFLICT_RETRIES} retries`);
    await pause(conflicts);
  }
}

/** A record that could not be rolled up, and why. */
class RowFailure {
  constructor(
    readonly sequence: string,
    readonly error: unknown,
  ) {}
}

/**
 * Adds a run of rows; if its transaction fails, row by row, to find the row that fails. Returns the
 * rows now counted, and the error that stopped it, if one did.
 */
async function addRun(store: RollupStore, run: readonly Row[], shards: ReadonlyMap<string, number>, now: number): Promise<{ counted: readonly Row[]; error?: unknown }> {
  try {
    await addRows(store, run, shards, now);
    return { counted: run };
  } catch (err) {
    if (run.length === 1) return { counted: [], error: err };
  }
  const counted: Row[] = [];
  for (const row of run) {
    try {
      await addRows(store, [row], shards, now);
      counted.push(row);
    } catch (err) {
      return { counted, error: err };
    }
  }
  return { counted };
}

/**
 * The rows of a batch, each workspace's together (in stream order within it), so a run shares its
 * workspaces' totals among as many rows as it can: a batch of many workspaces, in stream order,
 * would write each workspace's totals once per run its rows fall in.
 */
function byWorkspace(rows: readonly Row[]): Row[] {
  const first = new Map<string, number>();
  rows.forEach((r, i) => {
    if (!first.has(r.facts.workspaceId)) first.set(r.facts.workspaceId, i);
  });
  return rows
    .map((r, i) => ({ r, i }))
    .sort((a, b) => (first.get(a.r.facts.workspaceId) as number) - (first.get(b.r.facts.workspaceId) as number) || a.i - b.i)
    .map(({ r }) => r);
}

/**
 * Rolls up a batch of usage stream records. Records other than a row's settlement are passed over
 * (`isSettlement`). On a failure the batch stops and the `SequenceNumber` of the earliest record not
 * yet counted is reported, so the mapping retries from it: every record before it is counted, and
 * one after it counted already is counted once all the same.
 */
export async function aggregate(deps: AggregateDeps, event: DynamoDBStreamEvent): Promise<DynamoDBBatchResponse> {
  const write = deps.writeLine ?? ((line: string) => void process.stderr.write(`${line}\n`));
  const store = new RollupStore(deps.doc, () => deps.rollupsTable);
  const now = (deps.clock ?? Date.now)();
  const rows: Row[] = [];
  const inBatch = new Set<string>();
  let failure: RowFailure | undefined;
  for (const record of event.Records) {
    if (!isSettlement(record)) continue;
    if (deps.region !== undefined && !countsHere(record, deps.region)) continue;
    const sequence = record.dynamodb?.SequenceNumber ?? record.eventID ?? '';
    let facts: UsageFacts;
    try {
      facts = usageFacts(record);
      // A region's rollups and counted-row groups are its own items (docs/regions.md): tagged.
      if (deps.region !== undefined && deps.region.tag !== '') facts = { ...facts, workspaceId: `${facts.workspaceId}${deps.region.tag}`, usagePk: `${facts.usagePk}${deps.region.tag}` };
    } catch (err) {
      failure = new RowFailure(sequence, err);
      break;
    }
    // A record delivered twice within one batch: counted once (its group's condition would refuse the pair).
    if (inBatch.has(facts.requestId)) continue;
    inBatch.add(facts.requestId);
    rows.push({ facts, sequence });
  }
  // One shard per workspace for the whole batch, chosen from the batch's own rows.
  const shards = rollupShards(rows.map((r) => r.facts));
  // Runs take a workspace's rows together. If one fails, what is reported is the earliest record,
  // in stream order, not yet counted: the mapping redelivers from it, rows already counted after it
  // are counted once all the same (their group refuses them), and none before it is left out.
  const counted = new Set<Row>();
  for (const run of chunkRows(byWorkspace(rows))) {
    const result = await addRun(store, run, shards, now);
    for (const row of result.counted) counted.add(row);
    if ('error' in result) {
      const first = rows.find((r) => !counted.has(r)) as Row;
      failure = new RowFailure(first.sequence, result.error);
      break;
    }
  }
  if (failure === undefined) return { batchItemFailures: [] };
  const err = failure.error;
  write(
    JSON.stringify({
      level: 'error',
      event: 'rollup_failed',
      sequenceNumber: failure.sequence,
      error: err instanceof Error ? `${err.name}: ${err.message}` : String(err),
    }),
  );
  return { batchItemFailures: [{ itemIdentifier: failure.sequence }] };
}
