/**
 * Reading the holds' sharded expiry index, for the sweeper: every shard is read, so a hold is
 * found wherever its id put it. Each query reads one shard's partition, so the sweeper's cost is
 * EXPIRY_SHARDS small queries per run plus what it finds.
 */
import { QueryCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { HOLDS_BY_EXPIRY } from '../shared/schema';
import { allExpiryShards } from './keys';

/**
 * Shards queried at once. Few, and the event loop is given back between queries: a run is 256
 * small queries, and in local mode it shares its process with the gateway and the signal handling
 * (a burst of SDK work there delays Ctrl-C past what tsx waits for).
 */
const SHARD_CONCURRENCY = 2;

const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

async function eachShard(work: (shard: string) => Promise<void>): Promise<void> {
  const shards = allExpiryShards();
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < shards.length) {
      const shard = shards[next] as string;
      next += 1;
      await work(shard);
      await yieldToLoop();
    }
  };
  await Promise.all(Array.from({ length: SHARD_CONCURRENCY }, lane));
}

/** What one pass over the index found. */
export interface ExpiryScan {
  /** Open holds whose expiry is still ahead (requests that may still be running). */
  readonly live: number;
}

/**
 * One pass over every shard of the expiry index: calls `each` with the ids of the holds whose
 * expiry is at or before `now`, a page at a time, and counts the rest. One query per shard (and
 * page): the index is sparse, so a shard holds only the open holds that hashed to it.
 * Once `stop()` says so, no further page is read beyond each shard's first.
 */
export async function scanExpiryIndex(
  doc: DynamoDBDocumentClient,
  holdsTable: string,
  now: number,
  each: (page: readonly Record<string, unknown>[]) => Promise<void>,
  stop: () => boolean = () => false,
): Promise<ExpiryScan> {
  let live = 0;
  await eachShard(async (shard) => {
    let start: Record<string, unknown> | undefined;
    do {
      const page = await doc.send(
        new QueryCommand({
          TableName: holdsTable,
          IndexName: HOLDS_BY_EXPIRY,
          KeyConditionExpression: 'expiryShard = :shard',
          ExpressionAttributeValues: { ':shard': shard },
          // The index projects everything, but only the id is trusted (the sweeper re-reads the item).
          ProjectionExpression: 'holdId, expiresAt',
          ExclusiveStartKey: start,
        }),
      );
      const expired: Record<string, unknown>[] = [];
      for (const item of page.Items ?? []) {
        if (typeof item.expiresAt === 'number' && item.expiresAt > now) live += 1;
        else expired.push({ holdId: item.holdId });
      }
      if (expired.length > 0) await each(expired);
      start = page.LastEvaluatedKey;
    } while (start !== undefined && !stop());
  });
  return { live };
}
