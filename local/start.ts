/**
 * `npm start`: Sluice on this machine, running the very handlers that are deployed.
 *
 * DynamoDB Local (persistent, in `.dynamodb/`) → the tables from the shared schema → the catalog
 * from `config/` → the upstream simulator as provider `local` → a dev workspace on first start
 * → the gateway handler behind a local Function URL stand-in → the aggregator on the usage
 * table's stream → the sweeper on a timer (`SLUICE_LOCAL_SWEEP_EVERY_MS`, a minute by default)
 * → the low-credit notifier on a timer (`SLUICE_LOCAL_NOTIFY_EVERY_MS`, a minute by default).
 * The catalog import keeps what was added at run time, and the simulator runs beside any real
 * provider whose key is set.
 * Ctrl-C (or SIGTERM) stops all of it, in the reverse order, and nothing is left running even
 * when start-up fails half-way.
 *
 * Environment: `PORT` (default 8787) for the gateway; `SLUICE_ADMIN_PORT` (default: any free port)
 * for the management API; `SLUICE_LOCAL_HOME` to keep `.dynamodb/`
 * and `.sluice/` somewhere other than the repository root; provider keys as named in
 * `config/providers.json` (`SLUICE_PROVIDER_KEY_*`).
 */
import { sweepEveryMs } from './sweep-interval';
import { notifyEveryMs, startLocalNotifier } from './notifier';
import { chmod, mkdir, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { makeAdminDeps } from '../lambdas/admin/wiring';
import { ENV, loadConfig } from '../lambdas/shared/config';
import { ensureAdminToken, serveAdmin } from './admin-server';
import { type DynamoLocal, isDynamoLocalProcess, startDynamoLocal, stopByPid } from './dynamo-local';
import { installLambdaShim } from './lambda-shim';
import {
  message,
  portFrom,
  printBanner,
  providerKeysSet,
  readJson,
  seedWorkspace,
  serveGateway,
  startAggregator,
  startSweeper,
  isLocalStart,
} from './services';
import { localStatePaths } from './state-paths';
import { ensureTables, makeDynamoClient } from './tables';

// The SDK's notice that it will need Node 22 says nothing a local user can act on.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

const REPO_ROOT = resolve(__dirname, '..');
const PATHS = localStatePaths(REPO_ROOT);
const HOME = PATHS.home;
const DATA_DIR = PATHS.dataDir;
const STATE_DIR = PATHS.stateDir;
const STATE_FILE = PATHS.localStateFile;
const SEED_FILE = join(STATE_DIR, 'seed.json');
const ADMIN_TOKEN_FILE = PATHS.adminTokenFile;
const SECRETS_FILE = PATHS.secretsFile;
/** Where the local low-credit notifier appends the events EventBridge would carry. */
const EVENTS_FILE = join(STATE_DIR, 'events.jsonl');

const TABLE_PREFIX = 'sluice-local-';
const DEFAULT_PORT = 8787;
/** How often the sweeper runs (SLUICE_LOCAL_SWEEP_EVERY_MS; a minute by default, as deployed). */
const SWEEP_EVERY_MS = sweepEveryMs(process.env);
/** How often the low-credit notifier runs (SLUICE_LOCAL_NOTIFY_EVERY_MS; a minute by default). */
const NOTIFY_EVERY_MS = notifyEveryMs(process.env);

/** What `.sluice/local.json` holds; the CLI's `--stage local` reads it. */
interface LocalStateFile {
  readonly endpoint: string;
  readonly tablePrefix: string;
  readonly gatewayUrl: string | null;
  readonly simulatorUrl: string | null;
  readonly secretsFile: string;
  /** The management API on loopback (`sluice` calls it); null until it is up. */
  readonly adminUrl: string | null;
  /** The admin token's file (mode 0600), sent as a Bearer token to the management API. */
  readonly adminTokenFile: string;
  /** The workspace console (`http://localhost:<port>`); `sluice member invite` prints links on it. */
  readonly consoleUrl?: string | null;
  readonly pids: { readonly start: number; readonly dynamodb: number };
}

const log = (message: string): void => console.log(`[sluice] ${message}`);
const warn = (message: string): void => console.error(`[sluice] ${message}`);

/** Resources started so far, stopped in reverse order. */
const cleanups: { readonly name: string; readonly run: () => Promise<void> }[] = [];
const aborter = new AbortController();
let dynamo: DynamoLocal | undefined;
let shuttingDown: Promise<never> | undefined;
let shutdownStartedAt = 0;
let startup: Promise<void> = Promise.resolve();

class StartupCancelled extends Error {
  override readonly name = 'StartupCancelled';
}

function checkCancelled(): void {
  if (aborter.signal.aborted) throw new StartupCancelled('start-up cancelled');
}

/** Stops everything started so far, once, then exits. */
function shutdown(reason: string, code: number): Promise<never> {
  if (shuttingDown !== undefined) {
    // A terminal's Ctrl-C can reach this process twice (directly and relayed by npm): say nothing
    // unless a later signal shows someone waiting.
    if ((reason === 'SIGINT' || reason === 'SIGTERM') && Date.now() - shutdownStartedAt > 1_000) log('still stopping…');
    return shuttingDown;
  }
  shutdownStartedAt = Date.now();
  shuttingDown = (async (): Promise<never> => {
    log(code === 0 ? `stopping (${reason})…` : `stopping after an error (${reason})…`);
    aborter.abort();
    // A start-up step in flight finishes (or notices the abort) before its resources are known.
    await startup.catch(() => undefined);
    for (let next = cleanups.pop(); next !== undefined; next = cleanups.pop()) {
      try {
        await next.run();
      } catch (err) {
        warn(`stopping ${next.name} failed: ${message(err)}`);
      }
    }
    log('stopped');
    process.exit(code);
  })();
  return shuttingDown;
}

/**
 * Refuses to run twice on the same data folder, and stops the DynamoDB Local a crashed run left
 * behind (by the PID it recorded, after checking it still is DynamoDB Local).
 */
async function reclaimPreviousRun(): Promise<void> {
  const previous = (await readJson(STATE_FILE)) as Partial<LocalStateFile> | undefined;
  const pids = previous?.pids;
  if (pids === undefined) return;
  if (typeof pids.start === 'number' && pids.start !== process.pid && isLocalStart(pids.start)) {
    throw new Error(
      `another npm start (pid ${pids.start}) is using ${HOME}; stop it first ` +
        `(or delete ${STATE_FILE} if that process is not Sluice)`,
    );
  }
  if (typeof pids.dynamodb === 'number' && isDynamoLocalProcess(pids.dynamodb)) {
    log(`stopping DynamoDB Local left behind by an earlier run (pid ${pids.dynamodb})`);
    await stopByPid(pids.dynamodb);
  }
}

async function writeState(state: LocalStateFile): Promise<void> {
  await writeFile(STATE_FILE, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
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
  // Last resort when the process ends without the orderly path (e.g. process.exit elsewhere).
  process.on('exit', () => {
    if (dynamo === undefined) return;
    try {
      process.kill(dynamo.pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  });

  startup = start();
  try {
    await startup;
  } catch (err) {
    // Cancelled by a signal: shutdown() is already running and says so.
    if (err instanceof StartupCancelled || aborter.signal.aborted) return;
    warn(`start-up failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    await shutdown('start-up failed', 1);
  }
}

async function start(): Promise<void> {
  // The user's alone, like `.dynamodb/`: it holds the admin token and the BYOK keys.
  await mkdir(STATE_DIR, { recursive: true, mode: 0o700 });
  await chmod(STATE_DIR, 0o700);
  await reclaimPreviousRun();
  checkCancelled();

  log(`starting DynamoDB Local (data in ${DATA_DIR})…`);
  // Detached: Ctrl-C reaches only this process, which then stops the server before the database.
  const db = await startDynamoLocal({ dataDir: DATA_DIR, detached: true, signal: aborter.signal, readyTimeoutMs: 60_000 });
  dynamo = db;
  cleanups.push({
    name: 'DynamoDB Local',
    run: async () => {
      await db.stop();
      dynamo = undefined;
      await rm(STATE_FILE, { force: true });
    },
  });
  void db.exited.then(({ code, signal }) => {
    if (dynamo === db && shuttingDown === undefined) {
      dynamo = undefined;
      warn(`DynamoDB Local exited unexpectedly (code ${code}, signal ${signal})`);
      void shutdown('DynamoDB Local exited', 1);
    }
  });
  log(`DynamoDB Local on ${db.endpoint} (pid ${db.pid})`);
  const state: LocalStateFile = {
    endpoint: db.endpoint,
    tablePrefix: TABLE_PREFIX,
    gatewayUrl: null,
    simulatorUrl: null,
    secretsFile: SECRETS_FILE,
    adminUrl: null,
    adminTokenFile: ADMIN_TOKEN_FILE,
    pids: { start: process.pid, dynamodb: db.pid },
  };
  // Written now, so a crash from here on leaves the PID for the next start to reclaim.
  await writeState(state);

  const client = makeDynamoClient(db.endpoint);
  cleanups.push({ name: 'DynamoDB client', run: async () => client.destroy() });
  await ensureTables(client, TABLE_PREFIX);
  checkCancelled();
  const doc = DynamoDBDocumentClient.from(client, { marshallOptions: { removeUndefinedValues: true } });

  const ops = await import('./ops');
  const ctx = { doc, tablePrefix: TABLE_PREFIX, stage: 'local' };
  // Never pruned: providers and models added at run time (`sluice provider add`, `model add`) stay.
  const imported = await ops.importCatalog(ctx, {});
  const kept = imported.unlisted.providers.length + imported.unlisted.models.length;
  log(
    `catalog imported: ${imported.providers} providers, ${imported.models} models` +
      (kept === 0
        ? ''
        : `; kept ${imported.unlisted.providers.length} providers and ${imported.unlisted.models.length} models config/ does not list ` +
          '(added at run time; `sluice catalog import --prune` removes them)'),
  );
  checkCancelled();

  const { providers } = ops.loadCatalogFiles({});
  const realKeys = providerKeysSet(providers);
  if (realKeys.length > 0) log(`provider keys set (${realKeys.join(', ')}): those providers are served beside the simulator`);
  // The simulator runs whatever keys are set, so local/* models keep working beside real providers.
  const { startSimulator } = await import('./simulator');
  const simulator = await startSimulator({});
  cleanups.push({ name: 'upstream simulator', run: () => simulator.close() });
  const simulatorUrl = simulator.url;
  log(`upstream simulator (provider "local") on ${simulator.url}`);
  checkCancelled();

  // The handlers read their configuration when their modules load: set it first.
  process.env[ENV.stage] = 'local';
  process.env[ENV.tablePrefix] = TABLE_PREFIX;
  process.env[ENV.dynamoEndpoint] = db.endpoint;
  process.env[ENV.secretSource] = 'env';
  process.env.SLUICE_LOCAL_SECRETS_FILE = SECRETS_FILE;
  process.env[ENV.localUpstreamUrl] = simulatorUrl;

  // The shim must be in place before the gateway module wraps itself in streamifyResponse.
  installLambdaShim();
  const gatewayModule = await import('../lambdas/gateway/handler');
  const aggregatorModule = await import('../lambdas/aggregator/handler');
  const sweeperModule = await import('../lambdas/sweeper/handler');
  checkCancelled();

  const port = portFrom(process.env, 'PORT', DEFAULT_PORT);
  const server = await serveGateway(gatewayModule.handler, port, warn, 'run with PORT=<another port> npm start');
  const gateway = server;
  cleanups.push({ name: 'gateway server', run: () => gateway.close() });
  checkCancelled();

  const poller = await startAggregator({
    endpoint: db.endpoint,
    tablePrefix: TABLE_PREFIX,
    handler: (event) => aggregatorModule.handler(event),
    log: warn,
  });
  cleanups.push({ name: 'usage stream poller', run: () => poller.stop() });

  const sweeper = startSweeper({
    handler: (event, context) => sweeperModule.handler(event, context),
    everyMs: SWEEP_EVERY_MS,
    functionName: 'sluice-local-sweeper',
    region: 'local',
    log,
    warn,
  });
  cleanups.push({ name: 'sweeper timer', run: () => sweeper.stop() });

  // The low-credit notifier, as the sweeper: the deployed check on a timer, its notices on
  // stdout and in .sluice/events.jsonl instead of EventBridge and SNS.
  const notifier = startLocalNotifier({ doc, tablePrefix: TABLE_PREFIX, everyMs: NOTIFY_EVERY_MS, eventsFile: EVENTS_FILE, log, warn });
  cleanups.push({ name: 'low-credit notifier', run: () => notifier.stop() });
  log(`low-credit notifier every ${NOTIFY_EVERY_MS / 1000} s (notices also in ${EVENTS_FILE})`);

  // The management API on loopback, behind the admin token created on the first start.
  const adminPort = portFrom(process.env, 'SLUICE_ADMIN_PORT', 0);
  const { token } = await ensureAdminToken(ADMIN_TOKEN_FILE);
  const adminDeps = makeAdminDeps(loadConfig());
  const admin = await serveAdmin({ deps: adminDeps, token, port: adminPort });
  cleanups.push({ name: 'management API', run: () => admin.close() });
  checkCancelled();

  const { startLocalConsole } = await import('./console-start');
  const consoleServer = await startLocalConsole({ admin: makeAdminDeps(loadConfig()), keyRatePerMinute: loadConfig().keyRatePerMinute });
  cleanups.push({ name: 'console', run: () => consoleServer.close() });
  checkCancelled();

  // Seeded last: a start that fails before this point never mints a key nobody was shown.
  const seed = await seedWorkspace({ deps: adminDeps, doc, tablePrefix: TABLE_PREFIX, seedFile: SEED_FILE, log });
  checkCancelled();

  const baseUrl = `${gateway.url}/v1`;
  await writeState({ ...state, gatewayUrl: baseUrl, simulatorUrl, adminUrl: admin.url, consoleUrl: consoleServer.url });
  printBanner({ title: 'Sluice is running locally.', baseUrl, seed, adminUrl: admin.url, adminTokenFile: ADMIN_TOKEN_FILE, consoleUrl: consoleServer.url });
}

void main();
