/**
 * How the usage table's stream is handed to the aggregator, described once: the deployed event
 * source mapping (`lib/aggregator.ts`) is built from it, local mode's poller reads with it, and
 * the bench's store map models the batches the aggregator sees from it. Plain data: no CDK here.
 */

/** The event source mapping's batching, and what each request puts on the stream. */
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
 * Batches of up to 1,000 records (CDK's most for a DynamoDB stream), gathered for up to 60 s.
 * Each request puts two records on the stream, its row's INSERT (open, at admission) and its
 * MODIFY (settled), more when a stream's hold grows; the filter hands over only the settled one.
 * With four stream shards that is about 150 rows a batch at 10 req/s and 500 from about 34 req/s
 * on (the batch size counts records before the filter, on the safe reading of Lambda's
 * documentation), so the totals a batch writes once are shared by many rows. Reports (`sluice
 * usage`, the console) lag by up to the window; the balance, which limits read, never does.
 */
export const USAGE_STREAM_MAPPING: StreamMapping = Object.freeze({
  batchSize: 1000,
  maxBatchingWindowSeconds: 60,
  recordsPerRequest: 2,
  rowsPerRequest: 1,
});

/** An event filter pattern (Lambda's filter syntax, exact values and `exists` only). */
export type FilterPattern = { readonly [key: string]: FilterPattern | readonly (string | number | boolean | { readonly exists: boolean })[] };

/**
 * The records the aggregator is handed: a row's change to settled (a MODIFY whose new image says
 * `settled`; a settled row is never written again, so that is once per request), and a row that
 * was inserted settled without a state (written before a request had one row from admission on,
 * still on the stream when this was deployed). A row's open INSERT, a hold growing, a pending
 * charge and DynamoDB TTL's REMOVE are not.
 */
const SETTLED: FilterPattern = { eventName: ['INSERT', 'MODIFY'], dynamodb: { NewImage: { state: { S: ['settled'] } } } };
const INSERTED_SETTLED: FilterPattern = { eventName: ['INSERT'], dynamodb: { NewImage: { state: { S: [{ exists: false }] }, outcome: { S: [{ exists: true }] } } } };
export const USAGE_STREAM_FILTERS: readonly FilterPattern[] = Object.freeze([SETTLED, INSERTED_SETTLED]);

/**
 * Whether a stream record (in Lambda's event shape) matches one of `patterns`, as the deployed
 * mapping's filter decides it: every key of a pattern must match; an array lists the leaf values
 * allowed (`{ exists: false }` matching an absent leaf, under an absent object too), an object
 * matches the record's object at that key. Local mode's poller filters with it.
 */
export function matchesFilters(record: unknown, patterns: readonly FilterPattern[]): boolean {
  return patterns.some((p) => matches(record, p));
}

function matches(value: unknown, pattern: FilterPattern): boolean {
  const obj = value !== null && typeof value === 'object' ? (value as Record<string, unknown>) : undefined;
  return Object.entries(pattern).every(([key, want]) => {
    const got = obj?.[key];
    // An absent object has absent leaves: `{ exists: false }` below it matches.
    if (!Array.isArray(want)) return matches(got, want as FilterPattern);
    return want.some((w) => (typeof w === 'object' && w !== null ? (w.exists ? got !== undefined : got === undefined) : got === w));
  });
}

