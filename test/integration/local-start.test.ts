/**
 * `npm start` end to end: the real start script in a child process (its own data folders), the
 * official openai client against it, then Ctrl-C, and a second start on the same data.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { DynamoDBDocumentClient, ScanCommand } from '@aws-sdk/lib-dynamodb';
import OpenAI from 'openai';
import { isAlive, isDynamoLocalProcess } from '../../local/dynamo-local';
import { freePort } from '../../local/free-port';
import { makeDynamoClient } from '../../local/tables';
import { expectLoopbackOnly } from '../support/loopback-only';

const REPO = resolve(__dirname, '../..');

interface Run {
  readonly child: ChildProcess;
  readonly output: () => string;
  readonly exited: Promise<number | null>;
}

function startLocal(home: string, port: number): Run {
  // The console on any free port: its default (8790) may be another run's.
  const env: NodeJS.ProcessEnv = { ...process.env, SLUICE_LOCAL_HOME: home, PORT: String(port), SLUICE_CONSOLE_PORT: '0', SLUICE_LOCAL_NOTIFY_EVERY_MS: '300' };
  for (const name of Object.keys(env)) if (name.startsWith('SLUICE_PROVIDER_KEY_') || name === 'SLUICE_LOCAL_SECRETS_FILE') delete env[name];
  // A real provider's key (never used here): the simulator must still serve beside it.
  env.SLUICE_PROVIDER_KEY_OPENAI = 'sk-test-never-sent';
  // Its own process group, so the test can send Ctrl-C the way a terminal does.
  // As `npm start` runs it: node with tsx's loader, no wrapper process between the signal and it.
  const child = spawn(process.execPath, ['--import', 'tsx', 'local/start.ts'], {
    cwd: REPO,
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let text = '';
  child.stdout?.on('data', (d: Buffer) => (text += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (text += d.toString()));
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  return { child, output: () => text, exited };
}

async function waitFor(run: Run, marker: string, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!run.output().includes(marker)) {
    if (run.child.exitCode !== null) throw new Error(`npm start exited early:\n${run.output()}`);
    if (Date.now() > deadline) throw new Error(`no "${marker}" within ${ms} ms:\n${run.output()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function interrupt(run: Run): void {
  if (run.child.pid !== undefined && run.child.exitCode === null) process.kill(-run.child.pid, 'SIGINT');
}

/** `.dynamodb/` and `.sluice/` are the user's alone: folders 0700, every file in them 0600. */
function expectOwnerOnly(home: string): void {
  for (const folder of ['.dynamodb', '.sluice']) {
    const dir = join(home, folder);
    expect({ dir: folder, mode: statSync(dir).mode & 0o777 }).toEqual({ dir: folder, mode: 0o700 });
    const files = readdirSync(dir);
    expect(files.length).toBeGreaterThan(0);
    for (const name of files) expect({ name, mode: statSync(join(dir, name)).mode & 0o777 }).toEqual({ name, mode: 0o600 });
  }
  expect(readdirSync(join(home, '.dynamodb'))).toContain('shared-local-instance.db');
}

interface StateFile {
  endpoint: string;
  tablePrefix: string;
  gatewayUrl: string;
  simulatorUrl: string;
  pids: { start: number; dynamodb: number };
}

describe('npm start', () => {
  let home: string;
  const runs: Run[] = [];
  let dynamoPids: number[] = [];

  beforeAll(async () => {
    home = await mkdtemp(join(tmpdir(), 'sluice-start-'));
  });
  afterAll(async () => {
    // Whatever a failed assertion left running: the start script's group, then its database,
    // each by its own id (the database's checked to still be DynamoDB Local).
    for (const run of runs) {
      if (run.child.pid !== undefined && run.child.exitCode === null) {
        process.kill(-run.child.pid, 'SIGKILL');
        await run.exited;
      }
    }
    for (const pid of dynamoPids) if (isDynamoLocalProcess(pid)) process.kill(pid, 'SIGKILL');
    await rm(home, { recursive: true, force: true });
  });

  it('serves the gateway, aggregates usage, stops cleanly on Ctrl-C, and keeps its data', async () => {
    const port = await freePort('127.0.0.1');
    const first = startLocal(home, port);
    runs.push(first);
    await waitFor(first, 'Ctrl-C stops everything', 150_000);

    const state = JSON.parse(readFileSync(join(home, '.sluice', 'local.json'), 'utf8')) as StateFile;
    dynamoPids.push(state.pids.dynamodb);
    expect(state).toMatchObject({
      tablePrefix: 'sluice-local-',
      gatewayUrl: `http://127.0.0.1:${port}/v1`,
      pids: { start: expect.any(Number), dynamodb: expect.any(Number) },
    });
    expect(isDynamoLocalProcess(state.pids.dynamodb)).toBe(true);
    // DynamoDB Local answers on loopback only: from the machine's network address it is refused.
    expect(state.endpoint).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    await expectLoopbackOnly(Number(new URL(state.endpoint).port));
    const seed = JSON.parse(readFileSync(join(home, '.sluice', 'seed.json'), 'utf8')) as Record<string, unknown>;
    expect(Object.keys(seed)).toEqual(['workspaceId']); // never the raw key

    // The management API on loopback: printed, behind a 0600 admin token, and what sluice calls.
    const adminUrl = (state as unknown as { adminUrl: string }).adminUrl;
    expect(adminUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(first.output()).toContain(`Admin API  ${adminUrl}/admin/v1`);
    const tokenFile = join(home, '.sluice', 'admin-token');
    expect(statSync(tokenFile).mode & 0o777).toBe(0o600);
    const token = readFileSync(tokenFile, 'utf8').trim();
    const cliEnv = { ...process.env, SLUICE_LOCAL_STATE: join(home, '.sluice', 'local.json') };
    const shown = JSON.parse(
      execFileSync(process.execPath, [join(REPO, 'bin', 'sluice.js'), 'workspace', 'show', '-w', String(seed.workspaceId), '--json'], { env: cliEnv }).toString(),
    ) as { balance: { available: { micros: number } } };
    expect(shown.balance.available.micros).toBe(10_000_000_000);
    expect((await fetch(`${adminUrl}/admin/v1/workspaces`)).status).toBe(401);
    // The seed's workspace, credit and key are audited like any change to money and keys, as `seed`.
    const seedAudit = JSON.parse(
      execFileSync(process.execPath, [join(REPO, 'bin', 'sluice.js'), 'audit', 'list', '-w', String(seed.workspaceId), '--json'], { env: cliEnv }).toString(),
    ) as { entries: { who: string; action: string; workspaceId: string; summary: Record<string, unknown> }[] };
    expect(seedAudit.entries.map((e) => [e.action, e.who, e.workspaceId]).sort()).toEqual(
      [['credit.add', 'seed', seed.workspaceId], ['key.create', 'seed', seed.workspaceId], ['workspace.create', 'seed', seed.workspaceId]],
    );
    expect(seedAudit.entries.find((e) => e.action === 'credit.add')?.summary).toMatchObject({ amountMicros: 10_000_000_000 });
    const seedKey = seedAudit.entries.find((e) => e.action === 'key.create')?.summary as { keyId: string; visible: string };
    expect(seedKey.keyId).toMatch(/^key_/);
    const history = JSON.parse(
      execFileSync(process.execPath, [join(REPO, 'bin', 'sluice.js'), 'credit', 'history', '-w', String(seed.workspaceId), '--json'], { env: cliEnv }).toString(),
    ) as { entries: { who: string; amountMicros: number }[] };
    expect(history.entries).toEqual([expect.objectContaining({ who: 'seed', amountMicros: 10_000_000_000 })]);

    // The console: printed, on localhost (a WebAuthn RP needs a domain), its sign-in page served.
    const consoleUrl = (state as unknown as { consoleUrl: string }).consoleUrl;
    expect(consoleUrl).toMatch(/^http:\/\/localhost:\d+$/);
    expect(first.output()).toContain(`Console    ${consoleUrl}/console/`);
    const signin = await fetch(`${consoleUrl.replace('localhost', '127.0.0.1')}/console/signin`);
    expect(signin.status).toBe(200);
    expect(await signin.text()).toContain('Sign in with a passkey');

    const rawKey = /API key\s+(slc_\S+)/.exec(first.output())?.[1];
    expect(rawKey).toBeDefined();
    expect(seedKey.visible).toBe(`${rawKey?.slice(0, 8)}…${rawKey?.slice(-4)}`);
    expect(JSON.stringify(seedAudit)).not.toContain(rawKey);
    const client = new OpenAI({ baseURL: state.gatewayUrl, apiKey: rawKey, maxRetries: 0 });
    const reply = await client.chat.completions.create({
      model: 'local/sim-small',
      messages: [{ role: 'user', content: 'Hello' }],
    });
    expect(reply.choices[0]?.message.content).toEqual(expect.any(String));
    const stream = await client.chat.completions.create({
      model: 'local/sim-small',
      messages: [{ role: 'user', content: 'Hello' }],
      stream: true,
    });
    let streamed = '';
    for await (const chunk of stream) streamed += chunk.choices[0]?.delta.content ?? '';
    expect(streamed.length).toBeGreaterThan(0);

    // The usage rows reach the aggregator through the polled stream.
    const db = makeDynamoClient(state.endpoint);
    try {
      const doc = DynamoDBDocumentClient.from(db);
      const deadline = Date.now() + 20_000;
      let rollups = 0;
      while (rollups === 0 && Date.now() < deadline) {
        rollups = (await doc.send(new ScanCommand({ TableName: 'sluice-local-rollups', Select: 'COUNT' }))).Count ?? 0;
        if (rollups === 0) await new Promise((r) => setTimeout(r, 200));
      }
      expect(rollups).toBeGreaterThan(0);
    } finally {
      db.destroy();
    }

    // The simulator serves beside a real provider whose key is set.
    expect(first.output()).toContain('provider keys set (SLUICE_PROVIDER_KEY_OPENAI)');
    expect(first.output()).toContain('upstream simulator (provider "local")');

    // A provider and a model added at run time (kept by the next start, below).
    const sluice = (args: string[], input = ''): string =>
      execFileSync(process.execPath, [join(REPO, 'bin', 'sluice.js'), ...args, '--json'], { env: cliEnv, input }).toString();
    sluice(['provider', 'add', 'selfhosted', '--base-url', state.simulatorUrl, '--auth', 'none']);
    sluice(['model', 'add', 'selfhosted/sim-small', '--input-price', '0.10', '--output-price', '0.40', '--max-output', '1000']);
    // Local mode's own provider lists at the simulator's real address, not the catalog's placeholder.
    const providers = (JSON.parse(sluice(['provider', 'list'])) as { providers: { name: string; baseUrl: string | null }[] }).providers;
    expect(state.simulatorUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
    expect(providers.find((p) => p.name === 'local')?.baseUrl).toBe(state.simulatorUrl);
    expect(providers.find((p) => p.name === 'selfhosted')?.baseUrl).toBe(state.simulatorUrl);

    // The low-credit notice, locally: one log line and one event per crossing, never one per run.
    sluice(['workspace', 'low-credit', '-w', String(seed.workspaceId), '--threshold', '1000000']);
    await waitFor(first, 'low credit: workspace', 20_000);
    const eventsFile = join(home, '.sluice', 'events.jsonl');
    const firstEvents = readFileSync(eventsFile, 'utf8').trim().split('\n');
    expect(firstEvents).toHaveLength(1);
    expect(JSON.parse(firstEvents[0] ?? '')).toMatchObject({ source: 'sluice', 'detail-type': 'Low credit', detail: { workspaceId: seed.workspaceId, stage: 'local' } });
    await new Promise((r) => setTimeout(r, 1_500)); // several more runs of the 300 ms timer
    expect(readFileSync(eventsFile, 'utf8').trim().split('\n')).toHaveLength(1);
    expect(first.output().split('low credit: workspace').length - 1).toBe(1);

    expectOwnerOnly(home);
    interrupt(first);
    expect(await first.exited).toBe(0);
    expect(isAlive(state.pids.dynamodb)).toBe(false);
    expect(existsSync(join(home, '.sluice', 'local.json'))).toBe(false);

    // Second start, same data: no new key is printed, the first one still works.
    const second = startLocal(home, port);
    runs.push(second);
    await waitFor(second, 'Ctrl-C stops everything', 150_000);
    const state2 = JSON.parse(readFileSync(join(home, '.sluice', 'local.json'), 'utf8')) as StateFile;
    dynamoPids.push(state2.pids.dynamodb);
    await expectLoopbackOnly(Number(new URL(state2.endpoint).port));
    expectOwnerOnly(home);
    expect(second.output()).toContain(`key create --workspace ${String(seed.workspaceId)}`);
    expect(second.output()).not.toMatch(/API key\s+slc_/);
    // The admin token is created once and kept.
    expect(readFileSync(join(home, '.sluice', 'admin-token'), 'utf8').trim()).toBe(token);
    const again = await new OpenAI({ baseURL: state2.gatewayUrl, apiKey: rawKey, maxRetries: 0 }).models.list();
    expect(again.data.length).toBeGreaterThan(0);
    // The restart re-imported config/ and kept what was added at run time.
    expect(second.output()).toContain('kept 1 providers and 1 models config/ does not list');
    const kept = JSON.parse(
      execFileSync(process.execPath, [join(REPO, 'bin', 'sluice.js'), 'catalog', 'list', '--provider', 'selfhosted', '--json'], { env: { ...cliEnv } }).toString(),
    ) as { models: { id: string }[] };
    expect(kept.models.map((m) => m.id)).toEqual(['selfhosted/sim-small']);

    interrupt(second);
    expect(await second.exited).toBe(0);
    expect(isAlive(state2.pids.dynamodb)).toBe(false);
    dynamoPids = [];
  }, 360_000);
});
