/**
 * The benchmark's figures and their report: the shapes of what a run measured, the targets each
 * figure is held to, and the tables printed at the end (the JSON written beside them is `Results`).
 */
import os from 'node:os';
import type { Options, Plan } from './args';
import type { Bundles, InitResult } from './bundle';
import type { BusyChunkCpu, BusyPhase } from './chunk-cpu';
import type { Timing } from './load';
import type { OwnCpu } from './own-cpu';
import type { ProfileSummary } from './profile-summary';
import type { Phases, TripSample } from './protocol';
import { histogram, round, summarize, type Summary } from './stats';

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
  readonly lookupsBeforeFirstByte: { value: number; count: number }[];
  readonly during: { value: number; count: number }[];
  readonly afterEnd: { value: number; count: number }[];
  readonly meanTotal: number;
}

export function tripReport(samples: readonly TripSample[]): TripReport {
  const ok = samples.filter((s) => s.status === 200);
  const warm = ok.filter((s) => s.lookupsBefore === 0);
  const total = ok.reduce((acc, s) => acc + s.ledgerBefore + s.lookupsBefore + s.during + s.after, 0);
  return {
    samples: ok.length,
    warm: warm.length,
    ledgerBeforeFirstByteOnWarm: histogram(warm.map((s) => s.ledgerBefore)),
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
  readonly elapsedS: number;
  readonly loadAverageStart: number;
  readonly profile?: ProfileSummary;
}

/** What bench.json holds. */
export interface Results {
  readonly when: string;
  readonly machine: {
    readonly node: string;
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
  readonly targets: readonly TargetResult[];
  /** With `--profile`: where the gateway process's time went. */
  readonly profile?: ProfileSummary;
}

export function onlyValue(h: readonly { value: number; count: number }[], value: number): boolean {
  return h.length > 0 && h.every((e) => e.value === value);
}

export function fmtHist(h: readonly { value: number; count: number }[]): string {
  return h.map((e) => `${e.value}:${e.count}`).join(' ');
}

export function targets(f: RunFigures): TargetResult[] {
  const ms = (v: number): string => `${round(v)} ms`;
  const latencyP50Limit = 1.25 * f.floor.p50 + 1;
  const latencyP99Limit = 2 * f.floor.p99;
  const ttfbP50Limit = 1.25 * f.floorStream.p50 + 1;
  const ttfbP99Limit = 2 * f.floorStream.p99;
  const warmOne = onlyValue(f.nonStreamTrips.ledgerBeforeFirstByteOnWarm, 1) && onlyValue(f.streamTrips.ledgerBeforeFirstByteOnWarm, 1);
  const duringNone = onlyValue(f.nonStreamTrips.during, 0) && onlyValue(f.streamTrips.during, 0);
  const settledAfter = f.nonStreamTrips.afterEnd.every((e) => e.value >= 1) && f.streamTrips.afterEnd.every((e) => e.value >= 1);
  const frames = f.frames;
  // Scheduling on a loaded machine can put two frames into one read on any hop; the control
  // relay shows how often that happens without Sluice, and a small allowance covers the rest.
  const coalescingAllowance = Math.max(1, Math.ceil(frames.gateway.frames * 0.005));
  const coalescingLimit = Math.max(frames.direct.coalescedReads, frames.relay.coalescedReads) + coalescingAllowance;
  return [
    { name: 'added non-streamed latency p50 (c=1)', figure: ms(f.c1.addedP50), limit: `<= 1.25 x txn p50 + 1 ms = ${ms(latencyP50Limit)}`, met: f.c1.addedP50 <= latencyP50Limit },
    { name: 'added non-streamed latency p99 (c=1)', figure: ms(f.c1.addedP99), limit: `<= 2 x txn p99 = ${ms(latencyP99Limit)}`, met: f.c1.addedP99 <= latencyP99Limit },
    {
      name: 'store round trips before first byte (warm)',
      figure: `non-stream ${fmtHist(f.nonStreamTrips.ledgerBeforeFirstByteOnWarm)}, stream ${fmtHist(f.streamTrips.ledgerBeforeFirstByteOnWarm)} (trips:requests)`,
      limit: 'exactly 1',
      met: warmOne,
    },
    {
      name: 'settlement after the reply ends',
      figure: `during reply ${fmtHist(f.nonStreamTrips.during)} / ${fmtHist(f.streamTrips.during)}, after end ${fmtHist(f.nonStreamTrips.afterEnd)} / ${fmtHist(f.streamTrips.afterEnd)}`,
      limit: '0 during, >= 1 after',
      met: duringNone && settledAfter,
    },
    { name: 'added stream TTFB p50', figure: ms(f.ttfb.addedP50), limit: `<= 1.25 x txn p50 + 1 ms = ${ms(ttfbP50Limit)}`, met: f.ttfb.addedP50 <= ttfbP50Limit },
    { name: 'added stream TTFB p99', figure: ms(f.ttfb.addedP99), limit: `<= 2 x txn p99 = ${ms(ttfbP99Limit)}`, met: f.ttfb.addedP99 <= ttfbP99Limit },
    { name: 'added gap between chunks p99', figure: ms(f.gap.addedP99), limit: '<= 1 ms', met: f.gap.addedP99 <= 1 },
    {
      name: 'frames not held back or coalesced',
      figure: `frames ${frames.gateway.frames} (direct ${frames.direct.frames}); reads with >1 frame: gateway ${frames.gateway.coalescedReads}, direct ${frames.direct.coalescedReads}, relay ${frames.relay.coalescedReads}`,
      limit: `same frames; coalesced reads <= max(direct, relay) + 0.5% = ${coalescingLimit}`,
      met: frames.gateway.frames === frames.direct.frames && frames.gateway.coalescedReads <= coalescingLimit,
    },
    {
      // A warm process reuses memory it already holds, so RSS may not move at all; the heap and
      // the Buffers outside it (external) show what the stream itself allocated meanwhile.
      name: '100 MiB stream: gateway memory growth',
      figure: `RSS +${round(f.big.rssGrowth / MB)} MiB; heap +${round(f.big.heapGrowth / MB)} MiB, external +${round(f.big.externalGrowth / MB)} MiB`,
      limit: 'max(RSS, heap + external) < 64 MiB; stream complete',
      met: Math.max(f.big.rssGrowth, f.big.heapGrowth + f.big.externalGrowth) < 64 * MB && f.big.sawDone && f.big.gatewayBytes >= f.plan.bigBytes,
    },
    { name: 'gateway CPU per non-streamed request', figure: `${round(f.cpu.perNonStreamedRequestUs / 1000)} ms (bare relay ${round(f.cpu.relayPerRequestUs / 1000)} ms)`, limit: '<= 0.5 ms', met: f.cpu.perNonStreamedRequestUs <= 500 },
    {
      name: 'gateway CPU per SSE chunk (paced, busy process)',
      figure: `${round(f.cpu.perChunkBusyUs)} us with ${f.cpu.busy.gateway.concurrency} streams in flight (bare relay ${round(f.cpu.relayPerChunkBusyUs)} us)`,
      limit: '<= 10 us',
      met: f.cpu.perChunkBusyUs <= 10,
    },
    { name: 'bundled gateway size (minified)', figure: `${f.bundles.handlerBytes} B`, limit: '<= 1 MB (1,000,000 B)', met: f.bundles.handlerBytes <= 1_000_000 },
    { name: 'module init (median, fresh process)', figure: ms(f.init.requireMs.p50), limit: '<= 150 ms', met: f.init.requireMs.p50 <= 150 },
  ];
}

export function buildResults(f: RunFigures): Results {
  const cpus = os.cpus();
  return {
    when: new Date().toISOString(),
    machine: {
      node: process.version,
      cpus: cpus.length,
      cpuModel: cpus[0]?.model ?? 'unknown',
      platform: `${os.platform()} ${os.release()}`,
      loadAverageStart: f.loadAverageStart,
      loadAverageEnd: os.loadavg()[0] ?? Number.NaN,
    },
    options: f.options,
    plan: f.plan,
    elapsedSeconds: f.elapsedS,
    units: 'milliseconds unless named otherwise (Us: microseconds; bytes)',
    floor: { transactWriteItems: f.floor, transactWriteItemsStreamPhase: f.floorStream, clientCpuUs: f.floorCpuUs, retriedTransactions: f.txnRetries.length },
    nonStreamedC1: f.c1,
    throughput: f.throughput,
    stream: { ttfb: f.ttfb, gapBetweenChunks: f.gap, frames: f.frames },
    roundTrips: { nonStreamed: f.nonStreamTrips, streamed: f.streamTrips },
    gatewayTimeline: f.phases,
    cpu: f.cpu,
    bigStream: f.big,
    bundle: { handlerBytes: f.bundles.handlerBytes, sourceMapBytes: f.bundles.handlerMapBytes, moduleInit: f.init },
    gatewayLogLines: f.gatewayLogLines,
    targets: targets(f),
    ...(f.profile === undefined ? {} : { profile: f.profile }),
  };
}

export function wakesPerFrame(p: BusyPhase): number {
  return p.wakeups < 0 ? Number.NaN : p.wakeups / Math.max(1, p.frames);
}

export function alignRight(rows: readonly (readonly string[])[]): string {
  const widths: number[] = [];
  for (const r of rows) r.forEach((c, i) => (widths[i] = Math.max(widths[i] ?? 0, c.length)));
  return rows.map((r) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join('  ').trimEnd()).join('\n');
}

export function alignLeft(rows: readonly (readonly string[])[]): string {
  const widths: number[] = [];
  for (const r of rows) r.forEach((c, i) => (widths[i] = Math.max(widths[i] ?? 0, c.length)));
  return rows.map((r) => r.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ').trimEnd()).join('\n');
}

export function renderTables(r: Results): string {
  const n = (v: number): string => String(round(v));
  const latency: string[][] = [['latency (ms)', 'gw p50', 'gw p99', 'direct p50', 'direct p99', 'added p50', 'added p99', 'relay added p50', 'relay added p99']];
  const add = (name: string, s: Side): void => {
    latency.push([name, n(s.gateway.p50), n(s.gateway.p99), n(s.direct.p50), n(s.direct.p99), n(s.addedP50), n(s.addedP99), n(s.relayAddedP50), n(s.relayAddedP99)]);
  };
  add('non-streamed, c=1', r.nonStreamedC1);
  add('stream time to first byte', r.stream.ttfb);
  add('stream gap between chunks', r.stream.gapBetweenChunks);
  const f = r.floor.transactWriteItems;
  const fs = r.floor.transactWriteItemsStreamPhase;
  latency.push(['TransactWriteItems (floor), c=1 turn', n(f.p50), n(f.p99), '', '', '', '', '', '']);
  latency.push(['TransactWriteItems (floor), stream turn', n(fs.p50), n(fs.p99), '', '', '', '', '', '']);
  const tput: string[][] = [['throughput, non-streamed', 'gw req/s', 'gw p50', 'gw p99', 'direct req/s', 'direct p50', 'direct p99', 'gw errors', 'gw CPU/req us', 'trips/req']];
  for (const t of r.throughput) {
    tput.push([
      `concurrency ${t.concurrency}`,
      n(t.gateway.rps),
      n(t.gateway.latency.p50),
      n(t.gateway.latency.p99),
      n(t.direct.rps),
      n(t.direct.latency.p50),
      n(t.direct.latency.p99),
      String(t.gateway.failed),
      n(t.gatewayCpuUsPerRequest),
      n(t.gatewayTripsPerRequest),
    ]);
  }
  const b = r.bigStream;
  const rt = r.roundTrips;
  const c = r.cpu;
  const fr = r.stream.frames;
  const other: string[][] = [
    ['other figures', 'value'],
    ['gateway CPU per non-streamed request (c=1)', `${n(c.perNonStreamedRequestUs)} us (system ${n(c.perNonStreamedRequestSystemUs)} us)`],
    ['  control: bare relay CPU per request', `${n(c.relayPerRequestUs)} us`],
    ['  control: DynamoWire client CPU per TransactWriteItems', `${n(c.wirePerTransactionUs)} us (x2 per request: admit, settle)`],
    ['  control: AWS SDK client CPU per TransactWriteItems', `${n(c.sdkPerTransactionUs)} us (the client used before DynamoWire)`],
    ['  control: SDK low-level DynamoDBClient, pre-marshalled', `${n(c.sdkLowLevelPerTransactionUs)} us (DynamoWire saves ${n(c.sdkLowLevelPerTransactionUs - c.wirePerTransactionUs)} us per call)`],
    ['  control: CPU of one idle 2 ms sleep and wake-up, no work', `${n(c.idleWakeupUs)} us`],
    ['  gateway - relay - 2 x DynamoWire (rough)', `${n(c.processRemainderPerRequestUs)} us`],
    ['Sluice\'s own code, ports in memory: per request / chunk', `${n(c.own.perRequestUs)} us / ${n(c.own.perChunkUs)} us (no socket, syscall or wait; ${c.own.requests} requests)`],
    ['  own: middy streaming handler / plain handler, per request', `${n(c.own.handler.middyPerRequestUs)} / ${n(c.own.handler.plainPerRequestUs)} us (middy adds ${n(c.own.handler.middyPerRequestUs - c.own.handler.plainPerRequestUs)} us)`],
    ['  own: middy streaming handler / plain handler, per chunk', `${n(c.own.handler.middyPerChunkUs)} / ${n(c.own.handler.plainPerChunkUs)} us`],
    ['  own: per chunk without the relay\'s byte scan (every frame parsed)', `${n(c.own.perChunkNoScanUs)} us (the scan saves ${n(100 * (1 - c.own.perChunkUs / c.own.perChunkNoScanUs))}%)`],
    ['gateway CPU per SSE chunk: paced, busy / unpaced', `${n(c.perChunkBusyUs)} us (${c.busy.gateway.concurrency} streams in flight) / ${n(c.perChunkUnpacedUs)} us`],
    ['  control: bare relay CPU per paced chunk, busy', `${n(c.relayPerChunkBusyUs)} us`],
    ['  busy: gateway - relay (Sluice, shim and their stream layers)', `${n(c.perChunkBusyUs - c.relayPerChunkBusyUs)} us`],
    ['  busy: per-stream fixed CPU, gateway / relay', `${n(c.busy.gateway.perStreamFixedUs)} us / ${n(c.busy.relay.perStreamFixedUs)} us`],
    ['  busy: frames, gateway / relay (reads with >1 frame)', `${c.busy.gateway.long.frames} / ${c.busy.relay.long.frames} (${c.busy.gateway.long.coalescedReads} / ${c.busy.relay.long.coalescedReads})`],
    ['  busy: wake-ups per frame, gateway / relay', `${n(wakesPerFrame(c.busy.gateway.long))} / ${n(wakesPerFrame(c.busy.relay.long))}`],
    [
      'gateway CPU per paced chunk, one stream at a time',
      `${n(c.perChunkPacedSequentialUs)} us (bare relay ${n(c.relayPerChunkPacedSequentialUs)} us); wake-ups per frame ${n(c.wakeupsPerChunkPacedSequential)} / ${n(c.relayWakeupsPerChunkPacedSequential)}`,
    ],
    ['paced frames received: gateway / direct / relay', `${fr.gateway.frames} / ${fr.direct.frames} / ${fr.relay.frames} (reads with >1 frame: ${fr.gateway.coalescedReads} / ${fr.direct.coalescedReads} / ${fr.relay.coalescedReads})`],
    ['round trips before 1st byte, warm: non-stream | stream', `${fmtHist(rt.nonStreamed.ledgerBeforeFirstByteOnWarm)} | ${fmtHist(rt.streamed.ledgerBeforeFirstByteOnWarm)}  (trips:requests)`],
    ['cache-refresh reads before 1st byte: non-stream | stream', `${fmtHist(rt.nonStreamed.lookupsBeforeFirstByte)} | ${fmtHist(rt.streamed.lookupsBeforeFirstByte)}`],
    ['round trips during reply | after end: non-stream', `${fmtHist(rt.nonStreamed.during)} | ${fmtHist(rt.nonStreamed.afterEnd)}`],
    ['round trips during reply | after end: stream', `${fmtHist(rt.streamed.during)} | ${fmtHist(rt.streamed.afterEnd)}`],
    ['mean round trips per request: non-stream | stream', `${n(rt.nonStreamed.meanTotal)} | ${n(rt.streamed.meanTotal)}`],
    ['100 MiB stream: bytes; MB/s gateway / direct', `${b.gatewayBytes} B in ${b.gatewayFrames} frames; ${n(b.gatewayMBps)} / ${n(b.directMBps)}`],
    ['100 MiB stream: gateway RSS baseline -> peak', `${n(b.rssBefore / MB)} -> ${n(b.peakRss / MB)} MiB; heap used ${n(b.heapBefore / MB)} -> ${n(b.peakHeapUsed / MB)} MiB`],
    ['100 MiB stream: hold extensions during the reply', `${fmtHist(b.holdExtensions)}  (trips:requests)`],
    ['bundled gateway (minified, @aws-sdk/* external)', `${r.bundle.handlerBytes} B (+ ${r.bundle.sourceMapBytes} B source map)`],
    ['module init: require p50 / max; from process start p50', `${n(r.bundle.moduleInit.requireMs.p50)} / ${n(r.bundle.moduleInit.requireMs.max)} ms; ${n(r.bundle.moduleInit.sinceStartMs.p50)} ms`],
    ['  control: require of the external @aws-sdk/* alone, p50', `${n(r.bundle.moduleInit.sdkRequireMs.p50)} ms (${r.bundle.moduleInit.sdkPackages.join(', ')})`],
    ['floor transactions retried (excluded)', String(r.floor.retriedTransactions)],
    ['whole run; load average start / end', `${n(r.elapsedSeconds)} s; ${n(r.machine.loadAverageStart)} / ${n(r.machine.loadAverageEnd)} on ${r.machine.cpus} cores`],
  ];
  const timeline: string[][] = [['gateway timeline, p50 (p99) ms', ...PHASES.map((p) => p.replace(/([A-Z])/g, ' $1').toLowerCase())]];
  for (const [name, rep] of [
    ['non-streamed, c=1', r.gatewayTimeline.nonStreamed],
    ['streamed (to first byte)', r.gatewayTimeline.streamed],
  ] as const) {
    timeline.push([name, ...PHASES.map((p) => `${n(rep[p].p50)} (${n(rep[p].p99)})`)]);
  }
  const tgt: string[][] = [['target', 'figure', 'limit', 'result']];
  for (const t of r.targets) tgt.push([t.name, t.figure, t.limit, t.met ? 'MET' : 'MISSED']);
  return [alignRight(latency), '', alignRight(timeline), '', alignRight(tput), '', alignLeft(other), '', alignLeft(tgt)].join('\n');
}
