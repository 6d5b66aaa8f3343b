import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { EMF_NAMESPACE } from '../lambdas/shared/emf';
import type { StageSettings } from './stage';

/** CloudWatch namespace of every metric Sluice emits (the functions' EMF lines write it). */
export const METRIC_NAMESPACE = EMF_NAMESPACE;

/** Dimension carried by every Sluice metric; its value is the stage name (`dev`, `stg`, `prod`). */
export const STAGE_DIMENSION = 'Stage';

/**
 * The metrics the dashboard reads, which the functions must emit (EMF) in namespace
 * {@link METRIC_NAMESPACE}, each with exactly the dimension set given (CloudWatch treats another
 * dimension set as another metric, and the graph would stay empty):
 *
 * | name | unit | dimensions | emitted by, when |
 * |---|---|---|---|
 * | `Requests` | Count | `Stage` | gateway, 1 per request that reached the handler |
 * | `Refusals` | Count | `Stage`, `Code` | gateway, 1 per refusal; `Code` is SPEC's error code (e.g. `insufficient_quota`), or the status as a string where SPEC names no code |
 * | `LatencyMs` | Milliseconds | `Stage` | gateway, request start to last byte |
 * | `TimeToFirstByteMs` | Milliseconds | `Stage` | gateway, request start to first byte written |
 * | `UpstreamLatencyMs` | Milliseconds | `Stage`, `Provider` | gateway, provider call start to its response headers |
 * | `SpendMicros` | Count | `Stage` | gateway and sweeper, the settled charge in micro-units |
 * | `HoldsOutstanding` | Count | `Stage` | sweeper, each run: holds still open |
 * | `ExpiredHoldsBacklog` | Count | `Stage` | sweeper, each run: expired holds it left open (failed or out of time) |
 * | `UpstreamCalls`, `UpstreamErrors` | Count | `Stage`, `Provider` | gateway, per provider call; an error is a 5xx or no answer |
 * | `LowCreditNotices` | Count | `Stage` | notifier, each run: notices published |
 * | `TransactionConflicts` | Count | `Stage` | gateway and sweeper, 1 per `TransactionConflict` cancellation reason |
 *
 * Everything else on the dashboard is AWS's own: Lambda `Errors`, `Throttles`, `IteratorAge`;
 * DynamoDB `ThrottledRequests`, `UserErrors`, `TransactionConflict`; SQS queue depth.
 */
export const SLUICE_METRICS = {
  requests: 'Requests',
  refusals: 'Refusals',
  latencyMs: 'LatencyMs',
  timeToFirstByteMs: 'TimeToFirstByteMs',
  upstreamLatencyMs: 'UpstreamLatencyMs',
  spendMicros: 'SpendMicros',
  holdsOutstanding: 'HoldsOutstanding',
  expiredHoldsBacklog: 'ExpiredHoldsBacklog',
  upstreamCalls: 'UpstreamCalls',
  upstreamErrors: 'UpstreamErrors',
  lowCreditNotices: 'LowCreditNotices',
  transactionConflicts: 'TransactionConflicts',
} as const;

/** Dimension naming the refusal code on `Refusals`. */
export const CODE_DIMENSION = 'Code';
/** Dimension naming the provider on `UpstreamLatencyMs`. */
export const PROVIDER_DIMENSION = 'Provider';

/** Properties of {@link SluiceDashboard}. */
export interface SluiceDashboardProps {
  /** The stage's settings: its name (the `Stage` dimension) and alarm thresholds. */
  readonly stage: StageSettings;
  /** The gateway function. */
  readonly gateway: lambda.IFunction;
  /** The aggregator function, whose IteratorAge is the rollup lag. */
  readonly aggregator: lambda.IFunction;
  /** The sweeper function. */
  readonly sweeper: lambda.IFunction;
  /** The aggregator's dead-letter queue. */
  readonly deadLetterQueue: sqs.IQueue;
  /** Full names of the stage's DynamoDB tables, for the throttle and conflict graphs. */
  readonly tableNames: readonly string[];
  /**
   * The capacity provider the gateway runs on (a stage on managed instances): its utilisation and
   * allocated vCPUs get a row of graphs.
   * @default none: the gateway runs on demand
   */
  readonly capacityProviderName?: string;
  /**
   * The dashboard's name.
   * @default `Sluice-<stage>`; a multi-region stage's region stacks use `Sluice-<stage>-<region>`
   */
  readonly dashboardName?: string;
}

const MINUTE = Duration.minutes(1);
const WIDE = 12;
const THIRD = 8;
const HEIGHT = 6;

/**
 * One CloudWatch dashboard per stage (`Sluice-<stage>`) and the stage's alarms.
 *
 * Graphs: requests and refusals by code, latency and time to first byte (p50, p99), upstream
 * latency by provider, spend per minute, holds outstanding, DynamoDB throttles, user errors and
 * transaction conflicts, aggregator lag, function errors and throttles, dead-letter depth. See
 * {@link SLUICE_METRICS} for what the code must emit. Series keyed by a value only known at run
 * time (refusal code, provider, table operation) are SEARCH expressions, so a new code or
 * provider appears without a deploy.
 *
 * Alarms (thresholds from the stage settings) get their actions from `SluiceAlarms` (`lib/alarms.ts`),
 * which notifies every alarm of the stack on the stage's topic and adds the alarms beyond these.
 */
export class SluiceDashboard extends Construct {
  /** The dashboard, named `Sluice-<stage>`. */
  public readonly dashboard: cloudwatch.Dashboard;
  /** The dashboard's own alarms (actions are added by `SluiceAlarms.notifyEveryAlarm`). */
  public readonly alarms: readonly cloudwatch.Alarm[];

  public constructor(scope: Construct, id: string, props: SluiceDashboardProps) {
    super(scope, id);
    const { stage } = props;
    const stageName = stage.name;

    const sluice = (metricName: string, statistic: string, label?: string): cloudwatch.Metric =>
      new cloudwatch.Metric({
        namespace: METRIC_NAMESPACE,
        metricName,
        dimensionsMap: { [STAGE_DIMENSION]: stageName },
        statistic,
        period: MINUTE,
        label,
      });
    // Exact match on Stage (quoted), so `dev` never matches another stage's series.
    const search = (dimension: string, metricName: string, statistic: string, label: string): cloudwatch.MathExpression =>
      new cloudwatch.MathExpression({
        expression: `SEARCH('{${METRIC_NAMESPACE},${dimension},${STAGE_DIMENSION}} MetricName="${metricName}" ${STAGE_DIMENSION}="${stageName}"', '${statistic}', 60)`,
        label,
        period: MINUTE,
      });
    const tableFilter = props.tableNames.map((name) => `TableName="${name}"`).join(' OR ');
    const dynamoSearch = (metricName: string, schema: string, label: string): cloudwatch.MathExpression =>
      new cloudwatch.MathExpression({
        expression: `SEARCH('{AWS/DynamoDB,${schema}} MetricName="${metricName}" (${tableFilter})', 'Sum', 60)`,
        label,
        period: MINUTE,
      });
    const fnErrors = (fn: lambda.IFunction, label: string): cloudwatch.Metric =>
      fn.metricErrors({ period: MINUTE, statistic: 'Sum', label: `${label} errors` });
    const fnThrottles = (fn: lambda.IFunction, label: string): cloudwatch.Metric =>
      fn.metricThrottles({ period: MINUTE, statistic: 'Sum', label: `${label} throttles` });
    const iteratorAge = props.aggregator.metric('IteratorAge', { period: MINUTE, statistic: 'Maximum', label: 'IteratorAge max' });
    const deadLetters = props.deadLetterQueue.metricApproximateNumberOfMessagesVisible({
      period: MINUTE,
      statistic: 'Maximum',
      label: 'messages',
    });

    const a = stage.alarms;
    const alarm = (
      id: string,
      description: string,
      metric: cloudwatch.IMetric,
      threshold: number,
      evaluationPeriods = 1,
      datapointsToAlarm = 1,
    ): cloudwatch.Alarm =>
      new cloudwatch.Alarm(this, id, {
        alarmName: `Sluice-${stageName}-${id}`,
        alarmDescription: description,
        metric,
        threshold,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        evaluationPeriods,
        datapointsToAlarm,
        // No data means no traffic (or an empty queue), which is not a fault.
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      });
    const alarms: cloudwatch.Alarm[] = [
      alarm(
        'GatewayErrors',
        'Gateway invocations that crashed (refusals are not errors).',
        props.gateway.metricErrors({ period: Duration.minutes(5), statistic: 'Sum' }),
        a.gatewayErrorsPer5Min,
      ),
      alarm(
        'GatewayThrottles',
        props.capacityProviderName === undefined
          ? 'Gateway invocations refused by Lambda concurrency limits.'
          : 'Gateway invocations refused: its managed instances are saturated (max environments or vCPUs reached, or traffic grew faster than they scale).',
        props.gateway.metricThrottles({ period: Duration.minutes(5), statistic: 'Sum' }),
        a.gatewayThrottlesPer5Min,
      ),
      alarm(
        'SweeperErrors',
        'The sweeper is failing: holds of dead requests are not being settled.',
        props.sweeper.metricErrors({ period: Duration.minutes(15), statistic: 'Sum' }),
        a.sweeperErrorsPer15Min,
      ),
      alarm(
        'AggregatorLag',
        'Usage rollups are falling behind the usage stream (stream records expire after 24 h).',
        iteratorAge,
        a.aggregatorIteratorAgeMs,
        5,
        3,
      ),
      alarm(
        'AggregatorDeadLetters',
        'Usage batches the aggregator gave up on; replay them from the stream within 24 h.',
        deadLetters,
        a.deadLetterMessages,
      ),
    ];
    this.alarms = alarms;

    this.dashboard = new cloudwatch.Dashboard(this, 'Dashboard', {
      dashboardName: props.dashboardName ?? `Sluice-${stageName}`,
      defaultInterval: Duration.hours(3),
    });
    this.dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: 'Requests and refusals by code (per minute)',
        width: WIDE,
        height: HEIGHT,
        left: [sluice(SLUICE_METRICS.requests, 'Sum', 'requests')],
        right: [search(CODE_DIMENSION, SLUICE_METRICS.refusals, 'Sum', '')],
      }),
      new cloudwatch.GraphWidget({
        title: 'Latency (ms)',
        width: WIDE / 2,
        height: HEIGHT,
        left: [sluice(SLUICE_METRICS.latencyMs, 'p50', 'p50'), sluice(SLUICE_METRICS.latencyMs, 'p99', 'p99')],
      }),
      new cloudwatch.GraphWidget({
        title: 'Time to first byte (ms)',
        width: WIDE / 2,
        height: HEIGHT,
        left: [
          sluice(SLUICE_METRICS.timeToFirstByteMs, 'p50', 'p50'),
          sluice(SLUICE_METRICS.timeToFirstByteMs, 'p99', 'p99'),
        ],
      }),
    );
    this.dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: 'Upstream latency by provider (ms)',
        width: THIRD,
        height: HEIGHT,
        left: [
          search(PROVIDER_DIMENSION, SLUICE_METRICS.upstreamLatencyMs, 'p50', 'p50'),
          search(PROVIDER_DIMENSION, SLUICE_METRICS.upstreamLatencyMs, 'p99', 'p99'),
        ],
      }),
      new cloudwatch.GraphWidget({
        title: 'Spend per minute (micro-units)',
        width: THIRD,
        height: HEIGHT,
        left: [sluice(SLUICE_METRICS.spendMicros, 'Sum', 'spend')],
      }),
      new cloudwatch.GraphWidget({
        title: 'Holds outstanding and expired backlog',
        width: THIRD,
        height: HEIGHT,
        left: [sluice(SLUICE_METRICS.holdsOutstanding, 'Maximum', 'open holds')],
        right: [sluice(SLUICE_METRICS.expiredHoldsBacklog, 'Maximum', 'expired, still open')],
      }),
    );
    this.dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: 'Upstream calls and errors by provider (per minute)',
        width: WIDE,
        height: HEIGHT,
        left: [search(PROVIDER_DIMENSION, SLUICE_METRICS.upstreamCalls, 'Sum', 'calls')],
        right: [search(PROVIDER_DIMENSION, SLUICE_METRICS.upstreamErrors, 'Sum', 'errors')],
      }),
      new cloudwatch.GraphWidget({
        title: 'Low-credit notices',
        width: WIDE,
        height: HEIGHT,
        left: [sluice(SLUICE_METRICS.lowCreditNotices, 'Sum', 'notices')],
      }),
    );
    this.dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: 'DynamoDB throttles and user errors',
        width: WIDE,
        height: HEIGHT,
        left: [dynamoSearch('ThrottledRequests', 'Operation,TableName', 'throttled')],
        // UserErrors has no table dimension: it counts the whole account and region.
        right: [
          new cloudwatch.Metric({
            namespace: 'AWS/DynamoDB',
            metricName: 'UserErrors',
            statistic: 'Sum',
            period: MINUTE,
            label: 'UserErrors (account)',
          }),
        ],
      }),
      new cloudwatch.GraphWidget({
        title: 'Transaction conflicts',
        width: WIDE,
        height: HEIGHT,
        left: [
          sluice(SLUICE_METRICS.transactionConflicts, 'Sum', 'Sluice TransactionConflicts'),
          dynamoSearch('TransactionConflict', 'TableName', 'DynamoDB'),
        ],
      }),
    );
    this.dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: 'Aggregator lag (IteratorAge, ms)',
        width: THIRD,
        height: HEIGHT,
        left: [iteratorAge],
        leftAnnotations: [{ value: a.aggregatorIteratorAgeMs, label: 'alarm' }],
      }),
      new cloudwatch.GraphWidget({
        title: 'Function errors and throttles',
        width: THIRD,
        height: HEIGHT,
        left: [
          fnErrors(props.gateway, 'gateway'),
          fnErrors(props.aggregator, 'aggregator'),
          fnErrors(props.sweeper, 'sweeper'),
        ],
        right: [
          fnThrottles(props.gateway, 'gateway'),
          fnThrottles(props.aggregator, 'aggregator'),
          fnThrottles(props.sweeper, 'sweeper'),
        ],
      }),
      new cloudwatch.GraphWidget({
        title: 'Aggregator dead-letter queue depth',
        width: THIRD,
        height: HEIGHT,
        left: [deadLetters],
      }),
    );
    if (props.capacityProviderName !== undefined) {
      // AWS publishes these per capacity provider and instance type; a free-text SEARCH finds them
      // whatever instance types the provider has launched.
      const capacity = (metricName: string, statistic: string, label: string): cloudwatch.MathExpression =>
        new cloudwatch.MathExpression({
          expression: `SEARCH('CapacityProviderName="${props.capacityProviderName}" MetricName="${metricName}"', '${statistic}', 60)`,
          label,
          period: MINUTE,
        });
      this.dashboard.addWidgets(
        new cloudwatch.GraphWidget({
          title: 'Managed instances: CPU and memory utilisation (%)',
          width: WIDE,
          height: HEIGHT,
          left: [capacity('CPUUtilization', 'Average', 'CPU'), capacity('MemoryUtilization', 'Average', 'memory')],
        }),
        new cloudwatch.GraphWidget({
          title: 'Managed instances: vCPUs allocated and available',
          width: WIDE,
          height: HEIGHT,
          left: [capacity('vCPUAllocated', 'Average', 'allocated'), capacity('vCPUAvailable', 'Average', 'available')],
        }),
      );
    }
    this.dashboard.addWidgets(
      new cloudwatch.AlarmStatusWidget({ title: 'Alarms', width: 24, height: 3, alarms }),
    );
  }
}
