import { Duration, Validations } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import { Operation } from 'aws-cdk-lib/aws-dynamodb';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import { Construct, type IConstruct } from 'constructs';
import { ERROR_CATALOG } from '../lambdas/core/errors';
import { SETTLE_FAILED_EVENT } from '../lambdas/gateway/faults';
import { ALL_TABLES } from '../lambdas/shared/schema';
import { CODE_DIMENSION, METRIC_NAMESPACE, PROVIDER_DIMENSION, SLUICE_METRICS, STAGE_DIMENSION } from './dashboard';
import type { StageSettings } from './stage';
import type { TableSet } from './tables';

/** Namespace of the metrics CloudWatch Logs derives from log lines (a metric filter cannot set the `Stage` dimension, so the stage is in the namespace). */
export function logMetricNamespace(stage: string): string {
  return `${METRIC_NAMESPACE}/${stage}`;
}

/** Metric derived from `settle_failed` (gateway) and `sweep_failed` (sweeper) log lines. */
export const SETTLEMENT_FAILURES_METRIC = 'SettlementFailures';

/**
 * The 5xx codes that get an alarm each: every row of the error catalog at 500 or above, as the
 * gateway's `Refusals` metric names it (`http_<status>` where SPEC gives no code), except
 * `paused_by_owner`, which is a customer's choice, not a fault.
 */
export function serverErrorCodes(): readonly string[] {
  const codes = new Set<string>();
  for (const row of Object.values(ERROR_CATALOG)) {
    if (row.status < 500 || row.code === 'paused_by_owner') continue;
    codes.add(row.code ?? `http_${row.status}`);
  }
  return [...codes].sort();
}

/** DynamoDB operations whose system errors are watched (an alarm's math may hold 10 metrics at most). */
const WATCHED_OPERATIONS: readonly Operation[] = [
  Operation.GET_ITEM,
  Operation.BATCH_GET_ITEM,
  Operation.QUERY,
  Operation.SCAN,
  Operation.PUT_ITEM,
  Operation.UPDATE_ITEM,
  Operation.DELETE_ITEM,
  Operation.BATCH_WRITE_ITEM,
  Operation.TRANSACT_WRITE_ITEMS,
];

/** Properties of {@link SluiceAlarms}. */
export interface SluiceAlarmsProps {
  /** The stage's settings: its name, thresholds and alarm e-mail. */
  readonly stage: StageSettings;
  /** The gateway function; its log group carries `settle_failed` lines. */
  readonly gateway: lambda.Function;
  /** The sweeper function; its log group carries `sweep_failed` lines. */
  readonly sweeper: lambda.Function;
  /** The stage's tables, each watched for system errors and throttles. */
  readonly tables: TableSet;
  /** Providers known at synth (from `config/`), each watched for its upstream error rate. */
  readonly providers: readonly string[];
}

/**
 * The stage's alarm topic and the alarms beyond the dashboard's own: failed settlements, an
 * expired-holds backlog, 5xx answers by code, each provider's upstream error rate, DynamoDB
 * system errors and throttles per table, p99 latency and time to first byte.
 *
 * {@link SluiceAlarms.notifyEveryAlarm} gives every alarm under a scope (the whole stack) the
 * topic as its alarm and OK action, so an alarm added anywhere later cannot end up reaching no
 * one. An e-mail address from the stage settings is subscribed to the topic.
 */
export class SluiceAlarms extends Construct {
  /** The stage's alarm topic (alarms, OK transitions, low-credit notices). */
  public readonly topic: sns.Topic;
  private readonly alarmList: cloudwatch.Alarm[] = [];
  private readonly stageName: string;

  /** The alarms this construct made. */
  public get alarms(): readonly cloudwatch.Alarm[] {
    return this.alarmList;
  }

  public constructor(scope: Construct, id: string, props: SluiceAlarmsProps) {
    super(scope, id);
    const { stage } = props;
    const a = stage.alarms;
    const stageName = stage.name;
    this.stageName = stageName;

    this.topic = new sns.Topic(this, 'Topic', {
      topicName: `Sluice-${stageName}-alarms`,
      displayName: `Sluice ${stageName} alarms`,
      // Publishers must use TLS (cdk-nag AwsSolutions-SNS3).
      enforceSSL: true,
    });
    Validations.of(this.topic).acknowledge({
      id: 'AwsSolutions-SNS2',
      reason:
        'Alarm and low-credit messages carry alarm names and workspace ids, no secret or customer content; CloudWatch cannot publish to a topic encrypted with the AWS-managed SNS key, and a customer-managed key per stage is not worth its cost for this.',
    });
    if (stage.alarmEmail !== undefined) {
      this.topic.addSubscription(new subscriptions.EmailSubscription(stage.alarmEmail));
      Validations.of(this.topic).acknowledge({
        id: 'Serverless-SNSRedrivePolicy',
        reason:
          'Deliveries to an e-mail address that fail (unconfirmed, bouncing) have nowhere better to go than a queue nobody reads; the alarms stay visible in CloudWatch and on the dashboard.',
      });
    }

    const fiveMinutes = Duration.minutes(5);
    const sluice = (metricName: string, statistic: string, period = fiveMinutes, extra: Record<string, string> = {}): cloudwatch.Metric =>
      new cloudwatch.Metric({
        namespace: METRIC_NAMESPACE,
        metricName,
        dimensionsMap: { [STAGE_DIMENSION]: stageName, ...extra },
        statistic,
        period,
      });
    const alarm = (
      id: string,
      description: string,
      metric: cloudwatch.IMetric,
      threshold: number,
      options: { evaluationPeriods?: number; datapointsToAlarm?: number; missing?: cloudwatch.TreatMissingData } = {},
    ): cloudwatch.Alarm =>
      new cloudwatch.Alarm(this, id, {
        alarmName: `Sluice-${stageName}-${id}`,
        alarmDescription: description,
        metric,
        threshold,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        evaluationPeriods: options.evaluationPeriods ?? 1,
        datapointsToAlarm: options.datapointsToAlarm ?? 1,
        // No data means no traffic, which is not a fault (the backlog alarm says otherwise).
        treatMissingData: options.missing ?? cloudwatch.TreatMissingData.NOT_BREACHING,
      });
    const alarms = this.alarmList;

    // Failed settlements: the gateway and the sweeper log them by kind; a metric filter counts
    // the lines (a JSON filter cannot read console.error's prefixed lines, a term can).
    const failureSources: ReadonlyArray<[string, lambda.Function, string]> = [
      ['Gateway', props.gateway, SETTLE_FAILED_EVENT],
      ['Sweeper', props.sweeper, 'sweep_failed'],
    ];
    for (const [name, fn, term] of failureSources) {
      new logs.MetricFilter(this, `${name}SettlementFailures`, {
        logGroup: fn.logGroup,
        filterPattern: logs.FilterPattern.allTerms(term),
        metricNamespace: logMetricNamespace(stageName),
        metricName: SETTLEMENT_FAILURES_METRIC,
        metricValue: '1',
      });
    }
    alarms.push(
      alarm(
        'SettlementFailures',
        'A settlement failed (gateway settle_failed or sweeper sweep_failed): money stays held until the sweeper settles it. Check DynamoDB errors and the function logs.',
        new cloudwatch.Metric({ namespace: logMetricNamespace(stageName), metricName: SETTLEMENT_FAILURES_METRIC, statistic: 'Sum', period: fiveMinutes }),
        a.settlementFailuresPer5Min,
      ),
    );

    // The sweeper reports its backlog every minute; silence means it is not running, which is
    // the same emergency, so missing data breaches here.
    alarms.push(
      alarm(
        'ExpiredHoldsBacklog',
        'Expired holds stay open after sweeper runs (or the sweeper stopped reporting): dead requests keep customers\' credit held.',
        sluice('ExpiredHoldsBacklog', 'Maximum', Duration.minutes(1)),
        a.expiredHoldsBacklog,
        { evaluationPeriods: 3, datapointsToAlarm: 3, missing: cloudwatch.TreatMissingData.BREACHING },
      ),
    );

    for (const code of serverErrorCodes()) {
      alarms.push(
        alarm(
          `ServerErrors-${code}`,
          `Answers with 5xx code ${code}: Sluice, not the request, is at fault.`,
          sluice(SLUICE_METRICS.refusals, 'Sum', fiveMinutes, { [CODE_DIMENSION]: code }),
          a.serverErrorsPer5Min,
        ),
      );
    }

    for (const provider of [...new Set(props.providers)].sort()) {
      const dims = { [PROVIDER_DIMENSION]: provider };
      alarms.push(
        alarm(
          `UpstreamErrorRate-${provider}`,
          `Provider ${provider} answers 5xx (or not at all) on too many calls; judged only above ${a.upstreamMinCallsPer5Min} calls in 5 minutes.`,
          new cloudwatch.MathExpression({
            expression: `IF(calls >= ${a.upstreamMinCallsPer5Min}, 100 * errors / calls, 0)`,
            usingMetrics: {
              calls: sluice('UpstreamCalls', 'Sum', fiveMinutes, dims),
              errors: sluice('UpstreamErrors', 'Sum', fiveMinutes, dims),
            },
            period: fiveMinutes,
            label: `${provider} upstream error %`,
          }),
          a.upstreamErrorRatePercent,
        ),
      );
    }

    for (const { name: id } of ALL_TABLES) {
      const table = props.tables.table(id);
      alarms.push(
        alarm(
          `DynamoSystemErrors-${id}`,
          'DynamoDB answered with system errors (its own 500s); the SDKs retry, but persistent errors fail requests and settlements.',
          table.metricSystemErrorsForOperations({ operations: [...WATCHED_OPERATIONS], period: fiveMinutes }),
          a.dynamoSystemErrorsPer5Min,
        ),
        alarm(
          `DynamoThrottles-${id}`,
          'DynamoDB throttled reads or writes: a partition (a hot workspace, key or window item) is over its per-partition limit.',
          new cloudwatch.MathExpression({
            expression: 'reads + writes',
            usingMetrics: {
              reads: table.metric('ReadThrottleEvents', { statistic: 'Sum', period: fiveMinutes }),
              writes: table.metric('WriteThrottleEvents', { statistic: 'Sum', period: fiveMinutes }),
            },
            period: fiveMinutes,
            label: 'throttle events',
          }),
          a.dynamoThrottlesPer5Min,
        ),
      );
    }

    alarms.push(
      alarm(
        'FirstByteP99',
        'p99 of the time to first byte is high for 15 of 25 minutes: providers are slow, or admission is (DynamoDB).',
        sluice(SLUICE_METRICS.timeToFirstByteMs, 'p99'),
        a.firstByteP99Ms,
        { evaluationPeriods: 5, datapointsToAlarm: 3 },
      ),
      alarm(
        'LatencyP99',
        'p99 of whole requests (streams included) is near the 540 s limit for 15 of 25 minutes: requests are about to end in 504.',
        sluice(SLUICE_METRICS.latencyMs, 'p99'),
        a.latencyP99Ms,
        { evaluationPeriods: 5, datapointsToAlarm: 3 },
      ),
    );

  }

  /** Adds an alarm on a scheduled function's errors: any error in 15 minutes. */
  public watchFunction(name: string, fn: lambda.IFunction): cloudwatch.Alarm {
    const alarm = new cloudwatch.Alarm(this, `${name}Errors`, {
      alarmName: `Sluice-${this.stageName}-${name}Errors`,
      alarmDescription: `The ${name} function is failing; its schedule retries on the next tick.`,
      metric: fn.metricErrors({ period: Duration.minutes(15), statistic: 'Sum' }),
      threshold: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    this.alarmList.push(alarm);
    return alarm;
  }

  /**
   * Gives every CloudWatch alarm under `scope` the topic as its alarm and OK action (once each).
   * Called by the stack after every construct exists, so no alarm is left without an action.
   */
  public notifyEveryAlarm(scope: IConstruct): number {
    const action = new actions.SnsAction(this.topic);
    let count = 0;
    for (const node of scope.node.findAll()) {
      if (!(node instanceof cloudwatch.Alarm)) continue;
      node.addAlarmAction(action);
      node.addOkAction(action);
      count += 1;
    }
    return count;
  }
}
