/**
 * What every phase sends and how it reads the processes' counters: the models, the request
 * bodies (the gateway's with the `local/` prefix, the direct call's without), the keys, the
 * rotating order of the sides, and the CPU, wake-up and frame arithmetic over their stats.
 */
import type { StreamTiming, Target } from '../load';
import type { GatewayStats } from '../protocol';
import type { FrameCounts } from '../report';

export const TABLE_PREFIX = 'bench-';
export const MODEL_SHORT = 'sim-small';
export const MODEL_PACED = 'sim-large';
const MAX_TOKENS = 64;

/** A seeded workspace and its key. */
export interface Caller {
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

/** One request's body for the gateway and for the direct call (and the relay). */
export interface Bodies {
  readonly gateway: Buffer;
  readonly direct: Buffer;
}

/** The gateway's and the direct call's body for one request. */
export function bodies(model: string, stream: boolean, maxTokens = MAX_TOKENS): Bodies {
  return { gateway: chatBody(`local/${model}`, stream, maxTokens), direct: chatBody(model, stream, maxTokens) };
}

/** The bearer header for a raw key. */
export function authHeaders(key: string): Record<string, string> {
  return { authorization: `Bearer ${key}` };
}

/** Throws unless the side answered 200: a failed request is never a sample. */
export function expectOk(t: { status: number }, what: string): void {
  if (t.status !== 200) throw new Error(`${what} answered ${t.status}`);
}

/** The bodies and keys the sequential phases send, for the first seeded caller. */
export interface Requests {
  readonly short: Bodies;
  readonly shortStream: Bodies;
  readonly paced: Bodies;
  readonly firstKey: Record<string, string>;
  /** The direct side and the relay get an authorization header too, so every request carries the same bytes. */
  readonly directKey: Record<string, string>;
  bodyFor(t: Target, b: Bodies): Buffer;
  keyFor(t: Target): Record<string, string>;
}

/** The bodies and keys for `first`, the caller of the sequential phases. */
export function requestsFor(first: Caller): Requests {
  const firstKey = authHeaders(first.rawKey);
  const directKey = authHeaders(first.rawKey);
  return {
    short: bodies(MODEL_SHORT, false),
    shortStream: bodies(MODEL_SHORT, true),
    paced: bodies(MODEL_PACED, true),
    firstKey,
    directKey,
    bodyFor: (t, b) => (t.name === 'gateway' ? b.gateway : b.direct),
    keyFor: (t) => (t.name === 'gateway' ? firstKey : directKey),
  };
}

/** The sides in a rotating order, so none always runs first. */
export function rotation<T>(items: readonly T[], i: number): T[] {
  return items.map((_, k) => items[(i + k) % items.length] as T);
}

/** CPU (user + system) a process spent between two stats, microseconds. */
export function cpuUs(a: GatewayStats, b: GatewayStats): number {
  return b.cpuUserUs - a.cpuUserUs + (b.cpuSystemUs - a.cpuSystemUs);
}

/** Main-thread wake-ups between two stats, per frame; NaN when the process cannot tell. */
export function wakeupsPer(a: GatewayStats, b: GatewayStats, frames: number): number {
  return a.wakeups < 0 || b.wakeups < 0 ? Number.NaN : (b.wakeups - a.wakeups) / Math.max(1, frames);
}

/** The process's store round trips so far, ledger and lookups. */
export function totalTrips(s: GatewayStats): number {
  return s.trips.ledger + s.trips.lookups;
}

/** Frames and reads over several streams of one side. */
export class StreamCounts {
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
