/**
 * How the usage table's stream is handed to the aggregator, described once: the deployed event
 * source mapping (`lib/aggregator.ts`) is built from it, local mode's poller reads with it, and
 * the bench's store map models the batches the aggregator sees from it. Plain data: no CDK here.
 */

/** The event source mapping's batching. */
export interface StreamMapping {
  /** Records per invocation, at most. */
  readonly batchSize: number;
  /** Seconds Lambda may gather records before invoking (0: as soon as a poll finds some). */
  readonly maxBatchingWindowSeconds: number;
  /** The stream records each request puts on the usage stream, and of those, the ones the mapping hands over. */
  readonly recordsPerRequest: number;
  readonly rowsPerRequest: number;
}

/**
 * Today's mapping: batches of 100, no batching window, and one stream record per request (the
 * usage row's INSERT at settlement), every one handed over.
 */
export const USAGE_STREAM_MAPPING: StreamMapping = Object.freeze({
  batchSize: 100,
  maxBatchingWindowSeconds: 0,
  recordsPerRequest: 1,
  rowsPerRequest: 1,
});
