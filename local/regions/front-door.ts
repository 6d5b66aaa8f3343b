/**
 * The local front door: one address for clients in front of every region's gateway, as the
 * deployed front door is one CloudFront domain in front of every region's Function URL
 * (docs/regions.md, "The front door"). It decides the way the deployed one does:
 *
 * - **Health is probed, not guessed.** Every region's gateway is asked `GET /v1/models` (with the
 *   probe key, when one is given) every `intervalMs`; `failures` failed probes in a row (no answer
 *   within `timeoutMs`, or a 5xx) mark it down, `successes` good ones up again. Deployed, the
 *   warden function does this and writes the flags to a CloudFront KeyValueStore.
 * - **Each request goes to a healthy region**, chosen before it is sent: the first healthy one in
 *   the configured order (`ordered`), or one picked by the client's connection (`spread`, as a
 *   viewer hash spreads clients deployed). With none healthy it fails open to the configured
 *   order. Deployed, a CloudFront Function reads the flags and selects the origin.
 * - **Only GET, HEAD and OPTIONS are retried on another region** when the chosen one refuses the
 *   connection, times out, or answers 500, 502, 503 or 504 (CloudFront's origin failover does
 *   the same, for those methods only). A POST is never sent twice: a region that fails one is
 *   answered with 502 (no answer) or 504 (timed out), and the client retries it (the OpenAI SDKs
 *   retry 5xx), by which time the probes have moved traffic.
 * - **Bodies stream both ways**: the request body is piped to the region, the reply relayed
 *   chunk by chunk as it arrives (Nagle off, headers flushed at once), the origin's silence
 *   bounded by `originTimeoutMs` between bytes (CloudFront's response timeout). A client that goes
 *   away ends the request to the region.
 *
 * So a region that dies is out of the rotation within `intervalMs × failures + timeoutMs` (the
 * defaults: 1 s × 3 + 1 s = 4 s), well inside the 30 s the issue asks for; options that would
 * exceed 30 s are refused.
 */
import { randomUUID } from 'node:crypto';
import { type IncomingHttpHeaders, type IncomingMessage, request, type Server, type ServerResponse, createServer } from 'node:http';
import { listenOn } from '../listen';

/** One region behind the front door: a name and its gateway's base URL (`http://127.0.0.1:<port>`). */
export interface FrontDoorRegion {
  readonly name: string;
  readonly url: string;
}

/** How the front door probes the regions. */
export interface HealthCheckOptions {
  /** @default '/v1/models' */
  readonly path?: string;
  /** Sent with every probe, e.g. `{ authorization: 'Bearer <probe key>' }`. @default none */
  readonly headers?: Readonly<Record<string, string>>;
  /** @default 1000 */
  readonly intervalMs?: number;
  /** @default 1000 */
  readonly timeoutMs?: number;
  /** Failed probes in a row that mark a region down. @default 3 */
  readonly failures?: number;
  /** Good probes in a row that mark a region up again. @default 2 */
  readonly successes?: number;
}

/** Options for {@link startFrontDoor}. */
export interface FrontDoorOptions {
  /** The regions, in order of preference. */
  readonly regions: readonly FrontDoorRegion[];
  /** @default 127.0.0.1 (loopback only) */
  readonly host?: string;
  /** @default 0 (any free port) */
  readonly port?: number;
  /** @default 'ordered' */
  readonly routing?: Routing;
  readonly health?: HealthCheckOptions;
  /** Longest silence from a region, before its first byte or between two, milliseconds. @default 120000 */
  readonly originTimeoutMs?: number;
  /** Called when a region goes down or comes back. */
  readonly onHealthChange?: (region: string, health: RegionHealth) => void;
  /** @default console.error */
  readonly log?: (message: string) => void;
}

/** `ordered`: the first healthy region in the configured order; `spread`: one per client connection. */
export type Routing = 'ordered' | 'spread';

/** What the probes say of one region. */
export interface RegionHealth {
  readonly healthy: boolean;
  /** Failed probes in a row (0 after a good one). */
  readonly failures: number;
  /** Good probes in a row (0 after a failed one). */
  readonly successes: number;
  /** Probes made so far. */
  readonly probes: number;
  /** Why the last failed probe failed. */
  readonly lastError?: string;
}

/** A running front door. */
export interface FrontDoor {
  /** `http://127.0.0.1:<port>`; clients use `<url>/v1`. */
  readonly url: string;
  readonly port: number;
  /** The probes' view of every region. */
  health(): Record<string, RegionHealth>;
  /** Stops probing and listening; ends open connections. */
  close(): Promise<void>;
}

/** The issue's bound: a region's loss must reroute requests within this. */
export const REROUTE_BOUND_MS = 30_000;

/** Methods CloudFront's origin failover retries on the next origin. */
export const FAILOVER_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Statuses that send a GET, HEAD or OPTIONS on to the next region (CloudFront's failover codes). */
export const FAILOVER_STATUSES: ReadonlySet<number> = new Set([500, 502, 503, 504]);

const DEFAULT_HEALTH: Required<Omit<HealthCheckOptions, 'headers'>> = {
  path: '/v1/models',
  intervalMs: 1_000,
  timeoutMs: 1_000,
  failures: 3,
  successes: 2,
};

/** The longest a dead region can keep receiving new requests: every probe to fail, the last one timing out. */
export function rerouteBoundMs(health: HealthCheckOptions = {}): number {
  const h = { ...DEFAULT_HEALTH, ...health };
  return h.intervalMs * h.failures + h.timeoutMs;
}

/** A region's health after one more probe. Every region starts healthy. */
export function afterProbe(
  health: RegionHealth,
  ok: boolean,
  thresholds: { readonly failures: number; readonly successes: number },
  error?: string,
): RegionHealth {
  const probes = health.probes + 1;
  if (ok) {
    const successes = health.successes + 1;
    return { healthy: health.healthy || successes >= thresholds.successes, failures: 0, successes, probes };
  }
  const failures = health.failures + 1;
  return { healthy: health.healthy && failures < thresholds.failures, failures, successes: 0, probes, lastError: error };
}

/**
 * The regions to try for one request, in order: the healthy ones (all of them, failing open, when
 * none is), starting at the first in the configured order (`ordered`) or at the one `affinity`
 * hashes to (`spread`).
 */
export function regionsFor(
  order: readonly string[],
  health: Readonly<Record<string, RegionHealth>>,
  routing: Routing,
  affinity: string,
): string[] {
  const healthy = order.filter((name) => health[name]?.healthy !== false);
  const pool = healthy.length > 0 ? healthy : [...order];
  if (routing === 'ordered' || pool.length < 2) return pool;
  const start = hash(affinity) % pool.length;
  return [...pool.slice(start), ...pool.slice(0, start)];
}

function hash(text: string): number {
  let h = 2166136261;
  for (let i = 0; i < text.length; i += 1) h = Math.imul(h ^ text.charCodeAt(i), 16777619) >>> 0;
  return h;
}

/** Headers that belong to one connection and are never forwarded (RFC 9110 7.6.1). */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

/** A GET, HEAD or OPTIONS declaring a body larger than this is sent once, streamed, and not retried. */
const RETRY_BODY_LIMIT = 1024 * 1024;

/**
 * Starts the front door and its probes.
 *
 * @throws RangeError when the probes could leave a dead region in rotation longer than 30 s, or a region is named twice.
 */
export async function startFrontDoor(options: FrontDoorOptions): Promise<FrontDoor> {
  const log = options.log ?? ((message: string) => console.error(message));
  const names = options.regions.map((r) => r.name);
  if (names.length === 0 || new Set(names).size !== names.length) throw new RangeError(`the front door needs distinct regions, got ${JSON.stringify(names)}`);
  const checks = { ...DEFAULT_HEALTH, ...options.health };
  if (rerouteBoundMs(checks) > REROUTE_BOUND_MS) {
    throw new RangeError(`probes every ${checks.intervalMs} ms, ${checks.failures} failures to go down and a ${checks.timeoutMs} ms timeout could leave a dead region in rotation longer than ${REROUTE_BOUND_MS} ms`);
  }
  const routing = options.routing ?? 'ordered';
  const originTimeoutMs = options.originTimeoutMs ?? 120_000;
  // A new connection per request (loopback: cheap). A pooled one the region closed while idle
  // would fail the next POST sent on it, which must not be sent twice.
  const targets = new Map(options.regions.map((r) => [r.name, { url: new URL(r.url) }]));
  const health: Record<string, RegionHealth> = Object.fromEntries(names.map((n) => [n, { healthy: true, failures: 0, successes: 0, probes: 0 }]));

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      log(`[front door] ${req.method} ${req.url}: ${err instanceof Error ? err.message : String(err)}`);
      if (!res.headersSent) refuse(res, 502, 'The front door could not reach a region.');
      else res.destroy();
    });
  });
  server.on('connection', (socket) => socket.setNoDelay(true));
  const listening = await listenOn(server, options.port ?? 0, options.host ?? '127.0.0.1');

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const method = req.method ?? 'GET';
    const affinity = `${req.socket.remoteAddress ?? ''}:${req.socket.remotePort ?? ''}`;
    const order = regionsFor(names, health, routing, affinity);
    let body: Buffer | undefined;
    let retryable = FAILOVER_METHODS.has(method) && order.length > 1;
    if (retryable) {
      body = await readSmallBody(req);
      if (body === undefined) retryable = false; // too large to hold: sent once, streamed
    }
    for (let i = 0; i < order.length; i += 1) {
      const region = order[i] as string;
      const last = !retryable || i === order.length - 1;
      const outcome = await forward(region, req, res, body, last);
      if (outcome === 'done') return;
    }
  }

  /**
   * Sends the request to one region and relays its answer. Resolves 'next' when the answer is a
   * failure that another region may be asked (never after a byte reached the client).
   */
  function forward(region: string, req: IncomingMessage, res: ServerResponse, body: Buffer | undefined, last: boolean): Promise<'done' | 'next'> {
    const target = targets.get(region);
    if (target === undefined) throw new Error(`no region ${region}`);
    return new Promise((resolve) => {
      let settled = false;
      const finish = (outcome: 'done' | 'next'): void => {
        if (settled) return;
        settled = true;
        resolve(outcome);
      };
      const headers = forwardedHeaders(req.headers, target.url, req.socket.remoteAddress);
      if (body !== undefined) headers['content-length'] = String(body.length);
      const upstream = request(
        {
          protocol: target.url.protocol,
          hostname: target.url.hostname,
          port: target.url.port,
          method: req.method,
          path: req.url,
          headers,
          agent: false,
        },
        (answer) => {
          const status = answer.statusCode ?? 502;
          if (!last && FAILOVER_STATUSES.has(status)) {
            answer.resume();
            finish('next');
            return;
          }
          res.writeHead(status, relayedHeaders(answer.headers, region));
          res.flushHeaders();
          answer.pipe(res);
          answer.on('error', () => res.destroy());
          answer.on('end', () => finish('done'));
          answer.on('aborted', () => res.destroy());
        },
      );
      upstream.setTimeout(originTimeoutMs, () => upstream.destroy(new OriginTimeoutError(region)));
      upstream.on('error', (err) => {
        if (res.headersSent) {
          // Mid-reply: the client sees its connection end, as it would through CloudFront.
          res.destroy();
          finish('done');
        } else if (!last) {
          finish('next');
        } else {
          const timedOut = err instanceof OriginTimeoutError;
          refuse(res, timedOut ? 504 : 502, timedOut ? `Region ${region} did not answer in time.` : `Region ${region} could not be reached.`);
          finish('done');
        }
      });
      // A client that leaves ends the request to the region (the region settles on its own).
      res.on('close', () => {
        if (!res.writableFinished) upstream.destroy();
        finish('done');
      });
      if (body !== undefined) upstream.end(body);
      else req.pipe(upstream);
    });
  }

  let stopped = false;
  const timers = new Set<NodeJS.Timeout>();
  async function probe(name: string): Promise<void> {
    const target = targets.get(name);
    if (target === undefined || stopped) return;
    const { ok, error } = await new Promise<{ ok: boolean; error?: string }>((resolve) => {
      const probeReq = request(
        {
          protocol: target.url.protocol,
          hostname: target.url.hostname,
          port: target.url.port,
          method: 'GET',
          path: checks.path,
          headers: { ...options.health?.headers, 'user-agent': 'sluice-front-door-probe' },
          agent: false,
        },
        (answer) => {
          answer.resume();
          const status = answer.statusCode ?? 0;
          resolve(status >= 200 && status < 500 ? { ok: true } : { ok: false, error: `status ${status}` });
        },
      );
      probeReq.setTimeout(checks.timeoutMs, () => probeReq.destroy(new Error(`no answer in ${checks.timeoutMs} ms`)));
      probeReq.on('error', (err) => resolve({ ok: false, error: err.message }));
      probeReq.end();
    });
    if (stopped) return;
    const before = health[name] as RegionHealth;
    const after = afterProbe(before, ok, checks, error);
    health[name] = after;
    if (after.healthy !== before.healthy) {
      log(`[front door] region ${name} is ${after.healthy ? 'back up' : `down (${after.lastError ?? 'failed'})`} after ${after.probes} probes`);
      options.onHealthChange?.(name, after);
    }
  }
  const schedule = (name: string): void => {
    if (stopped) return;
    const timer = setTimeout(() => {
      timers.delete(timer);
      void probe(name).finally(() => schedule(name));
    }, checks.intervalMs);
    timers.add(timer);
  };
  for (const name of names) schedule(name);

  let closing: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${listening.port}`,
    port: listening.port,
    health: () => ({ ...health }),
    close: () =>
      (closing ??= (async () => {
        stopped = true;
        for (const timer of timers) clearTimeout(timer);
        await listening.close();
      })()),
  };
}

class OriginTimeoutError extends Error {
  override readonly name = 'OriginTimeoutError';
  constructor(region: string) {
    super(`region ${region} was silent too long`);
  }
}

/** The client's headers for the region: hop-by-hop ones dropped, Host the region's own (a Function URL routes by it). */
function forwardedHeaders(incoming: IncomingHttpHeaders, target: URL, clientAddress: string | undefined): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined || HOP_BY_HOP.has(name) || name === 'host') continue;
    out[name] = value;
  }
  out.host = target.host;
  const forwardedFor = incoming['x-forwarded-for'];
  const prior = Array.isArray(forwardedFor) ? forwardedFor.join(', ') : forwardedFor;
  if (clientAddress !== undefined) out['x-forwarded-for'] = prior === undefined ? clientAddress : `${prior}, ${clientAddress}`;
  return out;
}

/** The region's headers for the client, hop-by-hop ones dropped, with the region that answered. */
function relayedHeaders(incoming: IncomingHttpHeaders, region: string): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined || HOP_BY_HOP.has(name)) continue;
    out[name] = value;
  }
  out['x-sluice-region'] ??= region;
  return out;
}

/** Reads a body to be sent again; undefined (nothing read) when it declares more than the limit. */
function readSmallBody(req: IncomingMessage): Promise<Buffer | undefined> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (Number.isFinite(declared) && declared > RETRY_BODY_LIMIT) return Promise.resolve(undefined);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks, size)));
    req.on('error', reject);
  });
}

/** The front door's own refusal, in SPEC's envelope (CloudFront's would be its error page). */
function refuse(res: ServerResponse, status: number, message: string): void {
  const requestId = `req_${randomUUID().replace(/-/g, '')}`;
  const body = JSON.stringify({ error: { message, type: 'api_error', param: null, code: null, request_id: requestId } });
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    'x-sluice-request-id': requestId,
    'x-request-id': requestId,
  });
  res.end(body);
}
