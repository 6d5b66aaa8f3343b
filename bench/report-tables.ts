/** The tables a run prints at its end, from its `Results`. */
import type { BusyPhase } from './chunk-cpu';
import { MB, PHASES, type Results, type Side, type TripReport } from './report';
import { fmtHist } from './report-targets';
import { round } from './stats';

export function wakesPerFrame(p: BusyPhase): number {
  return p.wakeups < 0 ? Number.NaN : p.wakeups / Math.max(1, p.frames);
}

/** One row per group of warm requests that did not make exactly one round trip before the first byte, naming its calls. */
export function offTargetRows(t: TripReport, label: string): string[][] {
  return (t.offTargetBeforeFirstByte ?? []).map((g) => [`  ${label}: ${g.count} request(s) made`, g.calls]);
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
    ['gateway fixed CPU per stream, busy / c=1', `${n(c.fixedPerStreamUs)} us / ${n(c.sequentialStream.fixedUs)} us (bare relay ${n(c.relayFixedPerStreamUs)} / ${n(c.sequentialStream.relayFixedUs)} us)`],
    ['  c=1: CPU per short stream, gateway / relay', `${n(c.sequentialStream.perStreamUs)} / ${n(c.sequentialStream.relayPerStreamUs)} us (${n(c.sequentialStream.framesPerStream)} / ${n(c.sequentialStream.relayFramesPerStream)} frames)`],
    ['  control: DynamoWire client CPU per TransactWriteItems', `${n(c.wirePerTransactionUs)} us (x2 per request: admit, settle)`],
    ['  control: AWS SDK client CPU per TransactWriteItems', `${n(c.sdkPerTransactionUs)} us (the client used before DynamoWire)`],
    ['  control: SDK low-level DynamoDBClient, pre-marshalled', `${n(c.sdkLowLevelPerTransactionUs)} us (DynamoWire saves ${n(c.sdkLowLevelPerTransactionUs - c.wirePerTransactionUs)} us per call)`],
    ['  control: CPU of one idle 2 ms sleep and wake-up, no work', `${n(c.idleWakeupUs)} us`],
    ['  gateway - relay - 2 x DynamoWire (rough)', `${n(c.processRemainderPerRequestUs)} us`],
    ['Sluice\'s own code, ports in memory: per request / chunk', `${n(c.own.perRequestUs)} us / ${n(c.own.perChunkUs)} us (no socket, syscall or wait; ${c.own.requests} requests)`],
    ['  own: middy streaming handler (until issue 21) / deployed plain handler, per request', `${n(c.own.handler.middyPerRequestUs)} / ${n(c.own.handler.plainPerRequestUs)} us (middy added ${n(c.own.handler.middyPerRequestUs - c.own.handler.plainPerRequestUs)} us)`],
    ['  own: middy streaming handler (until issue 21) / deployed plain handler, per chunk', `${n(c.own.handler.middyPerChunkUs)} / ${n(c.own.handler.plainPerChunkUs)} us`],
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
    ...offTargetRows(rt.nonStreamed, 'non-stream'),
    ...offTargetRows(rt.streamed, 'stream'),
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
    ['Node: the bench / the gateway', `${r.machine.node} / ${r.machine.gatewayNode ?? r.machine.node}`],
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
