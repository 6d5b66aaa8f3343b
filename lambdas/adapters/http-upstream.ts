/**
 * Provider calls on this module's own keep-alive HTTP/1.1 connections: the request goes out in one
 * write, the reply's head is parsed as it arrives, and its body is a Readable the relay consumes
 * chunk by chunk, fed from the socket as the provider sends it (paused while the relay cannot take
 * more), so nothing is buffered beyond what the client has not read.
 *
 * Node's `http.request` gives every call a `ClientRequest`, an `IncomingMessage` and the agent's
 * bookkeeping: about 100 us of CPU an exchange more than this, measured in one process against
 * the same server (docs/gateway.md). What it kept of Node's client, this keeps: `Host` and
 * `Connection: keep-alive`; header names and values checked (a provider key with a line break is
 * refused, as Node refuses it); replies framed by `Content-Length`, chunked, or by the end of the
 * connection (`http1-pool.ts` reads them); `1xx` replies skipped; repeated reply headers joined as
 * `IncomingMessage` joins them; the call's `AbortSignal` ending it at any point, the body
 * included; TLS for `https:` origins, resuming the last session; at most 256 sockets an origin,
 * further calls waiting for one.
 *
 * A pooled connection can be closed by the provider just as it is reused (its idle timeout fired
 * while the request was on its way). Two things keep that from failing a request without ever
 * sending one twice: idle pooled connections are closed by this side first (after
 * `idleSocketMs`, under the 5 s idle timeout of Node-based servers and well under the usual
 * providers'), and a request whose write the kernel refused outright (EPIPE on a reused socket,
 * before any byte of an answer: nothing reached the provider) is sent again, once, on a fresh
 * connection. A reset after the request went out is not retried here: the provider may have read
 * it, and a route moves on to its next model instead.
 *
 * A connection carries another call only once its reply was read to the end; a body left unread
 * (destroyed by the relay, or by an abort) closes its connection.
 */
import type net from 'node:net';
import { Readable } from 'node:stream';
import type tls from 'node:tls';
import type { Upstream, UpstreamRequest, UpstreamResponse } from '../gateway/ports';
import { ReplyReader, openSocket, popWritable, socketTarget, type SocketTarget } from './http1-pool';

/** Idle pooled connections are closed after this long, before the provider's side closes them. */
export const DEFAULT_IDLE_SOCKET_MS = 4_000;

/** Sockets open at once to one origin, as the agent this replaced allowed; further calls wait. */
const MAX_SOCKETS = 256;

/** The kernel refused the write: the peer had already closed, so nothing of the request left. */
const CLOSED_AT_REUSE = new Set(['EPIPE']);

/** How a failed attempt can be told apart from one the provider may have seen. */
export function closedAtReuse(err: unknown, reusedSocket: boolean, answered: boolean): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return reusedSocket && !answered && typeof code === 'string' && CLOSED_AT_REUSE.has(code);
}

/** Options of {@link HttpUpstream}. */
export interface HttpUpstreamOptions {
  /** Extra TLS options for `https:` origins (tests: the `ca` of a self-signed server). @default none */
  readonly tls?: Pick<tls.ConnectionOptions, 'ca'>;
}

export class HttpUpstream implements Upstream {
  private readonly origins = new Map<string, Origin>();
  private readonly targets = new Map<string, Target>();
  /** Requests sent again on a fresh connection after their pooled one was found closed. */
  resent = 0;

  /** @param idleSocketMs how long a pooled connection may sit idle before this side closes it */
  constructor(
    private readonly idleSocketMs = DEFAULT_IDLE_SOCKET_MS,
    private readonly options: HttpUpstreamOptions = {},
  ) {}

  async send(request: UpstreamRequest): Promise<UpstreamResponse> {
    const { origin, requestLine } = this.target(request.url);
    const head = requestHead(requestLine, request);
    try {
      return await origin.exchange(head, request.body, request.signal, true);
    } catch (err) {
      if (!(err instanceof PooledConnectionClosedError) || request.signal.aborted) throw err instanceof PooledConnectionClosedError ? err.cause : err;
      this.resent += 1;
      // The retry takes a connection of its own (the pool could hand out another stale one).
      return origin.exchange(head, request.body, request.signal, false);
    }
  }

  /**
   * Where a URL goes and its request line with `Host`, parsed once: a gateway calls the same few
   * endpoints (a URL's parse was about 15 us of every call). At most 256 are kept.
   */
  private target(text: string): Target {
    let target = this.targets.get(text);
    if (target !== undefined) return target;
    const url = new URL(text);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw Object.assign(new TypeError(`Protocol "${url.protocol}" not supported. Expected "http:"`), { code: 'ERR_INVALID_PROTOCOL' });
    let origin = this.origins.get(url.origin);
    if (origin === undefined) {
      origin = new Origin(url, this.idleSocketMs, this.options.tls ?? {});
      this.origins.set(url.origin, origin);
    }
    target = { origin, requestLine: `POST ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\n` };
    if (this.targets.size >= 256) this.targets.clear();
    this.targets.set(text, target);
    return target;
  }

  /** Sockets open now to every origin, idle or busy (tests). */
  get openSockets(): number {
    let open = 0;
    for (const origin of this.origins.values()) open += origin.sockets.size;
    return open;
  }

  /** Closes every socket, idle or busy (local mode and tests); calls in flight fail. */
  close(): void {
    for (const origin of this.origins.values()) origin.destroy();
  }
}

/** A URL's origin and request line. */
interface Target {
  readonly origin: Origin;
  /** `POST <path> HTTP/1.1` and `Host`, each with its CRLF. */
  readonly requestLine: string;
}

/** A header name: an HTTP token. */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** What a header value may not hold (Node's check): a control character but tab, DEL, or a character past U+00FF. */
const INVALID_VALUE = /[^\t\x20-\x7e\x80-\xff]/;

/** The request line and headers, as Node's client writes them for a keep-alive POST with a body. */
function requestHead(requestLine: string, request: UpstreamRequest): string {
  let head = requestLine;
  let length = false;
  for (const name of Object.keys(request.headers)) {
    const value = request.headers[name] as string;
    if (!TOKEN.test(name)) throw Object.assign(new TypeError(`Header name must be a valid HTTP token ["${name}"]`), { code: 'ERR_INVALID_HTTP_TOKEN' });
    // The value is not echoed: it may be a provider key.
    if (INVALID_VALUE.test(value)) throw Object.assign(new TypeError(`Invalid character in header content ["${name}"]`), { code: 'ERR_INVALID_CHAR' });
    const lower = name.toLowerCase();
    if (lower === 'host' || lower === 'connection' || lower === 'transfer-encoding') continue;
    if (lower === 'content-length') length = true;
    head += `${name}: ${value}\r\n`;
  }
  if (!length) head += `Content-Length: ${request.body.length}\r\n`;
  return `${head}Connection: keep-alive\r\n\r\n`;
}

/** One socket to an origin and the exchange it carries, if any. */
interface Connection {
  readonly socket: net.Socket;
  exchange: Exchange | undefined;
  /** Whether it has carried an exchange before this one. */
  used: boolean;
}

/**
 * The reply's body as it arrives, into the call's Readable. The exchange's parts go through
 * methods, not closures made per call: V8 drops a closure's optimized code at each full
 * collection once its last instance is gone (docs/gateway.md, "Pretenuring").
 */
class BodyReader extends ReplyReader {
  constructor(private readonly exchange: Exchange) {
    super(true);
  }

  protected override keep(part: Buffer): void {
    this.exchange.pushPart(part);
  }
}

/** The call's body: reading resumes the socket; destroying it ends the exchange. */
class ExchangeBody extends Readable {
  constructor(private readonly exchange: Exchange) {
    super();
  }

  override _read(): void {
    const socket = this.exchange.connection?.socket;
    if (socket !== undefined && socket.isPaused()) socket.resume();
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    // The relay is done with it: a reply not read to its end leaves its socket unusable.
    if (!this.exchange.over) this.exchange.fail(err ?? hangUp(), false);
    // As Node's IncomingMessage: the error is emitted only to a listener (a body nobody reads
    // any more must not throw from the socket's close).
    callback(this.listenerCount('error') === 0 ? null : err);
  }
}

/** One call: waiting for a socket, waiting for its reply's head, then its body. */
class Exchange {
  readonly reader: BodyReader;
  /** The abort listener: {@link aborted}, bound once (see the constructor). */
  private readonly onAbort = this.aborted.bind(this);
  connection: Connection | undefined;
  body: Readable | undefined;
  /** Whether a byte of the reply has arrived. */
  answered = false;
  over = false;

  constructor(
    private readonly origin: Origin,
    readonly head: string,
    readonly payload: Buffer,
    readonly signal: AbortSignal,
    readonly pooled: boolean,
    private readonly resolve: (response: UpstreamResponse) => void,
    private readonly reject: (err: unknown) => void,
  ) {
    this.reader = new BodyReader(this);
    // A function as the listener, never the exchange itself: Node's EventTarget wraps an object
    // listener (`handleEvent`) in a closure of its own, and on Node 22 that keeps everything the
    // object reaches alive through every young-generation collection, even once removed (a
    // scratch loop: 5.8 MB promoted of 5.8, against 10 to 14 KB for a function or a bound
    // method). The exchange reaches its whole request, so each collection between requests
    // promoted half a megabyte of requests already served (docs/gateway.md, "What an idle
    // scavenge keeps").
    signal.addEventListener('abort', this.onAbort, { once: true });
  }

  /** The call's signal fired. */
  private aborted(): void {
    this.fail(abortError(this.signal));
  }

  /** Puts the request on `connection`. */
  start(connection: Connection): void {
    this.connection = connection;
    connection.exchange = this;
    const { socket } = connection;
    socket.setTimeout(0);
    socket.ref();
    socket.cork();
    socket.write(this.head, 'latin1');
    socket.write(this.payload);
    socket.uncork();
  }

  /** Bytes from the socket. */
  data(data: Buffer): void {
    this.answered = true;
    let complete: ReturnType<ReplyReader['push']>;
    try {
      complete = this.reader.push(data);
    } catch (err) {
      this.fail(err);
      return;
    }
    this.afterRead(complete);
  }

  /** The socket's end: a reply framed by it is complete; any other was cut. */
  ended(): void {
    const complete = this.reader.end();
    if (complete === undefined) this.fail(hangUp());
    else this.afterRead(complete);
  }

  private afterRead(complete: ReturnType<ReplyReader['push']>): void {
    if (this.over) return;
    if (this.body === undefined) {
      const head = this.reader.head;
      if (head === undefined) return;
      this.body = new ExchangeBody(this);
      this.resolve({ status: head.status, headers: head.headers, body: this.body });
      // Parts read with the head went to the body before it was handed out: push them now.
      this.flushEarly();
    }
    if (complete !== undefined) this.complete(complete.reusable);
  }

  /** Parts that arrived with the head, held until the body existed. */
  private early: Buffer[] | undefined;

  private flushEarly(): void {
    const early = this.early;
    this.early = undefined;
    if (early !== undefined) for (const part of early) this.pushPart(part);
  }

  /** A part for the body (held until the body is handed out). Past what the relay has taken, the socket is paused until it asks for more. */
  pushPart(part: Buffer): void {
    if (this.body === undefined) (this.early ??= []).push(part);
    else if (!this.body.push(part)) this.connection?.socket.pause();
  }

  /** The reply is in whole: the body ends, the socket goes back to the pool when it can be trusted. */
  private complete(reusable: boolean): void {
    this.over = true;
    this.signal.removeEventListener('abort', this.onAbort);
    const connection = this.connection;
    this.connection = undefined;
    if (connection !== undefined) {
      connection.exchange = undefined;
      connection.socket.resume();
      this.origin.release(connection, reusable);
    }
    (this.body as Readable).push(null);
  }

  /**
   * Ends the call with `err`: the call rejects if it had no reply yet, else its body is destroyed
   * with it (unless the body is what ended it); its socket, if any, is closed (a late reply must
   * never reach another call).
   */
  fail(err: unknown, destroyBody = true): void {
    if (this.over) return;
    this.over = true;
    this.signal.removeEventListener('abort', this.onAbort);
    this.origin.forget(this);
    const connection = this.connection;
    this.connection = undefined;
    if (connection !== undefined) {
      connection.exchange = undefined;
      connection.socket.destroy();
    }
    if (this.body === undefined) this.reject(this.pooled && connection !== undefined && closedAtReuse(err, connection.used, this.answered) ? new PooledConnectionClosedError(err) : err);
    else if (destroyBody) this.body.destroy(err as Error);
  }
}

/** Keep-alive sockets to one origin. */
class Origin {
  private readonly idle: Connection[] = [];
  private readonly waiting: Exchange[] = [];
  readonly sockets = new Set<net.Socket>();
  private readonly target: SocketTarget;

  constructor(
    url: URL,
    private readonly idleSocketMs: number,
    tlsOptions: Pick<tls.ConnectionOptions, 'ca'>,
  ) {
    this.target = socketTarget(url, tlsOptions);
  }

  /** Sends one request; resolves with the reply once its head is in. */
  exchange(head: string, payload: Buffer, signal: AbortSignal, pooled: boolean): Promise<UpstreamResponse> {
    return new Promise<UpstreamResponse>((resolve, reject) => {
      if (signal.aborted) {
        reject(abortError(signal));
        return;
      }
      const exchange = new Exchange(this, head, payload, signal, pooled, resolve, reject);
      const connection = pooled ? this.take() : this.sockets.size < MAX_SOCKETS ? this.connect() : undefined;
      if (connection !== undefined) exchange.start(connection);
      else this.waiting.push(exchange);
    });
  }

  /** An exchange that ended: no longer waiting for a socket. */
  forget(exchange: Exchange): void {
    const at = this.waiting.indexOf(exchange);
    if (at !== -1) this.waiting.splice(at, 1);
  }

  destroy(): void {
    for (const exchange of this.waiting.splice(0)) exchange.fail(hangUp());
    this.idle.length = 0;
    for (const socket of this.sockets) socket.destroy();
  }

  /** A socket for a new exchange: the most recently idle one still writable, or a new one under the cap. */
  private take(): Connection | undefined {
    return popWritable(this.idle) ?? (this.sockets.size < MAX_SOCKETS ? this.connect() : undefined);
  }

  private connect(): Connection {
    const socket = openSocket(this.target);
    // TCP keep-alive probes on a long wait for a provider's next byte, as the agent this replaced set them.
    socket.setKeepAlive(true, 30_000);
    const connection: Connection = { socket, exchange: undefined, used: false };
    this.sockets.add(socket);
    socket.on('data', (data: Buffer) => {
      const exchange = connection.exchange;
      // Bytes nobody asked for: the socket is out of step with its calls.
      if (exchange === undefined) socket.destroy();
      else exchange.data(data);
    });
    socket.on('end', () => connection.exchange?.ended());
    socket.on('error', (err: Error) => connection.exchange?.fail(err));
    // Idle past the limit (set while it sits in the pool): closed by this side first.
    socket.on('timeout', () => socket.destroy());
    socket.on('close', () => {
      this.sockets.delete(socket);
      const at = this.idle.indexOf(connection);
      if (at !== -1) this.idle.splice(at, 1);
      connection.exchange?.fail(hangUp());
      // A socket has gone: a call waiting for one may open its own.
      const next = this.waiting.shift();
      if (next !== undefined) next.start(this.connect());
    });
    return connection;
  }

  /** A socket whose exchange is over: to the next waiting call, or the idle pool; closed if it cannot be trusted. */
  release(connection: Connection, reusable: boolean): void {
    const { socket } = connection;
    if (!reusable || !socket.writable) {
      socket.destroy();
      return;
    }
    connection.used = true;
    const next = this.waiting.shift();
    if (next !== undefined) {
      next.start(connection);
      return;
    }
    // An idle socket does not keep the process alive, and is closed after the idle limit.
    socket.unref();
    socket.setTimeout(this.idleSocketMs);
    this.idle.push(connection);
  }
}

/** What Node's client reports for a connection closed before its reply: a reset. */
function hangUp(): Error {
  return Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
}

/** What Node's client rejects with when the call's signal aborts. */
function abortError(signal: AbortSignal): Error {
  return Object.assign(new Error('The operation was aborted', { cause: signal.reason }), { name: 'AbortError', code: 'ABORT_ERR' });
}

/** The pooled connection was closed by the provider before it read the request. */
class PooledConnectionClosedError extends Error {
  override readonly name = 'PooledConnectionClosedError';
  constructor(override readonly cause: unknown) {
    super('the pooled connection was closed by the provider at reuse');
  }
}
