/**
 * The operator's surface end to end: `sluice` as a child process against the local management
 * API, which serves the same use cases as the deployed function, over DynamoDB Local; a gateway
 * on the same tables shows what a revoke and a rotation do to requests. Covers every command of
 * issue 12, its refusals, the audit trail, and that the CLI itself writes no table.
 */
import { GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { spawn } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { APIError } from 'openai';
import { startTestAdmin, type TestAdmin } from '../support/admin';
import { startStack, type TestStack } from '../support/stack';
import { requestRowKey } from '../../lambdas/store/keys';
import { requestIdDigits } from '../../lambdas/core/request-id';

jest.setTimeout(180_000);

const BIN = resolve(__dirname, '../../bin/sluice.js');
const CACHE_TTL_MS = 1_000;

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

let stack: TestStack;
let admin: TestAdmin;

beforeAll(async () => {
  // The gateway caches keys for a second here, so "after the cache time" is quick to reach.
  stack = await startStack({ env: { SLUICE_CACHE_TTL_MS: String(CACHE_TTL_MS) } });
  admin = await startTestAdmin(stack.tables);
});

afterAll(async () => {
  await admin.close();
  await stack.close();
});

function sluice(args: readonly string[], opts: { input?: string; env?: NodeJS.ProcessEnv } = {}): Promise<Run> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: opts.env ?? admin.env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolvePromise({ code, stdout, stderr }));
    child.stdin.end(opts.input ?? '');
  });
}

async function ok<T = Record<string, unknown>>(args: readonly string[], input?: string): Promise<T> {
  const run = await sluice([...args, '--json'], input === undefined ? {} : { input });
  if (run.code !== 0) throw new Error(`sluice ${args.join(' ')} exited ${String(run.code)}: ${run.stderr}`);
  return JSON.parse(run.stdout) as T;
}

async function human(args: readonly string[]): Promise<string> {
  const run = await sluice(args);
  if (run.code !== 0) throw new Error(`sluice ${args.join(' ')} exited ${String(run.code)}: ${run.stderr}`);
  return run.stdout;
}

async function refused(args: readonly string[]): Promise<{ code: string; stderr: string }> {
  const run = await sluice([...args, '--json']);
  expect(run.code).toBe(1);
  expect(run.stderr.trimEnd().split('\n')).toHaveLength(1);
  return { code: (JSON.parse(run.stdout) as { error: { code: string } }).error.code, stderr: run.stderr };
}

/** A chat request on a key; resolves to the status (200, or the refusal's) and the refusal's code. */
async function call(rawKey: string): Promise<{ status: number; code?: string | null }> {
  try {
    await stack.client(rawKey).chat.completions.create({ model: 'local/sim-small', messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 });
    return { status: 200 };
  } catch (err) {
    if (err instanceof APIError) return { status: err.status ?? 0, code: err.code ?? null };
    throw err;
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function keySlots(workspaceId: string): Promise<number> {
  const out = await stack.tables.doc.send(new GetCommand({ TableName: `${stack.tables.prefix}workspaces`, Key: { pk: workspaceId, sk: 'META' }, ConsistentRead: true }));
  return Number(out.Item?.['keySlots']);
}

describe('the management API itself', () => {
  it('refuses a request without the admin token, an unknown route and a wrong method, in the envelope', async () => {
    const none = await fetch(`${admin.url}/admin/v1/workspaces`);
    expect(none.status).toBe(401);
    const body = (await none.json()) as { error: Record<string, unknown> };
    expect(Object.keys(body)).toEqual(['error']);
    expect(body.error).toMatchObject({ type: 'authentication_error', code: 'unauthenticated', param: null });
    expect(body.error['request_id']).toBe(none.headers.get('x-sluice-request-id'));

    const auth = { authorization: `Bearer ${admin.token}` };
    const wrongToken = await fetch(`${admin.url}/admin/v1/workspaces`, { headers: { authorization: `Bearer ${'x'.repeat(admin.token.length)}` } });
    expect(wrongToken.status).toBe(401);
    const unknown = await fetch(`${admin.url}/admin/v1/nothing`, { headers: auth });
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { code: string } }).error.code).toBe('route_not_found');
    const method = await fetch(`${admin.url}/admin/v1/workspaces`, { method: 'DELETE', headers: auth });
    expect(method.status).toBe(405);
    expect(method.headers.get('allow')).toBe('GET, POST');
    const notJson = await fetch(`${admin.url}/admin/v1/workspaces`, { method: 'POST', headers: auth, body: '{' });
    expect(((await notJson.json()) as { error: { code: string } }).error.code).toBe('invalid_json');
  });

  it('keeps the admin token in a 0600 file', () => {
    expect(statSync(join(admin.dir, 'admin-token')).mode & 0o777).toBe(0o600);
    expect(readFileSync(join(admin.dir, 'admin-token'), 'utf8').trim()).toBe(admin.token);
  });
});

describe("the operator's day", () => {
  let ws: string;
  let owner: string;

  it('creates a workspace, lists it, and reads the catalog and providers', async () => {
    await ok(['catalog', 'import']);
    ({ workspaceId: ws, ownerMemberId: owner } = await ok<{ workspaceId: string; ownerMemberId: string }>(['workspace', 'create', '--name', 'Day Co']));
    const list = await ok<{ workspaces: { workspaceId: string; name: string; availableMicros: number; paused: boolean }[] }>(['workspace', 'list']);
    expect(list.workspaces).toContainEqual(expect.objectContaining({ workspaceId: ws, name: 'Day Co', availableMicros: 0, paused: false }));
    const csv = (await human(['workspace', 'list', '--csv'])).trimEnd().split('\n');
    expect(csv[0]).toBe('workspace,name,available,held,paused');
    expect(csv).toContain(`${ws},Day Co,USD 0.00,USD 0.00,no`);

    const models = await ok<{ models: { id: string }[] }>(['catalog', 'list', '--provider', 'local']);
    expect(models.models.map((m) => m.id)).toContain('local/sim-small');
    expect(models.models.every((m) => m.id.startsWith('local/'))).toBe(true);
    const providers = await ok<{ providers: { name: string }[] }>(['provider', 'list']);
    expect(providers.providers.map((p) => p.name)).toEqual(expect.arrayContaining(['local', 'openai']));
    expect((await human(['provider', 'list', '--csv'])).split('\n')[0]).toBe('provider,name,base url,families');
  });

  it('tops up in major units with the currency, once per reference, and keeps a statement', async () => {
    expect(await human(['credit', 'add', '20.50', '-w', ws])).toMatch(/^credited USD 20\.50; available USD 20\.50$/m);
    const dollars = await ok<{ applied: boolean; entry: { amountMicros: number }; balance: { availableMicros: number } }>([
      'credit', 'add', '--amount', '$20', '-w', ws, '--reference', 'inv-1001',
    ]);
    expect(dollars).toMatchObject({ applied: true, entry: { amountMicros: 2_000_000_000 }, balance: { availableMicros: 4_050_000_000 } });
    // The same top-up again (a retry): nothing added, and it says so.
    const again = await ok<{ applied: boolean; balance: { availableMicros: number } }>(['credit', 'add', '20.00', '-w', ws, '--reference', 'inv-1001']);
    expect(again).toMatchObject({ applied: false, balance: { availableMicros: 4_050_000_000 } });
    expect(await human(['credit', 'add', 'USD 20', '-w', ws, '--reference', 'inv-1001'])).toMatch(/already credited USD 20\.00 .* by local; nothing added/);
    // The reference used for another amount is refused.
    const used = await refused(['credit', 'add', '2500', '--minor-units', '-w', ws, '--reference', 'inv-1001']);
    expect(used).toMatchObject({ code: 'reference_used' });
    await expect(ok(['credit', 'add', '2001', '--minor-units', '-w', ws])).resolves.toMatchObject({ entry: { amountMicros: 2_001_000_000 } });
    expect((await refused(['credit', 'add', '20.505', '-w', ws])).code).toBe('invalid_argument');
    expect((await refused(['credit', 'add', '-5', '-w', ws])).code).toBe('invalid_argument');
    expect((await refused(['credit', 'add', '5', '-w', 'ws_nobody'])).code).toBe('workspace_not_found');

    const history = await ok<{ entries: { kind: string; amountMicros: number; reference: string | null; who: string }[] }>(['credit', 'history', '-w', ws]);
    expect(history.entries.map((e) => [e.kind, e.amountMicros, e.reference, e.who])).toEqual([
      ['credit', 2_001_000_000, null, 'local'],
      ['credit', 2_000_000_000, 'inv-1001', 'local'],
      ['credit', 2_050_000_000, null, 'local'],
    ]);
    const shown = await ok<{ balance: { available: { micros: number }; credited: { micros: number } } }>(['workspace', 'show', '-w', ws]);
    expect(shown.balance.available.micros).toBe(6_051_000_000);
    expect(shown.balance.credited.micros).toBe(6_051_000_000);
    expect(await human(['workspace', 'show', '-w', ws])).toMatch(/^available +USD 60\.51$/m);
  });

  it('adjusts with a reason, never below zero or below what is held', async () => {
    // Running requests hold USD 10.00 (moved from available to held, as admission does).
    await stack.tables.doc.send(
      new UpdateCommand({
        TableName: `${stack.tables.prefix}ledger`,
        Key: { pk: `WS#${ws}`, sk: 'BALANCE' },
        UpdateExpression: 'ADD availableMicros :minus, heldMicros :plus',
        ExpressionAttributeValues: { ':minus': -1_000_000_000, ':plus': 1_000_000_000 },
      }),
    );
    const below = await refused(['credit', 'adjust', '-50.52', '-w', ws, '--reason', 'refund of a double top-up']);
    expect(below.code).toBe('below_held');
    expect(below.stderr).toMatch(/^sluice: an adjustment of USD -50\.52 would take the balance below what is held: available USD 50\.51, held USD 10\.00\n$/);
    expect((await refused(['credit', 'adjust', '-5', '-w', ws])).code).toBe('invalid_argument'); // no reason
    const fixed = await ok<{ entry: { amountMicros: number; reason: string }; balance: { availableMicros: number; heldMicros: number } }>([
      'credit', 'adjust', '-50.51', '-w', ws, '--reason', 'refund of a double top-up',
    ]);
    expect(fixed).toMatchObject({ entry: { amountMicros: -5_051_000_000, reason: 'refund of a double top-up' }, balance: { availableMicros: 0, heldMicros: 1_000_000_000 } });
    expect((await refused(['credit', 'adjust', '-0.01', '-w', ws, '--reason', 'one cent more'])).code).toBe('below_held');
    await expect(ok(['credit', 'adjust', '+1.00', '-w', ws, '--reason', 'goodwill'])).resolves.toMatchObject({ balance: { availableMicros: 100_000_000 } });
    const b = await stack.balance(ws);
    // The invariant: credited = available + held + spent.
    expect(b.availableMicros + b.heldMicros + b.spentMicros).toBe(b.creditedMicros);
    const history = await ok<{ entries: { kind: string; amountMicros: number; reason: string | null }[] }>(['credit', 'history', '-w', ws, '--limit', '2']);
    expect(history.entries).toEqual([
      expect.objectContaining({ kind: 'adjustment', amountMicros: 100_000_000, reason: 'goodwill' }),
      expect.objectContaining({ kind: 'adjustment', amountMicros: -5_051_000_000 }),
    ]);
    // Release the simulated hold so the workspace can serve below.
    await stack.tables.doc.send(
      new UpdateCommand({
        TableName: `${stack.tables.prefix}ledger`,
        Key: { pk: `WS#${ws}`, sk: 'BALANCE' },
        UpdateExpression: 'ADD availableMicros :plus, heldMicros :minus',
        ExpressionAttributeValues: { ':minus': -1_000_000_000, ':plus': 1_000_000_000 },
      }),
    );
  });

  it('sets limits and the low-credit threshold in people\'s units', async () => {
    await expect(ok(['workspace', 'limit', '--monthly', '90', '-w', ws])).resolves.toEqual({ monthlyLimitMicros: 9_000_000_000 });
    await expect(ok(['workspace', 'low-credit', '--threshold', '5.25', '-w', ws])).resolves.toEqual({ lowCreditThresholdMicros: 525_000_000 });
    expect(await human(['workspace', 'show', '-w', ws])).toMatch(/^low-credit at +USD 5\.25$/m);
    const item = await stack.tables.doc.send(new GetCommand({ TableName: `${stack.tables.prefix}workspaces`, Key: { pk: ws, sk: 'META' }, ConsistentRead: true }));
    expect(item.Item?.['lowCreditThresholdMicros']).toBe(525_000_000);
    await expect(ok(['workspace', 'low-credit', '--clear', '-w', ws])).resolves.toEqual({ lowCreditThresholdMicros: null });
    expect(await human(['workspace', 'spend-cap', '75', '-w', ws])).toMatch(/spend rate cap: USD 75\.00 per 60 s \(was USD 50\.00\)/);
  });

  it('changes the permitted set and profiles incrementally, refusing ids in no catalog by the closest one', async () => {
    const typo = await refused(['workspace', 'permit', 'add', 'local/sim-smal', '-w', ws]);
    expect(typo.code).toBe('model_not_in_catalog');
    expect(typo.stderr).toMatch(/did you mean local\/sim-small\?/);
    expect((await refused(['workspace', 'permit', 'remove', 'local/sim-small', '-w', ws])).code).toBe('invalid_argument'); // unrestricted
    await expect(ok(['workspace', 'permit', 'add', 'local/sim-small', 'local/sim-large', '-w', ws])).resolves.toMatchObject({
      permittedModels: ['local/sim-small', 'local/sim-large'],
      added: ['local/sim-small', 'local/sim-large'],
    });
    await expect(ok(['workspace', 'permit', 'add', 'local/sim-small', 'local/sim-reasoning', '-w', ws])).resolves.toMatchObject({
      permittedModels: ['local/sim-small', 'local/sim-large', 'local/sim-reasoning'],
      added: ['local/sim-reasoning'],
    });
    await expect(ok(['workspace', 'permit', 'remove', 'local/sim-large', '-w', ws])).resolves.toMatchObject({
      permittedModels: ['local/sim-small', 'local/sim-reasoning'],
      removed: ['local/sim-large'],
    });
    expect((await refused(['workspace', 'permit', 'remove', 'local/sim-small', 'local/sim-reasoning', '-w', ws])).code).toBe('invalid_argument');
    const whole = await refused(['workspace', 'permit', 'openai/gpt-4.1-mimi', '-w', ws]);
    expect(whole.stderr).toMatch(/did you mean openai\/gpt-4\.1-mini\?/);
    const profile = await refused(['profile', 'create', 'p1', 'local/sim-small', 'local/sim-lagre', '-w', ws]);
    expect(profile).toMatchObject({ code: 'model_not_in_catalog' });
    expect(profile.stderr).toMatch(/did you mean local\/sim-large\?/);
    await ok(['workspace', 'permit', '--clear', '-w', ws]);
  });

  it('lists members and BYOK providers, never the keys', async () => {
    const { memberId } = await ok<{ memberId: string }>(['member', 'add', '-w', ws, '--email', 'dev@day.test']);
    const members = await ok<{ members: { memberId: string; role: string }[] }>(['member', 'list', '-w', ws]);
    expect(members.members.map((m) => [m.memberId, m.role])).toEqual([
      [owner, 'owner'],
      [memberId, 'member'],
    ]);
    expect((await human(['member', 'list', '-w', ws, '--csv'])).split('\n')).toContain(`${memberId},member,dev@day.test,none`);
    await ok(['byok', 'set', 'openai', '-w', ws, '--key-stdin'], 'sk-byok-secret-value\n');
    const byok = await sluice(['byok', 'list', '-w', ws, '--json']);
    expect(JSON.parse(byok.stdout)).toEqual({ providers: ['openai'] });
    expect(byok.stdout).not.toContain('sk-byok');
    await ok(['byok', 'remove', 'openai', '-w', ws]);
    await expect(ok(['byok', 'list', '-w', ws])).resolves.toEqual({ providers: [] });
    expect((await refused(['member', 'list', '-w', 'ws_nobody'])).code).toBe('workspace_not_found');
  });

  it('revokes a key: refused at once when uncached, after the cache time when cached, and its slot frees', async () => {
    const used = await ok<{ rawKey: string; keyId: string; visible: string }>(['key', 'create', '-w', ws, '--name', 'used']);
    const fresh = await ok<{ rawKey: string; keyId: string }>(['key', 'create', '-w', ws, '--name', 'fresh']);
    expect(await call(used.rawKey)).toEqual({ status: 200 }); // now in the gateway's key cache
    const slots = await keySlots(ws);

    await expect(ok(['key', 'revoke', '-w', ws, '--key', fresh.keyId])).resolves.toMatchObject({ keyId: fresh.keyId });
    expect(await call(fresh.rawKey)).toEqual({ status: 401, code: 'invalid_api_key' });

    await expect(ok(['key', 'revoke', '-w', ws, '--key', used.visible.replace('…', '...')])).resolves.toMatchObject({ keyId: used.keyId });
    await sleep(CACHE_TTL_MS + 200);
    expect(await call(used.rawKey)).toEqual({ status: 401, code: 'invalid_api_key' });
    expect(await keySlots(ws)).toBe(slots - 2);

    expect((await refused(['key', 'revoke', '-w', ws, '--key', used.keyId])).code).toBe('key_not_found');
    expect((await refused(['key', 'revoke', '-w', ws, '--key', 'key_ffffffffffffffffffff'])).code).toBe('key_not_found');
    const all = await ok<{ keys: { keyId: string; state: string }[] }>(['key', 'list', '-w', ws, '--all']);
    expect(all.keys.filter((k) => k.keyId === used.keyId).map((k) => k.state)).toEqual(['ended']);
    // The table says how and by whom an ended key ended, as the console's ended keys do.
    const table = (await human(['key', 'list', '-w', ws, '--all'])).split('\n');
    expect(table[0]).toMatch(/\bended$/);
    expect(table.find((l) => l.startsWith(used.keyId))).toMatch(/\brevoked \d{4}-\d\d-\d\dT\S+ by \S+$/);
    expect((await human(['key', 'list', '-w', ws])).split('\n')[0]).not.toMatch(/\bended$/);
  });

  it('refuses to rotate an expired key, and revokes it, which frees the slot it still held', async () => {
    // Far enough ahead to outlast a CLI start on a busy machine.
    const soon = Date.now() + 8_000;
    const k = await ok<{ rawKey: string; keyId: string }>(['key', 'create', '-w', ws, '--expires', new Date(soon).toISOString()]);
    const slots = await keySlots(ws);
    await sleep(Math.max(0, soon - Date.now()) + 300);
    expect(await call(k.rawKey)).toMatchObject({ status: 401, code: 'key_expired' });
    await expect(ok(['key', 'show', '-w', ws, '--key', k.keyId])).resolves.toMatchObject({ state: 'expired' });
    // Never renewed (SPEC): a rotation would mint a live key with its id and limit, so it is refused.
    const rotations = async (): Promise<number> => (await ok<{ entries: { action: string }[] }>(['audit', 'list', '-w', ws, '--limit', '1000'])).entries.filter((e) => e.action === 'key.rotate').length;
    const rotated = await rotations();
    const refusal = await refused(['key', 'rotate', '-w', ws, '--key', k.keyId]);
    expect(refusal.code).toBe('key_expired');
    expect(refusal.stderr).toMatch(/^sluice: key key_\w+ expired at \S+: an expired key is never renewed, so it can be revoked \(which frees its slot\) but not rotated; create a new key\n$/);
    expect((await refused(['key', 'rotate', '-w', ws, '--key', k.keyId, '--no-expiry'])).code).toBe('key_expired');
    const api = await fetch(`${admin.url}/admin/v1/workspaces/${ws}/keys/${k.keyId}/rotate`, { method: 'POST', headers: { authorization: `Bearer ${admin.token}` }, body: '{}' });
    expect(api.status).toBe(409);
    expect(((await api.json()) as { error: { code: string; type: string } }).error).toMatchObject({ code: 'key_expired', type: 'invalid_request_error' });
    expect(await rotations()).toBe(rotated);
    expect(await keySlots(ws)).toBe(slots);
    expect(await call(k.rawKey)).toMatchObject({ status: 401, code: 'key_expired' });
    await expect(ok(['key', 'revoke', '-w', ws, '--key', k.keyId])).resolves.toMatchObject({ wasExpired: true });
    expect(await keySlots(ws)).toBe(slots - 1);
  });

  it('rotates a key in one motion: the new key printed once serves, the old one ends, limit and slot carry on', async () => {
    const old = await ok<{ rawKey: string; keyId: string; visible: string }>(['key', 'create', '-w', ws, '--name', 'ci']);
    await ok(['key', 'limit', '12.34', '-w', ws, '--key', old.keyId, '--window', 'daily']);
    const slots = await keySlots(ws);
    const run = await sluice(['key', 'rotate', '-w', ws, '--key', old.keyId]);
    expect(run.code).toBe(0);
    const rawKey = run.stdout.trim();
    expect(rawKey).toMatch(/^slc_dev_[A-Za-z0-9_-]{43}$/);
    expect(run.stderr).toMatch(/shown once/);
    expect(run.stderr).toContain(`${old.visible} ended`);
    expect(await keySlots(ws)).toBe(slots);
    expect(await call(old.rawKey)).toEqual({ status: 401, code: 'invalid_api_key' });
    expect(await call(rawKey)).toEqual({ status: 200 });

    await stack.settled(ws);
    const shown = await ok<{ keyId: string; visible: string; state: string; name: string; creditLimit: { micros: number; window: string }; window: { settledMicros: number; heldMicros: number }; lastUsedAt: string | null }>([
      'key', 'show', '-w', ws, '--key', old.keyId,
    ]);
    expect(shown).toMatchObject({ keyId: old.keyId, visible: `slc_dev_…${rawKey.slice(-4)}`, state: 'live', name: 'ci', creditLimit: { micros: 1_234_000_000, window: 'daily' } });
    expect(shown.window.settledMicros).toBeGreaterThan(0);
    expect(shown.window.heldMicros).toBe(0);
    expect(shown.lastUsedAt).not.toBeNull();
    const text = await human(['key', 'show', '-w', ws, '--key', old.keyId]);
    expect(text).toMatch(/^limit +USD 12\.34 per daily window$/m);
    expect(text).toMatch(/^window +\S+: settled USD 0\.\d+, held USD 0\.00$/m);
    expect((await refused(['key', 'show', '-w', ws, '--key', 'slc_dev_...zzzz'])).code).toBe('key_not_found');
  });

  it('reads one request\'s usage row by its request id, and usage by member', async () => {
    // A gateway's request id carries its start, which puts its row at a key the store can name.
    const startedAt = Date.now();
    const id = `req_${requestIdDigits(startedAt, '10000000000001')}`;
    const row = {
      // The store's layout: a workspace's rows spread over partitions by request id, settled.
      ...requestRowKey(ws, id, startedAt),
      state: 'settled',
      workspaceId: ws,
      requestId: id,
      keyId: 'key_x',
      family: 'chat_completions',
      requestedModel: 'local/sim-small',
      servedBy: 'local/sim-small',
      provider: 'local',
      stream: false,
      byok: false,
      status: 200,
      outcome: 'ok',
      inputTokens: 12,
      cachedInputTokens: 0,
      outputTokens: 3,
      reasoningTokens: 0,
      chargeMicros: 4321,
      holdMicros: 9999,
      attempts: 1,
      startedAt,
      durationMs: 15,
    };
    await stack.tables.doc.send(new PutCommand({ TableName: `${stack.tables.prefix}usage`, Item: { ...row, ttl: Math.floor(Date.now() / 1000) + 86_400 } }));
    // The fields an operator uses (docs/operations.md), never the store's keys or TTL.
    await expect(ok(['usage', 'request', id, '-w', ws])).resolves.toEqual({
      requestId: id,
      workspaceId: ws,
      keyId: 'key_x',
      memberId: null,
      family: 'chat_completions',
      requestedModel: 'local/sim-small',
      servedBy: 'local/sim-small',
      provider: 'local',
      stream: false,
      byok: false,
      status: 200,
      outcome: 'ok',
      inputTokens: 12,
      cachedInputTokens: 0,
      outputTokens: 3,
      reasoningTokens: 0,
      estimated: false,
      chargeMicros: 4321,
      uncollectedMicros: 0,
      holdMicros: 9999,
      attempts: 1,
      startedAt: new Date(row.startedAt).toISOString(),
      durationMs: 15,
      firstByteMs: null,
    });
    expect(await human(['usage', 'request', id, '-w', ws])).toMatch(/^charge +USD 0\.00004321 \(held USD 0\.00009999\)$/m);
    expect((await refused(['usage', 'request', 'req_nope', '-w', ws])).code).toBe('usage_not_found');
    const report = await ok<{ byMember: unknown[] }>(['usage', '-w', ws]);
    expect(Array.isArray(report.byMember)).toBe(true);
  });

  it('records every change in the audit trail with who, what, when and request id, and no secret', async () => {
    const trail = await ok<{ entries: { who: string; action: string; workspaceId: string; requestId: string; at: string; summary: Record<string, unknown> }[] }>([
      'audit', 'list', '-w', ws, '--limit', '200',
    ]);
    const actions = trail.entries.map((e) => e.action);
    for (const a of ['workspace.create', 'credit.add', 'credit.adjust', 'workspace.limit', 'workspace.low-credit', 'workspace.spend-cap', 'workspace.permit.add', 'workspace.permit.remove', 'member.add', 'byok.set', 'byok.remove', 'key.create', 'key.revoke', 'key.rotate', 'key.limit']) {
      expect(actions).toContain(a);
    }
    // The repeated top-up changed nothing and is not recorded as a change; three applied.
    expect(actions.filter((a) => a === 'credit.add')).toHaveLength(3);
    for (const e of trail.entries) {
      expect(e.who).toBe('local');
      expect(e.workspaceId).toBe(ws);
      expect(e.requestId).toMatch(/^req_/);
    }
    const text = JSON.stringify(trail);
    expect(text).not.toContain('sk-byok-secret-value');
    expect(text).not.toMatch(/slc_dev_[A-Za-z0-9_-]{43}/);
    // Newest first.
    expect(trail.entries.map((e) => e.at)).toEqual([...trail.entries.map((e) => e.at)].sort().reverse());
    const catalog = await ok<{ entries: { action: string }[] }>(['audit', 'list', '-w', 'catalog']);
    expect(catalog.entries.map((e) => e.action)).toContain('catalog.import');
    const today = await ok<{ entries: { action: string }[] }>(['audit', 'list']);
    expect(today.entries.length).toBeGreaterThan(10);
    expect((await human(['audit', 'list', '-w', ws, '--csv'])).split('\n')[0]).toBe('when,who,action,workspace,request,summary');
  });
});

describe('the CLI writes no table itself', () => {
  /** Every module `cli/main.ts` loads, following relative imports. */
  function importGraph(entry: string): Map<string, string[]> {
    const graph = new Map<string, string[]>();
    const visit = (file: string): void => {
      if (graph.has(file)) return;
      const text = readFileSync(file, 'utf8');
      // `import type` is erased when compiled: only what runs counts.
      const specs = [...text.matchAll(/(?:^|\n)\s*(?:import|export)\s(?!type\s)[^;]*?from\s+'([^']+)'/g)].map((m) => m[1] as string);
      graph.set(file, specs);
      for (const spec of specs) if (spec.startsWith('.')) visit(`${resolve(file, '..', spec)}.ts`);
    };
    visit(entry);
    return graph;
  }

  it('loads no DynamoDB or Secrets Manager client anywhere in its import graph', () => {
    const graph = importGraph(resolve(__dirname, '../../cli/main.ts'));
    expect(graph.size).toBeGreaterThan(5);
    for (const [file, specs] of graph) {
      for (const spec of specs) {
        expect([file, spec]).not.toEqual([file, expect.stringMatching(/^@aws-sdk\/(client-dynamodb|lib-dynamodb|client-secrets-manager|util-dynamodb)$/)]);
      }
    }
  });

  it('works with every AWS endpoint pointed at nothing: only the management API is called', async () => {
    const env = { ...admin.env, AWS_ENDPOINT_URL: 'http://127.0.0.1:9', AWS_ENDPOINT_URL_DYNAMODB: 'http://127.0.0.1:9', SLUICE_DYNAMODB_ENDPOINT: 'http://127.0.0.1:9' };
    const run = await sluice(['workspace', 'create', '--name', 'Through the API', '--json'], { env });
    expect(run.code).toBe(0);
    const { workspaceId } = JSON.parse(run.stdout) as { workspaceId: string };
    const item = await stack.tables.doc.send(new GetCommand({ TableName: `${stack.tables.prefix}workspaces`, Key: { pk: workspaceId, sk: 'META' }, ConsistentRead: true }));
    expect(item.Item?.['name']).toBe('Through the API');
  });
});
