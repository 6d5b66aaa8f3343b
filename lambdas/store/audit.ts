/**
 * The audit trail of the management API: one item per change, who made it (the IAM principal,
 * or `local`), what, when, under which request id, and a summary that never holds a secret.
 *
 * Layout (table `audit`): partition `pk` = the workspace id the change concerns, or `SLUICE` for
 * changes to no workspace (the catalog); sort key `sk` = `<ISO time>#<requestId>`, so a
 * workspace's trail reads in time order. The `byDay` index (partition `day`, `yyyy-mm-dd` UTC)
 * lists every change of a day across workspaces. Operator changes come at human rates, far
 * below a partition's write limit.
 */
import { PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { dayId } from '../core/windows';
import { AUDIT_BY_DAY } from '../shared/schema';
import type { AdminContext } from './directory-context';
import { table } from './directory-context';

/** Partition of the changes that concern no workspace. */
export const AUDIT_GLOBAL = 'SLUICE';

/** Summary values: what changed, never a secret, a prompt or a raw key. */
export type AuditSummary = Readonly<Record<string, string | number | boolean | null | readonly string[]>>;

/** One change as recorded. */
export interface AuditEntry {
  readonly pk: string;
  readonly sk: string;
  readonly day: string;
  readonly at: number;
  /** IAM principal ARN, or `local`. */
  readonly who: string;
  /** The operation, e.g. `key.revoke`. */
  readonly action: string;
  readonly workspaceId: string | null;
  readonly requestId: string;
  readonly summary: AuditSummary;
}

/** Records one change. The put is conditional so a retried request id never writes twice. */
export async function recordAudit(
  ctx: AdminContext,
  input: { at: number; who: string; action: string; workspaceId: string | null; requestId: string; summary: AuditSummary },
): Promise<AuditEntry> {
  const entry: AuditEntry = {
    pk: input.workspaceId ?? AUDIT_GLOBAL,
    sk: `${new Date(input.at).toISOString()}#${input.requestId}`,
    day: dayId(input.at),
    at: input.at,
    who: input.who,
    action: input.action,
    workspaceId: input.workspaceId,
    requestId: input.requestId,
    summary: input.summary,
  };
  await ctx.doc.send(new PutCommand({ TableName: table(ctx, 'audit'), Item: entry, ConditionExpression: 'attribute_not_exists(pk)' }));
  return entry;
}

/**
 * The newest changes first: a workspace's (or the catalog's, with `AUDIT_GLOBAL`), or, with
 * `day`, everything recorded that UTC day.
 */
export async function listAudit(
  ctx: AdminContext,
  input: { workspaceId?: string; day?: string; limit: number },
): Promise<AuditEntry[]> {
  const entries: AuditEntry[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const out = await ctx.doc.send(
      new QueryCommand(
        input.workspaceId !== undefined
          ? {
              TableName: table(ctx, 'audit'),
              KeyConditionExpression: 'pk = :pk',
              ExpressionAttributeValues: { ':pk': input.workspaceId },
              ScanIndexForward: false,
              ConsistentRead: true,
              Limit: input.limit,
              ExclusiveStartKey: start,
            }
          : {
              TableName: table(ctx, 'audit'),
              IndexName: AUDIT_BY_DAY,
              KeyConditionExpression: '#day = :day',
              ExpressionAttributeNames: { '#day': 'day' },
              ExpressionAttributeValues: { ':day': input.day },
              ScanIndexForward: false,
              Limit: input.limit,
              ExclusiveStartKey: start,
            },
      ),
    );
    entries.push(...((out.Items ?? []) as AuditEntry[]));
    start = out.LastEvaluatedKey;
  } while (start !== undefined && entries.length < input.limit);
  return entries.slice(0, input.limit);
}
