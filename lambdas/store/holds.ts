/**
 * Reading the open requests' sharded expiry index, for the sweeper: every shard is read, so an
 * open hold is found wherever its id put it. The index (`byExpiryShard` on the usage table) is
 * sparse and keys only: an open row carries `expiryShard`, its settlement removes it, so the index
 * holds exactly the open holds, each entry its row's key and expiry. Each query reads one shard's
 * partition, so the sweeper's cost is EXPIRY_SHARDS small queries per run plus what it finds.
 */
import { QueryCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { OPEN_BY_EXPIRY } from '../shared/schema';
import { allExpiryShards } from './keys';

/**
 * Shards queried at once. Few, and the event loop is given back between queries: a run is 256
 * small queries, and in local mode it shares its process with the gateway and the signal handling
 * (a burst of SDK work there delays Ctrl-C past what tsx waits for).
 */
const SHARD_CONCURRENCY = 2;

const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

async function eachShard(work: (shard: string) => Promise<void>, shards: readonly string[] = allExpiryShards()): Promise<void> {
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
 * One pass over every shard of the expiry index: calls `each` with the row keys (`pk`, `sk`) of
 * the open requests whose expiry is at or before `now`, a page at a time, and counts the rest. One
 * query per shard (and page): the index is sparse, so a shard holds only the open holds that
 * hashed to it. Once `stop()` says so, no further page is read beyond each shard's first.
 */
export async function scanExpiryIndex(
  doc: DynamoDBDocumentClient,
  usageTable: string,
  now: number,
  each: (page: readonly Record<string, unknown>[]) => Promise<void>,
  stop: () => boolean = () => false,
  /** The shards to read: a region of a stage with several reads only its own (`X<n>@<region>`). @default every shard of one region */
  shards?: readonly string[],
): Promise<ExpiryScan> {
  let live = 0;
  await eachShard(async (shard) => {
    let start: Record<string, unknown> | undefined;
    do {
      const page = await doc.send(
        new QueryCommand({
          TableName: usageTable,
          IndexName: OPEN_BY_EXPIRY,
          KeyConditionExpression: 'expiryShard = :shard',
          ExpressionAttributeValues: { ':shard': shard },
          // Keys only: the index is eventually consistent, so the sweeper re-reads the row itself.
          ExclusiveStartKey: start,
        }),
      );
      const expired: Record<string, unknown>[] = [];
      for (const item of page.Items ?? []) {
        if (typeof item.expiresAt === 'number' && item.expiresAt > now) live += 1;
        else expired.push({ pk: item.pk, sk: item.sk });
      }
      if (expired.length > 0) await each(expired);
      start = page.LastEvaluatedKey;
    } while (start !== undefined && !stop());
  }, shards);
  return { live };
}
