/**
 * Two regions at steady state (issue 23's second goal: the bench's latency targets hold per region;
 * cross-region moves stay under 1 per 100 requests when traffic is steady), on `npm run
 * start:regions` itself: the start script in a child process (its own temporary home, free
 * ports), so two DynamoDB Locals, the replicator at a global table's lag, a gateway, sweeper,
 * aggregator and transfer agent per region and the home region's management API are the real
 * parts, nothing mocked.
 *
 *   npx tsx bench/regions-steady.ts [--quick] [--lag-ms=1000] [--requests=N] [--rate=N]
 *       [--splits=50,70] [--warm-up-window-s=60] [--transfer-wait-ms=N]
 *       [--credit-minor=N] [--key-limit-minor=N] [--workspace-limit-minor=N]
 *   npm run bench -- --regions-steady-only     the same, as the bench's part (defaults only)
 *   npm run bench -- --no-regions-steady       a full run without it
 *
 * Each scenario is a fresh workspace, topped up once through the home region's management API as
 * an operator does (so all its credit starts in the home region), with a workspace monthly limit
 * and one key with a monthly credit limit; then a fixed number of requests at a fixed rate (open
 * loop), sent to each region's gateway directly at a fixed split, alternately non-streamed and
 * streamed. Meanwhile this process reads each region's ledger stream and follows its own transfer
 * items (`regions-steady-count.ts`): every ask, every give and what it moved, every receipt.
 * A **move** is a give that moved a nonzero amount; moves per 100 requests are counted over the
 * scenario, over its first minute (the warm-up: the region holding no credit must get some) and
 * over the rest. Latency per region is the latency phase's: the gateway's non-streamed total and
 * streamed first byte less the direct call's (the simulator, sampled in the same open loop), at
 * p50 and p99, against `addedLimits` of one admission transaction (the floor, `floor.ts`) run from
 * this process on each region's own DynamoDB Local in the same loop.
 *
 * Output: tables on stdout (markdown), `regionsSteady` merged into `bench-results/bench.json`.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs as parseCommandLine } from 'node:util';
import { QueryCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { AttributeValue as SdkAttributeValue } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { documentClient } from '../lambdas/adapters/dynamo-client';
import { peerCounters } from '../lambdas/core/transfers';
import { loadConfig } from '../lambdas/shared/config';
import { tableName } from '../lambdas/shared/schema';
import { readRegionalBalance, type RegionMoney } from '../lambdas/store/regions-balance';
import { regionSetupFromEnv, regionTag, type RegionSetup } from '../lambdas/store/regions';
import { isAlive } from '../local/dynamo-local';
import { freePort } from '../local/free-port';
import { addCredit, createKey, createWorkspace } from '../local/ops';
import type { RegionsStateFile } from '../local/regions/settings';
import { startStreamPoller, type StreamPoller } from '../local/stream-poller';
import { mergeBenchJson } from './bench-json';
import { buildGatewayHandler, REPO_ROOT } from './bundle';
import { Floor, FLOOR_LIMITS } from './floor';
import { MICROS_PER_MINOR } from '../lambdas/core/money-format';
import type { AdmissionLimits } from '../lambdas/gateway/ports';
import { post, postStream, targetFrom, type Target, type Timing } from './load';
import { addedLimits } from './report-targets';
import { bodies, authHeaders, MODEL_SHORT, type Caller } from './phases/requests';
import { countWindow, SAMPLE_DELAY_TICKS, SamplePlan, TransferTally, waitedForTransfer, type MoveCounts, type RequestSpan } from './regions-steady-count';
import { guardRun, log, type Cleanup } from './stack';
import { round, summarize, type Summary } from './stats';

// ---------------------------------------------------------------------------------------------
// Options

/** What a run does; `steadyDefaults` gives the bench's, the command line may change each. */
export interface SteadyOptions {
  readonly quick: boolean;
  /** The replicator's lag between the regions, milliseconds (global tables: usually under a second). */
  readonly lagMs: number;
  /** Gateway requests per scenario, and their rate (requests a second, both regions together). */
  readonly requests: number;
  readonly ratePerSecond: number;
  /** Each scenario's share of requests to the first (home) region, percent. */
  readonly splits: readonly number[];
  /** The warm-up window counted apart from the rest, seconds from the scenario's first request. */
  readonly warmUpWindowS: number;
  /** Requests per region on a workspace of their own before any scenario (not measured; at most 15 s, `--quick` 6). */
  readonly warmRequests: number;
  /** `SLUICE_TRANSFER_WAIT_MS` for every region; undefined leaves the stage's default. */
  readonly transferWaitMs: number | undefined;
  /** The one top-up, the workspace monthly limit and the key's monthly credit limit, minor units. */
  readonly creditMinor: number;
  readonly workspaceLimitMinor: number;
  readonly keyLimitMinor: number;
}

/**
 * The bench's defaults: 2,000 requests a scenario at 30 a second (67 s: a first minute and 7 s
 * after, so the part stays near 3 minutes; `--requests` makes the steady part longer), or a smoke
 * run with `--quick`.
 */
export function steadyDefaults(quick: boolean): SteadyOptions {
  return {
    quick,
    lagMs: 1_000,
    requests: quick ? 150 : 2_000,
    ratePerSecond: quick ? 20 : 30,
    splits: [50, 70],
    warmUpWindowS: 60,
    warmRequests: quick ? 10 : 40,
    transferWaitMs: undefined,
    creditMinor: 1_000,
    workspaceLimitMinor: 2_000,
    keyLimitMinor: 500,
  };
}

/** Reads the command line of `npx tsx bench/regions-steady.ts`; anything unknown is refused. */
export function parseSteadyArgs(argv: readonly string[]): SteadyOptions {
  const { values } = parseCommandLine({
    args: [...argv],
    options: {
      quick: { type: 'boolean', default: false },
      'lag-ms': { type: 'string' },
      requests: { type: 'string' },
      rate: { type: 'string' },
      splits: { type: 'string' },
      'warm-up-window-s': { type: 'string' },
      'warm-requests': { type: 'string' },
      'transfer-wait-ms': { type: 'string' },
      'credit-minor': { type: 'string' },
      'workspace-limit-minor': { type: 'string' },
      'key-limit-minor': { type: 'string' },
    },
    strict: true,
    allowPositionals: false,
  });
  const d = steadyDefaults(values.quick === true);
  const int = (name: keyof typeof values, fallback: number, min: number, max: number): number => {
    const raw = values[name];
    if (raw === undefined || typeof raw !== 'string') return fallback;
    const n = Number(raw);
    if (!Number.isSafeInteger(n) || n < min || n > max) throw new Error(`--${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(raw)}`);
    return n;
  };
  const splits = values.splits === undefined ? d.splits : values.splits.split(',').map((s) => Number(s.trim()));
  if (splits.length === 0 || splits.some((p) => !Number.isSafeInteger(p) || p < 0 || p > 100)) throw new Error(`--splits must list percentages (0 to 100) for the home region, got ${JSON.stringify(values.splits)}`);
  const wait = values['transfer-wait-ms'];
  return {
    quick: d.quick,
    lagMs: int('lag-ms', d.lagMs, 0, 600_000),
    requests: int('requests', d.requests, 10, 1_000_000),
    ratePerSecond: int('rate', d.ratePerSecond, 1, 1_000),
    splits,
    warmUpWindowS: int('warm-up-window-s', d.warmUpWindowS, 1, 3_600),
    warmRequests: int('warm-requests', d.warmRequests, 0, 10_000),
    transferWaitMs: wait === undefined ? undefined : int('transfer-wait-ms', 0, 0, 10_000),
    creditMinor: int('credit-minor', d.creditMinor, 1, 1_000_000_000),
    workspaceLimitMinor: int('workspace-limit-minor', d.workspaceLimitMinor, 1, 1_000_000_000),
    keyLimitMinor: int('key-limit-minor', d.keyLimitMinor, 1, 1_000_000_000),
  };
}

// ---------------------------------------------------------------------------------------------
// The two regions: `npm run start:regions` in a child process

/** The transfer wait a region uses when none is set (`lambdas/store/regions.ts`). */
const STAGE_TRANSFER_WAIT_MS = regionSetupFromEnv({ SLUICE_REGIONS: 'a,b' })?.transferWaitMs ?? 2_000;
const READY_MS = 180_000;
const STOP_GRACE_MS = 30_000;
/** The whole part may not take longer than this; the watchdog then stops everything it started. */
const WATCHDOG_MS = 20 * 60_000;
/** Requests (gateway, direct and floor together) in flight at most; the loop waits beyond it. */
const MAX_IN_FLIGHT = 64;
/** How long a scenario's end waits for what is in transit to be credited and what was asked to be answered, at most. */
const IN_TRANSIT_WAIT_MS = 20_000;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Regions {
  readonly state: RegionsStateFile;
  readonly setup: RegionSetup;
  readonly names: readonly [string, string];
  /** Each region's own DynamoDB Local. */
  readonly db: ReadonlyMap<string, DynamoDBDocumentClient>;
  /** A line count of what the regions logged as errors (`"level":"error"`). */
  errorLines(): number;
  /** The first few distinct error lines (the runtime's structured lines: ids and causes, never a body or a key). */
  errorSamples(): readonly string[];
  admin<T>(method: string, route: string, body?: Record<string, unknown>): Promise<T>;
}

/** Starts `local/regions/start-regions.ts` in a temporary home and waits until it serves; `cleanup` stops it. */
async function startRegions(cleanup: Cleanup, o: SteadyOptions): Promise<Regions> {
  const home = await mkdtemp(path.join(os.tmpdir(), 'sluice-regions-steady-'));
  cleanup.add('temporary home', () => rm(home, { recursive: true, force: true }));
  // Each region's gateway runs from the handler's bundle, as deployed and as the latency phase runs it.
  const bundle = path.join(home, 'gateway', 'index.js');
  await buildGatewayHandler(bundle);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    SLUICE_LOCAL_GATEWAY_BUNDLE: bundle,
    NODE_PATH: path.join(REPO_ROOT, 'node_modules'),
    SLUICE_LOCAL_HOME: home,
    PORT: String(await freePort('127.0.0.1')),
    SLUICE_ADMIN_PORT: '0',
    SLUICE_CONSOLE_PORT: '0',
    SLUICE_REPLICATION_LAG_MS: String(o.lagMs),
    // The per-key request rate is a stage setting the benchmark is not measuring (as in the main run).
    SLUICE_KEY_RATE_PER_MINUTE: '100000000',
    ...(o.transferWaitMs === undefined ? {} : { SLUICE_TRANSFER_WAIT_MS: String(o.transferWaitMs) }),
  };
  for (const name of Object.keys(env)) {
    if (name.startsWith('SLUICE_PROVIDER_KEY_') || name === 'SLUICE_LOCAL_SECRETS_FILE' || name.startsWith('SLUICE_REGION') || name === 'SLUICE_HOME_REGION') delete env[name];
    if (name === 'SLUICE_TRANSFER_WAIT_MS' && o.transferWaitMs === undefined) delete env[name];
  }
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', 'local/regions/start-regions.ts'], { cwd: REPO_ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  const tail: string[] = [];
  let errors = 0;
  const samples = new Map<string, string>();
  const take = (chunk: Buffer): void => {
    for (const line of chunk.toString().split('\n')) {
      if (line === '') continue;
      if (line.includes('"level":"error"')) {
        errors += 1;
        // One sample per kind of error (its event and error name), the line cut short.
        const kind = /"event":"[^"]*"/.exec(line)?.[0] ?? '';
        const name = /"error":"([A-Za-z]+)/.exec(line)?.[1] ?? '';
        if (samples.size < 6 && !samples.has(`${kind}${name}`)) samples.set(`${kind}${name}`, line.slice(0, 400));
      }
      // A line per request is what a region's gateway prints locally; keep the rest for a failure's report.
      if (/^\[[a-z0-9-]+\] \[gateway\] \d{3} /.test(line)) continue;
      tail.push(line);
      if (tail.length > 200) tail.shift();
    }
  };
  child.stdout?.on('data', take);
  child.stderr?.on('data', take);
  const stateFile = path.join(home, '.sluice', 'regions', 'state.json');
  const groups = new Set<number>();
  cleanup.add('start:regions', async () => {
    if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
      try {
        process.kill(-child.pid, 'SIGTERM');
      } catch {
        // Gone already.
      }
      const stopped = await Promise.race([exited.then(() => true), sleep(STOP_GRACE_MS).then(() => false)]);
      if (!stopped) process.kill(-child.pid, 'SIGKILL');
    }
    // Whatever the start could not stop: each region part leads its own process group.
    for (const pid of groups) {
      if (!isAlive(pid)) continue;
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        // Gone in between.
      }
    }
  });

  const deadline = Date.now() + READY_MS;
  let state: RegionsStateFile | undefined;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`start:regions exited during start-up:\n${tail.join('\n')}`);
    try {
      const read = JSON.parse(readFileSync(stateFile, 'utf8')) as RegionsStateFile;
      for (const r of read.regions) for (const pid of [r.gatewayPid, r.dynamodbPid]) if (pid !== null) groups.add(pid);
      if (read.baseUrl !== null && read.adminUrl !== null && read.regions.every((r) => r.gatewayUrl !== null)) {
        state = read;
        break;
      }
    } catch {
      // Not written yet.
    }
    if (Date.now() > deadline) throw new Error(`start:regions did not serve within ${READY_MS / 1000} s:\n${tail.join('\n')}`);
    await sleep(250);
  }
  if (state.regions.length !== 2) throw new Error(`two regions expected, start:regions runs ${state.regions.length}`);
  const names = [state.regions[0]?.name, state.regions[1]?.name] as [string, string];
  const setup = regionSetupFromEnv({ SLUICE_REGIONS: names.join(','), SLUICE_REGION: names[0] }) as RegionSetup;
  const db = new Map<string, DynamoDBDocumentClient>();
  for (const r of state.regions) {
    const doc = documentClient({ dynamoEndpoint: r.endpoint });
    db.set(r.name, doc);
    cleanup.add(`${r.name} client`, async () => doc.destroy());
  }
  const token = readFileSync(path.join(home, '.sluice', 'admin-token'), 'utf8').trim();
  const adminUrl = state.adminUrl as string;
  return {
    state,
    setup,
    names,
    db,
    errorLines: () => errors,
    errorSamples: () => [...samples.values()],
    async admin<T>(method: string, route: string, body?: Record<string, unknown>): Promise<T> {
      const res = await fetch(`${adminUrl}/admin/v1${route}`, {
        method,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await res.text();
      if (res.status >= 300) throw new Error(`management API ${method} ${route}: ${res.status} ${text}`);
      return JSON.parse(text) as T;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Workspaces, as an operator sets them up through the home region's management API

interface Tenant {
  readonly workspaceId: string;
  readonly keyId: string;
  readonly rawKey: string;
}

/** A workspace topped up once, with a workspace monthly limit and one key with a monthly credit limit. */
async function tenant(regions: Regions, name: string, o: SteadyOptions, made?: (workspaceId: string) => void): Promise<Tenant> {
  const ws = await regions.admin<{ workspaceId: string; ownerMemberId: string }>('POST', '/workspaces', { name, ownerEmail: `${name}@localhost` });
  // Told before the top-up: its spread to the other region is a transfer the scenario follows.
  made?.(ws.workspaceId);
  const at = `/workspaces/${encodeURIComponent(ws.workspaceId)}`;
  await regions.admin('PUT', `${at}/monthly-limit`, { amountMinor: o.workspaceLimitMinor });
  await regions.admin('POST', `${at}/credit`, { amountMinor: o.creditMinor, reference: `${name}-top-up` });
  const key = await regions.admin<{ keyId: string; rawKey: string }>('POST', `${at}/keys`, { memberId: ws.ownerMemberId, name });
  await regions.admin('PUT', `${at}/keys/${encodeURIComponent(key.keyId)}/limit`, { amountMinor: o.keyLimitMinor, window: 'monthly' });
  // Configuration reaches the other region by replication; wait for it, then until each gateway knows the key.
  await sleep(2 * o.lagMs + 250);
  for (const r of regions.state.regions) {
    for (let i = 0; ; i += 1) {
      const res = await fetch(`${r.gatewayUrl as string}/v1/models`, { headers: authHeaders(key.rawKey) }).catch(() => undefined);
      if (res?.status === 200) break;
      if (i > 600) throw new Error(`region ${r.name} did not serve the new key within a minute`);
      await sleep(100);
    }
  }
  return { workspaceId: ws.workspaceId, keyId: key.keyId, rawKey: key.rawKey };
}

/** A floor workspace in one region's DynamoDB Local, written there as the bench's own seed (not a regional workspace: only the floor uses it). */
async function floorFor(regions: Regions, region: string, cleanup: Cleanup, o: SteadyOptions): Promise<Floor> {
  const r = regions.state.regions.find((x) => x.name === region);
  if (r === undefined) throw new Error(`no region ${region}`);
  const prefix = regions.state.tablePrefix;
  const config = loadConfig({ SLUICE_STAGE: 'local', SLUICE_TABLE_PREFIX: prefix, SLUICE_DYNAMODB_ENDPOINT: r.endpoint });
  const doc = regions.db.get(region) as DynamoDBDocumentClient;
  const ctx = { doc, tablePrefix: prefix, stage: 'local' };
  const ws = await createWorkspace(ctx, { name: `floor ${region}` });
  await addCredit(ctx, { workspaceId: ws.workspaceId, minor: 100_000 });
  const key = await createKey(ctx, { workspaceId: ws.workspaceId });
  const caller: Caller = { workspaceId: ws.workspaceId, keyId: key.keyId, rawKey: key.rawKey };
  // The scenarios' limits (a key's monthly credit limit, the workspace's monthly limit), so the floor's
  // admission writes the items a scenario's requests' admissions do (the key window, the month share).
  const limits: AdmissionLimits = { ...FLOOR_LIMITS, keyLimitMicros: o.keyLimitMinor * MICROS_PER_MINOR, workspaceLimitMicros: o.workspaceLimitMinor * MICROS_PER_MINOR };
  return new Floor(config, doc, caller, cleanup, { prefix, ledger: tableName(prefix, 'ledger'), usage: tableName(prefix, 'usage') }, limits);
}

// ---------------------------------------------------------------------------------------------
// Following each region's transfer items on its own ledger stream

/** Routes each region's own transfer-item writes to the tally of the workspace they belong to. */
class TransferWatch {
  private readonly tallies = new Map<string, TransferTally>();
  private readonly pollers: StreamPoller[] = [];
  /** Each own write's image (by item and counters) and when it was read on its writer's stream, until its copy is read on the other's. */
  private readonly written = new Map<string, number>();
  /** Per workspace: how long after a transfer-item write was read on its writer's stream its copy was read on the other region's (the lag as it was). */
  private readonly lags = new Map<string, number[]>();

  constructor(private readonly regions: Regions) {}

  async start(cleanup: Cleanup): Promise<void> {
    for (const r of this.regions.state.regions) {
      const poller = await startStreamPoller({
        endpoint: r.endpoint,
        tableName: tableName(this.regions.state.tablePrefix, 'ledger'),
        intervalMs: 50,
        batchSize: 1_000,
        discoverEveryMs: 5_000,
        log: (line) => log(`regions steady: ${r.name} stream: ${line}`),
        handler: async (event) => {
          const at = performance.now();
          for (const record of event.Records) {
            const image = record.dynamodb?.NewImage;
            const pk = image?.pk?.S;
            if (image === undefined || pk === undefined || !pk.startsWith('XFER#')) continue;
            const ws = image.ws?.S ?? '';
            const tally = this.tallies.get(ws);
            if (tally === undefined) continue;
            const item = unmarshall(image as Record<string, SdkAttributeValue>);
            const id = versionId(item);
            if (image.region?.S === r.name) {
              // The region's own transfer item: counted here, where it is written.
              tally.observe(item, at);
              this.written.set(id, at);
              continue;
            }
            // The other region's, replicated here: how late it came.
            const wrote = this.written.get(id);
            if (wrote !== undefined) {
              this.written.delete(id);
              this.lags.get(ws)?.push(at - wrote);
            }
          }
        },
      });
      this.pollers.push(poller);
      cleanup.add(`${r.name} stream poller`, () => poller.stop());
    }
  }

  follow(workspaceId: string): TransferTally {
    const tally = new TransferTally(this.regions.names);
    this.tallies.set(workspaceId, tally);
    this.lags.set(workspaceId, []);
    return tally;
  }

  /** The replication lags seen for a workspace's transfer items so far, milliseconds. */
  lagsOf(workspaceId: string): readonly number[] {
    return this.lags.get(workspaceId) ?? [];
  }
}

/** A transfer item's identity with its counters: the same write read in either region. */
function versionId(item: Record<string, unknown>): string {
  const counters = Object.keys(item)
    .filter((k) => /^(sent|recv|asked|answered)_/.test(k))
    .sort()
    .map((k) => `${k}=${String(item[k])}`);
  return `${String(item.pk)}\u0000${String(item.sk)}\u0000${counters.join(',')}`;
}

/** What each region's own transfer items of a workspace say it has sent in all, per quantity kind. */
async function sentByCounters(regions: Regions, workspaceId: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const region of regions.names) {
    const doc = regions.db.get(region) as DynamoDBDocumentClient;
    const pk = `XFER#${workspaceId}${regionTag(regions.setup, region)}`;
    const got = await doc.send(new QueryCommand({ TableName: tableName(regions.state.tablePrefix, 'ledger'), KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': pk }, ConsistentRead: true }));
    out[region] = (got.Items ?? []).reduce((a, item) => a + regions.names.filter((p) => p !== region).reduce((s, p) => s + peerCounters(item, p).sent, 0), 0);
  }
  return out;
}

/**
 * Credit and headroom given and not yet credited by the receiver: each region's `sent` read on its
 * own item in its own replica, less the receiver's `recv` read in the receiver's (each exact there);
 * and what each region asked that the other has not answered yet (`asked` less the other's `answered`).
 */
async function inTransit(regions: Regions, workspaceId: string): Promise<{ inTransitMicros: number; unansweredMicros: number }> {
  const items = new Map<string, Record<string, unknown>[]>();
  for (const region of regions.names) {
    const doc = regions.db.get(region) as DynamoDBDocumentClient;
    const pk = `XFER#${workspaceId}${regionTag(regions.setup, region)}`;
    const got = await doc.send(new QueryCommand({ TableName: tableName(regions.state.tablePrefix, 'ledger'), KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': pk }, ConsistentRead: true }));
    items.set(region, (got.Items ?? []) as Record<string, unknown>[]);
  }
  let inTransitMicros = 0;
  let unansweredMicros = 0;
  for (const [giver, own] of items) {
    for (const item of own) {
      for (const receiver of regions.names.filter((r) => r !== giver)) {
        const theirs = (items.get(receiver) ?? []).find((x) => x.sk === item.sk);
        inTransitMicros += peerCounters(item, receiver).sent - peerCounters(theirs, giver).recv;
      }
    }
    // What this region asked that the other has not answered (answered with anything, even 0).
    for (const item of own) {
      for (const asked of regions.names.filter((r) => r !== giver)) {
        const theirs = (items.get(asked) ?? []).find((x) => x.sk === item.sk);
        unansweredMicros += Math.max(0, peerCounters(item, asked).asked - peerCounters(theirs, giver).answered);
      }
    }
  }
  return { inTransitMicros, unansweredMicros };
}

// ---------------------------------------------------------------------------------------------
// Steady traffic

interface Sample extends RequestSpan {
  readonly stream: boolean;
  readonly status: number;
  readonly code?: string;
  readonly totalMs: number;
  readonly ttfbMs: number;
}

function codeOf(t: Timing): string | undefined {
  if (t.status < 400) return undefined;
  try {
    const body = JSON.parse(t.errorBody ?? '') as { error?: { code?: unknown } };
    return typeof body.error?.code === 'string' ? body.error.code : `http_${t.status}`;
  } catch {
    return `http_${t.status}`;
  }
}

/** The figures of one region in one scenario. */
export interface RegionFigures {
  readonly requests: number;
  readonly ok: number;
  /** Refusals and failures by code (`http_<status>` without an envelope, `failed` without an answer). */
  readonly refused: Record<string, number>;
  /** Requests in flight across one of the region's asks that ran on well past it (`waitedForTransfer`). */
  readonly waitedForTransfer: number;
  readonly asks: number;
  readonly movesGiven: number;
  readonly latency: {
    readonly gateway: Pick<Summary, 'n' | 'p50' | 'p99'>;
    readonly ttfbGateway: Pick<Summary, 'n' | 'p50' | 'p99'>;
    readonly floor: Pick<Summary, 'n' | 'p50' | 'p99'>;
    readonly addedP50Ms: number;
    readonly addedP99Ms: number;
    readonly ttfbAddedP50Ms: number;
    readonly ttfbAddedP99Ms: number;
    readonly limits: { readonly addedP50Ms: number; readonly addedP99Ms: number; readonly ttfbAddedP50Ms: number; readonly ttfbAddedP99Ms: number };
    /** The targets missed, by name; empty when every one measured held. */
    readonly missed: readonly string[];
    /** The targets with no samples to measure (every request of that kind refused). */
    readonly unmeasured: readonly string[];
  };
  /** The region's money at the end, read in its own replica (micro-units). */
  readonly money: Pick<RegionMoney, 'creditedMicros' | 'availableMicros' | 'heldMicros' | 'spentMicros' | 'sentMicros' | 'receivedMicros'>;
}

/** One scenario's figures. */
export interface ScenarioFigures {
  readonly split: string;
  readonly percentHome: number;
  readonly requests: number;
  /** How long the requests were planned to take at the rate, and took (the last one answered). */
  readonly plannedSeconds: number;
  readonly trafficSeconds: number;
  /** Most requests in flight at once (the loop is open: a slow stack shows here). */
  readonly maxInFlight: number;
  /**
   * The top-up's spread, before the first request: what each region had sent (the home region its
   * top-up's parts to the regions marked running), how long from the workspace's making until
   * nothing was in transit (bounded at 20 s), and what was still in transit then.
   */
  readonly topUp: { readonly sentMicros: Record<string, number>; readonly landedS: number; readonly inTransitMicros: number };
  readonly moves: { readonly all: MoveCounts; readonly firstMinute: MoveCounts; readonly rest: MoveCounts };
  /** Every ask, give and receipt (the first 300), seconds from the scenario's first request (when read from the writer's stream): when transfers happen. */
  readonly timeline: readonly { readonly atS: number; readonly kind: string; readonly region: string; readonly peer: string; readonly quantity: string; readonly micros: number }[];
  /** When each region's requests were answered, by outcome: per second of the scenario, `ok` and refused counts. */
  readonly perSecond: Record<string, { readonly ok: readonly number[]; readonly refused: readonly number[] }>;
  readonly regions: Record<string, RegionFigures>;
  readonly direct: { readonly total: Pick<Summary, 'n' | 'p50' | 'p99'>; readonly ttfb: Pick<Summary, 'n' | 'p50' | 'p99'> };
  /** What the regions' own transfer items say was sent in all, beside the gives read from their streams: equal unless a write was missed. */
  readonly sentCheck: { readonly counters: Record<string, number>; readonly stream: Record<string, number>; readonly agree: boolean };
  /**
   * The replication lag as it was: how long after a transfer-item write was read on its writer's
   * stream its copy was read on the other region's (writes folded into a later one are not seen).
   */
  readonly replicationLagMs: Pick<Summary, 'n' | 'p50' | 'p99' | 'max'>;
  /** Given and not credited at the end (after waiting up to 20 s for it and the asks to be done), micro-units. */
  readonly inTransitMicros: number;
  /** Asked and not answered at the end, micro-units. */
  readonly unansweredMicros: number;
  /** Error lines the regions logged during the scenario (`"level":"error"`). */
  readonly errorLines: number;
}

const brief = (s: Summary): Pick<Summary, 'n' | 'p50' | 'p99'> => ({ n: s.n, p50: s.p50, p99: s.p99 });

async function scenario(regions: Regions, watch: TransferWatch, floors: ReadonlyMap<string, Floor>, o: SteadyOptions, percentHome: number): Promise<ScenarioFigures> {
  const split = `${percentHome}/${100 - percentHome}`;
  let followed: TransferTally | undefined;
  const made = performance.now();
  const t = await tenant(regions, `steady-${percentHome}`, o, (ws) => {
    followed = watch.follow(ws);
  });
  const tally = followed as TransferTally;
  // The top-up's spread (its part sent to each region marked running) is let land before the
  // first request: steady state is a workspace whose credit is where its traffic is. How long it
  // took from the workspace's making is reported; what had not landed by the bound is said too.
  let spread = await inTransit(regions, t.workspaceId);
  for (const until = Date.now() + IN_TRANSIT_WAIT_MS; spread.inTransitMicros !== 0 && Date.now() < until; spread = await inTransit(regions, t.workspaceId)) await sleep(100);
  const topUp = {
    sentMicros: await sentByCounters(regions, t.workspaceId),
    landedS: (performance.now() - made) / 1000,
    inTransitMicros: spread.inTransitMicros,
  };
  const errorsBefore = regions.errorLines();
  const [first, second] = regions.names;
  const gw = new Map<string, Target>(regions.state.regions.map((r) => [r.name, targetFrom('gateway', `${r.gatewayUrl as string}/v1`, 64)]));
  const direct = targetFrom('direct', regions.state.simulatorUrl as string, 64);
  const short = bodies(MODEL_SHORT, false);
  const shortStream = bodies(MODEL_SHORT, true);
  const key = authHeaders(t.rawKey);
  const samples: Sample[] = [];
  const directTotal: number[] = [];
  const directTtfb: number[] = [];
  const floorSamples = new Map<string, number[]>(regions.names.map((n) => [n, []]));
  const floorBusy = new Set<string>();
  const perRegion = new Map<string, number>();
  const pending = new Set<Promise<void>>();
  let maxInFlight = 0;
  const track = (p: Promise<void>): void => {
    pending.add(p);
    maxInFlight = Math.max(maxInFlight, pending.size);
    void p.finally(() => pending.delete(p));
  };
  const intervalMs = 1_000 / o.ratePerSecond;
  const plan = new SamplePlan(percentHome, regions.names);
  log(`regions steady: ${split} (${first}/${second}), ${o.requests} requests at ${o.ratePerSecond}/s, workspace ${t.workspaceId}`);
  const t0 = performance.now();
  for (let i = 0; i < o.requests; i += 1) {
    const due = t0 + i * intervalMs;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    // Open loop, bounded: a stack that cannot keep up makes the run late (reported), not unbounded.
    while (pending.size >= MAX_IN_FLIGHT) await Promise.race(pending);
    const tick = plan.at(i);
    const region = tick.region;
    const n = perRegion.get(region) ?? 0;
    perRegion.set(region, n + 1);
    const stream = n % 2 === 1;
    const target = gw.get(region) as Target;
    track(
      (async () => {
        const start = performance.now();
        try {
          const r = stream ? await postStream(target, shortStream.gateway, key) : await post(target, short.gateway, key);
          const code = codeOf(r);
          samples.push({ region, stream, start, end: performance.now(), status: r.status, ...(code === undefined ? {} : { code }), totalMs: r.totalMs, ttfbMs: r.ttfbMs });
        } catch {
          samples.push({ region, stream, start, end: performance.now(), status: 0, code: 'failed', totalMs: Number.NaN, ttfbMs: Number.NaN });
        }
      })(),
    );
    // The samples, half a tick later (`SamplePlan`: never at a request's instant, alike for every region).
    const samplesDue = due + SAMPLE_DELAY_TICKS * intervalMs - performance.now();
    if ((tick.direct !== undefined || tick.floor !== undefined) && samplesDue > 0) await sleep(samplesDue);
    // The direct call, in the same loop: every other tick, non-streamed and streamed alike often.
    if (tick.direct !== undefined) {
      const directStream = tick.direct === 'stream';
      track(
        (async () => {
          const r = directStream ? await postStream(direct, shortStream.direct, key) : await post(direct, short.direct, key);
          if (r.status !== 200) return;
          if (directStream) directTtfb.push(r.ttfbMs);
          else directTotal.push(r.totalMs);
        })().catch(() => undefined),
      );
    }
    // The floor: one admission on a region's own DynamoDB Local every other tick, each region's
    // after one of its own requests, one at a time per region (its round-trip count is per process, not per call).
    if (tick.floor !== undefined) {
      const floorRegion = tick.floor;
      if (!floorBusy.has(floorRegion)) {
        floorBusy.add(floorRegion);
        const floor = floors.get(floorRegion) as Floor;
        track(
          floor
            .transaction(true)
            .then(() => {
              (floorSamples.get(floorRegion) as number[]).push(...floor.takeSamples());
            })
            .catch(() => undefined)
            .finally(() => floorBusy.delete(floorRegion)),
        );
      }
    }
  }
  await Promise.all([...pending]);
  const trafficSeconds = (performance.now() - t0) / 1000;
  // Transfers still under way (a give two replication hops after its ask) are let finish and read.
  const settleMs = 2 * o.lagMs + 1_000;
  await sleep(settleMs);
  // Then what was given and not yet credited is let land (bounded), so the money read at the end is settled.
  let end = await inTransit(regions, t.workspaceId);
  for (const until = Date.now() + IN_TRANSIT_WAIT_MS; (end.inTransitMicros !== 0 || end.unansweredMicros !== 0) && Date.now() < until; end = await inTransit(regions, t.workspaceId)) await sleep(250);
  let counters = await sentByCounters(regions, t.workspaceId);
  const streamSent = (): Record<string, number> => Object.fromEntries(regions.names.map((r) => [r, tally.events.filter((e) => e.region === r && e.kind === 'give').reduce((a, e) => a + e.micros, 0)]));
  for (let i = 0; i < 40 && regions.names.some((r) => counters[r] !== streamSent()[r]); i += 1) {
    await sleep(250);
    counters = await sentByCounters(regions, t.workspaceId);
  }
  const stream = streamSent();

  const windowEnd = t0 + o.warmUpWindowS * 1_000;
  const sendTimes = samples.map((s) => s.start);
  const moves = {
    all: countWindow(tally.events, sendTimes, -Infinity, Infinity),
    firstMinute: countWindow(tally.events, sendTimes, -Infinity, windowEnd),
    rest: countWindow(tally.events, sendTimes, windowEnd, Infinity),
  };
  const asks = tally.events.filter((e) => e.kind === 'ask');
  const transferWaitMs = o.transferWaitMs ?? STAGE_TRANSFER_WAIT_MS;
  const minWaitMs = Math.min(o.lagMs, transferWaitMs) / 2;
  const directTotalS = summarize(directTotal);
  const directTtfbS = summarize(directTtfb);
  const figures: Record<string, RegionFigures> = {};
  for (const region of regions.names) {
    const mine = samples.filter((s) => s.region === region);
    const ok = mine.filter((s) => s.status === 200);
    const refused: Record<string, number> = {};
    for (const s of mine) if (s.status !== 200) refused[s.code ?? `http_${s.status}`] = (refused[s.code ?? `http_${s.status}`] ?? 0) + 1;
    const gateway = summarize(ok.filter((s) => !s.stream).map((s) => s.totalMs));
    const ttfbGateway = summarize(ok.filter((s) => s.stream).map((s) => s.ttfbMs));
    const floor = summarize(floorSamples.get(region) as number[]);
    const limits = addedLimits(floor);
    const latency = {
      addedP50Ms: gateway.p50 - directTotalS.p50,
      addedP99Ms: gateway.p99 - directTotalS.p99,
      ttfbAddedP50Ms: ttfbGateway.p50 - directTtfbS.p50,
      ttfbAddedP99Ms: ttfbGateway.p99 - directTtfbS.p99,
    };
    const limitFigures = { addedP50Ms: limits.p50, addedP99Ms: limits.p99, ttfbAddedP50Ms: limits.p50, ttfbAddedP99Ms: limits.p99 };
    // A figure without samples (every request of the kind refused) is no figure: it is neither met nor missed.
    const missed = (Object.keys(latency) as (keyof typeof latency)[]).filter((k) => Number.isFinite(latency[k]) && !(latency[k] <= limitFigures[k]));
    const unmeasured = (Object.keys(latency) as (keyof typeof latency)[]).filter((k) => !Number.isFinite(latency[k]));
    const balance = await readRegionalBalance(regions.db.get(region) as DynamoDBDocumentClient, { ledger: tableName(regions.state.tablePrefix, 'ledger'), usage: tableName(regions.state.tablePrefix, 'usage') }, regions.setup, t.workspaceId);
    const own = balance.regions.find((m) => m.region === region) as RegionMoney;
    figures[region] = {
      requests: mine.length,
      ok: ok.length,
      refused,
      waitedForTransfer: waitedForTransfer(mine, asks, minWaitMs),
      asks: asks.filter((e) => e.region === region).length,
      movesGiven: tally.events.filter((e) => e.region === region && e.kind === 'give' && e.micros > 0).length,
      latency: { gateway: brief(gateway), ttfbGateway: brief(ttfbGateway), floor: brief(floor), ...latency, limits: limitFigures, missed, unmeasured },
      money: { creditedMicros: own.creditedMicros, availableMicros: own.availableMicros, heldMicros: own.heldMicros, spentMicros: own.spentMicros, sentMicros: own.sentMicros, receivedMicros: own.receivedMicros },
    };
  }
  for (const target of [...gw.values(), direct]) target.agent.destroy();
  // The simulator keeps every request it served in memory; a long run need not.
  await fetch(`${(regions.state.simulatorUrl as string).replace(/\/v1$/, '')}/_sim/recorded`, { method: 'DELETE' }).catch(() => undefined);
  return {
    split,
    percentHome,
    requests: samples.length,
    plannedSeconds: o.requests / o.ratePerSecond,
    trafficSeconds,
    maxInFlight,
    moves,
    timeline: tally.events.slice(0, 300).map((e) => ({ atS: (e.at - t0) / 1000, kind: e.kind, region: e.region, peer: e.peer, quantity: e.quantity, micros: e.micros })),
    perSecond: Object.fromEntries(
      regions.names.map((region) => {
        const seconds = Math.ceil(trafficSeconds);
        const ok = new Array<number>(seconds).fill(0);
        const refused = new Array<number>(seconds).fill(0);
        for (const x of samples) {
          if (x.region !== region) continue;
          const i = Math.min(seconds - 1, Math.floor((x.end - t0) / 1000));
          if (x.status === 200) ok[i] = (ok[i] ?? 0) + 1;
          else refused[i] = (refused[i] ?? 0) + 1;
        }
        return [region, { ok, refused }];
      }),
    ),
    regions: figures,
    topUp,
    direct: { total: brief(directTotalS), ttfb: brief(directTtfbS) },
    sentCheck: { counters, stream, agree: regions.names.every((r) => counters[r] === stream[r]) },
    replicationLagMs: (({ n, p50, p99, max }) => ({ n, p50, p99, max }))(summarize(watch.lagsOf(t.workspaceId))),
    inTransitMicros: end.inTransitMicros,
    unansweredMicros: end.unansweredMicros,
    errorLines: regions.errorLines() - errorsBefore,
  };
}

/** Requests on a workspace of their own in each region before any scenario: code paths, caches and the first transfers warmed, nothing counted. */
async function warmUp(regions: Regions, o: SteadyOptions): Promise<void> {
  if (o.warmRequests === 0) return;
  const t = await tenant(regions, 'steady-warm-up', o);
  const key = authHeaders(t.rawKey);
  const short = bodies(MODEL_SHORT, false);
  const shortStream = bodies(MODEL_SHORT, true);
  const statuses = new Map<number, number>();
  // Both regions at once, each one request at a time (the region holding no credit waits for it),
  // for the count or a bound, whichever comes first: a starved region waits its transfer bound each time.
  const until = performance.now() + (o.quick ? 6_000 : 15_000);
  await Promise.all(
    regions.state.regions.map(async (r) => {
      const target = targetFrom('gateway', `${r.gatewayUrl as string}/v1`, 4);
      for (let i = 0; i < o.warmRequests && performance.now() < until; i += 1) {
        const res = await (i % 2 === 0 ? post(target, short.gateway, key) : postStream(target, shortStream.gateway, key)).catch(() => ({ status: 0 }));
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      }
      target.agent.destroy();
    }),
  );
  log(`regions steady: warmed up, up to ${o.warmRequests} requests per region (${[...statuses].map(([s, n]) => `${s}:${n}`).join(' ')})`);
}

// ---------------------------------------------------------------------------------------------
// The report

/** What bench.json's `regionsSteady` holds. */
export interface RegionsSteadyResult {
  readonly when: string;
  readonly quick: boolean;
  readonly lagMs: number;
  readonly transferWaitMs: number;
  readonly transferWaitIsStageDefault: boolean;
  readonly ratePerSecond: number;
  readonly requestsPerScenario: number;
  readonly warmUpWindowS: number;
  readonly limitsMinor: { readonly credit: number; readonly workspaceMonthly: number; readonly keyMonthly: number };
  readonly regions: readonly string[];
  readonly move: string;
  readonly waited: string;
  readonly scenarios: readonly ScenarioFigures[];
  /** A few of the error lines the regions logged, one per kind. */
  readonly errorSamples: readonly string[];
  readonly elapsedSeconds: number;
  readonly loadAverageStart: number;
  readonly loadAverageEnd: number;
}

const MOVE = 'a give (sent_<peer> grew on the giver\'s own transfer item) that moved a nonzero amount, credit or key-limit headroom';
const WAITED = 'requests of a region in flight when one of its asks was read from its ledger stream and still running half the smaller of the lag and the transfer wait after it';

function targetsText(l: RegionFigures['latency']): string {
  const parts = [l.missed.length === 0 ? undefined : `missed ${l.missed.join(', ')}`, l.unmeasured.length === 0 ? undefined : `no samples: ${l.unmeasured.join(', ')}`].filter((p) => p !== undefined);
  return parts.length === 0 ? 'met' : parts.join('; ');
}

export function renderRegionsSteady(r: RegionsSteadyResult): string {
  const n = (v: number): string => (Number.isFinite(v) ? String(round(v)) : '-');
  const lines: string[] = [];
  lines.push(
    `## Two regions at steady state (${r.regions.join(' + ')}; lag ${r.lagMs} ms; transfer wait ${r.transferWaitMs} ms${r.transferWaitIsStageDefault ? ' (stage default)' : ''}; ${r.requestsPerScenario} requests a scenario at ${r.ratePerSecond}/s${r.quick ? '; quick' : ''})`,
    '',
    `A move is ${MOVE}. Load average ${n(r.loadAverageStart)} at the start, ${n(r.loadAverageEnd)} at the end.`,
    '',
    `| split (${r.regions.join('/')}) | requests | moves | per 100 | first ${r.warmUpWindowS} s: moves / requests | per 100 | after: moves / requests | per 100 | asks | empty answers | credit / key moves | sent: counters = stream |`,
    '|---|---|---|---|---|---|---|---|---|---|---|---|',
  );
  for (const s of r.scenarios) {
    const m = s.moves;
    lines.push(
      `| ${s.split} | ${m.all.requests} | ${m.all.moves} | ${n(m.all.movesPer100)} | ${m.firstMinute.moves} / ${m.firstMinute.requests} | ${n(m.firstMinute.movesPer100)} | ${m.rest.moves} / ${m.rest.requests} | ${n(m.rest.movesPer100)} | ${m.all.asks} | ${m.all.emptyAnswers} | ${m.all.creditMoves} / ${m.all.keyMoves} | ${s.sentCheck.agree ? 'yes' : `no (${JSON.stringify(s.sentCheck)})`} |`,
    );
  }
  lines.push(
    '',
    `Latency per region (ms): the gateway less the direct call, as the latency phase computes it; limits from each region's own floor (one admission transaction on its DynamoDB Local): p50 <= 1.25 x floor p50 + 1, p99 <= 2 x floor p99.`,
    '',
    '| split | region | requests | ok | refused | waited for a transfer | added p50 | limit | added p99 | limit | TTFB added p50 | limit | TTFB added p99 | limit | floor p50 / p99 | targets | spent (micros) | sent / received |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
  );
  for (const s of r.scenarios) {
    for (const [region, f] of Object.entries(s.regions)) {
      const l = f.latency;
      const refused = Object.entries(f.refused).map(([c, k]) => `${c}:${k}`).join(' ') || '0';
      lines.push(
        `| ${s.split} | ${region} | ${f.requests} | ${f.ok} | ${refused} | ${f.waitedForTransfer} (asks ${f.asks}) | ${n(l.addedP50Ms)} | ${n(l.limits.addedP50Ms)} | ${n(l.addedP99Ms)} | ${n(l.limits.addedP99Ms)} | ${n(l.ttfbAddedP50Ms)} | ${n(l.limits.ttfbAddedP50Ms)} | ${n(l.ttfbAddedP99Ms)} | ${n(l.limits.ttfbAddedP99Ms)} | ${n(l.floor.p50)} / ${n(l.floor.p99)} | ${targetsText(l)} | ${f.money.spentMicros} | ${f.money.sentMicros} / ${f.money.receivedMicros} |`,
      );
    }
  }
  lines.push('');
  for (const s of r.scenarios) {
    lines.push(
      `${s.split}: the top-up's spread sent ${Object.entries(s.topUp.sentMicros).map(([r, m]) => `${r} ${m}`).join(', ')} micros and had landed ${n(s.topUp.landedS)} s after the workspace was made (${s.topUp.inTransitMicros} still in transit then); ${s.requests} requests planned over ${n(s.plannedSeconds)} s, the last answered after ${n(s.trafficSeconds)} s (at most ${s.maxInFlight} in flight); replication lag of the transfer items as seen p50 ${n(s.replicationLagMs.p50)} ms, max ${n(s.replicationLagMs.max)} ms (${s.replicationLagMs.n} copies); ${s.inTransitMicros} micros in transit and ${s.unansweredMicros} asked and not answered at the end; ${s.errorLines} error line(s) logged by the regions.`,
    );
  }
  if (r.errorSamples.length > 0) lines.push('', 'Error lines, one of each kind:', '', ...r.errorSamples.map((l) => `    ${l}`));
  return lines.join('\n');
}

/** Runs every scenario on one two-region stack, prints the tables and merges `regionsSteady` into bench.json. */
export async function regionsSteadyMain(o: SteadyOptions): Promise<RegionsSteadyResult> {
  const started = performance.now();
  const loadAverageStart = os.loadavg()[0] ?? Number.NaN;
  const run = guardRun(WATCHDOG_MS);
  const scenarios: ScenarioFigures[] = [];
  let names: readonly string[] = [];
  let errorSamples: readonly string[] = [];
  try {
    log(`regions steady: starting two regions (npm run start:regions, replication lag ${o.lagMs} ms)`);
    const regions = await startRegions(run.cleanup, o);
    names = regions.names;
    log(`regions steady: ${regions.names.join(' and ')} serving in ${Math.round((performance.now() - started) / 1000)} s`);
    const watch = new TransferWatch(regions);
    await watch.start(run.cleanup);
    const floors = new Map<string, Floor>();
    for (const region of regions.names) floors.set(region, await floorFor(regions, region, run.cleanup, o));
    await warmUp(regions, o);
    try {
      for (const p of o.splits) scenarios.push(await scenario(regions, watch, floors, o, p));
    } finally {
      errorSamples = regions.errorSamples();
    }
  } finally {
    await run.cleanup.run();
    run.disarm();
  }
  const transferWaitMs = o.transferWaitMs ?? STAGE_TRANSFER_WAIT_MS;
  const result: RegionsSteadyResult = {
    when: new Date().toISOString(),
    quick: o.quick,
    lagMs: o.lagMs,
    transferWaitMs,
    transferWaitIsStageDefault: o.transferWaitMs === undefined,
    ratePerSecond: o.ratePerSecond,
    requestsPerScenario: o.requests,
    warmUpWindowS: o.warmUpWindowS,
    limitsMinor: { credit: o.creditMinor, workspaceMonthly: o.workspaceLimitMinor, keyMonthly: o.keyLimitMinor },
    regions: names,
    move: MOVE,
    waited: WAITED,
    scenarios,
    errorSamples,
    elapsedSeconds: (performance.now() - started) / 1000,
    loadAverageStart,
    loadAverageEnd: os.loadavg()[0] ?? Number.NaN,
  };
  process.stdout.write(`${renderRegionsSteady(result)}\n`);
  mergeBenchJson({ regionsSteady: result });
  log(`regions steady: merged into bench-results/bench.json in ${Math.round(result.elapsedSeconds)} s`);
  return result;
}

if (require.main === module) {
  regionsSteadyMain(parseSteadyArgs(process.argv.slice(2))).then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(`[regions-steady] failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exit(1);
    },
  );
}
