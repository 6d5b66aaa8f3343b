/**
 * The usage reads of the management API, on today's layout of the usage table (partition
 * `workspaceId`, sort key `<ISO start>#<requestId>`), in one place so a change of that layout
 * changes one file. The table has no index by request id or key, so these reads walk a
 * workspace's rows newest first within a bounded time range.
 */
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { UsageRecord } from '../shared/records';
import type { AdminContext } from './directory-context';
import { table } from './directory-context';

/** Most rows one lookup reads before it gives up; a bound on what one operator command costs. */
export const USAGE_SCAN_LIMIT = 20_000;

/**
 * Walks a workspace's usage rows from `untilMs` back to `sinceMs`, newest first, until `stop`
 * returns true or {@link USAGE_SCAN_LIMIT} rows have been read.
 */
async function walkBack(
  ctx: AdminContext,
  workspaceId: string,
  range: { sinceMs: number; untilMs: number },
  filter: { expression: string; values: Record<string, unknown> },
  stop: (row: UsageRecord) => boolean,
): Promise<void> {
  let start: Record<string, unknown> | undefined;
  let read = 0;
  do {
    const out = await ctx.doc.send(
      new QueryCommand({
        TableName: table(ctx, 'usage'),
        KeyConditionExpression: 'workspaceId = :ws AND sk BETWEEN :since AND :until',
        FilterExpression: filter.expression,
        ExpressionAttributeValues: {
          ':ws': workspaceId,
          ':since': new Date(range.sinceMs).toISOString(),
          // '~' sorts after '#', so rows of the last millisecond are included.
          ':until': `${new Date(range.untilMs).toISOString()}~`,
          ...filter.values,
        },
        ScanIndexForward: false,
        ExclusiveStartKey: start,
      }),
    );
    read += out.ScannedCount ?? 0;
    for (const row of (out.Items ?? []) as UsageRecord[]) if (stop(row)) return;
    start = out.LastEvaluatedKey;
  } while (start !== undefined && read < USAGE_SCAN_LIMIT);
}

/** The usage row of one request, or undefined when none was found in the range. */
export async function findUsageRow(
  ctx: AdminContext,
  input: { workspaceId: string; requestId: string; sinceMs: number; untilMs: number },
): Promise<UsageRecord | undefined> {
  let found: UsageRecord | undefined;
  await walkBack(ctx, input.workspaceId, input, { expression: 'requestId = :r', values: { ':r': input.requestId } }, (row) => {
    found = row;
    return true;
  });
  return found;
}

/** When a key last started a request that was settled (epoch ms), or undefined when not in the range. */
export async function lastUseOfKey(
  ctx: AdminContext,
  input: { workspaceId: string; keyId: string; sinceMs: number; untilMs: number },
): Promise<number | undefined> {
  let last: number | undefined;
  await walkBack(ctx, input.workspaceId, input, { expression: 'keyId = :k', values: { ':k': input.keyId } }, (row) => {
    last = row.startedAt;
    return true;
  });
  return last;
}
