/**
 * `npm run start:regions`: a Sluice stage of two regions on this machine, everything on loopback
 * (docs/regions.md, "Local mode"):
 *
 * - one DynamoDB Local per region, each in its own process group with its own data folder
 *   (`.dynamodb/<region>/`, 0700), every table streamed as a global table's replicas are;
 * - the replicator between them (`replicator.ts`: each item write copied to the other region after
 *   `SLUICE_REPLICATION_LAG_MS`, last writer wins), its state in `.sluice/regions/replicator.json`;
 * - one process group per region (`region-main.ts`): the gateway in a process of its own, the
 *   aggregator on the region's usage stream, the sweeper and the transfer agent in another, with the
 *   region's name (`SLUICE_REGION`) and its own DynamoDB Local;
 * - one upstream simulator, shared;
 * - the management API, the console and the low-credit notifier of the home region (the first of
 *   `SLUICE_REGIONS`, the configuration home), on its DynamoDB Local, in this process;
 * - the front door on `PORT` (8787 by default): the one address clients use, probing each region's
 *   gateway with a probe key minted at each start and sending each request to a healthy region.
 *
 * A region's processes can be killed on their own (`kill -9 -<pid>` of its gateway process or its
 * DynamoDB Local, both listed in `.sluice/regions/state.json`); the region then stays down, as a
 * lost region does, until `kill -USR2 <pid of this process>` starts again whatever part of any
 * region is down, on the same ports and data. Ctrl-C (or SIGTERM) stops everything.
 *
 * Environment: `SLUICE_REGIONS` (default `us-east-1,us-west-2`), `SLUICE_REPLICATION_LAG_MS` (500),
 * `SLUICE_FRONT_DOOR_ROUTING` (`spread` or `ordered`), `PORT`, `SLUICE_ADMIN_PORT`,
 * `SLUICE_CONSOLE_PORT`, `SLUICE_LOCAL_HOME`, `SLUICE_LOCAL_SWEEP_EVERY_MS`,
 * `SLUICE_DYNAMODB_JIT` (`full`, or `quick` for a run of a few minutes: see `jit` in
 * `../dynamo-local.ts`), and the variables the functions read (`SLUICE_REQUEST_LIMIT_MS`,
 * `SLUICE_CACHE_TTL_MS`, …), passed to every region.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { chmod, mkdir, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';
import { hashKey } from '../../lambdas/core/api-key';
import { makeAdminDeps } from '../../lambdas/admin/wiring';
import { ENV, loadConfig } from '../../lambdas/shared/config';
import { ALL_TABLES, tableName } from '../../lambdas/shared/schema';
import { ensureAdminToken, serveAdmin } from '../admin-server';
import { type DynamoLocal, isAlive, isDynamoLocalProcess, startDynamoLocal, stopByPid } from '../dynamo-local';
import { freePort } from '../free-port';
import { notifyEveryMs, startLocalNotifier } from '../notifier';
import { isLocalStart, message, portFrom, printBanner, providerKeysSet, readJson, seedCall, seedWorkspace } from '../services';
import { localStatePaths } from '../state-paths';
import { ensureTables, makeDynamoClient } from '../tables';
import { startFrontDoor } from './front-door';
import { type Replicator, startReplicator } from './replicator';
import { HOME_REGION_ENV, jitFrom, lagFrom, REGION_ENV, regionsFrom, REGIONS_ENV, type RegionState, type RegionsStateFile, routingFrom } from './settings';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

const REPO_ROOT = resolve(__dirname, '..', '..');
const PATHS = localStatePaths(REPO_ROOT);
const HOME = PATHS.home;
const DATA_ROOT = PATHS.dataDir;
const STATE_DIR = PATHS.stateDir;
const REGIONS_DIR = join(STATE_DIR, 'regions');
const STATE_FILE = join(REGIONS_DIR, 'state.json');
/** `npm start`'s state file: written too, so `npm run sluice -- …` reaches the home region's management API. */
const LOCAL_STATE_FILE = PATHS.localStateFile;
const SEED_FILE = join(REGIONS_DIR, 'seed.json');
const PROBE_FILE = join(REGIONS_DIR, 'probe.json');
const REPLICATOR_FILE = join(REGIONS_DIR, 'replicator.json');
const ADMIN_TOKEN_FILE = PATHS.adminTokenFile;
const SECRETS_FILE = PATHS.secretsFile;
const EVENTS_FILE = join(REGIONS_DIR, 'events.jsonl');
const REGION_MAIN = join(__dirname, 'region-main.ts');

const TABLE_PREFIX = 'sluice-local-';
const DEFAULT_PORT = 8787;
const REGION_READY_MS = 90_000;
const REGION_STOP_GRACE_MS = 5_000;

const REGIONS = regionsFrom(process.env);
const HOME_REGION = REGIONS[0] as string;
const LAG_MS = lagFrom(process.env);
const ROUTING = routingFrom(process.env);
const JIT = jitFrom(process.env);

const log = (line: string): void => console.log(`[sluice] ${line}`);
const warn = (line: string): void => console.error(`[sluice] ${line}`);

/** One region's parts; a part is undefined while it is down. */
interface Region {
  readonly name: string;
  readonly dataDir: string;
  /** Kept from the first start, so a region comes back where the replicator and the front door expect it. */
  dbPort?: number;
  gatewayPort?: number;
  db?: DynamoLocal;
  gateway?: ChildProcess;
  gatewayUrl?: string;
}

const regions: Region[] = REGIONS.map((name) => ({ name, dataDir: join(DATA_ROOT, name) }));
const cleanups: { readonly name: string; readonly run: () => Promise<void> }[] = [];
let shuttingDown: Promise<never> | undefined;
let startup: Promise<void> = Promise.resolve();
let reviving: Promise<void> = Promise.resolve();
let published: Omit<RegionsStateFile, 'regions' | 'pid'> = {
  baseUrl: null,
  adminUrl: null,
  consoleUrl: null,
  simulatorUrl: null,
  tablePrefix: TABLE_PREFIX,
  lagMs: LAG_MS,
};

const endpointOf = (r: Region): string => `http://127.0.0.1:${r.dbPort ?? 0}`;

function shutdown(reason: string, code: number): Promise<never> {
  if (shuttingDown !== undefined) return shuttingDown;
  shuttingDown = (async (): Promise<never> => {
    log(code === 0 ? `stopping (${reason})…` : `stopping after an error (${reason})…`);
    await startup.catch(() => undefined);
    await reviving.catch(() => undefined);
    for (let next = cleanups.pop(); next !== undefined; next = cleanups.pop()) {
      try {
        await next.run();
      } catch (err) {
        warn(`stopping ${next.name} failed: ${message(err)}`);
      }
    }
    await rm(STATE_FILE, { force: true });
    await rm(LOCAL_STATE_FILE, { force: true });
    log('stopped');
    process.exit(code);
  })();
  return shuttingDown;
}

/** Writes where every part is now (`state.json`, and `local.json` for the CLI). */
async function publish(): Promise<void> {
  const home = regions[0] as Region;
  const state: RegionsStateFile = {
    pid: process.pid,
    ...published,
    regions: regions.map(
      (r): RegionState => ({
        name: r.name,
        endpoint: endpointOf(r),
        dataDir: r.dataDir,
        dynamodbPid: r.db?.pid ?? null,
        gatewayPid: r.gateway?.pid ?? null,
        gatewayUrl: r.gatewayUrl ?? null,
      }),
    ),
  };
  await writeFile(STATE_FILE, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
  const local = {
    endpoint: endpointOf(home),
    tablePrefix: TABLE_PREFIX,
    gatewayUrl: published.baseUrl,
    simulatorUrl: published.simulatorUrl,
    secretsFile: SECRETS_FILE,
    adminUrl: published.adminUrl,
    adminTokenFile: ADMIN_TOKEN_FILE,
    consoleUrl: published.consoleUrl,
    pids: { start: process.pid, dynamodb: home.db?.pid ?? 0 },
  };
  await writeFile(LOCAL_STATE_FILE, `${JSON.stringify(local, null, 2)}\n`, { mode: 0o600 });
}

/** Refuses to run beside another start on this folder; stops what a crashed run left behind (by recorded PID, after checking what it is). */
async function reclaimPreviousRun(): Promise<void> {
  const local = (await readJson(LOCAL_STATE_FILE)) as { pids?: { start?: unknown } } | undefined;
  const other = local?.pids?.start;
  if (typeof other === 'number' && other !== process.pid && isLocalStart(other)) {
    throw new Error(`another npm start or start:regions (pid ${other}) is using ${HOME}; stop it first (or delete ${LOCAL_STATE_FILE} if that process is not Sluice)`);
  }
  const previous = (await readJson(STATE_FILE)) as Partial<RegionsStateFile> | undefined;
  for (const r of previous?.regions ?? []) {
    if (typeof r.gatewayPid === 'number' && isRegionProcess(r.gatewayPid)) {
      log(`stopping region ${r.name}'s gateway left behind by an earlier run (pid ${r.gatewayPid})`);
      await stopByPid(r.gatewayPid);
    }
    if (typeof r.dynamodbPid === 'number' && isDynamoLocalProcess(r.dynamodbPid)) {
      log(`stopping region ${r.name}'s DynamoDB Local left behind by an earlier run (pid ${r.dynamodbPid})`);
      await stopByPid(r.dynamodbPid);
    }
  }
}

function isRegionProcess(pid: number): boolean {
  if (!isAlive(pid)) return false;
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('region-main.ts');
  } catch {
    return false;
  }
}

/** Starts (or starts again, on its port and data) a region's DynamoDB Local, in its own process group. */
async function startRegionDb(r: Region): Promise<DynamoLocal> {
  const db = await startDynamoLocal({
    dataDir: r.dataDir,
    ...(r.dbPort === undefined ? {} : { port: r.dbPort }),
    detached: true,
    readyTimeoutMs: 60_000,
    jit: JIT,
  });
  r.db = db;
  r.dbPort = db.port;
  void db.exited.then(({ code, signal }) => {
    if (r.db !== db) return;
    r.db = undefined;
    if (shuttingDown !== undefined) return;
    warn(`region ${r.name}: DynamoDB Local exited (code ${code}, signal ${signal}); the region's store stays down until kill -USR2 ${process.pid}`);
    void publish().catch(() => undefined);
  });
  return db;
}

/** The environment of a region's functions: this process's (settings such as SLUICE_REQUEST_LIMIT_MS pass through), then the region's own. */
function regionEnv(r: Region, simulatorUrl: string): NodeJS.ProcessEnv {
  return {
    ...process.env,
    [ENV.stage]: 'local',
    [ENV.tablePrefix]: TABLE_PREFIX,
    [ENV.dynamoEndpoint]: endpointOf(r),
    [ENV.secretSource]: 'env',
    [ENV.localUpstreamUrl]: simulatorUrl,
    SLUICE_LOCAL_SECRETS_FILE: SECRETS_FILE,
    [REGION_ENV]: r.name,
    [REGIONS_ENV]: REGIONS.join(','),
    [HOME_REGION_ENV]: HOME_REGION,
    AWS_REGION: r.name,
    PORT: String(r.gatewayPort ?? 0),
  };
}

/** Starts (or starts again) a region's gateway and workers: `region-main.ts`, leading its own process group (its two parts its children in it). */
async function startRegionProcess(r: Region, simulatorUrl: string): Promise<ChildProcess> {
  r.gatewayPort ??= await freePort('127.0.0.1');
  const child = spawn(process.execPath, ['--import', 'tsx', REGION_MAIN], {
    cwd: REPO_ROOT,
    env: regionEnv(r, simulatorUrl),
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  createInterface({ input: child.stderr }).on('line', (line) => relay(r.name, line));
  const url = await new Promise<string>((resolveUrl, reject) => {
    const timer = setTimeout(() => reject(new Error(`region ${r.name}'s gateway did not start within ${REGION_READY_MS} ms`)), REGION_READY_MS);
    const lines = createInterface({ input: child.stdout });
    lines.on('line', (line) => {
      const ready = /^ready (\S+)$/.exec(line);
      if (ready === null) {
        relay(r.name, line);
        return;
      }
      clearTimeout(timer);
      resolveUrl(ready[1] as string);
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`region ${r.name}'s gateway exited during start-up (code ${code}, signal ${signal})`));
    });
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  }).catch(async (err: unknown) => {
    await stopGroup(child);
    throw err;
  });
  r.gateway = child;
  r.gatewayUrl = url;
  child.once('exit', (code, signal) => {
    if (r.gateway !== child) return;
    r.gateway = undefined;
    if (shuttingDown !== undefined) return;
    warn(`region ${r.name}: its gateway exited (code ${code}, signal ${signal}); the region stays down until kill -USR2 ${process.pid}`);
    void publish().catch(() => undefined);
  });
  return child;
}

/**
 * A line from a region's process, named by its region. The front door's probes (a model listing
 * every second per region) are left out: they would drown every other line.
 */
function relay(region: string, line: string): void {
  if (PROBE_LINE.test(line)) return;
  console.error(line.startsWith(`[${region}]`) ? line : `[${region}] ${line}`);
}

/** The gateway's local line for a model listing (`GET /v1/models`): a status, no model, a duration and the request id. */
const PROBE_LINE = /^\[gateway\] 200  \d+ ms  req_\w+$/;

/** SIGTERM to a child's process group, SIGKILL after a grace period; resolves once the child is gone. */
async function stopGroup(child: ChildProcess): Promise<void> {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  const signalGroup = (signal: NodeJS.Signals): void => {
    try {
      process.kill(-(child.pid as number), signal);
    } catch {
      // Already gone.
    }
  };
  signalGroup('SIGTERM');
  const timer = setTimeout(() => signalGroup('SIGKILL'), REGION_STOP_GRACE_MS);
  await exited;
  clearTimeout(timer);
}

/** Starts again whatever part of any region is down (SIGUSR2), its store first. */
function reviveRegions(simulatorUrl: string): void {
  if (shuttingDown !== undefined) return;
  reviving = reviving.then(async () => {
    for (const r of regions) {
      if (shuttingDown !== undefined) return;
      const parts: string[] = [];
      try {
        if (r.db === undefined) {
          parts.push(`DynamoDB Local (pid ${(await startRegionDb(r)).pid})`);
        }
        if (r.gateway === undefined) {
          parts.push(`gateway (pid ${(await startRegionProcess(r, simulatorUrl)).pid})`);
        }
      } catch (err) {
        warn(`region ${r.name} could not be started again: ${message(err)}`);
        continue;
      }
      if (parts.length > 0) log(`region ${r.name} restarted: ${parts.join(', ')}`);
    }
    await publish();
    log('every region is running');
  });
}

/**
 * The front door's probe key: a workspace of its own (no credit; `GET /v1/models` costs nothing),
 * its earlier keys revoked and one minted at each start, held in this process's memory only.
 */
async function mintProbeKey(deps: Parameters<typeof seedCall>[0]): Promise<string> {
  const saved = (await readJson(PROBE_FILE)) as { workspaceId?: unknown } | undefined;
  let workspaceId = typeof saved?.workspaceId === 'string' ? saved.workspaceId : undefined;
  let ownerMemberId: string | undefined;
  if (workspaceId !== undefined) {
    const ws = `/workspaces/${encodeURIComponent(workspaceId)}`;
    const listed = await seedCall<{ keys: { keyId: string }[] }>(deps, 'GET', `${ws}/keys`).catch(() => undefined);
    if (listed === undefined) workspaceId = undefined; // gone with a deleted data folder
    for (const key of listed?.keys ?? []) await seedCall(deps, 'POST', `${ws}/keys/${encodeURIComponent(key.keyId)}/revoke`, {});
  }
  if (workspaceId === undefined) {
    const created = await seedCall<{ workspaceId: string; ownerMemberId: string }>(deps, 'POST', '/workspaces', { name: 'front door probe', ownerEmail: 'probe@localhost' });
    workspaceId = created.workspaceId;
    ownerMemberId = created.ownerMemberId;
    await writeFile(PROBE_FILE, `${JSON.stringify({ workspaceId }, null, 2)}\n`, { mode: 0o600 });
  }
  const { rawKey } = await seedCall<{ rawKey: string }>(deps, 'POST', `/workspaces/${encodeURIComponent(workspaceId)}/keys`, {
    name: 'front door probe',
    ...(ownerMemberId === undefined ? {} : { memberId: ownerMemberId }),
  });
  return rawKey;
}

/**
 * Waits until every region's replica holds the probe key (minted in the home, copied to the others
 * after the replication lag), up to 30 s: probes sent before it arrives are refused 401 by a region
 * that is only behind, which the region's log would show at every start. A replica that does not
 * catch up in time is the replicator's trouble (its own lines say so); the front door starts anyway.
 */
async function probeKeyReplicated(regions: readonly Region[], rawKey: string): Promise<void> {
  const key = { keyHash: hashKey(rawKey) };
  const deadline = Date.now() + 30_000;
  for (const r of regions) {
    const client = makeDynamoClient(endpointOf(r));
    const doc = DynamoDBDocumentClient.from(client);
    try {
      while (Date.now() < deadline) {
        const got = await doc.send(new GetCommand({ TableName: tableName(TABLE_PREFIX, 'keys'), Key: key, ConsistentRead: true }));
        if (got.Item !== undefined) break;
        await new Promise((done) => setTimeout(done, 100));
      }
    } finally {
      client.destroy();
    }
  }
}

async function main(): Promise<void> {
  process.on('SIGINT', () => void shutdown('SIGINT', 0));
  process.on('SIGTERM', () => void shutdown('SIGTERM', 0));
  process.on('uncaughtException', (err) => {
    warn(`uncaught exception: ${err.stack ?? err.message}`);
    void shutdown('uncaught exception', 1);
  });
  process.on('unhandledRejection', (err) => {
    warn(`unhandled rejection: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    void shutdown('unhandled rejection', 1);
  });
  // Last resort when this process ends without the orderly path: no region outlives it.
  process.on('exit', () => {
    for (const r of regions) {
      for (const pid of [r.gateway?.pid, r.db?.pid]) {
        if (pid === undefined) continue;
        try {
          process.kill(-pid, 'SIGKILL');
        } catch {
          // Already gone.
        }
      }
    }
  });
  startup = start();
  try {
    await startup;
  } catch (err) {
    if (shuttingDown !== undefined) return;
    warn(`start-up failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    await shutdown('start-up failed', 1);
  }
}

async function start(): Promise<void> {
  await mkdir(REGIONS_DIR, { recursive: true, mode: 0o700 });
  await chmod(STATE_DIR, 0o700);
  await chmod(REGIONS_DIR, 0o700);
  await reclaimPreviousRun();
  await mkdir(DATA_ROOT, { recursive: true, mode: 0o700 });
  await chmod(DATA_ROOT, 0o700);

  log(`starting ${regions.length} regions: ${REGIONS.join(', ')} (home ${HOME_REGION}; data in ${DATA_ROOT}/<region>/)`);
  cleanups.push({
    name: 'DynamoDB Local',
    run: async () => {
      await Promise.all(regions.map((r) => r.db?.stop()));
    },
  });
  await Promise.all(regions.map((r) => startRegionDb(r)));
  await publish();
  for (const r of regions) {
    const client = makeDynamoClient(endpointOf(r));
    try {
      await ensureTables(client, TABLE_PREFIX, { streamEveryTable: true });
    } finally {
      client.destroy();
    }
    log(`region ${r.name}: DynamoDB Local on ${endpointOf(r)} (pid ${r.db?.pid})`);
  }

  const replicator: Replicator = await startReplicator({
    regions: regions.map((r) => ({ name: r.name, endpoint: endpointOf(r) })),
    tables: ALL_TABLES.map((schema) => tableName(TABLE_PREFIX, schema.name)),
    lagMs: LAG_MS,
    stateFile: REPLICATOR_FILE,
    log: (line) => warn(`replicator: ${line}`),
  });
  cleanups.push({ name: 'replicator', run: () => replicator.stop() });
  log(`replicator copying every table between the regions after ${LAG_MS} ms (state in ${REPLICATOR_FILE})`);

  // The configuration home's writes: the catalog, the seed, the probe key; replicated to the others.
  const home = regions[0] as Region;
  process.env[ENV.stage] = 'local';
  process.env[ENV.tablePrefix] = TABLE_PREFIX;
  process.env[ENV.dynamoEndpoint] = endpointOf(home);
  process.env[ENV.secretSource] = 'env';
  process.env.SLUICE_LOCAL_SECRETS_FILE = SECRETS_FILE;
  process.env[REGION_ENV] = home.name;
  process.env[REGIONS_ENV] = REGIONS.join(',');
  process.env[HOME_REGION_ENV] = HOME_REGION;
  const homeClient = makeDynamoClient(endpointOf(home));
  cleanups.push({ name: 'DynamoDB client', run: async () => homeClient.destroy() });
  const doc = DynamoDBDocumentClient.from(homeClient, { marshallOptions: { removeUndefinedValues: true } });
  const ops = await import('../ops');
  const imported = await ops.importCatalog({ doc, tablePrefix: TABLE_PREFIX, stage: 'local' }, {});
  log(`catalog imported in ${home.name}: ${imported.providers} providers, ${imported.models} models`);
  const { providers } = ops.loadCatalogFiles({});
  const realKeys = providerKeysSet(providers);
  if (realKeys.length > 0) log(`provider keys set (${realKeys.join(', ')}): those providers are served beside the simulator`);

  const { startSimulator } = await import('../simulator');
  const simulator = await startSimulator({});
  cleanups.push({ name: 'upstream simulator', run: () => simulator.close() });
  process.env[ENV.localUpstreamUrl] = simulator.url;
  published = { ...published, simulatorUrl: simulator.url };
  log(`upstream simulator (provider "local") on ${simulator.url}`);

  cleanups.push({
    name: 'region processes',
    run: async () => {
      await Promise.all(regions.map((r) => (r.gateway === undefined ? undefined : stopGroup(r.gateway))));
    },
  });
  await Promise.all(regions.map((r) => startRegionProcess(r, simulator.url)));
  for (const r of regions) log(`region ${r.name}: gateway, aggregator and sweeper on ${r.gatewayUrl} (pid ${r.gateway?.pid})`);
  await publish();
  process.on('SIGUSR2', () => reviveRegions(simulator.url));

  const { token } = await ensureAdminToken(ADMIN_TOKEN_FILE);
  const adminDeps = makeAdminDeps(loadConfig());
  const admin = await serveAdmin({ deps: adminDeps, token, port: portFrom(process.env, 'SLUICE_ADMIN_PORT', 0) });
  cleanups.push({ name: 'management API', run: () => admin.close() });
  const { startLocalConsole } = await import('../console-start');
  const consoleServer = await startLocalConsole({ admin: makeAdminDeps(loadConfig()), keyRatePerMinute: loadConfig().keyRatePerMinute });
  cleanups.push({ name: 'console', run: () => consoleServer.close() });
  const notifier = startLocalNotifier({ doc, tablePrefix: TABLE_PREFIX, everyMs: notifyEveryMs(process.env), eventsFile: EVENTS_FILE, log, warn });
  cleanups.push({ name: 'low-credit notifier', run: () => notifier.stop() });
  published = { ...published, adminUrl: admin.url, consoleUrl: consoleServer.url };

  const probeKey = await mintProbeKey(adminDeps);
  await probeKeyReplicated(regions, probeKey);
  const frontDoor = await startFrontDoor({
    regions: regions.map((r) => ({ name: r.name, url: r.gatewayUrl as string })),
    port: portFrom(process.env, 'PORT', DEFAULT_PORT),
    routing: ROUTING,
    // A 2 s probe timeout (the front door's default is 1 s): a gateway on a busy laptop is slow, not lost.
    health: { headers: { authorization: `Bearer ${probeKey}` }, timeoutMs: 2_000 },
    log: warn,
  });
  cleanups.push({ name: 'front door', run: () => frontDoor.close() });

  const seed = await seedWorkspace({ deps: adminDeps, doc, tablePrefix: TABLE_PREFIX, seedFile: SEED_FILE, log });
  const baseUrl = `${frontDoor.url}/v1`;
  published = { ...published, baseUrl };
  await publish();
  printBanner({
    title: `Sluice is running locally in ${regions.length} regions, behind one front door.`,
    baseUrl,
    seed,
    adminUrl: admin.url,
    adminTokenFile: ADMIN_TOKEN_FILE,
    consoleUrl: consoleServer.url,
    extra: [
      ...regions.map(
        (r, i) => `  Region     ${r.name}${i === 0 ? ' (home)' : ''}: gateway ${r.gatewayUrl} (pid ${r.gateway?.pid}), DynamoDB Local ${endpointOf(r)} (pid ${r.db?.pid})`,
      ),
      `  Lose one   kill -9 -<pid> (its gateway, its DynamoDB Local); bring it back: kill -USR2 ${process.pid}`,
      `  Replicas   every table, ${LAG_MS} ms apart (SLUICE_REPLICATION_LAG_MS); state in ${STATE_FILE}`,
    ],
  });
}

void main();
