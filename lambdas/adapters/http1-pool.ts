/**
 * Keep-alive HTTP/1.1 connections to one origin, for DynamoDB's JSON protocol: a POST with a
 * body, answered by one complete reply that is read whole. (Its reply reader and the way it opens
 * and picks sockets also serve the provider client, `http-upstream.ts`, whose replies stream.)
 *
 * Node's `http.request` gives every exchange a `ClientRequest` and an `IncomingMessage` (two
 * streams with their events), validates and stores each header, and runs the agent's
 * bookkeeping; for a small request and a small reply that costs about three times the exchange
 * itself (measured: docs/gateway.md). Here an exchange is one write of the request's bytes and a
 * parse of the reply as it arrives, on sockets kept open for the next call.
 *
 * What it keeps of an HTTP client: replies framed by `Content-Length`, chunked, or by the end of
 * the connection; `1xx` interim replies skipped; `Connection: close` honoured; a socket that
 * misbehaves (bytes it should not have sent, a reply it cannot parse) is closed, never reused;
 * an idle socket the server closes leaves the pool. A call that ends early (a timeout, an error)
 * closes its socket, so a late reply can never be read as another call's. Errors carry the codes
 * Node's client gives (`ECONNRESET` for a connection closed before its reply, the socket's own
 * otherwise), so callers retry the same failures. TLS for `https:` origins.
 */
import net from 'node:net';
import tls from 'node:tls';

/** A reply, read whole. */
export interface Http1Reply {
  readonly status: number;
  readonly body: Buffer;
}

/** When an exchange must give up: the call's own deadline, and a limit from the moment it has a socket. */
export interface ExchangeLimits {
  /** Epoch ms: the whole call's budget ends here, waiting for a socket included. */
  readonly deadline: number;
  /** ms from the moment the exchange has a socket. */
  readonly attemptTimeoutMs: number;
}

/** The reply could not be read as HTTP/1.1. */
export class Http1ProtocolError extends Error {
  override readonly name = 'Http1ProtocolError';
}

/** Longest status line and headers accepted (Node's parser allows 16 KB). */
const MAX_HEAD_BYTES = 64 * 1024;
const CRLFCRLF = Buffer.from('\r\n\r\n', 'latin1');

type Framing = { readonly kind: 'length'; readonly length: number } | { readonly kind: 'chunked' } | { readonly kind: 'close' };

/**
 * Headers Node's client keeps the first of when a reply repeats them (`IncomingMessage`'s rule);
 * any other repeated header is joined with `, `.
 */
const FIRST_ONLY = new Set(['age', 'authorization', 'content-length', 'content-type', 'etag', 'expires', 'from', 'host', 'if-modified-since', 'if-unmodified-since', 'last-modified', 'location', 'max-forwards', 'proxy-authorization', 'referer', 'retry-after', 'server', 'user-agent']);

/**
 * An incremental reader of one reply. `push` takes the bytes as they arrive and answers once the
 * reply is complete: its status, body, and whether the socket may carry another exchange. A
 * subclass may take the body as it arrives instead of whole (`keep`), and read the head as soon
 * as it is in (`head`, with the headers when asked for): the provider client does both.
 */
export class ReplyReader {
  private buffered: Buffer | undefined;
  private status = 0;
  private headers: Record<string, string> | undefined;
  private framing: Framing | undefined;
  private keepAlive = true;
  private readonly parts: Buffer[] = [];
  private received = 0;
  /** Chunked: bytes of the current chunk still to read (then its CRLF), or -1 between chunks. */
  private chunkLeft = -1;

  /** Feeds bytes; returns the reply once complete, undefined while more is needed. Throws on a reply it cannot read. */
  push(data: Buffer): { reply: Http1Reply; reusable: boolean } | undefined {
    let buf = this.buffered === undefined ? data : Buffer.concat([this.buffered, data]);
    this.buffered = undefined;
    while (this.framing === undefined) {
      const end = buf.indexOf(CRLFCRLF);
      if (end === -1) {
        if (buf.length > MAX_HEAD_BYTES) throw new Http1ProtocolError('the reply headers are too large');
        this.buffered = buf;
        return undefined;
      }
      const interim = this.readHead(buf.toString('latin1', 0, end));
      buf = buf.subarray(end + 4);
      if (interim) continue;
    }
    const framing = this.framing;
    if (framing.kind === 'length') {
      const wanted = framing.length - this.received;
      this.take(buf.subarray(0, wanted));
      if (buf.length < wanted) return undefined;
      // Bytes past the announced length: the reply is whole, but the socket cannot be trusted again.
      return this.done(buf.length === wanted && this.keepAlive);
    }
    if (framing.kind === 'close') {
      this.take(buf);
      return undefined;
    }
    return this.readChunks(buf);
  }

  /** @param keepHeaders whether to keep the reply's headers (names in lower case), for `head` */
  constructor(private readonly keepHeaders = false) {}

  /** The status and headers, once the head is in (the headers empty unless kept). */
  get head(): { readonly status: number; readonly headers: Readonly<Record<string, string>> } | undefined {
    return this.framing === undefined ? undefined : { status: this.status, headers: this.headers ?? {} };
  }

  /** The socket ended: a reply framed by the connection's end is complete; any other is cut. */
  end(): { reply: Http1Reply; reusable: boolean } | undefined {
    if (this.framing?.kind === 'close') return this.done(false);
    return undefined;
  }

  /** Reads the status line and headers; true for an interim (1xx) reply, whose head is skipped. */
  private readHead(head: string): boolean {
    const lines = head.split('\r\n');
    const statusLine = /^HTTP\/1\.([01]) (\d{3})(?: |$)/.exec(lines[0] ?? '');
    if (statusLine === null) throw new Http1ProtocolError('the reply does not begin with an HTTP/1.x status line');
    const status = Number(statusLine[2]);
    if (status >= 100 && status < 200) return true;
    let length: number | undefined;
    let chunked = false;
    let keepAlive = statusLine[1] === '1';
    for (let i = 1; i < lines.length; i += 1) {
      const line = lines[i] as string;
      const colon = line.indexOf(':');
      if (colon <= 0) throw new Http1ProtocolError('a reply header has no name');
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      if (this.keepHeaders) {
        const kept = (this.headers ??= {});
        const before = kept[name];
        if (before === undefined) kept[name] = value;
        else if (!FIRST_ONLY.has(name)) kept[name] = `${before}, ${value}`;
      }
      if (name === 'content-length') {
        if (!/^\d+$/.test(value) || (length !== undefined && length !== Number(value))) throw new Http1ProtocolError('the reply has a bad Content-Length');
        length = Number(value);
      } else if (name === 'transfer-encoding') {
        chunked = value.toLowerCase().split(',').map((v) => v.trim()).includes('chunked');
      } else if (name === 'connection') {
        const tokens = value.toLowerCase().split(',').map((v) => v.trim());
        if (tokens.includes('close')) keepAlive = false;
        else if (tokens.includes('keep-alive')) keepAlive = true;
      }
    }
    this.status = status;
    this.keepAlive = keepAlive;
    // A reply that has no body by definition, then chunked (which overrides a length), a length, or the connection's end.
    this.framing = status === 204 || status === 304 ? { kind: 'length', length: 0 } : chunked ? { kind: 'chunked' } : length !== undefined ? { kind: 'length', length } : { kind: 'close' };
    return false;
  }

  private take(part: Buffer): void {
    if (part.length === 0) return;
    this.received += part.length;
    this.keep(part);
  }

  /** A part of the body, in order: here collected for the whole reply. */
  protected keep(part: Buffer): void {
    this.parts.push(part);
  }

  private readChunks(input: Buffer): { reply: Http1Reply; reusable: boolean } | undefined {
    let buf = input;
    for (;;) {
      if (this.chunkLeft === -1) {
        const eol = buf.indexOf('\r\n');
        if (eol === -1) {
          if (buf.length > MAX_HEAD_BYTES) throw new Http1ProtocolError('a chunk size line is too long');
          this.buffered = buf;
          return undefined;
        }
        const sizeText = buf.toString('latin1', 0, eol).split(';')[0]?.trim() ?? '';
        if (!/^[0-9a-fA-F]+$/.test(sizeText)) throw new Http1ProtocolError('a chunk size is not hexadecimal');
        const size = parseInt(sizeText, 16);
        buf = buf.subarray(eol + 2);
        if (size === 0) {
          // The last chunk: trailers (ignored) up to an empty line.
          const end = buf.indexOf('\r\n') === 0 ? 0 : buf.indexOf(CRLFCRLF);
          if (end === -1) {
            // Keep the size line's remains so the next bytes are read from the trailers.
            this.buffered = Buffer.concat([Buffer.from('0\r\n', 'latin1'), buf]);
            return undefined;
          }
          const rest = buf.subarray(end === 0 ? 2 : end + 4);
          return this.done(rest.length === 0 && this.keepAlive);
        }
        this.chunkLeft = size;
      }
      if (this.chunkLeft > 0) {
        const part = buf.subarray(0, this.chunkLeft);
        this.take(part);
        this.chunkLeft -= part.length;
        buf = buf.subarray(part.length);
        if (this.chunkLeft > 0) return undefined;
      }
      // The chunk's data is in: its CRLF follows.
      if (buf.length < 2) {
        this.buffered = buf;
        this.chunkLeft = 0;
        return undefined;
      }
      if (buf[0] !== 13 || buf[1] !== 10) throw new Http1ProtocolError('a chunk does not end with CRLF');
      buf = buf.subarray(2);
      this.chunkLeft = -1;
    }
  }

  private done(reusable: boolean): { reply: Http1Reply; reusable: boolean } {
    const body = this.parts.length === 1 ? (this.parts[0] as Buffer) : Buffer.concat(this.parts, this.received);
    return { reply: { status: this.status, body }, reusable };
  }
}

/** One socket of the pool and the exchange it carries, if any. */
interface Connection {
  readonly socket: net.Socket;
  exchange: Exchange | undefined;
}

interface Exchange {
  readonly reader: ReplyReader;
  readonly resolve: (reply: Http1Reply) => void;
  readonly reject: (err: Error) => void;
  /** Puts the request on `connection` (once the exchange has one). */
  readonly start: (connection: Connection) => void;
  connection: Connection | undefined;
  timer: NodeJS.Timeout | undefined;
  over: boolean;
}

/** Options of {@link Http1Pool}. */
export interface Http1PoolOptions {
  /** Most sockets open at once; further calls wait for one (their wait counts against their deadline). @default no cap */
  readonly maxSockets?: number;
  /** Makes the error an exchange whose time is up fails with. @default an `ETIMEDOUT` error */
  readonly timeoutError?: () => Error;
  /** Extra TLS options for `https:` origins (tests: the `ca` of a self-signed server). @default none */
  readonly tls?: Pick<tls.ConnectionOptions, 'ca'>;
}

/** Keep-alive HTTP/1.1 sockets to one origin; see the module comment. */
export class Http1Pool {
  private readonly idle: Connection[] = [];
  private readonly waiting: Exchange[] = [];
  private readonly sockets = new Set<net.Socket>();
  private readonly target: SocketTarget;
  private readonly maxSockets: number;
  private readonly timeoutError: () => Error;

  constructor(origin: URL, options: Http1PoolOptions = {}) {
    this.target = socketTarget(origin, options.tls);
    this.maxSockets = options.maxSockets ?? Number.POSITIVE_INFINITY;
    this.timeoutError = options.timeoutError ?? (() => Object.assign(new Error('no answer in time'), { code: 'ETIMEDOUT' }));
  }

  /** Sockets open now, idle or busy. */
  get openSockets(): number {
    return this.sockets.size;
  }

  /**
   * Sends `head` (the request line and headers, ending with the empty line) and `body` in one
   * write, and resolves with the whole reply. Rejects with the socket's error, an `ECONNRESET`
   * when the connection closed before the reply was whole, an {@link Http1ProtocolError}, or
   * the timeout error once `limits` are spent; in each case the socket is closed.
   */
  request(head: string, body: Buffer, limits: ExchangeLimits): Promise<Http1Reply> {
    return new Promise<Http1Reply>((resolve, reject) => {
      const timedOut = (): void => this.fail(exchange, this.timeoutError());
      const exchange: Exchange = {
        reader: new ReplyReader(),
        resolve,
        reject,
        connection: undefined,
        timer: undefined,
        over: false,
        start: (connection) => {
          exchange.connection = connection;
          connection.exchange = exchange;
          // The attempt's own limit runs from here, unless the call's deadline comes first. One
          // timer per exchange when a socket is at hand: the attempt's limit is the same duration
          // on every call, so Node appends it to one list of timers, where a duration computed from
          // the deadline is a new list (and a priority-queue insertion) almost every time.
          const left = limits.deadline - Date.now();
          if (limits.attemptTimeoutMs < left) {
            clearTimeout(exchange.timer);
            exchange.timer = setTimeout(timedOut, limits.attemptTimeoutMs);
          } else if (exchange.timer === undefined) {
            exchange.timer = setTimeout(timedOut, Math.max(1, left));
          }
          const { socket } = connection;
          socket.ref();
          socket.cork();
          socket.write(head, 'latin1');
          socket.write(body);
          socket.uncork();
        },
      };
      const connection = this.take();
      if (connection !== undefined) {
        exchange.start(connection);
        return;
      }
      // Waiting for a socket: the call's deadline runs while it waits.
      exchange.timer = setTimeout(timedOut, Math.max(1, limits.deadline - Date.now()));
      this.waiting.push(exchange);
    });
  }

  /** Closes every socket, idle or busy, and fails the calls on them or waiting for one. The pool stays usable. */
  destroy(): void {
    for (const exchange of this.waiting.splice(0)) this.fail(exchange, hangUp());
    this.idle.length = 0;
    for (const socket of this.sockets) socket.destroy();
  }

  /** A socket for a new exchange: the most recently idle one still writable, or a new one under the cap. */
  private take(): Connection | undefined {
    return popWritable(this.idle) ?? (this.sockets.size < this.maxSockets ? this.connect() : undefined);
  }

  private connect(): Connection {
    const socket = openSocket(this.target);
    socket.setKeepAlive(true, 1_000);
    const connection: Connection = { socket, exchange: undefined };
    this.sockets.add(socket);
    socket.on('data', (data: Buffer) => this.onData(connection, data));
    socket.on('end', () => {
      const exchange = connection.exchange;
      if (exchange === undefined) return;
      const complete = exchange.reader.end();
      if (complete !== undefined) this.finish(exchange, complete.reply, false);
      else this.fail(exchange, hangUp());
    });
    socket.on('error', (err: Error) => {
      const exchange = connection.exchange;
      if (exchange !== undefined) this.fail(exchange, err);
    });
    socket.on('close', () => {
      this.sockets.delete(socket);
      const at = this.idle.indexOf(connection);
      if (at !== -1) this.idle.splice(at, 1);
      const exchange = connection.exchange;
      if (exchange !== undefined) this.fail(exchange, hangUp());
      // A socket has gone: a call waiting for one may open its own.
      const next = this.waiting.shift();
      if (next !== undefined) next.start(this.connect());
    });
    return connection;
  }

  private onData(connection: Connection, data: Buffer): void {
    const exchange = connection.exchange;
    if (exchange === undefined) {
      // Bytes nobody asked for: the socket is out of step with its calls.
      connection.socket.destroy();
      return;
    }
    let complete: ReturnType<ReplyReader['push']>;
    try {
      complete = exchange.reader.push(data);
    } catch (err) {
      this.fail(exchange, err as Error);
      return;
    }
    if (complete !== undefined) this.finish(exchange, complete.reply, complete.reusable);
  }

  private finish(exchange: Exchange, reply: Http1Reply, reusable: boolean): void {
    if (exchange.over) return;
    exchange.over = true;
    clearTimeout(exchange.timer);
    const connection = exchange.connection;
    if (connection !== undefined) {
      connection.exchange = undefined;
      this.release(connection, reusable);
    }
    exchange.resolve(reply);
  }

  /** Ends an exchange with `err`; its socket, if it had one, is closed (a late reply must not reach another call). */
  private fail(exchange: Exchange, err: Error): void {
    if (exchange.over) return;
    exchange.over = true;
    clearTimeout(exchange.timer);
    const at = this.waiting.indexOf(exchange);
    if (at !== -1) this.waiting.splice(at, 1);
    const connection = exchange.connection;
    if (connection !== undefined) {
      connection.exchange = undefined;
      connection.socket.destroy();
    }
    exchange.reject(err);
  }

  /** A socket whose exchange is over: to the next waiting call, or the idle pool; closed if it cannot be trusted. */
  private release(connection: Connection, reusable: boolean): void {
    const { socket } = connection;
    if (!reusable || !socket.writable) {
      socket.destroy();
      return;
    }
    const next = this.waiting.shift();
    if (next !== undefined) {
      next.start(connection);
      return;
    }
    // An idle socket does not keep the process alive (as Node's agent does with its free sockets).
    socket.unref();
    this.idle.push(connection);
  }
}

/** The most recently idle connection still writable; those found closed are dropped on the way. */
export function popWritable<C extends { readonly socket: net.Socket }>(idle: C[]): C | undefined {
  for (let connection = idle.pop(); connection !== undefined; connection = idle.pop()) {
    if (connection.socket.writable) return connection;
    connection.socket.destroy();
  }
  return undefined;
}

/** Where an origin's sockets connect, and the TLS session they resume. */
export interface SocketTarget {
  readonly secure: boolean;
  readonly host: string;
  readonly port: number;
  readonly tls: Pick<tls.ConnectionOptions, 'ca'>;
  /** The last TLS session the origin gave, offered again by the next socket. */
  session: Buffer | undefined;
}

export function socketTarget(origin: URL, tlsOptions: Pick<tls.ConnectionOptions, 'ca'> = {}): SocketTarget {
  const secure = origin.protocol === 'https:';
  return {
    secure,
    // `URL.hostname` keeps an IPv6 address's brackets; a socket wants it without them.
    host: origin.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: origin.port === '' ? (secure ? 443 : 80) : Number(origin.port),
    tls: tlsOptions,
    session: undefined,
  };
}

/**
 * A new socket to `target`, without Nagle's delay. Over TLS (ALPN `http/1.1`, the host's name for
 * SNI) the last session is offered again, as Node's https agent does: a new socket (after an idle
 * close, or a frozen Lambda thawing) resumes it instead of a full handshake.
 */
export function openSocket(target: SocketTarget): net.Socket {
  let socket: net.Socket;
  if (target.secure) {
    const secure = tls.connect({
      ...target.tls,
      host: target.host,
      port: target.port,
      servername: net.isIP(target.host) === 0 ? target.host : undefined,
      ALPNProtocols: ['http/1.1'],
      ...(target.session !== undefined ? { session: target.session } : {}),
    });
    secure.on('session', (session: Buffer) => (target.session = session));
    socket = secure;
  } else {
    socket = net.connect({ host: target.host, port: target.port });
  }
  socket.setNoDelay(true);
  return socket;
}

/** What Node's client reports for a connection closed before its reply: retried as a reset. */
function hangUp(): Error {
  return Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
}
