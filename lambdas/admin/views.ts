/**
 * What the management API answers for records whose stored form carries the store's layout (keys,
 * index attributes, TTL): the fields an operator uses, named and documented
 * (docs/operations.md, "What --json prints"), so the storage layout can change without changing
 * a public format. Instants are ISO 8601 UTC strings; money stays exact integer micro-units.
 */
import type { AuditEntry, AuditSummary } from '../store/audit';
import type { Outcome, UsageRecord } from '../shared/records';

/** One change in the audit trail, as `GET /audit` answers it. */
export interface AuditEntryView {
  /** When the change was made (ISO 8601, UTC). */
  readonly at: string;
  /** The IAM principal ARN, `local` (the local admin token), `seed` (npm start's dev workspace) or a console member. */
  readonly who: string;
  /** The operation, e.g. `key.revoke`. */
  readonly action: string;
  /** The workspace it concerns; null for the catalog. */
  readonly workspaceId: string | null;
  readonly requestId: string;
  /** What changed; never a secret. */
  readonly summary: AuditSummary;
}

/** An audit entry without its partition, sort key and day index. */
export function auditEntryView(e: AuditEntry): AuditEntryView {
  return { at: new Date(e.at).toISOString(), who: e.who, action: e.action, workspaceId: e.workspaceId, requestId: e.requestId, summary: e.summary };
}

/** One request's usage row, as `GET /workspaces/{ws}/requests/{id}` answers it. */
export interface UsageRowView {
  readonly requestId: string;
  readonly workspaceId: string;
  readonly keyId: string;
  /** The member the key was minted for; null when none. */
  readonly memberId: string | null;
  readonly family: string;
  /** The model field as sent (a pinned id, a profile, `sluice/auto`). */
  readonly requestedModel: string;
  /** `<provider>/<model>` that served; null when none did. */
  readonly servedBy: string | null;
  readonly provider: string | null;
  readonly stream: boolean;
  /** Served on the workspace's own provider key (nothing charged to the balance). */
  readonly byok: boolean;
  readonly status: number;
  readonly outcome: Outcome;
  readonly inputTokens: number;
  readonly cachedInputTokens: number;
  readonly outputTokens: number;
  readonly reasoningTokens: number;
  /** True when the provider's counts never arrived and the tokens are Sluice's own count. */
  readonly estimated: boolean;
  /** What the request was charged, micro-units (the authority on its cost). */
  readonly chargeMicros: number;
  /** Part of the charge the balance could not cover (it stops at zero), micro-units; 0 almost always. */
  readonly uncollectedMicros: number;
  /** What admission held for it, micro-units. */
  readonly holdMicros: number;
  /** Models tried, the one that served included. */
  readonly attempts: number;
  /** When it was admitted (ISO 8601, UTC). */
  readonly startedAt: string;
  /** From its arrival at the gateway to its end, ms. */
  readonly durationMs: number;
  /** From its arrival to the reply's first byte, ms, never above `durationMs`; null when nothing was sent. */
  readonly firstByteMs: number | null;
}

/** A usage row without its partition key, sort key and TTL. */
export function usageRowView(row: UsageRecord & { readonly uncollectedMicros?: number }): UsageRowView {
  return {
    requestId: row.requestId,
    workspaceId: row.workspaceId,
    keyId: row.keyId,
    memberId: row.memberId ?? null,
    family: row.family,
    requestedModel: row.requestedModel,
    servedBy: row.servedBy ?? null,
    provider: row.provider ?? null,
    stream: row.stream,
    byok: row.byok,
    status: row.status,
    outcome: row.outcome,
    inputTokens: row.inputTokens,
    cachedInputTokens: row.cachedInputTokens,
    outputTokens: row.outputTokens,
    reasoningTokens: row.reasoningTokens,
    estimated: row.estimated === true,
    chargeMicros: row.chargeMicros,
    uncollectedMicros: row.uncollectedMicros ?? 0,
    holdMicros: row.holdMicros,
    attempts: row.attempts,
    startedAt: new Date(row.startedAt).toISOString(),
    durationMs: row.durationMs,
    firstByteMs: row.firstByteMs ?? null,
  };
}
