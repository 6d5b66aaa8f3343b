/**
 * The aggregator's arithmetic, pure: which totals items a usage row adds to, which record of
 * counted rows it goes in, a batch's rows summed per item, and a batch cut into transactions that
 * DynamoDB accepts. No store, no clock.
 */
import { dayId, monthId } from '../core/windows';
import type { Outcome } from '../shared/records';
import { shardOf } from '../store/keys';
import { MAX_SEEN_PER_GROUP, MAX_TRANSACT_ITEMS, ROLLUP_SHARDS, ROLLUP_SK, seenGroupPk, type RollupDelta, type RollupPeriod } from '../store/rollups';

/** The fields of a usage row the totals need, checked. */
export interface UsageFacts {
  readonly workspaceId: string;
  readonly requestId: string;
  /** The row's partition (`<workspaceId>#U<n>`) and when it settled (epoch ms): its counted-rows group. */
  readonly usagePk: string;
  readonly settledAt: number;
  readonly keyId: string;
  /** The model that served, or the one the request named when none did. */
  readonly model: string;
  readonly outcome: Outcome;
  readonly byok: boolean;
  readonly startedAt: number;
  readonly inputTokens: number;
  readonly cachedInputTokens: number;
  readonly outputTokens: number;
  readonly reasoningTokens: number;
  readonly chargeMicros: number;
  readonly uncollectedMicros: number;
}

/** Where a row is added: its day and month, each overall, by key and by model. */
interface Target {
  readonly period: RollupPeriod;
  readonly periodId: string;
  readonly sk: string;
}

function targets(u: UsageFacts): Target[] {
  const out: Target[] = [];
  for (const [period, periodId] of [
    ['day', dayId(u.startedAt)],
    ['month', monthId(u.startedAt)],
  ] as const) {
    for (const sk of [ROLLUP_SK.all, ROLLUP_SK.key(u.keyId), ROLLUP_SK.model(u.model)]) out.push({ period, periodId, sk });
  }
  return out;
}

/** Items a row adds to: the six totals of its workspace's day and month. */
export const ITEMS_PER_ROW = 6;

const itemId = (workspaceId: string, t: Target): string => `${workspaceId}\u0000${t.period}\u0000${t.periodId}\u0000${t.sk}`;

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/**
 * Rows of one workspace in one batch from which its totals are spread over shards. Lambda fills a
 * batch past a few dozen records only when the stream has a backlog, which a quiet workspace
 * never makes; below this a batch writes shard 0, which a report reads with one Query.
 */
export const SPREAD_MIN_ROWS = 64;

/**
 * The rollup shard each workspace of a batch writes: 0, unless the batch holds at least
 * {@link SPREAD_MIN_ROWS} of its rows; then the shard the hash of its first row's request id
 * picks, so the same batch delivered again writes the same shard. One shard per workspace and
 * batch keeps a batch's items as few as unsharded (about 14 for a workspace), while a run of
 * batches spreads over {@link ROLLUP_SHARDS} partition key values. Only workspaces off shard 0
 * are in the map.
 */
export function rollupShards(rows: readonly UsageFacts[]): Map<string, number> {
  const first = new Map<string, string>();
  const count = new Map<string, number>();
  for (const u of rows) {
    if (!first.has(u.workspaceId)) first.set(u.workspaceId, u.requestId);
    count.set(u.workspaceId, (count.get(u.workspaceId) ?? 0) + 1);
  }
  const out = new Map<string, number>();
  for (const [ws, n] of count) {
    if (n < SPREAD_MIN_ROWS) continue;
    const shard = shardOf(first.get(ws) as string, ROLLUP_SHARDS);
    if (shard !== 0) out.set(ws, shard);
  }
  return out;
}

/**
 * The rows summed per totals item, in the order each item is first met. `shards` names the
 * rollup shard of a workspace that does not write shard 0 ({@link rollupShards}).
 */
export function sumRows(rows: readonly UsageFacts[], shards: ReadonlyMap<string, number> = new Map()): RollupDelta[] {
  const byItem = new Map<string, Mutable<RollupDelta> & { outcomes: Partial<Record<Outcome, number>> }>();
  for (const u of rows) {
    for (const t of targets(u)) {
      const id = itemId(u.workspaceId, t);
      let d = byItem.get(id);
      if (d === undefined) {
        const shard = shards.get(u.workspaceId) ?? 0;
        d = {
          workspaceId: u.workspaceId,
          ...t,
          ...(shard === 0 ? {} : { shard }),
          requests: 0,
          byokRequests: 0,
          inputTokens: 0,
          cachedInputTokens: 0,
          outputTokens: 0,
          reasoningTokens: 0,
          chargeMicros: 0,
          uncollectedMicros: 0,
          outcomes: {},
        };
        byItem.set(id, d);
      }
      d.requests += 1;
      d.byokRequests += u.byok ? 1 : 0;
      d.inputTokens += u.inputTokens;
      d.cachedInputTokens += u.cachedInputTokens;
      d.outputTokens += u.outputTokens;
      d.reasoningTokens += u.reasoningTokens;
      d.chargeMicros += u.chargeMicros;
      d.uncollectedMicros += u.uncollectedMicros;
      d.outcomes[u.outcome] = (d.outcomes[u.outcome] ?? 0) + 1;
    }
  }
  return [...byItem.values()];
}

/** The record of counted rows a row goes in (`lambdas/store/rollups.ts`): its partition and when it settled. */
export function seenGroupOf(u: Pick<UsageFacts, 'usagePk' | 'settledAt'>): string {
  return seenGroupPk(u.usagePk, u.settledAt);
}

/**
 * Cuts rows, in order, into runs whose transaction (one update per distinct group of counted rows
 * plus one per distinct totals item) fits in {@link MAX_TRANSACT_ITEMS}, with at most
 * {@link MAX_SEEN_PER_GROUP} rows of one group (each is a clause of that group's condition, and
 * DynamoDB takes a condition of 4 KB at most).
 */
export function chunkRows<T extends { readonly facts: UsageFacts }>(rows: readonly T[], limit = MAX_TRANSACT_ITEMS, perGroup = MAX_SEEN_PER_GROUP): T[][] {
  const chunks: T[][] = [];
  let current: T[] = [];
  let items = new Set<string>();
  let inGroup = new Map<string, number>();
  for (const row of rows) {
    const group = seenGroupOf(row.facts);
    const ids = [...targets(row.facts).map((t) => itemId(row.facts.workspaceId, t)), `seen\u0000${group}`];
    const union = new Set([...items, ...ids]);
    if (current.length > 0 && (union.size > limit || (inGroup.get(group) ?? 0) >= perGroup)) {
      chunks.push(current);
      current = [];
      items = new Set(ids);
      inGroup = new Map();
    } else items = union;
    inGroup.set(group, (inGroup.get(group) ?? 0) + 1);
    current.push(row);
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}
