/**
 * A stage with `compute: 'managed-instances'`: the gateway on a Lambda Managed Instances capacity
 * provider in a VPC of its own (private subnets in three zones, NAT gateways, a DynamoDB gateway
 * endpoint, HTTPS out and nothing in), its Function URL still streaming, its role exactly as on
 * demand, cdk-nag clean, alarms and dashboard intact. Stages stay on demand unless told.
 */
import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { nagPacks } from '../../lib/nag';
import type { ProviderKeySource } from '../../lib/provider-file';
import { SluiceStack } from '../../lib/sluice-stack';
import {
  COMPUTE_MODES,
  STAGE_NAMES,
  StageConfigError,
  managedInstancesShape,
  stageSettings,
  validateStageSettings,
  type ManagedInstancesSettings,
  type StageName,
  type StageSettings,
} from '../../lib/stage';
import { cdkApps, NO_BUNDLING } from '../support/cdk-app';
import { scratchDirs } from '../support/scratch';

/** The synth that is refused gets an output folder of its own, removed when the file ends. */
const scratch = scratchDirs();

const newApp = cdkApps();

const ROOT = path.resolve(__dirname, '..', '..');
const PROVIDERS: readonly ProviderKeySource[] = [
  { name: 'openai', keySource: { secretName: 'sluice/{stage}/providers/openai', env: 'OPENAI_API_KEY' } },
  { name: 'local', keySource: 'none' },
];

interface Resource {
  readonly Type: string;
  readonly Properties: Record<string, unknown>;
}
interface Statement {
  readonly Effect: string;
  readonly Action: string | string[];
  readonly Resource: unknown;
  readonly Principal?: unknown;
}

type Compute = (typeof COMPUTE_MODES)[number];
const built = new Map<string, { stack: SluiceStack; template: Template }>();
/**
 * One synthesis per stage and compute for the whole file, without bundling the functions' code
 * (nothing here reads it, and esbuild would cost seconds a synthesis): `bundling-stacks` empty.
 */
function build(stage: StageName, compute: Compute): { stack: SluiceStack; template: Template } {
  const key = `${stage}/${compute}`;
  const existing = built.get(key);
  if (existing !== undefined) return existing;
  const app = newApp(NO_BUNDLING);
  const stack = new SluiceStack(app, `Sluice-${stage}`, { stage: stageSettings(stage, { compute }), providers: PROVIDERS });
  const made = { stack, template: Template.fromStack(stack) };
  built.set(key, made);
  return made;
}
const resources = (t: Template, type: string): Record<string, Resource> => t.findResources(type) as Record<string, Resource>;
function onlyId(found: Record<string, Resource>, what: string): string {
  const ids = Object.keys(found);
  if (ids.length !== 1) throw new Error(`expected one ${what}, found ${ids.length}`);
  return ids[0] as string;
}
const gatewayId = (t: Template): string =>
  onlyId(
    Object.fromEntries(Object.entries(resources(t, 'AWS::Lambda::Function')).filter(([, r]) => String(r.Properties['Description']).includes('OpenAI-compatible gateway'))),
    'gateway function',
  );
function statementsOf(t: Template, fnId: string): Statement[] {
  const fn = resources(t, 'AWS::Lambda::Function')[fnId] as Resource;
  const roleId = (fn.Properties['Role'] as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
  return Object.values(resources(t, 'AWS::IAM::Policy'))
    .filter((p) => JSON.stringify(p.Properties['Roles']) === JSON.stringify([{ Ref: roleId }]))
    .flatMap((p) => (p.Properties['PolicyDocument'] as { Statement: Statement[] }).Statement);
}

describe('stage settings: compute', () => {
  it.each(STAGE_NAMES)('runs %s on demand unless told otherwise', (name) => {
    expect(stageSettings(name).compute).toBe('on-demand');
    expect(stageSettings(name, { compute: '' }).compute).toBe('on-demand');
    expect(stageSettings(name, { compute: 'managed-instances' }).compute).toBe('managed-instances');
  });

  it.each(['Managed-Instances', 'managed', 'ec2', 'on demand'])('refuses the compute %j, naming the valid ones', (compute) => {
    expect(() => stageSettings('dev', { compute })).toThrow(StageConfigError);
    expect(() => stageSettings('dev', { compute })).toThrow(/-c compute=on-demand\|managed-instances/);
  });

  it('derives one vCPU, one worker thread and the concurrency ceiling from the shipped values', () => {
    for (const name of STAGE_NAMES) {
      const m = stageSettings(name).managedInstances;
      expect(Object.isFrozen(m)).toBe(true);
      expect(m.memoryMb).toBeGreaterThanOrEqual(2048);
      expect(m.minEnvironments).toBeGreaterThanOrEqual(3);
      expect(managedInstancesShape(m)).toEqual({ vcpusPerEnvironment: 1, workerThreads: 1, maxConcurrentRequests: m.maxEnvironments * m.perEnvironmentConcurrency });
    }
    expect(managedInstancesShape({ ...stageSettings('dev').managedInstances, memoryMb: 8192, memoryGiBPerVcpu: 4 }).vcpusPerEnvironment).toBe(2);
  });

  const dev = stageSettings('dev');
  const withManaged = (m: Partial<ManagedInstancesSettings>): StageSettings => ({ ...dev, managedInstances: { ...dev.managedInstances, ...m } });
  it.each<[string, StageSettings]>([
    ['an unknown compute', { ...dev, compute: 'fargate' as StageSettings['compute'] }],
    ['no instance type', withManaged({ instanceTypes: [] })],
    ['an x86 instance type (the gateway is arm64)', withManaged({ instanceTypes: ['c7i.large'] })],
    ['an instance below size large', withManaged({ instanceTypes: ['c7g.medium'] })],
    ['a GPU instance', withManaged({ instanceTypes: ['g5g.xlarge'] })],
    ['an instance type twice', withManaged({ instanceTypes: ['c7g.large', 'c7g.large'] })],
    ['a concurrency of zero', withManaged({ perEnvironmentConcurrency: 0 })],
    ['a concurrency above AWS maximum', withManaged({ perEnvironmentConcurrency: 1601 })],
    ['memory under 2 GB', withManaged({ memoryMb: 1024 })],
    ['memory that is not whole vCPUs', withManaged({ memoryMb: 3000 })],
    ['a memory ratio AWS does not offer', withManaged({ memoryGiBPerVcpu: 3 })],
    ['fewer than three environments', withManaged({ minEnvironments: 2 })],
    ['a maximum below the minimum', withManaged({ minEnvironments: 4, maxEnvironments: 3 })],
    ['a vCPU ceiling under AWS minimum of 12', withManaged({ maxVcpus: 8 })],
    ['a vCPU ceiling too low for the maximum environments', withManaged({ maxEnvironments: 20, maxVcpus: 12 })],
    ['one Availability Zone', withManaged({ availabilityZones: 1 })],
    ['four Availability Zones (the stack is region-agnostic and selects three)', withManaged({ availabilityZones: 4 })],
    ['no NAT gateway', withManaged({ natGateways: 0 })],
    ['more NAT gateways than zones', withManaged({ availabilityZones: 2, natGateways: 3 })],
  ])('rejects %s', (_label, settings) => {
    expect(() => validateStageSettings(settings)).toThrow(StageConfigError);
  });

  it('accepts other Graviton families and sizes', () => {
    expect(() => validateStageSettings(withManaged({ instanceTypes: ['c7g.large', 'm7g.xlarge', 'r8g.2xlarge', 'c7gn.large', 'm6g.16xlarge'] }))).not.toThrow();
  });
});

describe('bin/app.ts', () => {
  it('fails to synthesize an unknown compute, naming the valid ones', async () => {
    const run = promisify(execFile);
    const tsx = path.join(ROOT, 'node_modules', '.bin', 'tsx');
    await expect(
      run(tsx, [path.join(ROOT, 'bin', 'app.ts')], {
        cwd: ROOT,
        env: { ...process.env, CDK_CONTEXT_JSON: JSON.stringify({ stage: 'dev', compute: 'ec2' }), CDK_OUTDIR: scratch('sluice-unknown-compute-') },
      }),
    ).rejects.toMatchObject({ stderr: expect.stringMatching(/unknown compute "ec2"/) });
  });
});

describe('an on-demand stage', () => {
  it('has no VPC, capacity provider or NAT gateway', () => {
    const t = build('dev', 'on-demand').template;
    for (const type of ['AWS::EC2::VPC', 'AWS::EC2::NatGateway', 'AWS::EC2::Subnet', 'AWS::Lambda::CapacityProvider']) t.resourceCountIs(type, 0);
    expect(resources(t, 'AWS::Lambda::Function')[gatewayId(t)]?.Properties['CapacityProviderConfig']).toBeUndefined();
  });
});

describe.each(['dev', 'prod'] as const)('Sluice-%s on managed instances', (stage) => {
  const t = (): Template => build(stage, 'managed-instances').template;
  const m = stageSettings(stage).managedInstances;
  const providerId = (): string => onlyId(resources(t(), 'AWS::Lambda::CapacityProvider'), 'capacity provider');
  const privateSubnetIds = (): string[] => Object.keys(t().findResources('AWS::EC2::Subnet', { Properties: { MapPublicIpOnLaunch: false, Tags: Match.arrayWith([{ Key: 'aws-cdk:subnet-type', Value: 'Private' }]) } }));
  const sgId = (): string => onlyId(resources(t(), 'AWS::EC2::SecurityGroup'), 'security group');

  describe('the capacity provider', () => {
    it('runs the stage instance types on arm64, within its vCPU ceiling, scaled by Lambda', () => {
      t().hasResourceProperties('AWS::Lambda::CapacityProvider', {
        InstanceRequirements: { AllowedInstanceTypes: [...m.instanceTypes], Architectures: ['arm64'] },
        CapacityProviderScalingConfig: { MaxVCpuCount: m.maxVcpus, ScalingMode: 'Auto' },
      });
    });

    it('launches instances in the private subnets only, with the instances security group', () => {
      const subnets = privateSubnetIds();
      expect(subnets).toHaveLength(m.availabilityZones);
      t().hasResourceProperties('AWS::Lambda::CapacityProvider', {
        VpcConfig: { SubnetIds: subnets.map((id) => ({ Ref: id })), SecurityGroupIds: [{ 'Fn::GetAtt': [sgId(), 'GroupId'] }] },
      });
    });

    it('logs to a log group with the stage retention, and tags its instances for the bill', () => {
      const provider = resources(t(), 'AWS::Lambda::CapacityProvider')[providerId()] as Resource;
      const logGroup = ((provider.Properties['TelemetryConfig'] as { LoggingConfig: { LogGroup: { Ref: string } } }).LoggingConfig.LogGroup).Ref;
      expect(resources(t(), 'AWS::Logs::LogGroup')[logGroup]?.Properties['RetentionInDays']).toBe(stageSettings(stage).logRetention);
      expect(provider.Properties['PropagateTags']).toEqual({ Mode: 'Explicit', ExplicitTags: [{ Key: 'Project', Value: 'Sluice' }, { Key: 'Stage', Value: stage }] });
      t().hasOutput('CapacityProviderArn', { Value: { 'Fn::GetAtt': [providerId(), 'Arn'] } });
    });

    it('is operated by a role only Lambda can assume, with AWS operator policy and nothing else', () => {
      const provider = resources(t(), 'AWS::Lambda::CapacityProvider')[providerId()] as Resource;
      const roleId = (provider.Properties['PermissionsConfig'] as { CapacityProviderOperatorRoleArn: { 'Fn::GetAtt': [string, string] } }).CapacityProviderOperatorRoleArn['Fn::GetAtt'][0];
      const role = resources(t(), 'AWS::IAM::Role')[roleId] as Resource;
      expect(role.Properties['AssumeRolePolicyDocument']).toEqual({
        Statement: [{ Action: 'sts:AssumeRole', Effect: 'Allow', Principal: { Service: 'lambda.amazonaws.com' } }],
        Version: '2012-10-17',
      });
      expect(JSON.stringify(role.Properties['ManagedPolicyArns'])).toMatch(/^\[\{"Fn::Join":\["",\["arn:",\{"Ref":"AWS::Partition"\},":iam::aws:policy\/AWSLambdaManagedEC2ResourceOperator"\]\]\}\]$/);
      const inline = Object.values(resources(t(), 'AWS::IAM::Policy')).filter((p) => JSON.stringify(p.Properties['Roles']).includes(roleId));
      expect(inline).toEqual([]);
    });
  });

  describe('the gateway', () => {
    it('runs on the capacity provider with the stage concurrency, memory and environment bounds', () => {
      t().hasResourceProperties('AWS::Lambda::Function', {
        Description: Match.stringLikeRegexp('OpenAI-compatible gateway'),
        Runtime: 'nodejs22.x',
        Architectures: ['arm64'],
        MemorySize: m.memoryMb,
        Timeout: 600,
        CapacityProviderConfig: {
          LambdaManagedInstancesCapacityProviderConfig: {
            CapacityProviderArn: { 'Fn::GetAtt': [providerId(), 'Arn'] },
            PerExecutionEnvironmentMaxConcurrency: m.perEnvironmentConcurrency,
            ExecutionEnvironmentMemoryGiBPerVCpu: m.memoryGiBPerVcpu,
          },
        },
        FunctionScalingConfig: { MinExecutionEnvironments: m.minEnvironments, MaxExecutionEnvironments: m.maxEnvironments },
        // Every deploy publishes $LATEST.PUBLISHED, the version an unqualified invocation runs.
        PublishToLatestPublished: true,
        // Managed instances take JSON logs only.
        LoggingConfig: Match.objectLike({ LogFormat: 'JSON' }),
        VpcConfig: Match.absent(),
      });
    });

    it('runs one worker thread per vCPU and keeps the on-demand configuration otherwise', () => {
      const fn = resources(t(), 'AWS::Lambda::Function')[gatewayId(t())] as Resource;
      const onDemand = resources(build(stage, 'on-demand').template, 'AWS::Lambda::Function')[gatewayId(build(stage, 'on-demand').template)] as Resource;
      expect(fn.Properties['Environment']).toEqual({
        Variables: { ...(onDemand.Properties['Environment'] as { Variables: Record<string, string> }).Variables, AWS_LAMBDA_NODEJS_WORKER_COUNT: '1' },
      });
    });

    it('is still reached through a streaming Function URL without IAM auth, output as GatewayUrl', () => {
      t().hasResourceProperties('AWS::Lambda::Url', {
        AuthType: 'NONE',
        InvokeMode: 'RESPONSE_STREAM',
        TargetFunctionArn: { 'Fn::GetAtt': [gatewayId(t()), 'Arn'] },
        // Unqualified: on managed instances that invokes $LATEST.PUBLISHED.
        Qualifier: Match.absent(),
      });
      const urlId = onlyId(
        t().findResources('AWS::Lambda::Url', { Properties: { TargetFunctionArn: { 'Fn::GetAtt': [gatewayId(t()), 'Arn'] } } }) as Record<string, Resource>,
        'gateway URL',
      );
      t().hasOutput('GatewayUrl', { Value: { 'Fn::GetAtt': [urlId, 'FunctionUrl'] } });
    });

    it('has exactly the grants it has on demand: no EC2, no wildcard', () => {
      const normalise = (tpl: Template): string[] => {
        const id = gatewayId(tpl);
        const logGroup = ((resources(tpl, 'AWS::Lambda::Function')[id] as Resource).Properties['LoggingConfig'] as { LogGroup: { Ref: string } }).LogGroup.Ref;
        return statementsOf(tpl, id).map((s) => JSON.stringify(s).split(logGroup).join('<gateway log group>')).sort();
      };
      const managed = normalise(t());
      expect(managed).toEqual(normalise(build(stage, 'on-demand').template));
      expect(managed.join('\n')).not.toMatch(/"ec2:|"Action":"\*"|"Resource":"\*"/);
    });
  });

  describe('the VPC', () => {
    it('spreads a private and a public subnet over each zone, chosen at deploy', () => {
      const subnets = Object.values(resources(t(), 'AWS::EC2::Subnet'));
      expect(subnets).toHaveLength(2 * m.availabilityZones);
      const zones = new Set(subnets.map((s) => JSON.stringify(s.Properties['AvailabilityZone'])));
      expect([...zones].sort()).toEqual(Array.from({ length: m.availabilityZones }, (_, i) => JSON.stringify({ 'Fn::Select': [i, { 'Fn::GetAZs': '' }] })).sort());
      for (const s of subnets) expect(s.Properties['MapPublicIpOnLaunch']).toBe(false);
    });

    it(`has ${m.natGateways} NAT gateway(s), and every private subnet routes out through one`, () => {
      t().resourceCountIs('AWS::EC2::NatGateway', m.natGateways);
      const associations = Object.values(resources(t(), 'AWS::EC2::SubnetRouteTableAssociation'));
      for (const subnet of privateSubnetIds()) {
        const table = (associations.find((a) => JSON.stringify(a.Properties['SubnetId']) === JSON.stringify({ Ref: subnet })) as Resource).Properties['RouteTableId'];
        t().hasResourceProperties('AWS::EC2::Route', { RouteTableId: table, DestinationCidrBlock: '0.0.0.0/0', NatGatewayId: Match.anyValue(), GatewayId: Match.absent() });
      }
    });

    it('lets the instances out on HTTPS only and lets nothing in', () => {
      const sg = resources(t(), 'AWS::EC2::SecurityGroup')[sgId()] as Resource;
      expect(sg.Properties['SecurityGroupIngress']).toBeUndefined();
      expect(sg.Properties['SecurityGroupEgress']).toEqual([{ CidrIp: '0.0.0.0/0', Description: 'HTTPS to providers and AWS APIs', FromPort: 443, IpProtocol: 'tcp', ToPort: 443 }]);
      t().resourceCountIs('AWS::EC2::SecurityGroupIngress', 0);
    });

    it('reaches DynamoDB through a gateway endpoint on the private route tables, for the stage tables only', () => {
      const associations = Object.values(resources(t(), 'AWS::EC2::SubnetRouteTableAssociation'));
      const privateTables = privateSubnetIds().map((subnet) => (associations.find((a) => JSON.stringify(a.Properties['SubnetId']) === JSON.stringify({ Ref: subnet })) as Resource).Properties['RouteTableId']);
      const endpoint = Object.values(resources(t(), 'AWS::EC2::VPCEndpoint'))[0] as Resource;
      t().resourceCountIs('AWS::EC2::VPCEndpoint', 1);
      expect(JSON.stringify(endpoint.Properties['ServiceName'])).toContain('.dynamodb');
      expect(endpoint.Properties['VpcEndpointType']).toBe('Gateway');
      expect(endpoint.Properties['RouteTableIds']).toEqual(privateTables);
      const resourcesAllowed = JSON.stringify((endpoint.Properties['PolicyDocument'] as { Statement: Statement[] }).Statement.map((s) => s.Resource));
      expect(resourcesAllowed).toContain(`:table/sluice-${stage}-*"`);
      expect(resourcesAllowed).toContain(`:table/sluice-${stage}-*/index/*"`);
      expect(resourcesAllowed).not.toMatch(/"\*"/);
    });

    it('logs rejected traffic with the stage retention', () => {
      t().hasResourceProperties('AWS::EC2::FlowLog', { ResourceType: 'VPC', TrafficType: 'REJECT', LogDestinationType: 'cloud-watch-logs' });
      const flow = Object.values(resources(t(), 'AWS::EC2::FlowLog'))[0] as Resource;
      const group = (flow.Properties['LogGroupName'] as { Ref: string }).Ref;
      expect(resources(t(), 'AWS::Logs::LogGroup')[group]?.Properties['RetentionInDays']).toBe(stageSettings(stage).logRetention);
    });
  });

  describe('operations', () => {
    it('keeps every alarm of the on-demand stage, each reaching the topic', () => {
      const names = (tpl: Template): string[] => Object.values(resources(tpl, 'AWS::CloudWatch::Alarm')).map((a) => String(a.Properties['AlarmName'])).sort();
      expect(names(t())).toEqual(names(build(stage, 'on-demand').template));
      const topic = onlyId(resources(t(), 'AWS::SNS::Topic'), 'topic');
      for (const alarm of Object.values(resources(t(), 'AWS::CloudWatch::Alarm'))) {
        expect(alarm.Properties['AlarmActions']).toEqual([{ Ref: topic }]);
      }
      // The gateway's own alarms watch the managed function.
      t().hasResourceProperties('AWS::CloudWatch::Alarm', {
        AlarmName: `Sluice-${stage}-GatewayThrottles`,
        Dimensions: [{ Name: 'FunctionName', Value: { Ref: gatewayId(t()) } }],
      });
    });

    it('counts failed settlements from the managed gateway log group', () => {
      const logGroup = ((resources(t(), 'AWS::Lambda::Function')[gatewayId(t())] as Resource).Properties['LoggingConfig'] as { LogGroup: { Ref: string } }).LogGroup.Ref;
      t().hasResourceProperties('AWS::Logs::MetricFilter', { LogGroupName: { Ref: logGroup }, FilterPattern: '"settle_failed"' });
    });

    it('graphs the capacity provider utilisation and vCPUs on the stage dashboard', () => {
      const body = JSON.stringify((Object.values(resources(t(), 'AWS::CloudWatch::Dashboard'))[0] as Resource).Properties['DashboardBody']);
      for (const metric of ['CPUUtilization', 'MemoryUtilization', 'vCPUAllocated', 'vCPUAvailable']) expect(body).toContain(metric);
      expect(body).toContain(JSON.stringify({ Ref: providerId() }));
    });

    it('has zero unacknowledged cdk-nag findings (AwsSolutions and Serverless)', () => {
      for (const pack of nagPacks()) {
        const report = pack.validateScope(build(stage, 'managed-instances').stack);
        const findings = report.violations.map((v) => `${v.ruleName}: ${v.violatingResources.map((r) => JSON.stringify(r)).join(', ')}`);
        expect(findings).toEqual([]);
        expect(report.success).toBe(true);
      }
    });
  });
});
