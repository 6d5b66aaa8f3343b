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
 * - `SEEN#<usage pk>#<n>` / `SEEN`: which rows have been counted, a string set `ids` of their
 *   request ids (compacted: `compactId`), one item per usage partition and {@link SEEN_GROUP_MS} of
 *   settlement times (n = settledAt ÷ that). Added to in the same transaction as the totals, each
 *   id conditioned on not being in the set yet, so a row is counted once under any redelivery.
 *   A usage partition's records come from one stream shard, so a batch writes few of these, each
 *   once, for many rows; `ttl` 35 days on: far beyond the stream's 24 h retention, so no
 *   redelivery can outlive the record of it.
 */
import { GetCommand, QueryCommand, TransactWriteCommand, UpdateCommand, type DynamoDBDocumentClient, type TransactWriteCommandInput } from '@aws-sdk/lib-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
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

/**
 * Settlement times one group of counted rows spans. A batch writes a group once for all its rows
 * there; a longer span shares a write among more rows but grows the item, which every write of it
 * is charged for in full (16 bytes a row). 20 s keeps a group under 1 KB up to about 3,000 req/s
 * for one workspace, and at 10 req/s a 60 s batch writes about 3 groups for each usage partition
 * it holds rows of.
 */
export const SEEN_GROUP_MS = 20_000;

/** Rows of one group in one transaction, at most: each is a clause of its condition, which DynamoDB caps at 4 KB. */
export const MAX_SEEN_PER_GROUP = 120;

const DAY_S = 86_400;
/** How long a record of counted rows is kept; see the module comment. */
const MARKER_RETENTION_S = 35 * DAY_S;

/** Partition key of the group of counted rows a row of usage partition `usagePk`, settled at `settledAt`, goes in. */
export function seenGroupPk(usagePk: string, settledAt: number): string {
  return `SEEN#${usagePk}#${Math.floor(settledAt / SEEN_GROUP_MS)}`;
}

/** Sort key of a group of counted rows. */
export const SEEN_SK = 'SEEN';

const GATEWAY_ID = /^req_([0-9a-f]{24})$/;

/** A request id as a group records it: a gateway's id (`req_` and 24 hex digits) in 16 base64url characters, any other as it is. */
export function compactId(requestId: string): string {
  const m = GATEWAY_ID.exec(requestId);
  return m === null ? requestId : Buffer.from(m[1] as string, 'hex').toString('base64url');
}

/** A row to count: its request id and the group it goes in. */
export interface SeenRow {
  readonly requestId: string;
  readonly group: string;
}

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
  /** No row had been counted: the totals were added, once. */
  | { readonly kind: 'added' }
  /** These requests were counted before: nothing was written; add again without them. */
  | { readonly kind: 'seen'; readonly requestIds: readonly string[] }
  /** Another writer held one of the items: nothing was written; try again. */
  | { readonly kind: 'conflict' };

type TransactItems = NonNullable<TransactWriteCommandInput['TransactItems']>;
type CancelledError = Error & { CancellationReasons?: ({ Code?: string; Item?: Record<string, unknown> } | undefined)[] };

/** The ids a group item's `ids` set holds, whichever form the client handed it back in. */
function idsOf(item: Record<string, unknown> | undefined): Set<string> {
  if (item === undefined) return new Set();
  const values = Object.values(item);
  const raw = values.length > 0 && values.every((v) => v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof Set) && Object.keys(v).length === 1);
  const plain = raw ? unmarshall(item as Record<string, AttributeValue>) : item;
  const ids = plain.ids;
  return ids instanceof Set ? new Set([...ids].map(String)) : new Set();
}

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
   * Adds `deltas` and records each of `rows` as counted in its group, all in one transaction that
   * applies only if none of them had been counted before. At most {@link MAX_TRANSACT_ITEMS} items
   * in all, and {@link MAX_SEEN_PER_GROUP} rows of one group.
   *
   * @throws the client's error for anything but a cancellation on counted rows or a conflict
   */
  async add(rows: readonly SeenRow[], deltas: readonly RollupDelta[], now: number): Promise<AddResult> {
    const table = this.table();
    const ttl = Math.floor(now / 1000) + MARKER_RETENTION_S;
    const groups = new Map<string, SeenRow[]>();
    for (const row of rows) groups.set(row.group, [...(groups.get(row.group) ?? []), row]);
    // Groups first, so a cancellation reason's index names a group directly.
    const order = [...groups.keys()];
    const items: TransactItems = order.map((group) => {
      const members = groups.get(group) as SeenRow[];
      if (members.length > MAX_SEEN_PER_GROUP) throw new RangeError(`${members.length} rows of one group in a transaction (at most ${MAX_SEEN_PER_GROUP})`);
      const values: Record<string, unknown> = { ':ids': new Set(members.map((r) => compactId(r.requestId))), ':ttl': ttl };
      members.forEach((r, i) => (values[`:i${i}`] = compactId(r.requestId)));
      return {
        Update: {
          TableName: table,
          Key: { pk: group, sk: SEEN_SK },
          // Each row counted once: a redelivered one cancels here, and what the group holds comes back.
          ConditionExpression: members.map((_, i) => `NOT contains(#ids, :i${i})`).join(' AND '),
          UpdateExpression: 'ADD #ids :ids SET #ttl = :ttl',
          ExpressionAttributeNames: { '#ids': 'ids', '#ttl': 'ttl' },
          ExpressionAttributeValues: values,
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        },
      };
    });
    for (const d of deltas) items.push({ Update: { TableName: table, Key: { pk: rollupPk(d.workspaceId, d.period, d.periodId, d.shard ?? 0), sk: d.sk }, ...addExpression(d) } });
    if (items.length > MAX_TRANSACT_ITEMS) throw new RangeError(`a rollup transaction of ${items.length} items (at most ${MAX_TRANSACT_ITEMS})`);
    try {
      await this.doc.send(new TransactWriteCommand({ TransactItems: items }));
      return { kind: 'added' };
    } catch (err) {
      if (!isCancelled(err)) throw err;
      const reasons = err.CancellationReasons ?? [];
      const seen: string[] = [];
      for (const [i, group] of order.entries()) {
        if (reasons[i]?.Code !== 'ConditionalCheckFailed') continue;
        const held = reasons[i]?.Item !== undefined ? idsOf(reasons[i]?.Item) : await this.groupIds(group);
        for (const r of groups.get(group) ?? []) if (held.has(compactId(r.requestId))) seen.push(r.requestId);
      }
      if (seen.length > 0) return { kind: 'seen', requestIds: seen };
      // Other shards' batches add to the same totals at the same moment: a conflict says nothing
      // about the data.
      const conflictOnly = reasons.some((r) => r?.Code === 'TransactionConflict') && reasons.every((r) => r?.Code === undefined || r.Code === 'None' || r.Code === 'TransactionConflict');
      if (conflictOnly) return { kind: 'conflict' };
      throw err;
    }
  }

  /** The ids a group holds, read strongly consistent (when a cancellation did not hand them back). */
  private async groupIds(group: string): Promise<Set<string>> {
    const got = await this.doc.send(new GetCommand({ TableName: this.table(), Key: { pk: group, sk: SEEN_SK }, ConsistentRead: true }));
    return idsOf(got.Item);
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
