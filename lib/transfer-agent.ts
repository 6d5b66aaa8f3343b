import { Duration } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { DynamoEventSource, SqsDlq } from 'aws-cdk-lib/aws-lambda-event-sources';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import type { FilterPattern } from '../lambdas/aggregator/mapping';
import { SluiceFunction } from './sluice-function';
import type { StageSettings } from './stage';

/** The transfer agent's handler. */
export const TRANSFER_AGENT_ENTRY = 'lambdas/transfer/handler.ts';

/**
 * The ledger stream records the agent of `region` is handed: writes to another region's transfer
 * items (partition key `XFER#…`, `region` not its own), replicated into this region: asks
 * addressed to it and what others sent it (docs/regions.md, "How an ask reaches the giver").
 * Deletes (no new image) never match.
 */
export function transferFilters(region: string): FilterPattern[] {
  // Lambda's filter syntax: prefix and anything-but matchers (beyond the aggregator's exact values).
  return [
    {
      eventName: ['INSERT', 'MODIFY'],
      dynamodb: { NewImage: { pk: { S: [{ prefix: 'XFER#' }] }, region: { S: [{ 'anything-but': [region] }] } } },
    } as unknown as FilterPattern,
  ];
}

/** Properties of {@link TransferAgent}. */
export interface TransferAgentProps {
  /** The stage's settings (memory, log retention, removal policy of the queue). */
  readonly stage: StageSettings;
  /** The region the agent runs in and writes for. */
  readonly region: string;
  /** This region's replica of the ledger table; its stream must be readable here. */
  readonly ledgerTable: dynamodb.ITable;
  /**
   * Handler file, relative to the repository root.
   * @default {@link TRANSFER_AGENT_ENTRY}
   */
  readonly entry?: string;
}

/**
 * The transfer agent of one region of a multi-region stage: reads its own replica of the ledger's
 * stream, filtered to other regions' transfer items, answers asks addressed to it (gives) and
 * applies what others sent it (receives), each a transaction on its own region's items.
 *
 * The mapping is the aggregator's (bisect, partial failures, bounded retries, an SQS dead-letter
 * queue for positions that keep failing) with small batches and no gathering window: an urgent ask
 * has a request waiting on it.
 *
 * Grants: stream read on the ledger (by the event source), read/write on the ledger, send to its
 * queue.
 */
export class TransferAgent extends Construct {
  /** The agent function. */
  public readonly fn: lambda.Function;
  /** Where the positions of batches that kept failing go. */
  public readonly deadLetterQueue: sqs.Queue;
  /** The handler file the function was built from. */
  public readonly entry: string;

  public constructor(scope: Construct, id: string, props: TransferAgentProps) {
    super(scope, id);
    const { stage } = props;
    this.entry = props.entry ?? TRANSFER_AGENT_ENTRY;
    this.fn = new SluiceFunction(this, 'Agent', {
      stage,
      entry: this.entry,
      description: `Sluice ${stage.name}: transfer agent of ${props.region} (gives and receives headroom between regions)`,
      memoryMb: stage.workerMemoryMb,
      timeout: Duration.seconds(30),
    }).fn;

    this.deadLetterQueue = new sqs.Queue(this, 'DeadLetters', {
      retentionPeriod: Duration.days(14),
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      removalPolicy: stage.removalPolicy,
    });

    this.fn.addEventSource(
      new DynamoEventSource(props.ledgerTable, {
        // A transfer written before the mapping existed is still owed: start from the oldest record.
        startingPosition: lambda.StartingPosition.TRIM_HORIZON,
        batchSize: 100,
        // An urgent ask has a request waiting on it (about 2 s in all): hand records over at once.
        maxBatchingWindow: Duration.seconds(0),
        bisectBatchOnError: true,
        retryAttempts: 10,
        // Applying is idempotent (monotone counters): a record retried for hours does no harm, and
        // one sent to the queue is still applied by the next transfer on the same counters.
        maxRecordAge: Duration.hours(6),
        reportBatchItemFailures: true,
        onFailure: new SqsDlq(this.deadLetterQueue),
        filters: transferFilters(props.region).map((pattern) => lambda.FilterCriteria.filter(pattern)),
      }),
    );
    props.ledgerTable.grantReadWriteData(this.fn);
  }
}
