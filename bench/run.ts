/**
 * `npm run bench`: the gateway against the direct call, on one machine, in one run.
 *
 * Starts DynamoDB Local (Java), the upstream simulator, the gateway (the esbuild bundle) and a
 * bare pass-through relay (the control: one plain node:http hop), each in its own process, seeds
 * workspaces, and drives every side from this process with node:http keep-alive agents, in turn,
 * so that all meet the same machine state; one DynamoDB TransactWriteItems, the floor, takes its
 * turn too. Every phase is bounded by a count or a duration; the run stops by itself and stops
 * what it started, by PID (a watchdog ends it after 9 minutes whatever happens).
 *
 *   npm run bench                  full run (about 2.5 minutes on 2 cores)
 *   npm run bench -- --quick       a short smoke run (under a minute)
 *   npm run bench -- --store-map-only   only the store write map (`store-map.ts`), which a
 *                                  full run also makes at its end (`--no-store-map` to skip it)
 *   npm run bench -- --profile     also profiles the gateway (node --cpu-prof) and prints where
 *                                  its time went by source module; the profiler's own cost
 *                                  inflates that run's CPU figures
 *
 * Every figure is skewed by whatever else the machine runs: the load average is reported.
 *
 * Output: a table on stdout, `bench-results/bench.json`, `bench-results/latency.svg`.
 *
 * Cut: `args.ts` (the plans and the command line), this file (the stack and the phases, in the
 * order they run), `report.ts` (the figures, their targets and the tables), and one module per
 * measurement it calls (`own-cpu.ts`, `chunk-cpu.ts`, `sdk-low-level.ts`, `bundle.ts`, `load.ts`).
 */
import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { addCredit, createKey, createWorkspace, importCatalog, type AdminContext } from '../local/ops';
import { DynamoLedger } from '../lambdas/adapters/dynamo-ledger';
import type { DocumentSender } from '../lambdas/adapters/dynamo-wire';
import type { AdmissionLimits, AdmitRequest } from '../lambdas/gateway/ports';
import { documentClient, wireClient } from '../lambdas/adapters/dynamo-client';
import { loadConfig } from '../lambdas/shared/config';
import { tableName } from '../lambdas/shared/schema';
import { startDynamoLocal } from '../local/dynamo-local';
import { ensureTables, makeDynamoClient } from '../local/tables';
import { REPO_ROOT, buildBundles, bundleEnv, measureModuleInit } from './bundle';
import { cdfChart } from './chart';
import { busyChunkCpu, type BusyPlan } from './chunk-cpu';
import { closedLoop, post, postStream, targetFrom, type LoadResult, type StreamTiming, type Target, type Timing } from './load';
import { GatewayProcess, startSimulatorProcess } from './processes';
import { renderProfile, summarizeProfile, type ProfileSummary } from './profile-summary';
import type { GatewayStats } from './protocol';
import { measureOwnCpu } from './own-cpu';
import { FULL, QUICK, parseArgs } from './args';
import { MB, buildResults, phaseReport, renderTables, side, tripReport, type BigStream, type FrameCounts, type Throughput } from './report';
import { LowLevelSender } from './sdk-low-level';
import { storeMapMain } from './store-map';
import { round, summarize } from './stats';

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
// The run

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

    const relay = await GatewayProcess.start(bundles.bareRelay, bundleEnv({ BENCH_UPSTREAM_URL: sim.url }), []);
    cleanup.add('bare relay', () => relay.stop());
    log(`bare relay pid ${relay.pid} on ${relay.url}`);

    const maxConcurrency = Math.max(...plan.concurrencies);
    const gwT: Target = targetFrom('gateway', `${gw.url}/v1`, maxConcurrency);
    const directT: Target = targetFrom('direct', sim.url, maxConcurrency);
    const relayT: Target = targetFrom('relay', `${relay.url}/v1`, maxConcurrency);
    cleanup.add('agents', async () => {
      for (const t of [gwT, directT, relayT]) t.agent.destroy();
    });
    await sim.control('/_sim/default', { model: MODEL_SHORT, behavior: { kind: 'ok' } });
    await sim.control('/_sim/default', { model: MODEL_PACED, behavior: { kind: 'ok', completionTokens: plan.gapTokens, chunkDelayMs: plan.gapDelayMs } });

    const short = bodies(MODEL_SHORT, false);
    const shortStream = bodies(MODEL_SHORT, true);
    const paced = bodies(MODEL_PACED, true);
    const firstKey = authHeaders(first.rawKey);
    // The direct side and the relay get an authorization header too, so every request carries the same bytes.
    const directKey = authHeaders(first.rawKey);
    const bodyFor = (t: Target, b: Bodies): Buffer => (t.name === 'gateway' ? b.gateway : b.direct);

    // The floor: the admission transaction itself, from this process, on its own workspace, over
    // the client the gateway uses (DynamoWire), so the floor carries no client overhead the
    // gateway does not pay.
    const wire = wireClient(config, doc);
    cleanup.add('wire client', async () => wire.destroy());
    const ledger = new DynamoLedger(wire, { ledger: tableName(TABLE_PREFIX, 'ledger'), holds: tableName(TABLE_PREFIX, 'holds'), usage: tableName(TABLE_PREFIX, 'usage') });
    const limits: AdmissionLimits = { keyWindow: 'monthly', spendRateCapMicros: 5_000_000_000, keyRatePerMinute: 100_000_000 };
    /** Floor samples of the phase running now (each latency target meets its own phase's floor). */
    let txnSamples: number[] = [];
    const txnCpuUs: number[] = [];
    const txnRetries: number[] = [];
    /** One admission on the floor's own workspace (the same small hold every time). */
    const floorAdmission = (now: number): AdmitRequest => ({
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
    const transaction = async (keep: boolean): Promise<void> => {
      const now = Date.now();
      const before = ledger.roundTrips;
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      const outcome = await ledger.admit(floorAdmission(now));
      const ms = performance.now() - t0;
      const cpu = process.cpuUsage(c0);
      if (!outcome.admitted) throw new Error(`the floor's admission was refused: ${outcome.refusal.kind}`);
      const trips = ledger.roundTrips - before;
      if (keep) {
        if (trips === 1) {
          txnSamples.push(ms);
          // Nothing else runs in this process meanwhile: this is the client-side CPU of one call.
          txnCpuUs.push(cpu.user + cpu.system);
        } else txnRetries.push(trips);
      }
      await ledger.settle(outcome.hold, { counts: undefined, chargeMicros: 1_000, stream: false, status: 200, outcome: 'ok', attempts: 1, now: Date.now() });
    };

    // --- Warm-up ----------------------------------------------------------------------------
    log('warm-up');
    await closedLoop(8, plan.warmupMs, (w) => post(gwT, short.gateway, authHeaders((callers[w % callers.length] as Caller).rawKey)));
    await closedLoop(8, plan.warmupMs / 2, () => post(directT, short.direct, directKey));
    await closedLoop(8, plan.warmupMs / 2, () => post(relayT, short.direct, directKey));
    for (let i = 0; i < 100; i += 1) await transaction(false);
    for (let i = 0; i < 20; i += 1) {
      for (const t of [gwT, directT, relayT]) expectOk(await postStream(t, bodyFor(t, shortStream), t.name === 'gateway' ? firstKey : directKey), `warm-up stream (${t.name})`);
    }
    await gw.idle();

    /** The sides in a rotating order, so none always runs first. */
    const rotation = <T>(items: readonly T[], i: number): T[] => items.map((_, k) => items[(i + k) % items.length] as T);

    // --- 1. Non-streamed latency at concurrency 1: gateway, direct, bare relay and one transaction, rotating.
    log(`non-streamed latency, concurrency 1 (${plan.latencyIterations} rounds of gateway, direct, bare relay and one transaction)`);
    const c1Samples = { gateway: [] as number[], direct: [] as number[], relay: [] as number[] };
    const c1GatewayTimings: Timing[] = [];
    await gw.record(true);
    for (let i = 0; i < plan.latencyIterations; i += 1) {
      for (const which of rotation(['gateway', 'direct', 'relay', 'txn'] as const, i)) {
        if (which === 'txn') {
          await transaction(true);
          continue;
        }
        const t = which === 'gateway' ? gwT : which === 'direct' ? directT : relayT;
        const r = await post(t, bodyFor(t, short), t.name === 'gateway' ? firstKey : directKey);
        expectOk(r, which);
        c1Samples[which].push(r.totalMs);
        if (which === 'gateway') c1GatewayTimings.push(r);
        // Settlement runs after the reply; let it finish, as the next invocation of a Lambda
        // instance would, so it does not weigh on the other sides' measurements.
        if (which === 'gateway') await gw.idle();
      }
    }
    await gw.record(false);
    const nonStreamSamples = await gw.samples();
    const nonStreamTrips = tripReport(nonStreamSamples);
    const nonStreamPhases = phaseReport(nonStreamSamples, c1GatewayTimings, false);
    const c1 = side(c1Samples.gateway, c1Samples.direct, c1Samples.relay);
    const floorC1Samples = txnSamples;
    const floor = summarize(floorC1Samples);

    // --- 2. CPU per non-streamed request, one at a time (a Lambda instance serves one at a time).
    log(`CPU per request (${plan.cpuRequests} sequential requests to the gateway, then to the bare relay)`);
    const sequentialCpu = async (proc: GatewayProcess, t: Target, n: number, body: Buffer, headers: Record<string, string>): Promise<{ totalUs: number; systemUs: number }> => {
      const a = await proc.idle();
      for (let i = 0; i < n; i += 1) expectOk(await post(t, body, headers), t.name);
      const b = await proc.idle();
      return { totalUs: cpuUs(a, b) / n, systemUs: (b.cpuSystemUs - a.cpuSystemUs) / n };
    };
    const gwCpu = await sequentialCpu(gw, gwT, plan.cpuRequests, short.gateway, firstKey);
    const relayCpu = await sequentialCpu(relay, relayT, plan.cpuRequests, short.direct, directKey);
    const cpuPerRequestUs = gwCpu.totalUs;
    const cpuPerRequestSystemUs = gwCpu.systemUs;

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
        for (const which of rotation(['gateway', 'direct'] as const, r)) {
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

    // --- 4. Streamed time to first byte, rotating; round trips recorded.
    log(`streamed time to first byte (${plan.ttfbStreams} rounds of gateway, direct and bare relay streams and one transaction)`);
    const ttfbSamples = { gateway: [] as number[], direct: [] as number[], relay: [] as number[] };
    const ttfbGatewayTimings: Timing[] = [];
    txnSamples = [];
    await gw.record(true);
    for (let i = 0; i < plan.ttfbStreams; i += 1) {
      for (const t of rotation([gwT, directT, relayT, undefined], i)) {
        if (t === undefined) {
          await transaction(true);
          continue;
        }
        const r = await postStream(t, bodyFor(t, shortStream), t.name === 'gateway' ? firstKey : directKey);
        expectOk(r, `${t.name} stream`);
        if (t.name === 'gateway' && (!r.sawDone || !r.sawUsageComment)) throw new Error('a gateway stream ended without [DONE] or without its usage comment');
        ttfbSamples[t.name].push(r.ttfbMs);
        if (t.name === 'gateway') ttfbGatewayTimings.push(r);
        if (t.name === 'gateway') await gw.idle();
      }
    }
    await gw.record(false);
    const streamSamples = await gw.samples();
    const streamTrips = tripReport(streamSamples);
    const streamPhases = phaseReport(streamSamples, ttfbGatewayTimings, true);
    const ttfb = side(ttfbSamples.gateway, ttfbSamples.direct, ttfbSamples.relay);
    const floorStreamSamples = txnSamples;
    const floorStream = summarize(floorStreamSamples);

    // --- 5. Gap between chunks on paced streams, rotating; each relay's CPU over its own streams.
    log(`gap between chunks (${plan.gapStreams} streams per side, up to ${plan.gapTokens} tokens ${plan.gapDelayMs} ms apart)`);
    const gapSamples = { gateway: [] as number[], direct: [] as number[], relay: [] as number[] };
    const streamCounts = { gateway: new StreamCounts(), direct: new StreamCounts(), relay: new StreamCounts() };
    const gaps = (t: StreamTiming): number[] => t.frameTimes.slice(1).map((v, i) => v - (t.frameTimes[i] as number));
    const long0 = { gateway: await gw.idle(), relay: await relay.idle() };
    for (let i = 0; i < plan.gapStreams; i += 1) {
      for (const t of rotation([gwT, directT, relayT], i)) {
        const r = await postStream(t, bodyFor(t, paced), t.name === 'gateway' ? firstKey : directKey);
        expectOk(r, `${t.name} stream`);
        gapSamples[t.name].push(...gaps(r));
        streamCounts[t.name].add(r);
      }
    }
    const long1 = { gateway: await gw.idle(), relay: await relay.idle() };
    const gap = side(gapSamples.gateway, gapSamples.direct, gapSamples.relay);

    // --- 6. The same paced streams, short, for the fixed part of a stream's CPU.
    log(`short paced streams (${plan.gapStreams} per relay) for the per-chunk CPU regression`);
    const shortCounts = { gateway: new StreamCounts(), relay: new StreamCounts() };
    const shortCpu = { gateway: 0, relay: 0 };
    for (const [proc, t] of [
      [gw, gwT],
      [relay, relayT],
    ] as const) {
      await sim.control('/_sim/script', {
        model: MODEL_PACED,
        behaviors: Array.from({ length: plan.gapStreams }, () => ({ kind: 'ok', completionTokens: plan.shortTokens, chunkDelayMs: plan.gapDelayMs })),
      });
      const a = await proc.idle();
      for (let i = 0; i < plan.gapStreams; i += 1) {
        const r = await postStream(t, bodyFor(t, paced), t.name === 'gateway' ? firstKey : directKey);
        expectOk(r, `${t.name} stream`);
        (t.name === 'gateway' ? shortCounts.gateway : shortCounts.relay).add(r);
      }
      const b = await proc.idle();
      if (t.name === 'gateway') shortCpu.gateway = cpuUs(a, b);
      else shortCpu.relay = cpuUs(a, b);
    }
    const perChunk = (longCpu: number, longFrames: number, shortCpuUs: number, shortFrames: number): number =>
      (longCpu - shortCpuUs) / Math.max(1, longFrames - shortFrames);
    const cpuPerChunkUs = perChunk(cpuUs(long0.gateway, long1.gateway), streamCounts.gateway.frames, shortCpu.gateway, shortCounts.gateway.frames);
    const relayCpuPerChunkUs = perChunk(cpuUs(long0.relay, long1.relay), streamCounts.relay.frames, shortCpu.relay, shortCounts.relay.frames);

    // --- 6b. Per-chunk CPU with the process kept busy: many paced streams in flight at once, so
    // the figure is what a chunk costs and not the machine's price for waking an idle process.
    log(`busy per-chunk CPU (${plan.busyStreams} paced streams per phase, ${plan.busyConcurrency} in flight, ${plan.busyTokens} tokens then ${plan.shortTokens})`);
    const busyPlan: BusyPlan = { concurrency: plan.busyConcurrency, streams: plan.busyStreams, tokens: plan.busyTokens, shortTokens: plan.shortTokens, delayMs: plan.gapDelayMs };
    const busyBodies = new Map<number, Bodies>();
    const busyBody = (maxTokens: number): Bodies => {
      let b = busyBodies.get(maxTokens);
      if (b === undefined) busyBodies.set(maxTokens, (b = bodies(MODEL_PACED, true, maxTokens)));
      return b;
    };
    // Streams go round the seeded workspaces, as many callers would, not all to one ledger row.
    const gwBusy = await busyChunkCpu(
      { name: 'gateway', proc: gw, sim, model: MODEL_PACED, stream: (i, max) => postStream(gwT, busyBody(max).gateway, authHeaders((callers[i % callers.length] as Caller).rawKey)) },
      busyPlan,
    );
    const relayBusy = await busyChunkCpu({ name: 'relay', proc: relay, sim, model: MODEL_PACED, stream: (_i, max) => postStream(relayT, busyBody(max).direct, directKey) }, busyPlan);

    // --- 7. A 100 MiB streamed reply: the gateway's memory, and its speed against the direct call.
    const bytesPerFrame = streamCounts.gateway.bytes / Math.max(1, streamCounts.gateway.frames);
    const bigTokens = Math.ceil((plan.bigBytes / bytesPerFrame) * 1.02);
    log(`a ${Math.round(plan.bigBytes / MB)} MiB streamed reply (${bigTokens} tokens), gateway then direct`);
    const bigBody = bodies(MODEL_SHORT, true, 4_096);
    const bigBehavior = { kind: 'ok', completionTokens: bigTokens, ignoreCeiling: true };
    await sim.control('/_sim/script', { model: MODEL_SHORT, behaviors: [bigBehavior] });
    await gw.gc();
    await new Promise((r) => setTimeout(r, 200));
    await gw.idle();
    await gw.peak(true);
    // The baseline is taken once tracking runs, so the growth is measured against the same sampler.
    const mem0 = await gw.stats();
    await gw.record(true);
    const bigGw = await postStream(gwT, bigBody.gateway, firstKey, { keepTimes: false, timeoutMs: 180_000 });
    expectOk(bigGw, 'gateway 100 MiB stream');
    const mem1 = await gw.idle();
    await gw.peak(false);
    await gw.record(false);
    const bigTrips = tripReport(await gw.samples());
    await gw.gc();
    const mem2 = await gw.stats();
    await sim.control('/_sim/script', { model: MODEL_SHORT, behaviors: [bigBehavior] });
    const bigDirect = await postStream(directT, bigBody.direct, directKey, { keepTimes: false, timeoutMs: 180_000 });
    expectOk(bigDirect, 'direct 100 MiB stream');
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
      cpuPerChunkUs: (cpuUs(mem0, mem1) - cpuPerRequestUs) / Math.max(1, bigGw.frames),
      holdExtensions: bigTrips.during,
    };

    log(`control: the AWS SDK client's CPU per TransactWriteItems (${plan.sdkCalls} calls)`);
    const sdkLedger = new DynamoLedger(doc, { ledger: tableName(TABLE_PREFIX, 'ledger'), holds: tableName(TABLE_PREFIX, 'holds'), usage: tableName(TABLE_PREFIX, 'usage') });
    const sdkCpuUs: number[] = [];
    for (let i = 0; i < plan.sdkCalls + 20; i += 1) {
      const now = Date.now();
      const c0 = process.cpuUsage();
      const before = sdkLedger.roundTrips;
      const outcome = await sdkLedger.admit(floorAdmission(now));
      const cpu = process.cpuUsage(c0);
      if (!outcome.admitted) throw new Error(`the SDK control's admission was refused: ${outcome.refusal.kind}`);
      if (i >= 20 && sdkLedger.roundTrips - before === 1) sdkCpuUs.push(cpu.user + cpu.system);
      await sdkLedger.settle(outcome.hold, { counts: undefined, chargeMicros: 1_000, stream: false, status: 200, outcome: 'ok', attempts: 1, now: Date.now() });
    }

    log(`control: the SDK's low-level DynamoDBClient, input in attribute values, CPU per TransactWriteItems (${plan.sdkCalls} calls)`);
    const lowLevel = new LowLevelSender(db.endpoint);
    cleanup.add('low-level SDK client', async () => lowLevel.destroy());
    const lowLedger = new DynamoLedger(lowLevel as unknown as DocumentSender, { ledger: tableName(TABLE_PREFIX, 'ledger'), holds: tableName(TABLE_PREFIX, 'holds'), usage: tableName(TABLE_PREFIX, 'usage') });
    const lowLevelCpuUs: number[] = [];
    for (let i = 0; i < plan.sdkCalls + 20; i += 1) {
      const now = Date.now();
      const c0 = process.cpuUsage();
      const before = lowLedger.roundTrips;
      const outcome = await lowLedger.admit(floorAdmission(now));
      const cpu = process.cpuUsage(c0);
      if (!outcome.admitted) throw new Error(`the low-level control's admission was refused: ${outcome.refusal.kind}`);
      if (i >= 20 && lowLedger.roundTrips - before === 1) lowLevelCpuUs.push(cpu.user + cpu.system);
      await lowLedger.settle(outcome.hold, { counts: undefined, chargeMicros: 1_000, stream: false, status: 200, outcome: 'ok', attempts: 1, now: Date.now() });
    }

    // --- Stop the stack, then the bundle's module init on a quieter machine.
    const gatewayLogLines = gw.logLines;
    await gw.stop();
    await relay.stop();
    await sim.stop();
    await db.stop();
    let profile: ProfileSummary | undefined;
    if (options.profile) {
      // Keep the bundle beside its profile, so the profile can be read again later.
      copyFileSync(bundles.gatewayServer, path.join(profileDir, 'gateway-server.js'));
      const newest = readdirSync(profileDir)
        .filter((f) => f.endsWith('.cpuprofile'))
        .map((f) => path.join(profileDir, f))
        .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)[0];
      if (newest !== undefined) profile = summarizeProfile(newest, bundles.gatewayServer);
    }
    log('controls on the quiet machine: an idle wake-up; Sluice\'s own code with its ports in memory');
    const wakeupUs = await idleWakeupCpuUs(plan.wakeups, 2);
    const own = await measureOwnCpu(plan.ownRequests);

    log('module init of the bundled handler in fresh processes');
    const init = await measureModuleInit(bundles, plan.initRuns);

    // --- Report ------------------------------------------------------------------------------
    const results = buildResults({
      options,
      plan,
      bundles,
      init,
      floor,
      floorStream,
      floorCpuUs: summarize(txnCpuUs),
      txnRetries,
      c1,
      cpu: {
        perNonStreamedRequestUs: cpuPerRequestUs,
        perNonStreamedRequestSystemUs: cpuPerRequestSystemUs,
        relayPerRequestUs: relayCpu.totalUs,
        wirePerTransactionUs: summarize(txnCpuUs).mean,
        sdkPerTransactionUs: summarize(sdkCpuUs).mean,
        sdkLowLevelPerTransactionUs: summarize(lowLevelCpuUs).mean,
        processRemainderPerRequestUs: cpuPerRequestUs - relayCpu.totalUs - 2 * summarize(txnCpuUs).mean,
        idleWakeupUs: wakeupUs,
        own,
        perChunkBusyUs: gwBusy.perChunkUs,
        relayPerChunkBusyUs: relayBusy.perChunkUs,
        busy: { gateway: gwBusy, relay: relayBusy },
        perChunkPacedSequentialUs: cpuPerChunkUs,
        relayPerChunkPacedSequentialUs: relayCpuPerChunkUs,
        wakeupsPerChunkPacedSequential: wakeupsPer(long0.gateway, long1.gateway, streamCounts.gateway.frames),
        relayWakeupsPerChunkPacedSequential: wakeupsPer(long0.relay, long1.relay, streamCounts.relay.frames),
        perChunkUnpacedUs: big.cpuPerChunkUs,
        framesPerLongStream: streamCounts.gateway.frames / plan.gapStreams,
        framesPerShortStream: shortCounts.gateway.frames / plan.gapStreams,
      },
      throughput,
      ttfb,
      gap,
      frames: { gateway: streamCounts.gateway.summary(), direct: streamCounts.direct.summary(), relay: streamCounts.relay.summary() },
      nonStreamTrips,
      streamTrips,
      phases: { nonStreamed: nonStreamPhases, streamed: streamPhases },
      big,
      gatewayLogLines,
      elapsedS: (performance.now() - started) / 1000,
      loadAverageStart,
      ...(profile === undefined ? {} : { profile }),
    });
    process.stdout.write(`${renderTables(results)}\n`);
    if (profile !== undefined) process.stdout.write(`\n${renderProfile(profile)}\n`);
    writeFileSync(path.join(outDir, 'bench.json'), `${JSON.stringify(results, (_k, v: unknown) => (typeof v === 'number' ? round(v) : v), 2)}\n`);
    const GW = '#d62728';
    const DIRECT = '#1f77b4';
    const RELAY = '#2ca02c';
    const panels = [
      {
        title: 'Non-streamed latency, concurrency 1',
        series: [
          { label: 'gateway', color: GW, samples: c1Samples.gateway },
          { label: 'direct', color: DIRECT, samples: c1Samples.direct },
          { label: 'bare relay (control)', color: RELAY, samples: c1Samples.relay },
          { label: 'one TransactWriteItems', color: '#7f7f7f', dashed: true, samples: floorC1Samples },
        ],
      },
      {
        title: 'Streamed time to first byte',
        series: [
          { label: 'gateway', color: GW, samples: ttfbSamples.gateway },
          { label: 'direct', color: DIRECT, samples: ttfbSamples.direct },
          { label: 'bare relay (control)', color: RELAY, samples: ttfbSamples.relay },
          { label: 'one TransactWriteItems', color: '#7f7f7f', dashed: true, samples: floorStreamSamples },
        ],
      },
      {
        title: `Gap between chunks (upstream paces ${plan.gapDelayMs} ms)`,
        series: [
          { label: 'gateway', color: GW, samples: gapSamples.gateway },
          { label: 'direct', color: DIRECT, samples: gapSamples.direct },
          { label: 'bare relay (control)', color: RELAY, samples: gapSamples.relay },
        ],
      },
      ...plan.concurrencies.map((c) => ({
        title: `Non-streamed latency, concurrency ${c}`,
        series: [
          { label: 'gateway', color: GW, samples: throughputSamples.get(c)?.gateway ?? [] },
          { label: 'direct', color: DIRECT, samples: throughputSamples.get(c)?.direct ?? [] },
        ],
      })),
    ];
    writeFileSync(path.join(outDir, 'latency.svg'), cdfChart('Sluice gateway against the direct call (empirical CDFs)', panels));
    log(`wrote bench-results/bench.json and bench-results/latency.svg in ${Math.round((performance.now() - started) / 1000)} s`);
    if (options.profile) log('gateway CPU profile in bench-results/profile/');
  } finally {
    clearTimeout(watchdog);
    await cleanup.run();
  }
}

/** CPU this process is charged per `ms`-millisecond sleep with no work: what a wake-up costs here. */
async function idleWakeupCpuUs(n: number, ms: number): Promise<number> {
  const c0 = process.cpuUsage();
  for (let i = 0; i < n; i += 1) await new Promise((resolve) => setTimeout(resolve, ms));
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / n;
}

function cpuUs(a: GatewayStats, b: GatewayStats): number {
  return b.cpuUserUs - a.cpuUserUs + (b.cpuSystemUs - a.cpuSystemUs);
}

/** Main-thread wake-ups between two stats, per frame; NaN when the process cannot tell. */
function wakeupsPer(a: GatewayStats, b: GatewayStats, frames: number): number {
  return a.wakeups < 0 || b.wakeups < 0 ? Number.NaN : (b.wakeups - a.wakeups) / Math.max(1, frames);
}

function totalTrips(s: GatewayStats): number {
  return s.trips.ledger + s.trips.directory + s.trips.catalog;
}

/** Frames and reads over several streams of one side. */
class StreamCounts {
  frames = 0;
  bytes = 0;
  streams = 0;
  coalescedReads = 0;
  maxFramesPerRead = 0;

  add(t: StreamTiming): void {
    this.streams += 1;
    this.frames += t.frames;
    this.bytes += t.bytes;
    this.coalescedReads += t.coalescedReads;
    this.maxFramesPerRead = Math.max(this.maxFramesPerRead, t.maxFramesPerRead);
  }

  summary(): FrameCounts {
    return { streams: this.streams, frames: this.frames, bytes: this.bytes, coalescedReads: this.coalescedReads, maxFramesPerRead: this.maxFramesPerRead };
  }
}

// The store write map (`store-map.ts`) runs after the rest, on a stack of its own, and merges its
// figures into bench.json; `--store-map-only` runs it alone, `--no-store-map` leaves it out.
const options = parseArgs(process.argv.slice(2));
const benchArgs = process.argv.slice(2);
(options.storeMapOnly ? storeMapMain(benchArgs) : main().then(() => (options.noStoreMap ? undefined : storeMapMain(benchArgs)))).then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`[bench] failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
