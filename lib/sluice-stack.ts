import { CfnOutput, Duration, Fn, Stack, Tags, Token, type StackProps } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type { Construct } from 'constructs';
import { AdminApi } from './admin';
import { Aggregator } from './aggregator';
import { SluiceAlarms } from './alarms';
import { CatalogImport } from './catalog-import';
import { Console } from './console';
import { SluiceDashboard } from './dashboard';
import { Gateway } from './gateway';
import { acknowledgeStackFindings, acknowledgeTransferAgent } from './nag';
import { ManagedInstances } from './managed-instances';
import { LowCreditNotifier } from './notifier';
import { loadProviderKeySources, type ProviderKeySource } from './provider-file';
import { ProviderSecrets } from './secrets';
import { isMultiRegion, type StageSettings } from './stage';
import { Sweeper } from './sweeper';
import { SluiceTables, type TableSet } from './tables';
import { SluiceGlobalTables, SluiceReplicaTables } from './global-tables';
import { TransferAgent } from './transfer-agent';
import { Warden } from './warden';

/** Properties of {@link SluiceStack}. */
export interface SluiceStackProps extends StackProps {
  /** The stage's validated settings (see `lib/stage.ts`). */
  readonly stage: StageSettings;
  /**
   * Provider accounts whose keys get a Secrets Manager secret.
   * @default read from `config/providers.json`; none if the file is absent
   */
  readonly providers?: readonly ProviderKeySource[];
  /**
   * The region this stack serves, in a stage with two or more regions (`stage.regions`); the stack
   * must be given that region (`env.region`). Absent for a one-region stage: today's stack.
   * @default one region
   */
  readonly region?: string;
}

/**
 * One stage of Sluice: tables, provider secrets, the gateway behind its Function URL, the usage
 * aggregator, the hold sweeper, the low-credit notifier, the workspace console behind its own
 * Function URL, the dashboard, and the alarms with the topic they notify. This class only wires
 * the constructs; every decision lives in the construct that owns it or in the stage settings.
 */
export class SluiceStack extends Stack {
  /** The stage's tables: its own, or in a multi-region stage the global tables (home) or their replicas. */
  public readonly tables: TableSet;
  /** The gateway function and its URL. */
  public readonly gateway: Gateway;
  /** The alarm topic and the alarms beyond the dashboard's. */
  public readonly alarms: SluiceAlarms;
  /** The transfer agent (a multi-region stage's stacks only). */
  public readonly transferAgent?: TransferAgent;

  /**
   * Where a stack of `stage` sits: `undefined` for a one-region stage (today's stack), else its
   * region and whether it is the home (the first of `stage.regions`). Throws on a region the stage
   * does not list, or a stack whose own region differs.
   */
  public static placement(stage: StageSettings, region: string | undefined, stackRegion: string): { readonly region: string; readonly home: boolean } | undefined {
    if (!isMultiRegion(stage)) {
      if (region !== undefined) throw new Error(`SluiceStack: stage ${stage.name} has one region; give no region`);
      return undefined;
    }
    if (region === undefined || !stage.regions.includes(region)) {
      throw new Error(`SluiceStack: stage ${stage.name} spans ${stage.regions.join(', ')}; give one of them as the stack's region`);
    }
    if (stackRegion !== region) throw new Error(`SluiceStack: the stack for ${region} must be deployed there (env.region ${stackRegion})`);
    return { region, home: stage.regions[0] === region };
  }

  public constructor(scope: Construct, id: string, props: SluiceStackProps) {
    super(scope, id, {
      description: `Sluice (${props.stage.name}): OpenAI-compatible inference gateway with prepaid workspace balances`,
      ...props,
    });
    const { stage } = props;
    Tags.of(this).add('Project', 'Sluice');
    Tags.of(this).add('Stage', stage.name);

    // A stack of a multi-region stage: which region it serves, and whether it is the home.
    const placement = SluiceStack.placement(stage, props.region, this.region);
    const others = placement === undefined ? [] : stage.regions.filter((r) => r !== placement.region);
    let replicaTables: SluiceReplicaTables | undefined;
    if (placement === undefined) {
      this.tables = new SluiceTables(this, 'Tables', {
        tablePrefix: stage.tablePrefix,
        removalPolicy: stage.removalPolicy,
        deletionProtection: stage.deletionProtection,
      });
    } else if (placement.home) {
      this.tables = new SluiceGlobalTables(this, 'Tables', {
        tablePrefix: stage.tablePrefix,
        replicaRegions: others,
        removalPolicy: stage.removalPolicy,
        deletionProtection: stage.deletionProtection,
      });
    } else {
      replicaTables = new SluiceReplicaTables(this, 'Tables', { tablePrefix: stage.tablePrefix, streams: ['usage', 'ledger'] });
      this.tables = replicaTables;
    }
    const providers = props.providers ?? loadProviderKeySources();
    const secrets = new ProviderSecrets(this, 'ProviderSecrets', {
      stage: stage.name,
      providers,
      byokPrefix: stage.byokSecretPrefix,
      removalPolicy: stage.removalPolicy,
      ...(placement === undefined ? {} : placement.home ? { replicaRegions: others } : { replicas: true }),
    });
    const home = placement === undefined || placement.home;
    const managedInstances = stage.compute === 'managed-instances' ? new ManagedInstances(this, 'ManagedInstances', { stage }) : undefined;
    this.gateway = new Gateway(this, 'Gateway', { stage, tables: this.tables, secrets, managedInstances });
    // The catalog is configuration, written in the configuration home only (replication carries it).
    if (home) new CatalogImport(this, 'CatalogImport', { stage, tables: this.tables });
    const aggregator = new Aggregator(this, 'Aggregator', {
      stage,
      usageTable: this.tables.table('usage'),
      rollupsTable: this.tables.table('rollups'),
      ...(placement === undefined ? {} : { region: { name: placement.region, home: placement.home } }),
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
      ...(placement === undefined ? {} : { dashboardName: `Sluice-${stage.name}-${placement.region}` }),
    });
    this.alarms = new SluiceAlarms(this, 'Alarms', {
      stage,
      gateway: this.gateway.fn,
      sweeper: sweeper.fn,
      tables: this.tables,
      providers: providers.map((p) => p.name),
    });
    // The notifier's crossing record is one item: it runs in the configuration home only.
    if (home) {
      const notifier = new LowCreditNotifier(this, 'LowCredit', { stage, tables: this.tables, topic: this.alarms.topic });
      this.alarms.watchFunction('Notifier', notifier.fn);
    }
    const regional: cloudwatch.IAlarm[] = [];
    if (placement !== undefined) {
      const agent = new TransferAgent(this, 'TransferAgent', { stage, region: placement.region, ledgerTable: this.tables.table('ledger') });
      this.transferAgent = agent;
      regional.push(
        this.alarms.watchFunction('TransferAgent', agent.fn),
        new cloudwatch.Alarm(this, 'TransferDeadLetters', {
          alarmName: `Sluice-${stage.name}-TransferDeadLetters`,
          alarmDescription: 'Transfer agent batches kept failing: asks or receipts between regions wait (nothing is lost; the counters apply on the next transfer). Check the agent\'s log group.',
          metric: agent.deadLetterQueue.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(1), statistic: 'Maximum' }),
          threshold: stage.alarms.deadLetterMessages,
          comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
          evaluationPeriods: 1,
          treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
        }),
      );
      const warden = new Warden(this, 'Warden', { stage, workspacesTable: this.tables.table('workspaces') });
      regional.push(this.alarms.watchFunction('Warden', warden.fn));
    }
    // Before the alarms are wired to the topic, so the console's alarm reaches it too. The console
    // stays in the home region for now (its passkeys are bound to its host name).
    const webConsole = home ? new Console(this, 'Console', { stage, tables: this.tables, secrets }) : undefined;
    const admin = new AdminApi(this, 'Admin', { stage, tables: this.tables, secrets });
    monitoring.dashboard.addWidgets(
      new cloudwatch.AlarmStatusWidget({
        title: 'Alarms: money, errors, providers, DynamoDB, latency, console, management',
        width: 24,
        height: 6,
        alarms: [...this.alarms.alarms, ...(webConsole === undefined ? [] : [webConsole.errorAlarm]), admin.errorAlarm, ...regional],
      }),
    );
    // Last, so that every alarm of the stack, whoever made it, reaches the topic.
    this.alarms.notifyEveryAlarm(this);
    acknowledgeStackFindings(this, stage, this.tables);
    replicaTables?.acknowledgeLookups();
    if (this.transferAgent !== undefined) acknowledgeTransferAgent(this.transferAgent);

    new CfnOutput(this, 'AdminUrl', {
      description: 'Management API (IAM auth); sluice --stage <stage> --endpoint <url>, or SLUICE_ADMIN_URL',
      value: admin.url.url,
    });

    new CfnOutput(this, 'AlarmTopicArn', {
      description: 'SNS topic of the stage\'s alarms and low-credit notices; subscribe more endpoints here',
      value: this.alarms.topic.topicArn,
    });
    if (webConsole !== undefined) {
      new CfnOutput(this, 'ConsoleUrl', {
        description: stage.console.origin === undefined
          ? 'The workspace console; members sign in here with a passkey'
          : `The console's Function URL; members sign in at ${stage.console.origin}, which must forward to it`,
        value: webConsole.url.url,
      });
    }
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
   * chosen at deploy by `Fn::GetAZs`; so does a multi-region stage's stack, which has a region but
   * no account (synth stays offline). A stack given both keeps CDK's own lookup. Only that VPC
   * reads this; an on-demand stage has no VPC.
   */
  public override get availabilityZones(): string[] {
    if (!Token.isUnresolved(this.region) && !Token.isUnresolved(this.account)) return super.availabilityZones;
    return [0, 1, 2].map((i) => Fn.select(i, Fn.getAzs()));
  }
}
