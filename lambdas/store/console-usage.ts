/**
 * The console's table of recent requests: the newest usage rows of a workspace, read newest
 * first from each of its usage partitions (a bounded query each) and merged. Settled requests
 * only: a running request's row is its open hold. Metadata only: a usage row holds no prompt and
 * no reply.
 */
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { UsageRecord } from '../shared/records';
import type { AdminContext } from './directory-context';
import { table } from './directory-context';
import { allUsagePks } from './keys';
import { settledRowsFilter } from './request-rows';

/** The newest `limit` usage rows of a workspace, newest first. */
export async function recentUsageRows(ctx: AdminContext, input: { workspaceId: string; limit: number }): Promise<UsageRecord[]> {
  const settled = settledRowsFilter();
  const perShard = await Promise.all(
    allUsagePks(input.workspaceId).map(async (pk) => {
      const rows: UsageRecord[] = [];
      let start: Record<string, unknown> | undefined;
      // Open rows (running requests) sit at the newest end; read on past them to `limit` settled ones.
      do {
        const out = await ctx.doc.send(
          new QueryCommand({
            TableName: table(ctx, 'usage'),
            KeyConditionExpression: 'pk = :pk',
            ...settled,
            ExpressionAttributeValues: { ...settled.ExpressionAttributeValues, ':pk': pk },
            ScanIndexForward: false,
            Limit: input.limit,
            ExclusiveStartKey: start,
          }),
        );
        rows.push(...((out.Items ?? []) as UsageRecord[]));
        start = out.LastEvaluatedKey;
      } while (start !== undefined && rows.length < input.limit);
      return rows;
    }),
  );
  return perShard
    .flat()
    .sort((a, b) => (a.sk < b.sk ? 1 : a.sk > b.sk ? -1 : 0))
    .slice(0, input.limit);
}
