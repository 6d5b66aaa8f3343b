/**
 * Messages between the benchmark and its gateway process (Node IPC, outside the gateway's /v1
 * surface). The gateway process reports its own CPU time, memory and DynamoDB round trips, so
 * the figures are the gateway's alone, not the load generator's or the simulator's.
 */

/**
 * DynamoDB round trips of the gateway, cumulative since start, counted by `bench/round-trips.ts`:
 * the ledger's (ledger, holds, usage tables) and the lookups (keys, workspaces, catalog).
 */
export interface RoundTrips {
  readonly ledger: number;
  readonly lookups: number;
}

/**
 * Round trips of one request, split at the gateway's first byte to the client and at the end of
 * the reply: `before` everything up to the first write, `during` between the first write and
 * `end()`, `after` once the reply ended (settlement). Recorded only while recording is on, which
 * the benchmark switches on for sequential phases, where requests cannot mix.
 */
export interface TripSample {
  readonly ledgerBefore: number;
  readonly lookupsBefore: number;
  /**
   * The ledger calls made before the first byte, in order, by DynamoDB operation and how each
   * ended (`bench/round-trips.ts`'s `callName`), so an extra round trip is named in the report.
   */
  readonly ledgerCallsBefore: readonly string[];
  readonly during: number;
  readonly after: number;
  /** Whether the reply was an SSE stream. */
  readonly stream: boolean;
  readonly status: number;
  /** Where the invocation's time went, milliseconds, measured inside the gateway process. */
  readonly phases: Phases;
  /** The client's `x-bench-sent` header (epoch ms), pairing this sample with the client's timing. */
  readonly sentAt: number;
  /** Epoch ms (sub-millisecond) at the handler's start, first byte and end of reply; -1 if never. */
  readonly startAt: number;
  readonly firstByteAt: number;
  readonly endAt: number;
}

/**
 * One invocation's timeline, split at: the admission transaction's start and end, the upstream
 * call's start and its response headers, the first byte and the end of the reply, and the
 * invocation's return (settlement done). Milliseconds; -1 where a point was never reached.
 */
export interface Phases {
  /** Handler start to the admission call: key, route, body, model, pricing. */
  readonly beforeAdmit: number;
  /** The admission transaction, as the gateway's SDK client sees it. */
  readonly admit: number;
  /** Admission done to the upstream call. */
  readonly beforeUpstream: number;
  /** Upstream call to its response headers. */
  readonly upstream: number;
  /** Upstream headers to the first byte written to the client. */
  readonly toFirstByte: number;
  /** First byte to the end of the reply. */
  readonly toEnd: number;
  /** End of the reply to the invocation's return: settlement. */
  readonly settle: number;
}

/** The gateway process's state at one instant. */
export interface GatewayStats {
  /** `process.cpuUsage()`, microseconds, cumulative. */
  readonly cpuUserUs: number;
  readonly cpuSystemUs: number;
  /** The main thread's wake-ups (voluntary context switches), cumulative; -1 off Linux. See `wakeups.ts`. */
  readonly wakeups: number;
  readonly rss: number;
  readonly heapUsed: number;
  readonly external: number;
  readonly arrayBuffers: number;
  /** Peaks since peak tracking was last switched on, sampled every few milliseconds. */
  readonly peakRss: number;
  readonly peakHeapUsed: number;
  readonly peakExternal: number;
  readonly trips: RoundTrips;
  /** Invocations still running (settlement included). */
  readonly inflight: number;
  /** Requests served since start. */
  readonly served: number;
}

export type ToGateway =
  | { readonly type: 'stats'; readonly id: number }
  | { readonly type: 'record'; readonly id: number; readonly on: boolean }
  | { readonly type: 'samples'; readonly id: number }
  | { readonly type: 'peak'; readonly id: number; readonly on: boolean }
  | { readonly type: 'gc'; readonly id: number }
  /** Answered with `stats` once no invocation runs (at once if none does): waiting costs the process no polling. */
  | { readonly type: 'idle'; readonly id: number }
  | { readonly type: 'stop'; readonly id: number };

export type FromGateway =
  /** `node`: the process's `process.version` (the gateway's Node need not be the bench's: `--gateway-node`). */
  | { readonly type: 'ready'; readonly url: string; readonly node?: string }
  | { readonly type: 'stats'; readonly id: number; readonly stats: GatewayStats }
  | { readonly type: 'samples'; readonly id: number; readonly samples: readonly TripSample[] }
  | { readonly type: 'ok'; readonly id: number }
  | { readonly type: 'failed'; readonly message: string };
