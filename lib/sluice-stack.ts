import { CfnOutput, Fn, Stack, Tags, Token, type StackProps } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type { Construct } from 'constructs';
import { AdminApi } from './admin';
import { Aggregator } from './aggregator';
import { SluiceAlarms } from './alarms';
import { CatalogImport } from './catalog-import';
import { Console } from './console';
import { SluiceDashboard } from './dashboard';
import { Gateway } from './gateway';
import { acknowledgeStackFindings } from './nag';
import { ManagedInstances } from './managed-instances';
import { LowCreditNotifier } from './notifier';
import { loadProviderKeySources, type ProviderKeySource } from './provider-file';
import { ProviderSecrets } from './secrets';
import type { StageSettings } from './stage';
import { Sweeper } from './sweeper';
import { SluiceTables } from './tables';

/** Properties of {@link SluiceStack}. */
export interface SluiceStackProps extends StackProps {
  /** The stage's validated settings (see `lib/stage.ts`). */
  readonly stage: StageSettings;
  /**
   * Provider accounts whose keys get a Secrets Manager secret.
   * @default read from `config/providers.json`; none if the file is absent
   */
  readonly providers?: readonly ProviderKeySource[];
}

/**
 * One stage of Sluice: tables, provider secrets, the gateway behind its Function URL, the usage
 * aggregator, the hold sweeper, the low-credit notifier, the workspace console behind its own
 * Function URL, the dashboard, and the alarms with the topic they notify. This class only wires
 * the constructs; every decision lives in the construct that owns it or in the stage settings.
 */
export class SluiceStack extends Stack {
  /** The stage's tables. */
  public readonly tables: SluiceTables;
  /** The gateway function and its URL. */
  public readonly gateway: Gateway;
  /** The alarm topic and the alarms beyond the dashboard's. */
  public readonly alarms: SluiceAlarms;

  public constructor(scope: Construct, id: string, props: SluiceStackProps) {
    super(scope, id, {
      description: `Sluice (${props.stage.name}): OpenAI-compatible inference gateway with prepaid workspace balances`,
      ...props,
    });
    const { stage } = props;
    Tags.of(this).add('Project', 'Sluice');
    Tags.of(this).add('Stage', stage.name);

    this.tables = new SluiceTables(this, 'Tables', {
      tablePrefix: stage.tablePrefix,
      removalPolicy: stage.removalPolicy,
      deletionProtection: stage.deletionProtection,
    });
    const providers = props.providers ?? loadProviderKeySources();
    const secrets = new ProviderSecrets(this, 'ProviderSecrets', {
      stage: stage.name,
      providers,
      byokPrefix: stage.byokSecretPrefix,
      removalPolicy: stage.removalPolicy,
    });
    const managedInstances = stage.compute === 'managed-instances' ? new ManagedInstances(this, 'ManagedInstances', { stage }) : undefined;
    this.gateway = new Gateway(this, 'Gateway', { stage, tables: this.tables, secrets, managedInstances });
    new CatalogImport(this, 'CatalogImport', { stage, tables: this.tables });
    const aggregator = new Aggregator(this, 'Aggregator', {
      stage,
      usageTable: this.tables.table('usage'),
      rollupsTable: this.tables.table('rollups'),
    });
    const sweeper = new Sweeper(this, 'Sweeper', { stage, tables: this.tables });
    const monitoring = new SluiceDashboard(this, 'Monitoring', {
      stage,
      gateway: this.gateway.fn,
      aggregator: aggregator.fn,
      sweeper: sweeper.fn,
      deadLetterQueue: aggregator.deadLetterQueue,
      tableNames: this.tables.all.map((t) => t.tableName),
      capacityProviderName: managedInstances?.capacityProvider.capacityProviderName,
    });
    this.alarms = new SluiceAlarms(this, 'Alarms', {
      stage,
      gateway: this.gateway.fn,
      sweeper: sweeper.fn,
      tables: this.tables,
      providers: providers.map((p) => p.name),
    });
    const notifier = new LowCreditNotifier(this, 'LowCredit', { stage, tables: this.tables, topic: this.alarms.topic });
    this.alarms.watchFunction('Notifier', notifier.fn);
    // Before the alarms are wired to the topic, so the console's alarm reaches it too.
    const webConsole = new Console(this, 'Console', { stage, tables: this.tables, secrets });
    const admin = new AdminApi(this, 'Admin', { stage, tables: this.tables, secrets });
    monitoring.dashboard.addWidgets(
      new cloudwatch.AlarmStatusWidget({
        title: 'Alarms: money, errors, providers, DynamoDB, latency, console, management',
        width: 24,
        height: 6,
        alarms: [...this.alarms.alarms, webConsole.errorAlarm, admin.errorAlarm],
      }),
    );
    // Last, so that every alarm of the stack, whoever made it, reaches the topic.
    this.alarms.notifyEveryAlarm(this);
    acknowledgeStackFindings(this, stage);

    new CfnOutput(this, 'AdminUrl', {
      description: 'Management API (IAM auth); sluice --stage <stage> --endpoint <url>, or SLUICE_ADMIN_URL',
      value: admin.url.url,
    });

    new CfnOutput(this, 'AlarmTopicArn', {
      description: 'SNS topic of the stage\'s alarms and low-credit notices; subscribe more endpoints here',
      value: this.alarms.topic.topicArn,
    });
    new CfnOutput(this, 'ConsoleUrl', {
      description: stage.console.origin === undefined
        ? 'The workspace console; members sign in here with a passkey'
        : `The console's Function URL; members sign in at ${stage.console.origin}, which must forward to it`,
      value: webConsole.url.url,
    });
    new CfnOutput(this, 'GatewayUrl', {
      description: 'Base URL of the gateway; clients use <url>v1 as their OpenAI base URL',
      value: this.gateway.url.url,
    });
    if (managedInstances !== undefined) {
      new CfnOutput(this, 'CapacityProviderArn', {
        description: 'The Lambda Managed Instances capacity provider the gateway runs on',
        value: managedInstances.capacityProvider.capacityProviderArn,
      });
    }
  }

  /**
   * Three zones where CDK would give an environment-agnostic stack two (it cannot look the region's
   * zones up offline): the managed-instances VPC spreads its three environments over three zones,
   * chosen at deploy by `Fn::GetAZs`. A stack given a concrete region keeps CDK's own lookup. Only
   * that VPC reads this; an on-demand stage has no VPC.
   */
  public override get availabilityZones(): string[] {
    if (!Token.isUnresolved(this.region)) return super.availabilityZones;
    return [0, 1, 2].map((i) => Fn.select(i, Fn.getAzs()));
  }
}
