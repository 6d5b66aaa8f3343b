import { Duration } from 'aws-cdk-lib';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import { Construct } from 'constructs';
import { ENV } from '../lambdas/shared/config';
import { SluiceFunction } from './sluice-function';
import { REQUEST_LIMIT, type StageSettings } from './stage';
import type { TableSet } from './tables';

/** Properties of {@link Sweeper}. */
export interface SweeperProps {
  /** The stage's settings (memory, log retention, hold grace). */
  readonly stage: StageSettings;
  /** The stage's tables; the sweeper is granted ledger and usage. */
  readonly tables: TableSet;
  /**
   * How often the sweeper runs.
   * @default Duration.minutes(1)
   */
  readonly every?: Duration;
  /**
   * Handler file, relative to the repository root.
   * @default 'lambdas/sweeper/handler.ts'
   */
  readonly entry?: string;
}

/**
 * The sweeper: on a schedule, settles the holds whose request died (their expiry, the request
 * limit plus the grace, has passed). DynamoDB TTL cannot do this job: it only collects garbage,
 * days late.
 *
 * Grants: read/write on ledger and usage (settlement is the gateway's transaction; a hold is a
 * request's open row in usage). The charge needs no catalog: the row carries its prompt bound and
 * any charge already computed.
 */
export class Sweeper extends Construct {
  /** The sweeper function. */
  public readonly fn: lambda.Function;
  /** The EventBridge rule that invokes it. */
  public readonly rule: events.Rule;

  public constructor(scope: Construct, id: string, props: SweeperProps) {
    super(scope, id);
    const { stage, tables } = props;
    this.fn = new SluiceFunction(this, 'Sweeper', {
      stage,
      entry: props.entry ?? 'lambdas/sweeper/handler.ts',
      description: `Sluice ${stage.name}: settles holds of requests that died`,
      memoryMb: stage.workerMemoryMb,
      // Under the one-minute period, so runs rarely overlap (settlement is idempotent if they do).
      timeout: Duration.seconds(55),
      environment: {
        [ENV.requestLimitMs]: String(REQUEST_LIMIT.toMilliseconds()),
        [ENV.holdGraceMs]: String(stage.holdGraceMs),
        // Usage rows it writes carry a TTL this many days out (rollups are kept).
        [ENV.usageRetentionDays]: String(stage.usageRetentionDays),
      },
    }).fn;

    // Lambda retries a failed asynchronous invocation twice by default; a retry would only
    // overlap the next tick, which does the same work.
    this.fn.configureAsyncInvoke({ retryAttempts: 0, maxEventAge: Duration.minutes(1) });

    this.rule = new events.Rule(this, 'Schedule', {
      description: `Sluice ${stage.name}: run the hold sweeper`,
      schedule: events.Schedule.rate(props.every ?? Duration.minutes(1)),
      // No retries: the next tick comes within a minute and does the same work.
      targets: [new targets.LambdaFunction(this.fn, { retryAttempts: 0 })],
    });

    for (const name of ['ledger', 'usage'] as const) tables.table(name).grantReadWriteData(this.fn);
  }
}
