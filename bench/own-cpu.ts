/**
 * Sluice's own CPU per request and per chunk, apart from the machine's I/O costs: the real
 * `Gateway` (key check, routing, pricing, body rewrite, relay, SSE parsing, settlement figures,
 * the EMF line's JSON) serves requests in this process with its ports answered from memory: no
 * socket, no syscall, no wait. The ports do the least they can (a map lookup, a canned reply), so
 * nearly all of the measured time is Sluice's code and the Node built-ins it calls.
 *
 * Why it exists: on the benchmark machine a process pays for every socket write and every wake-up
 * from idle far more than a typical server does (see the README), so the gateway process's CPU
 * per request mostly measures the machine. This figure is the part the code controls. It does not
 * replace the process figure; the benchmark reports both.
 */
import { Readable } from 'node:stream';
import { loadCatalogFiles } from '../local/ops';
import { EmfTelemetry } from '../lambdas/adapters/emf-telemetry';
import { hashKey } from '../lambdas/core/api-key';
import { Gateway, type GatewayRequest } from '../lambdas/gateway/app';
import type { AdmitRequest, Catalog, Ledger, ResponseSink, Upstream, UpstreamRequest } from '../lambdas/gateway/ports';
import { loadConfig } from '../lambdas/shared/config';
import type { HoldRecord, KeyRecord, WorkspaceRecord } from '../lambdas/shared/records';

const RAW_KEY = `slc_dev_${'a'.repeat(43)}`;
const MODEL = 'local/sim-small';

export interface OwnCpu {
  /** Microseconds of CPU per non-streamed request. */
  readonly perRequestUs: number;
  /** Microseconds per streamed chunk beyond a short stream's fixed part. */
  readonly perChunkUs: number;
  /** Microseconds of CPU per short stream (its fixed part plus a few chunks). */
  readonly perShortStreamUs: number;
  readonly requests: number;
  readonly framesPerLongStream: number;
}

function chatBody(stream: boolean): Buffer {
  return Buffer.from(
    JSON.stringify({
      model: MODEL,
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: 'Say hello in one word, please.' },
      ],
      max_tokens: 16,
      ...(stream ? { stream: true } : {}),
    }),
  );
}

/** A provider's non-streamed reply, as the simulator writes it. */
function completion(): Buffer {
  return Buffer.from(
    JSON.stringify({
      id: 'chatcmpl-own',
      object: 'chat.completion',
      created: 1_763_800_000,
      model: 'sim-small',
      choices: [{ index: 0, message: { role: 'assistant', content: 'Hello.', refusal: null }, logprobs: null, finish_reason: 'stop' }],
      usage: { prompt_tokens: 21, completion_tokens: 2, total_tokens: 23, prompt_tokens_details: { cached_tokens: 0 }, completion_tokens_details: { reasoning_tokens: 0 } },
    }),
  );
}

/** A provider's stream of `tokens` content chunks, the finish chunk, the usage chunk and `[DONE]`, one frame per buffer. */
function streamFrames(tokens: number): Buffer[] {
  const base = { id: 'chatcmpl-own', object: 'chat.completion.chunk', created: 1_763_800_000, model: 'sim-small', system_fingerprint: null };
  const frame = (value: unknown): Buffer => Buffer.from(`data: ${JSON.stringify(value)}\n\n`);
  const frames = [frame({ ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }] })];
  for (let i = 0; i < tokens; i += 1) frames.push(frame({ ...base, choices: [{ index: 0, delta: { content: ` tok${i}` }, logprobs: null, finish_reason: null }] }));
  frames.push(frame({ ...base, choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }] }));
  frames.push(frame({ ...base, choices: [], usage: { prompt_tokens: 21, completion_tokens: tokens, total_tokens: 21 + tokens, prompt_tokens_details: { cached_tokens: 0 }, completion_tokens_details: { reasoning_tokens: 0 } } }));
  frames.push(Buffer.from('data: [DONE]\n\n'));
  return frames;
}

/** A sink that keeps nothing: a response's bytes go nowhere. */
function nullSink(): ResponseSink & { bytes: number; status: number } {
  const sink = {
    started: false,
    bytes: 0,
    status: 0,
    start(status: number): void {
      sink.started = true;
      sink.status = status;
    },
    write(chunk: Buffer): Promise<void> {
      sink.bytes += chunk.length;
      return Promise.resolve();
    },
    end(): Promise<void> {
      return Promise.resolve();
    },
  };
  return sink;
}

function gatewayInMemory(reply: { current: () => Readable; stream: boolean }): Gateway {
  const now = Date.now();
  const key: KeyRecord = { keyHash: hashKey(RAW_KEY), keyId: 'key_own', workspaceId: 'ws_own', visible: 'slc_dev_…aaaa', createdAt: now };
  const workspace: WorkspaceRecord = { pk: 'ws_own', sk: 'META', workspaceId: 'ws_own', name: 'own', createdAt: now, paused: false };
  const { providers, models } = loadCatalogFiles();
  const catalog: Catalog = {
    model: (id) => Promise.resolve(models.find((m) => m.id === id)),
    models: () => Promise.resolve(models),
    provider: (name) => Promise.resolve(providers.find((p) => p.name === name)),
    providers: () => Promise.resolve(providers),
  };
  const ledger: Ledger = {
    admit: (r: AdmitRequest) => {
      const hold: HoldRecord = {
        holdId: r.holdId,
        workspaceId: r.workspaceId,
        keyId: r.keyId,
        family: r.family,
        requestedModel: r.requestedModel,
        amountMicros: r.amountMicros,
        inputMicros: r.inputMicros,
        windows: ['KEYWIN#key_own#m', 'WSMONTH#m'],
        byok: r.byok,
        createdAt: r.now,
        expiresAt: r.expiresAt,
        open: '1',
        ttl: 0,
      };
      return Promise.resolve({ admitted: true, hold });
    },
    settle: () => Promise.resolve(true),
    extend: () => Promise.resolve(true),
    countRequest: () => Promise.resolve({}),
  };
  const upstream: Upstream = {
    send: (_r: UpstreamRequest) =>
      Promise.resolve({ status: 200, headers: { 'content-type': reply.stream ? 'text/event-stream' : 'application/json' }, body: reply.current() }),
  };
  let id = 0;
  return new Gateway({
    config: loadConfig({ SLUICE_STAGE: 'bench', SLUICE_KEY_RATE_PER_MINUTE: '100000000' }),
    keys: { findByHash: (h) => Promise.resolve(h === key.keyHash ? key : undefined) },
    workspaces: { workspace: () => Promise.resolve(workspace), member: () => Promise.resolve(undefined), profile: () => Promise.resolve(undefined) },
    catalog,
    secrets: { get: () => Promise.resolve('sk-provider-key') },
    ledger,
    upstream,
    // The EMF line is built as deployed; only its write (a syscall) is left out.
    telemetry: new EmfTelemetry('bench', () => undefined),
    env: { SLUICE_LOCAL_UPSTREAM_URL: 'http://127.0.0.1:9/v1' },
    clock: Date.now,
    newId: () => `own${(id += 1)}`,
  });
}

async function cpuOf(n: number, serve: () => Promise<void>): Promise<number> {
  const c0 = process.cpuUsage();
  for (let i = 0; i < n; i += 1) await serve();
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / n;
}

/** Serves `requests` non-streamed requests and streams of two lengths after a warm-up. */
export async function measureOwnCpu(requests: number): Promise<OwnCpu> {
  const reply = { current: (): Readable => Readable.from([completion()]), stream: false };
  const gateway = gatewayInMemory(reply);
  const headers = { authorization: `Bearer ${RAW_KEY}`, 'content-type': 'application/json' };
  const request = (stream: boolean): GatewayRequest => ({ method: 'POST', path: '/v1/chat/completions', headers, body: chatBody(stream), traceId: 't' });
  const serve = async (stream: boolean, minBytes: number): Promise<void> => {
    const sink = nullSink();
    await gateway.serve(request(stream), sink);
    if (sink.status !== 200 || sink.bytes < minBytes) throw new Error(`the in-memory gateway answered ${sink.status} with ${sink.bytes} bytes`);
  };

  const nonStreamed = async (): Promise<void> => {
    reply.stream = false;
    reply.current = () => Readable.from([completion()]);
    await serve(false, 100);
  };
  const LONG = 200;
  const SHORT = 2;
  const longFrames = streamFrames(LONG);
  const shortFrames = streamFrames(SHORT);
  const streamed = (frames: Buffer[]) => {
    // The injected usage frame is withheld from the client; every other byte reaches it.
    const least = frames.slice(0, -2).reduce((n, f) => n + f.length, 0);
    return async (): Promise<void> => {
      reply.stream = true;
      reply.current = () => Readable.from(frames);
      await serve(true, least);
    };
  };

  for (let i = 0; i < 2_000; i += 1) await nonStreamed();
  for (let i = 0; i < 200; i += 1) await streamed(longFrames)();
  for (let i = 0; i < 500; i += 1) await streamed(shortFrames)();

  const perRequestUs = await cpuOf(requests, nonStreamed);
  const streams = Math.max(50, Math.floor(requests / 10));
  const longUs = await cpuOf(streams, streamed(longFrames));
  const shortUs = await cpuOf(streams, streamed(shortFrames));
  return {
    perRequestUs,
    perChunkUs: (longUs - shortUs) / (longFrames.length - shortFrames.length),
    perShortStreamUs: shortUs,
    requests,
    framesPerLongStream: longFrames.length,
  };
}

if (require.main === module) {
  void measureOwnCpu(Number(process.argv[2] ?? 5_000)).then((r) => console.log(JSON.stringify(r)));
}
