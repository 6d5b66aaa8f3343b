/**
 * Reads the aggregator's rollups back for reports (the `sluice usage` command). One query per
 * period in the range, since each day or month of a workspace is its own partition; a period a
 * hot workspace spread over rollup shards (its shard 0 holds the `SHARDS` mark) is read from
 * every shard and summed item by item.
 */
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { tableName } from '../shared/schema';
import type { Outcome } from '../shared/records';
import { OUTCOMES } from './aggregate';
import { ROLLUP_SHARDS, ROLLUP_SHARDS_SK, rollupItems, rollupPk, type RollupPeriod, type RollupTotals } from '../store/rollups';

/** Which periods to read: days as `yyyy-mm-dd`, months as `yyyy-mm`, both ends included (UTC). */
export interface UsageQuery {
  readonly workspaceId: string;
  readonly period: RollupPeriod;
  readonly from: string;
  readonly to: string;
  /**
   * In a stage with several regions: every region's tag (`''` for the home region), whose
   * aggregators each keep rollups of their own (`WS#<ws><tag>#…`): a report adds them all.
   * @default one region
   */
  readonly regionTags?: readonly string[];
}

/** One totals item: a period's totals overall, for one key, or for one model. */
export interface UsageRow extends RollupTotals {
  readonly period: RollupPeriod;
  /** `yyyy-mm-dd` or `yyyy-mm`. */
  readonly periodId: string;
  readonly scope: 'all' | 'key' | 'model';
  /** The key id or model id; absent for `all`. */
  readonly id?: string;
}

/** Most periods one query may span: a year of days, ten years of months. */
export const MAX_PERIODS: Readonly<Record<RollupPeriod, number>> = { day: 366, month: 120 };

const DAY_RE = /^(\d{4})-(\d{2})-(\d{2})$/;
const MONTH_RE = /^(\d{4})-(\d{2})$/;
const pad = (n: number): string => String(n).padStart(2, '0');

/** Epoch ms of the UTC start of a `yyyy-mm-dd` or `yyyy-mm`, or undefined when it is not a real date. */
function startOf(period: RollupPeriod, id: string): number | undefined {
  const m = (period === 'day' ? DAY_RE : MONTH_RE).exec(id);
  if (m === null) return undefined;
  const y = Number(m[1]);
  const mo = Number(m[2]) - 1;
  const d = period === 'day' ? Number(m[3]) : 1;
  const ms = Date.UTC(y, mo, d);
  const back = new Date(ms);
  // Date.UTC rolls 2026-02-30 over into March: refuse it rather than read another day.
  if (back.getUTCFullYear() !== y || back.getUTCMonth() !== mo || back.getUTCDate() !== d) return undefined;
  return ms;
}

/**
 * The period ids from `from` to `to` inclusive.
 *
 * @throws RangeError when an end is not a valid id of the period, `from` is after `to`, or the
 * range spans more than {@link MAX_PERIODS}.
 */
export function periodIds(period: RollupPeriod, from: string, to: string): string[] {
  const start = startOf(period, from);
  const end = startOf(period, to);
  const shape = period === 'day' ? 'yyyy-mm-dd' : 'yyyy-mm';
  if (start === undefined) throw new RangeError(`from must be a ${shape} date, got ${JSON.stringify(from)}`);
  if (end === undefined) throw new RangeError(`to must be a ${shape} date, got ${JSON.stringify(to)}`);
  if (start > end) throw new RangeError(`from (${from}) is after to (${to})`);
  const ids: string[] = [];
  for (let d = new Date(start); d.getTime() <= end; ) {
    if (ids.length >= MAX_PERIODS[period]) throw new RangeError(`at most ${MAX_PERIODS[period]} ${period}s at once`);
    ids.push(period === 'day' ? `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}` : `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}`);
    d = period === 'day' ? new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1)) : new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1));
  }
  return ids;
}

function count(item: Record<string, unknown>, name: string): number {
  const v = item[name];
  return typeof v === 'number' ? v : 0;
}

function toRow(period: RollupPeriod, periodId: string, item: Record<string, unknown>): UsageRow | undefined {
  const sk = String(item.sk);
  let scope: UsageRow['scope'];
  let id: string | undefined;
  if (sk === 'ALL') scope = 'all';
  else if (sk.startsWith('KEY#')) [scope, id] = ['key', sk.slice(4)];
  else if (sk.startsWith('MODEL#')) [scope, id] = ['model', sk.slice(6)];
  else return undefined;
  const outcomes: Partial<Record<Outcome, number>> = {};
  for (const o of OUTCOMES) if (count(item, `outcome_${o}`) > 0) outcomes[o] = count(item, `outcome_${o}`);
  return {
    period,
    periodId,
    scope,
    ...(id === undefined ? {} : { id }),
    requests: count(item, 'requests'),
    byokRequests: count(item, 'byokRequests'),
    inputTokens: count(item, 'inputTokens'),
    cachedInputTokens: count(item, 'cachedInputTokens'),
    outputTokens: count(item, 'outputTokens'),
    reasoningTokens: count(item, 'reasoningTokens'),
    chargeMicros: count(item, 'chargeMicros'),
    uncollectedMicros: count(item, 'uncollectedMicros'),
    outcomes,
  };
}

function addTotals(a: UsageRow, b: UsageRow): UsageRow {
  const outcomes: Partial<Record<Outcome, number>> = { ...a.outcomes };
  for (const [o, n] of Object.entries(b.outcomes) as [Outcome, number][]) outcomes[o] = (outcomes[o] ?? 0) + n;
  return {
    ...a,
    requests: a.requests + b.requests,
    byokRequests: a.byokRequests + b.byokRequests,
    inputTokens: a.inputTokens + b.inputTokens,
    cachedInputTokens: a.cachedInputTokens + b.cachedInputTokens,
    outputTokens: a.outputTokens + b.outputTokens,
    reasoningTokens: a.reasoningTokens + b.reasoningTokens,
    chargeMicros: a.chargeMicros + b.chargeMicros,
    uncollectedMicros: a.uncollectedMicros + b.uncollectedMicros,
    outcomes,
  };
}

/** One row per sort key, summed over every shard's item of it, in sort-key order. */
function sumBySortKey(period: RollupPeriod, periodId: string, items: readonly Record<string, unknown>[]): UsageRow[] {
  const bySk = new Map<string, UsageRow>();
  for (const item of items) {
    const row = toRow(period, periodId, item);
    if (row === undefined) continue;
    const sk = String(item.sk);
    const had = bySk.get(sk);
    bySk.set(sk, had === undefined ? row : addTotals(had, row));
  }
  return [...bySk.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, row]) => row);
}

/** Queries run at once; a month of days is a burst of 31 small queries. */
const PARALLEL = 8;

/**
 * The workspace's totals items for every period in the range, in period order and, within a
 * period, `ALL` then keys then models (the sort-key order). Periods without traffic give no rows.
 *
 * @throws RangeError for a bad range (see {@link periodIds}).
 */
export async function readUsage(doc: DynamoDBDocumentClient, tablePrefix: string, query: UsageQuery): Promise<UsageRow[]> {
  const ids = periodIds(query.period, query.from, query.to);
  const table = tableName(tablePrefix, 'rollups');
  const results: UsageRow[][] = new Array<UsageRow[]>(ids.length);
  const readOne = async (index: number): Promise<void> => {
    const periodId = ids[index] as string;
    const items: Record<string, unknown>[] = [];
    for (const tag of query.regionTags ?? ['']) {
      const workspace = `${query.workspaceId}${tag}`;
      const own: Record<string, unknown>[] = [];
      for await (const item of rollupItems(doc, table, rollupPk(workspace, query.period, periodId))) own.push(item);
      if (own.some((i) => i.sk === ROLLUP_SHARDS_SK)) {
        const others = await Promise.all(
          Array.from({ length: ROLLUP_SHARDS - 1 }, async (_, i) => {
            const got: Record<string, unknown>[] = [];
            for await (const item of rollupItems(doc, table, rollupPk(workspace, query.period, periodId, i + 1))) got.push(item);
            return got;
          }),
        );
        own.push(...others.flat());
      }
      items.push(...own);
    }
    results[index] = sumBySortKey(query.period, periodId, items);
  };
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < ids.length) {
      const index = next;
      next += 1;
      await readOne(index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(PARALLEL, ids.length) }, lane));
  return results.flat();
}
