/**
 * The benchmark's figures: the shapes of what a run measured (the JSON written at the end is
 * `Results`) and the reductions of raw samples into them. The targets each figure is held to are
 * in `report-targets.ts`, the tables printed at the end in `report-tables.ts`.
 */
import type { Options, Plan } from './args';
import type { Bundles, InitResult } from './bundle';
import type { BusyChunkCpu } from './chunk-cpu';
import type { CostInputs } from './cost-inputs';
import type { Timing } from './load';
import type { OwnCpu } from './own-cpu';
import type { StreamCpu } from './phases/stream-cpu';
import type { ProfileSummary } from './profile-summary';
import type { Phases, TripSample } from './protocol';
import { histogram, summarize, type Summary } from './stats';

export interface Side {
  readonly gateway: Summary;
  readonly direct: Summary;
  /** The bare relay (control): what one plain node:http hop adds on this machine. */
  readonly relay: Summary;
  /** gateway minus direct, at p50 and p99. */
  readonly addedP50: number;
  readonly addedP99: number;
  /** relay minus direct, at p50 and p99. */
  readonly relayAddedP50: number;
  readonly relayAddedP99: number;
}

export function side(gateway: readonly number[], direct: readonly number[], relay: readonly number[]): Side {
  const g = summarize(gateway);
  const d = summarize(direct);
  const r = summarize(relay);
  return { gateway: g, direct: d, relay: r, addedP50: g.p50 - d.p50, addedP99: g.p99 - d.p99, relayAddedP50: r.p50 - d.p50, relayAddedP99: r.p99 - d.p99 };
}

export interface Throughput {
  readonly concurrency: number;
  readonly gateway: { rps: number; ok: number; failed: number; latency: Summary; firstError?: string };
  readonly direct: { rps: number; ok: number; failed: number; latency: Summary; firstError?: string };
  readonly gatewayCpuUsPerRequest: number;
  readonly gatewayTripsPerRequest: number;
}

/**
 * The gateway's timeline with the two hops around it: `inbound` from the client's send to the
 * handler's start (the local HTTP server and the Lambda shim on the way in), `outbound` from
 * the handler's last write to the client's last byte (the shim and the server on the way out).
 * The clocks are the same machine's, read as epoch time with sub-millisecond precision.
 */
export interface Timeline extends Phases {
  readonly inbound: number;
  readonly outbound: number;
}

/** p50 and p99 of each part of the timeline, milliseconds. */
export type PhaseReport = Record<keyof Timeline, { readonly p50: number; readonly p99: number }>;

export const PHASES: readonly (keyof Timeline)[] = ['inbound', 'beforeAdmit', 'admit', 'beforeUpstream', 'upstream', 'toFirstByte', 'toEnd', 'outbound', 'settle'];

/** Pairs the gateway's samples with the client's timings (by the `x-bench-sent` stamp). */
export function phaseReport(samples: readonly TripSample[], timings: readonly Timing[], stream: boolean): PhaseReport {
  const byStamp = new Map(timings.map((t) => [t.sentAt.toFixed(3), t]));
  const rows: Timeline[] = [];
  for (const s of samples) {
    if (s.status !== 200 || s.lookupsBefore !== 0) continue;
    const t = byStamp.get(s.sentAt.toFixed(3));
    if (t === undefined) continue;
    // A stream's outbound hop is timed on its first byte; a body's on its last.
    const outbound = stream ? t.sentAt + t.ttfbMs - s.firstByteAt : t.sentAt + t.totalMs - s.endAt;
    rows.push({ ...s.phases, inbound: s.startAt - s.sentAt, outbound });
  }
  const out: Partial<PhaseReport> = {};
  for (const name of PHASES) {
    const sm = summarize(rows.map((r) => r[name]).filter((v) => v >= 0));
    out[name] = { p50: sm.p50, p99: sm.p99 };
  }
  return out as PhaseReport;
}

export interface TripReport {
  readonly samples: number;
  /** Requests served with every lookup from cache (the warm path). */
  readonly warm: number;
  readonly ledgerBeforeFirstByteOnWarm: { value: number; count: number }[];
  /**
   * The warm requests that did not make exactly one ledger round trip before the first byte,
   * grouped by the calls they made (`TransactWriteItems→TransactionCanceled[BALANCE:…] + …`).
   */
  readonly offTargetBeforeFirstByte: { calls: string; count: number }[];
  readonly lookupsBeforeFirstByte: { value: number; count: number }[];
  readonly during: { value: number; count: number }[];
  readonly afterEnd: { value: number; count: number }[];
  readonly meanTotal: number;
}

/** Samples grouped by the sequence of ledger calls they made before the first byte, most frequent first. */
function callGroups(samples: readonly TripSample[]): { calls: string; count: number }[] {
  const groups = new Map<string, number>();
  for (const s of samples) {
    const calls = (s.ledgerCallsBefore ?? []).join(' + ') || '(none)';
    groups.set(calls, (groups.get(calls) ?? 0) + 1);
  }
  return [...groups.entries()].map(([calls, count]) => ({ calls, count })).sort((a, b) => b.count - a.count);
}

export function tripReport(samples: readonly TripSample[]): TripReport {
  const ok = samples.filter((s) => s.status === 200);
  const warm = ok.filter((s) => s.lookupsBefore === 0);
  const total = ok.reduce((acc, s) => acc + s.ledgerBefore + s.lookupsBefore + s.during + s.after, 0);
  return {
    samples: ok.length,
    warm: warm.length,
    ledgerBeforeFirstByteOnWarm: histogram(warm.map((s) => s.ledgerBefore)),
    offTargetBeforeFirstByte: callGroups(warm.filter((s) => s.ledgerBefore !== 1)),
    lookupsBeforeFirstByte: histogram(ok.map((s) => s.lookupsBefore)),
    during: histogram(ok.map((s) => s.during)),
    afterEnd: histogram(ok.map((s) => s.after)),
    meanTotal: ok.length === 0 ? Number.NaN : total / ok.length,
  };
}

export interface TargetResult {
  readonly name: string;
  readonly figure: string;
  readonly limit: string;
  readonly met: boolean;
}

export const MB = 1024 * 1024;

/** How the frames of the paced streams reached the client. */
export interface FrameCounts {
  readonly streams: number;
  readonly frames: number;
  readonly bytes: number;
  /** Socket reads that completed more than one data frame. */
  readonly coalescedReads: number;
  readonly maxFramesPerRead: number;
}

/** The 100 MiB streamed reply. */
export interface BigStream {
  readonly tokens: number;
  readonly gatewayBytes: number;
  readonly gatewayFrames: number;
  readonly gatewaySeconds: number;
  readonly gatewayMBps: number;
  readonly directBytes: number;
  readonly directSeconds: number;
  readonly directMBps: number;
  readonly sawDone: boolean;
  readonly rssBefore: number;
  readonly peakRss: number;
  readonly rssGrowth: number;
  readonly heapBefore: number;
  readonly peakHeapUsed: number;
  readonly heapGrowth: number;
  readonly externalGrowth: number;
  readonly rssAfterGc: number;
  readonly cpuPerChunkUs: number;
  readonly holdExtensions: readonly { value: number; count: number }[];
}

/** CPU time of the gateway process, and the controls that explain it. Microseconds. */
export interface CpuFigures {
  readonly perNonStreamedRequestUs: number;
  /** The kernel's part of it (loopback TCP is charged to the sender). */
  readonly perNonStreamedRequestSystemUs: number;
  /** The bare relay's CPU per request: what one node:http hop costs on this machine. */
  readonly relayPerRequestUs: number;
  /** Client-side CPU of one TransactWriteItems over DynamoWire, the gateway's client (the floor's calls). */
  readonly wirePerTransactionUs: number;
  /** The same over the AWS SDK v3 DocumentClient (control: what the gateway used before). */
  readonly sdkPerTransactionUs: number;
  /** Client-side CPU of one TransactWriteItems over the SDK's low-level DynamoDBClient, input pre-marshalled (the alternative to DynamoWire). */
  readonly sdkLowLevelPerTransactionUs: number;
  /** Gateway minus bare relay minus two DynamoWire calls (admit, settle): the rest of the process. */
  readonly processRemainderPerRequestUs: number;
  /** CPU this machine charges a Node process to sleep 2 ms and wake, with no work (control). */
  readonly idleWakeupUs: number;
  /** Sluice's own code with its ports in memory (`own-cpu.ts`): no socket, no syscall, no wait. */
  readonly own: OwnCpu;
  /**
   * CPU one more chunk costs with the process kept busy (`busyConcurrency` paced streams in
   * flight; see `chunk-cpu.ts`): the figure the per-chunk target is judged on.
   */
  readonly perChunkBusyUs: number;
  /** The same for the bare relay (control). */
  readonly relayPerChunkBusyUs: number;
  /**
   * A stream's fixed CPU (issue 21's figure): the busy phase's per-stream cost with its chunks
   * taken out (admission, settlement, setup and teardown, the usage and log lines). The relay's is the control.
   */
  readonly fixedPerStreamUs: number;
  readonly relayFixedPerStreamUs: number;
  /** Short unpaced streams one at a time (`phases/stream-cpu.ts`); `fixedUs` less their frames at the busy per-chunk figure. */
  readonly sequentialStream: StreamCpu & { readonly fixedUs: number; readonly relayFixedUs: number };
  readonly busy: { readonly gateway: BusyChunkCpu; readonly relay: BusyChunkCpu };
  /**
   * One paced stream at a time: every chunk wakes an idle process, so on a virtual machine this
   * is mostly the price of a wake-up (the bare relay's figure shows how much), not the code's.
   */
  readonly perChunkPacedSequentialUs: number;
  readonly relayPerChunkPacedSequentialUs: number;
  /** The main thread's wake-ups per frame over those streams (about one: it sleeps between chunks). */
  readonly wakeupsPerChunkPacedSequential: number;
  readonly relayWakeupsPerChunkPacedSequential: number;
  readonly perChunkUnpacedUs: number;
  readonly framesPerLongStream: number;
  readonly framesPerShortStream: number;
}

export interface RunFigures {
  readonly options: Options;
  /** The gateway process's `process.version`. */
  readonly gatewayNode: string;
  readonly plan: Plan;
  readonly bundles: Bundles;
  readonly init: InitResult;
  /** The transaction, measured in turn with the non-streamed requests. */
  readonly floor: Summary;
  /** The transaction, measured in turn with the streams. */
  readonly floorStream: Summary;
  readonly floorCpuUs: Summary;
  readonly txnRetries: readonly number[];
  readonly c1: Side;
  readonly cpu: CpuFigures;
  readonly throughput: readonly Throughput[];
  readonly ttfb: Side;
  readonly gap: Side;
  readonly frames: { readonly gateway: FrameCounts; readonly direct: FrameCounts; readonly relay: FrameCounts };
  readonly nonStreamTrips: TripReport;
  readonly streamTrips: TripReport;
  readonly phases: { readonly nonStreamed: PhaseReport; readonly streamed: PhaseReport };
  readonly big: BigStream;
  readonly gatewayLogLines: number;
  /** What the cost model measures on the running stack (`phases/cost-measures.ts`). */
  readonly costInputs: CostInputs;
  readonly elapsedS: number;
  readonly loadAverageStart: number;
  readonly profile?: ProfileSummary;
}

/** What bench.json holds. */
export interface Results {
  readonly when: string;
  readonly machine: {
    readonly node: string;
    /** The gateway's own Node (`--gateway-node`; else the bench's, `node`). */
    readonly gatewayNode: string;
    readonly cpus: number;
    readonly cpuModel: string;
    readonly platform: string;
    /** 1-minute load averages at the start and the end: other work on the machine skews every figure. */
    readonly loadAverageStart: number;
    readonly loadAverageEnd: number;
  };
  readonly options: Options;
  readonly plan: Plan;
  readonly elapsedSeconds: number;
  readonly units: string;
  readonly floor: {
    /** One TransactWriteItems, in turn with the non-streamed requests. */
    readonly transactWriteItems: Summary;
    /** The same, in turn with the streams. */
    readonly transactWriteItemsStreamPhase: Summary;
    readonly clientCpuUs: Summary;
    readonly retriedTransactions: number;
  };
  readonly nonStreamedC1: Side;
  readonly throughput: readonly Throughput[];
  readonly stream: { readonly ttfb: Side; readonly gapBetweenChunks: Side; readonly frames: RunFigures['frames'] };
  readonly roundTrips: { readonly nonStreamed: TripReport; readonly streamed: TripReport };
  /** Inside the gateway, warm requests of the sequential phases. */
  readonly gatewayTimeline: { readonly nonStreamed: PhaseReport; readonly streamed: PhaseReport };
  readonly cpu: CpuFigures;
  readonly bigStream: BigStream;
  readonly bundle: { readonly handlerBytes: number; readonly sourceMapBytes: number; readonly moduleInit: InitResult };
  readonly gatewayLogLines: number;
  /** The cost model's measured inputs (`cost-inputs.ts` reads them back). */
  readonly costInputs: CostInputs;
  readonly targets: readonly TargetResult[];
  /** With `--profile`: where the gateway process's time went. */
  readonly profile?: ProfileSummary;
}
