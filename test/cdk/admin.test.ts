/**
 * The management API's construct: a Function URL with IAM auth, and a role that reaches only what
 * the operator's use cases need.
 */
import { Template } from 'aws-cdk-lib/assertions';
import type { ProviderKeySource } from '../../lib/provider-file';
import { SluiceStack } from '../../lib/sluice-stack';
import { stageSettings } from '../../lib/stage';
import { cdkApps, NO_BUNDLING } from '../support/cdk-app';

const newApp = cdkApps();

const PROVIDERS: readonly ProviderKeySource[] = [{ name: 'openai', keySource: { secretName: 'sluice/{stage}/providers/openai', env: 'OPENAI_API_KEY' } }];

interface Resource {
  readonly Properties: Record<string, unknown>;
}
interface Statement {
  readonly Action: string | string[];
  readonly Resource: unknown;
}

// Without bundling the functions' code: nothing here reads it, and esbuild costs seconds
// (test/cdk/sluice-stack.test.ts bundles the dev stage's functions).
const template = Template.fromStack(
  new SluiceStack(newApp(NO_BUNDLING), 'Sluice-dev', { stage: stageSettings('dev'), providers: PROVIDERS }),
);
const resources = (type: string): Record<string, Resource> => template.findResources(type) as Record<string, Resource>;

const adminFnId = ((): string => {
  const ids = Object.entries(resources('AWS::Lambda::Function'))
    .filter(([, r]) => String(r.Properties['Description']).includes('management API'))
    .map(([id]) => id);
  if (ids.length !== 1) throw new Error(`expected one management function, found ${ids.length}`);
  return ids[0] as string;
})();

const tableId = (name: string): string => {
  const ids = Object.keys(template.findResources('AWS::DynamoDB::Table', { Properties: { TableName: `sluice-dev-${name}` } }));
  if (ids.length !== 1) throw new Error(`no table ${name}`);
  return ids[0] as string;
};

/** Every statement of the management function's role. */
function statements(): Statement[] {
  const fn = resources('AWS::Lambda::Function')[adminFnId] as Resource;
  const roleId = (fn.Properties['Role'] as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
  return Object.values(resources('AWS::IAM::Policy'))
    .filter((p) => JSON.stringify(p.Properties['Roles']) === JSON.stringify([{ Ref: roleId }]))
    .flatMap((p) => (p.Properties['PolicyDocument'] as { Statement: Statement[] }).Statement);
}
const actionsOf = (s: Statement): string[] => (Array.isArray(s.Action) ? s.Action : [s.Action]);
const actionsOnTable = (name: string): Set<string> =>
  new Set(statements().filter((s) => JSON.stringify(s.Resource).includes(`"${tableId(name)}"`)).flatMap(actionsOf));
const WRITES = ['dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem', 'dynamodb:BatchWriteItem'];

describe('management API', () => {
  it('is reached through a Function URL with AWS_IAM auth, and its URL is an output', () => {
    template.hasResourceProperties('AWS::Lambda::Url', { AuthType: 'AWS_IAM', TargetFunctionArn: { 'Fn::GetAtt': [adminFnId, 'Arn'] } });
    const urlId = Object.keys(template.findResources('AWS::Lambda::Url', { Properties: { AuthType: 'AWS_IAM' } }))[0] as string;
    template.hasOutput('AdminUrl', { Value: { 'Fn::GetAtt': [urlId, 'FunctionUrl'] } });
  });

  it('grants nobody public access to the URL', () => {
    const permissions = Object.values(resources('AWS::Lambda::Permission')).filter(
      (p) => JSON.stringify(p.Properties['FunctionName']).includes(adminFnId) && p.Properties['Action'] === 'lambda:InvokeFunctionUrl',
    );
    for (const p of permissions) expect(p.Properties['Principal']).not.toBe('*');
  });

  it.each([
    ['workspaces', true],
    ['keys', true],
    ['ledger', true],
    ['catalog', true],
  ])('reads and writes %s', (name) => {
    const actions = actionsOnTable(name as string);
    for (const a of ['dynamodb:GetItem', 'dynamodb:Query', 'dynamodb:PutItem', 'dynamodb:UpdateItem']) expect(actions).toContain(a);
  });

  it.each(['usage', 'rollups'])('only reads %s', (name) => {
    const actions = actionsOnTable(name);
    expect(actions).toContain('dynamodb:Query');
    for (const a of WRITES) expect(actions).not.toContain(a);
  });

  it('appends to the audit table and never updates or deletes it', () => {
    const actions = actionsOnTable('audit');
    expect([...actions].sort()).toEqual(['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:Query']);
  });

  // Holds are requests' open rows in usage, which it only reads (above).
  it('cannot manage tables or use wildcards', () => {
    for (const s of statements()) {
      for (const a of actionsOf(s)) {
        expect(a).not.toMatch(/\*$/);
        expect(a).not.toMatch(/^dynamodb:(Create|Delete|Update)Table/);
      }
    }
  });

  it('manages secrets only under the BYOK and added-providers prefixes and never reads a provider secret', () => {
    const secretStatements = statements().filter((s) => actionsOf(s).some((a) => a.startsWith('secretsmanager:')));
    expect(secretStatements.length).toBeGreaterThan(0);
    for (const s of secretStatements) {
      const resources = (Array.isArray(s.Resource) ? s.Resource : [s.Resource]).map((r: unknown) => JSON.stringify(r));
      expect(resources).toHaveLength(2);
      expect(resources[0]).toContain('secret:sluice/dev/byok/*');
      expect(resources[1]).toContain('secret:sluice/dev/added-providers/*');
      expect(actionsOf(s)).not.toContain('secretsmanager:GetSecretValue');
    }
  });
});
