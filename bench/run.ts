/**
 * `npm run bench`: the gateway against the direct call, on one machine, in one run.
 *
 * Starts DynamoDB Local (Java), the upstream simulator and the gateway, each in its own process,
 * seeds workspaces, and drives both sides from this process with node:http keep-alive agents,
 * alternating gateway and direct so that both meet the same machine state. Every phase is bounded
 * by a count or a duration; the run stops by itself and stops what it started, by PID.
 *
 *   npm run bench                  full run (about 3 minutes on 2 cores)
 *   npm run bench -- --quick       a short smoke run
 *   npm run bench -- --profile     also writes the gateway's CPU profile (node --cpu-prof)
 *
 * Output: a table on stdout, `bench-results/bench.json`, `bench-results/latency.svg`.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { addCredit, createKey, createWorkspace, importCatalog, type AdminContext } from '../cli/ops';
import { DynamoLedger } from '../lambdas/adapters/dynamo-ledger';
import type { AdmissionLimits } from '../lambdas/gateway/ports';
import { documentClient } from '../lambdas/adapters/dynamo-client';
import { loadConfig } from '../lambdas/shared/config';
import { tableName } from '../lambdas/shared/schema';
import { startDynamoLocal } from '../local/dynamo-local';
import { ensureTables, makeDynamoClient } from '../local/tables';
import { REPO_ROOT, buildBundles, bundleEnv, measureModuleInit, type Bundles, type InitResult } from './bundle';
import { cdfChart } from './chart';
import { closedLoop, post, postStream, targetFrom, type LoadResult, type StreamTiming, type Target } from './load';
import { GatewayProcess, startSimulatorProcess } from './processes';
import type { GatewayStats, TripSample } from './protocol';
import { histogram, round, summarize, type Summary } from './stats';

// ---------------------------------------------------------------------------------------------
// Plan

interface Plan {
  readonly workspaces: number;
  readonly warmupMs: number;
  readonly latencyIterations: number;
  readonly cpuRequests: number;
  readonly concurrencies: readonly number[];
  readonly sliceMs: number;
  readonly rounds: number;
  readonly ttfbStreams: number;
  readonly gapStreams: number;
  readonly gapTokens: number;
  readonly gapDelayMs: number;
  readonly shortTokens: number;
  readonly bigBytes: number;
  readonly initRuns: number;
}

const FULL: Plan = {
  workspaces: 64,
  warmupMs: 3_000,
  latencyIterations: 1_200,
  cpuRequests: 500,
  concurrencies: [16, 64],
  sliceMs: 4_000,
  rounds: 2,
  ttfbStreams: 300,
  gapStreams: 40,
  gapTokens: 100,
  gapDelayMs: 2,
  shortTokens: 2,
  bigBytes: 100 * 1024 * 1024,
  initRuns: 7,
};

const QUICK: Plan = {
  ...FULL,
  workspaces: 16,
  warmupMs: 1_000,
  latencyIterations: 150,
  cpuRequests: 100,
  sliceMs: 1_000,
  rounds: 1,
  ttfbStreams: 40,
  gapStreams: 6,
  bigBytes: 10 * 1024 * 1024,
  initRuns: 3,
};

/** The whole run may not take longer than this; the watchdog then cleans up and exits. */
const WATCHDOG_MS = 9 * 60_000;
const TABLE_PREFIX = 'bench-';
const MODEL_SHORT = 'sim-small';
const MODEL_PACED = 'sim-large';
const MAX_TOKENS = 64;

// ---------------------------------------------------------------------------------------------
// Cleanup

class Cleanup {
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

function log(message: string): void {
  process.stderr.write(`[bench] ${message}\n`);
}

// ---------------------------------------------------------------------------------------------
// Requests

interface Caller {
  readonly workspaceId: string;
  readonly keyId: string;
  readonly rawKey: string;
}

function chatBody(model: string, stream: boolean, maxTokens = MAX_TOKENS): Buffer {
  return Buffer.from(
    JSON.stringify({
      model,
      messages: [{ role: 'user', content: 'Say hello to the benchmark, briefly.' }],
      max_tokens: maxTokens,
      ...(stream ? { stream: true } : {}),
    }),
  );
}

interface Bodies {
  readonly gateway: Buffer;
  readonly direct: Buffer;
}

function bodies(model: string, stream: boolean, maxTokens = MAX_TOKENS): Bodies {
  return { gateway: chatBody(`local/${model}`, stream, maxTokens), direct: chatBody(model, stream, maxTokens) };
}

function authHeaders(key: string): Record<string, string> {
  return { authorization: `Bearer ${key}` };
}

function expectOk(t: { status: number }, what: string): void {
  if (t.status !== 200) throw new Error(`${what} answered ${t.status}`);
}

// ---------------------------------------------------------------------------------------------
// Results

interface Side {
  readonly gateway: Summary;
  readonly direct: Summary;
  /** gateway minus direct, at p50 and p99. */
  readonly addedP50: number;
  readonly addedP99: number;
}

function side(gateway: readonly number[], direct: readonly number[]): Side {
  const g = summarize(gateway);
  const d = summarize(direct);
  return { gateway: g, direct: d, addedP50: g.p50 - d.p50, addedP99: g.p99 - d.p99 };
}

interface Throughput {
  readonly concurrency: number;
  readonly gateway: { rps: number; ok: number; failed: number; latency: Summary; firstError?: string };
  readonly direct: { rps: number; ok: number; failed: number; latency: Summary; firstError?: string };
  readonly gatewayCpuUsPerRequest: number;
  readonly gatewayTripsPerRequest: number;
}

interface TripReport {
  readonly samples: number;
  /** Requests served with every lookup from cache (the warm path). */
  readonly warm: number;
  readonly ledgerBeforeFirstByteOnWarm: { value: number; count: number }[];
  readonly lookupsBeforeFirstByte: { value: number; count: number }[];
  readonly during: { value: number; count: number }[];
  readonly afterEnd: { value: number; count: number }[];
  readonly meanTotal: number;
}

function tripReport(samples: readonly TripSample[]): TripReport {
  const ok = samples.filter((s) => s.status === 200);
  const warm = ok.filter((s) => s.lookupsBefore === 0);
  const total = ok.reduce((acc, s) => acc + s.ledgerBefore + s.lookupsBefore + s.during + s.after, 0);
  return {
    samples: ok.length,
    warm: warm.length,
    ledgerBeforeFirstByteOnWarm: histogram(warm.map((s) => s.ledgerBefore)),
    lookupsBeforeFirstByte: histogram(ok.map((s) => s.lookupsBefore)),
    during: histogram(ok.map((s) => s.during)),
    afterEnd: histogram(ok.map((s) => s.after)),
    meanTotal: ok.length === 0 ? Number.NaN : total / ok.length,
  };
}

interface TargetResult {
  readonly name: string;
  readonly figure: string;
  readonly limit: string;
  readonly met: boolean;
}

// ---------------------------------------------------------------------------------------------
// The run

interface Options {
  readonly quick: boolean;
  readonly profile: boolean;
}

function parseArgs(argv: readonly string[]): Options {
  let quick = false;
  let profile = false;
  for (const a of argv) {
    if (a === '--quick') quick = true;
    else if (a === '--profile') profile = true;
    else throw new Error(`unknown argument ${a} (use --quick, --profile)`);
  }
  return { quick, profile };
}

async function main(): Promise<void> {
  const options = parseArgs(process.argv.slice(2));
  const plan = options.quick ? QUICK : FULL;
  const started = performance.now();
  const loadAverageStart = os.loadavg()[0] ?? Number.NaN;
  const cleanup = new Cleanup();
  const onSignal = (signal: NodeJS.Signals): void => {
    log(`${signal}: stopping`);
    void cleanup.run().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const watchdog = setTimeout(() => {
    log(`the run exceeded ${WATCHDOG_MS / 1000} s: stopping`);
    void cleanup.run().finally(() => process.exit(2));
  }, WATCHDOG_MS);
  watchdog.unref();

  const outDir = path.join(REPO_ROOT, 'bench-results');
  mkdirSync(outDir, { recursive: true });
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'sluice-bench-'));
  cleanup.add('temp dir', async () => rmSync(tmp, { recursive: true, force: true }));

  try {
    // --- The stack ------------------------------------------------------------------------
    log('bundling (esbuild) and starting DynamoDB Local');
    const [bundles, db] = await Promise.all([buildBundles(tmp), startDynamoLocal({ detached: true, readyTimeoutMs: 60_000 })]);
    cleanup.add('DynamoDB Local', () => db.stop());
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
    const first = callers[0] as Caller;
    log(`seeded ${callers.length + 1} workspaces`);

    const sim = await startSimulatorProcess(bundles.simulator, bundleEnv({}));
    cleanup.add('simulator', () => sim.stop());
    const profileDir = path.join(outDir, 'profile');
    if (options.profile) mkdirSync(profileDir, { recursive: true });
    const gw = await GatewayProcess.start(
      bundles.gatewayServer,
      bundleEnv({
        SLUICE_STAGE: 'local',
        SLUICE_TABLE_PREFIX: TABLE_PREFIX,
        SLUICE_DYNAMODB_ENDPOINT: db.endpoint,
        SLUICE_SECRET_SOURCE: 'env',
        SLUICE_LOCAL_UPSTREAM_URL: sim.url,
        SLUICE_LOCAL_SECRETS_FILE: path.join(tmp, 'secrets.json'),
        // The per-key request rate is a stage setting; the benchmark is not measuring it.
        SLUICE_KEY_RATE_PER_MINUTE: '100000000',
      }),
      ['--expose-gc', ...(options.profile ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : [])],
    );
    cleanup.add('gateway', () => gw.stop());
    log(`simulator pid ${sim.pid} on ${sim.url}; gateway pid ${gw.pid} on ${gw.url}`);

    const maxConcurrency = Math.max(...plan.concurrencies);
    const gwT: Target = targetFrom('gateway', `${gw.url}/v1`, maxConcurrency);
    const directT: Target = targetFrom('direct', sim.url, maxConcurrency);
    cleanup.add('agents', async () => {
      gwT.agent.destroy();
      directT.agent.destroy();
    });
    await sim.control('/_sim/default', { model: MODEL_SHORT, behavior: { kind: 'ok' } });
    await sim.control('/_sim/default', { model: MODEL_PACED, behavior: { kind: 'ok', completionTokens: plan.gapTokens, chunkDelayMs: plan.gapDelayMs } });

    const short = bodies(MODEL_SHORT, false);
    const shortStream = bodies(MODEL_SHORT, true);
    const paced = bodies(MODEL_PACED, true);
    const firstKey = authHeaders(first.rawKey);
    // The direct side gets an authorization header too, so both requests carry the same bytes.
    const directKey = authHeaders(first.rawKey);

    // The floor: the admission transaction itself, from this process, on its own workspace.
    const ledger = new DynamoLedger(doc, { ledger: tableName(TABLE_PREFIX, 'ledger'), holds: tableName(TABLE_PREFIX, 'holds'), usage: tableName(TABLE_PREFIX, 'usage') });
    const limits: AdmissionLimits = { keyWindow: 'monthly', spendRateCapMicros: 5_000_000_000, keyRatePerMinute: 100_000_000 };
    const txnSamples: number[] = [];
    const txnRetries: number[] = [];
    const transaction = async (keep: boolean): Promise<void> => {
      const now = Date.now();
      const before = ledger.roundTrips;
      const t0 = performance.now();
      const outcome = await ledger.admit({
        holdId: `req_${randomBytes(12).toString('hex')}`,
        workspaceId: floorCaller.workspaceId,
        keyId: floorCaller.keyId,
        family: 'chat_completions',
        requestedModel: `local/${MODEL_SHORT}`,
        amountMicros: 3_000,
        inputMicros: 1_000,
        byok: false,
        limits,
        now,
        expiresAt: now + 600_000,
      });
      const ms = performance.now() - t0;
      if (!outcome.admitted) throw new Error(`the floor's admission was refused: ${outcome.refusal.kind}`);
      const trips = ledger.roundTrips - before;
      if (keep) {
        if (trips === 1) txnSamples.push(ms);
        else txnRetries.push(trips);
      }
      await ledger.settle(outcome.hold, { counts: undefined, chargeMicros: 1_000, stream: false, status: 200, outcome: 'ok', attempts: 1, now: Date.now() });
    };

    // --- Warm-up ----------------------------------------------------------------------------
    log('warm-up');
    await closedLoop(8, plan.warmupMs, (w) => post(gwT, short.gateway, authHeaders((callers[w % callers.length] as Caller).rawKey)));
    await closedLoop(8, plan.warmupMs / 2, () => post(directT, short.direct, directKey));
    for (let i = 0; i < 100; i += 1) await transaction(false);
    for (let i = 0; i < 20; i += 1) {
      expectOk(await postStream(gwT, shortStream.gateway, firstKey), 'warm-up stream');
      expectOk(await postStream(directT, shortStream.direct, directKey), 'warm-up stream (direct)');
    }
    await gw.idle();

    // --- 1. Non-streamed latency at concurrency 1, alternating with the direct call and the floor.
    log(`non-streamed latency, concurrency 1 (${plan.latencyIterations} rounds of gateway, direct and one transaction)`);
    const c1Gateway: number[] = [];
    const c1Direct: number[] = [];
    await gw.record(true);
    for (let i = 0; i < plan.latencyIterations; i += 1) {
      const order = i % 3;
      for (let k = 0; k < 3; k += 1) {
        const which = (order + k) % 3;
        if (which === 0) {
          const t = await post(gwT, short.gateway, firstKey);
          expectOk(t, 'gateway');
          c1Gateway.push(t.totalMs);
          // Settlement runs after the reply; let it finish, as the next invocation of a Lambda
          // instance would, so it does not weigh on the other side's measurement.
          await gw.idle();
        } else if (which === 1) {
          const t = await post(directT, short.direct, directKey);
          expectOk(t, 'direct');
          c1Direct.push(t.totalMs);
        } else {
          await transaction(true);
        }
      }
    }
    await gw.record(false);
    const nonStreamTrips = tripReport(await gw.samples());
    const c1 = side(c1Gateway, c1Direct);
    const floor = summarize(txnSamples);

    // --- 2. Gateway CPU per non-streamed request, one at a time (a Lambda instance serves one).
    log(`gateway CPU per request (${plan.cpuRequests} sequential requests)`);
    const cpu0 = await gw.idle();
    for (let i = 0; i < plan.cpuRequests; i += 1) expectOk(await post(gwT, short.gateway, firstKey), 'gateway');
    const cpu1 = await gw.idle();
    const cpuPerRequestUs = cpuUs(cpu0, cpu1) / plan.cpuRequests;
    const cpuPerRequestSystemUs = (cpu1.cpuSystemUs - cpu0.cpuSystemUs) / plan.cpuRequests;

    // --- 3. Throughput at concurrency 16 and 64, in alternating slices.
    const throughput: Throughput[] = [];
    const throughputSamples = new Map<number, { gateway: number[]; direct: number[] }>();
    for (const c of plan.concurrencies) {
      log(`throughput, concurrency ${c} (${plan.rounds} x ${plan.sliceMs} ms per side)`);
      const gwReq = (w: number): ReturnType<typeof post> => post(gwT, short.gateway, authHeaders((callers[w % callers.length] as Caller).rawKey));
      const directReq = (): ReturnType<typeof post> => post(directT, short.direct, directKey);
      await closedLoop(c, 500, gwReq);
      await closedLoop(c, 500, directReq);
      const gwRuns: LoadResult[] = [];
      const directRuns: LoadResult[] = [];
      let cpu = 0;
      let trips = 0;
      for (let r = 0; r < plan.rounds; r += 1) {
        for (const which of r % 2 === 0 ? ['gateway', 'direct'] : ['direct', 'gateway']) {
          if (which === 'gateway') {
            const s0 = await gw.idle();
            gwRuns.push(await closedLoop(c, plan.sliceMs, gwReq));
            const s1 = await gw.idle();
            cpu += cpuUs(s0, s1);
            trips += totalTrips(s1) - totalTrips(s0);
          } else {
            directRuns.push(await closedLoop(c, plan.sliceMs, directReq));
          }
        }
      }
      const merge = (runs: LoadResult[]): Throughput['gateway'] => {
        const ok = runs.reduce((a, r) => a + r.ok, 0);
        const failed = runs.reduce((a, r) => a + r.failed, 0);
        const elapsed = runs.reduce((a, r) => a + r.elapsedMs, 0);
        const firstError = runs.find((r) => r.firstError !== undefined)?.firstError;
        return { rps: (ok / elapsed) * 1000, ok, failed, latency: summarize(runs.flatMap((r) => r.latenciesMs)), ...(firstError === undefined ? {} : { firstError }) };
      };
      const g = merge(gwRuns);
      const d = merge(directRuns);
      throughput.push({ concurrency: c, gateway: g, direct: d, gatewayCpuUsPerRequest: cpu / Math.max(1, g.ok + g.failed), gatewayTripsPerRequest: trips / Math.max(1, g.ok + g.failed) });
      throughputSamples.set(c, { gateway: gwRuns.flatMap((r) => r.latenciesMs), direct: directRuns.flatMap((r) => r.latenciesMs) });
    }

    // --- 4. Streamed time to first byte, alternating; round trips recorded.
    log(`streamed time to first byte (${plan.ttfbStreams} streams per side)`);
    const ttfbGateway: number[] = [];
    const ttfbDirect: number[] = [];
    await gw.record(true);
    for (let i = 0; i < plan.ttfbStreams; i += 1) {
      for (const which of i % 2 === 0 ? ['gateway', 'direct'] : ['direct', 'gateway']) {
        if (which === 'gateway') {
          const t = await postStream(gwT, shortStream.gateway, firstKey);
          expectOk(t, 'gateway stream');
          if (!t.sawDone || !t.sawUsageComment) throw new Error('a gateway stream ended without [DONE] or without its usage comment');
          ttfbGateway.push(t.ttfbMs);
          await gw.idle();
        } else {
          const t = await postStream(directT, shortStream.direct, directKey);
          expectOk(t, 'direct stream');
          ttfbDirect.push(t.ttfbMs);
        }
      }
    }
    await gw.record(false);
    const streamTrips = tripReport(await gw.samples());
    const ttfb = side(ttfbGateway, ttfbDirect);

    // --- 5. Gap between chunks on paced streams, alternating; the gateway's CPU over its streams.
    log(`gap between chunks (${plan.gapStreams} streams per side, ${plan.gapTokens} tokens ${plan.gapDelayMs} ms apart)`);
    const gapsGateway: number[] = [];
    const gapsDirect: number[] = [];
    const coalesced = { gateway: 0, direct: 0, gatewayMax: 0, directMax: 0, gatewayFrames: 0, directFrames: 0, gatewayBytes: 0 };
    const gaps = (t: StreamTiming): number[] => t.frameTimes.slice(1).map((v, i) => v - (t.frameTimes[i] as number));
    const longCpu0 = await gw.idle();
    for (let i = 0; i < plan.gapStreams; i += 1) {
      for (const which of i % 2 === 0 ? ['gateway', 'direct'] : ['direct', 'gateway']) {
        if (which === 'gateway') {
          const t = await postStream(gwT, paced.gateway, firstKey);
          expectOk(t, 'gateway stream');
          gapsGateway.push(...gaps(t));
          coalesced.gateway += t.coalescedReads;
          coalesced.gatewayMax = Math.max(coalesced.gatewayMax, t.maxFramesPerRead);
          coalesced.gatewayFrames += t.frames;
          coalesced.gatewayBytes += t.bytes;
        } else {
          const t = await postStream(directT, paced.direct, directKey);
          expectOk(t, 'direct stream');
          gapsDirect.push(...gaps(t));
          coalesced.direct += t.coalescedReads;
          coalesced.directMax = Math.max(coalesced.directMax, t.maxFramesPerRead);
          coalesced.directFrames += t.frames;
        }
      }
    }
    const longCpu1 = await gw.idle();
    const gap = side(gapsGateway, gapsDirect);

    // --- 6. The same paced streams, short, for the fixed part of a stream's CPU.
    log(`short paced streams (${plan.gapStreams}) for the per-chunk CPU regression`);
    const shortPaced = { frames: 0 };
    await sim.control('/_sim/script', {
      model: MODEL_PACED,
      behaviors: Array.from({ length: plan.gapStreams }, () => ({ kind: 'ok', completionTokens: plan.shortTokens, chunkDelayMs: plan.gapDelayMs })),
    });
    const shortCpu0 = await gw.idle();
    for (let i = 0; i < plan.gapStreams; i += 1) {
      const t = await postStream(gwT, paced.gateway, firstKey);
      expectOk(t, 'gateway stream');
      shortPaced.frames += t.frames;
    }
    const shortCpu1 = await gw.idle();
    const longPerStreamUs = cpuUs(longCpu0, longCpu1) / plan.gapStreams;
    const shortPerStreamUs = cpuUs(shortCpu0, shortCpu1) / plan.gapStreams;
    const longFrames = coalesced.gatewayFrames / plan.gapStreams;
    const shortFrames = shortPaced.frames / plan.gapStreams;
    const cpuPerChunkUs = (longPerStreamUs - shortPerStreamUs) / (longFrames - shortFrames);

    // --- 7. A 100 MB streamed reply: the gateway's memory, and its speed against the direct call.
    const bytesPerFrame = coalesced.gatewayBytes / Math.max(1, coalesced.gatewayFrames);
    const bigTokens = Math.ceil((plan.bigBytes / bytesPerFrame) * 1.02);
    log(`a ${Math.round(plan.bigBytes / 1024 / 1024)} MiB streamed reply (${bigTokens} tokens), gateway then direct`);
    const bigBody = bodies(MODEL_SHORT, true, 4_096);
    const bigBehavior = { kind: 'ok', completionTokens: bigTokens, ignoreCeiling: true };
    await sim.control('/_sim/script', { model: MODEL_SHORT, behaviors: [bigBehavior] });
    await gw.gc();
    const mem0 = await gw.idle();
    await gw.peak(true);
    await gw.record(true);
    const bigGw = await postStream(gwT, bigBody.gateway, firstKey, { keepTimes: false, timeoutMs: 180_000 });
    expectOk(bigGw, 'gateway 100 MB stream');
    const mem1 = await gw.idle();
    await gw.peak(false);
    await gw.record(false);
    const bigTrips = tripReport(await gw.samples());
    await gw.gc();
    const mem2 = await gw.stats();
    await sim.control('/_sim/script', { model: MODEL_SHORT, behaviors: [bigBehavior] });
    const bigDirect = await postStream(directT, bigBody.direct, directKey, { keepTimes: false, timeoutMs: 180_000 });
    expectOk(bigDirect, 'direct 100 MB stream');
    const bigCpuPerChunkUs = (cpuUs(mem0, mem1) - cpuPerRequestUs) / Math.max(1, bigGw.frames);
    const big: BigStream = {
      tokens: bigTokens,
      gatewayBytes: bigGw.bytes,
      gatewayFrames: bigGw.frames,
      gatewaySeconds: bigGw.totalMs / 1000,
      gatewayMBps: bigGw.bytes / 1e6 / (bigGw.totalMs / 1000),
      directBytes: bigDirect.bytes,
      directSeconds: bigDirect.totalMs / 1000,
      directMBps: bigDirect.bytes / 1e6 / (bigDirect.totalMs / 1000),
      sawDone: bigGw.sawDone,
      rssBefore: mem0.rss,
      peakRss: mem1.peakRss,
      rssGrowth: mem1.peakRss - mem0.rss,
      heapBefore: mem0.heapUsed,
      peakHeapUsed: mem1.peakHeapUsed,
      heapGrowth: mem1.peakHeapUsed - mem0.heapUsed,
      externalGrowth: mem1.peakExternal - mem0.external,
      rssAfterGc: mem2.rss,
      cpuPerChunkUs: bigCpuPerChunkUs,
      holdExtensions: bigTrips.during,
    };

    // --- Stop the stack, then the bundle's module init on a quiet machine.
    const gatewayLogLines = gw.logLines;
    await gw.stop();
    await sim.stop();
    await db.stop();
    log('module init of the bundled handler in fresh processes');
    const init = await measureModuleInit(bundles, plan.initRuns);

    // --- Report ------------------------------------------------------------------------------
    const results = buildResults({
      options,
      plan,
      bundles,
      init,
      floor,
      txnRetries,
      c1,
      cpuPerRequestUs,
      cpuPerRequestSystemUs,
      throughput,
      ttfb,
      gap,
      coalesced,
      cpuPerChunkUs,
      longPerStreamUs,
      shortPerStreamUs,
      longFrames,
      shortFrames,
      nonStreamTrips,
      streamTrips,
      big,
      gatewayLogLines,
      elapsedS: (performance.now() - started) / 1000,
      loadAverageStart,
    });
    const table = renderTables(results);
    process.stdout.write(`${table}\n`);
    writeFileSync(path.join(outDir, 'bench.json'), `${JSON.stringify(results, (_k, v: unknown) => (typeof v === 'number' ? round(v) : v), 2)}\n`);
    const panels = [
      {
        title: 'Non-streamed latency, concurrency 1',
        series: [
          { label: 'gateway', color: '#d62728', samples: c1Gateway },
          { label: 'direct', color: '#1f77b4', samples: c1Direct },
          { label: 'DynamoDB TransactWriteItems', color: '#7f7f7f', dashed: true, samples: txnSamples },
        ],
      },
      {
        title: 'Streamed time to first byte',
        series: [
          { label: 'gateway', color: '#d62728', samples: ttfbGateway },
          { label: 'direct', color: '#1f77b4', samples: ttfbDirect },
          { label: 'DynamoDB TransactWriteItems', color: '#7f7f7f', dashed: true, samples: txnSamples },
        ],
      },
      {
        title: `Gap between chunks (upstream paces ${plan.gapDelayMs} ms)`,
        series: [
          { label: 'gateway', color: '#d62728', samples: gapsGateway },
          { label: 'direct', color: '#1f77b4', samples: gapsDirect },
        ],
      },
      ...plan.concurrencies.map((c) => ({
        title: `Non-streamed latency, concurrency ${c}`,
        series: [
          { label: 'gateway', color: '#d62728', samples: throughputSamples.get(c)?.gateway ?? [] },
          { label: 'direct', color: '#1f77b4', samples: throughputSamples.get(c)?.direct ?? [] },
        ],
      })),
    ];
    writeFileSync(path.join(outDir, 'latency.svg'), cdfChart('Sluice gateway against the direct call (empirical CDFs)', panels));
    log(`wrote bench-results/bench.json and bench-results/latency.svg in ${Math.round((performance.now() - started) / 1000)} s`);
    if (options.profile) log(`gateway CPU profile in bench-results/profile/`);
  } finally {
    clearTimeout(watchdog);
    await cleanup.run();
  }
}

function cpuUs(a: GatewayStats, b: GatewayStats): number {
  return b.cpuUserUs - a.cpuUserUs + (b.cpuSystemUs - a.cpuSystemUs);
}

function totalTrips(s: GatewayStats): number {
  return s.trips.ledger + s.trips.directory + s.trips.catalog;
}

// ---------------------------------------------------------------------------------------------
// Results and targets

/** The 100 MiB streamed reply. */
interface BigStream {
  readonly tokens: number;
  readonly gatewayBytes: number;
  readonly gatewayFrames: number;
  readonly gatewaySeconds: number;
  readonly gatewayMBps: number;
  readonly directBytes: number;
  readonly directSeconds: number;
  readonly directMBps: number;
  readonly sawDone: boolean;
  readonly rssBefore: number;
  readonly peakRss: number;
  readonly rssGrowth: number;
  readonly heapBefore: number;
  readonly peakHeapUsed: number;
  readonly heapGrowth: number;
  readonly externalGrowth: number;
  readonly rssAfterGc: number;
  readonly cpuPerChunkUs: number;
  readonly holdExtensions: readonly { value: number; count: number }[];
}

interface RunFigures {
  readonly options: Options;
  readonly plan: Plan;
  readonly bundles: Bundles;
  readonly init: InitResult;
  readonly floor: Summary;
  readonly txnRetries: readonly number[];
  readonly c1: Side;
  readonly cpuPerRequestUs: number;
  readonly cpuPerRequestSystemUs: number;
  readonly throughput: readonly Throughput[];
  readonly ttfb: Side;
  readonly gap: Side;
  readonly coalesced: { gateway: number; direct: number; gatewayMax: number; directMax: number; gatewayFrames: number; directFrames: number };
  readonly cpuPerChunkUs: number;
  readonly longPerStreamUs: number;
  readonly shortPerStreamUs: number;
  readonly longFrames: number;
  readonly shortFrames: number;
  readonly nonStreamTrips: TripReport;
  readonly streamTrips: TripReport;
  readonly big: BigStream;
  readonly gatewayLogLines: number;
  readonly elapsedS: number;
  readonly loadAverageStart: number;
}

const MB = 1024 * 1024;

function onlyValue(h: readonly { value: number; count: number }[], value: number): boolean {
  return h.length > 0 && h.every((e) => e.value === value);
}

function fmtHist(h: readonly { value: number; count: number }[]): string {
  return h.map((e) => `${e.value}:${e.count}`).join(' ');
}

function targets(f: RunFigures): TargetResult[] {
  const floorP50 = f.floor.p50;
  const floorP99 = f.floor.p99;
  const ms = (v: number): string => `${round(v)} ms`;
  const warmOne = onlyValue(f.nonStreamTrips.ledgerBeforeFirstByteOnWarm, 1) && onlyValue(f.streamTrips.ledgerBeforeFirstByteOnWarm, 1);
  const duringNone = onlyValue(f.nonStreamTrips.during, 0) && onlyValue(f.streamTrips.during, 0);
  const settledAfter = f.nonStreamTrips.afterEnd.every((e) => e.value >= 1) && f.streamTrips.afterEnd.every((e) => e.value >= 1);
  return [
    { name: 'added non-streamed latency p50 (c=1)', figure: ms(f.c1.addedP50), limit: `<= 1.25 x txn p50 + 1 = ${ms(1.25 * floorP50 + 1)}`, met: f.c1.addedP50 <= 1.25 * floorP50 + 1 },
    { name: 'added non-streamed latency p99 (c=1)', figure: ms(f.c1.addedP99), limit: `<= 2 x txn p99 = ${ms(2 * floorP99)}`, met: f.c1.addedP99 <= 2 * floorP99 },
    {
      name: 'store round trips before first byte (warm)',
      figure: `non-stream ${fmtHist(f.nonStreamTrips.ledgerBeforeFirstByteOnWarm)}; stream ${fmtHist(f.streamTrips.ledgerBeforeFirstByteOnWarm)} (value:count)`,
      limit: 'exactly 1',
      met: warmOne,
    },
    {
      name: 'settlement after the reply ends',
      figure: `during reply ${fmtHist([...f.nonStreamTrips.during, ...f.streamTrips.during])}; after end ${fmtHist(f.nonStreamTrips.afterEnd)} / ${fmtHist(f.streamTrips.afterEnd)}`,
      limit: '0 during, >= 1 after',
      met: duringNone && settledAfter,
    },
    { name: 'added stream TTFB p50', figure: ms(f.ttfb.addedP50), limit: `<= ${ms(1.25 * floorP50 + 1)}`, met: f.ttfb.addedP50 <= 1.25 * floorP50 + 1 },
    { name: 'added stream TTFB p99', figure: ms(f.ttfb.addedP99), limit: `<= ${ms(2 * floorP99)}`, met: f.ttfb.addedP99 <= 2 * floorP99 },
    { name: 'added gap between chunks p99', figure: ms(f.gap.addedP99), limit: '<= 1 ms', met: f.gap.addedP99 <= 1 },
    {
      name: 'frames not held back or coalesced',
      figure: `reads with >1 frame: gateway ${f.coalesced.gateway}, direct ${f.coalesced.direct} (of ${f.coalesced.gatewayFrames} frames)`,
      limit: 'gateway <= direct',
      met: f.coalesced.gateway <= f.coalesced.direct,
    },
    {
      name: '100 MiB stream: gateway RSS growth',
      figure: `${round(f.big.rssGrowth / MB)} MiB (heap ${round(f.big.heapGrowth / MB)} MiB)`,
      limit: '< 64 MiB, stream complete',
      met: f.big.rssGrowth < 64 * MB && f.big.sawDone,
    },
    { name: 'gateway CPU per non-streamed request', figure: `${round(f.cpuPerRequestUs / 1000)} ms`, limit: '<= 0.5 ms', met: f.cpuPerRequestUs <= 500 },
    { name: 'gateway CPU per SSE chunk (paced)', figure: `${round(f.cpuPerChunkUs)} us`, limit: '<= 10 us', met: f.cpuPerChunkUs <= 10 },
    { name: 'bundled gateway size (minified)', figure: `${f.bundles.handlerBytes} B`, limit: '<= 1 MB (1,000,000 B)', met: f.bundles.handlerBytes <= 1_000_000 },
    { name: 'module init (median, fresh process)', figure: ms(f.init.requireMs.p50), limit: '<= 150 ms', met: f.init.requireMs.p50 <= 150 },
  ];
}

/** What bench.json holds. */
interface Results {
  readonly when: string;
  readonly machine: {
    readonly node: string;
    readonly cpus: number;
    readonly cpuModel: string;
    readonly platform: string;
    /** 1-minute load averages at the start and the end: other work on the machine skews every figure. */
    readonly loadAverageStart: number;
    readonly loadAverageEnd: number;
  };
  readonly options: Options;
  readonly plan: Plan;
  readonly elapsedSeconds: number;
  readonly units: string;
  readonly floor: { readonly transactWriteItems: Summary; readonly retriedTransactions: number };
  readonly nonStreamedC1: Side;
  readonly throughput: readonly Throughput[];
  readonly stream: { readonly ttfb: Side; readonly gapBetweenChunks: Side; readonly coalescedReads: RunFigures['coalesced'] };
  readonly roundTrips: { readonly nonStreamed: TripReport; readonly streamed: TripReport };
  readonly cpu: {
    readonly perNonStreamedRequestUs: number;
    /** The kernel's part of it (loopback TCP is charged to the sender). */
    readonly perNonStreamedRequestSystemUs: number;
    readonly perChunkPacedUs: number;
    readonly perLongStreamUs: number;
    readonly perShortStreamUs: number;
    readonly framesPerLongStream: number;
    readonly framesPerShortStream: number;
    readonly perChunkUnpacedUs: number;
  };
  readonly bigStream: BigStream;
  readonly bundle: { readonly handlerBytes: number; readonly sourceMapBytes: number; readonly moduleInit: InitResult };
  readonly gatewayLogLines: number;
  readonly targets: readonly TargetResult[];
}

function buildResults(f: RunFigures): Results {
  const cpus = os.cpus();
  return {
    when: new Date().toISOString(),
    machine: {
      node: process.version,
      cpus: cpus.length,
      cpuModel: cpus[0]?.model ?? 'unknown',
      platform: `${os.platform()} ${os.release()}`,
      loadAverageStart: f.loadAverageStart,
      loadAverageEnd: os.loadavg()[0] ?? Number.NaN,
    },
    options: f.options,
    plan: f.plan,
    elapsedSeconds: f.elapsedS,
    units: 'milliseconds unless named otherwise',
    floor: { transactWriteItems: f.floor, retriedTransactions: f.txnRetries.length },
    nonStreamedC1: f.c1,
    throughput: f.throughput,
    stream: {
      ttfb: f.ttfb,
      gapBetweenChunks: f.gap,
      coalescedReads: f.coalesced,
    },
    roundTrips: { nonStreamed: f.nonStreamTrips, streamed: f.streamTrips },
    cpu: {
      perNonStreamedRequestUs: f.cpuPerRequestUs,
      perNonStreamedRequestSystemUs: f.cpuPerRequestSystemUs,
      perChunkPacedUs: f.cpuPerChunkUs,
      perLongStreamUs: f.longPerStreamUs,
      perShortStreamUs: f.shortPerStreamUs,
      framesPerLongStream: f.longFrames,
      framesPerShortStream: f.shortFrames,
      perChunkUnpacedUs: f.big.cpuPerChunkUs,
    },
    bigStream: f.big,
    bundle: { handlerBytes: f.bundles.handlerBytes, sourceMapBytes: f.bundles.handlerMapBytes, moduleInit: f.init },
    gatewayLogLines: f.gatewayLogLines,
    targets: targets(f),
  };
}

function pad(rows: readonly (readonly string[])[]): string {
  const widths: number[] = [];
  for (const r of rows) r.forEach((c, i) => (widths[i] = Math.max(widths[i] ?? 0, c.length)));
  return rows.map((r) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join('  ')).join('\n');
}

function renderTables(r: Results): string {
  const n = (v: number): string => String(round(v));
  const rows: string[][] = [['measurement (ms)', 'gw p50', 'gw p99', 'direct p50', 'direct p99', 'added p50', 'added p99']];
  const add = (name: string, s: Side): void => {
    rows.push([name, n(s.gateway.p50), n(s.gateway.p99), n(s.direct.p50), n(s.direct.p99), n(s.addedP50), n(s.addedP99)]);
  };
  add('non-streamed, c=1', r.nonStreamedC1);
  add('stream time to first byte', r.stream.ttfb);
  add('stream gap between chunks', r.stream.gapBetweenChunks);
  const f = r.floor.transactWriteItems;
  rows.push(['DynamoDB Local TransactWriteItems', n(f.p50), n(f.p99), '', '', '', '']);
  const tput: string[][] = [['throughput (non-streamed)', 'gw req/s', 'gw p50', 'gw p99', 'direct req/s', 'direct p50', 'direct p99', 'gw errors', 'gw CPU/req us', 'trips/req']];
  for (const t of r.throughput) {
    tput.push([
      `concurrency ${t.concurrency}`,
      n(t.gateway.rps),
      n(t.gateway.latency.p50),
      n(t.gateway.latency.p99),
      n(t.direct.rps),
      n(t.direct.latency.p50),
      n(t.direct.latency.p99),
      String(t.gateway.failed),
      n(t.gatewayCpuUsPerRequest),
      n(t.gatewayTripsPerRequest),
    ]);
  }
  const b = r.bigStream;
  const rt = r.roundTrips;
  const other: string[][] = [
    ['other figures', 'value'],
    ['gateway CPU per non-streamed request (c=1)', `${n(r.cpu.perNonStreamedRequestUs)} us (of which system ${n(r.cpu.perNonStreamedRequestSystemUs)} us)`],
    ['gateway CPU per SSE chunk, paced / unpaced', `${n(r.cpu.perChunkPacedUs)} us / ${n(r.cpu.perChunkUnpacedUs)} us`],
    ['round trips before 1st byte, warm (non-stream | stream)', `${fmtHist(rt.nonStreamed.ledgerBeforeFirstByteOnWarm)} | ${fmtHist(rt.streamed.ledgerBeforeFirstByteOnWarm)}  (value:count)`],
    ['cache-miss lookups before 1st byte (non-stream)', `${fmtHist(rt.nonStreamed.lookupsBeforeFirstByte)}  (${rt.nonStreamed.warm}/${rt.nonStreamed.samples} warm)`],
    ['round trips during reply | after end (non-stream)', `${fmtHist(rt.nonStreamed.during)} | ${fmtHist(rt.nonStreamed.afterEnd)}`],
    ['round trips during reply | after end (stream)', `${fmtHist(rt.streamed.during)} | ${fmtHist(rt.streamed.afterEnd)}`],
    ['mean round trips per request (non-stream | stream)', `${n(rt.nonStreamed.meanTotal)} | ${n(rt.streamed.meanTotal)}`],
    ['100 MiB stream: bytes, MB/s gw / direct', `${b.gatewayBytes} B, ${n(b.gatewayMBps)} / ${n(b.directMBps)}`],
    ['100 MiB stream: gateway RSS before -> peak', `${n(b.rssBefore / MB)} -> ${n(b.peakRss / MB)} MiB (+${n(b.rssGrowth / MB)}), heap +${n(b.heapGrowth / MB)} MiB`],
    ['100 MiB stream: hold extensions during the reply', fmtHist(b.holdExtensions)],
    ['bundled gateway (minified, @aws-sdk external)', `${r.bundle.handlerBytes} B`],
    ['module init p50 / max (require, fresh node)', `${n(r.bundle.moduleInit.requireMs.p50)} / ${n(r.bundle.moduleInit.requireMs.max)} ms; from process start ${n(r.bundle.moduleInit.sinceStartMs.p50)} ms`],
    ['transactions retried in the floor (excluded)', String(r.floor.retriedTransactions)],
    ['whole run; machine load average start / end', `${n(r.elapsedSeconds)} s; ${n(r.machine.loadAverageStart)} / ${n(r.machine.loadAverageEnd)} on ${r.machine.cpus} cores`],
  ];
  const tgt: string[][] = [['target', 'figure', 'limit', 'result']];
  for (const t of r.targets) tgt.push([t.name, t.figure, t.limit, t.met ? 'MET' : 'MISSED']);
  const leftAll = (rowsIn: string[][]): string => {
    const widths: number[] = [];
    for (const row of rowsIn) row.forEach((c, i) => (widths[i] = Math.max(widths[i] ?? 0, c.length)));
    return rowsIn.map((row) => row.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ').trimEnd()).join('\n');
  };
  return [pad(rows), '', pad(tput), '', leftAll(other), '', leftAll(tgt)].join('\n');
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`[bench] failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
