/**
 * The benchmark's stack: DynamoDB Local (Java), the esbuild bundles, the seeded workspaces, the
 * upstream simulator, the gateway and a bare pass-through relay (the control: one plain node:http
 * hop), each in its own process; the keep-alive agents that drive them from this process; and the
 * run's guard (signals and a watchdog) that stops all of it by PID whatever happens.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { addCredit, createKey, createWorkspace, importCatalog, type AdminContext } from '../local/ops';
import { documentClient } from '../lambdas/adapters/dynamo-client';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { loadConfig, type RuntimeConfig } from '../lambdas/shared/config';
import { startDynamoLocal, type DynamoLocal } from '../local/dynamo-local';
import { ensureTables, makeDynamoClient } from '../local/tables';
import { deployedRuntimeNote, type Options, type Plan } from './args';
import { REPO_ROOT, buildBundles, bundleEnv, type Bundles } from './bundle';
import { Floor } from './floor';
import { targetFrom, type Target } from './load';
import { GatewayProcess, startSimulatorProcess, type SimulatorProcess } from './processes';
import { MODEL_PACED, MODEL_SHORT, TABLE_PREFIX, requestsFor, type Caller, type Requests } from './phases/requests';

/** The whole run may not take longer than this; the watchdog then cleans up and exits. */
const WATCHDOG_MS = 9 * 60_000;

/** Writes one progress line to stderr (stdout carries the tables). */
export function log(message: string): void {
  process.stderr.write(`[bench] ${message}\n`);
}

/** What to undo at the end of a run, in reverse order of doing. */
export class Cleanup {
  private readonly steps: { name: string; run: () => Promise<void> }[] = [];
  private running: Promise<void> | undefined;

  add(name: string, run: () => Promise<void>): void {
    this.steps.push({ name, run });
  }

  /** Runs every step once, last added first; a failing step does not stop the others. */
  run(): Promise<void> {
    this.running ??= (async () => {
      for (const step of [...this.steps].reverse()) {
        try {
          await step.run();
        } catch (err) {
          process.stderr.write(`cleanup (${step.name}) failed: ${err instanceof Error ? err.message : String(err)}\n`);
        }
      }
    })();
    return this.running;
  }
}

/**
 * A run's cleanup, run on SIGINT/SIGTERM and by the watchdog; `disarm` ends the watchdog and lets
 * go of the signals (call it once the cleanup has run, so a later part of the run can arm its own).
 */
export interface RunGuard {
  readonly cleanup: Cleanup;
  disarm(): void;
}

/** Arms the signals and the watchdog before anything is started, so nothing outlives the run. */
export function guardRun(watchdogMs = WATCHDOG_MS): RunGuard {
  const cleanup = new Cleanup();
  let stopping = false;
  // Kept for every signal, not once: a second Ctrl-C (or tsx relaying the first one again) must
  // not end the process halfway through its cleanup. The watchdog still bounds the cleanup.
  const onSignal = (signal: NodeJS.Signals): void => {
    if (stopping) {
      log(`${signal}: still stopping`);
      return;
    }
    stopping = true;
    log(`${signal}: stopping`);
    void cleanup.run().finally(() => process.exit(130));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const disarmSignals = (): void => {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  };
  const watchdog = setTimeout(() => {
    log(`the run exceeded ${watchdogMs / 1000} s: stopping`);
    void cleanup.run().finally(() => process.exit(2));
  }, watchdogMs);
  watchdog.unref();
  return {
    cleanup,
    disarm: () => {
      clearTimeout(watchdog);
      disarmSignals();
    },
  };
}

/** A gateway process and the keep-alive agent that drives it. */
export interface GatewaySide {
  readonly gw: GatewayProcess;
  readonly gwT: Target;
}

/** The running stack every phase is handed. */
export interface Stack {
  readonly cleanup: Cleanup;
  /** `bench-results/` under the repository root. */
  readonly outDir: string;
  /** Where `--profile` leaves the gateway's CPU profile. */
  readonly profileDir: string;
  readonly bundles: Bundles;
  readonly db: DynamoLocal;
  readonly config: RuntimeConfig;
  readonly doc: DynamoDBDocumentClient;
  /** Seeded callers, each with its own workspace and key; the first one serves the sequential phases. */
  readonly callers: readonly Caller[];
  readonly first: Caller;
  readonly sim: SimulatorProcess;
  readonly gw: GatewayProcess;
  readonly relay: GatewayProcess;
  readonly gwT: Target;
  readonly directT: Target;
  readonly relayT: Target;
  /** One TransactWriteItems from this process, on a workspace of its own. */
  readonly floor: Floor;
  /** The bodies and keys of the sequential phases (the first caller's). */
  readonly requests: Requests;
  /**
   * Starts another gateway process on the same database, simulator and `node` binary, with these
   * `node` options beside the bench's own (`--expose-gc`, and `--profile`'s); the run's cleanup
   * stops it. The CPU share gives each memory size a gateway of its own (`cpu-share.ts`).
   */
  startGateway(nodeOptions: readonly string[]): Promise<GatewaySide>;
  /** Stops the gateway, the relay, the simulator and the database (the rest goes at cleanup). */
  stopServices(): Promise<void>;
}

/** Builds, starts and seeds everything; every step registers its undoing with `cleanup` first. */
export async function startStack(cleanup: Cleanup, plan: Plan, options: Options): Promise<Stack> {
  const outDir = path.join(REPO_ROOT, 'bench-results');
  mkdirSync(outDir, { recursive: true });
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'sluice-bench-'));
  cleanup.add('temp dir', async () => rmSync(tmp, { recursive: true, force: true }));

  log('bundling (esbuild) and starting DynamoDB Local');
  // Both settle before going on, so a failed build never leaves a database starting unwatched.
  const [built, dbStart] = await Promise.allSettled([buildBundles(tmp), startDynamoLocal({ detached: true, readyTimeoutMs: 60_000 })]);
  if (dbStart.status === 'fulfilled') cleanup.add('DynamoDB Local', () => dbStart.value.stop());
  if (built.status === 'rejected') throw built.reason;
  if (dbStart.status === 'rejected') throw dbStart.reason;
  const bundles = built.value;
  const db = dbStart.value;
  log(`DynamoDB Local pid ${db.pid} on ${db.endpoint}; gateway bundle ${bundles.handlerBytes} bytes`);

  const adminClient = makeDynamoClient(db.endpoint);
  cleanup.add('admin client', async () => adminClient.destroy());
  await ensureTables(adminClient, TABLE_PREFIX);
  const config = loadConfig({ SLUICE_STAGE: 'local', SLUICE_TABLE_PREFIX: TABLE_PREFIX, SLUICE_DYNAMODB_ENDPOINT: db.endpoint });
  const doc = documentClient(config);
  cleanup.add('document client', async () => doc.destroy());
  const admin: AdminContext = { doc, tablePrefix: TABLE_PREFIX, stage: 'local' };
  await importCatalog(admin, {});
  const seedOne = async (): Promise<Caller> => {
    const ws = await createWorkspace(admin, { name: 'bench' });
    await addCredit(admin, { workspaceId: ws.workspaceId, minor: 100_000 });
    const key = await createKey(admin, { workspaceId: ws.workspaceId });
    return { workspaceId: ws.workspaceId, keyId: key.keyId, rawKey: key.rawKey };
  };
  const callers: Caller[] = [];
  for (let i = 0; i < plan.workspaces; i += 8) {
    callers.push(...(await Promise.all(Array.from({ length: Math.min(8, plan.workspaces - i) }, seedOne))));
  }
  const floorCaller = await seedOne();
  log(`seeded ${callers.length + 1} workspaces`);

  const sim = await startSimulatorProcess(bundles.simulator, bundleEnv({}));
  cleanup.add('simulator', () => sim.stop());
  const profileDir = path.join(outDir, 'profile');
  if (options.profile) mkdirSync(profileDir, { recursive: true });
  const maxConcurrency = Math.max(...plan.concurrencies);
  const gatewayEnv = bundleEnv({
    SLUICE_STAGE: 'local',
    SLUICE_TABLE_PREFIX: TABLE_PREFIX,
    SLUICE_DYNAMODB_ENDPOINT: db.endpoint,
    SLUICE_SECRET_SOURCE: 'env',
    SLUICE_LOCAL_UPSTREAM_URL: sim.url,
    SLUICE_LOCAL_SECRETS_FILE: path.join(tmp, 'secrets.json'),
    // The per-key request rate is a stage setting; the benchmark is not measuring it.
    SLUICE_KEY_RATE_PER_MINUTE: '100000000',
  });
  const startGateway = async (nodeOptions: readonly string[]): Promise<GatewaySide> => {
    const started = await GatewayProcess.start(
      bundles.gatewayServer,
      gatewayEnv,
      ['--expose-gc', ...nodeOptions, ...(options.profile ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : [])],
      options.gatewayNode,
    );
    cleanup.add('gateway', () => started.stop());
    const target = targetFrom('gateway', `${started.url}/v1`, maxConcurrency);
    cleanup.add('gateway agent', async () => target.agent.destroy());
    return { gw: started, gwT: target };
  };
  const { gw, gwT } = await startGateway(options.gatewayNodeOptions);
  log(`simulator pid ${sim.pid} on ${sim.url}; gateway pid ${gw.pid} on ${gw.url} (Node ${gw.node})`);
  const runtimeNote = deployedRuntimeNote(gw.node);
  if (runtimeNote !== undefined) log(runtimeNote);

  // The bare relay runs on the gateway's Node, so that the difference between them is Sluice's code.
  const relay = await GatewayProcess.start(bundles.bareRelay, bundleEnv({ BENCH_UPSTREAM_URL: sim.url }), [], options.gatewayNode);
  cleanup.add('bare relay', () => relay.stop());
  log(`bare relay pid ${relay.pid} on ${relay.url}`);

  const directT = targetFrom('direct', sim.url, maxConcurrency);
  const relayT = targetFrom('relay', `${relay.url}/v1`, maxConcurrency);
  cleanup.add('agents', async () => {
    for (const t of [directT, relayT]) t.agent.destroy();
  });
  await sim.control('/_sim/default', { model: MODEL_SHORT, behavior: { kind: 'ok' } });
  await sim.control('/_sim/default', { model: MODEL_PACED, behavior: { kind: 'ok', completionTokens: plan.gapTokens, chunkDelayMs: plan.gapDelayMs } });

  const floor = new Floor(config, doc, floorCaller, cleanup);
  return {
    cleanup,
    outDir,
    profileDir,
    bundles,
    db,
    config,
    doc,
    callers,
    first: callers[0] as Caller,
    sim,
    gw,
    relay,
    gwT,
    directT,
    relayT,
    floor,
    requests: requestsFor(callers[0] as Caller),
    startGateway,
    stopServices: async () => {
      await gw.stop();
      await relay.stop();
      await sim.stop();
      await db.stop();
    },
  };
}
