/**
 * Issue 13, part 1: a provider and a model added at run time, with the `sluice` CLI (a child
 * process, through the management API), serve requests through the official `openai` client
 * without restarting anything. The provider is a SECOND simulator on its own port that wants its
 * key in an `api-key` header (as Azure does) and refuses a request without `max_tokens`. Then
 * `catalog import` without `--prune` removes nothing and lists what it would remove; with
 * `--prune` it removes exactly that. The key never reaches a table, the audit or the CLI's output.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { startSimulator, type Simulator } from '../../local/simulator';
import { tableName } from '../../lambdas/shared/schema';
import { startTestAdmin, type TestAdmin } from '../support/admin';
import { chargeOn, chatCounts, expectApiError, rowOf } from '../support/e2e';
import { expectInvariant, startStack, type TestStack } from '../support/stack';

jest.setTimeout(180_000);

const BIN = resolve(__dirname, '../../bin/sluice.js');
const SECOND_KEY = 'sk-second-4f1c2b9e7d';
const MODEL = 'second/sim-small';
/** The gateway's catalog cache here: short, but not zero, so "within the cache time" is exercised. */
const CATALOG_TTL_MS = 1_000;

let stack: TestStack;
let admin: TestAdmin;
let second: Simulator;
let secretsDir: string;

beforeAll(async () => {
  secretsDir = mkdtempSync(join(tmpdir(), 'sluice-providers-'));
  const secretsFile = join(secretsDir, 'secrets.json');
  // The gateway and the management API share the local secret file, as under `npm start`.
  stack = await startStack({ env: { SLUICE_LOCAL_SECRETS_FILE: secretsFile, SLUICE_CATALOG_CACHE_TTL_MS: String(CATALOG_TTL_MS) } });
  admin = await startTestAdmin(stack.tables, { secretsFile });
  second = await startSimulator({ acceptedKeys: [SECOND_KEY], authHeader: 'api-key', requireMaxTokens: true });
});

afterAll(async () => {
  await second?.close();
  await admin?.close();
  await stack?.close();
  rmSync(secretsDir, { recursive: true, force: true });
});

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function sluice(args: readonly string[], input = '', env: NodeJS.ProcessEnv = admin.env): Promise<Run> {
  return new Promise((done, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => done({ code, stdout, stderr }));
    child.stdin.end(input);
  });
}

async function ok<T>(args: readonly string[], input?: string): Promise<T> {
  const run = await sluice([...args, '--json'], input);
  if (run.code !== 0) throw new Error(`sluice ${args.join(' ')} exited ${String(run.code)}: ${run.stderr}`);
  expect(run.stdout).not.toContain(SECOND_KEY);
  return JSON.parse(run.stdout) as T;
}

async function refused(args: readonly string[], input?: string): Promise<string> {
  const run = await sluice([...args, '--json'], input);
  expect(run.code).toBe(1);
  expect(run.stderr.trimEnd().split('\n')).toHaveLength(1);
  return (JSON.parse(run.stdout) as { error: { code: string } }).error.code;
}

/** Retries a call until it resolves: a change reaches the gateway within its catalog cache time. */
async function eventually<T>(call: () => Promise<T>, withinMs = CATALOG_TTL_MS + 9_000): Promise<T> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    try {
      return await call();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

async function catalogText(): Promise<string> {
  const out = await stack.tables.doc.send(new ScanCommand({ TableName: tableName(stack.tables.prefix, 'catalog'), ConsistentRead: true }));
  return JSON.stringify(out.Items ?? []);
}

const ask = { model: MODEL, messages: [{ role: 'user' as const, content: 'Hello' }] };

describe('a provider and a model added at run time', () => {
  it('are refused before they exist (the gateway has the catalog cached)', async () => {
    await expectApiError(stack.client().chat.completions.create(ask), 404, 'model_not_found');
  });

  it('refuses a base URL with a credential in it, or not http(s)://host[:port]/path, saying which part; nothing stored or audited', async () => {
    const auditBefore = await ok<{ entries: unknown[] }>(['audit', 'list', '--workspace', 'catalog']);
    const catalogBefore = await catalogText();
    const cases: [string, RegExp][] = [
      [`http://alice:s3cret@127.0.0.1:${new URL(second.url).port}/v1`, /must not carry a user name or password \(user:password@ before the host\)/],
      ['https://alice@api.example.com/v1', /must not carry a user name or password/],
      ['https://api.example.com/v1?api-key=s3cret', /must carry no query/],
      ['https://api.example.com:70000/v1', /the port "70000" is not a number from 1 to 65535/],
      ['https:api.example.com/v1', /\/\/ is missing after https:/],
    ];
    for (const [url, message] of cases) {
      const run = await sluice(['provider', 'add', 'second', '--base-url', url, '--json'], SECOND_KEY);
      expect(run.code).toBe(1);
      expect(JSON.parse(run.stdout)).toEqual({ error: { code: 'catalog_invalid', message: expect.stringMatching(/^--base-url /) } });
      expect(run.stderr).toMatch(message);
      expect(`${run.stdout}${run.stderr}`).not.toContain('s3cret');
      expect(`${run.stdout}${run.stderr}`).not.toContain('alice');
      // The management API decides on its own too, for any client (the console, a script).
      const api = await fetch(`${admin.url}/admin/v1/catalog/providers`, {
        method: 'POST',
        headers: { authorization: `Bearer ${admin.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'second', baseUrl: url, auth: 'bearer', apiKey: SECOND_KEY }),
      });
      const text = await api.text();
      expect(api.status).toBe(400);
      expect(JSON.parse(text)).toMatchObject({ error: { code: 'catalog_invalid', type: 'invalid_request_error', message: expect.stringMatching(message) } });
      expect(text).not.toContain('s3cret');
    }
    // The CLI refuses before it asks for the key or calls anything: here, a management API nobody serves.
    const nowhere = mkdtempSync(join(tmpdir(), 'sluice-nowhere-'));
    try {
      writeFileSync(join(nowhere, 'admin-token'), 'x'.repeat(43));
      writeFileSync(join(nowhere, 'local.json'), JSON.stringify({ adminUrl: 'http://127.0.0.1:9', adminTokenFile: join(nowhere, 'admin-token') }));
      const offline = await sluice(['provider', 'add', 'second', '--base-url', 'https://alice:s3cret@host/v1', '--json'], SECOND_KEY, { ...admin.env, SLUICE_LOCAL_STATE: join(nowhere, 'local.json') });
      expect((JSON.parse(offline.stdout) as { error: { code: string } }).error.code).toBe('catalog_invalid');
      const reached = await sluice(['provider', 'add', 'second', '--base-url', second.url, '--json'], SECOND_KEY, { ...admin.env, SLUICE_LOCAL_STATE: join(nowhere, 'local.json') });
      expect((JSON.parse(reached.stdout) as { error: { code: string } }).error.code).toBe('unreachable');
    } finally {
      rmSync(nowhere, { recursive: true, force: true });
    }
    expect(await catalogText()).toBe(catalogBefore);
    expect(await ok<{ entries: unknown[] }>(['audit', 'list', '--workspace', 'catalog'])).toEqual(auditBefore);
  });

  it('adds the provider: validated, its key from stdin to the secret store only', async () => {
    expect(await refused(['provider', 'add', 'second', '--base-url', 'ftp://127.0.0.1/v1'], SECOND_KEY)).toBe('catalog_invalid');
    expect(await refused(['provider', 'add', 'second', '--base-url', 'not a url'], SECOND_KEY)).toBe('catalog_invalid');
    expect(await refused(['provider', 'add', 'Second!', '--base-url', second.url], SECOND_KEY)).toBe('catalog_invalid');
    expect(await refused(['provider', 'add', 'second', '--base-url', second.url, '--auth', 'basic'], SECOND_KEY)).toBe('catalog_invalid');
    expect(await refused(['provider', 'add', 'second', '--base-url', second.url], '')).toBe('invalid_argument');
    expect(await refused(['provider', 'add', 'local', '--base-url', second.url], SECOND_KEY)).toBe('provider_exists');

    const added = await ok<{ provider: Record<string, unknown> }>(
      ['provider', 'add', 'second', '--base-url', `${second.url}/`, '--auth', 'api-key', '--requires-max-tokens', '--families', 'chat,responses', '--display-name', 'Second simulator'],
      `${SECOND_KEY}\n`,
    );
    expect(added.provider).toEqual({
      name: 'second',
      displayName: 'Second simulator',
      baseUrl: second.url,
      auth: { header: 'api-key', prefix: '' },
      requiresMaxTokens: true,
      streamUsageOnRequest: true,
      families: ['chat_completions', 'responses'],
      keySource: { secretName: 'sluice/{stage}/added-providers/second' },
    });
    expect(await refused(['provider', 'add', 'second', '--base-url', second.url], SECOND_KEY)).toBe('provider_exists');
    const secrets = JSON.parse(readFileSync(join(secretsDir, 'secrets.json'), 'utf8')) as Record<string, string>;
    expect(secrets['sluice/local/added-providers/second']).toBe(SECOND_KEY);
    expect(await catalogText()).not.toContain(SECOND_KEY);
  });

  it('adds the model: validated, prices per million tokens in major units', async () => {
    expect(await refused(['model', 'add', 'nope/sim-small', '--input-price', '0.10', '--output-price', '0.40'])).toBe('provider_not_found');
    expect(await refused(['model', 'add', MODEL, '--input-price', '0.1.0', '--output-price', '0.40'])).toBe('invalid_argument');
    expect(await refused(['model', 'add', MODEL, '--input-price', '-1', '--output-price', '0.40'])).toBe('invalid_argument');
    expect(await refused(['model', 'add', MODEL, '--input-price', '0.000001', '--output-price', '0.40'])).toBe('invalid_argument');
    expect(await refused(['model', 'add', MODEL, '--output-price', '0.40'])).toBe('invalid_argument');
    expect(await refused(['model', 'add', MODEL, '--input-price', '0.10', '--output-price', '0.40', '--cached-input-price', '0.20'])).toBe('catalog_invalid');
    expect(await refused(['model', 'add', MODEL, '--input-price', '0.10', '--output-price', '0.40', '--context', '1000', '--max-output', '4096'])).toBe('catalog_invalid');

    const added = await ok<{ model: Record<string, unknown> }>([
      'model', 'add', MODEL, '--input-price', '0.10', '--output-price', '$0.40', '--cached-input-price', 'USD 0.025', '--context', '128k', '--max-output', '4096',
    ]);
    expect(added.model).toMatchObject({
      id: MODEL,
      provider: 'second',
      providerModelId: 'sim-small',
      inputRateThousandths: 10_000,
      cachedInputRateThousandths: 2_500,
      outputRateThousandths: 40_000,
      currencyCode: 'USD',
      contextWindowTokens: 128_000,
      maxOutputTokens: 4096,
      endpointFamilies: ['chat_completions', 'responses'],
      status: 'served',
      capabilities: { audio: 'unknown', json_mode: 'unknown', streaming: 'unknown', tools: 'unknown', vision: 'unknown' },
    });
    expect(await refused(['model', 'add', MODEL, '--input-price', '0.10', '--output-price', '0.40'])).toBe('model_exists');
  });

  it('serves a request through the official client without a restart, on the provider\'s own terms', async () => {
    const before = await stack.balance();
    const { data, response } = await eventually(() => stack.client().chat.completions.create(ask).withResponse());
    expect(data.choices[0]?.message.content).toBeTruthy();
    expect(response.headers.get('x-sluice-served-by')).toBe(MODEL);
    // The second simulator got it with its key in its header, and the max_tokens it insists on.
    const call = second.recorded.at(-1);
    expect(call?.headers['api-key']).toBe(SECOND_KEY);
    expect(call?.headers['authorization']).toBeUndefined();
    expect(call?.json).toMatchObject({ model: 'sim-small', max_tokens: 4096 });
    expect(stack.sim.recorded.some((r) => (r.json as { model?: string } | undefined)?.model === 'sim-small' && r.headers['api-key'] !== undefined)).toBe(false);

    await stack.settled();
    const after = await stack.balance();
    const expected = await chargeOn(stack, MODEL, chatCounts(data.usage!));
    expect(expected).toBeGreaterThan(0);
    expect(before.availableMicros - after.availableMicros).toBe(expected);
    expectInvariant(after);
    expect(await rowOf(stack, response.headers.get('x-sluice-request-id'))).toMatchObject({ servedBy: MODEL, chargeMicros: expected });
  });

  it('streams, asking the provider for stream usage as its entry says, and charges its counts', async () => {
    const stream = await stack.client().chat.completions.create({ ...ask, stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(text.length).toBeGreaterThan(0);
    expect(second.recorded.at(-1)?.json).toMatchObject({ stream: true, stream_options: { include_usage: true }, max_tokens: 4096 });
    await stack.settled();
    expectInvariant(await stack.balance());
  });

  it('audits both changes without the key', async () => {
    const audit = await ok<{ entries: { action: string; summary: Record<string, unknown> }[] }>(['audit', 'list', '--workspace', 'catalog']);
    const actions = audit.entries.map((e) => e.action);
    expect(actions).toEqual(expect.arrayContaining(['provider.add', 'model.add']));
    expect(audit.entries.find((e) => e.action === 'provider.add')?.summary).toMatchObject({ provider: 'second', authHeader: 'api-key', requiresMaxTokens: true });
    expect(JSON.stringify(audit)).not.toContain(SECOND_KEY);
  });

  it('catalog import without --prune removes nothing and lists what it would remove; with --prune removes exactly that', async () => {
    const before = await catalogText();
    const kept = await ok<{ unlisted: { providers: string[]; models: string[] }; pruned: boolean; removedProviders: number; removedModels: number }>(['catalog', 'import']);
    expect(kept).toMatchObject({ unlisted: { providers: ['second'], models: [MODEL] }, pruned: false, removedProviders: 0, removedModels: 0 });
    expect(await catalogText()).toBe(before);
    const human = await sluice(['catalog', 'import']);
    expect(human.code).toBe(0);
    expect(human.stdout).toContain(`model ${MODEL}`);
    expect(human.stdout).toContain('--prune removes them');
    await stack.client().chat.completions.create(ask);

    const pruned = await ok<typeof kept>(['catalog', 'import', '--prune']);
    expect(pruned).toMatchObject({ unlisted: { providers: ['second'], models: [MODEL] }, pruned: true, removedProviders: 1, removedModels: 1 });
    const after = await catalogText();
    expect(after).not.toContain('PROVIDER#second');
    expect(after).not.toContain(`MODEL#${MODEL}`);
    expect(after).toContain('MODEL#local/sim-small');
    // The run-time provider's key went with it.
    const secrets = JSON.parse(readFileSync(join(secretsDir, 'secrets.json'), 'utf8')) as Record<string, string>;
    expect(secrets['sluice/local/added-providers/second']).toBeUndefined();
    await eventually(() => expectApiError(stack.client().chat.completions.create(ask), 404, 'model_not_found'));
  });

  it('removes a model, then its provider (refused while the provider still serves a model)', async () => {
    // A keyless server (a self-hosted model on a private network): the stack's own simulator takes any request.
    await ok(['provider', 'add', 'third', '--base-url', stack.sim.url, '--auth', 'none']);
    await ok(['model', 'add', 'third/sim-large', '--input-price', '1', '--output-price', '2', '--max-output', '1000']);
    const served = await eventually(() => stack.client().chat.completions.create({ ...ask, model: 'third/sim-large' }));
    expect(served.choices[0]?.message.content).toBeTruthy();
    expect(await refused(['provider', 'remove', 'third'])).toBe('provider_in_use');
    expect(await ok<{ model: string }>(['model', 'remove', 'third/sim-large'])).toEqual({ model: 'third/sim-large' });
    expect(await refused(['model', 'remove', 'third/sim-large'])).toBe('model_not_in_catalog');
    expect(await ok<{ provider: string; secretDeleted: boolean }>(['provider', 'remove', 'third'])).toEqual({ provider: 'third', secretDeleted: false });
    expect(await refused(['provider', 'remove', 'third'])).toBe('provider_not_found');
    const audit = await ok<{ entries: { action: string }[] }>(['audit', 'list', '--workspace', 'catalog']);
    expect(audit.entries.map((e) => e.action)).toEqual(expect.arrayContaining(['model.remove', 'provider.remove']));
  });
});
