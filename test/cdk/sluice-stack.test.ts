import { App } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { ALL_TABLES, TABLES, type TableName } from '../../lambdas/shared/schema';
import { USAGE_STREAM_FILTERS, USAGE_STREAM_MAPPING } from '../../lambdas/aggregator/mapping';
import { SLUICE_METRICS } from '../../lib/dashboard';
import type { ProviderKeySource } from '../../lib/provider-file';
import { SluiceStack } from '../../lib/sluice-stack';
import { stageSettings, type StageName } from '../../lib/stage';
import { DEPLOYED_NODE_MAJOR } from '../../bench/args';
import { scratchDirs } from '../support/scratch';

// Passed explicitly so the tests do not depend on whether config/providers.json exists yet.
const PROVIDERS: readonly ProviderKeySource[] = [
  { name: 'openai', keySource: { secretName: 'sluice/{stage}/providers/openai', env: 'OPENAI_API_KEY' } },
  { name: 'openai-batch', keySource: { secretName: 'sluice/{stage}/providers/openai', env: 'OPENAI_API_KEY' } },
  { name: 'local', keySource: 'none' },
];

interface Resource {
  readonly Type: string;
  readonly Properties: Record<string, unknown>;
  readonly DeletionPolicy?: string;
  readonly UpdateReplacePolicy?: string;
}
interface Statement {
  readonly Effect: string;
  readonly Action: string | string[];
  readonly Resource: unknown;
}

// One synthesis per stage for the whole file: bundling makes each one cost seconds. Every stage's
// app writes to one assembly folder, so CDK's own asset cache (keyed by the folder, the source and
// the bundling options) bundles a function once when its options are the same in every stage, as
// it would for two stages in one app; a stage whose options differ is bundled again.
const outdir = scratchDirs()('sluice-stack-test-');
function synth(stage: StageName): Template {
  const app = new App({ outdir });
  const stack = new SluiceStack(app, `Sluice-${stage}`, { stage: stageSettings(stage), providers: PROVIDERS });
  return Template.fromStack(stack);
}
const templates: Partial<Record<StageName, Template>> = {};
function template(stage: StageName): Template {
  const t = templates[stage] ?? synth(stage);
  templates[stage] = t;
  return t;
}

function resources(t: Template, type: string): Record<string, Resource> {
  return t.findResources(type) as Record<string, Resource>;
}
function onlyId(found: Record<string, Resource>, what: string): string {
  const ids = Object.keys(found);
  if (ids.length !== 1) throw new Error(`expected one ${what}, found ${ids.length}`);
  return ids[0];
}
function tableId(t: Template, name: TableName, stage: StageName): string {
  return onlyId(t.findResources('AWS::DynamoDB::Table', { Properties: { TableName: `sluice-${stage}-${name}` } }) as Record<string, Resource>, `table ${name}`);
}
function functionId(t: Template, role: 'gateway' | 'aggregator' | 'sweeper'): string {
  const found = Object.entries(resources(t, 'AWS::Lambda::Function')).filter(([, r]) =>
    String(r.Properties.Description).includes(
      { gateway: 'gateway', aggregator: 'rollups', sweeper: 'settles holds' }[role],
    ),
  );
  return onlyId(Object.fromEntries(found), `${role} function`);
}
/** Every statement of the policies attached to a function's role. */
function statementsOf(t: Template, fnId: string): Statement[] {
  const fn = resources(t, 'AWS::Lambda::Function')[fnId];
  const roleId = (fn.Properties.Role as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
  return Object.values(resources(t, 'AWS::IAM::Policy'))
    .filter((p) => JSON.stringify(p.Properties.Roles) === JSON.stringify([{ Ref: roleId }]))
    .flatMap((p) => (p.Properties.PolicyDocument as { Statement: Statement[] }).Statement);
}
const actionsOf = (s: Statement): string[] => (Array.isArray(s.Action) ? s.Action : [s.Action]);
/** Actions a role may take on a table (its ARN or its indexes). */
function actionsOnTable(statements: Statement[], tableLogicalId: string): Set<string> {
  return new Set(
    statements.filter((s) => JSON.stringify(s.Resource).includes(`"${tableLogicalId}"`)).flatMap(actionsOf),
  );
}
const WRITE_ACTIONS = ['dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem', 'dynamodb:BatchWriteItem'];

describe.each(['dev', 'prod'] as const)('Sluice-%s', (stage) => {
  const t = (): Template => template(stage);

  it('describes and tags the stack', () => {
    const json = t().toJSON() as { Description?: string };
    expect(json.Description).toMatch(new RegExp(`Sluice \\(${stage}\\)`));
    t().hasResourceProperties('AWS::DynamoDB::Table', {
      Tags: Match.arrayWith([{ Key: 'Project', Value: 'Sluice' }, { Key: 'Stage', Value: stage }]),
    });
  });

  describe('gateway', () => {
    it('is reached through a streaming Function URL without IAM auth', () => {
      // The management API's URL has IAM auth (test/cdk/admin.test.ts); the only other URL without
      // it is the console's, where people sign in with passkeys (test/cdk/console.test.ts).
      expect(Object.keys(t().findResources('AWS::Lambda::Url', { Properties: { AuthType: 'NONE' } }))).toHaveLength(2);
      expect(Object.keys(t().findResources('AWS::Lambda::Url', { Properties: { AuthType: 'NONE', InvokeMode: 'RESPONSE_STREAM' } }))).toHaveLength(1);
      t().hasResourceProperties('AWS::Lambda::Url', {
        AuthType: 'NONE',
        InvokeMode: 'RESPONSE_STREAM',
        TargetFunctionArn: { 'Fn::GetAtt': [functionId(t(), 'gateway'), 'Arn'] },
      });
    });

    it('outputs the URL', () => {
      const urlId = onlyId(
        t().findResources('AWS::Lambda::Url', { Properties: { TargetFunctionArn: { 'Fn::GetAtt': [functionId(t(), 'gateway'), 'Arn'] } } }) as Record<string, Resource>,
        'function URL',
      );
      t().hasOutput('GatewayUrl', { Value: { 'Fn::GetAtt': [urlId, 'FunctionUrl'] } });
    });

    it('runs pinned nodejs22.x on arm64 with a timeout above the 540 s request limit', () => {
      const fn = resources(t(), 'AWS::Lambda::Function')[functionId(t(), 'gateway')];
      expect(fn.Properties).toMatchObject({ Runtime: 'nodejs22.x', Architectures: ['arm64'] });
      expect(fn.Properties.Timeout).toBeGreaterThan(540);
      expect(fn.Properties.MemorySize).toBe(stageSettings(stage).gatewayMemoryMb);
    });

    it('gets the stage configuration through the environment', () => {
      const fn = resources(t(), 'AWS::Lambda::Function')[functionId(t(), 'gateway')];
      expect(fn.Properties.Environment).toEqual({
        Variables: {
          SLUICE_STAGE: stage,
          SLUICE_TABLE_PREFIX: `sluice-${stage}-`,
          SLUICE_KEY_RATE_PER_MINUTE: String(stageSettings(stage).keyRatePerMinute),
          SLUICE_SECRET_SOURCE: 'secrets-manager',
          SLUICE_REQUEST_LIMIT_MS: '540000',
          SLUICE_HOLD_GRACE_MS: String(stageSettings(stage).holdGraceMs),
          SLUICE_USAGE_RETENTION_DAYS: String(stageSettings(stage).usageRetentionDays),
          NODE_OPTIONS: '--enable-source-maps',
        },
      });
    });

    it('has no wildcard or table-management DynamoDB actions', () => {
      const actions = statementsOf(t(), functionId(t(), 'gateway')).flatMap(actionsOf);
      expect(actions.length).toBeGreaterThan(0);
      for (const forbidden of ['*', 'dynamodb:*', 'dynamodb:DeleteTable', 'dynamodb:CreateTable', 'dynamodb:UpdateTable']) {
        expect(actions).not.toContain(forbidden);
      }
    });

    it('cannot touch the rollups table', () => {
      const statements = statementsOf(t(), functionId(t(), 'gateway'));
      expect(actionsOnTable(statements, tableId(t(), 'rollups', stage)).size).toBe(0);
    });

    it('only reads keys, workspaces and catalog, and writes ledger and usage (a request\'s row is its hold)', () => {
      const statements = statementsOf(t(), functionId(t(), 'gateway'));
      for (const name of ['keys', 'workspaces', 'catalog'] as const) {
        const actions = actionsOnTable(statements, tableId(t(), name, stage));
        expect(actions).toContain('dynamodb:GetItem');
        for (const write of WRITE_ACTIONS) expect(actions).not.toContain(write);
      }
      for (const name of ['ledger', 'usage'] as const) {
        const actions = actionsOnTable(statements, tableId(t(), name, stage));
        for (const needed of ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem', 'dynamodb:ConditionCheckItem']) {
          expect(actions).toContain(needed);
        }
      }
    });

    it('reads secrets only under the BYOK prefix and the provider secrets', () => {
      const statements = statementsOf(t(), functionId(t(), 'gateway')).filter((s) =>
        actionsOf(s).some((a) => a.startsWith('secretsmanager:')),
      );
      const secretIds = Object.keys(resources(t(), 'AWS::SecretsManager::Secret'));
      const byok = statements.filter((s) => JSON.stringify(s.Resource).includes(':secret:sluice/'));
      expect(byok).toHaveLength(1);
      expect(actionsOf(byok[0])).toEqual(['secretsmanager:GetSecretValue']);
      expect(JSON.stringify(byok[0].Resource)).toMatch(new RegExp(`:secret:sluice/${stage}/byok/\\*"`));
      // The keys of providers added at run time, read under their own prefix only.
      expect(JSON.stringify(byok[0].Resource)).toMatch(new RegExp(`:secret:sluice/${stage}/added-providers/\\*"`));
      expect(byok[0].Resource).toHaveLength(2);
      for (const s of statements.filter((x) => x !== byok[0])) {
        expect(s.Resource).toEqual({ Ref: expect.stringMatching(new RegExp(`^(${secretIds.join('|')})$`)) });
        for (const a of actionsOf(s)) expect(['secretsmanager:GetSecretValue', 'secretsmanager:DescribeSecret']).toContain(a);
      }
      expect(JSON.stringify(statements)).not.toMatch(/"Resource":"\*"/);
    });
  });

  describe('tables', () => {
    it('builds one table per schema entry, named from the stage prefix', () => {
      t().resourceCountIs('AWS::DynamoDB::Table', ALL_TABLES.length);
      for (const schema of ALL_TABLES) {
        t().hasResourceProperties('AWS::DynamoDB::Table', {
          TableName: `sluice-${stage}-${schema.name}`,
          KeySchema: [
            { AttributeName: schema.partitionKey.name, KeyType: 'HASH' },
            ...(schema.sortKey ? [{ AttributeName: schema.sortKey.name, KeyType: 'RANGE' }] : []),
          ],
          TimeToLiveSpecification: schema.ttlAttribute
            ? { AttributeName: schema.ttlAttribute, Enabled: true }
            : Match.absent(),
          GlobalSecondaryIndexes: schema.indexes.length
            ? schema.indexes.map((i) => Match.objectLike({ IndexName: i.indexName, Projection: { ProjectionType: i.projection ?? 'ALL' } }))
            : Match.absent(),
        });
      }
    });

    it('makes every table on-demand, recoverable to a point in time and encrypted', () => {
      const tables = Object.values(resources(t(), 'AWS::DynamoDB::Table'));
      expect(tables).toHaveLength(ALL_TABLES.length);
      for (const table of tables) {
        expect(table.Properties).toMatchObject({
          BillingMode: 'PAY_PER_REQUEST',
          PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
          SSESpecification: { SSEEnabled: true },
        });
      }
    });

    it('streams NEW_IMAGE from the usage table and from no other', () => {
      t().hasResourceProperties('AWS::DynamoDB::Table', {
        TableName: `sluice-${stage}-usage`,
        StreamSpecification: { StreamViewType: 'NEW_IMAGE' },
      });
      const streaming = Object.values(resources(t(), 'AWS::DynamoDB::Table')).filter((r) => r.Properties.StreamSpecification);
      expect(streaming).toHaveLength(ALL_TABLES.filter((s) => s.stream).length);
      expect(TABLES.usage.stream).toBe(true);
    });

    it(stage === 'prod' ? 'retains and protects every table' : 'deletes unprotected tables with the stack', () => {
      for (const table of Object.values(resources(t(), 'AWS::DynamoDB::Table'))) {
        // Tables the schema marks `retain` (the audit trail) are kept in every stage.
        const retained = ALL_TABLES.some((s) => s.retain === true && table.Properties.TableName === `sluice-${stage}-${s.name}`);
        if (stage === 'prod' || retained) {
          expect(table.DeletionPolicy).toBe('Retain');
          expect(table.UpdateReplacePolicy).toBe('Retain');
          expect(table.Properties.DeletionProtectionEnabled).toBe(stage === 'prod');
        } else {
          expect(table.DeletionPolicy).toBe('Delete');
          expect(table.Properties.DeletionProtectionEnabled).toBe(false);
        }
      }
    });
  });

  describe('provider secrets', () => {
    it('creates one empty secret per distinct provider key, named for the stage', () => {
      t().resourceCountIs('AWS::SecretsManager::Secret', 1);
      t().hasResource('AWS::SecretsManager::Secret', {
        Properties: {
          Name: `sluice/${stage}/providers/openai`,
          SecretString: Match.absent(),
          GenerateSecretString: Match.absent(),
        },
        DeletionPolicy: stage === 'prod' ? 'Retain' : 'Delete',
      });
    });
  });

  describe('aggregator', () => {
    it('consumes the usage stream with bisection, bounded retries, partial failures and a DLQ, batched and filtered to settlements', () => {
      const queueId = onlyId(resources(t(), 'AWS::SQS::Queue'), 'queue');
      t().resourceCountIs('AWS::Lambda::EventSourceMapping', 1);
      t().hasResourceProperties('AWS::Lambda::EventSourceMapping', {
        FunctionName: { Ref: functionId(t(), 'aggregator') },
        EventSourceArn: { 'Fn::GetAtt': [tableId(t(), 'usage', stage), 'StreamArn'] },
        StartingPosition: 'TRIM_HORIZON',
        BatchSize: USAGE_STREAM_MAPPING.batchSize,
        MaximumBatchingWindowInSeconds: USAGE_STREAM_MAPPING.maxBatchingWindowSeconds,
        FilterCriteria: { Filters: USAGE_STREAM_FILTERS.map((p) => ({ Pattern: JSON.stringify(p) })) },
        BisectBatchOnFunctionError: true,
        MaximumRetryAttempts: 5,
        MaximumRecordAgeInSeconds: Match.anyValue(),
        FunctionResponseTypes: ['ReportBatchItemFailures'],
        DestinationConfig: { OnFailure: { Destination: { 'Fn::GetAtt': [queueId, 'Arn'] } } },
      });
    });

    it('writes rollups and no other table', () => {
      const statements = statementsOf(t(), functionId(t(), 'aggregator'));
      expect(actionsOnTable(statements, tableId(t(), 'rollups', stage))).toContain('dynamodb:PutItem');
      for (const schema of ALL_TABLES.filter((s) => s.name !== 'rollups' && s.name !== 'usage')) {
        expect(actionsOnTable(statements, tableId(t(), schema.name, stage)).size).toBe(0);
      }
      // Usage: its stream only, never its items.
      const usage = actionsOnTable(statements, tableId(t(), 'usage', stage));
      for (const write of [...WRITE_ACTIONS, 'dynamodb:GetItem']) expect(usage).not.toContain(write);
    });
  });

  describe('sweeper', () => {
    it('runs every minute', () => {
      t().hasResourceProperties('AWS::Events::Rule', {
        ScheduleExpression: 'rate(1 minute)',
        Targets: [Match.objectLike({ Arn: { 'Fn::GetAtt': [functionId(t(), 'sweeper'), 'Arn'] } })],
      });
    });

    it('is not retried by Lambda, since the next tick does the same work', () => {
      t().hasResourceProperties('AWS::Lambda::EventInvokeConfig', {
        FunctionName: { Ref: functionId(t(), 'sweeper') },
        MaximumRetryAttempts: 0,
      });
    });

    it('writes ledger and usage (a hold is a request\'s open row), and touches neither catalog nor rollups', () => {
      const statements = statementsOf(t(), functionId(t(), 'sweeper'));
      for (const name of ['ledger', 'usage'] as const) {
        expect(actionsOnTable(statements, tableId(t(), name, stage))).toContain('dynamodb:UpdateItem');
      }
      expect(actionsOnTable(statements, tableId(t(), 'catalog', stage)).size).toBe(0);
      expect(actionsOnTable(statements, tableId(t(), 'rollups', stage)).size).toBe(0);
    });
  });

  it('imports the catalog from config/ on deploy, re-running only when the files change', () => {
    const { createHash } = require('node:crypto') as typeof import('node:crypto');
    const { readFileSync } = require('node:fs') as typeof import('node:fs');
    const hash = createHash('sha256');
    for (const f of ['config/providers.json', 'config/catalog.json']) hash.update(readFileSync(f));
    t().hasResourceProperties('Custom::SluiceCatalog', { CatalogHash: hash.digest('hex') });
    const importFn = Object.entries(resources(t(), 'AWS::Lambda::Function')).find(([, r]) => String(r.Properties.Description).includes('import the catalog'));
    expect(importFn).toBeDefined();
    const statements = statementsOf(t(), importFn![0]);
    expect(actionsOnTable(statements, tableId(t(), 'catalog', stage))).toContain('dynamodb:BatchWriteItem');
    for (const name of ['keys', 'workspaces', 'ledger', 'usage', 'rollups'] as const) {
      expect(actionsOnTable(statements, tableId(t(), name, stage)).size).toBe(0);
    }
  });

  it('pins every function to nodejs22.x on arm64 with source maps on', () => {
    const fns = Object.values(resources(t(), 'AWS::Lambda::Function'));
    // Gateway, aggregator, sweeper, the deploy-time catalog import, the low-credit notifier, the
    // management API and the workspace console.
    expect(fns).toHaveLength(7);
    for (const fn of fns) {
      expect(fn.Properties).toMatchObject({
        Runtime: 'nodejs22.x',
        Architectures: ['arm64'],
        Environment: { Variables: expect.objectContaining({ NODE_OPTIONS: '--enable-source-maps', SLUICE_STAGE: stage }) },
      });
    }
    // The bench compares the gateway's Node with this pin (`--gateway-node`, docs/bench.md).
    expect(`nodejs${DEPLOYED_NODE_MAJOR}.x`).toBe('nodejs22.x');
  });

  it('has one dashboard for the stage, graphing every metric the code emits', () => {
    t().resourceCountIs('AWS::CloudWatch::Dashboard', 1);
    const [dashboard] = Object.values(resources(t(), 'AWS::CloudWatch::Dashboard'));
    expect(dashboard.Properties.DashboardName).toBe(`Sluice-${stage}`);
    const body = JSON.stringify(dashboard.Properties.DashboardBody);
    for (const metric of Object.values(SLUICE_METRICS)) expect(body).toContain(metric);
    // Refusal codes and providers are found by SEARCH, exact on this stage only.
    expect(body).toMatch(new RegExp(`SEARCH\\('\\{Sluice,Code,Stage\\} MetricName=[\\\\"]+Refusals[\\\\"]+ Stage=[\\\\"]+${stage}[\\\\"]+'`));
    expect(body).toMatch(/SEARCH\('\{Sluice,Provider,Stage\} MetricName=[\\"]+UpstreamLatencyMs/);
    expect(body).toContain('IteratorAge');
    expect(body).toContain('ApproximateNumberOfMessagesVisible');
  });
});
