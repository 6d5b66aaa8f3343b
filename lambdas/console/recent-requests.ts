/** The session API's recent requests: the newest usage rows of the member's workspace (metadata only). */
import type { UsageRecord } from '../shared/records';
import { recentUsageRows } from '../store/console-usage';
import { ValidationError } from '../store/directory-errors';
import type { ConsoleDeps, ConsoleSession } from './ports';

/** How many rows the table shows by default, and at most. */
export const RECENT_DEFAULT = 25;
export const RECENT_MAX = 200;

/** What a row of the table shows: no key hash, no prompt or reply (a usage row has none). */
export type RecentRequest = Pick<UsageRecord, 'requestId' | 'keyId' | 'requestedModel' | 'servedBy' | 'outcome' | 'status' | 'chargeMicros' | 'startedAt' | 'durationMs' | 'family'>;

/** The newest requests of the session's workspace. */
export async function recentRequests(deps: ConsoleDeps, session: ConsoleSession, rawLimit?: string): Promise<RecentRequest[]> {
  const limit = rawLimit === undefined ? RECENT_DEFAULT : Number(rawLimit);
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > RECENT_MAX) throw new ValidationError(`limit must be 1 to ${RECENT_MAX}`);
  const rows = await recentUsageRows(deps.admin.ctx, { workspaceId: session.workspaceId, limit });
  return rows.map((r) => ({
    requestId: r.requestId,
    keyId: r.keyId,
    requestedModel: r.requestedModel,
    ...(r.servedBy === undefined ? {} : { servedBy: r.servedBy }),
    outcome: r.outcome,
    status: r.status,
    chargeMicros: r.chargeMicros,
    startedAt: r.startedAt,
    durationMs: r.durationMs,
    family: r.family,
  }));
}
