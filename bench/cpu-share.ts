/**
 * Lambda's CPU share, emulated (issue 21 item 2): the bundled gateway, and only it, in a CPU cgroup
 * capped at the share Lambda gives each memory size (`memory ÷ 1,769` of one vCPU, `cgroup.ts`),
 * measured against the bench's own latency, first-byte and chunk-gap targets at each size, with
 * its CPU per request, how often the cap throttled it, and its peak memory.
 *
 * The period. Lambda does not publish how it meters a function's CPU share. A public measurement
 * on Lambda itself (pwrdrvr/lambda-throttling, March 2025: a spin loop at 128 to 1,769 MB) shows
 * the pauses of a throttled function as multiples of 20 ms (about 20, 40, 60 and 80 ms at 128
 * MB), which is what CFS bandwidth control with a 20 ms period does; the kernel's default is 100
 * ms, which would make the pauses five times longer. The bench uses 20 ms (`PERIOD_US`).
 *
 * The heap. Each size gets a gateway process of its own, started with the `node` options Lambda's
 * Node.js bootstrap gives a function of that memory ({@link lambdaNodeOptions}), warmed up, then
 * capped: V8's young generation (how often it scavenges) and its old-generation limit (when it
 * collects in full, and the process's peak memory) follow the function's memory on Lambda, not
 * the bench machine's. `--gateway-node-options` come after them, so they can override them.
 *
 * The load. On-demand Lambda gives an execution environment one request at a time and the next
 * one only after the invocation returns (settlement included), so each phase is the bench's own
 * sequential closed loop: one request, wait for the gateway to go idle, the next. Throttling
 * shows up three ways: wall time beyond the CPU a request needs (added latency and first byte),
 * a chunk arriving while the quota is spent waiting for the next period (the gap between chunks),
 * and the cgroup's own count of throttled periods per request, reported beside them.
 *
 *   npm run bench -- --cpu-share-only [--quick]     this part alone (then the cost model)
 *
 * Output: a table, and `cpuShare` (one entry per memory size) and `cpuShareRun` merged into
 * `bench-results/bench.json`.
 */
import os from 'node:os';
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import type { Options, Plan } from './args';
import { mergeBenchJson } from './bench-json';
import { CpuCap, detectCpuCgroup, quotaFor, releaseCap, statDelta, type CpuStat } from './cgroup';
import { stageProfiles } from './cost-inputs';
import { post, postStream } from './load';
import { chunkGaps } from './phases/chunk-gaps';
import { nonStreamedLatency } from './phases/latency';
import { sequentialCpu } from './phases/request-cpu';
import { expectOk, MODEL_SHORT } from './phases/requests';
import { streamTtfb } from './phases/ttfb';
import { warmControls, warmGateway } from './phases/warm-up';
import { procMemory, resetPeakRss } from './proc-status';
import { alignRight } from './report-tables';
import { GAP_ADDED_P99_LIMIT_MS, addedLimits } from './report-targets';
import { guardRun, log, startStack, type Stack } from './stack';
import { round } from './stats';

/** The CFS period, microseconds: see the module comment. */
export const PERIOD_US = 20_000;
/** One vCPU's worth of Lambda memory (AWS Lambda Developer Guide, "Configure Lambda function memory"). */
export const MB_PER_VCPU = 1_769;
const WATCHDOG_MS = 15 * 60_000;
const MIB = 1024 * 1024;

/**
 * The `node` options Lambda's Node.js runtime starts a function of `memoryMb` with. Its bootstrap
 * (`/var/runtime/bootstrap`, a shell script in the runtime's image; AWS does not document it, but
 * copies of it from the nodejs18.x base image are public; nodejs22.x's is assumed the same) runs
 * `node --expose-gc --max-http-header-size 81920 --max-semi-space-size=S --max-old-space-size=O`
 * with, in the shell's integer arithmetic, a tenth of the memory for the young generation
 * (`S` = memory / 10 / 2 MiB for each semi-space) and the rest for the old one (`O` = memory −
 * memory / 10): `--max-semi-space-size=6 --max-old-space-size=116` at 128 MB, as a 128 MB
 * function's own process line shows. A deployed function can confirm it from `process.execArgv`.
 */
export function lambdaNodeOptions(memoryMb: number): string[] {
  if (!Number.isSafeInteger(memoryMb) || memoryMb < 128) throw new Error(`Lambda memory is a whole number of MB from 128, got ${memoryMb}`);
  const newSpace = Math.floor(memoryMb / 10);
  return ['--expose-gc', '--max-http-header-size=81920', `--max-semi-space-size=${Math.floor(newSpace / 2)}`, `--max-old-space-size=${memoryMb - newSpace}`];
}

/** What one memory size measured. */
export interface CpuShareEntry {
  readonly memoryMb: number;
  /** The `node` options the size's gateway process ran with: {@link lambdaNodeOptions}, then `--gateway-node-options`. */
  readonly nodeOptions: readonly string[];
  /** The share of one vCPU, and the cgroup's quota over its period. */
  readonly cpuShare: number;
  readonly quotaUs: number;
  readonly periodUs: number;
  readonly addedP50Ms: number;
  readonly addedP99Ms: number;
  readonly ttfbAddedP50Ms: number;
  readonly ttfbAddedP99Ms: number;
  readonly gapAddedP99Ms: number;
  /** The settlement after the reply (billed), p50, from the gateway's own timeline. */
  readonly settleP50Ms: number;
  readonly cpuPerRequestUs: number;
  /** The gateway's peak resident memory over this size's phases (`VmHWM`), MiB. */
  readonly peakRssMiB: number | null;
  /** Periods in which the cap throttled the gateway, and the time it waited, per request served. */
  readonly throttledPeriodsPerRequest: number;
  readonly throttledMsPerRequest: number;
  readonly limits: { readonly addedP50Ms: number; readonly addedP99Ms: number; readonly ttfbAddedP50Ms: number; readonly ttfbAddedP99Ms: number; readonly gapAddedP99Ms: number };
  /** The targets missed, by name; none when `met`. */
  readonly missed: readonly string[];
  readonly met: boolean;
}

/** The sizes measured: the plan's, and every stage's own, ascending. */
export function memorySizes(planned: readonly number[], stageMemory: readonly number[]): number[] {
  return [...new Set([...planned, ...stageMemory])].sort((a, b) => a - b);
}

/** Which targets an entry misses, by its figures and limits. */
export function missedTargets(e: Pick<CpuShareEntry, 'addedP50Ms' | 'addedP99Ms' | 'ttfbAddedP50Ms' | 'ttfbAddedP99Ms' | 'gapAddedP99Ms' | 'limits'>): string[] {
  const checks: [string, number, number][] = [
    ['added latency p50', e.addedP50Ms, e.limits.addedP50Ms],
    ['added latency p99', e.addedP99Ms, e.limits.addedP99Ms],
    ['added first byte p50', e.ttfbAddedP50Ms, e.limits.ttfbAddedP50Ms],
    ['added first byte p99', e.ttfbAddedP99Ms, e.limits.ttfbAddedP99Ms],
    ['added chunk gap p99', e.gapAddedP99Ms, e.limits.gapAddedP99Ms],
  ];
  return checks.filter(([, figure, limit]) => !(figure <= limit)).map(([name]) => name);
}

/** The smallest size that met every target, if any. */
export function cheapestMet(entries: readonly Pick<CpuShareEntry, 'memoryMb' | 'met'>[]): number | null {
  return entries.filter((e) => e.met).reduce<number | null>((m, e) => (m === null || e.memoryMb < m ? e.memoryMb : m), null);
}

/** The table `npm run bench` prints. */
export function renderCpuShare(entries: readonly CpuShareEntry[], stages: readonly { name: string; memoryMb: number }[]): string {
  const n = (v: number): string => String(round(v));
  const rows: string[][] = [
    ['CPU share (ms; limits in brackets)', 'share', 'added p50', 'added p99', 'TTFB added p50', 'TTFB added p99', 'gap added p99', 'settle p50', 'CPU/req us', 'throttled/req', 'peak RSS', 'targets'],
  ];
  for (const e of entries) {
    rows.push([
      `${e.memoryMb} MB (${e.quotaUs}/${e.periodUs} us)`,
      `${(e.cpuShare * 100).toFixed(1)}%`,
      `${n(e.addedP50Ms)} (${n(e.limits.addedP50Ms)})`,
      `${n(e.addedP99Ms)} (${n(e.limits.addedP99Ms)})`,
      `${n(e.ttfbAddedP50Ms)} (${n(e.limits.ttfbAddedP50Ms)})`,
      `${n(e.ttfbAddedP99Ms)} (${n(e.limits.ttfbAddedP99Ms)})`,
      `${n(e.gapAddedP99Ms)} (${n(e.limits.gapAddedP99Ms)})`,
      n(e.settleP50Ms),
      n(e.cpuPerRequestUs),
      `${n(e.throttledPeriodsPerRequest)} x, ${n(e.throttledMsPerRequest)} ms`,
      e.peakRssMiB === null ? '-' : `${n(e.peakRssMiB)} MiB`,
      e.met ? 'MET' : `MISSED: ${e.missed.join(', ')}`,
    ]);
  }
  const cheapest = cheapestMet(entries);
  const lines = [alignRight(rows), `cheapest memory measured that meets every target: ${cheapest === null ? 'none' : `${cheapest} MB`}`];
  if (entries.length > 0) lines.push(`each size's gateway ran with its Lambda heap: ${entries.map((e) => `${e.memoryMb} MB ${heapOptions(e.nodeOptions)}`).join('; ')}`);
  for (const s of stages) {
    const e = entries.find((x) => x.memoryMb === s.memoryMb);
    lines.push(`  ${s.name} deploys ${s.memoryMb} MB: ${e === undefined ? 'not measured' : e.met ? 'targets met' : `missed (${e.missed.join(', ')})`}`);
  }
  return lines.join('\n');
}

/** The options that size V8's heap, as the table shows them (the last of each wins, as in `node`). */
function heapOptions(nodeOptions: readonly string[]): string {
  const last = (name: string): string => nodeOptions.filter((o) => o.startsWith(`--${name}=`)).at(-1)?.slice(name.length + 3) ?? 'default';
  return `semi-space ${last('max-semi-space-size')} MiB, old ${last('max-old-space-size')} MiB`;
}

/** The gateway's cgroup, from `/proc/<pid>/cgroup`. */
function procCgroup(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cgroup`, 'utf8');
  } catch {
    return '';
  }
}

/**
 * Runs the CPU share on a stack of its own and merges its figures into bench.json. Where cgroups
 * cannot be written, says so, records why (`cpuShareRun.skipped`) and returns without measuring.
 */
export async function cpuShareMain(options: Options, plan: Plan): Promise<readonly CpuShareEntry[]> {
  const started = performance.now();
  const loadAverageStart = os.loadavg()[0] ?? Number.NaN;
  const stages = stageProfiles().map((s) => ({ name: s.name, memoryMb: s.gatewayMemoryMb }));
  const support = detectCpuCgroup();
  if (!support.ok) {
    log(`CPU share skipped: ${support.reason}`);
    process.stdout.write(`CPU share: skipped (${support.reason})\n`);
    mergeBenchJson({ cpuShare: [], cpuShareRun: { skipped: support.reason, when: new Date().toISOString() } });
    return [];
  }
  const sizes = memorySizes(plan.cpuShare.memoryMb, stages.map((s) => s.memoryMb));
  const run = guardRun(WATCHDOG_MS);
  const entries: CpuShareEntry[] = [];
  let gatewayNode = 'unknown';
  try {
    // The sequential phases use the first caller; a few workspaces are enough.
    const stack = await startStack(run.cleanup, { ...plan, workspaces: Math.min(plan.workspaces, 8) }, options);
    gatewayNode = stack.gw.node;
    // Each size has a gateway of its own (the module comment's "heap"); the stack's is not measured.
    await stack.gw.stop();
    const cap = CpuCap.create(support);
    // Runs after each size's gateway has been stopped (registered later, so undone first) and before
    // the stack's: whatever is still alive moved back out, then the group removed (`releaseCap` waits
    // for a gateway that is still exiting).
    run.cleanup.add('CPU cgroup', async () => {
      for (const p of await releaseCap(cap)) log(`CPU cgroup cleanup: ${p}`);
    });
    // Should the process end without its cleanup, one last synchronous try.
    process.once('exit', () => void cap.remove());
    log(`CPU share: cgroup ${support.version} ${cap.dir}, period ${PERIOD_US} us; a gateway for each size alone in it; sizes ${sizes.join(', ')} MB`);
    log('warm-up (direct and bare relay)');
    await warmControls(stack, plan);
    if (options.providerMs > 0) {
      // Direct and gateway alike: the added latency stays the gateway's own.
      await stack.sim.control('/_sim/default', { model: MODEL_SHORT, behavior: { kind: 'ok', stallBeforeFirstByteMs: options.providerMs } });
    }
    const phasePlan: Plan = { ...plan, latencyIterations: plan.cpuShare.latencyIterations, ttfbStreams: plan.cpuShare.ttfbStreams, gapStreams: plan.cpuShare.gapStreams };
    const { short, shortStream, firstKey } = stack.requests;
    for (const memoryMb of sizes) {
      const nodeOptions = [...lambdaNodeOptions(memoryMb), ...options.gatewayNodeOptions];
      const sized: Stack = { ...stack, ...(await stack.startGateway(nodeOptions)) };
      const { gw } = sized;
      log(`CPU share: ${memoryMb} MB, gateway pid ${gw.pid} (${nodeOptions.join(' ')}); warm-up`);
      await warmGateway(sized, plan);
      const quotaUs = quotaFor(memoryMb, PERIOD_US, MB_PER_VCPU);
      cap.limit(quotaUs, PERIOD_US);
      cap.add(gw.pid, procCgroup(gw.pid));
      log(`CPU share: ${memoryMb} MB, ${quotaUs} us of CPU per ${PERIOD_US} us`);
      // A few requests under the new cap before anything is counted.
      for (let i = 0; i < 10; i += 1) {
        expectOk(await post(sized.gwT, short.gateway, firstKey), 'gateway');
        expectOk(await postStream(sized.gwT, shortStream.gateway, firstKey), 'gateway stream');
        await gw.idle();
      }
      resetPeakRss(gw.pid);
      const stat0: CpuStat = cap.stat();
      const served0 = (await gw.idle()).served;
      const latency = await nonStreamedLatency(sized, phasePlan);
      const ttfb = await streamTtfb(sized, phasePlan);
      const gaps = await chunkGaps(sized, phasePlan);
      const cpu = await sequentialCpu(gw, sized.gwT, plan.cpuShare.cpuRequests, short.gateway, firstKey);
      const served = Math.max(1, (await gw.idle()).served - served0);
      const throttled = statDelta(stat0, cap.stat());
      const memory = procMemory(gw.pid);
      const latencyLimits = addedLimits(latency.floor);
      const ttfbLimits = addedLimits(ttfb.floorStream);
      const figures = {
        addedP50Ms: latency.c1.addedP50,
        addedP99Ms: latency.c1.addedP99,
        ttfbAddedP50Ms: ttfb.ttfb.addedP50,
        ttfbAddedP99Ms: ttfb.ttfb.addedP99,
        gapAddedP99Ms: gaps.gap.addedP99,
        limits: { addedP50Ms: latencyLimits.p50, addedP99Ms: latencyLimits.p99, ttfbAddedP50Ms: ttfbLimits.p50, ttfbAddedP99Ms: ttfbLimits.p99, gapAddedP99Ms: GAP_ADDED_P99_LIMIT_MS },
      };
      const missed = missedTargets(figures);
      const entry: CpuShareEntry = {
        memoryMb,
        nodeOptions,
        cpuShare: memoryMb / MB_PER_VCPU,
        quotaUs,
        periodUs: PERIOD_US,
        ...figures,
        settleP50Ms: latency.phases.settle.p50,
        cpuPerRequestUs: cpu.totalUs,
        peakRssMiB: memory === undefined ? null : memory.peakRssBytes / MIB,
        throttledPeriodsPerRequest: throttled.throttledPeriods / served,
        throttledMsPerRequest: throttled.throttledUs / 1000 / served,
        missed,
        met: missed.length === 0,
      };
      entries.push(entry);
      log(`CPU share: ${memoryMb} MB ${entry.met ? 'met every target' : `missed ${missed.join(', ')}`}`);
      cap.unlimit();
      await gw.stop();
    }
  } finally {
    await run.cleanup.run();
    run.disarm();
  }
  process.stdout.write(`${renderCpuShare(entries, stages)}\n`);
  mergeBenchJson({
    cpuShare: entries,
    cpuShareRun: {
      when: new Date().toISOString(),
      cgroup: support.version,
      periodUs: PERIOD_US,
      mbPerVcpu: MB_PER_VCPU,
      quick: options.quick,
      providerMs: options.providerMs,
      gatewayNodeOptions: options.gatewayNodeOptions,
      gatewayNode,
      plan: plan.cpuShare,
      stages,
      cheapestMet: cheapestMet(entries),
      elapsedSeconds: (performance.now() - started) / 1000,
      loadAverageStart,
      loadAverageEnd: os.loadavg()[0] ?? Number.NaN,
    },
  });
  log(`CPU share: merged into bench-results/bench.json in ${Math.round((performance.now() - started) / 1000)} s`);
  return entries;
}
