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
import { Writable } from 'node:stream';
import type { APIGatewayProxyEventV2, Context } from 'aws-lambda';
import { EmfTelemetry } from '../lambdas/adapters/emf-telemetry';
import { SseRelay } from '../lambdas/core/sse';
import { streamingHandler } from '../lambdas/gateway/streaming';
import { middyStreamingHandler } from './middy-streaming';
import type { Gateway } from '../lambdas/gateway/app';
import type { GatewayRequest, ResponseSink } from '../lambdas/gateway/ports';
import { RAW_KEY, memoryGateway } from '../test/support/memory-ports';

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
  /** Through the handler: the `@middy/core` streaming handler deployed until issue 21, and the plain `streamifyResponse` handler deployed now. */
  readonly handler: {
    readonly middyPerRequestUs: number;
    readonly plainPerRequestUs: number;
    readonly middyPerChunkUs: number;
    readonly plainPerChunkUs: number;
  };
  /** Per chunk with the relay's byte scan turned off, so every frame is decoded and `JSON.parse`d (the relay before `sse-scan.ts`). */
  readonly perChunkNoScanUs: number;
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

/** A Lambda response stream that counts and discards what it is given. */
export function discard(): Writable & { bytes: number; setContentType(type: string): void } {
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      stream.bytes += chunk.length;
      done();
    },
  }) as Writable & { bytes: number; setContentType(type: string): void };
  stream.bytes = 0;
  stream.setContentType = () => undefined;
  return stream;
}

/** A Function URL event for a chat request with `rawKey` (the in-memory ports' key by default). */
export function functionUrlEvent(body: Buffer, rawKey: string = RAW_KEY): APIGatewayProxyEventV2 {
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath: '/v1/chat/completions',
    rawQueryString: '',
    headers: { authorization: `Bearer ${rawKey}`, 'content-type': 'application/json' },
    requestContext: { http: { method: 'POST', path: '/v1/chat/completions', protocol: 'HTTP/1.1', sourceIp: '127.0.0.1', userAgent: 'bench' } },
    body: body.toString('utf8'),
    isBase64Encoded: false,
  } as unknown as APIGatewayProxyEventV2;
}

/** The real gateway on the in-memory ports of `test/support/memory-ports.ts`; the EMF line is built as deployed, only its write is left out. */
function gatewayInMemory(reply: { chunks: readonly Buffer[] }): Gateway {
  return memoryGateway({
    telemetry: new EmfTelemetry('bench', () => undefined),
    replies: () => ({ status: 200, chunks: reply.chunks }),
    record: false,
  }).gateway;
}

async function cpuOf(n: number, serve: () => Promise<void>): Promise<number> {
  const c0 = process.cpuUsage();
  for (let i = 0; i < n; i += 1) await serve();
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / n;
}

/** Serves `requests` non-streamed requests and streams of two lengths after a warm-up. */
export async function measureOwnCpu(requests: number): Promise<OwnCpu> {
  const reply = { chunks: [completion()] as readonly Buffer[] };
  const gateway = gatewayInMemory(reply);
  const headers = { authorization: `Bearer ${RAW_KEY}`, 'content-type': 'application/json' };
  const request = (stream: boolean): GatewayRequest => ({ method: 'POST', path: '/v1/chat/completions', headers, body: chatBody(stream), traceId: 't' });
  const serve = async (stream: boolean, minBytes: number): Promise<void> => {
    const sink = nullSink();
    await gateway.serve(request(stream), sink);
    if (sink.status !== 200 || sink.bytes < minBytes) throw new Error(`the in-memory gateway answered ${sink.status} with ${sink.bytes} bytes`);
  };

  const nonStreamed = async (): Promise<void> => {
    reply.chunks = [completion()];
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
      reply.chunks = frames;
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
  const perChunk = (long: number, short: number): number => (long - short) / (longFrames.length - shortFrames.length);

  // The scan's worth: the same streams with every frame decoded and parsed in full.
  const relay = SseRelay.prototype as unknown as { quick: (frame: Buffer) => Buffer | null };
  const quick = relay.quick;
  relay.quick = () => null;
  let perChunkNoScanUs: number;
  try {
    for (let i = 0; i < 100; i += 1) await streamed(longFrames)();
    perChunkNoScanUs = perChunk(await cpuOf(streams, streamed(longFrames)), await cpuOf(streams, streamed(shortFrames)));
  } finally {
    relay.quick = quick;
  }

  // What middy cost: the same requests through the handler as deployed (the plain
  // `streamifyResponse` one), against the middy streaming handler it replaced in issue 21, both
  // over a response stream that discards bytes.
  const middyHandler = middyStreamingHandler(gateway);
  const plainHandler = streamingHandler(gateway);
  const context = { awsRequestId: 'bench' } as Context;
  const viaHandler = (handler: (e: APIGatewayProxyEventV2, s: Writable, c: Context) => Promise<void>, stream: boolean, frames?: Buffer[]) => async (): Promise<void> => {
    reply.chunks = frames ?? [completion()];
    const sinkStream = discard();
    await handler(functionUrlEvent(chatBody(stream)), sinkStream, context);
    if (sinkStream.bytes < 100) throw new Error(`the ${handler === plainHandler ? 'plain' : 'middy'} handler wrote ${sinkStream.bytes} bytes`);
  };
  for (const h of [middyHandler, plainHandler]) {
    for (let i = 0; i < 1_000; i += 1) await viaHandler(h, false)();
    for (let i = 0; i < 100; i += 1) await viaHandler(h, true, longFrames)();
  }
  const handlerFigures = async (h: typeof plainHandler): Promise<{ req: number; chunk: number }> => ({
    req: await cpuOf(requests, viaHandler(h, false)),
    chunk: perChunk(await cpuOf(streams, viaHandler(h, true, longFrames)), await cpuOf(streams, viaHandler(h, true, shortFrames))),
  });
  const middy = await handlerFigures(middyHandler);
  const plain = await handlerFigures(plainHandler);

  return {
    perRequestUs,
    perChunkUs: perChunk(longUs, shortUs),
    perShortStreamUs: shortUs,
    requests,
    framesPerLongStream: longFrames.length,
    handler: { middyPerRequestUs: middy.req, plainPerRequestUs: plain.req, middyPerChunkUs: middy.chunk, plainPerChunkUs: plain.chunk },
    perChunkNoScanUs,
  };
}

if (require.main === module) {
  void measureOwnCpu(Number(process.argv[2] ?? 5_000)).then((r) => console.log(JSON.stringify(r)));
}
