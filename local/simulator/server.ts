/**
 * The simulator's HTTP server: an OpenAI-compatible provider on loopback with scripted
 * behaviors and faults. It is also the "direct" side of latency benchmarks, so the request path
 * does no logging and no work beyond parsing the body and rendering the reply.
 */
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { BehaviorBook, BehaviorError, type Behavior, type ReplyOptions } from './behavior';
import { CHAT_DONE_FRAME, chatCompletionBody, chatErrorFrame, chatStreamFrames, malformedChatFrame, readChatRequest, type ReplyMeta } from './chat';
import { defaultError, errorBody, invalidApiKey, invalidUrl, missingApiKey, unparsableBody, type OpenAiErrorBody } from './errors';
import { IdSource, planReply, type PlanRequest, type ReplyPlan } from './plan';
import { malformedResponsesFrame, readResponsesRequest, responseBody, responsesErrorFrame, responseStreamFrames } from './responses';
import { escapeJsonText, isRecord, unixSeconds, type Parsed, type SplitBody } from './wire';

/** How to start a simulator. */
export interface SimulatorOptions {
  /** @default 0 (a free port) */
  readonly port?: number;
  /** @default '127.0.0.1' */
  readonly host?: string;
  /** Keys accepted as credentials. @default undefined: any request is accepted, with or without a key */
  readonly acceptedKeys?: readonly string[];
  /**
   * The header carrying the key, lower-case. `authorization` expects `Bearer <key>`; any other
   * header (e.g. `x-api-key`, `api-key`) carries the bare key. @default 'authorization'
   */
  readonly authHeader?: string;
  /** Delay between streamed frames, unless a behavior says otherwise. @default 0 */
  readonly chunkDelayMs?: number;
  /** Refuse requests without a token ceiling, as some providers do. @default false */
  readonly requireMaxTokens?: boolean;
  /** Keep {@link Simulator.recorded}; benchmarks turn it off so memory stays flat. @default true */
  readonly record?: boolean;
  /** Ids listed by `GET /v1/models`. @default ['sim-small', 'sim-large', 'sim-reasoning'] */
  readonly models?: readonly string[];
}

/** One request as received, before it was answered. */
export interface RecordedRequest {
  readonly method: string;
  /** Path and query as sent, e.g. `/v1/chat/completions`. */
  readonly path: string;
  /** Lower-cased names; repeated headers joined with `, `. */
  readonly headers: Record<string, string>;
  readonly rawBody: string;
  /** The parsed body, or undefined when empty or not JSON. */
  readonly json: unknown;
  /** `Date.now()` when the body had been read. */
  readonly receivedAt: number;
  /** Which TCP connection it came on (1, 2, … in accept order): equal ids mean a reused keep-alive socket. */
  readonly connection: number;
}

/** A running simulator. */
export interface Simulator {
  /** Base URL including `/v1`, ready for `new OpenAI({ baseURL })`. */
  readonly url: string;
  readonly port: number;
  /** Every provider request received, in order (control-surface calls are not recorded). */
  readonly recorded: RecordedRequest[];
  clearRecorded(): void;
  /**
   * Queues behaviors for requests whose body `model` is exactly `model`, one per request;
   * once the queue is empty the default applies again.
   * @throws BehaviorError when a behavior is malformed
   */
  script(model: string, behaviors: Behavior[]): void;
  /** A standing behavior for one model, or for all with `'*'` (a model's own default wins). */
  setDefault(model: string | '*', behavior: Behavior): void;
  /** Clears scripts, defaults and recorded requests. */
  reset(): void;
  /** Stops listening and destroys open sockets, in-flight streams included. */
  close(): Promise<void>;
}

const DEFAULT_MODELS: readonly string[] = ['sim-small', 'sim-large', 'sim-reasoning'];
const MODEL_CREATED = 1_700_000_000;
const FINGERPRINT = 'fp_sluicesim';
/** Above this many tokens a non-streamed body is written in pieces rather than built whole. */
const WHOLE_BODY_MAX_TOKENS = 4096;
const PIECES_PER_WRITE = 2048;
/** setTimeout's ceiling; a larger delay would fire after 1 ms instead. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Resolves after `ms`, or at once when `signal` aborts, so no timer outlives its request. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted || ms <= 0) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, Math.min(ms, MAX_TIMER_MS));
    signal.addEventListener('abort', done, { once: true });
  });
}

/**
 * Lets the event loop turn. Node's response corks the socket until the next tick, so frames
 * written in one turn would leave in one TCP segment; a turn between frames keeps them apart.
 */
function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Writes with backpressure; false once the client has gone. */
function write(res: http.ServerResponse, chunk: string, signal: AbortSignal): boolean | Promise<boolean> {
  if (signal.aborted || res.destroyed) return false;
  if (res.write(chunk)) return true;
  return new Promise((resolve) => {
    const done = (): void => {
      res.off('drain', done);
      signal.removeEventListener('abort', done);
      resolve(!signal.aborted);
    };
    res.on('drain', done);
    signal.addEventListener('abort', done, { once: true });
  });
}

function readBody(req: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function flatHeaders(headers: http.IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

function sendJson(res: http.ServerResponse, status: number, body: unknown, headers: Readonly<Record<string, string>> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** One completion endpoint's request and renderers, so faults are applied in one place. */
interface Completion {
  readonly plan: PlanRequest;
  readonly stream: boolean;
  readonly idPrefix: string;
  body(plan: ReplyPlan, meta: ReplyMeta): SplitBody;
  frames(plan: ReplyPlan, meta: ReplyMeta): Iterable<string>;
  /** The terminator written after the last frame, if the protocol has one. */
  readonly done: string | null;
  malformedFrame(meta: ReplyMeta): string;
  errorFrame(error: OpenAiErrorBody['error'], framesWritten: number): string;
}

/** Starts a simulator listening on loopback. */
export async function startSimulator(options: SimulatorOptions = {}): Promise<Simulator> {
  const host = options.host ?? '127.0.0.1';
  const accepted = options.acceptedKeys === undefined ? undefined : new Set(options.acceptedKeys);
  const authHeader = (options.authHeader ?? 'authorization').toLowerCase();
  const defaultChunkDelay = options.chunkDelayMs ?? 0;
  const requireMaxTokens = options.requireMaxTokens === true;
  const keepRecords = options.record !== false;
  const modelIds = options.models ?? DEFAULT_MODELS;

  const book = new BehaviorBook();
  const ids = new IdSource();
  const recorded: RecordedRequest[] = [];
  const sockets = new Set<Socket>();
  const connectionIds = new WeakMap<Socket, number>();
  let connections = 0;

  function checkAuth(headers: http.IncomingHttpHeaders): OpenAiErrorBody | undefined {
    if (accepted === undefined) return undefined;
    const raw = headers[authHeader];
    const value = Array.isArray(raw) ? raw[0] : raw;
    let key: string | undefined = value;
    if (authHeader === 'authorization' && value !== undefined) {
      const match = /^Bearer\s+(.+)$/i.exec(value);
      key = match ? match[1].trim() : undefined;
    }
    if (key === undefined || key.length === 0) return missingApiKey();
    return accepted.has(key) ? undefined : invalidApiKey(key);
  }

  function sendError(res: http.ServerResponse, behavior: Extract<Behavior, { kind: 'error' }>, model: string | undefined): void {
    const headers: Record<string, string> = { 'x-request-id': ids.next('req_'), ...behavior.headers };
    if (typeof behavior.body === 'string') {
      res.writeHead(behavior.status, { 'content-type': 'text/plain; charset=utf-8', ...headers, 'content-length': Buffer.byteLength(behavior.body) });
      res.end(behavior.body);
      return;
    }
    sendJson(res, behavior.status, behavior.body !== undefined ? behavior.body : defaultError(behavior.status, model, behavior), headers);
  }

  /** A non-streamed body: one write when small, piecewise (chunked) when huge. */
  async function sendBody(res: http.ServerResponse, headers: Record<string, string>, split: SplitBody, signal: AbortSignal): Promise<void> {
    const { head, text, tail } = split;
    if (text.length <= WHOLE_BODY_MAX_TOKENS) {
      let body = head;
      for (let i = 0; i < text.length; i++) body += escapeJsonText(text.at(i));
      body += tail;
      res.writeHead(200, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
      return;
    }
    res.writeHead(200, { ...headers, 'content-type': 'application/json' });
    if (!(await write(res, head, signal))) return;
    for (let i = 0; i < text.length; i += PIECES_PER_WRITE) {
      let piece = '';
      const end = Math.min(i + PIECES_PER_WRITE, text.length);
      for (let j = i; j < end; j++) piece += escapeJsonText(text.at(j));
      if (!(await write(res, piece, signal))) return;
    }
    res.end(tail);
  }

  async function complete(res: http.ServerResponse, completion: Completion, behavior: Behavior, signal: AbortSignal): Promise<void> {
    const model = completion.plan.model;
    if (behavior.kind === 'error') {
      sendError(res, behavior, model);
      return;
    }
    const reply: ReplyOptions = behavior;
    await sleep(reply.stallBeforeFirstByteMs ?? 0, signal);
    // A mid-stream stall has no middle to happen in when the reply is one body: stall up front.
    const stallFirst = behavior.kind === 'stall' && (behavior.afterChunks === undefined || !completion.stream);
    if (stallFirst) await sleep(behavior.ms, signal);
    if (signal.aborted) return;
    if (behavior.kind === 'reset' && (!completion.stream || behavior.beforeHeaders === true)) {
      res.socket?.destroy();
      return;
    }

    const plan = planReply(completion.plan, reply, ids);
    const meta: ReplyMeta = { id: ids.next(completion.idPrefix), created: unixSeconds(), fingerprint: FINGERPRINT };
    const headers: Record<string, string> = { 'x-request-id': ids.next('req_'), ...reply.headers };
    const errorFields = (): OpenAiErrorBody =>
      behavior.kind === 'stream-error' ? defaultError(500, model, behavior) : defaultError(500, model);

    if (!completion.stream) {
      if (behavior.kind === 'malformed') {
        const truncated = completion.body(plan, meta).head.slice(0, 40);
        res.writeHead(200, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(truncated) });
        res.end(truncated);
      } else if (behavior.kind === 'stream-error') {
        sendJson(res, 500, errorFields(), headers);
      } else {
        await sendBody(res, headers, completion.body(plan, meta), signal);
      }
      return;
    }

    res.writeHead(200, { ...headers, 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
    res.flushHeaders();
    await nextTurn();
    const delay = reply.chunkDelayMs ?? defaultChunkDelay;
    const faultAt = behavior.kind === 'ok' || stallFirst ? -1 : behavior.afterChunks ?? -1;

    /** Applies the behavior's fault; true when the stream is over. */
    const fault = async (written: number): Promise<boolean> => {
      switch (behavior.kind) {
        case 'reset':
          res.socket?.destroy();
          return true;
        case 'malformed':
          if (await write(res, completion.malformedFrame(meta), signal)) res.end();
          return true;
        case 'stream-error':
          if (await write(res, completion.errorFrame(errorFields().error, written), signal)) res.end();
          return true;
        case 'stall':
          await sleep(behavior.ms, signal);
          return signal.aborted;
        default:
          return false;
      }
    };

    let written = 0;
    let faulted = false;
    for (const frame of completion.frames(plan, meta)) {
      if (written > 0) {
        if (delay > 0) await sleep(delay, signal);
        else await nextTurn();
      }
      if (written === faultAt) {
        faulted = true;
        if (await fault(written)) return;
      }
      if (!(await write(res, frame, signal))) return;
      written++;
    }
    await nextTurn();
    if (faultAt >= 0 && !faulted && (await fault(written))) return;
    if (signal.aborted) return;
    if (completion.done !== null) res.end(completion.done);
    else res.end();
  }

  function chatCompletion(json: unknown, bodyBytes: number): Parsed<Completion> {
    const parsed = readChatRequest(json, bodyBytes, requireMaxTokens);
    if (!parsed.ok) return parsed;
    const { plan, stream, includeUsage } = parsed.value;
    return {
      ok: true,
      value: {
        plan,
        stream,
        idPrefix: 'chatcmpl-',
        body: chatCompletionBody,
        frames: (p, meta) => chatStreamFrames(p, meta, includeUsage),
        done: CHAT_DONE_FRAME,
        malformedFrame: malformedChatFrame,
        errorFrame: (error) => chatErrorFrame({ error }),
      },
    };
  }

  function responsesCompletion(json: unknown, bodyBytes: number): Parsed<Completion> {
    const parsed = readResponsesRequest(json, bodyBytes, requireMaxTokens);
    if (!parsed.ok) return parsed;
    const { plan, stream, echo } = parsed.value;
    return {
      ok: true,
      value: {
        plan,
        stream,
        idPrefix: 'resp_',
        body: (p, meta) => responseBody(p, meta, echo),
        frames: (p, meta) => responseStreamFrames(p, meta, echo),
        done: null,
        malformedFrame: malformedResponsesFrame,
        // Sequence numbers start at 0, so the count of frames written is the next one.
        errorFrame: (error, written) => responsesErrorFrame(error, written),
      },
    };
  }

  function listModels(res: http.ServerResponse, path: string): void {
    const data = modelIds.map((id) => ({ id, object: 'model', created: MODEL_CREATED, owned_by: 'sluice-simulator' }));
    if (path === '/v1/models') {
      sendJson(res, 200, { object: 'list', data });
      return;
    }
    const id = decodeURIComponent(path.slice('/v1/models/'.length));
    const model = data.find((m) => m.id === id);
    if (model !== undefined) sendJson(res, 200, model);
    else sendJson(res, 404, defaultError(404, id));
  }

  function control(req: http.IncomingMessage, res: http.ServerResponse, path: string, json: unknown): void {
    const route = `${req.method ?? ''} ${path}`;
    try {
      switch (route) {
        case 'POST /_sim/script':
          if (!isRecord(json) || typeof json.model !== 'string' || !Array.isArray(json.behaviors)) {
            throw new BehaviorError('expected {"model": string, "behaviors": Behavior[]}');
          }
          book.script(json.model, json.behaviors);
          break;
        case 'POST /_sim/default':
          if (!isRecord(json) || typeof json.model !== 'string') throw new BehaviorError('expected {"model": string, "behavior": Behavior}');
          book.setDefault(json.model, json.behavior);
          break;
        case 'POST /_sim/reset':
          book.clear();
          recorded.length = 0;
          break;
        case 'GET /_sim/recorded':
          sendJson(res, 200, recorded);
          return;
        case 'DELETE /_sim/recorded':
          recorded.length = 0;
          break;
        default:
          sendJson(res, 404, invalidUrl(req.method ?? '', path));
          return;
      }
      sendJson(res, 200, { ok: true });
    } catch (error) {
      if (!(error instanceof BehaviorError)) throw error;
      sendJson(res, 400, errorBody(error.message, 'invalid_request_error', null, null));
    }
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const abort = new AbortController();
    res.on('close', () => abort.abort());
    const raw = await readBody(req);
    const receivedAt = Date.now();
    const url = req.url ?? '/';
    const query = url.indexOf('?');
    const path = query < 0 ? url : url.slice(0, query);
    const rawBody = raw.toString('utf8');
    let json: unknown;
    if (rawBody.length > 0) {
      try {
        json = JSON.parse(rawBody);
      } catch {
        json = undefined;
      }
    }
    if (path.startsWith('/_sim/')) {
      control(req, res, path, json);
      return;
    }
    const method = req.method ?? '';
    if (keepRecords) recorded.push({ method, path: url, headers: flatHeaders(req.headers), rawBody, json, receivedAt, connection: connectionIds.get(req.socket) ?? 0 });

    const authError = checkAuth(req.headers);
    if (authError !== undefined) {
      sendJson(res, 401, authError);
      return;
    }
    if (method === 'GET' && (path === '/v1/models' || path.startsWith('/v1/models/'))) {
      listModels(res, path);
      return;
    }
    const reader = method !== 'POST' ? undefined : path === '/v1/chat/completions' ? chatCompletion : path === '/v1/responses' ? responsesCompletion : undefined;
    if (reader === undefined) {
      sendJson(res, 404, invalidUrl(method, path));
      return;
    }
    if (json === undefined) {
      sendJson(res, 400, unparsableBody());
      return;
    }
    const completion = reader(json, raw.length);
    if (!completion.ok) {
      sendJson(res, completion.status, completion.body);
      return;
    }
    await complete(res, completion.value, book.next(completion.value.plan.model), abort.signal);
  }

  // Idle keep-alive connections stay open a minute (Node's default is 5 s): a client reusing one just
  // as a short server timeout fires meets a reset, a race real providers rarely run (issue 14).
  const server = http.createServer({ noDelay: true, keepAliveTimeout: 65_000 }, (req, res) => {
    handle(req, res).catch(() => {
      // A bug or a vanished client: answer if still possible, never take the simulator down.
      if (res.headersSent || req.destroyed) res.destroy();
      else sendJson(res, 500, defaultError(500, undefined));
    });
  });
  server.on('connection', (socket: Socket) => {
    socket.setNoDelay(true);
    sockets.add(socket);
    connections += 1;
    connectionIds.set(socket, connections);
    socket.on('close', () => sockets.delete(socket));
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const urlHost = host.includes(':') ? `[${host}]` : host;

  return {
    url: `http://${urlHost}:${port}/v1`,
    port,
    recorded,
    clearRecorded: () => {
      recorded.length = 0;
    },
    script: (model, behaviors) => book.script(model, behaviors),
    setDefault: (model, behavior) => book.setDefault(model, behavior),
    reset: () => {
      book.clear();
      recorded.length = 0;
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        for (const socket of sockets) socket.destroy();
      }),
  };
}
