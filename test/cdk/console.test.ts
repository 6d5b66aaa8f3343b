/**
 * The workspace console's construct (lib/console.ts): its function bundled like the others, a
 * Function URL with auth NONE (people sign in with passkeys), a role that reaches only what the
 * console's use cases need, its alarm to the stage's topic, its URL as an output, and the stage's
 * console settings.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import * as path from 'node:path';
import type { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { CONSOLE_ASSET_TYPES } from '../../lambdas/console/assets';
import { CONSOLE_ENV, ORIGIN_FROM_FUNCTION_URL } from '../../lambdas/console/env';
import { nagPacks } from '../../lib/nag';
import type { ProviderKeySource } from '../../lib/provider-file';
import { SluiceStack } from '../../lib/sluice-stack';
import { STAGE_NAMES, StageConfigError, stageSettings, validateStageSettings, type StageName } from '../../lib/stage';
import { cdkApps } from '../support/cdk-app';

const newApp = cdkApps();

const PROVIDERS: readonly ProviderKeySource[] = [{ name: 'openai', keySource: { secretName: 'sluice/{stage}/providers/openai', env: 'OPENAI_API_KEY' } }];
const ORIGIN = 'https://console.sluice.example.com';

interface Resource {
  readonly Properties: Record<string, unknown>;
}
interface Statement {
  readonly Effect: string;
  readonly Action: string | string[];
  readonly Resource: unknown;
}

// One synthesis per stage and origin: bundling makes each cost a second or two.
interface Built {
  readonly app: App;
  readonly stack: SluiceStack;
  readonly template: Template;
}
const built = new Map<string, Built>();
function build(stage: StageName, consoleOrigin?: string): Built {
  const key = `${stage}|${consoleOrigin ?? ''}`;
  let b = built.get(key);
  if (b === undefined) {
    const app = newApp();
    const stack = new SluiceStack(app, `Sluice-${stage}`, { stage: stageSettings(stage, { consoleOrigin }), providers: PROVIDERS });
    b = { app, stack, template: Template.fromStack(stack) };
    built.set(key, b);
  }
  return b;
}

const resources = (t: Template, type: string): Record<string, Resource> => t.findResources(type) as Record<string, Resource>;

function consoleFnId(t: Template): string {
  const ids = Object.entries(resources(t, 'AWS::Lambda::Function'))
    .filter(([, r]) => String(r.Properties['Description']).includes('workspace console'))
    .map(([id]) => id);
  if (ids.length !== 1) throw new Error(`expected one console function, found ${ids.length}`);
  return ids[0] as string;
}

function tableId(t: Template, stage: StageName, name: string): string {
  const ids = Object.keys(t.findResources('AWS::DynamoDB::Table', { Properties: { TableName: `sluice-${stage}-${name}` } }));
  if (ids.length !== 1) throw new Error(`no table ${name}`);
  return ids[0] as string;
}

/** Every statement of the console function's role. */
function statements(t: Template): Statement[] {
  const fn = resources(t, 'AWS::Lambda::Function')[consoleFnId(t)] as Resource;
  const roleId = (fn.Properties['Role'] as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
  return Object.values(resources(t, 'AWS::IAM::Policy'))
    .filter((p) => JSON.stringify(p.Properties['Roles']) === JSON.stringify([{ Ref: roleId }]))
    .flatMap((p) => (p.Properties['PolicyDocument'] as { Statement: Statement[] }).Statement);
}
const actionsOf = (s: Statement): string[] => (Array.isArray(s.Action) ? s.Action : [s.Action]);
function actionsOnTable(t: Template, stage: StageName, name: string): string[] {
  const id = tableId(t, stage, name);
  const found = statements(t).filter((s) => JSON.stringify(s.Resource).includes(`"${id}"`)).flatMap(actionsOf);
  return [...new Set(found)].sort();
}
const READS = ['dynamodb:BatchGetItem', 'dynamodb:ConditionCheckItem', 'dynamodb:DescribeTable', 'dynamodb:GetItem', 'dynamodb:GetRecords', 'dynamodb:GetShardIterator', 'dynamodb:Query', 'dynamodb:Scan'];
const WRITES = ['dynamodb:BatchWriteItem', 'dynamodb:DeleteItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'];

// Two synths, not one per stage (bundling is slow): dev on the Function URL's own origin, prod
// behind a domain of its own. The settings of every stage are checked without synthesis below.
describe.each([
  ['dev', undefined],
  ['prod', ORIGIN],
] as const)('Sluice-%s console (origin %s)', (stage, origin) => {
  const t = (): Template => build(stage, origin).template;
  const settings = stageSettings(stage, { consoleOrigin: origin }).console;

  it('runs the console handler, pinned and bundled like every function, with its stage settings', () => {
    const fn = resources(t(), 'AWS::Lambda::Function')[consoleFnId(t())] as Resource;
    expect(fn.Properties).toMatchObject({
      Handler: 'index.handler',
      Runtime: 'nodejs22.x',
      Architectures: ['arm64'],
      MemorySize: settings.memoryMb,
      Timeout: 30,
      Environment: {
        Variables: {
          SLUICE_STAGE: stage,
          SLUICE_TABLE_PREFIX: `sluice-${stage}-`,
          SLUICE_SECRET_SOURCE: 'secrets-manager',
          SLUICE_KEY_RATE_PER_MINUTE: String(stageSettings(stage).keyRatePerMinute),
          [CONSOLE_ENV.sessionMinutes]: String(settings.sessionMinutes),
        },
      },
    });
    const variables = (fn.Properties['Environment'] as { Variables: Record<string, unknown> }).Variables;
    if (origin === undefined) {
      // No domain of its own: the function takes its Function URL's origin from each request.
      expect(variables[CONSOLE_ENV.origin]).toBeUndefined();
      expect(variables[CONSOLE_ENV.originFrom]).toBe(ORIGIN_FROM_FUNCTION_URL);
    } else {
      expect(variables[CONSOLE_ENV.origin]).toBe(origin);
      expect(variables[CONSOLE_ENV.originFrom]).toBeUndefined();
    }
    // A bundle (an asset), not the TypeScript source.
    expect(fn.Properties['Code']).toMatchObject({ S3Key: expect.stringMatching(/\.zip$/) });
  });

  it('ships the pages\' script and styles beside the handler', () => {
    const fn = resources(t(), 'AWS::Lambda::Function')[consoleFnId(t())] as Resource;
    const hash = String((fn.Properties['Code'] as { S3Key: string }).S3Key).replace(/\.zip$/, '');
    const dir = path.join(build(stage, origin).app.outdir, `asset.${hash}`);
    expect(existsSync(path.join(dir, 'index.js'))).toBe(true);
    for (const name of Object.keys(CONSOLE_ASSET_TYPES)) {
      expect(statSync(path.join(dir, 'console-assets', name)).size).toBeGreaterThan(1000);
    }
    // The browser bundle carries the passkey client, not server code or the AWS SDK.
    const js = readFileSync(path.join(dir, 'console-assets', 'console.js'), 'utf8');
    expect(js).toMatch(/navigator\.credentials|PublicKeyCredential/);
    expect(js).not.toMatch(/@aws-sdk|DynamoDBClient/);
  });

  it('is reached through a buffered Function URL with auth NONE, which is an output', () => {
    const fnId = consoleFnId(t());
    t().hasResourceProperties('AWS::Lambda::Url', { AuthType: 'NONE', InvokeMode: 'BUFFERED', TargetFunctionArn: { 'Fn::GetAtt': [fnId, 'Arn'] } });
    const urls = Object.entries(resources(t(), 'AWS::Lambda::Url')).filter(
      ([, r]) => JSON.stringify(r.Properties['TargetFunctionArn']) === JSON.stringify({ 'Fn::GetAtt': [fnId, 'Arn'] }),
    );
    expect(urls).toHaveLength(1);
    t().hasOutput('ConsoleUrl', { Value: { 'Fn::GetAtt': [urls[0]?.[0], 'FunctionUrl'] } });
  });

  it.each(['workspaces', 'keys'])('reads and writes %s', (name) => {
    const actions = actionsOnTable(t(), stage, name);
    for (const a of ['dynamodb:GetItem', 'dynamodb:Query', ...WRITES]) expect(actions).toContain(a);
  });

  it.each(['ledger', 'usage', 'rollups', 'catalog'])('only reads %s', (name) => {
    expect(actionsOnTable(t(), stage, name)).toEqual(READS);
  });

  it('appends to the audit trail and cannot read, change or delete it', () => {
    expect(actionsOnTable(t(), stage, 'audit')).toEqual(['dynamodb:PutItem']);
  });

  // Holds are requests' open rows in usage, which it only reads (above).
  it('cannot manage tables or use a wildcard action', () => {
    for (const s of statements(t())) {
      expect(s.Effect).toBe('Allow');
      for (const a of actionsOf(s)) {
        expect(a).not.toMatch(/\*/);
        expect(a).not.toMatch(/^dynamodb:(Create|Delete|Update)Table/);
      }
    }
  });

  it('reaches only its log group, the tables and the BYOK secrets', () => {
    const services = new Set(statements(t()).flatMap(actionsOf).map((a) => a.split(':')[0]));
    expect([...services].sort()).toEqual(['dynamodb', 'logs', 'secretsmanager']);
  });

  it('sets and removes secrets under the BYOK prefix only, and never reads one', () => {
    const secrets = statements(t()).filter((s) => actionsOf(s).some((a) => a.startsWith('secretsmanager:')));
    expect(secrets).toHaveLength(1);
    expect(actionsOf(secrets[0] as Statement).sort()).toEqual([
      'secretsmanager:CreateSecret',
      'secretsmanager:DeleteSecret',
      'secretsmanager:PutSecretValue',
      'secretsmanager:RestoreSecret',
    ]);
    expect(JSON.stringify(secrets[0]?.Resource)).toContain(`secret:sluice/${stage}/byok/*`);
  });

  it('alarms on the function\'s errors, to the stage\'s topic', () => {
    const topicId = Object.keys(resources(t(), 'AWS::SNS::Topic'))[0];
    t().hasResourceProperties('AWS::CloudWatch::Alarm', {
      AlarmName: `Sluice-${stage}-ConsoleErrors`,
      MetricName: 'Errors',
      Namespace: 'AWS/Lambda',
      Dimensions: [{ Name: 'FunctionName', Value: { Ref: consoleFnId(t()) } }],
      Threshold: settings.errorsPer5Min,
      Period: 300,
      TreatMissingData: 'notBreaching',
      AlarmActions: [{ Ref: topicId }],
      OKActions: [{ Ref: topicId }],
    });
  });

  it('has zero unacknowledged cdk-nag findings with the console in the stack (AwsSolutions and Serverless)', () => {
    const { stack } = build(stage, origin);
    for (const pack of nagPacks()) {
      const report = pack.validateScope(stack);
      expect(report.violations.map((v) => `${v.ruleName}: ${v.violatingResources.map((r) => JSON.stringify(r)).join(', ')}`)).toEqual([]);
    }
  });
});

describe('console origin', () => {
  it('comes from the deploy, and an empty one means none', () => {
    expect(stageSettings('prod', { consoleOrigin: ORIGIN }).console.origin).toBe(ORIGIN);
    expect(stageSettings('prod').console.origin).toBeUndefined();
    expect(stageSettings('prod', { consoleOrigin: '' }).console.origin).toBeUndefined();
  });

  it.each([
    ['plain http', 'http://console.example.com'],
    ['http on localhost (local mode needs no CDK)', 'http://localhost:8790'],
    ['a path', 'https://console.example.com/console'],
    ['a trailing slash', 'https://console.example.com/'],
    ['an IP address (no RP ID)', 'https://192.0.2.10'],
    ['upper case', 'https://Console.example.com'],
    ['user info', 'https://ops@console.example.com'],
    ['not a URL', 'console.example.com'],
  ])('refuses %s', (_label, origin) => {
    expect(() => stageSettings('stg', { consoleOrigin: origin })).toThrow(StageConfigError);
  });

  it('accepts a host with a port', () => {
    expect(stageSettings('dev', { consoleOrigin: 'https://console.example.com:8443' }).console.origin).toBe('https://console.example.com:8443');
  });
});

describe('console stage settings', () => {
  const dev = stageSettings('dev');
  it.each(STAGE_NAMES)('%s has valid console settings', (name) => {
    const settings = stageSettings(name).console;
    expect(settings.memoryMb).toBeGreaterThanOrEqual(128);
    expect(settings.sessionMinutes).toBeGreaterThanOrEqual(5);
    expect(settings.errorsPer5Min).toBeGreaterThanOrEqual(1);
  });

  it.each([
    ['memory below Lambda\'s minimum', { ...dev.console, memoryMb: 64 }],
    ['a session shorter than 5 minutes', { ...dev.console, sessionMinutes: 1 }],
    ['a session longer than a week', { ...dev.console, sessionMinutes: 7 * 24 * 60 + 1 }],
    ['a zero error threshold', { ...dev.console, errorsPer5Min: 0 }],
  ])('rejects %s', (_label, bad) => {
    expect(() => validateStageSettings({ ...dev, console: bad })).toThrow(StageConfigError);
  });

  it('keeps prod\'s sessions no longer than the other stages\' and alarms on its first error', () => {
    const prod = stageSettings('prod').console;
    for (const name of STAGE_NAMES) expect(prod.sessionMinutes).toBeLessThanOrEqual(stageSettings(name).console.sessionMinutes);
    expect(prod.errorsPer5Min).toBe(1);
  });
});
