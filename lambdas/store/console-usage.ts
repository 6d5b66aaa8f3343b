/**
 * The console's table of recent requests: the newest usage rows of a workspace, read newest
 * first from each of its usage partitions (a bounded query each) and merged. Metadata only:
 * a usage row holds no prompt and no reply.
 */
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { UsageRecord } from '../shared/records';
import type { AdminContext } from './directory-context';
import { table } from './directory-context';
import { allUsagePks } from './keys';

/** The newest `limit` usage rows of a workspace, newest first. */
export async function recentUsageRows(ctx: AdminContext, input: { workspaceId: string; limit: number }): Promise<UsageRecord[]> {
  const perShard = await Promise.all(
    allUsagePks(input.workspaceId).map(async (pk) => {
      const out = await ctx.doc.send(
        new QueryCommand({
          TableName: table(ctx, 'usage'),
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': pk },
          ScanIndexForward: false,
          Limit: input.limit,
        }),
      );
      return (out.Items ?? []) as UsageRecord[];
    }),
  );
  return perShard
    .flat()
    .sort((a, b) => (a.sk < b.sk ? 1 : a.sk > b.sk ? -1 : 0))
    .slice(0, input.limit);
}
