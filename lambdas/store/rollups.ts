/**
 * The rollups table: the key layout of the aggregator's totals and of its de-duplication markers,
 * the one transaction that adds a batch's totals, and the query that reads a period back. Every
 * expression the aggregator and its reports use lives here.
 *
 * Items (rollups table, pk/sk):
 * - `WS#<workspaceId>#DAY#<yyyy-mm-dd>` and `WS#<workspaceId>#MONTH#<yyyy-mm>` (UTC, from the
 *   row's `startedAt`), each with sk `ALL`, `KEY#<keyId>` and `MODEL#<servedBy or requestedModel>`;
 *   numeric attributes added: `requests`, `inputTokens`, `cachedInputTokens`, `outputTokens`,
 *   `reasoningTokens`, `chargeMicros`, `uncollectedMicros`, `byokRequests`, `outcome_<outcome>`.
 *   That partition is shard 0 of the period.
 * - Shards 1..{@link ROLLUP_SHARDS}−1 of a hot workspace's period: the same items under
 *   `WS#<workspaceId>#DAY#<yyyy-mm-dd>#R<n>` (and `#MONTH#…#R<n>`), each its own partition key
 *   value, so a hot workspace's totals take {@link ROLLUP_SHARDS} times DynamoDB's 1,000 write
 *   units per second per partition key value. A report sums a period's shards.
 * - `SHARDS` in shard 0's partition: written (before any of their data) when the period has data
 *   on shards other than 0. A report reads shard 0 (one Query) and the others only when it is
 *   there, so a quiet workspace's period stays one Query.
 * - `SEEN#<requestId>` / `SEEN`, with `ttl` 35 days on: far beyond the stream's 24 h retention,
 *   so no redelivery can outlive its marker.
 */
import { QueryCommand, TransactWriteCommand, UpdateCommand, type DynamoDBDocumentClient, type TransactWriteCommandInput } from '@aws-sdk/lib-dynamodb';
import type { Outcome } from '../shared/records';

/** The period a rollup item totals. */
export type RollupPeriod = 'day' | 'month';

/**
 * Shards a hot workspace's period is spread over. A batch writes one shard per workspace (its
 * 14 or so totals items), so the period's write units are divided by this count; a report of a
 * spread period reads this many partitions.
 */
export const ROLLUP_SHARDS = 8;

/**
 * Partition key of a workspace's totals for one day (`yyyy-mm-dd`) or month (`yyyy-mm`), on one
 * shard; shard 0 keeps the historical key.
 */
export function rollupPk(workspaceId: string, period: RollupPeriod, periodId: string, shard = 0): string {
  const base = `WS#${workspaceId}#${period === 'day' ? 'DAY' : 'MONTH'}#${periodId}`;
  return shard === 0 ? base : `${base}#R${shard}`;
}

/** Every shard's partition key of one period, shard 0 first. */
export function allRollupPks(workspaceId: string, period: RollupPeriod, periodId: string): string[] {
  return Array.from({ length: ROLLUP_SHARDS }, (_, i) => rollupPk(workspaceId, period, periodId, i));
}

/** Sort key, in shard 0's partition, of the item that says the period is spread over shards. */
export const ROLLUP_SHARDS_SK = 'SHARDS';

/** Sort keys of the totals items within a period. */
export const ROLLUP_SK = {
  all: 'ALL',
  key: (keyId: string): string => `KEY#${keyId}`,
  model: (model: string): string => `MODEL#${model}`,
} as const;

/** Most actions one DynamoDB transaction may hold. */
export const MAX_TRANSACT_ITEMS = 100;

const DAY_S = 86_400;
/** How long a de-duplication marker is kept; see the module comment. */
const MARKER_RETENTION_S = 35 * DAY_S;

/** The counts a rollup item adds up: what a batch adds to it, and what a report reads back. */
export interface RollupTotals {
  readonly requests: number;
  readonly byokRequests: number;
  readonly inputTokens: number;
  readonly cachedInputTokens: number;
  readonly outputTokens: number;
  readonly reasoningTokens: number;
  readonly chargeMicros: number;
  readonly uncollectedMicros: number;
  /** Requests by how they ended; only outcomes with a count. */
  readonly outcomes: Readonly<Partial<Record<Outcome, number>>>;
}

/** What one totals item gains from a batch. */
export interface RollupDelta extends RollupTotals {
  readonly workspaceId: string;
  readonly period: RollupPeriod;
  readonly periodId: string;
  readonly sk: string;
  /** The shard written (0..{@link ROLLUP_SHARDS}−1); absent: 0. */
  readonly shard?: number;
}

/** What came of {@link RollupStore.add}. */
export type AddResult =
  /** Every marker was new: the totals were added, once. */
  | { readonly kind: 'added' }
  /** These requests were counted before: nothing was written; add again without them. */
  | { readonly kind: 'seen'; readonly requestIds: readonly string[] }
  /** Another writer held one of the items: nothing was written; try again. */
  | { readonly kind: 'conflict' };

type TransactItems = NonNullable<TransactWriteCommandInput['TransactItems']>;
type CancelledError = Error & { CancellationReasons?: ({ Code?: string } | undefined)[] };

function isCancelled(err: unknown): err is CancelledError {
  return err instanceof Error && err.name === 'TransactionCanceledException';
}

/** The rollups table as the aggregator writes it. */
export class RollupStore {
  /**
   * @param doc the SDK document client
   * @param table the rollups table's full name, read once per {@link add}
   */
  constructor(
    private readonly doc: Pick<DynamoDBDocumentClient, 'send'>,
    private readonly table: () => string,
  ) {}

  /**
   * Adds `deltas` and creates a marker for each of `requestIds`, all in one transaction that
   * applies only if no marker existed before. At most {@link MAX_TRANSACT_ITEMS} items in all.
   *
   * @throws the client's error for anything but a cancellation on markers or a conflict
   */
  async add(requestIds: readonly string[], deltas: readonly RollupDelta[], now: number): Promise<AddResult> {
    const table = this.table();
    const ttl = Math.floor(now / 1000) + MARKER_RETENTION_S;
    // Markers first, so a cancellation reason's index names the request directly.
    const items: TransactItems = requestIds.map((requestId) => ({
      Put: {
        TableName: table,
        Item: { pk: `SEEN#${requestId}`, sk: 'SEEN', ttl },
        // Created once per request: a redelivered row cancels here and adds nothing.
        ConditionExpression: 'attribute_not_exists(pk)',
      },
    }));
    for (const d of deltas) items.push({ Update: { TableName: table, Key: { pk: rollupPk(d.workspaceId, d.period, d.periodId, d.shard ?? 0), sk: d.sk }, ...addExpression(d) } });
    if (items.length > MAX_TRANSACT_ITEMS) throw new RangeError(`a rollup transaction of ${items.length} items (at most ${MAX_TRANSACT_ITEMS})`);
    try {
      await this.doc.send(new TransactWriteCommand({ TransactItems: items }));
      return { kind: 'added' };
    } catch (err) {
      if (!isCancelled(err)) throw err;
      const reasons = err.CancellationReasons ?? [];
      const seen = requestIds.filter((_, i) => reasons[i]?.Code === 'ConditionalCheckFailed');
      if (seen.length > 0) return { kind: 'seen', requestIds: seen };
      // Other shards' batches add to the same totals at the same moment: a conflict says nothing
      // about the data.
      const conflictOnly = reasons.some((r) => r?.Code === 'TransactionConflict') && reasons.every((r) => r?.Code === undefined || r.Code === 'None' || r.Code === 'TransactionConflict');
      if (conflictOnly) return { kind: 'conflict' };
      throw err;
    }
  }

  /**
   * Marks a period as spread over shards: `SHARDS` in shard 0's partition. Written (and awaited)
   * before the first transaction that adds to another shard of that period, so a report that
   * finds no mark has nothing to miss. Idempotent: a plain `SET`.
   */
  async markSpread(workspaceId: string, period: RollupPeriod, periodId: string): Promise<void> {
    await this.doc.send(
      new UpdateCommand({
        TableName: this.table(),
        Key: { pk: rollupPk(workspaceId, period, periodId), sk: ROLLUP_SHARDS_SK },
        UpdateExpression: 'SET shardCount = :n',
        ExpressionAttributeValues: { ':n': ROLLUP_SHARDS },
      }),
    );
  }
}

const COUNTERS = ['requests', 'byokRequests', 'inputTokens', 'cachedInputTokens', 'outputTokens', 'reasoningTokens', 'chargeMicros', 'uncollectedMicros'] as const;

/** `ADD` for every counter and each outcome seen; `SET` of the plain attributes the CLI reads. */
function addExpression(d: RollupDelta): { UpdateExpression: string; ExpressionAttributeNames: Record<string, string>; ExpressionAttributeValues: Record<string, unknown> } {
  const names: Record<string, string> = { '#period': 'period' };
  const values: Record<string, unknown> = { ':ws': d.workspaceId, ':period': d.period, ':periodId': d.periodId };
  const adds: string[] = [];
  for (const c of COUNTERS) {
    adds.push(`${c} :${c}`);
    values[`:${c}`] = d[c];
  }
  Object.entries(d.outcomes).forEach(([outcome, n], i) => {
    names[`#o${i}`] = `outcome_${outcome}`;
    values[`:o${i}`] = n;
    adds.push(`#o${i} :o${i}`);
  });
  return {
    // The plain attributes let the CLI read an item without parsing its keys.
    UpdateExpression: `ADD ${adds.join(', ')} SET workspaceId = :ws, #period = :period, periodId = :periodId`,
    ExpressionAttributeNames: names,
    ExpressionAttributeValues: values,
  };
}

/** Every item of one rollup partition (a workspace's day or month), page by page, in sort-key order. */
export async function* rollupItems(doc: DynamoDBDocumentClient, table: string, pk: string): AsyncIterable<Record<string, unknown>> {
  let start: Record<string, unknown> | undefined;
  do {
    const page = await doc.send(new QueryCommand({ TableName: table, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': pk }, ExclusiveStartKey: start }));
    yield* page.Items ?? [];
    start = page.LastEvaluatedKey;
  } while (start !== undefined);
}
