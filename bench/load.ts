/**
 * The load generator: plain node:http with keep-alive agents, so every figure is one request's
 * own time with no client library in between. Requests are bounded by a timeout; closed-loop
 * runs are bounded by a duration.
 */
import http from 'node:http';
import { performance } from 'node:perf_hooks';

/** One side of a comparison: where to send and how. */
export interface Target {
  readonly name: 'gateway' | 'direct' | 'relay';
  readonly host: string;
  readonly port: number;
  /** Path of the chat endpoint, e.g. `/v1/chat/completions`. */
  readonly path: string;
  readonly agent: http.Agent;
}

/** What one non-streamed exchange took, in milliseconds from the request's start. */
export interface Timing {
  readonly status: number;
  /**
   * When the request was sent, as epoch milliseconds with sub-millisecond precision; also sent
   * as the `x-bench-sent` header, so a process on this machine can time the hop to it.
   */
  readonly sentAt: number;
  /** First body byte. */
  readonly ttfbMs: number;
  readonly totalMs: number;
  readonly bytes: number;
  /** A refusal's body (status 400 and up), its first 2 KiB: the error envelope, to read its code. */
  readonly errorBody?: string;
}

/** A streamed exchange: when each data frame arrived and how frames were grouped into reads. */
export interface StreamTiming extends Timing {
  /** Arrival of each complete `data:` frame (the end marker and comments excluded), ms from start. */
  readonly frameTimes: readonly number[];
  readonly frames: number;
  /** Socket reads that completed more than one data frame. */
  readonly coalescedReads: number;
  readonly maxFramesPerRead: number;
  readonly sawDone: boolean;
  readonly sawUsageComment: boolean;
}

export function targetFrom(name: Target['name'], baseUrl: string, maxSockets: number): Target {
  const url = new URL(baseUrl);
  return {
    name,
    host: url.hostname,
    port: Number(url.port),
    path: `${url.pathname.replace(/\/+$/, '')}/chat/completions`,
    agent: new http.Agent({ keepAlive: true, maxSockets, keepAliveMsecs: 30_000 }),
  };
}

class RequestTimeoutError extends Error {
  override readonly name = 'RequestTimeoutError';
}

/** The first bytes of a refusal's body (nothing is kept of a 2xx or 3xx reply). */
class RefusalBody {
  private readonly parts: Buffer[] = [];
  private kept = 0;

  constructor(private readonly status: number) {}

  add(chunk: Buffer): void {
    if (this.status < 400 || this.kept >= 2048) return;
    const part = chunk.subarray(0, 2048 - this.kept);
    this.parts.push(part);
    this.kept += part.length;
  }

  field(): { errorBody?: string } {
    return this.status < 400 ? {} : { errorBody: Buffer.concat(this.parts).toString('utf8') };
  }
}

/** The header carrying {@link Timing.sentAt}. */
export const SENT_HEADER = 'x-bench-sent';

function open(
  target: Target,
  body: Buffer,
  headers: Readonly<Record<string, string>>,
  timeoutMs: number,
  onResponse: (res: http.IncomingMessage, start: number, sentAt: number, done: (err?: Error) => void) => void,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let settled = false;
    const finish = (err?: Error): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (err === undefined) resolve();
      else reject(err);
    };
    const start = performance.now();
    const sentAt = performance.timeOrigin + start;
    const req = http.request(
      {
        host: target.host,
        port: target.port,
        path: target.path,
        method: 'POST',
        agent: target.agent,
        headers: { 'content-type': 'application/json', 'content-length': String(body.length), [SENT_HEADER]: sentAt.toFixed(3), ...headers },
      },
      (res) => onResponse(res, start, sentAt, finish),
    );
    const timer = setTimeout(() => {
      req.destroy(new RequestTimeoutError(`${target.name} request timed out after ${timeoutMs} ms`));
    }, timeoutMs);
    req.on('error', (err) => finish(err));
    req.setNoDelay(true);
    req.end(body);
  });
}

/** One non-streamed POST, read to its end. */
export async function post(target: Target, body: Buffer, headers: Readonly<Record<string, string>>, timeoutMs = 30_000): Promise<Timing> {
  let timing: Timing | undefined;
  await open(target, body, headers, timeoutMs, (res, start, sentAt, done) => {
    let ttfbMs = -1;
    let bytes = 0;
    const refusal = new RefusalBody(res.statusCode ?? 0);
    res.on('data', (chunk: Buffer) => {
      if (ttfbMs < 0) ttfbMs = performance.now() - start;
      bytes += chunk.length;
      refusal.add(chunk);
    });
    res.on('end', () => {
      const totalMs = performance.now() - start;
      timing = { status: res.statusCode ?? 0, sentAt, ttfbMs: ttfbMs < 0 ? totalMs : ttfbMs, totalMs, bytes, ...refusal.field() };
      done();
    });
    res.on('error', (err) => done(err));
  });
  if (timing === undefined) throw new Error('no response');
  return timing;
}

const FRAME_END = Buffer.from('\n\n');
const DATA = Buffer.from('data: ');
const DONE = Buffer.from('data: [DONE]');
const USAGE_COMMENT = Buffer.from(':x-sluice-usage');

/**
 * One streamed POST. Frames are found by their blank-line terminator as the bytes arrive; with
 * `keepTimes` false only counts are kept (a 100 MB reply).
 */
export async function postStream(
  target: Target,
  body: Buffer,
  headers: Readonly<Record<string, string>>,
  options: { readonly timeoutMs?: number; readonly keepTimes?: boolean } = {},
): Promise<StreamTiming> {
  const keepTimes = options.keepTimes ?? true;
  let timing: StreamTiming | undefined;
  await open(target, body, headers, options.timeoutMs ?? 60_000, (res, start, sentAt, done) => {
    let ttfbMs = -1;
    let bytes = 0;
    let pending: Buffer = Buffer.alloc(0);
    const frameTimes: number[] = [];
    let frames = 0;
    let coalescedReads = 0;
    let maxFramesPerRead = 0;
    let sawDone = false;
    let sawUsageComment = false;
    const refusal = new RefusalBody(res.statusCode ?? 0);
    res.on('data', (chunk: Buffer) => {
      const now = performance.now() - start;
      if (ttfbMs < 0) ttfbMs = now;
      bytes += chunk.length;
      refusal.add(chunk);
      const buf = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      let from = 0;
      let inRead = 0;
      for (;;) {
        const end = buf.indexOf(FRAME_END, from);
        if (end === -1) break;
        const frame = buf.subarray(from, end);
        from = end + 2;
        if (frame.subarray(0, DONE.length).equals(DONE)) sawDone = true;
        else if (frame.subarray(0, USAGE_COMMENT.length).equals(USAGE_COMMENT)) sawUsageComment = true;
        else if (frame.subarray(0, DATA.length).equals(DATA)) {
          frames += 1;
          inRead += 1;
          if (keepTimes) frameTimes.push(now);
        }
      }
      pending = from === buf.length ? Buffer.alloc(0) : Buffer.from(buf.subarray(from));
      if (inRead > 1) coalescedReads += 1;
      maxFramesPerRead = Math.max(maxFramesPerRead, inRead);
    });
    res.on('end', () => {
      const totalMs = performance.now() - start;
      timing = {
        status: res.statusCode ?? 0,
        sentAt,
        ttfbMs: ttfbMs < 0 ? totalMs : ttfbMs,
        totalMs,
        bytes,
        frameTimes,
        frames,
        coalescedReads,
        maxFramesPerRead,
        sawDone,
        sawUsageComment,
        ...refusal.field(),
      };
      done();
    });
    res.on('error', (err) => done(err));
  });
  if (timing === undefined) throw new Error('no response');
  return timing;
}

/** What a closed-loop run measured. */
export interface LoadResult {
  readonly concurrency: number;
  readonly elapsedMs: number;
  readonly ok: number;
  readonly failed: number;
  readonly latenciesMs: number[];
  readonly firstError?: string;
}

/**
 * `concurrency` workers, each sending its next request as soon as the previous one ended, until
 * `durationMs` has passed (requests in flight then are waited for, and counted).
 */
export async function closedLoop(concurrency: number, durationMs: number, request: (worker: number) => Promise<Timing>): Promise<LoadResult> {
  const latenciesMs: number[] = [];
  let ok = 0;
  let failed = 0;
  let firstError: string | undefined;
  const start = performance.now();
  const deadline = start + durationMs;
  const worker = async (w: number): Promise<void> => {
    while (performance.now() < deadline) {
      try {
        const t = await request(w);
        if (t.status === 200) {
          ok += 1;
          latenciesMs.push(t.totalMs);
        } else {
          failed += 1;
          firstError ??= `status ${t.status}`;
        }
      } catch (err) {
        failed += 1;
        firstError ??= err instanceof Error ? err.message : String(err);
        // A refused connection fails at once: do not spin.
        await new Promise((r) => setTimeout(r, 10));
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)));
  return { concurrency, elapsedMs: performance.now() - start, ok, failed, latenciesMs, ...(firstError === undefined ? {} : { firstError }) };
}
