/**
 * Reads shared by the admin operations. Reads that decide a write are strongly consistent:
 * an operator who just created a workspace expects the next command to see it.
 */
import { GetCommand, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { MemberRecord, ProfileRecord, WorkspaceRecord } from '../shared/records';
import type { AdminContext } from './directory-context';
import { META, conditional, table } from './directory-context';
import { ValidationError, WorkspaceNotFoundError } from './directory-errors';

/** The workspace's settings item, or undefined when there is no such workspace. */
export async function getWorkspace(ctx: AdminContext, workspaceId: string): Promise<WorkspaceRecord | undefined> {
  const out = await ctx.doc.send(
    new GetCommand({ TableName: table(ctx, 'workspaces'), Key: { pk: workspaceId, sk: META }, ConsistentRead: true }),
  );
  return out.Item as WorkspaceRecord | undefined;
}

/** The workspace's settings item; throws `WorkspaceNotFoundError` when absent. */
export async function requireWorkspace(ctx: AdminContext, workspaceId: string): Promise<WorkspaceRecord> {
  checkWorkspaceId(workspaceId);
  const ws = await getWorkspace(ctx, workspaceId);
  if (ws === undefined) throw new WorkspaceNotFoundError(workspaceId);
  return ws;
}

/** Refuses an empty or oddly shaped workspace id before it reaches a key condition. */
export function checkWorkspaceId(workspaceId: string): void {
  if (typeof workspaceId !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(workspaceId)) {
    throw new ValidationError(`workspace id ${JSON.stringify(workspaceId)} is not a workspace id`);
  }
}

/** Every item under the workspace whose sort key starts with `prefix` (paginated). */
export async function queryWorkspaceItems<T>(ctx: AdminContext, workspaceId: string, prefix: string): Promise<T[]> {
  const items: T[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const out = await ctx.doc.send(
      new QueryCommand({
        TableName: table(ctx, 'workspaces'),
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
        ExpressionAttributeValues: { ':pk': workspaceId, ':prefix': prefix },
        ConsistentRead: true,
        ExclusiveStartKey: start,
      }),
    );
    items.push(...((out.Items ?? []) as T[]));
    start = out.LastEvaluatedKey;
  } while (start !== undefined);
  return items;
}

/** The workspace's members. */
export function listMemberRecords(ctx: AdminContext, workspaceId: string): Promise<MemberRecord[]> {
  return queryWorkspaceItems<MemberRecord>(ctx, workspaceId, 'MEMBER#');
}

/** The workspace's routing profiles. */
export function listProfileRecords(ctx: AdminContext, workspaceId: string): Promise<ProfileRecord[]> {
  return queryWorkspaceItems<ProfileRecord>(ctx, workspaceId, 'PROFILE#');
}

/**
 * Updates the settings item under `attribute_exists(pk)` (plus an optional extra condition), so
 * a typo in a workspace id never creates a stray half-item. Returns the attributes before.
 */
export async function updateMeta(
  ctx: AdminContext,
  workspaceId: string,
  update: { expression: string; names?: Record<string, string>; values?: Record<string, unknown>; condition?: string },
  onConditionFalse: () => Error = () => new WorkspaceNotFoundError(workspaceId),
): Promise<Partial<WorkspaceRecord>> {
  checkWorkspaceId(workspaceId);
  const out = await conditional(
    () =>
      ctx.doc.send(
        new UpdateCommand({
          TableName: table(ctx, 'workspaces'),
          Key: { pk: workspaceId, sk: META },
          UpdateExpression: update.expression,
          ConditionExpression: update.condition === undefined ? 'attribute_exists(pk)' : `attribute_exists(pk) AND (${update.condition})`,
          ExpressionAttributeNames: update.names,
          ExpressionAttributeValues: update.values,
          ReturnValues: 'ALL_OLD',
        }),
      ),
    async () => ((await getWorkspace(ctx, workspaceId)) === undefined ? new WorkspaceNotFoundError(workspaceId) : onConditionFalse()),
  );
  return (out.Attributes ?? {}) as Partial<WorkspaceRecord>;
}

