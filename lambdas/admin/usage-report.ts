/**
 * Usage reports of the management API: a workspace's totals per UTC day or month (overall, by
 * key, by model, by member) from the aggregator's rollups, and one request's usage row.
 */
import { readUsage, type UsageRow } from '../aggregator/read';
import { regionTag } from '../store/regions';
import type { RollupPeriod } from '../aggregator/aggregate';
import { formatMoney } from '../core/money-format';
import type { AdminContext } from '../store/directory-context';
import { ValidationError } from '../store/directory-errors';
import { requireWorkspace } from '../store/directory-common';
import { queryKeyRecords } from '../store/directory-keys';

/** Totals of some rows; spend as integer micro-units and in the currency's major units. */
export interface Totals {
  readonly requests: number;
  readonly inputTokens: number;
  readonly cachedInputTokens: number;
  readonly outputTokens: number;
  readonly reasoningTokens: number;
  readonly chargeMicros: number;
  readonly spend: string;
}

/** A rollup row with its spend written out. */
export type ReportRow = UsageRow & { readonly spend: string };

/** A member's totals for one period. */
export interface MemberRow extends Totals {
  readonly periodId: string;
  /** The member the keys were minted for; null for keys minted for nobody (or whose member left). */
  readonly memberId: string | null;
}

/** What `GET …/usage` answers. */
export interface UsageReport {
  readonly workspaceId: string;
  readonly period: RollupPeriod;
  readonly from: string;
  readonly to: string;
  readonly total: Totals;
  readonly totals: readonly ReportRow[];
  readonly byKey: readonly ReportRow[];
  readonly byModel: readonly ReportRow[];
  readonly byMember: readonly MemberRow[];
}

function sum(rows: readonly UsageRow[]): Totals {
  const t = { requests: 0, inputTokens: 0, cachedInputTokens: 0, outputTokens: 0, reasoningTokens: 0, chargeMicros: 0 };
  for (const r of rows) {
    t.requests += r.requests;
    t.inputTokens += r.inputTokens;
    t.cachedInputTokens += r.cachedInputTokens;
    t.outputTokens += r.outputTokens;
    t.reasoningTokens += r.reasoningTokens;
    t.chargeMicros += r.chargeMicros;
  }
  return { ...t, spend: formatMoney(t.chargeMicros) };
}

/**
 * The report for `from`..`to` (inclusive, UTC). Spend by member adds up the key rows by the
 * member each key is minted for now: rollups count by key, and a key's member is fixed at
 * minting (a removed member's kept keys count under null).
 */
export async function usageReport(
  ctx: AdminContext,
  query: { workspaceId: string; period: RollupPeriod; from: string; to: string },
): Promise<UsageReport> {
  const { workspaceId, period, from, to } = query;
  if (period !== 'day' && period !== 'month') throw new ValidationError(`period must be day or month, got ${JSON.stringify(period)}`);
  await requireWorkspace(ctx, workspaceId);
  let rows: UsageRow[];
  try {
    // With several regions, each region's aggregator keeps its own rollups: the report adds them.
    const regions = ctx.regions;
    const regionTags = regions === undefined ? undefined : regions.regions.map((r) => regionTag(regions, r));
    rows = await readUsage(ctx.doc, ctx.tablePrefix, { workspaceId, period, from, to, ...(regionTags === undefined ? {} : { regionTags }) });
  } catch (err) {
    if (err instanceof RangeError) throw new ValidationError(`--from/--to: ${err.message}`);
    throw err;
  }
  const withSpend = (r: UsageRow): ReportRow => ({ ...r, spend: formatMoney(r.chargeMicros) });
  const totals = rows.filter((r) => r.scope === 'all').map(withSpend);
  const byKey = rows.filter((r) => r.scope === 'key').map(withSpend);
  const byModel = rows.filter((r) => r.scope === 'model').map(withSpend);
  const memberOf = new Map<string, string | null>();
  if (byKey.length > 0) for (const k of await queryKeyRecords(ctx, workspaceId)) if (k.revokedAt === undefined || !memberOf.has(k.keyId)) memberOf.set(k.keyId, k.memberId ?? null);
  const groups = new Map<string, { periodId: string; memberId: string | null; rows: UsageRow[] }>();
  for (const r of byKey) {
    const memberId = memberOf.get(r.id ?? '') ?? null;
    const id = `${r.periodId}\u0000${memberId ?? ''}`;
    const g = groups.get(id) ?? { periodId: r.periodId, memberId, rows: [] };
    g.rows.push(r);
    groups.set(id, g);
  }
  const byMember = [...groups.values()].map((g) => ({ periodId: g.periodId, memberId: g.memberId, ...sum(g.rows) }));
  return { workspaceId, period, from, to, total: sum(totals), totals, byKey, byModel, byMember };
}
