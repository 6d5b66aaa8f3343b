/**
 * The operator's side of a stage: every alarm reaches the stage's topic, the alarms SPEC's money
 * and faults need exist, cdk-nag (AwsSolutions and Serverless) finds nothing unacknowledged,
 * usage rows expire per stage, and the low-credit notifier runs on a schedule with the least
 * privilege it needs.
 */
import { Match, Template } from 'aws-cdk-lib/assertions';
import { ALL_TABLES, type TableName } from '../../lambdas/shared/schema';
import { logMetricNamespace, serverErrorCodes } from '../../lib/alarms';
import { nagPacks } from '../../lib/nag';
import type { ProviderKeySource } from '../../lib/provider-file';
import { SluiceStack } from '../../lib/sluice-stack';
import { STAGE_NAMES, StageConfigError, stageSettings, validateStageSettings, type StageName, type StageSettings } from '../../lib/stage';
import { USAGE_STREAM_FILTERS, matchesFilters } from '../../lambdas/aggregator/mapping';
import { cdkApps, NO_BUNDLING } from '../support/cdk-app';

const newApp = cdkApps();

const PROVIDERS: readonly ProviderKeySource[] = [
  { name: 'openai', keySource: { secretName: 'sluice/{stage}/providers/openai', env: 'OPENAI_API_KEY' } },
  { name: 'anthropic', keySource: { secretName: 'sluice/{stage}/providers/anthropic', env: 'ANTHROPIC_API_KEY' } },
  { name: 'local', keySource: 'none' },
];
const EMAIL = 'oncall@example.com';

interface Resource {
  readonly Type: string;
  readonly Properties: Record<string, unknown>;
}
interface Statement {
  readonly Effect: string;
  readonly Action: string | string[];
  readonly Resource: unknown;
}

// dev without an e-mail, stg and prod with one: both shapes of the topic are checked. One synthesis
// per stage for the whole file, without bundling the functions' code: nothing here reads it, and
// esbuild costs seconds a synthesis (test/cdk/sluice-stack.test.ts bundles every stage's).
const built: Partial<Record<StageName, { stack: SluiceStack; template: Template }>> = {};
function build(stage: StageName): { stack: SluiceStack; template: Template } {
  const existing = built[stage];
  if (existing !== undefined) return existing;
  const app = newApp(NO_BUNDLING);
  const settings = stageSettings(stage, stage === 'dev' ? {} : { alarmEmail: EMAIL });
  const stack = new SluiceStack(app, `Sluice-${stage}`, { stage: settings, providers: PROVIDERS });
  const made = { stack, template: Template.fromStack(stack) };
  built[stage] = made;
  return made;
}
const resources = (t: Template, type: string): Record<string, Resource> => t.findResources(type) as Record<string, Resource>;
function onlyId(found: Record<string, Resource>, what: string): string {
  const ids = Object.keys(found);
  if (ids.length !== 1) throw new Error(`expected one ${what}, found ${ids.length}`);
  return ids[0] as string;
}
function functionId(t: Template, descriptionPart: string): string {
  return onlyId(
    Object.fromEntries(Object.entries(resources(t, 'AWS::Lambda::Function')).filter(([, r]) => String(r.Properties.Description).includes(descriptionPart))),
    `function ${descriptionPart}`,
  );
}
function tableId(t: Template, name: TableName, stage: StageName): string {
  return onlyId(t.findResources('AWS::DynamoDB::Table', { Properties: { TableName: `sluice-${stage}-${name}` } }) as Record<string, Resource>, `table ${name}`);
}
function statementsOf(t: Template, fnId: string): Statement[] {
  const fn = resources(t, 'AWS::Lambda::Function')[fnId] as Resource;
  const roleId = (fn.Properties.Role as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
  return Object.values(resources(t, 'AWS::IAM::Policy'))
    .filter((p) => JSON.stringify(p.Properties.Roles) === JSON.stringify([{ Ref: roleId }]))
    .flatMap((p) => (p.Properties.PolicyDocument as { Statement: Statement[] }).Statement);
}
const actionsOf = (s: Statement): string[] => (Array.isArray(s.Action) ? s.Action : [s.Action]);

describe.each(STAGE_NAMES)('Sluice-%s operations', (stage) => {
  const t = (): Template => build(stage).template;
  const topicId = (): string => onlyId(resources(t(), 'AWS::SNS::Topic'), 'topic');

  it('has one alarm topic for the stage, TLS-only, and outputs it', () => {
    t().hasResourceProperties('AWS::SNS::Topic', { TopicName: `Sluice-${stage}-alarms` });
    // enforceSSL: a topic policy denying publishes without TLS.
    t().hasResourceProperties('AWS::SNS::TopicPolicy', {
      PolicyDocument: { Statement: Match.arrayWith([Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } })]) },
    });
    t().hasOutput('AlarmTopicArn', { Value: { Ref: topicId() } });
  });

  it(stage === 'dev' ? 'subscribes no address when the stage names none' : 'subscribes the stage\'s alarm e-mail', () => {
    if (stage === 'dev') {
      t().resourceCountIs('AWS::SNS::Subscription', 0);
    } else {
      t().resourceCountIs('AWS::SNS::Subscription', 1);
      t().hasResourceProperties('AWS::SNS::Subscription', { Protocol: 'email', Endpoint: EMAIL, TopicArn: { Ref: topicId() } });
    }
  });

  it('gives every alarm the topic as its alarm and OK action', () => {
    const alarms = Object.values(resources(t(), 'AWS::CloudWatch::Alarm'));
    expect(alarms.length).toBeGreaterThan(20);
    for (const alarm of alarms) {
      expect(alarm.Properties.AlarmActions).toEqual([{ Ref: topicId() }]);
      expect(alarm.Properties.OKActions).toEqual([{ Ref: topicId() }]);
    }
  });

  it('alarms on money, faults, providers, DynamoDB and latency', () => {
    const names = Object.values(resources(t(), 'AWS::CloudWatch::Alarm')).map((a) => String(a.Properties.AlarmName));
    const expected = [
      'GatewayErrors',
      'GatewayThrottles',
      'SweeperErrors',
      'AggregatorLag',
      'AggregatorDeadLetters',
      'SettlementFailures',
      'ExpiredHoldsBacklog',
      'FirstByteP99',
      'LatencyP99',
      'NotifierErrors',
      'ConsoleErrors',
      'AdminErrors',
      ...serverErrorCodes().map((c) => `ServerErrors-${c}`),
      ...PROVIDERS.map((p) => `UpstreamErrorRate-${p.name}`),
      ...ALL_TABLES.flatMap((s) => [`DynamoSystemErrors-${s.name}`, `DynamoThrottles-${s.name}`]),
    ].map((n) => `Sluice-${stage}-${n}`);
    expect(names.sort()).toEqual(expected.sort());
  });

  it('alarms on each 5xx code except the owner\'s pause', () => {
    const codes = serverErrorCodes();
    expect(codes).toEqual(expect.arrayContaining(['http_500', 'balance_unavailable', 'no_provider_configured', 'request_timeout']));
    expect(codes).not.toContain('paused_by_owner');
    t().hasResourceProperties('AWS::CloudWatch::Alarm', {
      AlarmName: `Sluice-${stage}-ServerErrors-balance_unavailable`,
      MetricName: 'Refusals',
      Namespace: 'Sluice',
      Dimensions: Match.arrayWith([{ Name: 'Code', Value: 'balance_unavailable' }, { Name: 'Stage', Value: stage }]),
      Threshold: stageSettings(stage).alarms.serverErrorsPer5Min,
    });
  });

  it('counts failed settlements from the gateway\'s and the sweeper\'s log lines', () => {
    // Every filter counting into SettlementFailures, and every filter matching a settlement failure's term.
    const filters = Object.values(resources(t(), 'AWS::Logs::MetricFilter')).filter(
      (f) => JSON.stringify(f.Properties.MetricTransformations).includes('"SettlementFailures"') || /settle_failed|sweep_failed/.test(String(f.Properties.FilterPattern)),
    );
    expect(filters.map((f) => f.Properties.FilterPattern).sort()).toEqual(['"settle_failed"', '"sweep_failed"']);
    for (const f of filters) {
      expect(f.Properties.MetricTransformations).toEqual([{ MetricNamespace: logMetricNamespace(stage), MetricName: 'SettlementFailures', MetricValue: '1' }]);
    }
    t().hasResourceProperties('AWS::CloudWatch::Alarm', {
      AlarmName: `Sluice-${stage}-SettlementFailures`,
      Namespace: logMetricNamespace(stage),
      MetricName: 'SettlementFailures',
      Threshold: 1,
    });
  });

  it("alarms on the management function's faults (answered 500s, from its log lines) and crashes, on the first", () => {
    t().hasResourceProperties('AWS::Logs::MetricFilter', {
      FilterPattern: '?"admin_fault" ?"audit_failed"',
      MetricTransformations: [{ MetricNamespace: logMetricNamespace(stage), MetricName: 'AdminFaults', MetricValue: '1' }],
    });
    const alarm = Object.values(resources(t(), 'AWS::CloudWatch::Alarm')).find((a) => a.Properties.AlarmName === `Sluice-${stage}-AdminErrors`);
    expect(alarm?.Properties.Threshold).toBe(1);
    const metrics = JSON.stringify(alarm?.Properties.Metrics);
    expect(metrics).toContain('FILL(crashes, 0) + FILL(faults, 0)');
    expect(metrics).toContain('"MetricName":"Errors"');
    expect(metrics).toContain('"MetricName":"AdminFaults"');
    expect(alarm?.Properties.TreatMissingData).toBe('notBreaching');
  });

  it('treats a silent sweeper as a backlog', () => {
    t().hasResourceProperties('AWS::CloudWatch::Alarm', {
      AlarmName: `Sluice-${stage}-ExpiredHoldsBacklog`,
      MetricName: 'ExpiredHoldsBacklog',
      TreatMissingData: 'breaching',
      EvaluationPeriods: 3,
    });
  });

  it('judges a provider\'s error rate only above a minimum of calls', () => {
    const a = stageSettings(stage).alarms;
    t().hasResourceProperties('AWS::CloudWatch::Alarm', {
      AlarmName: `Sluice-${stage}-UpstreamErrorRate-openai`,
      Threshold: a.upstreamErrorRatePercent,
      Metrics: Match.arrayWith([
        Match.objectLike({ Expression: `IF(calls >= ${a.upstreamMinCallsPer5Min}, 100 * errors / calls, 0)` }),
        Match.objectLike({ Id: 'errors', MetricStat: Match.objectLike({ Metric: Match.objectLike({ MetricName: 'UpstreamErrors', Dimensions: Match.arrayWith([{ Name: 'Provider', Value: 'openai' }]) }) }) }),
      ]),
    });
  });

  it('watches DynamoDB system errors per table, transactions included, within an alarm\'s 10 metrics', () => {
    const alarm = Object.values(resources(t(), 'AWS::CloudWatch::Alarm')).find((a) => a.Properties.AlarmName === `Sluice-${stage}-DynamoSystemErrors-ledger`);
    const metrics = (alarm?.Properties.Metrics ?? []) as { MetricStat?: { Metric: { MetricName: string; Dimensions: { Name: string; Value: unknown }[] } } }[];
    const stats = metrics.filter((m) => m.MetricStat !== undefined);
    expect(stats.length).toBeLessThanOrEqual(10);
    const operations = stats.map((m) => m.MetricStat?.Metric.Dimensions.find((d) => d.Name === 'Operation')?.Value);
    expect(operations).toEqual(expect.arrayContaining(['TransactWriteItems', 'UpdateItem', 'GetItem', 'Query']));
    for (const m of stats) expect(m.MetricStat?.Metric.MetricName).toBe('SystemErrors');
  });

  it('watches p99 time to first byte and whole-request latency', () => {
    const a = stageSettings(stage).alarms;
    t().hasResourceProperties('AWS::CloudWatch::Alarm', { AlarmName: `Sluice-${stage}-FirstByteP99`, MetricName: 'TimeToFirstByteMs', ExtendedStatistic: 'p99', Threshold: a.firstByteP99Ms });
    t().hasResourceProperties('AWS::CloudWatch::Alarm', { AlarmName: `Sluice-${stage}-LatencyP99`, MetricName: 'LatencyMs', ExtendedStatistic: 'p99', Threshold: a.latencyP99Ms });
  });

  it('has zero unacknowledged cdk-nag findings (AwsSolutions and Serverless)', () => {
    const packs = nagPacks();
    expect(packs.map((p) => p.readPackName).sort()).toEqual(['AwsSolutions', 'Serverless']);
    for (const pack of packs) {
      const report = pack.validateScope(build(stage).stack);
      const findings = report.violations.map((v) => `${v.ruleName}: ${v.violatingResources.map((r) => JSON.stringify(r)).join(', ')}`);
      expect(findings).toEqual([]);
      expect(report.success).toBe(true);
    }
  });

  it('keeps usage rows for the stage\'s retention and no longer', () => {
    const days = stageSettings(stage).usageRetentionDays;
    t().hasResourceProperties('AWS::DynamoDB::Table', {
      TableName: `sluice-${stage}-usage`,
      TimeToLiveSpecification: { AttributeName: 'ttl', Enabled: true },
    });
    for (const part of ['OpenAI-compatible gateway', 'settles holds']) {
      const fn = resources(t(), 'AWS::Lambda::Function')[functionId(t(), part)] as Resource;
      expect(fn.Properties.Environment).toMatchObject({ Variables: { SLUICE_USAGE_RETENTION_DAYS: String(days) } });
    }
  });

  it('gives every function its own role, writing only its own log group, with no managed policy', () => {
    const fns = resources(t(), 'AWS::Lambda::Function');
    const roles = resources(t(), 'AWS::IAM::Role');
    for (const [fnId, fn] of Object.entries(fns)) {
      const roleId = (fn.Properties.Role as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
      expect(roles[roleId]?.Properties.ManagedPolicyArns).toBeUndefined();
      const logGroup = (fn.Properties.LoggingConfig as { LogGroup: { Ref: string } }).LogGroup.Ref;
      const logs = statementsOf(t(), fnId).filter((st) => actionsOf(st).some((a) => a.startsWith('logs:')));
      expect(logs).toEqual([
        { Effect: 'Allow', Action: ['logs:CreateLogStream', 'logs:PutLogEvents'], Resource: { 'Fn::GetAtt': [logGroup, 'Arn'] } },
      ]);
    }
  });

  it('rolls up only settled usage rows, so TTL deletions never reach the aggregator', () => {
    t().hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      FilterCriteria: { Filters: USAGE_STREAM_FILTERS.map((p) => ({ Pattern: JSON.stringify(p) })) },
    });
    // A TTL deletion is a REMOVE: no pattern lets one through (a row's open INSERT neither).
    const settled = { S: 'settled' };
    expect(matchesFilters({ eventName: 'REMOVE', dynamodb: { OldImage: { state: settled, outcome: { S: 'ok' } } } }, USAGE_STREAM_FILTERS)).toBe(false);
    expect(matchesFilters({ eventName: 'INSERT', dynamodb: { NewImage: { state: { S: 'open' } } } }, USAGE_STREAM_FILTERS)).toBe(false);
    expect(matchesFilters({ eventName: 'MODIFY', dynamodb: { NewImage: { state: settled, outcome: { S: 'ok' } } } }, USAGE_STREAM_FILTERS)).toBe(true);
  });

  describe('low-credit notifier', () => {
    const notifier = (): string => functionId(t(), 'low-credit');

    it('runs every five minutes and is not retried', () => {
      t().hasResourceProperties('AWS::Events::Rule', {
        ScheduleExpression: 'rate(5 minutes)',
        Targets: [Match.objectLike({ Arn: { 'Fn::GetAtt': [notifier(), 'Arn'] }, RetryPolicy: { MaximumRetryAttempts: 0 } })],
      });
      t().hasResourceProperties('AWS::Lambda::EventInvokeConfig', { FunctionName: { Ref: notifier() }, MaximumRetryAttempts: 0 });
    });

    it('knows its topic and bus', () => {
      const fn = resources(t(), 'AWS::Lambda::Function')[notifier()] as Resource;
      expect(fn.Properties.Environment).toMatchObject({ Variables: { SLUICE_NOTICE_TOPIC_ARN: { Ref: topicId() }, SLUICE_NOTICE_EVENT_BUS: 'default' } });
    });

    it('may scan and mark workspaces, read the ledger, put events and publish, and nothing else', () => {
      const statements = statementsOf(t(), notifier());
      const grants = statements.map((s) => ({ actions: actionsOf(s).sort(), resource: JSON.stringify(s.Resource) }));
      const on = (needle: string): string[] => grants.filter((g) => g.resource.includes(needle)).flatMap((g) => g.actions).sort();
      expect(on(tableId(t(), 'workspaces', stage))).toEqual(['dynamodb:DeleteItem', 'dynamodb:PutItem', 'dynamodb:Scan']);
      expect(on(tableId(t(), 'ledger', stage))).toEqual(['dynamodb:GetItem', 'dynamodb:Query']);
      expect(on('event-bus/default')).toEqual(['events:PutEvents']);
      expect(on(topicId())).toEqual(['sns:Publish']);
      for (const name of ['keys', 'usage', 'rollups', 'catalog'] as const) expect(on(tableId(t(), name, stage))).toEqual([]);
      // Every statement is one of the four above: no wildcard resource, no other action.
      expect(grants.every((g) => g.resource !== '"*"')).toBe(true);
      expect(grants.flatMap((g) => g.actions).sort()).toEqual(
        ['dynamodb:DeleteItem', 'dynamodb:PutItem', 'dynamodb:Scan', 'dynamodb:GetItem', 'dynamodb:Query', 'events:PutEvents', 'sns:Publish', 'logs:CreateLogStream', 'logs:PutLogEvents'].sort(),
      );
    });
  });
});

describe('stage settings for operations', () => {
  it('takes the alarm e-mail from the deploy and validates it', () => {
    expect(stageSettings('prod', { alarmEmail: EMAIL }).alarmEmail).toBe(EMAIL);
    expect(stageSettings('prod', { alarmEmail: '' }).alarmEmail).toBeUndefined();
    for (const bad of ['not-an-address', 'a@b', 'two@@example.com', 'spaces in@example.com']) {
      expect(() => stageSettings('dev', { alarmEmail: bad })).toThrow(StageConfigError);
    }
  });

  it('sets a usage retention per stage, longest in prod', () => {
    const days = STAGE_NAMES.map((s) => stageSettings(s).usageRetentionDays);
    for (const d of days) expect(Number.isSafeInteger(d) && d >= 1).toBe(true);
    expect(stageSettings('prod').usageRetentionDays).toBeGreaterThanOrEqual(Math.max(...days));
  });

  const dev = stageSettings('dev');
  it.each<[string, StageSettings]>([
    ['no usage retention', { ...dev, usageRetentionDays: 0 }],
    ['a fractional usage retention', { ...dev, usageRetentionDays: 1.5 }],
    ['an error rate above 100 %', { ...dev, alarms: { ...dev.alarms, upstreamErrorRatePercent: 101 } }],
    ['a first-byte p99 beyond the request limit', { ...dev, alarms: { ...dev.alarms, firstByteP99Ms: 541_000 } }],
    ['a zero backlog threshold', { ...dev, alarms: { ...dev.alarms, expiredHoldsBacklog: 0 } }],
    ['an alarm e-mail that is not one', { ...dev, alarmEmail: 'ops' }],
  ])('rejects %s', (_label, settings) => {
    expect(() => validateStageSettings(settings)).toThrow(StageConfigError);
  });
});
