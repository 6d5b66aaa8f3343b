/**
 * CPU per stream, one at a time (as a Lambda instance serves them): short unpaced streams to the
 * gateway, then to the bare relay, each process's CPU over the phase divided by the streams. A
 * stream's fixed CPU (its setup, admission, settlement, usage line, log line and teardown) is
 * that less its frames at the busy per-chunk figure (`chunk-cpu.ts`), which `run.ts` applies once
 * both are known: see {@link fixedPerStream}.
 */
import type { Plan } from '../args';
import { postStream } from '../load';
import type { GatewayProcess } from '../processes';
import { log, type Stack } from '../stack';
import { cpuUs, expectOk, StreamCounts } from './requests';
import type { Target } from '../load';

export interface StreamCpu {
  /** The gateway's CPU per short stream (c=1), µs, and the frames each carried. */
  readonly perStreamUs: number;
  readonly framesPerStream: number;
  /** The bare relay's, the control. */
  readonly relayPerStreamUs: number;
  readonly relayFramesPerStream: number;
}

async function sequentialStreams(proc: GatewayProcess, t: Target, n: number, body: Buffer, headers: Record<string, string>): Promise<{ perStreamUs: number; frames: number }> {
  const counts = new StreamCounts();
  const a = await proc.idle();
  for (let i = 0; i < n; i += 1) {
    const r = await postStream(t, body, headers);
    expectOk(r, `${t.name} stream`);
    if (!r.sawDone) throw new Error(`a ${t.name} stream ended without [DONE]`);
    counts.add(r);
  }
  const b = await proc.idle();
  return { perStreamUs: cpuUs(a, b) / n, frames: counts.frames / n };
}

/** `plan.cpuRequests` short streams to the gateway, then to the bare relay, one at a time. */
export async function streamCpu(stack: Stack, plan: Plan): Promise<StreamCpu> {
  const { shortStream, firstKey, directKey } = stack.requests;
  log(`CPU per stream (${plan.cpuRequests} sequential short streams to the gateway, then to the bare relay)`);
  const gateway = await sequentialStreams(stack.gw, stack.gwT, plan.cpuRequests, shortStream.gateway, firstKey);
  const relay = await sequentialStreams(stack.relay, stack.relayT, plan.cpuRequests, shortStream.direct, directKey);
  return { perStreamUs: gateway.perStreamUs, framesPerStream: gateway.frames, relayPerStreamUs: relay.perStreamUs, relayFramesPerStream: relay.frames };
}

/** A stream's fixed CPU: its whole CPU less its frames at `perChunkUs`. */
export function fixedPerStream(perStreamUs: number, frames: number, perChunkUs: number): number {
  return perStreamUs - frames * perChunkUs;
}
