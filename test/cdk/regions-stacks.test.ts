/**
 * A stage in two regions (`-c regions=us-east-1,us-west-2`, lib/stage-app.ts): a stack per region
 * and the front door's. Global tables defined once with both replicas; each region's own gateway,
 * sweeper, aggregator, transfer agent, warden, alarms and dashboard, with its region in their
 * environment; the provider secrets replicated; the front door (distribution, function, store,
 * the wardens' secrets); the stage dashboard; cdk-nag clean. One synthesis for the whole file,
 * bundling skipped (the stacks, not the bundles, are under test).
 */
import { type Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { ALL_TABLES } from '../../lambdas/shared/schema';
import { REGION_ENV } from '../../lambdas/shared/region-env';
import { WARDEN_ENV } from '../../lambdas/warden/env';
import { gatewayOriginId } from '../../lib/front-door-function';
import { ORIGIN_READ_TIMEOUT_SECONDS } from '../../lib/front-door';
import { nagPacks } from '../../lib/nag';
import type { ProviderKeySource } from '../../lib/provider-file';
import { SluiceStack } from '../../lib/sluice-stack';
import { addStage, type StageStacks } from '../../lib/stage-app';
import { stageSettings } from '../../lib/stage';
import { TRANSFER_AGENT_ENTRY } from '../../lib/transfer-agent';
import { frontDoorConfigSecretName, probeKeySecretName } from '../../lib/warden';
import { cdkApps, NO_BUNDLING } from '../support/cdk-app';

const newApp = cdkApps();

const PROVIDERS: readonly ProviderKeySource[] = [{ name: 'openai', keySource: { secretName: 'sluice/{stage}/providers/openai', env: 'OPENAI_API_KEY' } }];
const REGIONS = ['us-east-1', 'us-west-2'] as const;
const stage = stageSettings('prod', { regions: REGIONS.join(','), alarmEmail: 'ops@example.com' });

interface Resource {
  readonly Type: string;
  readonly Properties: Record<string, unknown>;
  readonly DependsOn?: string[];
}
interface Statement {
  readonly Action: string | string[];
  readonly Resource: unknown;
  readonly Condition?: unknown;
}

let stacks: StageStacks;
const templates = new Map<Stack, Template>();
function built(): StageStacks {
  if (stacks === undefined) {
    const app = newApp(NO_BUNDLING);
    stacks = addStage(app, stage, { providers: PROVIDERS });
  }
  return stacks;
}
function regionStack(region: string): SluiceStack {
  const found = built().regions.find((s) => s.region === region);
  if (found === undefined) throw new Error(`no stack in ${region}`);
  return found;
}
function template(stack: Stack): Template {
  let t = templates.get(stack);
  if (t === undefined) {
    t = Template.fromStack(stack);
    templates.set(stack, t);
  }
  return t;
}
const frontDoor = (): Stack => {
  const f = built().frontDoor;
  if (f === undefined) throw new Error('no front door');
  return f;
};
const resources = (t: Template, type: string): Record<string, Resource> => t.findResources(type) as Record<string, Resource>;
function functionsBy(t: Template, description: string): Array<[string, Resource]> {
  return Object.entries(resources(t, 'AWS::Lambda::Function')).filter(([, r]) => String(r.Properties['Description']).includes(description));
}
function onlyFunction(t: Template, description: string): [string, Resource] {
  const found = functionsBy(t, description);
  if (found.length !== 1) throw new Error(`expected one function "${description}", found ${found.length}`);
  return found[0] as [string, Resource];
}
function statementsOf(t: Template, fn: Resource): Statement[] {
  const roleId = (fn.Properties['Role'] as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
  return Object.values(resources(t, 'AWS::IAM::Policy'))
    .filter((p) => JSON.stringify(p.Properties['Roles']) === JSON.stringify([{ Ref: roleId }]))
    .flatMap((p) => (p.Properties['PolicyDocument'] as { Statement: Statement[] }).Statement);
}
const actionsOf = (s: Statement): string[] => (Array.isArray(s.Action) ? s.Action : [s.Action]);

describe('a stage in us-east-1 and us-west-2', () => {
  it('has a stack per region, pinned to it, home first, and the front door in us-east-1, each deployed after what it reads', () => {
    const { regions, frontDoor: door } = built();
    expect(regions.map((s) => [s.stackName, s.region])).toEqual([
      ['Sluice-prod-us-east-1', 'us-east-1'],
      ['Sluice-prod-us-west-2', 'us-west-2'],
    ]);
    expect(door?.stackName).toBe('Sluice-prod-front-door');
    expect(door?.region).toBe('us-east-1');
    expect(regionStack('us-west-2').dependencies.map((s) => s.stackName)).toContain('Sluice-prod-us-east-1');
    expect(door?.dependencies.map((s) => s.stackName).sort()).toEqual(['Sluice-prod-us-east-1', 'Sluice-prod-us-west-2']);
  });

  describe('global tables', () => {
    it('defines every table once, in the home stack, as a global table with a replica in each region', () => {
      const home = template(regionStack('us-east-1'));
      expect(Object.keys(resources(home, 'AWS::DynamoDB::Table'))).toHaveLength(0);
      const tables = resources(home, 'AWS::DynamoDB::GlobalTable');
      expect(Object.values(tables).map((t) => t.Properties['TableName']).sort()).toEqual(ALL_TABLES.map((s) => `sluice-prod-${s.name}`).sort());
      for (const table of Object.values(tables)) {
        const replicas = table.Properties['Replicas'] as Array<Record<string, unknown>>;
        expect(replicas.map((r) => r['Region']).sort()).toEqual([...REGIONS]);
        // prod: every replica protected and recoverable (AWS applies these per replica).
        for (const r of replicas) expect(r).toMatchObject({ DeletionProtectionEnabled: true, PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true } });
        expect(table.Properties).toMatchObject({ BillingMode: 'PAY_PER_REQUEST', StreamSpecification: { StreamViewType: 'NEW_IMAGE' }, SSESpecification: { SSEEnabled: true } });
      }
      const usage = Object.values(tables).find((t) => t.Properties['TableName'] === 'sluice-prod-usage');
      const schema = ALL_TABLES.find((s) => s.name === 'usage');
      expect((usage?.Properties['GlobalSecondaryIndexes'] as Array<{ IndexName: string }>).map((i) => i.IndexName).sort()).toEqual(schema?.indexes.map((i) => i.indexName).sort());
    });

    it('keeps them in prod when the stack goes', () => {
      const home = regionStack('us-east-1');
      for (const [, r] of Object.entries(template(home).toJSON().Resources as Record<string, { Type: string; DeletionPolicy?: string }>)) {
        if (r.Type === 'AWS::DynamoDB::GlobalTable') expect(r.DeletionPolicy).toBe('Retain');
      }
    });

    it('has no table in the other region: it finds the replicas by name and looks their streams up at deploy', () => {
      const west = template(regionStack('us-west-2'));
      expect(Object.keys(resources(west, 'AWS::DynamoDB::Table'))).toHaveLength(0);
      expect(Object.keys(resources(west, 'AWS::DynamoDB::GlobalTable'))).toHaveLength(0);
      const lookups = resources(west, 'Custom::SluiceReplicaStream');
      const looked = Object.values(lookups).map((l) => JSON.parse(String(l.Properties['Create'])) as { action: string; parameters: { TableName: string }; outputPaths: string[] });
      expect(looked.map((l) => l.parameters.TableName).sort()).toEqual(['sluice-prod-ledger', 'sluice-prod-usage']);
      for (const l of looked) expect(l).toMatchObject({ action: 'describeTable', outputPaths: ['Table.LatestStreamArn'] });
      for (const l of Object.values(lookups)) expect(l.Properties['InstallLatestAwsSdk']).toBe(false);
    });
  });

  describe.each(REGIONS)('in %s', (region) => {
    const t = (): Template => template(regionStack(region));
    const home = region === REGIONS[0];

    it('runs its own gateway (streaming Function URL), sweeper, aggregator, transfer agent, warden and management API', () => {
      for (const d of ['OpenAI-compatible gateway', 'settles holds', 'rollups', `transfer agent of ${region}`, 'front-door warden', 'management API']) onlyFunction(t(), d);
      const [gatewayId] = onlyFunction(t(), 'OpenAI-compatible gateway');
      t().hasResourceProperties('AWS::Lambda::Url', { AuthType: 'NONE', InvokeMode: 'RESPONSE_STREAM', TargetFunctionArn: { 'Fn::GetAtt': [gatewayId, 'Arn'] } });
      t().hasOutput('GatewayUrl', {});
    });

    it(home ? 'runs the notifier, the catalog import and the console (the configuration home)' : 'runs no notifier, catalog import or console (the home does)', () => {
      for (const d of ['low-credit notices', 'import the catalog', 'workspace console']) expect(functionsBy(t(), d)).toHaveLength(home ? 1 : 0);
    });

    it('tells every function its region, the home and every region', () => {
      const fns = Object.values(resources(t(), 'AWS::Lambda::Function')).filter((f) => String(f.Properties['Description']).startsWith('Sluice prod'));
      expect(fns.length).toBeGreaterThanOrEqual(6);
      for (const fn of fns) {
        expect((fn.Properties['Environment'] as { Variables: Record<string, string> }).Variables).toMatchObject({
          [REGION_ENV.region]: region,
          [REGION_ENV.homeRegion]: 'us-east-1',
          [REGION_ENV.regions]: 'us-east-1,us-west-2',
          SLUICE_TABLE_PREFIX: 'sluice-prod-',
        });
      }
    });

    it('has the aggregator counting only the rows its region wrote (the home also those with no region)', () => {
      const [aggregatorId] = onlyFunction(t(), 'rollups');
      const mapping = Object.values(resources(t(), 'AWS::Lambda::EventSourceMapping')).find((m) => JSON.stringify(m.Properties['FunctionName']) === JSON.stringify({ Ref: aggregatorId }));
      const patterns = (mapping?.Properties['FilterCriteria'] as { Filters: Array<{ Pattern: string }> }).Filters.map((f) => JSON.parse(f.Pattern) as { dynamodb: { NewImage: { region: { S: unknown[] } } } });
      expect(patterns).toHaveLength(home ? 4 : 2);
      const regionsMatched = patterns.map((p) => JSON.stringify(p.dynamodb.NewImage.region.S));
      expect(regionsMatched.filter((r) => r === JSON.stringify([region]))).toHaveLength(2);
      expect(regionsMatched.filter((r) => r === JSON.stringify([{ exists: false }]))).toHaveLength(home ? 2 : 0);
    });

    it('feeds the transfer agent its own replica of the ledger stream, other regions\' transfer items only, with a dead-letter queue', () => {
      const [agentId] = onlyFunction(t(), `transfer agent of ${region}`);
      const mapping = Object.values(resources(t(), 'AWS::Lambda::EventSourceMapping')).find((m) => JSON.stringify(m.Properties['FunctionName']) === JSON.stringify({ Ref: agentId }));
      expect(mapping?.Properties).toMatchObject({ StartingPosition: 'TRIM_HORIZON', BisectBatchOnFunctionError: true, FunctionResponseTypes: ['ReportBatchItemFailures'], DestinationConfig: { OnFailure: { Destination: expect.anything() } } });
      const filters = (mapping?.Properties['FilterCriteria'] as { Filters: Array<{ Pattern: string }> }).Filters.map((f) => JSON.parse(f.Pattern) as unknown);
      expect(filters).toEqual([{ eventName: ['INSERT', 'MODIFY'], dynamodb: { NewImage: { pk: { S: [{ prefix: 'XFER#' }] }, region: { S: [{ 'anything-but': [region] }] } } } }]);
      const source = JSON.stringify(mapping?.Properties['EventSourceArn']);
      if (home) {
        const ledgerId = Object.entries(resources(t(), 'AWS::DynamoDB::GlobalTable')).find(([, r]) => r.Properties['TableName'] === 'sluice-prod-ledger')?.[0];
        expect(source).toBe(JSON.stringify({ 'Fn::GetAtt': [ledgerId, 'StreamArn'] }));
      } else {
        expect(source).toMatch(/TablesLedgerTableStream.*Table\.LatestStreamArn/);
      }
      expect(regionStack(region).transferAgent?.entry).toBe(TRANSFER_AGENT_ENTRY);
    });

    it('lets the gateway read the provider secret in its own region', () => {
      const [, gateway] = onlyFunction(t(), 'OpenAI-compatible gateway');
      const reads = statementsOf(t(), gateway).filter((s) => actionsOf(s).includes('secretsmanager:GetSecretValue'));
      const text = JSON.stringify(reads.map((s) => s.Resource));
      // The home's own secret (by reference); the other region's replica, by name in its region.
      if (home) expect(text).toMatch(/"Ref":"ProviderSecretssluiceprodprovidersopenai/);
      else {
        expect(text).toContain(':secretsmanager:us-west-2:');
        expect(text).toContain(':secret:sluice/prod/providers/openai-??????');
      }
    });

    it('runs the warden every minute, with the front door\'s secrets and the store it writes', () => {
      const [wardenId, warden] = onlyFunction(t(), 'front-door warden');
      expect((warden.Properties['Environment'] as { Variables: Record<string, string> }).Variables).toMatchObject({
        [WARDEN_ENV.configSecret]: frontDoorConfigSecretName('prod'),
        [WARDEN_ENV.probeKeySecret]: probeKeySecretName('prod'),
      });
      t().hasResourceProperties('AWS::Events::Rule', { ScheduleExpression: 'rate(1 minute)', Targets: [Match.objectLike({ Arn: { 'Fn::GetAtt': [wardenId, 'Arn'] } })] });
      const statements = statementsOf(t(), warden);
      const kvs = statements.find((s) => actionsOf(s).includes('cloudfront-keyvaluestore:PutKey'));
      expect(actionsOf(kvs as Statement).sort()).toEqual(['cloudfront-keyvaluestore:DescribeKeyValueStore', 'cloudfront-keyvaluestore:GetKey', 'cloudfront-keyvaluestore:PutKey']);
      const secrets = JSON.stringify(statements.filter((s) => actionsOf(s).includes('secretsmanager:GetSecretValue')).map((s) => s.Resource));
      expect(secrets).toContain(`:secretsmanager:${region}:`);
      expect(secrets).toContain(`${frontDoorConfigSecretName('prod')}-??????`);
      expect(secrets).toContain(`${probeKeySecretName('prod')}-??????`);
      // The configuration home's record and the heartbeats on the workspaces table: any region may become the
      // configuration home (a move needs no redeploy), so every warden may read and write them, and nothing else:
      // one statement, those two actions, its own region's table, the STAGE partition only.
      const onTables = statements.filter((s) => actionsOf(s).some((a) => a.startsWith('dynamodb:')));
      expect(onTables).toHaveLength(1);
      expect(onTables.flatMap(actionsOf).sort()).toEqual(['dynamodb:GetItem', 'dynamodb:PutItem']);
      expect(onTables[0]?.Condition).toEqual({ 'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': ['STAGE'] } });
      // The home's own global table by reference; another region's replica by its name, in its own region.
      const onTablesResources = JSON.stringify(onTables.map((s) => s.Resource));
      expect(onTablesResources).toMatch(home ? /TablesWorkspacesTable[0-9A-F]+/ : /sluice-prod-workspaces/);
      if (!home) expect(onTablesResources).toContain(':dynamodb:us-west-2:');
      expect(onTablesResources).not.toMatch(/ledger|usage|index/);
    });

    it('lets its management API read and write the workspaces table in its own region (the configuration home item; a move is written there)', () => {
      const [, admin] = onlyFunction(t(), 'management API');
      const onWorkspaces = statementsOf(t(), admin).filter((s) => (home ? /TablesWorkspacesTable[0-9A-F]+/ : /sluice-prod-workspaces"/).test(JSON.stringify(s.Resource)));
      const actions = onWorkspaces.flatMap(actionsOf);
      expect(actions).toEqual(expect.arrayContaining(['dynamodb:GetItem', 'dynamodb:PutItem']));
      if (!home) expect(JSON.stringify(onWorkspaces.map((s) => s.Resource))).toContain(':dynamodb:us-west-2:');
    });

    it('has its own alarms, each notifying its own topic, the transfer agent and warden among them', () => {
      const topics = resources(t(), 'AWS::SNS::Topic');
      expect(Object.values(topics).map((tp) => tp.Properties['TopicName'])).toEqual(['Sluice-prod-alarms']);
      const topicId = Object.keys(topics)[0];
      const alarms = Object.values(resources(t(), 'AWS::CloudWatch::Alarm'));
      for (const a of alarms) expect(a.Properties['AlarmActions']).toEqual([{ Ref: topicId }]);
      const names = alarms.map((a) => String(a.Properties['AlarmName']));
      expect(names).toEqual(expect.arrayContaining(['Sluice-prod-TransferAgentErrors', 'Sluice-prod-TransferDeadLetters', 'Sluice-prod-WardenErrors', 'Sluice-prod-GatewayErrors', 'Sluice-prod-SettlementFailures', 'Sluice-prod-ExpiredHoldsBacklog']));
      t().hasResourceProperties('AWS::SNS::Subscription', { Protocol: 'email', Endpoint: 'ops@example.com' });
    });

    it(`has its own dashboard, Sluice-prod-${region}`, () => {
      const dashboards = Object.values(resources(t(), 'AWS::CloudWatch::Dashboard'));
      expect(dashboards.map((d) => d.Properties['DashboardName'])).toEqual([`Sluice-prod-${region}`]);
    });

    it('has zero unacknowledged cdk-nag findings (AwsSolutions and Serverless)', () => {
      for (const pack of nagPacks()) {
        const report = pack.validateScope(regionStack(region));
        expect(report.violations.map((v) => `${v.ruleName}: ${v.violatingResources.map((r) => r.resourceLogicalId).join(', ')}`)).toEqual([]);
      }
    });
  });

  describe('provider secrets', () => {
    it('are created in the home region with a replica in the other, and not created again there', () => {
      template(regionStack('us-east-1')).hasResourceProperties('AWS::SecretsManager::Secret', {
        Name: 'sluice/prod/providers/openai',
        ReplicaRegions: [{ Region: 'us-west-2' }],
      });
      expect(Object.keys(resources(template(regionStack('us-west-2')), 'AWS::SecretsManager::Secret'))).toHaveLength(0);
    });
  });

  describe('the front door', () => {
    const t = (): Template => template(frontDoor());

    it('routes every region\'s gateway through one distribution, with no origin access control', () => {
      const distributions = Object.values(resources(t(), 'AWS::CloudFront::Distribution'));
      expect(distributions).toHaveLength(1);
      const config = distributions[0]?.Properties['DistributionConfig'] as Record<string, unknown>;
      const origins = config['Origins'] as Array<Record<string, unknown>>;
      expect(origins.map((o) => o['Id']).sort()).toEqual(REGIONS.map(gatewayOriginId));
      for (const o of origins) {
        expect(o['OriginAccessControlId']).toBeUndefined();
        expect(o['CustomOriginConfig']).toEqual({ OriginProtocolPolicy: 'https-only', OriginReadTimeout: ORIGIN_READ_TIMEOUT_SECONDS, OriginSSLProtocols: ['TLSv1.2'] });
        // The host of the gateway's Function URL, from its region's stack.
        expect(JSON.stringify(o['DomainName'])).toMatch(/Fn::Split.*FunctionUrl/);
      }
      expect(Object.keys(resources(t(), 'AWS::CloudFront::OriginAccessControl'))).toHaveLength(0);
      const behavior = config['DefaultCacheBehavior'] as Record<string, unknown>;
      expect(behavior).toMatchObject({
        AllowedMethods: expect.arrayContaining(['POST', 'GET', 'OPTIONS']),
        // CloudFront's managed CachingDisabled and AllViewerExceptHostHeader policies.
        CachePolicyId: '4135ea2d-6df8-44a3-9df3-4b5a84be39ad',
        OriginRequestPolicyId: 'b689b0a8-53d0-40ab-baf2-68738e2966ac',
        ViewerProtocolPolicy: 'https-only',
        Compress: false,
        FunctionAssociations: [{ EventType: 'viewer-request', FunctionARN: expect.anything() }],
      });
    });

    it('chooses the region with a CloudFront Function (runtime 2.0) reading the health store', () => {
      const fns = Object.values(resources(t(), 'AWS::CloudFront::Function'));
      expect(fns).toHaveLength(1);
      const fn = fns[0] as Resource;
      expect(fn.Properties['FunctionConfig']).toMatchObject({ Runtime: 'cloudfront-js-2.0', KeyValueStoreAssociations: [{ KeyValueStoreARN: expect.anything() }] });
      const code = String(fn.Properties['FunctionCode']);
      for (const needle of ["import cf from 'cloudfront'", 'cf.kvs()', 'createRequestOriginGroup', ...REGIONS.map(gatewayOriginId)]) expect(code).toContain(needle);
      t().hasResourceProperties('AWS::CloudFront::KeyValueStore', { Name: 'sluice-prod-regions' });
    });

    it('tells the wardens where the store and the gateways are, in a secret replicated to every region, and keeps the probe key the same way', () => {
      const secrets = Object.values(resources(t(), 'AWS::SecretsManager::Secret'));
      const config = secrets.find((s) => s.Properties['Name'] === frontDoorConfigSecretName('prod'));
      // The front door's own region holds the primary; every other region a replica.
      expect(config?.Properties['ReplicaRegions']).toEqual([{ Region: 'us-west-2' }]);
      const value = JSON.stringify(config?.Properties['SecretString']);
      expect(value).toContain('kvsArn');
      expect(value).toContain('us-west-2');
      const probe = secrets.find((s) => s.Properties['Name'] === probeKeySecretName('prod'));
      expect(probe?.Properties['ReplicaRegions']).toEqual([{ Region: 'us-west-2' }]);
      // Created empty: an operator stores the probe workspace's key.
      expect(probe?.Properties['GenerateSecretString']).toBeUndefined();
      expect(probe?.Properties['SecretString']).toBeUndefined();
    });

    it('alarms on the distribution\'s 5xx rate, to its own topic, and outputs the one address', () => {
      const alarms = Object.values(resources(t(), 'AWS::CloudWatch::Alarm'));
      expect(alarms).toHaveLength(1);
      expect(alarms[0]?.Properties).toMatchObject({ MetricName: '5xxErrorRate', Namespace: 'AWS/CloudFront', AlarmActions: [expect.anything()], OKActions: [expect.anything()] });
      t().hasResourceProperties('AWS::SNS::Topic', { TopicName: 'Sluice-prod-front-door-alarms' });
      t().hasResourceProperties('AWS::SNS::Subscription', { Protocol: 'email', Endpoint: 'ops@example.com' });
      t().hasOutput('FrontDoorUrl', {});
    });

    it('has the stage dashboard over every region', () => {
      const dashboards = Object.values(resources(t(), 'AWS::CloudWatch::Dashboard'));
      expect(dashboards.map((d) => d.Properties['DashboardName'])).toEqual(['Sluice-prod']);
      const body = JSON.stringify(dashboards[0]?.Properties['DashboardBody']);
      for (const r of REGIONS) expect(body).toContain(`\\"region\\":\\"${r}\\"`);
      expect(body).toContain('RegionUp');
      expect(body).toContain('5xxErrorRate');
    });

    it('has zero unacknowledged cdk-nag findings (AwsSolutions and Serverless)', () => {
      for (const pack of nagPacks()) {
        const report = pack.validateScope(frontDoor());
        expect(report.violations.map((v) => `${v.ruleName}: ${v.violatingResources.map((r) => r.resourceLogicalId).join(', ')}`)).toEqual([]);
      }
    });
  });

  it('refuses a region stack the stage does not list, or one deployed elsewhere', () => {
    expect(() => SluiceStack.placement(stage, 'eu-west-1', 'eu-west-1')).toThrow(/spans us-east-1, us-west-2/);
    expect(() => SluiceStack.placement(stage, 'us-west-2', 'us-east-1')).toThrow(/must be deployed there/);
    expect(() => SluiceStack.placement(stageSettings('prod'), 'us-east-1', 'us-east-1')).toThrow(/has one region/);
    expect(SluiceStack.placement(stage, 'us-west-2', 'us-west-2')).toEqual({ region: 'us-west-2', home: false });
  });
});
