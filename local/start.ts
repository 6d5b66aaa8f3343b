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
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { chmod, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';
import type { ScheduledEvent } from 'aws-lambda';
import { ADMIN_BASE_PATH, handleAdmin, type AdminDeps } from '../lambdas/admin/app';
import { makeAdminDeps } from '../lambdas/admin/wiring';
import { formatMoney, MICROS_PER_MINOR } from '../lambdas/core/money-format';
import { ENV, loadConfig } from '../lambdas/shared/config';
import { ensureAdminToken, serveAdmin } from './admin-server';
import { tableName } from '../lambdas/shared/schema';
import { type DynamoLocal, isAlive, isDynamoLocalProcess, startDynamoLocal, stopByPid } from './dynamo-local';
import { serveLambda } from './http-server';
import { installLambdaShim, makeLambdaContext } from './lambda-shim';
import { startStreamPoller } from './stream-poller';
import { USAGE_STREAM_FILTERS, USAGE_STREAM_MAPPING } from '../lambdas/aggregator/mapping';
import { ensureTables, makeDynamoClient } from './tables';

// The SDK's notice that it will need Node 22 says nothing a local user can act on.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

const REPO_ROOT = resolve(__dirname, '..');
const HOME = resolve(process.env.SLUICE_LOCAL_HOME || REPO_ROOT);
const DATA_DIR = join(HOME, '.dynamodb');
const STATE_DIR = join(HOME, '.sluice');
const STATE_FILE = join(STATE_DIR, 'local.json');
const SEED_FILE = join(STATE_DIR, 'seed.json');
const ADMIN_TOKEN_FILE = join(STATE_DIR, 'admin-token');
const SECRETS_FILE = process.env.SLUICE_LOCAL_SECRETS_FILE || join(STATE_DIR, 'secrets.json');
/** Where the local low-credit notifier appends the events EventBridge would carry. */
const EVENTS_FILE = join(STATE_DIR, 'events.jsonl');

const TABLE_PREFIX = 'sluice-local-';
const DEFAULT_PORT = 8787;
/** How often the sweeper runs (SLUICE_LOCAL_SWEEP_EVERY_MS; a minute by default, as deployed). */
const SWEEP_EVERY_MS = sweepEveryMs(process.env);
/** How often the low-credit notifier runs (SLUICE_LOCAL_NOTIFY_EVERY_MS; a minute by default). */
const NOTIFY_EVERY_MS = notifyEveryMs(process.env);
/** Credit the dev workspace starts with, in minor units (100.00). */
const SEED_CREDIT_MINOR = 10_000;
/** The model the printed examples call when the simulator serves. */
const SIMULATED_MODEL = 'local/sim-small';

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

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

async function readJson(path: string): Promise<unknown> {
  try {
    return JSON.parse(await readFile(path, 'utf8'));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new Error(`${path} is not readable JSON (${message(err)}); delete it and start again`);
  }
}

/** Whether a PID is a running `npm start` of this program (Linux `/proc`; elsewhere: assume so). */
function isLocalStart(pid: number): boolean {
  if (!isAlive(pid)) return false;
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('start.ts');
  } catch {
    return existsSync('/proc') ? false : true;
  }
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

/** Names of the provider-key variables that are set (real providers reachable). */
function providerKeysSet(providers: readonly { keySource: { env?: string } | 'none' }[]): string[] {
  return providers
    .map((p) => (p.keySource === 'none' ? undefined : p.keySource.env))
    .filter((name): name is string => name !== undefined && (process.env[name] ?? '') !== '');
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

  const port = process.env.PORT === undefined || process.env.PORT === '' ? DEFAULT_PORT : Number(process.env.PORT);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) throw new Error(`PORT must be a port number, got ${process.env.PORT}`);
  let server;
  try {
    server = await serveLambda({ handler: gatewayModule.handler, host: '127.0.0.1', port, log: warn });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') {
      throw new Error(`port ${port} on 127.0.0.1 is already in use: stop what uses it, or run with PORT=<another port> npm start`);
    }
    throw err;
  }
  const gateway = server;
  cleanups.push({ name: 'gateway server', run: () => gateway.close() });
  checkCancelled();

  const poller = await startStreamPoller({
    endpoint: db.endpoint,
    tableName: tableName(TABLE_PREFIX, 'usage'),
    // The deployed mapping's batch size and filter (its batching window is not waited for locally).
    batchSize: USAGE_STREAM_MAPPING.batchSize,
    filters: USAGE_STREAM_FILTERS,
    handler: (event) => aggregatorModule.handler(event),
    log: warn,
  });
  cleanups.push({ name: 'usage stream poller', run: () => poller.stop() });

  let sweeping: Promise<void> | undefined;
  const sweepOnce = (): void => {
    if (sweeping !== undefined) return; // the previous run is still going; the schedule skips
    const event: ScheduledEvent = {
      version: '0',
      id: randomUUID(),
      'detail-type': 'Scheduled Event',
      source: 'aws.events',
      account: '000000000000',
      time: new Date().toISOString(),
      region: 'local',
      resources: ['arn:aws:events:local:000000000000:rule/sluice-local-sweeper'],
      detail: {},
    };
    const context = makeLambdaContext({ functionName: 'sluice-local-sweeper', timeoutMs: SWEEP_EVERY_MS });
    sweeping = sweeperModule
      .handler(event, context)
      .then(({ swept }) => {
        if (swept > 0) log(`sweeper settled ${swept} expired hold(s)`);
      })
      .catch((err: unknown) => warn(`sweeper: ${message(err)}`))
      .finally(() => {
        sweeping = undefined;
      });
  };
  // Once now: holds a crashed earlier run left open are settled without waiting a minute.
  sweepOnce();
  const timer = setInterval(sweepOnce, SWEEP_EVERY_MS);
  cleanups.push({
    name: 'sweeper timer',
    run: async () => {
      clearInterval(timer);
      await sweeping;
    },
  });

  // The low-credit notifier, as the sweeper: the deployed check on a timer, its notices on
  // stdout and in .sluice/events.jsonl instead of EventBridge and SNS.
  const notifier = startLocalNotifier({ doc, tablePrefix: TABLE_PREFIX, everyMs: NOTIFY_EVERY_MS, eventsFile: EVENTS_FILE, log, warn });
  cleanups.push({ name: 'low-credit notifier', run: () => notifier.stop() });
  log(`low-credit notifier every ${NOTIFY_EVERY_MS / 1000} s (notices also in ${EVENTS_FILE})`);

  // The management API on loopback, behind the admin token created on the first start.
  const adminPortRaw = process.env.SLUICE_ADMIN_PORT;
  const adminPort = adminPortRaw === undefined || adminPortRaw === '' ? 0 : Number(adminPortRaw);
  if (!Number.isInteger(adminPort) || adminPort < 0 || adminPort > 65_535) throw new Error(`SLUICE_ADMIN_PORT must be a port number, got ${adminPortRaw}`);
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
  const seed = await seedWorkspace(adminDeps, doc);
  checkCancelled();

  const baseUrl = `${gateway.url}/v1`;
  await writeState({ ...state, gatewayUrl: baseUrl, simulatorUrl, adminUrl: admin.url, consoleUrl: consoleServer.url });
  printBanner(baseUrl, seed, SIMULATED_MODEL, admin.url, consoleServer.url);
}

interface Seed {
  readonly workspaceId: string;
  /** Only on the start that created the workspace; never stored. */
  readonly rawKey?: string;
}

/** Who the seed's changes are audited as. */
const SEED_PRINCIPAL = 'seed';

/**
 * One change through the management API in process, as `seed`: the very route an operator's
 * command takes, so it is validated and audited the same way. Throws the refusal's message.
 */
async function seedCall<T>(deps: AdminDeps, method: 'POST', path: string, body: Record<string, unknown>): Promise<T> {
  const requestId = `req_${randomUUID().replace(/-/g, '')}`;
  const out = await handleAdmin({ method, path: `${ADMIN_BASE_PATH}${path}`, query: {}, body: JSON.stringify(body), principal: SEED_PRINCIPAL, requestId }, deps);
  const parsed = JSON.parse(out.body) as T & { error?: { message?: string } };
  if (out.status >= 400) throw new Error(`seeding the dev workspace: ${parsed.error?.message ?? `the management API answered ${out.status}`}`);
  return parsed;
}

/**
 * Creates the dev workspace, its credit and a key on first start, through the management API,
 * so each is in the audit trail (`workspace.create`, `credit.add`, `key.create`, by `seed`) like
 * every other change to money and keys. Only the workspace id is kept (`.sluice/seed.json`); the
 * raw key is printed once and exists nowhere else.
 */
async function seedWorkspace(deps: AdminDeps, doc: DynamoDBDocumentClient): Promise<Seed> {
  const saved = (await readJson(SEED_FILE)) as { workspaceId?: unknown } | undefined;
  if (typeof saved?.workspaceId === 'string') {
    const { Item } = await doc.send(
      new GetCommand({ TableName: tableName(TABLE_PREFIX, 'workspaces'), Key: { pk: saved.workspaceId, sk: 'META' } }),
    );
    if (Item !== undefined) return { workspaceId: saved.workspaceId };
    log(`workspace ${saved.workspaceId} from ${SEED_FILE} is not in the database (was .dynamodb/ deleted?): seeding a new one`);
  }
  const { workspaceId, ownerMemberId } = await seedCall<{ workspaceId: string; ownerMemberId: string }>(deps, 'POST', '/workspaces', { name: 'dev', ownerEmail: 'dev@localhost' });
  const ws = `/workspaces/${encodeURIComponent(workspaceId)}`;
  // A reference, so the seed's credit is one top-up however the start is retried.
  await seedCall(deps, 'POST', `${ws}/credit`, { amountMinor: SEED_CREDIT_MINOR, reference: 'seed' });
  const { rawKey } = await seedCall<{ rawKey: string }>(deps, 'POST', `${ws}/keys`, { memberId: ownerMemberId, name: 'dev' });
  await writeFile(SEED_FILE, `${JSON.stringify({ workspaceId }, null, 2)}\n`, { mode: 0o600 });
  return { workspaceId, rawKey };
}

function printBanner(baseUrl: string, seed: Seed, model: string, adminUrl: string, consoleUrl: string): void {
  const lines = [
    '',
    'Sluice is running locally.',
    '',
    `  Base URL   ${baseUrl}`,
    `  Admin API  ${adminUrl}/admin/v1  (token in ${ADMIN_TOKEN_FILE}; npm run sluice -- … uses it)`,
    `  Workspace  ${seed.workspaceId}`,
    `  Console    ${consoleUrl}/console/  (invite yourself: npx sluice member invite --workspace ${seed.workspaceId} --email you@example.com --owner)`,
  ];
  if (seed.rawKey !== undefined) {
    lines.push(
      `  API key    ${seed.rawKey}`,
      `             (shown this once and stored nowhere; credit ${formatMoney(SEED_CREDIT_MINOR * MICROS_PER_MINOR)})`,
      '',
      `  export SLUICE_API_KEY=${seed.rawKey}`,
    );
  } else {
    lines.push(
      '',
      '  The dev key was printed on the first start only. Mint another with:',
      `    npm run sluice -- key create --workspace ${seed.workspaceId}`,
      '  then: export SLUICE_API_KEY=<the key it prints>',
    );
  }
  lines.push(
    '',
    '  curl:',
    `    curl ${baseUrl}/chat/completions \\`,
    '      -H "Authorization: Bearer $SLUICE_API_KEY" -H "Content-Type: application/json" \\',
    `      -d '{"model":"${model}","messages":[{"role":"user","content":"Hello"}],"stream":true}'`,
    '',
    '  openai (Node):',
    `    const client = new OpenAI({ baseURL: '${baseUrl}', apiKey: process.env.SLUICE_API_KEY });`,
    `    const reply = await client.chat.completions.create({ model: '${model}', messages: [{ role: 'user', content: 'Hello' }] });`,
    '',
    'Ctrl-C stops everything.',
    '',
  );
  console.log(lines.join('\n'));
}

void main();
