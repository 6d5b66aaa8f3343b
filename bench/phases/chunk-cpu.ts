/**
 * Phase 6: per-chunk CPU. Paced: the same paced streams as phase 5, short, give the fixed part
 * of a stream's CPU, and the difference over the extra frames is a chunk's. Busy: many paced
 * streams in flight at once (`../chunk-cpu.ts`), so the figure is what a chunk costs and not
 * the machine's price for waking an idle process.
 */
import type { Plan } from '../args';
import { busyChunkCpu, type BusyChunkCpu, type BusyPlan } from '../chunk-cpu';
import { postStream } from '../load';
import { log, type Stack } from '../stack';
import type { ChunkGaps } from './chunk-gaps';
import { MODEL_PACED, StreamCounts, authHeaders, bodies, cpuUs, expectOk, wakeupsPer, type Bodies, type Caller } from './requests';

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
  const { gw, relay, gwT, relayT, sim, callers } = stack;
  const { paced, bodyFor, keyFor, directKey } = stack.requests;
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

  return {
    perChunkPacedSequentialUs: perChunk(cpuUs(long.before.gateway, long.after.gateway), longCounts.gateway.frames, shortCpu.gateway, shortCounts.gateway.frames),
    relayPerChunkPacedSequentialUs: perChunk(cpuUs(long.before.relay, long.after.relay), longCounts.relay.frames, shortCpu.relay, shortCounts.relay.frames),
    wakeupsPerChunkPacedSequential: wakeupsPer(long.before.gateway, long.after.gateway, longCounts.gateway.frames),
    relayWakeupsPerChunkPacedSequential: wakeupsPer(long.before.relay, long.after.relay, longCounts.relay.frames),
    framesPerShortStream: shortCounts.gateway.frames / plan.gapStreams,
    busy: { gateway: gwBusy, relay: relayBusy },
  };
}
