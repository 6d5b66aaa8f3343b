/**
 * Reading the holds' sharded expiry index, for the sweeper: every shard is read, so a hold is
 * found wherever its id put it. Each query reads one shard's partition, so the sweeper's cost is
 * EXPIRY_SHARDS small queries per run plus what it finds.
 */
import { QueryCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { HOLDS_BY_EXPIRY } from '../shared/schema';
import { allExpiryShards } from './keys';

/** Shards queried at once: enough to read every shard in well under a second, few enough to be polite. */
const SHARD_CONCURRENCY = 16;

async function eachShard(work: (shard: string) => Promise<void>): Promise<void> {
  const shards = allExpiryShards();
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < shards.length) {
      const shard = shards[next] as string;
      next += 1;
      await work(shard);
    }
  };
  await Promise.all(Array.from({ length: SHARD_CONCURRENCY }, lane));
}

/**
 * Calls `each` with the ids of the holds whose expiry is at or before `now`, one page at a time,
 * shard by shard; stops reading new pages once `stop()` says so.
 */
export async function forEachExpiredHold(
  doc: DynamoDBDocumentClient,
  holdsTable: string,
  now: number,
  each: (page: readonly Record<string, unknown>[]) => Promise<void>,
  stop: () => boolean = () => false,
): Promise<void> {
  await eachShard(async (shard) => {
    let start: Record<string, unknown> | undefined;
    do {
      const page = await doc.send(
        new QueryCommand({
          TableName: holdsTable,
          IndexName: HOLDS_BY_EXPIRY,
          KeyConditionExpression: 'expiryShard = :shard AND expiresAt <= :now',
          ExpressionAttributeValues: { ':shard': shard, ':now': now },
          // The index projects everything, but only the id is trusted (the sweeper re-reads the item).
          ProjectionExpression: 'holdId',
          ExclusiveStartKey: start,
        }),
      );
      if ((page.Items ?? []).length > 0) await each(page.Items ?? []);
      start = page.LastEvaluatedKey;
      // Each shard's first page is read (what it holds is counted, settled or deferred); no more past `stop()`.
    } while (start !== undefined && !stop());
  });
}

/** Counts the open holds that have not expired yet (requests that may still be running), over every shard. */
export async function countLiveHolds(doc: DynamoDBDocumentClient, holdsTable: string, now: number): Promise<number> {
  let count = 0;
  await eachShard(async (shard) => {
    let start: Record<string, unknown> | undefined;
    do {
      const page = await doc.send(
        new QueryCommand({
          TableName: holdsTable,
          IndexName: HOLDS_BY_EXPIRY,
          KeyConditionExpression: 'expiryShard = :shard AND expiresAt > :now',
          ExpressionAttributeValues: { ':shard': shard, ':now': now },
          Select: 'COUNT',
          ExclusiveStartKey: start,
        }),
      );
      count += page.Count ?? 0;
      start = page.LastEvaluatedKey;
    } while (start !== undefined);
  });
  return count;
}
