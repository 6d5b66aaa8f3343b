/**
 * Bring your own key, end to end: the operator stores a workspace's key with the CLI's local secret
 * store, and the gateway reads it from the same file. The simulator behind providers `keyed` and
 * `byokonly` accepts only known keys, so what travels is checked by the provider itself. A
 * workspace key carries every request to its provider, alone; its refusal is 400
 * `provider_key_refused`, its rate limit 429 `provider_key_refused` without Retry-After; it adds no
 * models; and what runs on it is never charged to the balance.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { LocalFileSecretStore, byokSecretName, createProfile, setByokKey, type AdminContext } from '../../local/ops';
import { startSimulator, type Simulator } from '../../local/simulator';
import { startStack, expectInvariant, type TestStack } from '../support/stack';
import { addToCatalog, chargeOn, chatCounts, expectApiError, localProvider, modelUnder, rawPost, rowOf } from '../support/e2e';

const SERVICE_KEY = 'sk-service-key-0001';
const GOOD_KEY = 'sk-byok-good-0001';
const REVOKED_KEY = 'sk-byok-revoked-0001';

let stack: TestStack;
let keyedSim: Simulator;
let secretsDir: string;
let admin: AdminContext;

beforeAll(async () => {
  keyedSim = await startSimulator({ acceptedKeys: [SERVICE_KEY, GOOD_KEY] });
  secretsDir = mkdtempSync(path.join(tmpdir(), 'sluice-byok-'));
  const secretsFile = path.join(secretsDir, 'secrets.json');
  stack = await startStack({
    env: { SLUICE_KEYED_URL: keyedSim.url, SLUICE_PROVIDER_KEY_KEYED: SERVICE_KEY, SLUICE_LOCAL_SECRETS_FILE: secretsFile },
  });
  const keyed = (name: string): ReturnType<typeof localProvider> => ({
    ...localProvider(),
    name,
    displayName: `Simulator that checks keys (${name})`,
    keySource: { secretName: `sluice/{stage}/providers/${name}`, env: `SLUICE_PROVIDER_KEY_${name.toUpperCase()}` },
    baseUrlEnv: 'SLUICE_KEYED_URL',
  });
  // `byokonly` takes a key and the service has none for it.
  await addToCatalog(stack, [keyed('keyed'), keyed('byokonly')], [modelUnder('keyed', 'local/sim-small'), modelUnder('keyed', 'local/sim-large'), modelUnder('byokonly', 'local/sim-small')]);
  // The operator's context, on the very file the gateway reads.
  admin = { ...stack.admin, secrets: new LocalFileSecretStore(secretsFile) };
});

afterAll(async () => {
  await stack?.close();
  await keyedSim?.close();
  rmSync(secretsDir, { recursive: true, force: true });
});

beforeEach(() => {
  stack.sim.reset();
  keyedSim.reset();
});

/** The key each request to the key-checking simulator carried. */
const keysSeen = (): string[] => keyedSim.recorded.map((r) => r.headers.authorization ?? '(none)');

async function byokWorkspace(creditMinor: number, apiKey: string, provider = 'keyed'): Promise<Awaited<ReturnType<TestStack['seed']>>> {
  const ws = await stack.seed(creditMinor);
  const set = await setByokKey(admin, { workspaceId: ws.workspaceId, provider, apiKey });
  expect(set.secretName).toBe(byokSecretName('local', ws.workspaceId, provider));
  return ws;
}

it("without a workspace key, the service's key carries the request and the balance pays", async () => {
  const before = await stack.balance();
  const { data, response } = await stack.client().chat.completions.create({ model: 'keyed/sim-small', messages: [{ role: 'user', content: 'hi' }] }).withResponse();
  expect(response.headers.get('x-sluice-served-by')).toBe('keyed/sim-small');
  expect(keysSeen()).toEqual([`Bearer ${SERVICE_KEY}`]);
  await stack.settled();
  const after = await stack.balance();
  const expected = await chargeOn(stack, 'keyed/sim-small', chatCounts(data.usage!));
  expect(expected).toBeGreaterThan(0);
  expect(before.availableMicros - after.availableMicros).toBe(expected);
  expect(await rowOf(stack, response.headers.get('x-sluice-request-id'))).toMatchObject({ byok: false, chargeMicros: expected });
  expectInvariant(after);
});

it('a workspace key carries every request to its provider, streamed or not, charged nothing and needing no credit', async () => {
  const ws = await byokWorkspace(0, GOOD_KEY);
  const client = stack.client(ws.rawKey);
  const { data, response } = await client.chat.completions.create({ model: 'keyed/sim-small', messages: [{ role: 'user', content: 'on my own key' }] }).withResponse();
  expect(response.headers.get('x-sluice-served-by')).toBe('keyed/sim-small');
  expect(data.model).toBe('keyed/sim-small');
  const stream = await client.chat.completions.create({ model: 'keyed/sim-large', messages: [{ role: 'user', content: 'stream on my key' }], stream: true });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
  expect(text.length).toBeGreaterThan(0);
  expect(keysSeen()).toEqual([`Bearer ${GOOD_KEY}`, `Bearer ${GOOD_KEY}`]);

  // Only that provider: a model of another provider still needs credit.
  await expectApiError(client.chat.completions.create({ model: 'local/sim-small', messages: [{ role: 'user', content: 'x' }] }), 402, 'insufficient_credit', 'insufficient_quota', null);
  expect(stack.sim.recorded).toHaveLength(0);

  await stack.settled(ws.workspaceId);
  const after = await stack.balance(ws.workspaceId);
  expect(after).toEqual({ availableMicros: 0, heldMicros: 0, spentMicros: 0, creditedMicros: 0 });
  const rows = await stack.usageRows(ws.workspaceId);
  expect(rows).toHaveLength(2);
  for (const row of rows) {
    expect(row).toMatchObject({ byok: true, chargeMicros: 0, holdMicros: 0, outcome: 'ok', status: 200 });
    expect(row.inputTokens).toBeGreaterThan(0);
    expect(row.outputTokens).toBeGreaterThan(0);
  }
  expect(rows.map((r) => r.servedBy).sort()).toEqual(['keyed/sim-large', 'keyed/sim-small']);
  expect((await rowOf(stack, response.headers.get('x-sluice-request-id'), ws.workspaceId)).inputTokens).toBe(data.usage!.prompt_tokens);
  expectInvariant(after);
});

it("the provider refusing the workspace key is 400 provider_key_refused, and nothing falls back to the service's key", async () => {
  const ws = await byokWorkspace(100_000, REVOKED_KEY);
  const before = await stack.balance(ws.workspaceId);
  const e = await expectApiError(
    stack.client(ws.rawKey).chat.completions.create({ model: 'keyed/sim-small', messages: [{ role: 'user', content: 'x' }] }),
    400,
    'provider_key_refused',
    'invalid_request_error',
    null,
  );
  expect(e.message).not.toContain(REVOKED_KEY);
  const streamed = await rawPost(stack, '/chat/completions', JSON.stringify({ model: 'keyed/sim-small', messages: [{ role: 'user', content: 'x' }], stream: true }), ws.rawKey);
  expect(streamed.status).toBe(400);
  expect((JSON.parse(streamed.text) as { error: { code: string } }).error.code).toBe('provider_key_refused');
  expect(keysSeen()).toEqual([`Bearer ${REVOKED_KEY}`, `Bearer ${REVOKED_KEY}`]);
  await stack.settled(ws.workspaceId);
  const after = await stack.balance(ws.workspaceId);
  expect(after).toEqual(before);
  expect(await rowOf(stack, e.requestID ?? null, ws.workspaceId)).toMatchObject({ status: 400, chargeMicros: 0, byok: true });
  expectInvariant(after);
});

it('the workspace key rate-limited is 429 provider_key_refused without Retry-After', async () => {
  const ws = await byokWorkspace(100_000, GOOD_KEY);
  keyedSim.script('sim-small', [{ kind: 'error', status: 429, headers: { 'retry-after': '20' } }]);
  const e = await expectApiError(
    stack.client(ws.rawKey).chat.completions.create({ model: 'keyed/sim-small', messages: [{ role: 'user', content: 'x' }] }),
    429,
    'provider_key_refused',
    'rate_limit_error',
    null,
  );
  expect(e.headers?.get('retry-after')).toBeNull();
  expect(keysSeen()).toEqual([`Bearer ${GOOD_KEY}`]);
  await stack.settled(ws.workspaceId);
  expect((await stack.balance(ws.workspaceId)).availableMicros).toBe(100_000 * 1_000_000);
  expectInvariant(await stack.balance(ws.workspaceId));
});

it('any other provider status on the workspace key is 400 provider_key_refused', async () => {
  const ws = await byokWorkspace(100_000, GOOD_KEY);
  keyedSim.script('sim-small', [{ kind: 'error', status: 503 }]);
  await expectApiError(stack.client(ws.rawKey).chat.completions.create({ model: 'keyed/sim-small', messages: [{ role: 'user', content: 'x' }] }), 400, 'provider_key_refused', 'invalid_request_error', null);
  expect(keysSeen()).toEqual([`Bearer ${GOOD_KEY}`]);
  await stack.settled(ws.workspaceId);
  expectInvariant(await stack.balance(ws.workspaceId));
});

it('a workspace key adds no models; it makes a provider without a service key usable for that workspace only', async () => {
  const catalogIds = new Set((await stack.wiring.catalog.models()).map((m) => m.id));
  const plain = await stack.seed(100_000);
  const own = await byokWorkspace(100_000, GOOD_KEY, 'byokonly');

  // An id the catalog does not hold stays unknown, key or no key.
  await expectApiError(stack.client(own.rawKey).chat.completions.create({ model: 'byokonly/gpt-9', messages: [{ role: 'user', content: 'x' }] }), 404, 'model_not_found', 'not_found_error', null);
  const listed = (await stack.client(own.rawKey).models.list()).data.map((m) => m.id);
  for (const id of listed) expect(catalogIds.has(id)).toBe(true);
  expect(listed).toContain('byokonly/sim-small');
  const plainListed = (await stack.client(plain.rawKey).models.list()).data.map((m) => m.id);
  expect(plainListed).not.toContain('byokonly/sim-small');
  expect(new Set(listed)).toEqual(new Set([...plainListed, 'byokonly/sim-small']));

  await expectApiError(stack.client(plain.rawKey).chat.completions.create({ model: 'byokonly/sim-small', messages: [{ role: 'user', content: 'x' }] }), 503, 'no_provider_configured', 'api_error', null);
  expect(keyedSim.recorded).toHaveLength(0);
  const { response } = await stack.client(own.rawKey).chat.completions.create({ model: 'byokonly/sim-small', messages: [{ role: 'user', content: 'x' }] }).withResponse();
  expect(response.headers.get('x-sluice-served-by')).toBe('byokonly/sim-small');
  expect(keysSeen()).toEqual([`Bearer ${GOOD_KEY}`]);
  await stack.settled(own.workspaceId);
  await stack.settled(plain.workspaceId);
  expect((await stack.balance(own.workspaceId)).availableMicros).toBe(100_000 * 1_000_000);
  expect((await stack.balance(plain.workspaceId)).availableMicros).toBe(100_000 * 1_000_000);
  expectInvariant(await stack.balance(own.workspaceId));
});

describe('in a routing profile', () => {
  it("the workspace key's rate limit moves on to the next model, which the balance pays for", async () => {
    const ws = await byokWorkspace(100_000, GOOD_KEY);
    await createProfile(stack.admin, { workspaceId: ws.workspaceId, identifier: 'own-first', models: ['keyed/sim-small', 'local/sim-small'] });
    keyedSim.script('sim-small', [{ kind: 'error', status: 429 }]);
    const before = await stack.balance(ws.workspaceId);
    const { data, response } = await stack
      .client(ws.rawKey)
      .chat.completions.create({ model: 'profile/own-first', messages: [{ role: 'user', content: 'x' }] })
      .withResponse();
    expect(response.headers.get('x-sluice-served-by')).toBe('local/sim-small');
    expect(response.headers.get('x-sluice-retry-attempt-count')).toBe('1');
    expect(keysSeen()).toEqual([`Bearer ${GOOD_KEY}`]);
    expect(stack.sim.recorded).toHaveLength(1);
    await stack.settled(ws.workspaceId);
    const after = await stack.balance(ws.workspaceId);
    const expected = await chargeOn(stack, 'local/sim-small', chatCounts(data.usage!));
    expect(before.availableMicros - after.availableMicros).toBe(expected);
    expect(await rowOf(stack, response.headers.get('x-sluice-request-id'), ws.workspaceId)).toMatchObject({ servedBy: 'local/sim-small', chargeMicros: expected, attempts: 2 });
    expectInvariant(after);
  });

  it('the workspace key refused ends the route with 400 provider_key_refused', async () => {
    const ws = await byokWorkspace(100_000, GOOD_KEY);
    await createProfile(stack.admin, { workspaceId: ws.workspaceId, identifier: 'own-refused', models: ['keyed/sim-small', 'local/sim-small'] });
    keyedSim.script('sim-small', [{ kind: 'error', status: 401 }]);
    const before = await stack.balance(ws.workspaceId);
    await expectApiError(
      stack.client(ws.rawKey).chat.completions.create({ model: 'profile/own-refused', messages: [{ role: 'user', content: 'x' }] }),
      400,
      'provider_key_refused',
      'invalid_request_error',
      null,
    );
    expect(stack.sim.recorded).toHaveLength(0);
    await stack.settled(ws.workspaceId);
    expect(await stack.balance(ws.workspaceId)).toEqual(before);
    expectInvariant(await stack.balance(ws.workspaceId));
  });

  it('a member served on the workspace key is not charged, though the hold covered the others', async () => {
    const ws = await byokWorkspace(100_000, GOOD_KEY);
    await createProfile(stack.admin, { workspaceId: ws.workspaceId, identifier: 'own-second', models: ['local/sim-small', 'keyed/sim-large'] });
    stack.sim.script('sim-small', [{ kind: 'error', status: 500 }]);
    const before = await stack.balance(ws.workspaceId);
    const { response } = await stack
      .client(ws.rawKey)
      .chat.completions.create({ model: 'profile/own-second', messages: [{ role: 'user', content: 'x' }] })
      .withResponse();
    expect(response.headers.get('x-sluice-served-by')).toBe('keyed/sim-large');
    expect(keysSeen()).toEqual([`Bearer ${GOOD_KEY}`]);
    await stack.settled(ws.workspaceId);
    const after = await stack.balance(ws.workspaceId);
    expect(after).toEqual(before);
    const row = await rowOf(stack, response.headers.get('x-sluice-request-id'), ws.workspaceId);
    expect(row).toMatchObject({ servedBy: 'keyed/sim-large', chargeMicros: 0, attempts: 2, byok: true });
    expect(row.holdMicros).toBeGreaterThan(0);
    expectInvariant(after);
  });
});
