import { CfnOutput, Duration, Fn, RemovalPolicy, SecretValue, Stack, Tags, Validations, type StackProps } from 'aws-cdk-lib';
import * as cloudfront from 'aws-cdk-lib/aws-cloudfront';
import * as origins from 'aws-cdk-lib/aws-cloudfront-origins';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import type { Construct } from 'constructs';
import { CODE_DIMENSION, METRIC_NAMESPACE, SLUICE_METRICS, STAGE_DIMENSION } from './dashboard';
import { gatewayOriginId, routerCode } from './front-door-function';
import { FRONT_DOOR_REGION, isMultiRegion, type StageSettings } from './stage';
import { frontDoorConfigSecretName, probeKeySecretName } from './warden';

/** Origin response timeout, seconds: CloudFront's most without a quota increase (docs/regions.md [S25]). */
export const ORIGIN_READ_TIMEOUT_SECONDS = 120;

/** CloudFront's 5xx error rate (percent of requests, 1-minute average) that raises the front door's alarm, 3 minutes of 5. */
export const FRONT_DOOR_5XX_PERCENT = 5;

/** Properties of {@link FrontDoorStack}. */
export interface FrontDoorStackProps extends StackProps {
  /** The stage's validated settings; it must list two regions or more. */
  readonly stage: StageSettings;
  /** Each region's gateway URL (from that region's stack), in the stage's order. */
  readonly gateways: ReadonlyArray<{ readonly region: string; readonly url: lambda.IFunctionUrl }>;
}

/**
 * The one address of a multi-region stage (docs/regions.md, "The front door"): a CloudFront
 * distribution with each region's gateway Function URL as an origin, and a viewer-request
 * CloudFront Function that picks each request's region from the health flags the regions' wardens
 * write to a CloudFront KeyValueStore. Also the secrets that tell the wardens where the store and
 * the gateways are (replicated to every region), the stage's dashboard over every region, and the
 * front door's alarm with its own topic.
 *
 * Deployed in {@link FRONT_DOOR_REGION}, where CloudFront publishes its metrics; the distribution,
 * the function and the store are global and keep serving when that region does not.
 *
 * - No origin access control: it would make every client send a payload hash with each POST,
 *   which no OpenAI client does [S18]. The gateways authenticate every request themselves.
 * - `AllViewerExceptHostHeader` passes the client's headers (`Authorization` among them) but the
 *   Host, which a Function URL needs as its own; caching is off (`CachingDisabled`), compression
 *   off (a streamed reply must not wait for a compressor), HTTPS only.
 * - The origin response timeout is {@link ORIGIN_READ_TIMEOUT_SECONDS}: a non-streamed reply that
 *   starts later gets CloudFront's 504 while the gateway carries on and charges it (docs/api.md).
 */
export class FrontDoorStack extends Stack {
  /** The distribution: clients use `https://<its domain>/v1` as their OpenAI base URL. */
  public readonly distribution: cloudfront.Distribution;
  /** The store the wardens write and the function reads. */
  public readonly store: cloudfront.KeyValueStore;
  /** The viewer-request function that chooses each request's region. */
  public readonly router: cloudfront.Function;
  /** The stage dashboard over every region, `Sluice-<stage>`. */
  public readonly dashboard: cloudwatch.Dashboard;
  /** The front door's alarm topic (us-east-1), `Sluice-<stage>-front-door-alarms`. */
  public readonly topic: sns.Topic;

  public constructor(scope: Construct, id: string, props: FrontDoorStackProps) {
    super(scope, id, {
      description: `Sluice (${props.stage.name}): the front door over ${props.stage.regions.join(', ')} (CloudFront, health-routed)`,
      ...props,
    });
    const { stage } = props;
    if (!isMultiRegion(stage)) throw new Error(`FrontDoorStack: stage ${stage.name} has one region; it needs no front door`);
    const listed = props.gateways.map((g) => g.region);
    if (JSON.stringify(listed) !== JSON.stringify(stage.regions)) {
      throw new Error(`FrontDoorStack: gateways for ${listed.join(', ')} given, the stage lists ${stage.regions.join(', ')}`);
    }
    Tags.of(this).add('Project', 'Sluice');
    Tags.of(this).add('Stage', stage.name);

    this.store = new cloudfront.KeyValueStore(this, 'Health', {
      keyValueStoreName: `sluice-${stage.name}-regions`,
      comment: `Sluice ${stage.name}: each region's health, written by the wardens`,
    });
    this.router = new cloudfront.Function(this, 'Router', {
      functionName: `sluice-${stage.name}-router`,
      comment: `Sluice ${stage.name}: send each request to a healthy region`,
      code: cloudfront.FunctionCode.fromInline(routerCode(stage.regions)),
      runtime: cloudfront.FunctionRuntime.JS_2_0,
      keyValueStore: this.store,
    });

    const originOf = (region: string, url: lambda.IFunctionUrl): origins.HttpOrigin =>
      new origins.HttpOrigin(hostOf(url), {
        originId: gatewayOriginId(region),
        protocolPolicy: cloudfront.OriginProtocolPolicy.HTTPS_ONLY,
        originSslProtocols: [cloudfront.OriginSslPolicy.TLS_V1_2],
        readTimeout: Duration.seconds(ORIGIN_READ_TIMEOUT_SECONDS),
      });
    const behavior = (origin: cloudfront.IOrigin): cloudfront.BehaviorOptions => ({
      origin,
      allowedMethods: cloudfront.AllowedMethods.ALLOW_ALL,
      cachePolicy: cloudfront.CachePolicy.CACHING_DISABLED,
      originRequestPolicy: cloudfront.OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER,
      viewerProtocolPolicy: cloudfront.ViewerProtocolPolicy.HTTPS_ONLY,
      compress: false,
      functionAssociations: [{ function: this.router, eventType: cloudfront.FunctionEventType.VIEWER_REQUEST }],
    });
    const [home, ...others] = props.gateways;
    if (home === undefined) throw new Error('FrontDoorStack: no gateways');
    this.distribution = new cloudfront.Distribution(this, 'Distribution', {
      comment: `Sluice ${stage.name}: one address over ${stage.regions.join(', ')}`,
      defaultBehavior: behavior(originOf(home.region, home.url)),
      // A distribution holds only the origins its behaviors name: one behavior per other region
      // (a path no client uses) puts its gateway in, for the function to choose.
      additionalBehaviors: Object.fromEntries(others.map((g) => [`/_sluice/origin/${g.region}/*`, behavior(originOf(g.region, g.url))])),
      httpVersion: cloudfront.HttpVersion.HTTP2_AND_3,
      priceClass: cloudfront.PriceClass.PRICE_CLASS_ALL,
      enableIpv6: true,
    });

    // What the wardens need, replicated to every region so each reads its own region's copy.
    const replicaRegions = stage.regions.filter((r) => r !== FRONT_DOOR_REGION).map((region) => ({ region }));
    new secretsmanager.Secret(this, 'WardenConfig', {
      secretName: frontDoorConfigSecretName(stage.name),
      description: `Sluice ${stage.name}: the front door's KeyValueStore and each region's gateway URL, for the wardens (no credential)`,
      secretStringValue: SecretValue.unsafePlainText(
        Stack.of(this).toJsonString({
          kvsArn: this.store.keyValueStoreArn,
          gateways: Object.fromEntries(props.gateways.map((g) => [g.region, g.url.url])),
        }),
      ),
      replicaRegions,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    const probeKey = new secretsmanager.Secret(this, 'ProbeKey', {
      secretName: probeKeySecretName(stage.name),
      description: `Sluice ${stage.name}: the probe workspace's key the wardens send to every gateway (value set by an operator)`,
      replicaRegions,
      removalPolicy: stage.removalPolicy,
    });
    // Created empty, as the provider secrets are: a forgotten key fails the wardens loudly.
    (probeKey.node.defaultChild as secretsmanager.CfnSecret).addPropertyDeletionOverride('GenerateSecretString');

    this.topic = new sns.Topic(this, 'Topic', {
      topicName: `Sluice-${stage.name}-front-door-alarms`,
      displayName: `Sluice ${stage.name} front door alarms`,
      enforceSSL: true,
    });
    if (stage.alarmEmail !== undefined) this.topic.addSubscription(new subscriptions.EmailSubscription(stage.alarmEmail));
    const errorRate = new cloudwatch.Metric({
      namespace: 'AWS/CloudFront',
      metricName: '5xxErrorRate',
      dimensionsMap: { DistributionId: this.distribution.distributionId, Region: 'Global' },
      statistic: 'Average',
      period: Duration.minutes(1),
      region: FRONT_DOOR_REGION,
    });
    const alarm = new cloudwatch.Alarm(this, 'ServerErrors', {
      alarmName: `Sluice-${stage.name}-FrontDoor5xx`,
      alarmDescription: `More than ${FRONT_DOOR_5XX_PERCENT}% of the front door's answers are 5xx for 3 of 5 minutes: a region is failing and not yet out of rotation, or every region is. See each region's dashboard and the wardens' RegionUp.`,
      metric: errorRate,
      threshold: FRONT_DOOR_5XX_PERCENT,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: 5,
      datapointsToAlarm: 3,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    alarm.addAlarmAction(new actions.SnsAction(this.topic));
    alarm.addOkAction(new actions.SnsAction(this.topic));

    this.dashboard = stageDashboard(this, stage, this.distribution, alarm);

    this.acknowledgeFindings(stage);
    new CfnOutput(this, 'FrontDoorUrl', {
      description: 'The stage\'s one address; clients use <url>/v1 as their OpenAI base URL',
      value: `https://${this.distribution.distributionDomainName}`,
    });
    new CfnOutput(this, 'KeyValueStoreArn', { description: 'The regions\' health flags (key "regions")', value: this.store.keyValueStoreArn });
    new CfnOutput(this, 'FrontDoorAlarmTopicArn', { description: 'SNS topic of the front door\'s alarm', value: this.topic.topicArn });
  }

  private acknowledgeFindings(stage: StageSettings): void {
    const distribution = this.distribution;
    const acks: ReadonlyArray<readonly [string, string]> = [
      ['AwsSolutions-CFR1', 'Sluice serves API clients wherever they are; who may call it is decided per bearer key by the gateway, not by country.'],
      [
        'AwsSolutions-CFR2',
        'Every request is authenticated and rate-limited per key by the gateway itself (SPEC); a WAF web ACL would add $5 a month plus $0.60 per million requests for no rule the gateway lacks. An operator may attach one.',
      ],
      [
        'AwsSolutions-CFR3',
        "The gateway logs each request's metadata by request id (and never bodies); CloudFront's access logs would copy viewer addresses and paths into a bucket for a fee, with nothing the gateway's logs and metrics lack.",
      ],
      [
        'AwsSolutions-CFR4',
        'The distribution answers on its own *.cloudfront.net name, whose certificate and TLS policy CloudFront sets; a custom domain with its own certificate (TLSv1.2_2021) is the next step (docs/regions.md).',
      ],
    ];
    for (const [id, reason] of acks) Validations.of(distribution).acknowledge({ id, reason });
    Validations.of(this).acknowledge(
      { id: 'AwsSolutions-SMG4', reason: 'The wardens\' configuration is no credential (a store ARN and public URLs); the probe key is rotated by an operator with sluice key rotate, which no rotation Lambda could call.' },
      { id: 'AwsSolutions-SNS2', reason: 'Alarm messages carry alarm names only; CloudWatch cannot publish to a topic encrypted with the AWS-managed SNS key.' },
      ...(stage.alarmEmail === undefined ? [] : [{ id: 'Serverless-SNSRedrivePolicy', reason: 'Failed deliveries to an e-mail address have nowhere better to go than a queue nobody reads; the alarm stays visible in CloudWatch.' }]),
    );
  }
}

/** The host of a Function URL (`https://<host>/` split on '/': ['https:', '', '<host>', '']), as a token CloudFormation resolves. */
function hostOf(url: lambda.IFunctionUrl): string {
  return Fn.select(2, Fn.split('/', url.url));
}

/**
 * The stage's dashboard over every region (`Sluice-<stage>`): requests, refusals and latency per
 * region (each region's own metrics, read across regions), the wardens' view of each region, and
 * CloudFront's requests and error rates. Each region keeps its own detailed dashboard.
 */
function stageDashboard(scope: Construct, stage: StageSettings, distribution: cloudfront.Distribution, alarm: cloudwatch.Alarm): cloudwatch.Dashboard {
  const minute = Duration.minutes(1);
  const sluice = (region: string, metricName: string, statistic: string, label: string): cloudwatch.Metric =>
    new cloudwatch.Metric({ namespace: METRIC_NAMESPACE, metricName, dimensionsMap: { [STAGE_DIMENSION]: stage.name }, statistic, period: minute, label, region });
  const dashboard = new cloudwatch.Dashboard(scope, 'StageDashboard', { dashboardName: `Sluice-${stage.name}`, defaultInterval: Duration.hours(3) });
  const cloudFront = (metricName: string, statistic: string, label: string): cloudwatch.Metric =>
    new cloudwatch.Metric({
      namespace: 'AWS/CloudFront',
      metricName,
      dimensionsMap: { DistributionId: distribution.distributionId, Region: 'Global' },
      statistic,
      period: minute,
      label,
      region: FRONT_DOOR_REGION,
    });
  dashboard.addWidgets(
    new cloudwatch.GraphWidget({
      title: 'Front door: requests, and 4xx/5xx error rates (%)',
      width: 24,
      height: 6,
      left: [cloudFront('Requests', 'Sum', 'requests')],
      right: [cloudFront('4xxErrorRate', 'Average', '4xx %'), cloudFront('5xxErrorRate', 'Average', '5xx %')],
    }),
  );
  dashboard.addWidgets(
    new cloudwatch.GraphWidget({
      title: 'Requests per region (per minute)',
      width: 12,
      height: 6,
      left: stage.regions.map((r) => sluice(r, SLUICE_METRICS.requests, 'Sum', r)),
    }),
    new cloudwatch.GraphWidget({
      title: 'Time to first byte p99 per region (ms)',
      width: 12,
      height: 6,
      left: stage.regions.map((r) => sluice(r, SLUICE_METRICS.timeToFirstByteMs, 'p99', r)),
    }),
  );
  dashboard.addWidgets(
    new cloudwatch.GraphWidget({
      title: 'Refusals per region (all codes, per minute)',
      width: 12,
      height: 6,
      left: stage.regions.map(
        (r) =>
          new cloudwatch.MathExpression({
            expression: `SUM(SEARCH('{${METRIC_NAMESPACE},${CODE_DIMENSION},${STAGE_DIMENSION}} MetricName="${SLUICE_METRICS.refusals}" ${STAGE_DIMENSION}="${stage.name}"', 'Sum', 60))`,
            label: r,
            period: minute,
            searchRegion: r,
          }),
      ),
    }),
    new cloudwatch.GraphWidget({
      title: "Each warden's view: region up (1) or down (0)",
      width: 12,
      height: 6,
      left: stage.regions.flatMap((warden) =>
        stage.regions.map(
          (probed) =>
            new cloudwatch.Metric({
              namespace: METRIC_NAMESPACE,
              metricName: 'RegionUp',
              dimensionsMap: { [STAGE_DIMENSION]: stage.name, ProbedRegion: probed },
              statistic: 'Minimum',
              period: minute,
              label: `${probed} seen from ${warden}`,
              region: warden,
            }),
        ),
      ),
    }),
  );
  dashboard.addWidgets(new cloudwatch.AlarmStatusWidget({ title: 'Front door alarm (each region\'s alarms are on its own dashboard)', width: 24, height: 3, alarms: [alarm] }));
  return dashboard;
}
