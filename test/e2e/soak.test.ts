/**
 * A soak in the project's own suite (issue 14, item 7): many concurrent clients with the official
 * `openai` client send mixed requests (chat and responses, streamed and not, pinned models and a
 * routing profile, a bring-your-own-key workspace, tool calls) with random client aborts and
 * simulator faults on demand; the store is paused (SIGSTOP on this file's own DynamoDB Local) part
 * way; and one gateway process is SIGKILLed between admission and settlement, then restarted.
 * At the end, for every workspace: credited = available + held + spent, nothing held after the
 * sweeper, one usage row per admitted request (none twice, spent = the sum of the rows' charges),
 * and zero 500s.
 *
 * Short by default (about 15 s of load, under a minute with start-up); `SLUICE_SOAK_SECONDS=300`
 * runs a long one. Figures are printed at the end.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI, { APIError } from 'openai';
import { LocalFileSecretStore, createProfile, setByokKey } from '../../local/ops';
import { DynamoLedger } from '../../lambdas/adapters/dynamo-ledger';
import { tableName } from '../../lambdas/shared/schema';
import { sweep } from '../../lambdas/sweeper/sweep';
import { type DynamoLocal, startDynamoLocal } from '../../local/dynamo-local';
import { startStack, expectInvariant, type TestStack } from '../support/stack';

const SECONDS = Number(process.env.SLUICE_SOAK_SECONDS ?? '15');
const CLIENTS = Number(process.env.SLUICE_SOAK_CLIENTS ?? '8');
const CHILD_LIMIT_MS = 5_000;
jest.setTimeout((SECONDS + 90) * 1000);

let db: DynamoLocal;
let stack: TestStack;
let secretsDir: string;
const children: ChildProcess[] = [];

beforeAll(async () => {
  db = await startDynamoLocal({ readyTimeoutMs: 60_000 });
  secretsDir = mkdtempSync(path.join(tmpdir(), 'sluice-soak-'));
  stack = await startStack({
    dynamoEndpoint: db.endpoint,
    creditMinor: 1_000_000,
    env: { SLUICE_LOCAL_SECRETS_FILE: path.join(secretsDir, 'secrets.json'), SLUICE_KEY_RATE_PER_MINUTE: '100000', SLUICE_CATALOG_CACHE_TTL_MS: '600000' },
  });
});

afterAll(async () => {
  try {
    process.kill(db.pid, 'SIGCONT');
  } catch {
    // gone already
  }
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await stack?.close();
  await db?.stop();
  rmSync(secretsDir, { recursive: true, force: true });
});

/** Starts the gateway in a child process on the stack's tables and simulator. */
async function childGateway(): Promise<{ url: string; proc: ChildProcess }> {
  // `node --import tsx` runs the script in this very process (the tsx CLI would put it in a child
  // of its own, which a SIGKILL of the CLI would orphan, still serving).
  const proc = spawn(process.execPath, ['--import', 'tsx', path.join(__dirname, '../support/gateway-process.ts')], {
    env: {
      ...process.env,
      SLUICE_STAGE: 'local',
      SLUICE_TABLE_PREFIX: stack.tables.prefix,
      SLUICE_DYNAMODB_ENDPOINT: db.endpoint,
      SLUICE_SECRET_SOURCE: 'env',
      SLUICE_LOCAL_UPSTREAM_URL: stack.sim.url,
      SLUICE_LOCAL_SECRETS_FILE: path.join(secretsDir, 'secrets.json'),
      SLUICE_REQUEST_LIMIT_MS: String(CHILD_LIMIT_MS),
      SLUICE_HOLD_GRACE_MS: '0',
    },
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  children.push(proc);
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    proc.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening (\S+)/.exec(out);
      if (m !== null) resolve(m[1] as string);
    });
    proc.once('exit', () => reject(new Error('the gateway process exited before serving')));
  });
  return { url, proc };
}

interface Tally {
  requests: number;
  ok: number;
  aborts: number;
  faults: number;
  refused: Record<string, number>;
  five00: number;
  admittedIds: Set<string>;
}

it('mixed load, aborts, faults, a store pause and a killed gateway: every workspace exact at the end', async () => {
  const started = Date.now();
  // Workspaces: the seeded one, a second with a routing profile, a third on its own provider key.
  const second = await stack.seed(1_000_000);
  await createProfile(stack.admin, { workspaceId: second.workspaceId, identifier: 'chain', models: ['local/sim-small', 'local/sim-large'] });
  const byok = await stack.seed(1_000);
  await setByokKey({ ...stack.admin, secrets: new LocalFileSecretStore(path.join(secretsDir, 'secrets.json')) }, { workspaceId: byok.workspaceId, provider: 'local', apiKey: 'sk-soak-own-key-0001' });
  const keys = [stack.rawKey, second.rawKey, byok.rawKey];
  const workspaces = [stack.workspaceId, second.workspaceId, byok.workspaceId];

  const tally: Tally = { requests: 0, ok: 0, aborts: 0, faults: 0, refused: {}, five00: 0, admittedIds: new Set() };
  const deadline = Date.now() + SECONDS * 1000;
  const rnd = (n: number): number => Math.floor(Math.random() * n);

  const one = async (): Promise<void> => {
    const w = rnd(3);
    const client = new OpenAI({ baseURL: stack.baseURL, apiKey: keys[w], maxRetries: 0, timeout: 30_000 });
    const stream = rnd(2) === 0;
    // Broken bodies are scripted on sim-reasoning, which only streams take: a broken non-streamed
    // body is a 500 by design (a provider fault), and this run counts Sluice's own 500s.
    const model = w === 1 && rnd(2) === 0 ? 'profile/chain' : stream && rnd(3) === 0 ? 'local/sim-reasoning' : rnd(3) === 0 ? 'local/sim-large' : 'local/sim-small';
    const abort = new AbortController();
    const aborting = rnd(10) === 0;
    if (aborting) setTimeout(() => abort.abort(), 5 + rnd(60));
    const tools = rnd(4) === 0 ? [{ type: 'function' as const, function: { name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } } }] : undefined;
    tally.requests += 1;
    try {
      if (!stream && rnd(3) === 0 && model !== 'profile/chain') {
        const { data, response } = await client.responses.create({ model, input: 'Tell me something', max_output_tokens: 40 }, { signal: abort.signal }).withResponse();
        tally.admittedIds.add(response.headers.get('x-request-id') ?? '');
        if (data.id !== undefined) tally.ok += 1;
      } else if (stream) {
        const s = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Say something' }], max_tokens: 30, stream: true, ...(tools ? { tools } : {}) }, { signal: abort.signal }).withResponse();
        tally.admittedIds.add(s.response.headers.get('x-request-id') ?? '');
        for await (const _chunk of s.data) {
          // read it all
        }
        tally.ok += 1;
      } else {
        const { response } = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Say something' }], max_tokens: 30, ...(tools ? { tools } : {}) }, { signal: abort.signal }).withResponse();
        tally.admittedIds.add(response.headers.get('x-request-id') ?? '');
        tally.ok += 1;
      }
    } catch (err) {
      if (err instanceof APIError && err.status !== undefined) {
        const key = `${err.status} ${String(err.code)}`;
        tally.refused[key] = (tally.refused[key] ?? 0) + 1;
        if (err.status === 500) tally.five00 += 1;
      } else if (aborting) {
        tally.aborts += 1;
      } else if (err instanceof APIError) {
        // An in-band error frame after the status (a fault on demand): the request was admitted.
        tally.faults += 1;
      } else {
        throw err;
      }
    }
  };

  const client = async (): Promise<void> => {
    while (Date.now() < deadline) await one();
  };

  // Faults on demand, now and then: a reset mid-stream, a malformed frame, a provider rate limit.
  const faults = setInterval(() => {
    const broken = [
      { kind: 'reset' as const, afterChunks: 2 },
      { kind: 'malformed' as const, afterChunks: 1 },
      { kind: 'stream-error' as const, afterChunks: 2 },
    ];
    const any = [{ kind: 'error' as const, status: 429 }, { kind: 'ok' as const, omitUsage: true }];
    stack.sim.script('sim-reasoning', [broken[rnd(broken.length)]!]);
    stack.sim.script(rnd(2) === 0 ? 'sim-small' : 'sim-large', [any[rnd(any.length)]!]);
  }, 200);

  // The store pauses for 3 s a third of the way in.
  const pause = (async () => {
    await new Promise((r) => setTimeout(r, (SECONDS * 1000) / 3));
    process.kill(db.pid, 'SIGSTOP');
    await new Promise((r) => setTimeout(r, 3_000));
    process.kill(db.pid, 'SIGCONT');
  })();

  // Half way: a gateway process killed between admission and settlement, then a new one serving.
  const kill = (async () => {
    await new Promise((r) => setTimeout(r, (SECONDS * 1000) / 2));
    const first = await childGateway();
    // A model no client of the load uses, so this script is this request's.
    stack.sim.script('org/sim-nested', [{ kind: 'ok', chunkDelayMs: 400, completionTokens: 30 }]);
    const res = await fetch(`${first.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.rawKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'local/org/sim-nested', messages: [{ role: 'user', content: 'a long one' }], stream: true, max_tokens: 50 }),
    });
    // Admitted: the status is out. Slow frames keep it between admission and settlement.
    expect(res.status).toBe(200);
    first.proc.kill('SIGKILL');
    await new Promise((r) => first.proc.once('exit', r));
    await res.text().catch(() => undefined);
    const second = await childGateway();
    const again = await fetch(`${second.url}/v1/models`, { headers: { authorization: `Bearer ${stack.rawKey}` } });
    expect(again.status).toBe(200);
    second.proc.kill('SIGTERM');
    return res.headers.get('x-request-id');
  })();

  await Promise.all(Array.from({ length: CLIENTS }, client));
  clearInterval(faults);
  await pause;
  const killedId = await kill;
  expect(killedId).toMatch(/^req_/);

  // Every live request settles; the killed one's hold expires and the sweeper settles it.
  for (const w of workspaces) {
    const open = async (): Promise<number> => (await stack.balance(w)).heldMicros;
    for (let i = 0; i < 200 && (await open()) > 0 && w !== stack.workspaceId; i += 1) await new Promise((r) => setTimeout(r, 50));
  }
  const t = (name: Parameters<typeof tableName>[1]): string => tableName(stack.tables.prefix, name);
  const ledger = new DynamoLedger(stack.tables.doc, { ledger: t('ledger'), usage: t('usage') });
  const swept = await sweep({ doc: stack.tables.doc, usageTable: t('usage'), ledger, stage: 'local', writeLine: () => undefined }, Date.now() + CHILD_LIMIT_MS + 1_000);
  expect(swept.swept).toBeGreaterThanOrEqual(1);
  await stack.settled(stack.workspaceId, 30_000);

  let rowsTotal = 0;
  for (const w of workspaces) {
    const b = await stack.balance(w);
    expectInvariant(b);
    expect(b.heldMicros).toBe(0);
    const rows = await stack.usageRows(w);
    const ids = rows.map((r) => r.requestId);
    expect(new Set(ids).size).toBe(ids.length); // no request settled twice
    expect(rows.reduce((sum, r) => sum + r.chargeMicros, 0)).toBe(b.spentMicros); // no charge twice, none lost
    rowsTotal += rows.length;
  }
  const allIds = new Set((await Promise.all(workspaces.map((w) => stack.usageRows(w)))).flat().map((r) => r.requestId));
  // Every request the clients saw admitted (a 200 status) has its one row; so does the killed one.
  for (const id of tally.admittedIds) if (id !== '') expect(allIds.has(id)).toBe(true);
  expect(allIds.has(killedId as string)).toBe(true);
  expect(tally.five00).toBe(0);
  expect(tally.ok).toBeGreaterThan(10);

  const figures = {
    seconds: Math.round((Date.now() - started) / 1000),
    clients: CLIENTS,
    requests: tally.requests,
    ok: tally.ok,
    aborts: tally.aborts,
    inBandFaults: tally.faults,
    refusals: tally.refused,
    usageRows: rowsTotal,
    swept: swept.swept,
  };
  process.stdout.write(`soak: ${JSON.stringify(figures)}\n`);
});
