/**
 * Bring your own key: the provider key goes to the secret store (a 0600 file locally, Secrets
 * Manager when deployed) and only the secret's name reaches DynamoDB.
 */
import {
  CreateSecretCommand,
  DeleteSecretCommand,
  GetSecretValueCommand,
  InvalidRequestException,
  PutSecretValueCommand,
  ResourceNotFoundException,
  RestoreSecretCommand,
  SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import { GetCommand, ScanCommand } from '@aws-sdk/lib-dynamodb';
import { mockClient } from 'aws-sdk-client-mock';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { WorkspaceRecord } from '../../lambdas/shared/records';
import { ALL_TABLES, tableName } from '../../lambdas/shared/schema';
import type { AdminContext } from '../../local/ops';
import {
  ByokNotSetError,
  createWorkspace,
  importCatalog,
  LocalFileSecretStore,
  ProviderNotFoundError,
  removeByokKey,
  SecretsManagerStore,
  SecretStoreMissingError,
  setByokKey,
  showWorkspace,
  ValidationError,
  WorkspaceNotFoundError,
} from '../../local/ops';
import { testTables, type TestTables } from '../support/dynamo';
import { scratchDirs } from '../support/scratch';

const scratch = scratchDirs();

const OPENAI_KEY = 'sk-proj-TESTbyokKEY0123456789abcdefghijklmnop';
const GROQ_KEY = 'gsk_TESTbyokGROQ0123456789';

let t: TestTables;
let ctx: AdminContext;
let store: LocalFileSecretStore;

beforeAll(async () => {
  t = await testTables();
  store = new LocalFileSecretStore(join(scratch('sluice-secrets-'), '.sluice', 'secrets.json'));
  ctx = { doc: t.doc, tablePrefix: t.prefix, stage: 'local', secrets: store };
  await importCatalog(ctx);
});

afterAll(() => t.client.destroy());

async function everything(): Promise<string> {
  const all = await Promise.all(
    ALL_TABLES.map(async (s) => (await t.doc.send(new ScanCommand({ TableName: tableName(t.prefix, s.name) }))).Items ?? []),
  );
  return JSON.stringify(all);
}

async function meta(workspaceId: string): Promise<WorkspaceRecord> {
  const out = await t.doc.send(new GetCommand({ TableName: `${t.prefix}workspaces`, Key: { pk: workspaceId, sk: 'META' }, ConsistentRead: true }));
  return out.Item as WorkspaceRecord;
}

describe('BYOK through the local file store', () => {
  it('keeps the key in a 0600 file and only its secret name on the workspace', async () => {
    const { workspaceId } = await createWorkspace(ctx, { name: 'Byok' });
    await expect(setByokKey(ctx, { workspaceId, provider: 'openai', apiKey: `${OPENAI_KEY}\n` })).resolves.toEqual({
      provider: 'openai',
      secretName: `sluice/local/byok/${workspaceId}/openai`,
    });
    expect(statSync(store.path).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(store.path, 'utf8'))).toEqual({ [`sluice/local/byok/${workspaceId}/openai`]: OPENAI_KEY });
    expect((await meta(workspaceId)).byok).toEqual({ openai: `sluice/local/byok/${workspaceId}/openai` });

    // A second provider goes into the existing map; the first is untouched.
    await setByokKey(ctx, { workspaceId, provider: 'groq', apiKey: GROQ_KEY });
    expect((await meta(workspaceId)).byok).toEqual({
      openai: `sluice/local/byok/${workspaceId}/openai`,
      groq: `sluice/local/byok/${workspaceId}/groq`,
    });
    expect((await showWorkspace(ctx, { workspaceId })).byokProviders).toEqual(['groq', 'openai']);

    const dump = await everything();
    expect(dump).not.toContain(OPENAI_KEY);
    expect(dump).not.toContain(GROQ_KEY);

    // Setting again replaces the value under the same name.
    await setByokKey(ctx, { workspaceId, provider: 'openai', apiKey: 'sk-rotated' });
    await expect(store.get(`sluice/local/byok/${workspaceId}/openai`)).resolves.toBe('sk-rotated');
  });

  it('removes the name from the workspace and then the secret itself', async () => {
    const { workspaceId } = await createWorkspace(ctx, { name: 'ByokRemove' });
    await setByokKey(ctx, { workspaceId, provider: 'openai', apiKey: OPENAI_KEY });
    await setByokKey(ctx, { workspaceId, provider: 'groq', apiKey: GROQ_KEY });
    await removeByokKey(ctx, { workspaceId, provider: 'openai' });
    expect((await meta(workspaceId)).byok).toEqual({ groq: `sluice/local/byok/${workspaceId}/groq` });
    await expect(store.get(`sluice/local/byok/${workspaceId}/openai`)).resolves.toBeUndefined();
    await expect(store.get(`sluice/local/byok/${workspaceId}/groq`)).resolves.toBe(GROQ_KEY);
    expect(statSync(store.path).mode & 0o777).toBe(0o600);
    await expect(removeByokKey(ctx, { workspaceId, provider: 'openai' })).rejects.toBeInstanceOf(ByokNotSetError);
  });

  it('refuses an uncatalogued provider, a key with spaces, an unknown workspace, and a context without a store', async () => {
    const { workspaceId } = await createWorkspace(ctx, { name: 'ByokRefusals' });
    await expect(setByokKey(ctx, { workspaceId, provider: 'nobody', apiKey: 'k' })).rejects.toBeInstanceOf(ProviderNotFoundError);
    await expect(setByokKey(ctx, { workspaceId, provider: 'openai', apiKey: 'two keys' })).rejects.toBeInstanceOf(ValidationError);
    await expect(setByokKey(ctx, { workspaceId, provider: 'openai', apiKey: '   ' })).rejects.toBeInstanceOf(ValidationError);
    await expect(setByokKey(ctx, { workspaceId: 'ws_gone', provider: 'openai', apiKey: 'k' })).rejects.toBeInstanceOf(WorkspaceNotFoundError);
    const { secrets: _none, ...bare } = ctx;
    await expect(setByokKey(bare, { workspaceId, provider: 'openai', apiKey: 'k' })).rejects.toBeInstanceOf(SecretStoreMissingError);
    expect((await meta(workspaceId)).byok).toBeUndefined();
  });
});

describe('SecretsManagerStore', () => {
  const sm = mockClient(SecretsManagerClient);
  const client = new SecretsManagerClient({ region: 'eu-west-1' });
  const secrets = new SecretsManagerStore(client);
  const name = 'sluice/prod/byok/ws_1/openai';

  beforeEach(() => sm.reset());
  afterAll(() => sm.restore());

  it('puts a new value on an existing secret', async () => {
    sm.on(PutSecretValueCommand).resolves({});
    await secrets.put(name, 'v1');
    expect(sm.commandCalls(PutSecretValueCommand)[0]?.args[0].input).toEqual({ SecretId: name, SecretString: 'v1' });
    expect(sm.commandCalls(CreateSecretCommand)).toHaveLength(0);
  });

  it('creates the secret when it does not exist yet', async () => {
    sm.on(PutSecretValueCommand).rejects(new ResourceNotFoundException({ message: 'not found', $metadata: {} }));
    sm.on(CreateSecretCommand).resolves({});
    await secrets.put(name, 'v1');
    expect(sm.commandCalls(CreateSecretCommand)[0]?.args[0].input).toEqual({ Name: name, SecretString: 'v1' });
  });

  it('restores a secret scheduled for deletion before putting the new value', async () => {
    sm.on(PutSecretValueCommand)
      .rejectsOnce(new InvalidRequestException({ message: 'You can\'t perform this operation on the secret because it was marked for deletion.', $metadata: {} }))
      .resolves({});
    sm.on(RestoreSecretCommand).resolves({});
    await secrets.put(name, 'v2');
    expect(sm.commandCalls(RestoreSecretCommand)[0]?.args[0].input).toEqual({ SecretId: name });
    expect(sm.commandCalls(PutSecretValueCommand)).toHaveLength(2);
  });

  it('deletes with a recovery window and treats a missing secret as already gone', async () => {
    sm.on(DeleteSecretCommand).resolvesOnce({}).rejects(new ResourceNotFoundException({ message: 'gone', $metadata: {} }));
    await secrets.delete(name);
    await secrets.delete(name);
    expect(sm.commandCalls(DeleteSecretCommand)[0]?.args[0].input).toEqual({ SecretId: name, RecoveryWindowInDays: 7 });
  });

  it('reads a value, and undefined for a missing secret; other errors pass through', async () => {
    sm.on(GetSecretValueCommand, { SecretId: name }).resolves({ SecretString: 'v1' });
    sm.on(GetSecretValueCommand, { SecretId: 'missing' }).rejects(new ResourceNotFoundException({ message: 'x', $metadata: {} }));
    sm.on(GetSecretValueCommand, { SecretId: 'denied' }).rejects(new Error('AccessDenied'));
    await expect(secrets.get(name)).resolves.toBe('v1');
    await expect(secrets.get('missing')).resolves.toBeUndefined();
    await expect(secrets.get('denied')).rejects.toThrow('AccessDenied');
  });
});
