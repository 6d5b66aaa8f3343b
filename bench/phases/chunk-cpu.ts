/**
 * Phase 6: per-chunk CPU. Paced: the same paced streams as phase 5, short, give the fixed part
 * of a stream's CPU, and the difference over the extra frames is a chunk's. Busy: many paced
 * streams in flight at once (`../chunk-cpu.ts`), so the figure is what a chunk costs and not
 * the machine's price for waking an idle process.
 */
import { readdirSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FULL, QUICK, type Options, type Plan } from '../args';
import { busyChunkCpu, type BusyChunkCpu, type BusyPlan } from '../chunk-cpu';
import { postStream } from '../load';
import { renderProfile, summarizeProfile } from '../profile-summary';
import { MB } from '../report';
import { guardRun, log, startStack, type Stack } from '../stack';
import { bigStream } from './big-stream';
import type { ChunkGaps } from './chunk-gaps';
import { MODEL_PACED, StreamCounts, authHeaders, bodies, cpuUs, expectOk, wakeupsPer, type Bodies, type Caller } from './requests';
import { warmUp } from './warm-up';

export interface ChunkCpu {
  readonly perChunkPacedSequentialUs: number;
  readonly relayPerChunkPacedSequentialUs: number;
  readonly wakeupsPerChunkPacedSequential: number;
  readonly relayWakeupsPerChunkPacedSequential: number;
  readonly framesPerShortStream: number;
  readonly busy: { readonly gateway: BusyChunkCpu; readonly relay: BusyChunkCpu };
}

function perChunk(longCpu: number, longFrames: number, shortCpuUs: number, shortFrames: number): number {
  return (longCpu - shortCpuUs) / Math.max(1, longFrames - shortFrames);
}

/** Runs phase 6 (paced, then busy); `long` is phase 5's long paced streams. */
export async function chunkCpu(stack: Stack, plan: Plan, long: ChunkGaps): Promise<ChunkCpu> {
  const { gw, relay, gwT, relayT, sim } = stack;
  const { paced, bodyFor, keyFor } = stack.requests;
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
      const r = await postStream(t, bodyFor(t, paced), keyFor(t));
      expectOk(r, `${t.name} stream`);
      (t.name === 'gateway' ? shortCounts.gateway : shortCounts.relay).add(r);
    }
    const b = await proc.idle();
    if (t.name === 'gateway') shortCpu.gateway = cpuUs(a, b);
    else shortCpu.relay = cpuUs(a, b);
  }
  const longCounts = long.counts;

  const busy = await busyPair(stack, plan);

  return {
    perChunkPacedSequentialUs: perChunk(cpuUs(long.before.gateway, long.after.gateway), longCounts.gateway.frames, shortCpu.gateway, shortCounts.gateway.frames),
    relayPerChunkPacedSequentialUs: perChunk(cpuUs(long.before.relay, long.after.relay), longCounts.relay.frames, shortCpu.relay, shortCounts.relay.frames),
    wakeupsPerChunkPacedSequential: wakeupsPer(long.before.gateway, long.after.gateway, longCounts.gateway.frames),
    relayWakeupsPerChunkPacedSequential: wakeupsPer(long.before.relay, long.after.relay, longCounts.relay.frames),
    framesPerShortStream: shortCounts.gateway.frames / plan.gapStreams,
    busy,
  };
}

/** The busy per-chunk CPU of the gateway, then of the bare relay (the control), on the same plan. */
async function busyPair(stack: Stack, plan: Plan): Promise<{ gateway: BusyChunkCpu; relay: BusyChunkCpu }> {
  const { gw, relay, gwT, relayT, sim, callers } = stack;
  const { directKey } = stack.requests;
  log(`busy per-chunk CPU (${plan.busyStreams} paced streams per phase, ${plan.busyConcurrency} in flight, ${plan.busyTokens} tokens then ${plan.shortTokens})`);
  const busyPlan: BusyPlan = { concurrency: plan.busyConcurrency, streams: plan.busyStreams, tokens: plan.busyTokens, shortTokens: plan.shortTokens, delayMs: plan.gapDelayMs };
  const busyBodies = new Map<number, Bodies>();
  const busyBody = (maxTokens: number): Bodies => {
    let b = busyBodies.get(maxTokens);
    if (b === undefined) busyBodies.set(maxTokens, (b = bodies(MODEL_PACED, true, maxTokens)));
    return b;
  };
  // Streams go round the seeded workspaces, as many callers would, not all to one ledger row.
  const gateway = await busyChunkCpu(
    { name: 'gateway', proc: gw, sim, model: MODEL_PACED, stream: (i, max) => postStream(gwT, busyBody(max).gateway, authHeaders((callers[i % callers.length] as Caller).rawKey)) },
    busyPlan,
  );
  const control = await busyChunkCpu({ name: 'relay', proc: relay, sim, model: MODEL_PACED, stream: (_i, max) => postStream(relayT, busyBody(max).direct, directKey) }, busyPlan);
  return { gateway, relay: control };
}

/** Rounds of the busy pair in `--chunk-cpu-only`: alternating sides, so drifting load falls on both. */
const ONLY_ROUNDS = 3;

/**
 * `npm run bench -- --chunk-cpu-only`: the A/B tool for per-chunk work. Starts the stack, warms
 * it up, runs the busy pair (gateway, then bare relay) three times, then the 100 MiB stream for
 * the gateway's memory; prints each round's figures and a JSON line on stdout. Runs from two
 * worktrees, alternated, compare two versions of the code on the same machine state. With
 * `--profile`, the gateway's CPU profile over the whole run is summarised on stderr at the end.
 */
export async function chunkCpuOnly(options: Options): Promise<void> {
  const plan = options.quick ? QUICK : FULL;
  const run = guardRun();
  try {
    const stack = await startStack(run.cleanup, plan, options);
    await warmUp(stack, plan);
    const rounds: { gateway: BusyChunkCpu; relay: BusyChunkCpu }[] = [];
    for (let i = 0; i < ONLY_ROUNDS; i += 1) {
      const pair = await busyPair(stack, plan);
      rounds.push(pair);
      const g = pair.gateway.perChunkUs;
      const r = pair.relay.perChunkUs;
      log(`round ${i + 1}: gateway ${g.toFixed(2)} us, bare relay ${r.toFixed(2)} us, gateway's own share ${(g - r).toFixed(2)} us per busy chunk (load ${os.loadavg()[0]?.toFixed(1)})`);
    }
    // The 100 MiB stream is sized from a few paced streams' bytes per frame, as in the full run.
    const counts = new StreamCounts();
    const { paced, bodyFor, keyFor } = stack.requests;
    for (let i = 0; i < 4; i += 1) {
      const r = await postStream(stack.gwT, bodyFor(stack.gwT, paced), keyFor(stack.gwT));
      expectOk(r, 'gateway stream');
      counts.add(r);
    }
    const big = await bigStream(stack, plan, counts, 0);
    const mib = (n: number): string => (n / MB).toFixed(1);
    log(`100 MiB stream: RSS +${mib(big.rssGrowth)} MiB, heap +${mib(big.heapGrowth)} MiB, external +${mib(big.externalGrowth)} MiB`);
    const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
    process.stdout.write(
      `${JSON.stringify({
        gatewayUs: rounds.map((p) => p.gateway.perChunkUs),
        relayUs: rounds.map((p) => p.relay.perChunkUs),
        ownShareUs: rounds.map((p) => p.gateway.perChunkUs - p.relay.perChunkUs),
        medianOwnShareUs: median(rounds.map((p) => p.gateway.perChunkUs - p.relay.perChunkUs)),
        bigRssGrowthMiB: big.rssGrowth / MB,
        bigHeapGrowthMiB: big.heapGrowth / MB,
        bigExternalGrowthMiB: big.externalGrowth / MB,
        loadAverage: os.loadavg()[0],
      })}\n`,
    );
    if (options.profile) {
      // The gateway writes its profile as it exits; the whole run is in it, warm-up included.
      await stack.stopServices();
      const newest = readdirSync(stack.profileDir)
        .filter((f) => f.endsWith('.cpuprofile'))
        .map((f) => path.join(stack.profileDir, f))
        .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)[0];
      if (newest !== undefined) process.stderr.write(`${renderProfile(summarizeProfile(newest, stack.bundles.gatewayServer, 40))}\n`);
    }
  } finally {
    await run.cleanup.run();
    run.disarm();
  }
}
