/**
 * Where the gateway's CPU goes, per non-streamed request and per stream, by part: the real
 * handler as deployed (the streaming handler over `buildGateway`'s adapters: DynamoWire,
 * the ledger, the directory's caches, the provider's HTTP client, the EMF line) invoked in this
 * process with a Function URL event, against DynamoDB Local and the upstream simulator each in a
 * process of their own. What Lambda's runtime does around an invocation (and local mode's HTTP
 * shim) is left out: this is the code the function's own CPU runs.
 *
 *   npx tsx bench/cpu-breakdown.ts [--requests N] [--streams N] [--tokens N] [--warmup N] [--no-profiles] [--json FILE] [--save-profiles DIR]
 *   valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=/tmp/cg.%p \
 *     node --expose-gc --import tsx bench/cpu-breakdown.ts --instructions [--dump]
 *                                  (instructions per request and per stream, which load does not
 *                                  change; --dump writes each batch's costs by function)
 *
 * It reports, each over its own batch after a warm-up:
 * - the process's CPU (user + system, every thread: the garbage collector's too) per non-streamed
 *   request, per short stream, per chunk (long streams less short ones over the extra frames),
 *   and the stream's fixed part (a short stream less its frames at the per-chunk figure);
 * - the main thread's CPU profile by part, each sample charged to the nearest Sluice frame on its
 *   stack (so Node's HTTP code under DynamoWire's `post` is the store client's), as µs per
 *   request and share: proportions hold on a loaded machine far better than absolute times;
 * - bytes allocated per request by part (V8's sampling heap profiler, collected objects
 *   included), and the garbage collector's main-thread pauses: both independent of the load;
 * - the EMF line's write is a `writeSync` to /dev/null here (deployed: a pipe to the runtime).
 *
 * A/B: run it from two worktrees alternately; the counts (allocations, samples' shares) compare
 * better than the CPU times when the machine is shared.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync, writeFileSync, writeSync } from 'node:fs';
import { Session } from 'node:inspector';
import os from 'node:os';
import path from 'node:path';
import { PerformanceObserver } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import type { Context } from 'aws-lambda';
import { EmfTelemetry } from '../lambdas/adapters/emf-telemetry';
import { discard, functionUrlEvent } from './own-cpu';
import { streamingHandler } from '../lambdas/gateway/streaming';
import { buildGateway } from '../lambdas/gateway/wiring';
import { loadConfig } from '../lambdas/shared/config';
import { startDynamoLocal } from '../local/dynamo-local';
import { addCredit, createKey, createWorkspace, importCatalog } from '../local/ops';
import { ensureTables, makeDynamoClient } from '../local/tables';

const REPO_ROOT = path.resolve(__dirname, '..');
const PREFIX = 'cpu-';
const MODEL = 'local/sim-small';

// ---------------------------------------------------------------------------------------------
// Parts: each profile sample or allocation is charged to the nearest frame on its stack that one
// of these rules names (first match from the leaf up); the rest is Node's own (I/O callbacks,
// streams, timers) or V8's.

/** A part of the request path, by where its code lives. */
export interface PartRule {
  readonly part: string;
  readonly test: (url: string) => boolean;
}

const has = (...fragments: string[]) => (url: string) => fragments.some((f) => url.includes(f));

export const PART_RULES: readonly PartRule[] = [
  { part: 'store client: SigV4', test: has('/lambdas/adapters/sigv4.', '@smithy/signature-v4', '@smithy/core') },
  { part: 'store client: request JSON, reply values', test: has('/lambdas/adapters/dynamo-json.', '@aws-sdk/util-dynamodb') },
  { part: 'store client: HTTP, retries, reply parse', test: has('/lambdas/adapters/dynamo-wire.') },
  { part: 'ledger and lookups (store items, conditions, caches)', test: has('/lambdas/store/', '/lambdas/adapters/dynamo-', '/lambdas/adapters/ttl-cache.') },
  { part: 'telemetry line (EMF)', test: has('/lambdas/adapters/emf-telemetry.', '/lambdas/shared/emf.') },
  { part: 'provider call (HTTP client)', test: has('/lambdas/adapters/http-upstream.') },
  { part: 'handler (streaming, event)', test: has('/lambdas/gateway/streaming.', '/lambdas/gateway/wiring.', '@middy/') },
  { part: 'gateway phases and core', test: has('/lambdas/gateway/', '/lambdas/core/', '/lambdas/shared/') },
  { part: 'AWS SDK (catalog reads)', test: has('@aws-sdk/', '@smithy/') },
  { part: 'harness (the response stream stand-in, the loop)', test: has('/bench/') },
];

const SYSCALL = /^\((writev|writeUtf8String|writeBuffer|writeLatin1String|writeAsciiString|writeUcs2String|writeString|writeSync|read|readSync|fsync)\)$/;

/** Node's own code, where no Sluice frame is on the stack: by the leaf's module. */
const NODE_PARTS: readonly PartRule[] = [
  { part: 'Node: HTTP (parser, agent, messages)', test: has('node:_http', 'node:http', 'node:https') },
  { part: 'Node: streams and events', test: has('node:internal/streams', 'node:stream', 'node:events', 'node:internal/event_target', 'node:internal/abort_controller') },
  { part: 'Node: promises, ticks, timers', test: (url) => url === '(runMicrotasks)' || has('node:internal/process/task_queues', 'node:internal/timers', 'node:timers', 'node:internal/async_hooks')(url) },
  { part: 'Node: sockets', test: has('node:net', 'node:internal/stream_base_commons', 'node:internal/net') },
  { part: 'Node: crypto', test: has('node:internal/crypto', 'node:crypto') },
];

/** The part a stack belongs to: `frames` from the leaf up, each a script URL (or `(name)` for V8's own). */
export function partOf(frames: readonly string[]): string {
  const leaf = frames[0] ?? '';
  if (leaf === '(garbage collector)') return 'garbage collector (main thread)';
  if (leaf === '(program)') return 'V8 and native, unattributed';
  // A sample in a system call is wall time, the wait to be scheduled again included: its own line.
  if (SYSCALL.test(leaf)) return 'system calls (socket and log writes; wall time, waits included)';
  for (const url of frames) {
    for (const rule of PART_RULES) if (rule.test(url)) return rule.part;
  }
  for (const rule of NODE_PARTS) if (rule.test(leaf)) return rule.part;
  return 'Node: other';
}

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string };
  readonly children?: readonly number[];
}

interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

interface HeapNode {
  readonly callFrame: { readonly functionName: string; readonly url: string };
  readonly selfSize: number;
  readonly children: readonly HeapNode[];
}

function frameName(frame: { functionName: string; url: string }): string {
  return frame.url === '' ? `(${frame.functionName.replace(/^\(|\)$/g, '')})` : frame.url;
}

const INSPECTOR = 'node:inspector';

/** Busy microseconds by part over a CPU profile (idle and the profiler's own calls left out). */
export function profileByPart(profile: CpuProfile): Map<string, number> {
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const partOfNode = new Map<number, string>();
  const resolve = (id: number): string | undefined => {
    const known = partOfNode.get(id);
    if (known !== undefined) return known;
    const node = byId.get(id);
    if (node === undefined || node.callFrame.functionName === '(idle)') return undefined;
    const frames: string[] = [];
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const n = byId.get(at);
      if (n !== undefined) frames.push(frameName(n.callFrame));
    }
    // The inspector's own call (`Profiler.stop` building the profile it returns) is sampled into
    // that profile: the profiler's cost, not a request's (it read as 1.5 ms per request of "harness").
    if (frames.includes(INSPECTOR)) return undefined;
    const part = partOf(frames);
    partOfNode.set(id, part);
    return part;
  };
  const out = new Map<string, number>();
  profile.samples.forEach((id, i) => {
    const part = resolve(id);
    if (part !== undefined) out.set(part, (out.get(part) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  return out;
}

/** Sampled bytes allocated by part over a sampling heap profile, and by allocating function (`name file`). */
export function allocationsByPart(head: HeapNode): { byPart: Map<string, number>; byFunction: Map<string, number> } {
  const byPart = new Map<string, number>();
  const byFunction = new Map<string, number>();
  const walk = (node: HeapNode, stack: string[]): void => {
    const frames = [frameName(node.callFrame), ...stack];
    if (node.selfSize > 0) {
      const part = partOf(frames);
      byPart.set(part, (byPart.get(part) ?? 0) + node.selfSize);
      const fn = `${node.callFrame.functionName || '(anonymous)'} ${node.callFrame.url.replace(/^.*\/(lambdas|bench|local|node_modules)\//, '$1/')}`;
      byFunction.set(fn, (byFunction.get(fn) ?? 0) + node.selfSize);
    }
    for (const child of node.children) walk(child, frames);
  };
  walk(head, []);
  return { byPart, byFunction };
}

// ---------------------------------------------------------------------------------------------
// The stack: DynamoDB Local and the simulator in processes of their own, the gateway in this one.

interface Options {
  readonly requests: number;
  readonly streams: number;
  readonly tokens: number;
  readonly json?: string;
  /** Run under callgrind: count instructions per batch (`callgrind_control`), skip the profiles. */
  readonly instructions: boolean;
  /** Under callgrind, also dump each batch's costs by function (`callgrind_annotate` reads them). */
  readonly dump: boolean;
  /** Skip the profiles (CPU and allocations), e.g. to count system calls with strace. */
  readonly profiles: boolean;
  /** Non-streamed requests before measuring, with half as many short streams and a twentieth as many long ones between them, so the code is compiled. */
  readonly warmup: number;
  /** Write each batch's CPU profile to this folder (`requests.cpuprofile`, `streams.cpuprofile`: DevTools opens them). */
  readonly saveProfiles?: string;
}

function options(argv: readonly string[]): Options {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      requests: { type: 'string', default: '1000' },
      streams: { type: 'string', default: '300' },
      tokens: { type: 'string', default: '100' },
      json: { type: 'string' },
      instructions: { type: 'boolean', default: false },
      'no-profiles': { type: 'boolean', default: false },
      dump: { type: 'boolean', default: false },
      warmup: { type: 'string', default: '600' },
      'save-profiles': { type: 'string' },
    },
    strict: true,
  });
  return {
    requests: Number(values.requests),
    streams: Number(values.streams),
    tokens: Number(values.tokens),
    instructions: values.instructions === true,
    profiles: values.instructions !== true && values['no-profiles'] !== true,
    warmup: Number(values.warmup),
    dump: values.dump === true,
    ...(values.json === undefined ? {} : { json: values.json }),
    ...(values['save-profiles'] === undefined ? {} : { saveProfiles: values['save-profiles'] }),
  };
}

/**
 * Callgrind's counts for this process (it must run under `valgrind --tool=callgrind`, best with
 * `--instr-atstart=no`: only the measured batches are instrumented, the rest runs several times
 * faster). Load on the machine does not change a count.
 */
const callgrind = {
  control(...args: string[]): string {
    return execFileSync('callgrind_control', [...args, String(process.pid)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  },
  /** Zeroes the counters and instruments from now on. */
  start(): void {
    callgrind.control('--instr=on');
    callgrind.control('--zero');
  },
  /** Instructions since `start`, every thread; instrumentation off again (with `dump`, the batch's costs by function are written out first). */
  stop(dump: string | undefined): number {
    const out = callgrind.control('-e', 'Ir');
    if (dump !== undefined) callgrind.control(`--dump=${dump}`);
    callgrind.control('--instr=off');
    // One line per thread (`Th 1  1,234,567`): the main thread, the compiler's, the collector's, libuv's.
    const threads = [...out.matchAll(/^\s*Th\s+\d+\s+([\d,]+)\s*$/gm)].map((m) => Number((m[1] as string).replace(/,/g, '')));
    if (threads.length === 0) throw new Error(`callgrind_control gave no instruction count: ${out}`);
    return threads.reduce((a, b) => a + b, 0);
  },
};

async function startSimulatorChild(): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(REPO_ROOT, 'local/simulator/main.ts'), '--no-record'], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.once('exit', (code) => reject(new Error(`the simulator exited (${code})`)));
    child.stdout?.on('data', (c: Buffer) => {
      out += c.toString('utf8');
      const nl = out.indexOf('\n');
      if (nl !== -1) resolve(out.slice(0, nl).trim());
    });
  });
  child.stdout?.resume();
  return { url, child };
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}

function chatBody(stream: boolean, maxTokens: number): string {
  return JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'Say hello to the benchmark, briefly.' }], max_tokens: maxTokens, ...(stream ? { stream: true } : {}) });
}

function post<T>(session: Session, method: string, params: Record<string, unknown> = {}): Promise<T> {
  return new Promise((resolve, reject) => session.post(method, params, (err, result) => (err ? reject(err) : resolve(result as T))));
}

/** One batch's figures. */
interface Batch {
  readonly cpuUs: number;
  readonly gcPauseUs: number;
  readonly gcCount: number;
  /** Instructions per item, under callgrind only. */
  readonly instructions?: number;
}

export interface Breakdown {
  readonly when: string;
  readonly loadAverage: readonly number[];
  readonly requests: number;
  readonly streams: number;
  readonly framesPerLongStream: number;
  readonly framesPerShortStream: number;
  /** Process CPU, µs. */
  readonly cpuPerRequestUs: number;
  readonly cpuPerShortStreamUs: number;
  readonly cpuPerChunkUs: number;
  readonly fixedCpuPerStreamUs: number;
  readonly gcPausePerRequestUs: number;
  readonly gcPerRequest: number;
  /** Under callgrind (`--instructions`): instructions per request, short stream, chunk, and a stream's fixed part. */
  readonly instructions?: { readonly perRequest: number; readonly perShortStream: number; readonly perChunk: number; readonly fixedPerStream: number };
  /** Main-thread profile of the non-streamed batch, µs per request by part. */
  readonly profilePerRequestUs: Record<string, number>;
  readonly profilePerStreamUs: Record<string, number>;
  /** Sampled bytes allocated per request by part. */
  readonly allocatedPerRequestBytes: Record<string, number>;
  readonly allocatedPerStreamBytes: Record<string, number>;
  /** The functions that allocate the most per non-streamed request (bench.json only). */
  readonly allocatedPerRequestByFunction: Record<string, number>;
}

async function main(): Promise<void> {
  const opts = options(process.argv.slice(2));
  // Under callgrind the first call of this process's SDK client is slow to come: give the database time.
  const db = await startDynamoLocal({ readyTimeoutMs: opts.instructions ? 900_000 : 60_000 });
  const sim = await startSimulatorChild().catch(async (err: unknown) => {
    await db.stop();
    throw err;
  });
  const devNull = openSync('/dev/null', 'w');
  // Stopped from outside: the database and the simulator go first, by their PIDs.
  const onSignal = (): void => {
    void Promise.allSettled([stopChild(sim.child), db.stop()]).finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    const admin = makeDynamoClient(db.endpoint);
    await ensureTables(admin, PREFIX);
    const env: NodeJS.ProcessEnv = {
      SLUICE_STAGE: 'local',
      SLUICE_TABLE_PREFIX: PREFIX,
      SLUICE_DYNAMODB_ENDPOINT: db.endpoint,
      SLUICE_SECRET_SOURCE: 'env',
      SLUICE_LOCAL_UPSTREAM_URL: sim.url,
      SLUICE_LOCAL_SECRETS_FILE: path.join(os.tmpdir(), 'sluice-cpu-breakdown-no-secrets.json'),
      SLUICE_KEY_RATE_PER_MINUTE: '100000000',
    };
    const config = loadConfig(env);
    const wiring = buildGateway(config, env, { telemetry: new EmfTelemetry('bench', (line) => writeSync(devNull, `${line}\n`)) });
    const ctx = { doc: wiring.doc, tablePrefix: PREFIX, stage: 'local' as const };
    await importCatalog(ctx, {});
    const ws = await createWorkspace(ctx, { name: 'cpu' });
    await addCredit(ctx, { workspaceId: ws.workspaceId, minor: 10_000_000 });
    const key = await createKey(ctx, { workspaceId: ws.workspaceId });

    const handler = streamingHandler(wiring.gateway);
    const context = { awsRequestId: 'cpu-breakdown' } as Context;
    const serve = async (stream: boolean, tokens: number): Promise<number> => {
      const out = discard();
      await handler(functionUrlEvent(Buffer.from(chatBody(stream, tokens)), key.rawKey), out, context);
      if (out.bytes < 100) throw new Error(`the gateway wrote ${out.bytes} bytes`);
      return out.bytes;
    };
    const script = async (tokens: number, count: number): Promise<void> => {
      const res = await fetch(`${new URL(sim.url).origin}/_sim/script`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'sim-small', behaviors: Array.from({ length: count }, () => ({ kind: 'ok', completionTokens: tokens })) }),
      });
      if (!res.ok) throw new Error(`simulator script answered ${res.status}`);
      await res.arrayBuffer();
    };

    let gcPause = 0;
    let gcCount = 0;
    const gc = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        gcPause += e.duration * 1000;
        gcCount += 1;
      }
    });
    gc.observe({ entryTypes: ['gc'] });
    const batch = async (name: string, count: number, one: () => Promise<unknown>): Promise<Batch> => {
      // Each batch starts from a collected heap, so no batch pays for another's garbage.
      (globalThis as { gc?: () => void }).gc?.();
      const p0 = gcPause;
      const n0 = gcCount;
      if (opts.instructions) callgrind.start();
      const c0 = process.cpuUsage();
      for (let i = 0; i < count; i += 1) await one();
      const c = process.cpuUsage(c0);
      const instructions = opts.instructions ? callgrind.stop(opts.dump ? name : undefined) : 0;
      // GC entries are delivered asynchronously: let them arrive before reading.
      await new Promise((r) => setImmediate(r));
      return { cpuUs: (c.user + c.system) / count, gcPauseUs: (gcPause - p0) / count, gcCount: (gcCount - n0) / count, ...(opts.instructions ? { instructions: instructions / count } : {}) };
    };
    const SHORT = 2;
    const warmup = opts.warmup;
    const nonStreamed = (): Promise<number> => serve(false, 16);
    const streamed = (tokens: number) => (): Promise<number> => serve(true, tokens);
    const framesOf = (tokens: number): number => tokens + 2; // role, content, finish frames; usage withheld

    process.stderr.write(`[cpu] warm-up (DynamoDB Local ${db.endpoint}, simulator ${sim.url})\n`);
    // Interleaved, as a function's traffic is: every path sees requests and streams of both
    // lengths before the batches, so no batch starts by recompiling what the one before it
    // specialised (requests after streams saw V8 reoptimise Node's stream helpers, "wrong map").
    for (let i = 0; i < warmup; i += 1) {
      await nonStreamed();
      if (i % 2 === 1) {
        await script(SHORT, 1);
        await streamed(SHORT)();
      }
      if (i % 20 === 19) {
        await script(opts.tokens, 1);
        await streamed(opts.tokens)();
      }
    }

    process.stderr.write(`[cpu] ${opts.requests} non-streamed requests, ${opts.streams} short and ${opts.streams} long streams\n`);
    const request = await batch('requests', opts.requests, nonStreamed);
    await script(SHORT, opts.streams);
    const short = await batch('short-streams', opts.streams, streamed(SHORT));
    await script(opts.tokens, opts.streams);
    const long = await batch('long-streams', opts.streams, streamed(opts.tokens));
    const perChunk = (long.cpuUs - short.cpuUs) / (framesOf(opts.tokens) - framesOf(SHORT));

    // Profiles and allocations over batches of their own (the profiler's cost stays out of the figures above).
    const session = new Session();
    session.connect();
    const profiled = async (name: string, count: number, one: () => Promise<unknown>): Promise<{ cpu: Map<string, number>; heap: Map<string, number>; heapByFunction: Map<string, number> }> => {
      await post(session, 'Profiler.enable');
      await post(session, 'Profiler.setSamplingInterval', { interval: 100 });
      await post(session, 'Profiler.start');
      for (let i = 0; i < count; i += 1) await one();
      const { profile } = await post<{ profile: CpuProfile }>(session, 'Profiler.stop');
      if (opts.saveProfiles !== undefined) {
        mkdirSync(opts.saveProfiles, { recursive: true });
        writeFileSync(path.join(opts.saveProfiles, `${name}.cpuprofile`), JSON.stringify(profile));
      }
      await post(session, 'HeapProfiler.enable');
      await post(session, 'HeapProfiler.startSampling', { samplingInterval: 256, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
      for (let i = 0; i < count; i += 1) await one();
      const heap = await post<{ profile: { head: HeapNode } }>(session, 'HeapProfiler.stopSampling');
      const per = (m: Map<string, number>): Map<string, number> => new Map([...m].map(([k, v]) => [k, v / count]));
      const allocated = allocationsByPart(heap.profile.head);
      const top = new Map([...allocated.byFunction].sort((a, b) => b[1] - a[1]).slice(0, 25));
      return { cpu: per(profileByPart(profile)), heap: per(allocated.byPart), heapByFunction: per(top) };
    };
    const none = { cpu: new Map<string, number>(), heap: new Map<string, number>(), heapByFunction: new Map<string, number>() };
    const profRequests = Math.max(100, Math.floor(opts.requests / 2));
    const reqProfile = opts.profiles ? await profiled('requests', profRequests, nonStreamed) : none;
    if (opts.profiles) await script(SHORT, 2 * opts.streams);
    const streamProfile = opts.profiles ? await profiled('streams', opts.streams, streamed(SHORT)) : none;
    session.disconnect();
    gc.disconnect();

    const sorted = (m: Map<string, number>): Record<string, number> => Object.fromEntries([...m].sort((a, b) => b[1] - a[1]));
    const result: Breakdown = {
      when: new Date().toISOString(),
      loadAverage: os.loadavg(),
      requests: opts.requests,
      streams: opts.streams,
      framesPerLongStream: framesOf(opts.tokens),
      framesPerShortStream: framesOf(SHORT),
      cpuPerRequestUs: request.cpuUs,
      cpuPerShortStreamUs: short.cpuUs,
      cpuPerChunkUs: perChunk,
      fixedCpuPerStreamUs: short.cpuUs - perChunk * framesOf(SHORT),
      gcPausePerRequestUs: request.gcPauseUs,
      gcPerRequest: request.gcCount,
      ...(request.instructions !== undefined && short.instructions !== undefined && long.instructions !== undefined
        ? { instructions: instructionFigures(request.instructions, short.instructions, long.instructions, framesOf(SHORT), framesOf(opts.tokens)) }
        : {}),
      profilePerRequestUs: sorted(reqProfile.cpu),
      profilePerStreamUs: sorted(streamProfile.cpu),
      allocatedPerRequestBytes: sorted(reqProfile.heap),
      allocatedPerStreamBytes: sorted(streamProfile.heap),
      allocatedPerRequestByFunction: sorted(reqProfile.heapByFunction),
    };
    process.stdout.write(render(result));
    if (opts.json !== undefined) writeFileSync(opts.json, `${JSON.stringify(result, null, 2)}\n`);

    wiring.wire.destroy();
    wiring.doc.destroy();
    wiring.upstream.close();
    admin.destroy();
  } finally {
    closeSync(devNull);
    await stopChild(sim.child);
    await db.stop();
  }
}

function instructionFigures(request: number, short: number, long: number, shortFrames: number, longFrames: number): NonNullable<Breakdown['instructions']> {
  const perChunk = (long - short) / (longFrames - shortFrames);
  return { perRequest: request, perShortStream: short, perChunk, fixedPerStream: short - perChunk * shortFrames };
}

/** The tables this tool prints. */
export function render(r: Breakdown): string {
  const n = (v: number): string => v.toFixed(v >= 100 ? 0 : 1);
  const total = (m: Record<string, number>): number => Object.values(m).reduce((a, b) => a + b, 0);
  const rows = (m: Record<string, number>, unit: string): string[] => {
    const sum = total(m);
    return Object.entries(m).map(([part, v]) => `  ${part.padEnd(56)} ${n(v).padStart(8)} ${unit} ${((100 * v) / Math.max(1, sum)).toFixed(1).padStart(5)}%`);
  };
  return [
    `gateway CPU in process (load average ${r.loadAverage.map((l) => l.toFixed(1)).join(' / ')})`,
    `  per non-streamed request                                  ${n(r.cpuPerRequestUs)} us (GC pauses ${n(r.gcPausePerRequestUs)} us, ${r.gcPerRequest.toFixed(3)} GCs)`,
    `  per short stream (${r.framesPerShortStream} frames)                                ${n(r.cpuPerShortStreamUs)} us`,
    `  per chunk (${r.framesPerLongStream}-frame streams less short ones)                 ${n(r.cpuPerChunkUs)} us`,
    `  fixed per stream (short stream less its frames)           ${n(r.fixedCpuPerStreamUs)} us`,
    ...(r.instructions === undefined
      ? []
      : [
          `instructions (callgrind, every thread): per request ${Math.round(r.instructions.perRequest)}, per short stream ${Math.round(r.instructions.perShortStream)}, ` +
            `per chunk ${Math.round(r.instructions.perChunk)}, fixed per stream ${Math.round(r.instructions.fixedPerStream)}`,
        ]),
    `main thread per non-streamed request, by part (profile, ${n(total(r.profilePerRequestUs))} us sampled):`,
    ...rows(r.profilePerRequestUs, 'us'),
    `main thread per short stream, by part (${n(total(r.profilePerStreamUs))} us sampled):`,
    ...rows(r.profilePerStreamUs, 'us'),
    `bytes allocated per non-streamed request, by part (${n(total(r.allocatedPerRequestBytes))} B):`,
    ...rows(r.allocatedPerRequestBytes, 'B '),
    `bytes allocated per short stream, by part (${n(total(r.allocatedPerStreamBytes))} B):`,
    ...rows(r.allocatedPerStreamBytes, 'B '),
    '',
  ].join('\n');
}

if (require.main === module) {
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(`[cpu] failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exit(1);
    },
  );
}
