/**
 * A region lost, Sluice serves on (issue 23), end to end on `npm run start:regions`: the real start
 * script in a child process (its own data folders, free ports), two DynamoDB Locals with the
 * replicator between them, a gateway process per region, the front door on one port, and the
 * official `openai` client on that one address. Nothing of DynamoDB is mocked.
 *
 * - **A region lost mid-load**: clients keep sending; the home region's gateway process group and
 *   its DynamoDB Local are killed with SIGKILL while requests are in flight there; serving through
 *   the front door resumes from the other region (asserted; the time it took is printed, never
 *   asserted). Then the region is brought back (SIGUSR2 to the start) and serves again.
 * - **Races across both regions**, once it is back (its requests in flight when it died wait for
 *   its sweeper meanwhile): 200 requests at once on a workspace whose balance fits fewer,
 *   and 200 on a key whose credit limit fits fewer (the workspace is rich), spread over both regions
 *   by the front door, each on a balance split between the regions (the top-up sends the other
 *   region its part, once its sweeper has marked it running; one request in the other region first
 *   moves it there by ask otherwise, as its own traffic would).
 *   Each admitted reply stalls after its first frame (the simulator is told so)
 *   until every request has its answer, so nothing settles and frees money mid-race: exactly what
 *   fits is admitted, the rest refused 402 with its own code.
 * - **After replication catches up** (both replicas hold the same items for every workspace of the
 *   test): for every workspace, summed over both regions, credited = available + held + spent,
 *   credited is exactly what was topped up (nothing in transit, nothing lost), nothing is held,
 *   nothing is spent beyond credit; every request's row is settled, once; the spent money is the
 *   sum of the rows' charges; every reply a client received has its row (no lost charge); the
 *   aggregator's totals count every row once (requests and charge); the key's rows stay within
 *   its limit.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { DynamoDBDocumentClient, ScanCommand } from '@aws-sdk/lib-dynamodb';
import OpenAI from 'openai';
import { isAlive } from '../../local/dynamo-local';
import { freePort } from '../../local/free-port';
import type { RegionsStateFile } from '../../local/regions/settings';
import { makeDynamoClient } from '../../local/tables';
import { tableName } from '../../lambdas/shared/schema';
import { expectLoopbackOnly } from '../support/loopback-only';
import { regionSetupFromEnv, type RegionSetup } from '../../lambdas/store/regions';
import { type RegionalBalance, readRegionalBalance } from '../../lambdas/store/regions-balance';

jest.setTimeout(600_000);

const REPO = resolve(__dirname, '../..');
const RACE = 200;
/** Long enough that no admitted race request ends on its own before every answer is in; each is ended by its client. */
const RACE_STALL_MS = 150_000;
/**
 * Longer than any race takes on a loaded machine: a race's exactness holds only while every admitted
 * stream is still open (the gateway ending one at this limit settles it and frees its hold, and the
 * race then rightly admits more than fit at the start). It also bounds how long the lost region's
 * holds wait for its sweeper after it returns.
 */
const REQUEST_LIMIT_MS = 140_000;
/**
 * How long a race request is retried on `503 balance_unavailable` (and on no answer), from the
 * race's start: well inside {@link REQUEST_LIMIT_MS}, so every admitted stream is still open when
 * the last answer comes (asserted).
 */
const RACE_RETRY_MS = 100_000;
/** Workers sending requests through the front door while a region is lost. */
const LOAD_WORKERS = 6;
const MICROS_PER_MINOR = 1_000_000;
const SETUP = regionSetupFromEnv({ SLUICE_REGIONS: 'us-east-1,us-west-2' }) as RegionSetup;

interface Run {
  readonly child: ChildProcess;
  readonly output: () => string;
  readonly exited: Promise<number | null>;
}

let home: string;
let run: Run | undefined;
/** Every region process and DynamoDB Local PID seen, each leading its own process group. */
const groups = new Set<number>();
let state: RegionsStateFile;
let adminToken: string;
const db = new Map<string, DynamoDBDocumentClient>();

function startRegions(port: number): Run {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    SLUICE_LOCAL_HOME: home,
    PORT: String(port),
    SLUICE_ADMIN_PORT: '0',
    SLUICE_CONSOLE_PORT: '0',
    SLUICE_REPLICATION_LAG_MS: '250',
    // An urgent transfer is two replication hops and two stream polls; on a loaded machine, room to spare.
    SLUICE_TRANSFER_WAIT_MS: '8000',
    SLUICE_REQUEST_LIMIT_MS: String(REQUEST_LIMIT_MS),
    SLUICE_HOLD_GRACE_MS: '0',
    SLUICE_LOCAL_SWEEP_EVERY_MS: '1000',
    SLUICE_CACHE_TTL_MS: '1000',
    SLUICE_KEY_RATE_PER_MINUTE: '100000',
    // Its two DynamoDB Locals live four or five minutes: C1 only, as the two-region fixture's do.
    SLUICE_DYNAMODB_JIT: 'quick',
  };
  for (const name of Object.keys(env)) if (name.startsWith('SLUICE_PROVIDER_KEY_') || name === 'SLUICE_LOCAL_SECRETS_FILE' || name.startsWith('SLUICE_REGION') || name === 'SLUICE_HOME_REGION') delete env[name];
  const child = spawn(process.execPath, ['--import', 'tsx', 'local/regions/start-regions.ts'], { cwd: REPO, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let text = '';
  child.stdout?.on('data', (d: Buffer) => (text += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (text += d.toString()));
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  return { child, output: () => text, exited };
}

async function waitFor(marker: string, ms: number, from = 0): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(run as Run).output().slice(from).includes(marker)) {
    if ((run as Run).child.exitCode !== null) throw new Error(`start:regions exited early:\n${(run as Run).output()}`);
    if (Date.now() > deadline) throw new Error(`no "${marker}" within ${ms} ms:\n${(run as Run).output().slice(-4000)}`);
    await sleep(100);
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function readState(): RegionsStateFile {
  const read = JSON.parse(readFileSync(join(home, '.sluice', 'regions', 'state.json'), 'utf8')) as RegionsStateFile;
  for (const r of read.regions) for (const pid of [r.gatewayPid, r.dynamodbPid]) if (pid !== null) groups.add(pid);
  return read;
}

/** One call to the home region's management API over HTTP, as the CLI makes it. */
async function admin<T>(method: string, path: string, body?: Record<string, unknown>): Promise<T> {
  const res = await fetch(`${state.adminUrl}/admin/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return JSON.parse(text) as T;
}

interface TestWorkspace {
  readonly workspaceId: string;
  readonly keyId: string;
  readonly rawKey: string;
  /** Everything topped up, micro-units. */
  creditedMicros: number;
}

async function workspace(name: string, creditMinor: number): Promise<TestWorkspace> {
  const ws = await admin<{ workspaceId: string; ownerMemberId: string }>('POST', '/workspaces', { name, ownerEmail: `${name}@localhost` });
  const path = `/workspaces/${encodeURIComponent(ws.workspaceId)}`;
  await admin('POST', `${path}/credit`, { amountMinor: creditMinor, reference: `${name}-credit` });
  const key = await admin<{ keyId: string; rawKey: string }>('POST', `${path}/keys`, { memberId: ws.ownerMemberId, name });
  return { workspaceId: ws.workspaceId, keyId: key.keyId, rawKey: key.rawKey, creditedMicros: creditMinor * MICROS_PER_MINOR };
}

/** The official client through the front door, the one address; its own retries on (5xx, connection errors), as clients use it. */
function client(key: string, maxRetries = 2): OpenAI {
  return new OpenAI({ baseURL: state.baseUrl as string, apiKey: key, maxRetries, timeout: 60_000 });
}

/** Waits until a key is known to every region's gateway (configuration replicated from the home region). */
async function keyEverywhere(key: string): Promise<void> {
  for (const r of state.regions) {
    for (let i = 0; ; i += 1) {
      const res = await fetch(`${r.gatewayUrl}/v1/models`, { headers: { authorization: `Bearer ${key}` } }).catch(() => undefined);
      if (res?.status === 200) break;
      if (i > 300) throw new Error(`key not served by ${r.name}`);
      await sleep(100);
    }
  }
}

async function simulator(path: string, body: unknown): Promise<void> {
  const base = (state.simulatorUrl as string).replace(/\/v1$/, '');
  const res = await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  if (res.status >= 300) throw new Error(`simulator ${path}: ${res.status} ${await res.text()}`);
}

type Item = Record<string, unknown>;

/** Every item of a table, read consistently from one region's replica. */
async function scanAll(region: string, table: Parameters<typeof tableName>[1]): Promise<Item[]> {
  const doc = db.get(region) as DynamoDBDocumentClient;
  const items: Item[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const page = await doc.send(new ScanCommand({ TableName: tableName(state.tablePrefix, table), ConsistentRead: true, ExclusiveStartKey: start }));
    items.push(...((page.Items ?? []) as Item[]));
    start = page.LastEvaluatedKey;
  } while (start !== undefined);
  return items;
}

/** Whether an item belongs to one of the workspaces (any key attribute or `workspaceId` names it). */
const belongsTo = (item: Item, ids: readonly string[]): boolean =>
  ids.some((id) => [item.pk, item.sk, item.workspaceId].some((v) => typeof v === 'string' && v.includes(id)));

const canonical = (items: Item[]): string[] => items.map((i) => JSON.stringify(i, Object.keys(i).sort())).sort();

/** The test's workspaces' items in one region's replica: money (ledger), usage rows, the aggregator's totals. */
async function snapshot(region: string, ids: readonly string[]): Promise<{ ledger: Item[]; usage: Item[]; rollups: Item[] }> {
  const [ledger, usage, rollups] = await Promise.all((['ledger', 'usage', 'rollups'] as const).map(async (t) => (await scanAll(region, t)).filter((i) => belongsTo(i, ids))));
  return { ledger: ledger as Item[], usage: usage as Item[], rollups: rollups as Item[] };
}

/** Waits until both replicas hold the same items of these workspaces, and returns them. */
async function replicated(ids: readonly string[], ms: number): Promise<{ ledger: Item[]; usage: Item[]; rollups: Item[] }> {
  const deadline = Date.now() + ms;
  for (;;) {
    const [a, b] = await Promise.all(state.regions.map((r) => snapshot(r.name, ids)));
    if (a === undefined || b === undefined) throw new Error('two regions expected');
    const same = (['ledger', 'usage', 'rollups'] as const).every((t) => JSON.stringify(canonical(a[t])) === JSON.stringify(canonical(b[t])));
    if (same) return a;
    if (Date.now() > deadline) throw new Error('the two regions did not converge');
    await sleep(250);
  }
}

const num = (v: unknown): number => (typeof v === 'number' ? v : 0);

/** A workspace's money summed over every region, read in one region's replica by the runtime's own reader (slices and transfer counters of each region). */
function money(region: string, workspaceId: string): Promise<RegionalBalance> {
  const tables = { ledger: tableName(state.tablePrefix, 'ledger'), usage: tableName(state.tablePrefix, 'usage') };
  return readRegionalBalance(db.get(region) as DynamoDBDocumentClient, tables, SETUP, workspaceId);
}

/** Open rows (holds) of these workspaces in any region's replica, and what they are (no prompt or reply is in a row). */
async function openRows(ids: readonly string[]): Promise<{ count: number; kinds: Record<string, number> }> {
  let count = 0;
  const kinds: Record<string, number> = {};
  for (const r of state.regions) {
    for (const row of (await scanAll(r.name, 'usage')).filter((i) => belongsTo(i, ids) && i.state === 'open')) {
      count += 1;
      const age = Math.round((Date.now() - num(row.startedAt)) / 10_000) * 10;
      const kind = `in ${r.name}: row of ${String(row.region)}, ws ${ids.indexOf(String(row.workspaceId))}, shard ${String(row.expiryShard)}, ~${age} s old`;
      kinds[kind] = (kinds[kind] ?? 0) + 1;
    }
  }
  return { count, kinds };
}

const RACE_BODY = { model: 'local/sim-large', messages: [{ role: 'user' as const, content: 'race' }], max_tokens: 700, stream: true as const };

interface RaceAnswer {
  readonly admitted: boolean;
  readonly status: number;
  readonly code?: string;
  readonly region: string | null;
  readonly requestId: string | null;
  readonly stream?: AsyncIterable<unknown> & { controller: AbortController };
}

/** `503 balance_unavailable` answers seen in the races (the store too slow on a loaded machine); each was retried. */
let unavailable = 0;
/** Every answer a race attempt got, by the request id it carried (a retried attempt's too): what a row without an admitted answer was told. */
const answered = new Map<string, string>();
/** Race requests that got no answer at all (a connection that failed or timed out on a loaded machine), by message; each was retried. */
const unanswered = new Map<string, number>();

/**
 * One race request: admitted when its stream opens (the reply then stalls), refused otherwise.
 * Retried only on `503 balance_unavailable`, as SPEC tells clients to (the store did not answer
 * in time, or the money is in the other region and has not arrived, so nothing was admitted: the
 * rows counted at the end show it), after its `Retry-After`, and on no answer at all (a connection
 * that failed, as the SDK itself retries); until `retryUntil`; any other answer is final.
 */
async function raceOne(key: string, retryUntil: number): Promise<RaceAnswer> {
  for (let attempt = 1; ; attempt += 1) {
    const more = Date.now() < retryUntil;
    try {
      const { data, response } = await client(key, 0).chat.completions.create(RACE_BODY).withResponse();
      answered.set(response.headers.get('x-sluice-request-id') ?? '', 'admitted');
      return { admitted: true, status: response.status, region: response.headers.get('x-sluice-region'), requestId: response.headers.get('x-sluice-request-id'), stream: data };
    } catch (err) {
      if (!(err instanceof OpenAI.APIError)) throw err;
      answered.set(err.headers?.get('x-sluice-request-id') ?? `none ${answered.size}`, `${err.status ?? 0} ${String(err.code ?? '')}`);
      if (err.status === 503 && err.code === 'balance_unavailable' && more) {
        unavailable += 1;
        await sleep(Math.max(1_000 * Number(err.headers?.get('retry-after') ?? 1), Math.min(3_000, 250 * attempt)));
        continue;
      }
      // No answer at all (the SDK's APIConnectionError: a reused keep-alive socket the front door
      // had closed, or the client's timeout on a loaded machine): the SDK's own default retries
      // these, and so does this. Were the lost attempt admitted, its row would outnumber the
      // answers, which the comparison at the end counts, so nothing admitted is hidden.
      if (err instanceof OpenAI.APIConnectionError && more) {
        unanswered.set(err.message, (unanswered.get(err.message) ?? 0) + 1);
        await sleep(250 * attempt);
        continue;
      }
      return { admitted: false, status: err.status ?? 0, code: String(err.code ?? ''), region: err.headers?.get('x-sluice-region') ?? null, requestId: err.headers?.get('x-sluice-request-id') ?? null };
    }
  }
}

interface Served {
  readonly requestId: string;
  readonly region: string;
  readonly at: number;
}

beforeAll(async () => {
  home = await mkdtemp(join(tmpdir(), 'sluice-regions-'));
  run = startRegions(await freePort('127.0.0.1'));
  await waitFor('Ctrl-C stops everything', 240_000);
  state = readState();
  adminToken = readFileSync(join(home, '.sluice', 'admin-token'), 'utf8').trim();
  for (const r of state.regions) db.set(r.name, DynamoDBDocumentClient.from(makeDynamoClient(r.endpoint)));
});

afterAll(async () => {
  // Shown only when the test fails (the quiet environment): what the regions said.
  if (run !== undefined) console.log(`start:regions output (end):\n${run.output().split('\n').filter((l) => !/^\[[a-z0-9-]+\] \[gateway\] 200 /.test(l)).join('\n').slice(-40_000)}`);
  for (const doc of db.values()) doc.destroy();
  if (run?.child.pid !== undefined && run.child.exitCode === null) {
    process.kill(-run.child.pid, 'SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    const stopped = await Promise.race([run.exited.then(() => true), new Promise<boolean>((done) => (timer = setTimeout(() => done(false), 30_000)))]);
    clearTimeout(timer); // (a pending timer would hold Jest for its whole 30 s)
    if (!stopped) process.kill(-run.child.pid, 'SIGKILL');
  }
  // Whatever a failed assertion or a crash left running: each region part's own process group.
  for (const pid of groups) {
    if (!isAlive(pid)) continue;
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // Gone in between.
    }
  }
  await rm(home, { recursive: true, force: true });
});

it('two regions behind one front door: races admit exactly what fits, a region killed mid-load is served around and comes back, and the ledger stays exact', async () => {
  expect(state.regions.map((r) => r.name)).toEqual(['us-east-1', 'us-west-2']);
  // The front door starts probing once its probe key has reached every region: no region refused a probe as it started.
  expect((run as Run).output().split('\n').filter((l) => l.includes('invalid_api_key'))).toEqual([]);
  expect(state.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
  // Everything on loopback only; each region's data the user's alone.
  for (const r of state.regions) {
    await expectLoopbackOnly(Number(new URL(r.endpoint).port));
    await expectLoopbackOnly(Number(new URL(r.gatewayUrl as string).port));
    expect({ dir: r.dataDir, mode: statSync(r.dataDir).mode & 0o777 }).toEqual({ dir: r.dataDir, mode: 0o700 });
  }
  await expectLoopbackOnly(Number(new URL(state.baseUrl as string).port));
  expect(statSync(join(home, '.sluice', 'regions', 'state.json')).mode & 0o777).toBe(0o600);

  // ---- Calibration: what one race request holds (the same body always holds the same).
  const calibration = await workspace('calibration', 1_000);
  await keyEverywhere(calibration.rawKey);
  const probe = await client(calibration.rawKey).chat.completions.create(RACE_BODY).withResponse();
  for await (const chunk of probe.data) void chunk;
  const probeId = probe.response.headers.get('x-sluice-request-id') as string;
  let holdMicros = 0;
  for (let i = 0; holdMicros === 0 && i < 200; i += 1) {
    for (const r of state.regions) {
      const row = (await scanAll(r.name, 'usage')).find((u) => u.requestId === probeId && u.state !== 'open');
      if (row !== undefined) holdMicros = num(row.holdMicros);
    }
    if (holdMicros === 0) await sleep(100);
  }
  expect(holdMicros).toBeGreaterThan(0);

  // ---- Load through the front door; the home region lost mid-load, then brought back. First, so
  // the lost region's holds (settled by its own sweeper once they expire, a request limit after
  // their start) age while the races run on the regions brought back together.
  const load = await workspace('load', 100_000);
  await keyEverywhere(load.rawKey);
  await simulator('/_sim/default', { model: 'sim-small', behavior: { kind: 'ok', chunkDelayMs: 40 } });
  const served: Served[] = [];
  const failed: string[] = [];
  let stop = false;
  const worker = async (): Promise<void> => {
    const c = client(load.rawKey);
    while (!stop) {
      try {
        const { data, response } = await c.chat.completions.create({ model: 'local/sim-small', messages: [{ role: 'user', content: 'load' }], stream: true }).withResponse();
        for await (const chunk of data) void chunk;
        served.push({ requestId: response.headers.get('x-sluice-request-id') as string, region: response.headers.get('x-sluice-region') as string, at: Date.now() });
      } catch (err) {
        // A reply cut by the region's death, or refused while the front door still sent there.
        failed.push(err instanceof Error ? err.message : String(err));
        await sleep(50);
      }
    }
  };
  const workers = Array.from({ length: LOAD_WORKERS }, () => worker());
  const until = async (what: string, test: () => boolean, ms: number): Promise<void> => {
    const deadline = Date.now() + ms;
    while (!test()) {
      if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms (served ${served.length}, failed ${failed.length}: ${failed.slice(-3).join(' | ')})`);
      await sleep(50);
    }
  };
  try {
    const lost = state.regions[0] as RegionsStateFile['regions'][number];
    const survivor = state.regions[1] as RegionsStateFile['regions'][number];
    await until('both regions serving the load', () => served.filter((s) => s.region === lost.name).length >= 10 && served.filter((s) => s.region === survivor.name).length >= 10, 60_000);

    const killedAt = Date.now();
    process.kill(-(lost.gatewayPid as number), 'SIGKILL');
    process.kill(-(lost.dynamodbPid as number), 'SIGKILL');
    const before = run?.output().length ?? 0;
    await waitFor(`region ${lost.name}: its gateway exited`, 30_000, 0);
    // Serving resumes through the one address, from the other region.
    await until('serving from the survivor after the loss', () => served.filter((s) => s.at > killedAt + 500 && s.region === survivor.name).length >= 20, 120_000);
    const firstAfter = served.find((s) => s.at > killedAt)?.at ?? Date.now();
    console.log(`region ${lost.name} killed; the next reply came ${firstAfter - killedAt} ms later (from ${survivor.name}); ${failed.length} requests failed meanwhile`);

    // Brought back: its DynamoDB Local and its gateway on the same ports and data.
    process.kill((run as Run).child.pid as number, 'SIGUSR2');
    await waitFor('every region is running', 120_000, before);
    state = readState();
    const backAt = Date.now();
    await until('serving from the region brought back', () => served.some((s) => s.at > backAt && s.region === lost.name), 120_000);
  } finally {
    stop = true;
    await Promise.all(workers);
  }
  await simulator('/_sim/reset', {});

  // ---- Two 200-way races, at once, spread over both regions.
  // The balance race: the workspace's credit fits `fitsBalance` holds.
  const balanceMinor = Math.max(1, Math.round((90 * holdMicros) / MICROS_PER_MINOR));
  const poor = await workspace('poor', balanceMinor);
  // The key-limit race: a rich workspace, its key's credit limit fits `fitsKey` holds.
  const limitMinor = Math.max(1, Math.round((70 * holdMicros) / MICROS_PER_MINOR));
  const limited = await workspace('limited', 100_000);
  await admin('PUT', `/workspaces/${limited.workspaceId}/keys/${limited.keyId}/limit`, { amountMinor: limitMinor, window: 'monthly' });
  await keyEverywhere(poor.rawKey);
  await keyEverywhere(limited.rawKey);
  // A top-up sends the other region its part when that region's sweeper has marked it running
  // (docs/regions.md, "A top-up's spread"), else the part moves by ask: one short request in the
  // other region first, as its own traffic would, makes sure each race runs on a balance split
  // between the two (the integration suite races a region holding none). Charged like any other.
  const warm = new Set<string>();
  const west = state.regions[1] as RegionsStateFile['regions'][number];
  for (const w of [poor, limited]) {
    const direct = new OpenAI({ baseURL: `${west.gatewayUrl as string}/v1`, apiKey: w.rawKey, maxRetries: 5, timeout: 60_000 });
    const { data, response } = await direct.chat.completions.create({ ...RACE_BODY, max_tokens: 16 }).withResponse();
    for await (const chunk of data) void chunk;
    warm.add(response.headers.get('x-sluice-request-id') as string);
  }
  // Both regions hold the credit, its split and the limit before the race starts, nothing held or in transit.
  const before = await replicated([poor.workspaceId, limited.workspaceId], 60_000);
  const [poorBefore, limitedBefore] = await Promise.all([poor, limited].map((w) => money(SETUP.regions[0] as string, w.workspaceId)));
  expect([poorBefore, limitedBefore].map((b) => ({ held: b?.heldMicros, inTransit: b?.inTransitMicros, splitAcross: b?.regions.filter((r) => r.availableMicros > 0).length }))).toEqual([
    { held: 0, inTransit: 0, splitAcross: 2 },
    { held: 0, inTransit: 0, splitAcross: 2 },
  ]);
  // What fits now: the balance left, summed over both regions; the key limit less what the key was charged.
  const fitsBalance = Math.floor((poorBefore as RegionalBalance).availableMicros / holdMicros);
  const keyCharged = before.usage.filter((u) => u.workspaceId === limited.workspaceId && u.state === 'settled').reduce((a, u) => a + num(u.chargeMicros), 0);
  const fitsKey = Math.floor((limitMinor * MICROS_PER_MINOR - keyCharged) / holdMicros);
  expect(fitsBalance).toBeGreaterThan(10);
  expect(fitsBalance).toBeLessThan(RACE - 10);
  expect(fitsKey).toBeGreaterThan(10);
  await sleep(1_500); // every gateway's cache (1 s here) has read the limit

  await simulator('/_sim/default', { model: 'sim-large', behavior: { kind: 'stall', ms: RACE_STALL_MS, afterChunks: 1 } });
  // One race after the other (400 streams at once would only measure this machine's load).
  const raceStarted = Date.now();
  const balanceRace = await Promise.all(Array.from({ length: RACE }, () => raceOne(poor.rawKey, raceStarted + RACE_RETRY_MS)));
  const balanceRaceMs = Date.now() - raceStarted;
  // Every answer is in: the admitted streams are ended by their clients (charged what they produced).
  for (const a of balanceRace) a.stream?.controller.abort();
  const keyRaceStarted = Date.now();
  const keyRace = await Promise.all(Array.from({ length: RACE }, () => raceOne(limited.rawKey, keyRaceStarted + RACE_RETRY_MS)));
  const keyRaceMs = Date.now() - keyRaceStarted;
  for (const a of keyRace) a.stream?.controller.abort();
  await simulator('/_sim/reset', {});

  const summary = (answers: RaceAnswer[]) => ({
    admitted: answers.filter((a) => a.admitted).length,
    refusedCodes: [...new Set(answers.filter((a) => !a.admitted).map((a) => `${a.status} ${a.code}`))],
    regions: [...new Set(answers.map((a) => a.region))].sort(),
  });
  const balanceSummary = summary(balanceRace);
  const keySummary = summary(keyRace);
  console.log(`balance race: ${JSON.stringify(balanceSummary)} (fits ${fitsBalance}); key race: ${JSON.stringify(keySummary)} (fits ${fitsKey}); ${unavailable} answers 503 balance_unavailable, retried; unanswered, retried: ${JSON.stringify(Object.fromEntries(unanswered))}; the races took ${balanceRaceMs} and ${keyRaceMs} ms`);
  // The races' outcomes are asserted at the end, with the ledger they left, so one run shows every finding.

  // ---- After replication catches up: every hold settled (the lost region's by its own sweeper), both replicas equal.
  const all = [calibration, poor, limited, load];
  const ids = all.map((w) => w.workspaceId);
  // Settled: no hold open in either replica, both replicas alike, nothing in transit between the regions.
  const settleDeadline = Date.now() + REQUEST_LIMIT_MS + 120_000;
  let last = '';
  for (;;) {
    const open = await openRows(ids);
    const inTransit = open.count > 0 ? [] : (await Promise.all(all.map((w) => money(SETUP.regions[0] as string, w.workspaceId)))).map((b) => b.inTransitMicros);
    if (open.count === 0 && inTransit.every((t) => t === 0)) break;
    last = `${open.count} holds open (${JSON.stringify(open.kinds)}), in transit ${JSON.stringify(inTransit)}`;
    if (Date.now() > settleDeadline) throw new Error(`not settled: ${last}`);
    await sleep(500);
  }
  const { usage, rollups } = await replicated(ids, 120_000);

  // Everything found, compared at once with what must be (a failure shows every difference).
  const rowIds = new Set(usage.map((u) => u.requestId));
  // A released row (an admission the gateway gave back after a store fault: nothing held or
  // charged) is never a usage row; every other row is one request's.
  const rowsOf = (w: TestWorkspace): Item[] => usage.filter((u) => u.workspaceId === w.workspaceId && u.state !== 'released');
  /** A race's rows: its workspace's, but for the request that split the balance before it. */
  const raceRowsOf = (w: TestWorkspace): Item[] => rowsOf(w).filter((u) => !warm.has(u.requestId as string));
  const charges = (rows: Item[]): number => rows.reduce((a, u) => a + num(u.chargeMicros), 0);
  // A row whose request no client saw admitted: what it says and what its request was answered
  // (printed; counted in `rows` below, so the comparison fails on it).
  const admittedIds = new Set([...balanceRace, ...keyRace].filter((a) => a.admitted).map((a) => a.requestId));
  const strays = (w: TestWorkspace): unknown[] =>
    raceRowsOf(w)
      .filter((u) => !admittedIds.has(u.requestId as string))
      .map((u) => ({
        requestId: u.requestId,
        state: u.state,
        outcome: u.outcome,
        status: u.status,
        chargeMicros: u.chargeMicros,
        region: u.region,
        answer: answered.get(u.requestId as string) ?? 'no answer carried its id',
        // What the regions logged of it (its answer line, and any fault by kind: never a prompt or a reply).
        logged: (run as Run).output().split('\n').filter((l) => l.includes(u.requestId as string)),
      }));
  console.log(`race rows without an admitted answer: ${JSON.stringify({ poor: strays(poor), limited: strays(limited) })}`);
  const found: Record<string, unknown> = {
    // The front door spread each race over both regions; exactly what fits was admitted, every
    // other request refused with its own code; one row per admitted request, none for a refusal.
    // Every answer came while every admitted stream was still open (before the request limit).
    balanceRace: { ...balanceSummary, rows: raceRowsOf(poor).length, withinRequestLimit: balanceRaceMs < REQUEST_LIMIT_MS },
    keyRace: { ...keySummary, rows: raceRowsOf(limited).length, keyChargesWithinLimit: charges(rowsOf(limited)) <= limitMinor * MICROS_PER_MINOR, withinRequestLimit: keyRaceMs < REQUEST_LIMIT_MS },
    // No lost charge: every reply a client received has its settled row.
    servedWithoutRow: served.filter((s) => !rowIds.has(s.requestId)).length,
    admittedWithoutRow: [...balanceRace, ...keyRace].filter((a) => a.admitted && !rowIds.has(a.requestId as string)).length,
  };
  const want: Record<string, unknown> = {
    balanceRace: { admitted: fitsBalance, refusedCodes: ['402 insufficient_credit'], regions: ['us-east-1', 'us-west-2'], rows: fitsBalance, withinRequestLimit: true },
    keyRace: { admitted: fitsKey, refusedCodes: ['402 key_limit_exceeded'], regions: ['us-east-1', 'us-west-2'], rows: fitsKey, keyChargesWithinLimit: true, withinRequestLimit: true },
    servedWithoutRow: 0,
    admittedWithoutRow: 0,
  };
  for (const [name, w] of [['calibration', calibration], ['poor', poor], ['limited', limited], ['load', load]] as const) {
    const [home, other] = await Promise.all(SETUP.regions.map((r) => money(r, w.workspaceId)));
    if (home === undefined || other === undefined) throw new Error('two regions expected');
    const rows = rowsOf(w);
    const totals = rollups.filter((r) => typeof r.pk === 'string' && r.pk.startsWith(`WS#${w.workspaceId}`) && r.pk.includes('#MONTH#') && r.sk === 'ALL');
    found[name] = {
      // Both replicas read the same money.
      replicasAgree: JSON.stringify(other) === JSON.stringify(home),
      // The invariant summed over both regions, with nothing in transit and nothing lost.
      invariant: home.creditedMicros === home.availableMicros + home.heldMicros + home.spentMicros,
      credited: home.creditedMicros,
      inTransit: home.inTransitMicros,
      // Every hold settled; nothing overspent, in any region.
      held: home.heldMicros,
      openRows: rows.filter((u) => u.state === 'open').length,
      regionsBelowZero: home.regions.filter((r) => r.availableMicros < 0).map((r) => r.region),
      spentWithinCredit: home.spentMicros <= home.creditedMicros,
      // Each request one row; the money spent is the rows' charges, each once.
      duplicateRows: rows.length - new Set(rows.map((u) => u.requestId)).size,
      spentMinusCharges: home.spentMicros - charges(rows),
      // The aggregator counted every row once: the month's totals (every region's, every shard) equal the rows.
      totalsMinusRows: { requests: totals.reduce((a, r) => a + num(r.requests), 0) - rows.length, charge: totals.reduce((a, r) => a + num(r.chargeMicros), 0) - charges(rows) },
    };
    want[name] = {
      replicasAgree: true,
      invariant: true,
      credited: w.creditedMicros,
      inTransit: 0,
      held: 0,
      openRows: 0,
      regionsBelowZero: [],
      spentWithinCredit: true,
      duplicateRows: 0,
      spentMinusCharges: 0,
      totalsMinusRows: { requests: 0, charge: 0 },
    };
  }
  expect(found).toEqual(want);
});
