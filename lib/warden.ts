import { ArnFormat, Duration, Stack, Validations } from 'aws-cdk-lib';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import { Construct } from 'constructs';
import { WARDEN_ENV } from '../lambdas/warden/env';
import { HEARTBEAT_KEY } from '../lambdas/warden/handler-constants';
import { SluiceFunction } from './sluice-function';
import type { StageSettings } from './stage';

/** Name of the secret holding the front door's configuration for the wardens (KeyValueStore ARN, gateway URLs). */
export function frontDoorConfigSecretName(stage: string): string {
  return `sluice/${stage}/front-door/config`;
}

/** Name of the secret holding the probe workspace's key, which the wardens send to every gateway. */
export function probeKeySecretName(stage: string): string {
  return `sluice/${stage}/front-door/probe-key`;
}

/** Properties of {@link Warden}. */
export interface WardenProps {
  /** The stage's settings (name, memory, log retention). */
  readonly stage: StageSettings;
  /** The workspaces table in this region (the configuration home's record and the heartbeat items are on it). */
  readonly workspacesTable: dynamodb.ITable;
  /**
   * Handler file, relative to the repository root.
   * @default 'lambdas/warden/handler.ts'
   */
  readonly entry?: string;
}

/**
 * The warden of one region of a multi-region stage (docs/regions.md, "The front door"): every
 * minute, a function that probes every region's gateway every 5 s (3 s timeout; three failures in
 * a row mark a region down, three successes up) and writes the states to the front door's
 * CloudFront KeyValueStore when they change. One per region, so losing a region loses one warden.
 *
 * It finds the store and the gateways in a secret the front door's stack writes and replicates to
 * every region (`sluice/<stage>/front-door/config`), and the probe key in another
 * (`…/probe-key`, set by an operator): no cross-region reference, and the front door's stack can
 * depend on the regions' stacks without a cycle. Until both exist it fails each run, which its
 * error alarm reports.
 *
 * Every round each warden reads the configuration home (the `STAGE` / `CONFIG_HOME` item) in its
 * own replica of the workspaces table; the configuration home's warden writes its heartbeat item
 * there, the others read the home's and mark their own region `stale` past 30 s
 * (`lambdas/warden/health.ts`, `heartbeatPlan`, `heartbeatAge`, `ownState`).
 *
 * Grants: `GetSecretValue` on those two secrets in its own region; `DescribeKeyValueStore`,
 * `GetKey` and `PutKey` on the account's KeyValueStores (the store's id is made by the front
 * door's stack, after this one); `GetItem` and `PutItem` on the workspaces table in its region, on
 * the `STAGE` partition only: any region may become the configuration home (a move needs no
 * redeploy), so every warden may write its heartbeat.
 */
export class Warden extends Construct {
  /** The warden function. */
  public readonly fn: lambda.Function;
  /** The EventBridge rule that runs it every minute. */
  public readonly rule: events.Rule;

  public constructor(scope: Construct, id: string, props: WardenProps) {
    super(scope, id);
    const { stage } = props;
    const configSecret = frontDoorConfigSecretName(stage.name);
    const probeSecret = probeKeySecretName(stage.name);
    this.fn = new SluiceFunction(this, 'Warden', {
      stage,
      entry: props.entry ?? 'lambdas/warden/handler.ts',
      description: `Sluice ${stage.name}: front-door warden (probes every region every 5 s, writes their health)`,
      // It mostly waits on probes; the smallest memory Lambda offers.
      memoryMb: 128,
      // A run probes for most of its minute and the next run starts on the minute.
      timeout: Duration.seconds(60),
      environment: {
        [WARDEN_ENV.configSecret]: configSecret,
        [WARDEN_ENV.probeKeySecret]: probeSecret,
      },
      // The KeyValueStore client and its SigV4A signer are bundled: the runtime's SDK has no SigV4A.
      externalModules: [],
    }).fn;
    this.fn.configureAsyncInvoke({ retryAttempts: 0, maxEventAge: Duration.minutes(1) });

    this.rule = new events.Rule(this, 'Schedule', {
      description: `Sluice ${stage.name}: run the front-door warden`,
      schedule: events.Schedule.rate(Duration.minutes(1)),
      targets: [new targets.LambdaFunction(this.fn, { retryAttempts: 0 })],
    });

    // The configuration home's record and the heartbeats, on the STAGE partition of its own replica:
    // whichever region is the configuration home writes its heartbeat item, the others read the home's.
    // The condition keeps the warden off every workspace's and key's items on the same table.
    this.fn.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['dynamodb:GetItem', 'dynamodb:PutItem'],
        resources: [props.workspacesTable.tableArn],
        conditions: { 'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': [HEARTBEAT_KEY.pk] } },
      }),
    );

    const stack = Stack.of(this);
    // Secrets Manager appends six random characters to a secret's name in its ARN.
    const secretArn = (name: string): string =>
      stack.formatArn({ service: 'secretsmanager', resource: 'secret', resourceName: `${name}-??????`, arnFormat: ArnFormat.COLON_RESOURCE_NAME });
    this.fn.addToRolePolicy(new iam.PolicyStatement({ actions: ['secretsmanager:GetSecretValue'], resources: [secretArn(configSecret), secretArn(probeSecret)] }));
    const stores = stack.formatArn({ service: 'cloudfront', region: '', resource: 'key-value-store', resourceName: '*' });
    this.fn.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['cloudfront-keyvaluestore:DescribeKeyValueStore', 'cloudfront-keyvaluestore:GetKey', 'cloudfront-keyvaluestore:PutKey'],
        resources: [stores],
      }),
    );
    Validations.of(this).acknowledge({
      id: 'AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:cloudfront::<AWS::AccountId>:key-value-store/*]',
      reason:
        "The front door's KeyValueStore is made by the front door's stack, which is deployed after every region's (it needs their gateways' URLs), so its id is unknown here; the grant is to read and write keys of the account's KeyValueStores, nothing else.",
    });
  }
}
