/**
 * A local stand-in for Lambda's DynamoDB Streams event source mapping: reads a table's stream
 * from DynamoDB Local and hands batches to a handler in the Lambda event shape, honouring
 * `batchItemFailures` the way the mapping does with `ReportBatchItemFailures` (everything before
 * the lowest failed sequence number is checkpointed; the batch is retried from it).
 *
 * Start position is TRIM_HORIZON, so a restart replays what the stream still holds; the
 * consumer (the aggregator) is idempotent, as it must be for the real mapping too.
 */
import { DescribeTableCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  type AttributeValue as StreamAttributeValue,
  DescribeStreamCommand,
  DynamoDBStreamsClient,
  ExpiredIteratorException,
  GetRecordsCommand,
  GetShardIteratorCommand,
  type _Record as StreamRecordEntry,
  type Shard,
  type ShardIteratorType,
  TrimmedDataAccessException,
} from '@aws-sdk/client-dynamodb-streams';
import type { AttributeValue, DynamoDBBatchResponse, DynamoDBRecord, DynamoDBStreamEvent } from 'aws-lambda';
import { matchesFilters, type FilterPattern } from '../lambdas/aggregator/mapping';
import { repeat } from './repeat';
import { makeDynamoClient } from './tables';

/** The handler the poller invokes, like a stream-triggered Lambda's. */
export type StreamBatchHandler = (event: DynamoDBStreamEvent) => Promise<DynamoDBBatchResponse | void>;

/** Options for {@link startStreamPoller}. */
export interface StreamPollerOptions {
  /** DynamoDB Local's endpoint. */
  readonly endpoint: string;
  /** Full table name (with its prefix). */
  readonly tableName: string;
  readonly handler: StreamBatchHandler;
  /** Pause between polling passes. @default 500 */
  readonly intervalMs?: number;
  /** Records per batch (GetRecords limit), counted before the filter. @default 100 */
  readonly batchSize?: number;
  /**
   * The mapping's filter (`lambdas/aggregator/mapping.ts`): records matching none of these are
   * passed over, as the deployed mapping drops them before invoking. @default every record
   */
  readonly filters?: readonly FilterPattern[];
  /**
   * Retries of a failing batch before its records are given up (the deployed mapping sends
   * them to its failure destination). @default 10
   */
  readonly maxRetries?: number;
  /**
   * Poll in the background. Tests that want full control set false and call `pollOnce`/`drain`.
   * @default true
   */
  readonly autoStart?: boolean;
  /** @default console.error */
  readonly log?: (message: string) => void;
  /**
   * Where to resume: for each shard id, the sequence number of the last record already done with
   * (what {@link StreamPoller.checkpoints} returned before). Shards not named here start at
   * TRIM_HORIZON; ids of another stream (a table made again) simply match nothing.
   * @default every shard from TRIM_HORIZON
   */
  readonly resumeAfter?: Readonly<Record<string, string>>;
  /**
   * How often a pass lists the stream's shards again (DescribeStream), in milliseconds; passes in
   * between poll the shards already known. Tables whose shards rarely change can be polled often
   * without a DescribeStream each time. @default 0 (every pass)
   */
  readonly discoverEveryMs?: number;
}

/** A running poller. */
export interface StreamPoller {
  readonly streamArn: string;
  /** One pass over every shard; resolves to the number of records handed to the handler. */
  pollOnce(): Promise<number>;
  /** Passes until one finds nothing; resolves to the records handed over in total. */
  drain(): Promise<number>;
  /** For each shard, the sequence number of the last record done with, for `resumeAfter`. */
  checkpoints(): Record<string, string>;
  /**
   * Moves past every record the stream holds now without handing any over (as a mapping created
   * at LATEST would start); resolves to the records passed over. For the bench, which measures
   * only what a later load writes.
   */
  skip(): Promise<number>;
  /** Stops polling; resolves once the current pass (and its handler call) is over. */
  stop(): Promise<void>;
}

interface ShardState {
  readonly shardId: string;
  readonly parentShardId?: string;
  iterator?: string;
  /** Sequence number of the last record done with (handled or given up). */
  checkpoint?: string;
  /** Where the next iterator must start after a failed batch. */
  retryFrom?: string;
  failures: number;
  finished: boolean;
}

/**
 * Finds the table's latest stream and starts polling it.
 *
 * @throws Error when the table has no stream.
 */
export async function startStreamPoller(options: StreamPollerOptions): Promise<StreamPoller> {
  const intervalMs = options.intervalMs ?? 500;
  const batchSize = options.batchSize ?? 100;
  const maxRetries = options.maxRetries ?? 10;
  const log = options.log ?? ((message: string) => console.error(message));

  const dynamo: DynamoDBClient = makeDynamoClient(options.endpoint);
  const streams = new DynamoDBStreamsClient({
    endpoint: options.endpoint,
    region: 'local',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    maxAttempts: 3,
  });
  let streamArn: string;
  try {
    const { Table } = await dynamo.send(new DescribeTableCommand({ TableName: options.tableName }));
    if (Table?.LatestStreamArn === undefined) throw new Error(`table ${options.tableName} has no stream`);
    streamArn = Table.LatestStreamArn;
  } finally {
    dynamo.destroy();
  }

  const shards = new Map<string, ShardState>();
  // Passes never overlap: the background loop and a test's pollOnce() share this queue.
  let queue: Promise<unknown> = Promise.resolve();
  const serialised = (): Promise<number> => {
    const next = queue.then(pass);
    queue = next.catch(() => undefined);
    return next;
  };

  let discoveredAt: number | undefined;
  async function pass(): Promise<number> {
    const now = Date.now();
    if (discoveredAt === undefined || now - discoveredAt >= (options.discoverEveryMs ?? 0)) {
      await discoverShards();
      discoveredAt = now;
    }
    let delivered = 0;
    for (const shard of shards.values()) {
      if (shard.finished || !parentDone(shard)) continue;
      delivered += await pollShard(shard);
    }
    return delivered;
  }

  async function discoverShards(): Promise<void> {
    let start: string | undefined;
    do {
      const { StreamDescription } = await streams.send(
        new DescribeStreamCommand({ StreamArn: streamArn, ExclusiveStartShardId: start }),
      );
      for (const shard of StreamDescription?.Shards ?? []) addShard(shard);
      start = StreamDescription?.LastEvaluatedShardId;
    } while (start !== undefined);
  }

  function addShard(shard: Shard): void {
    if (shard.ShardId === undefined || shards.has(shard.ShardId)) return;
    shards.set(shard.ShardId, {
      shardId: shard.ShardId,
      parentShardId: shard.ParentShardId,
      checkpoint: options.resumeAfter?.[shard.ShardId],
      failures: 0,
      finished: false,
    });
  }

  /** A child shard waits for its parent, so each key's records stay in order. */
  function parentDone(shard: ShardState): boolean {
    if (shard.parentShardId === undefined) return true;
    const parent = shards.get(shard.parentShardId);
    // A parent the stream no longer lists has aged out: nothing left to wait for.
    return parent === undefined || parent.finished;
  }

  async function iteratorFor(shard: ShardState): Promise<string | undefined> {
    let type: ShardIteratorType = 'TRIM_HORIZON';
    let sequence: string | undefined;
    if (shard.retryFrom !== undefined) {
      type = 'AT_SEQUENCE_NUMBER';
      sequence = shard.retryFrom;
    } else if (shard.checkpoint !== undefined) {
      type = 'AFTER_SEQUENCE_NUMBER';
      sequence = shard.checkpoint;
    }
    const { ShardIterator } = await streams.send(
      new GetShardIteratorCommand({
        StreamArn: streamArn,
        ShardId: shard.shardId,
        ShardIteratorType: type,
        SequenceNumber: sequence,
      }),
    );
    return ShardIterator;
  }

  async function pollShard(shard: ShardState): Promise<number> {
    shard.iterator ??= await iteratorFor(shard);
    if (shard.iterator === undefined) {
      shard.finished = true;
      return 0;
    }
    let page;
    try {
      page = await streams.send(new GetRecordsCommand({ ShardIterator: shard.iterator, Limit: batchSize }));
    } catch (err) {
      if (err instanceof ExpiredIteratorException || err instanceof TrimmedDataAccessException) {
        // Start again from the checkpoint on the next pass (or the oldest record if trimmed).
        if (err instanceof TrimmedDataAccessException) shard.checkpoint = undefined;
        shard.iterator = undefined;
        return 0;
      }
      throw err;
    }
    const records = page.Records ?? [];
    shard.iterator = page.NextShardIterator;
    if (records.length === 0) {
      if (shard.iterator === undefined) shard.finished = true;
      return 0;
    }
    const settled = await deliver(shard, records);
    if (!settled) {
      // Re-read from the failed record on the next pass.
      shard.iterator = undefined;
    } else if (shard.iterator === undefined) {
      shard.finished = true;
    }
    return records.length;
  }

  let skipping = false;

  /** Hands one batch over (what the filter keeps of it); returns false when part of it must be read again. */
  async function deliver(shard: ShardState, fetched: StreamRecordEntry[]): Promise<boolean> {
    const all = fetched.map((r) => toLambdaRecord(r, streamArn));
    const kept = options.filters === undefined ? all : all.filter((r) => matchesFilters(r, options.filters as readonly FilterPattern[]));
    if (skipping || kept.length === 0) {
      // Nothing to hand over: the whole batch is done, as the mapping checkpoints filtered records.
      shard.checkpoint = all[all.length - 1]?.dynamodb?.SequenceNumber ?? shard.checkpoint;
      shard.retryFrom = undefined;
      shard.failures = 0;
      return true;
    }
    const event: DynamoDBStreamEvent = { Records: kept };
    const sequences = event.Records.map((r) => r.dynamodb?.SequenceNumber ?? '');
    let failedFrom: number;
    try {
      const result = await options.handler(event);
      failedFrom = firstFailure(result ?? undefined, sequences);
    } catch (err) {
      log(`[local] stream handler failed on ${options.tableName}: ${err instanceof Error ? err.message : String(err)}`);
      failedFrom = 0;
    }
    if (failedFrom === -1) {
      shard.checkpoint = all[all.length - 1]?.dynamodb?.SequenceNumber;
      shard.retryFrom = undefined;
      shard.failures = 0;
      return true;
    }
    if (failedFrom > 0) {
      // Records before the first failure are done, as with the deployed mapping.
      shard.checkpoint = sequences[failedFrom - 1];
      shard.failures = 0;
    }
    shard.failures += 1;
    if (shard.failures > maxRetries) {
      log(
        `[local] giving up ${sequences.length - failedFrom} stream record(s) of ${options.tableName} ` +
          `after ${maxRetries} retries (first sequence number ${sequences[failedFrom]})`,
      );
      shard.checkpoint = all[all.length - 1]?.dynamodb?.SequenceNumber;
      shard.retryFrom = undefined;
      shard.failures = 0;
      // The iterator GetRecords returned already points past this batch.
      return true;
    }
    shard.retryFrom = sequences[failedFrom];
    return false;
  }

  const looping =
    options.autoStart === false
      ? undefined
      : repeat(intervalMs, serialised, (err) =>
          log(`[local] stream poll of ${options.tableName} failed: ${err instanceof Error ? err.message : String(err)}`),
        );

  let stopping: Promise<void> | undefined;
  const drain = async (): Promise<number> => {
    let total = 0;
    // Bounded: a batch that keeps failing is given up after maxRetries passes anyway.
    for (let i = 0; i < 10_000; i += 1) {
      const n = await serialised();
      total += n;
      const retrying = [...shards.values()].some((s) => s.retryFrom !== undefined);
      if (n === 0 && !retrying) return total;
    }
    throw new Error(`stream of ${options.tableName} did not drain`);
  };
  return {
    streamArn,
    pollOnce: serialised,
    checkpoints(): Record<string, string> {
      const out: Record<string, string> = {};
      for (const shard of shards.values()) if (shard.checkpoint !== undefined) out[shard.shardId] = shard.checkpoint;
      return out;
    },
    drain,
    async skip(): Promise<number> {
      skipping = true;
      try {
        return await drain();
      } finally {
        skipping = false;
      }
    },
    stop: () =>
      (stopping ??= (async () => {
        await looping?.stop();
        await queue;
        streams.destroy();
      })()),
  };
}

/**
 * Index of the first record to retry, or -1 when the batch is done. As with the deployed
 * mapping, an identifier that names no record of the batch fails the whole batch.
 */
function firstFailure(result: DynamoDBBatchResponse | undefined, sequences: readonly string[]): number {
  const failures = result?.batchItemFailures ?? [];
  if (failures.length === 0) return -1;
  let first = sequences.length;
  for (const failure of failures) {
    const index = sequences.indexOf(failure.itemIdentifier);
    if (index === -1 || failure.itemIdentifier === '') return 0;
    first = Math.min(first, index);
  }
  return first;
}

/** A GetRecords record in the shape Lambda delivers it (attribute values as JSON, B as base64). */
export function toLambdaRecord(record: StreamRecordEntry, streamArn: string): DynamoDBRecord {
  const data = record.dynamodb;
  return {
    eventID: record.eventID,
    eventName: record.eventName,
    eventVersion: record.eventVersion ?? '1.1',
    eventSource: record.eventSource ?? 'aws:dynamodb',
    awsRegion: record.awsRegion ?? 'local',
    eventSourceARN: streamArn,
    dynamodb:
      data === undefined
        ? undefined
        : {
            ApproximateCreationDateTime:
              data.ApproximateCreationDateTime === undefined
                ? undefined
                : Math.floor(data.ApproximateCreationDateTime.getTime() / 1000),
            Keys: toLambdaMap(data.Keys),
            NewImage: toLambdaMap(data.NewImage),
            OldImage: toLambdaMap(data.OldImage),
            SequenceNumber: data.SequenceNumber,
            SizeBytes: data.SizeBytes,
            StreamViewType: data.StreamViewType,
          },
  };
}

function toLambdaMap(map: Record<string, StreamAttributeValue> | undefined): Record<string, AttributeValue> | undefined {
  if (map === undefined) return undefined;
  const out: Record<string, AttributeValue> = {};
  for (const [name, value] of Object.entries(map)) out[name] = toLambdaValue(value);
  return out;
}

function toLambdaValue(value: StreamAttributeValue): AttributeValue {
  const base64 = (bytes: Uint8Array): string => Buffer.from(bytes).toString('base64');
  if (value.S !== undefined) return { S: value.S };
  if (value.N !== undefined) return { N: value.N };
  if (value.BOOL !== undefined) return { BOOL: value.BOOL };
  if (value.NULL !== undefined) return { NULL: value.NULL };
  if (value.B !== undefined) return { B: base64(value.B) };
  if (value.SS !== undefined) return { SS: value.SS };
  if (value.NS !== undefined) return { NS: value.NS };
  if (value.BS !== undefined) return { BS: value.BS.map(base64) };
  if (value.L !== undefined) return { L: value.L.map(toLambdaValue) };
  if (value.M !== undefined) return { M: toLambdaMap(value.M) ?? {} };
  throw new Error(`unsupported attribute value in stream record: ${JSON.stringify(Object.keys(value))}`);
}
