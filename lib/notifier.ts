import { Duration } from 'aws-cdk-lib';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as sns from 'aws-cdk-lib/aws-sns';
import { Construct } from 'constructs';
import { NOTIFIER_ENV } from '../lambdas/notifier/env';
import { SluiceFunction } from './sluice-function';
import type { StageSettings } from './stage';
import type { TableSet } from './tables';

/** Properties of {@link LowCreditNotifier}. */
export interface LowCreditNotifierProps {
  /** The stage's settings (memory, log retention). */
  readonly stage: StageSettings;
  /** The stage's tables: thresholds and crossings live in workspaces, balances in ledger. */
  readonly tables: TableSet;
  /** The stage's alarm topic; every notice is also published there. */
  readonly topic: sns.ITopic;
  /**
   * How often balances are checked: the longest a notice can lag the crossing.
   * @default Duration.minutes(5)
   */
  readonly every?: Duration;
  /**
   * Handler file, relative to the repository root.
   * @default 'lambdas/notifier/handler.ts'
   */
  readonly entry?: string;
}

/**
 * The low-credit notifier: on a schedule, off the request path, reads the balance of every
 * workspace that set a low-credit threshold and publishes one notice per crossing, to the
 * account's default EventBridge bus (source `sluice`, detail-type `Low credit`) and to the
 * stage's SNS topic. A crossing is recorded with a conditional write beside the workspace's
 * settings, so overlapping runs cannot announce it twice.
 *
 * Grants, least privilege: `Scan`, `PutItem` and `DeleteItem` on the workspaces table (the
 * threshold scan and the crossing record); `GetItem` and `Query` on the ledger (the balance,
 * and its slices once the ledger splits it); `events:PutEvents` on the default bus;
 * `sns:Publish` on the topic. Nothing else.
 */
export class LowCreditNotifier extends Construct {
  /** The notifier function. */
  public readonly fn: lambda.Function;
  /** The EventBridge rule that invokes it. */
  public readonly rule: events.Rule;

  public constructor(scope: Construct, id: string, props: LowCreditNotifierProps) {
    super(scope, id);
    const { stage, tables } = props;
    const bus = events.EventBus.fromEventBusName(this, 'DefaultBus', 'default');
    this.fn = new SluiceFunction(this, 'Notifier', {
      stage,
      entry: props.entry ?? 'lambdas/notifier/handler.ts',
      description: `Sluice ${stage.name}: low-credit notices, once per crossing`,
      memoryMb: stage.workerMemoryMb,
      timeout: Duration.seconds(60),
      environment: {
        [NOTIFIER_ENV.topicArn]: props.topic.topicArn,
        [NOTIFIER_ENV.eventBusName]: bus.eventBusName,
      },
    }).fn;
    // A failed run is simply the next tick's work; a retry would overlap it.
    this.fn.configureAsyncInvoke({ retryAttempts: 0, maxEventAge: Duration.minutes(1) });

    this.rule = new events.Rule(this, 'Schedule', {
      description: `Sluice ${stage.name}: check low-credit thresholds`,
      schedule: events.Schedule.rate(props.every ?? Duration.minutes(5)),
      targets: [new targets.LambdaFunction(this.fn, { retryAttempts: 0 })],
    });

    this.fn.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['dynamodb:Scan', 'dynamodb:PutItem', 'dynamodb:DeleteItem'],
        resources: [tables.table('workspaces').tableArn],
      }),
    );
    this.fn.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['dynamodb:GetItem', 'dynamodb:Query'],
        resources: [tables.table('ledger').tableArn],
      }),
    );
    bus.grantPutEventsTo(this.fn);
    props.topic.grantPublish(this.fn);
  }
}
