/**
 * The usage reads of the management API, on the store's layout of the usage table: a
 * workspace's rows are spread over {@link USAGE_SHARDS} partitions (`<workspaceId>#U<n>`, sort
 * key `<ISO start>#<requestId>`); a request's id carries its start, so its row's key is known from
 * the workspace and the id. A running request's row is its open hold, not yet a usage row: reads
 * show settled rows only.
 */
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { UsageRecord } from '../shared/records';
import { usageRowByRequest } from './balance';
import { settledRowsFilter } from './request-rows';
import type { AdminContext } from './directory-context';
import { table } from './directory-context';
import { USAGE_SHARDS, allUsagePks } from './keys';

/** Most rows one lookup reads before it gives up; a bound on what one operator command costs. */
export const USAGE_SCAN_LIMIT = 20_000;

/**
 * The usage row of one request of this workspace, or undefined when there is none (or it
 * belongs to another workspace, which is never shown) or it started outside the range.
 */
export async function findUsageRow(
  ctx: AdminContext,
  input: { workspaceId: string; requestId: string; sinceMs: number; untilMs: number },
): Promise<UsageRecord | undefined> {
  const row = await usageRowByRequest(ctx.doc, table(ctx, 'usage'), input.workspaceId, input.requestId);
  if (row === undefined || row.workspaceId !== input.workspaceId) return undefined;
  return row.startedAt >= input.sinceMs && row.startedAt <= input.untilMs ? row : undefined;
}

/**
 * When a key last started a request that was settled (epoch ms), or undefined when none is in
 * the range: each of the workspace's usage partitions is walked newest first to its first row of
 * the key, reading at most {@link USAGE_SCAN_LIMIT} rows in all.
 */
export async function lastUseOfKey(
  ctx: AdminContext,
  input: { workspaceId: string; keyId: string; sinceMs: number; untilMs: number },
): Promise<number | undefined> {
  const budget = Math.ceil(USAGE_SCAN_LIMIT / USAGE_SHARDS);
  const found = await Promise.all(
    allUsagePks(input.workspaceId).map(async (pk) => {
      let start: Record<string, unknown> | undefined;
      let read = 0;
      const settled = settledRowsFilter('keyId = :k');
      do {
        const out = await ctx.doc.send(
          new QueryCommand({
            TableName: table(ctx, 'usage'),
            KeyConditionExpression: 'pk = :pk AND sk BETWEEN :since AND :until',
            FilterExpression: settled.FilterExpression,
            ExpressionAttributeNames: settled.ExpressionAttributeNames,
            ExpressionAttributeValues: {
              ...settled.ExpressionAttributeValues,
              ':pk': pk,
              ':k': input.keyId,
              ':since': new Date(input.sinceMs).toISOString(),
              // '~' sorts after '#', so rows of the last millisecond are included.
              ':until': `${new Date(input.untilMs).toISOString()}~`,
            },
            ScanIndexForward: false,
            ExclusiveStartKey: start,
          }),
        );
        read += out.ScannedCount ?? 0;
        const row = (out.Items ?? [])[0] as UsageRecord | undefined;
        if (row !== undefined) return row.startedAt;
        start = out.LastEvaluatedKey;
      } while (start !== undefined && read < budget);
      return undefined;
    }),
  );
  const times = found.filter((t): t is number => t !== undefined);
  return times.length === 0 ? undefined : Math.max(...times);
}
