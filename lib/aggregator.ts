import { Duration } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { DynamoEventSource, SqsDlq } from 'aws-cdk-lib/aws-lambda-event-sources';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { USAGE_STREAM_FILTERS, USAGE_STREAM_MAPPING, type FilterPattern } from '../lambdas/aggregator/mapping';
import { SluiceFunction } from './sluice-function';
import type { StageSettings } from './stage';

/** Properties of {@link Aggregator}. */
export interface AggregatorProps {
  /** The stage's settings (memory, log retention, removal policy of the queue). */
  readonly stage: StageSettings;
  /** The usage table; it must have a stream (NEW_IMAGE). */
  readonly usageTable: dynamodb.ITable;
  /** The rollups table the aggregator writes. */
  readonly rollupsTable: dynamodb.ITable;
  /**
   * Records per invocation.
   * @default USAGE_STREAM_MAPPING.batchSize
   */
  readonly batchSize?: number;
  /**
   * Retries of a failing batch (after bisection) before its position goes to the dead-letter queue.
   * @default 5
   */
  readonly retryAttempts?: number;
  /**
   * Records older than this go to the dead-letter queue unprocessed.
   * @default Duration.hours(6)
   */
  readonly maxRecordAge?: Duration;
  /**
   * Handler file, relative to the repository root.
   * @default 'lambdas/aggregator/handler.ts'
   */
  readonly entry?: string;
  /**
   * The aggregator's region in a multi-region stage: it is handed only the rows its own region
   * wrote (`region` in the row), since replicated rows appear in every region's stream; the home
   * region also takes rows with no `region` (written before the stage had several).
   * @default one region: every row
   */
  readonly region?: { readonly name: string; readonly home: boolean };
}

/**
 * The usage stream's filters for one region of a multi-region stage: each of the aggregator's
 * patterns, narrowed to rows whose `region` is `region`, and for the home region also to rows
 * without one (docs/regions.md, "Usage rows, the aggregator and the sweeper"). Lambda ORs the
 * patterns; four at most here, under its five per mapping.
 */
export function regionUsageFilters(base: readonly FilterPattern[], region: string, home: boolean): FilterPattern[] {
  const narrowed = (want: FilterPattern[string]): FilterPattern[] =>
    base.map((p) => {
      const dynamo = (p['dynamodb'] ?? {}) as FilterPattern;
      const image = (dynamo['NewImage'] ?? {}) as FilterPattern;
      return { ...p, dynamodb: { ...dynamo, NewImage: { ...image, region: { S: want } } } };
    });
  return [...narrowed([region]), ...(home ? narrowed([{ exists: false }]) : [])];
}

/**
 * The aggregator: consumes the usage table's stream and writes daily and monthly rollups, counting
 * each request's row once, when it settles (`lambdas/aggregator/mapping.ts` describes the batching
 * and the filter).
 *
 * A poison record must neither block its shard nor be retried forever: the mapping bisects a
 * failing batch, reports partial failures (`ReportBatchItemFailures`, so good records are not
 * rolled up twice), bounds retries, and sends what still fails to an SQS dead-letter queue. The
 * queue receives the failed batch's shard and sequence numbers, not the records; those stay
 * readable in the stream for 24 h, which is why the default `maxRecordAge` leaves an operator
 * most of a day to replay them.
 *
 * Grants: stream read on usage (by the event source), read/write on rollups, send to the queue.
 */
export class Aggregator extends Construct {
  /** The aggregator function. */
  public readonly fn: lambda.Function;
  /** Where the positions of batches that kept failing go. */
  public readonly deadLetterQueue: sqs.Queue;

  public constructor(scope: Construct, id: string, props: AggregatorProps) {
    super(scope, id);
    const { stage } = props;
    this.fn = new SluiceFunction(this, 'Aggregator', {
      stage,
      entry: props.entry ?? 'lambdas/aggregator/handler.ts',
      description: `Sluice ${stage.name}: usage stream to daily and monthly rollups`,
      memoryMb: stage.workerMemoryMb,
      timeout: Duration.seconds(60),
    }).fn;

    this.deadLetterQueue = new sqs.Queue(this, 'DeadLetters', {
      // SQS's maximum: time for someone to notice the alarm and look.
      retentionPeriod: Duration.days(14),
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      removalPolicy: stage.removalPolicy,
    });

    this.fn.addEventSource(
      new DynamoEventSource(props.usageTable, {
        // Start from the oldest record so nothing written before the mapping exists is skipped.
        startingPosition: lambda.StartingPosition.TRIM_HORIZON,
        batchSize: props.batchSize ?? USAGE_STREAM_MAPPING.batchSize,
        // Gathered up to a minute, so a batch's totals (written once per batch) are shared by many rows.
        maxBatchingWindow: Duration.seconds(USAGE_STREAM_MAPPING.maxBatchingWindowSeconds),
        bisectBatchOnError: true,
        retryAttempts: props.retryAttempts ?? 5,
        maxRecordAge: props.maxRecordAge ?? Duration.hours(6),
        reportBatchItemFailures: true,
        onFailure: new SqsDlq(this.deadLetterQueue),
        // Only a row's change to settled is rolled up (once per request); its open INSERT, a hold
        // growing and TTL deletions (REMOVE) never invoke it. The same filter runs locally.
        filters: (props.region === undefined ? USAGE_STREAM_FILTERS : regionUsageFilters(USAGE_STREAM_FILTERS, props.region.name, props.region.home)).map((pattern) =>
          lambda.FilterCriteria.filter(pattern),
        ),
      }),
    );
    props.rollupsTable.grantReadWriteData(this.fn);
  }
}
