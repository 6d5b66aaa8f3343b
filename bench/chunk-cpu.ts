/**
 * CPU per streamed chunk with the process kept busy: many paced streams in flight at once.
 *
 * Why not one stream at a time: on a virtual machine a Node process that merely sleeps and wakes
 * pays for each wake-up (on the 2-vCPU Firecracker VM this was written on, a bare loop of
 * `await setTimeout(1)` costs about 70 us of CPU per turn with no work at all). One paced stream
 * at a time wakes the process once per chunk, so its per-chunk figure is mostly that tax, the
 * machine's and not the code's. With tens of streams in flight the process rarely sleeps (the
 * main thread's wake-ups per frame are reported: about 1 one stream at a time, a few hundredths
 * here), and what a chunk adds is what the code does with it.
 *
 * How: the same number of streams twice at the same concurrency, once long and once very short;
 * the difference in the process's own CPU (`process.cpuUsage()` in that process, reported over
 * IPC) divided by the difference in data frames the client received is the cost of one more
 * chunk, with every per-stream cost (admission, settlement, headers) cancelled out. The bare
 * relay runs the same phases as the control. The streams are long because a stream's fixed cost
 * varies by a millisecond or so from run to run, which long streams spread over more frames.
 */
import { performance } from 'node:perf_hooks';
import type { StreamTiming } from './load';
import type { GatewayProcess, SimulatorProcess } from './processes';
import type { GatewayStats } from './protocol';

/** How the busy phases are run. */
export interface BusyPlan {
  /** Streams in flight at once. */
  readonly concurrency: number;
  /** Streams per phase (each worker runs `streams / concurrency` in turn). */
  readonly streams: number;
  /** Output tokens of a long stream (one data frame each, plus the role and finish frames). */
  readonly tokens: number;
  /** Output tokens of a short stream: the per-stream cost with next to no chunks. */
  readonly shortTokens: number;
  /** The upstream's pause between frames. */
  readonly delayMs: number;
}

/** One phase: a number of streams of one length, `concurrency` at a time. */
export interface BusyPhase {
  readonly streams: number;
  /** Data frames the client received over the phase. */
  readonly frames: number;
  /** The process's CPU (user + system) over the phase, microseconds. */
  readonly cpuUs: number;
  /** The kernel's part of it (loopback TCP is charged to the sender). */
  readonly systemUs: number;
  readonly elapsedMs: number;
  /** Client socket reads that completed more than one data frame. */
  readonly coalescedReads: number;
  /** The process's main-thread wake-ups over the phase (-1 when unknown): see `wakeups.ts`. */
  readonly wakeups: number;
}

/** The busy-process figures of one process (the gateway or the bare relay). */
export interface BusyChunkCpu {
  readonly concurrency: number;
  readonly long: BusyPhase;
  readonly short: BusyPhase;
  /** (long CPU - short CPU) / (long frames - short frames): the CPU one more chunk costs. */
  readonly perChunkUs: number;
  /** A stream's fixed cost: the short phase's CPU less its chunks, per stream. */
  readonly perStreamFixedUs: number;
  /** Long-phase CPU over its frames, fixed costs included: an upper bound, for reference. */
  readonly perFrameAllInUs: number;
}

/** What the busy phases need from the run: the process, the simulator and one stream request. */
export interface BusySide {
  /** For messages: `gateway` or `relay`. */
  readonly name: string;
  readonly proc: GatewayProcess;
  readonly sim: SimulatorProcess;
  /** The model the simulator is scripted for. */
  readonly model: string;
  /** Sends stream `i` (any caller; `maxTokens` is the request's ceiling). */
  readonly stream: (i: number, maxTokens: number) => Promise<StreamTiming>;
}

/** Runs the long and the short phase on one side and derives its per-chunk cost. */
export async function busyChunkCpu(side: BusySide, plan: BusyPlan): Promise<BusyChunkCpu> {
  const long = await phase(side, plan, plan.tokens);
  const short = await phase(side, plan, plan.shortTokens);
  const perChunkUs = (long.cpuUs - short.cpuUs) / Math.max(1, long.frames - short.frames);
  return {
    concurrency: plan.concurrency,
    long,
    short,
    perChunkUs,
    perStreamFixedUs: (short.cpuUs - perChunkUs * short.frames) / Math.max(1, short.streams),
    perFrameAllInUs: long.cpuUs / Math.max(1, long.frames),
  };
}

async function phase(side: BusySide, plan: BusyPlan, tokens: number): Promise<BusyPhase> {
  // Every stream of the phase gets the same behaviour, whichever order they arrive in; the
  // request's ceiling equals the tokens, so the hold covers them and no extension happens.
  await side.sim.control('/_sim/script', {
    model: side.model,
    behaviors: Array.from({ length: plan.streams }, () => ({ kind: 'ok', completionTokens: tokens, chunkDelayMs: plan.delayMs })),
  });
  let next = 0;
  let frames = 0;
  let coalescedReads = 0;
  const worker = async (): Promise<void> => {
    for (let i = next++; i < plan.streams; i = next++) {
      const r = await side.stream(i, tokens);
      if (r.status !== 200) throw new Error(`a busy-phase stream (${side.name}) answered ${r.status}`);
      if (!r.sawDone) throw new Error(`a busy-phase stream (${side.name}) ended without [DONE]`);
      frames += r.frames;
      coalescedReads += r.coalescedReads;
    }
  };
  const a = await side.proc.idle();
  const t0 = performance.now();
  await Promise.all(Array.from({ length: plan.concurrency }, worker));
  const elapsedMs = performance.now() - t0;
  const b = await side.proc.idle();
  const wakeups = a.wakeups < 0 || b.wakeups < 0 ? -1 : b.wakeups - a.wakeups;
  return { streams: plan.streams, frames, cpuUs: cpuUs(a, b), systemUs: b.cpuSystemUs - a.cpuSystemUs, elapsedMs, coalescedReads, wakeups };
}

function cpuUs(a: GatewayStats, b: GatewayStats): number {
  return b.cpuUserUs - a.cpuUserUs + (b.cpuSystemUs - a.cpuSystemUs);
}
