/**
 * The gateway as the benchmark runs it: its own Node process (bundled by esbuild, like the
 * deployed function), the real handler wiring served over node:http through the Lambda streaming
 * shim, exactly as local mode serves it. Configuration comes from the environment; the parent
 * talks to it over Node IPC only (see `protocol.ts`), never through the gateway's HTTP surface.
 *
 * Telemetry is the deployed stages' (EMF lines on stdout), not local mode's console lines.
 *
 * The one addition is instrumentation: the DynamoDB round-trip counters of the adapters are read
 * at the first byte written, at the end of the reply, and after the invocation returns
 * (settlement done), so the benchmark can say which round trips a client waits for and which
 * come after its reply; and the admission call and the upstream call are timed by wrapping the
 * adapters' methods, so the added latency can be taken apart. Recording is for sequential
 * phases only (one invocation at a time).
 */
import { performance } from 'node:perf_hooks';
import type { Writable } from 'node:stream';
import type { APIGatewayProxyEventV2, Context } from 'aws-lambda';
import { EmfTelemetry } from '../lambdas/adapters/emf-telemetry';
import type { ResponseSink } from '../lambdas/gateway/ports';
import { buildGateway, eventToRequest, lambdaSink, type AwsLambdaRuntime } from '../lambdas/gateway/wiring';
import { loadConfig } from '../lambdas/shared/config';
import { serveLambda, type StreamingHandler } from '../local/http-server';
import { installLambdaShim } from '../local/lambda-shim';
import type { FromGateway, GatewayStats, Phases, ToGateway, TripSample } from './protocol';
import { mainThreadWakeups } from './wakeups';
import { countRoundTrips, ledgerCallsBetween, type TripLog } from './round-trips';

const PEAK_SAMPLE_MS = 10;

/** The points of an invocation's timeline, -1 until reached. */
const MARKS = { start: -1, admitStart: -1, admitEnd: -1, upstreamStart: -1, upstreamHeaders: -1, firstByte: -1, end: -1, done: -1 };

function phasesOf(m: Record<keyof typeof MARKS, number> | undefined): Phases {
  const span = (a: number | undefined, b: number | undefined): number => (a === undefined || b === undefined || a < 0 || b < 0 ? -1 : b - a);
  return {
    beforeAdmit: span(m?.start, m?.admitStart),
    admit: span(m?.admitStart, m?.admitEnd),
    beforeUpstream: span(m?.admitEnd, m?.upstreamStart),
    upstream: span(m?.upstreamStart, m?.upstreamHeaders),
    toFirstByte: span(m?.upstreamHeaders, m?.firstByte),
    toEnd: span(m?.firstByte, m?.end),
    settle: span(m?.end, m?.done),
  };
}

function send(message: FromGateway): void {
  process.send?.(message);
}

async function main(): Promise<void> {
  if (process.send === undefined) throw new Error('bench/gateway-server runs as a child of the benchmark (IPC channel missing)');
  const runtime = installLambdaShim() as unknown as AwsLambdaRuntime;
  const config = loadConfig(process.env);
  const wiring = buildGateway(config, process.env, { telemetry: new EmfTelemetry(config.stage) });
  const tripLog: TripLog = { keep: false, calls: [] };
  const trips = countRoundTrips([wiring.doc, wiring.wire], config.tablePrefix, tripLog);
  const lookups = (): number => trips.lookups;

  let recording = false;
  let samples: TripSample[] = [];
  /** Timeline of the invocation being recorded (sequential phases only). */
  let marks: Record<keyof typeof MARKS, number> | undefined;
  const mark = (name: keyof typeof MARKS): void => {
    if (marks !== undefined && marks[name] < 0) marks[name] = performance.now();
  };
  const ledger = wiring.ledger;
  const admit = ledger.admit.bind(ledger);
  ledger.admit = async (request) => {
    mark('admitStart');
    try {
      return await admit(request);
    } finally {
      mark('admitEnd');
    }
  };
  const upstream = wiring.upstream;
  const upstreamSend = upstream.send.bind(upstream);
  upstream.send = async (request) => {
    mark('upstreamStart');
    const response = await upstreamSend(request);
    mark('upstreamHeaders');
    return response;
  };
  let inflight = 0;
  let served = 0;
  /** `idle` calls waiting for the last invocation to end. */
  const idleWaiters: number[] = [];

  const handler = runtime.streamifyResponse(async (event: APIGatewayProxyEventV2, responseStream: Writable, context: Context) => {
    inflight += 1;
    if (recording) marks = { ...MARKS, start: performance.now() };
    const sentAt = Number(event.headers?.['x-bench-sent'] ?? Number.NaN);
    const ledger0 = trips.ledger;
    const lookups0 = lookups();
    const seq0 = trips.ledger + trips.lookups;
    let seqFirstByte = -1;
    const inner = lambdaSink(runtime, responseStream);
    let ledgerBefore = -1;
    let lookupsBefore = -1;
    let atEnd = -1;
    let status = 0;
    let stream = false;
    const firstByte = (): void => {
      if (ledgerBefore >= 0) return;
      seqFirstByte = trips.ledger + trips.lookups;
      ledgerBefore = trips.ledger - ledger0;
      lookupsBefore = lookups() - lookups0;
    };
    const sink: ResponseSink = {
      get started() {
        return inner.started;
      },
      start(s, headers) {
        status = s;
        stream = (headers['content-type'] ?? '').startsWith('text/event-stream');
        inner.start(s, headers);
      },
      write(chunk) {
        mark('firstByte');
        firstByte();
        return inner.write(chunk);
      },
      end() {
        mark('firstByte');
        mark('end');
        firstByte();
        atEnd = trips.ledger - ledger0 + lookups() - lookups0;
        return inner.end();
      },
    };
    try {
      await wiring.gateway.serve(eventToRequest(event, context.awsRequestId), sink);
    } finally {
      inflight -= 1;
      served += 1;
      if (inflight === 0) for (const id of idleWaiters.splice(0)) send({ type: 'stats', id, stats: stats() });
      if (recording && ledgerBefore >= 0) {
        mark('done');
        const total = trips.ledger - ledger0 + lookups() - lookups0;
        const before = ledgerBefore + lookupsBefore;
        const epoch = (t: number | undefined): number => (t === undefined || t < 0 ? -1 : performance.timeOrigin + t);
        samples.push({
          ledgerBefore,
          lookupsBefore,
          ledgerCallsBefore: ledgerCallsBetween(tripLog, seq0, seqFirstByte),
          during: atEnd - before,
          after: total - atEnd,
          stream,
          status,
          phases: phasesOf(marks),
          sentAt,
          startAt: epoch(marks?.start),
          firstByteAt: epoch(marks?.firstByte),
          endAt: epoch(marks?.end),
        });
      }
      marks = undefined;
    }
  });
  const server = await serveLambda({ handler: handler as unknown as StreamingHandler, log: (m) => process.stderr.write(`${m}\n`) });

  let peakRss = 0;
  let peakHeapUsed = 0;
  let peakExternal = 0;
  let peakTimer: NodeJS.Timeout | undefined;
  const samplePeak = (): void => {
    const m = process.memoryUsage();
    peakRss = Math.max(peakRss, m.rss);
    peakHeapUsed = Math.max(peakHeapUsed, m.heapUsed);
    peakExternal = Math.max(peakExternal, m.external);
  };
  const stats = (): GatewayStats => {
    const cpu = process.cpuUsage();
    const m = process.memoryUsage();
    return {
      cpuUserUs: cpu.user,
      cpuSystemUs: cpu.system,
      wakeups: mainThreadWakeups(),
      rss: m.rss,
      heapUsed: m.heapUsed,
      external: m.external,
      arrayBuffers: m.arrayBuffers,
      peakRss: Math.max(peakRss, m.rss),
      peakHeapUsed: Math.max(peakHeapUsed, m.heapUsed),
      peakExternal: Math.max(peakExternal, m.external),
      trips: { ledger: trips.ledger, lookups: trips.lookups },
      inflight,
      served,
    };
  };

  const stop = async (): Promise<void> => {
    if (peakTimer !== undefined) clearInterval(peakTimer);
    await server.close();
    wiring.upstream.close();
    wiring.doc.destroy();
    wiring.wire.destroy();
  };

  process.on('message', (raw: ToGateway) => {
    switch (raw.type) {
      case 'stats':
        send({ type: 'stats', id: raw.id, stats: stats() });
        return;
      case 'record':
        recording = raw.on;
        tripLog.keep = raw.on;
        tripLog.calls.length = 0;
        if (raw.on) samples = [];
        send({ type: 'ok', id: raw.id });
        return;
      case 'samples':
        send({ type: 'samples', id: raw.id, samples });
        return;
      case 'peak':
        if (peakTimer !== undefined) clearInterval(peakTimer);
        peakTimer = undefined;
        if (raw.on) {
          peakRss = 0;
          peakHeapUsed = 0;
          peakExternal = 0;
          samplePeak();
          peakTimer = setInterval(samplePeak, PEAK_SAMPLE_MS);
          peakTimer.unref();
        }
        send({ type: 'ok', id: raw.id });
        return;
      case 'gc':
        (globalThis as { gc?: () => void }).gc?.();
        send({ type: 'ok', id: raw.id });
        return;
      case 'idle':
        if (inflight === 0) send({ type: 'stats', id: raw.id, stats: stats() });
        else idleWaiters.push(raw.id);
        return;
      case 'stop':
        void stop().finally(() => {
          send({ type: 'ok', id: raw.id });
          process.disconnect?.();
          setImmediate(() => process.exit(0));
        });
        return;
    }
  });
  process.once('disconnect', () => {
    // The benchmark went away without stopping us: do not outlive it.
    void stop().finally(() => process.exit(0));
  });
  send({ type: 'ready', url: server.url, node: process.version });
}

main().catch((err: unknown) => {
  send({ type: 'failed', message: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  process.exit(1);
});
