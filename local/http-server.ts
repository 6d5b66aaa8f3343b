/**
 * A plain `node:http` server in front of a streaming Lambda handler, standing in for a Lambda
 * Function URL (invoke mode RESPONSE_STREAM): each request becomes a payload-2.0 event, and the
 * handler's response stream is decoded the way the Function URL decodes it (an optional JSON
 * prelude with status and headers, then the body) and sent chunk by chunk as it is written.
 *
 * What is deliberately like the Function URL, so local runs behave as deployed:
 * - a client that goes away is not reported to the handler: its writes are accepted and
 *   discarded, and its stream emits no `close`;
 * - a response ended without any `write()` after `HttpResponseStream.from` loses its prelude
 *   (200 without the headers when empty, 502 when `end(chunk)` carried a body);
 * - a handler that throws before writing answers 502; after writing, the connection is cut.
 *
 * What Node's HTTP parser refuses before any handler could run (a bad `Content-Length`, one
 * together with chunked encoding, a bad chunk size, a method it does not know, headers over
 * 16 KB, a request not sent in time) is answered here, in SPEC's envelope with both request-id
 * headers, after every complete request before it on the connection has had its answer; then the
 * connection closes gently (see {@link ServeLambdaOptions.lingerBytes}). Deployed, AWS's front end
 * answers such requests itself and the function never sees them.
 */
import { MAX_BODY_BYTES } from '../lambdas/core/limits';
import { randomBytes, randomUUID } from 'node:crypto';
import { type IncomingMessage, STATUS_CODES, type Server, type ServerResponse, createServer } from 'node:http';
import type { Socket } from 'node:net';
import type { Writable } from 'node:stream';
import type { APIGatewayProxyEventV2, Context } from 'aws-lambda';
import {
  METADATA_PRELUDE_CONTENT_TYPE,
  PRELUDE_DELIMITER_LENGTH,
  type ResponseSink,
  RuntimeResponseStream,
  isStreamingHandler,
  makeLambdaContext,
  streamingHighWaterMark,
} from './lambda-shim';
import { SluiceError, renderError, type ErrorKind } from '../lambdas/core/errors';
import { matchRoute } from '../lambdas/gateway/routes';

/**
 * A streaming Lambda handler as a Function URL invokes it. The stream parameter is the runtime's
 * response stream (a Writable with `setContentType`), so handlers typed with either `Writable`
 * or `awslambda.HttpResponseStream` fit.
 */
export type StreamingHandler = (
  event: APIGatewayProxyEventV2,
  responseStream: Writable & { setContentType(contentType: string): void },
  context: Context,
) => Promise<void> | void;

/** Options for {@link serveLambda}. */
export interface ServeLambdaOptions {
  readonly handler: StreamingHandler;
  /** @default '127.0.0.1' (local mode is never reachable from other machines) */
  readonly host?: string;
  /** @default 0 (a free port) */
  readonly port?: number;
  /** Bodies above this are not read (declared) or cut at one byte more (undeclared). @default 8388608 */
  readonly maxBodyBytes?: number;
  /** Function name in the invocation context. @default 'sluice-local-gateway' */
  readonly functionName?: string;
  /** The function's timeout, for `context.getRemainingTimeInMillis()`. @default 900000 */
  readonly timeoutMs?: number;
  /** How long `close()` waits for running invocations before cutting connections. @default 10000 */
  readonly closeGraceMs?: number;
  /** Where warnings and handler failures are reported. @default console.error */
  readonly log?: (message: string) => void;
  /**
   * After a connection's last answer (a refusal of what could not be read, a 413), what the client
   * still sends is read and discarded, up to this many bytes, so that closing does not reset the
   * connection under an answer the client has not read yet. @default 4 × maxBodyBytes
   */
  readonly lingerBytes?: number;
  /** ...and for at most this long. @default 5000 */
  readonly lingerMs?: number;
  /** Node's `requestTimeout`: a request not wholly received by then is answered 408. @default 300000 */
  readonly requestTimeoutMs?: number;
  /** Node's `headersTimeout`: headers not received by then are answered 408. @default 60000 */
  readonly headersTimeoutMs?: number;
}

/** A running server. */
export interface LambdaServer {
  /** `http://<host>:<port>`. */
  readonly url: string;
  readonly port: number;
  /**
   * Stops accepting connections, waits for running invocations (so settlement finishes before
   * the database goes away) up to the grace period, then cuts whatever is left.
   */
  close(): Promise<void>;
}

const DEFAULT_MAX_BODY_BYTES = MAX_BODY_BYTES;

/** What one connection has under way: answers on it go out in order, the last one closes it. */
interface Connection {
  /** Requests still reading their bodies; told to give up when the connection turns out unreadable. */
  readonly reading: Map<IncomingMessage, () => void>;
  /** Each request's answer, settled once it is sent (or its connection is gone). */
  readonly answers: Map<IncomingMessage, Promise<void>>;
  /** Requests seen on the connection. */
  requests: number;
  /** The connection has had (or is getting) its last answer: nothing after it is answered. */
  closing: boolean;
  /** The answer is out; what the client still sends is being read and discarded. */
  lingering: boolean;
}

const connections = new WeakMap<Socket, Connection>();

function connectionOf(socket: Socket): Connection {
  let c = connections.get(socket);
  if (c === undefined) {
    c = { reading: new Map(), answers: new Map(), requests: 0, closing: false, lingering: false };
    connections.set(socket, c);
  }
  return c;
}

/** A request id in the gateway's own form, for answers given before the gateway could run. */
function newRequestId(): string {
  return `req_${randomBytes(12).toString('hex')}`;
}

/** A whole HTTP/1.1 response in SPEC's envelope, closing the connection. */
export function envelopeResponse(kind: ErrorKind, message: string, headers: Readonly<Record<string, string>> = {}): Buffer {
  const requestId = newRequestId();
  const rendered = renderError(new SluiceError(kind, message, { ...headers }), requestId);
  const body = JSON.stringify(rendered.body);
  const lines = [
    `HTTP/1.1 ${rendered.status} ${STATUS_CODES[rendered.status] ?? 'Error'}`,
    'content-type: application/json',
    `content-length: ${Buffer.byteLength(body)}`,
    `x-sluice-request-id: ${requestId}`,
    `x-request-id: ${requestId}`,
    ...Object.entries(rendered.headers).map(([name, value]) => `${name}: ${value}`),
    'connection: close',
  ];
  return Buffer.from(`${lines.join('\r\n')}\r\n\r\n${body}`);
}

/**
 * SPEC's answer to what Node's parser refused. `first` says nothing was parsed on the connection
 * before, so the raw packet starts with the refused request's own request line.
 */
export function parserRefusal(err: NodeJS.ErrnoException & { rawPacket?: Buffer }, first: boolean): Buffer {
  const code = err.code ?? '';
  if (code === 'HPE_HEADER_OVERFLOW') {
    return envelopeResponse('request_headers_too_large', 'The request headers are larger than 16 KB.');
  }
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT' || code === 'ERR_HTTP_HEADERS_TIMEOUT') {
    return envelopeResponse('request_incomplete', 'The request was not received in full in time.');
  }
  if (code === 'HPE_INVALID_EOF_STATE') {
    return envelopeResponse('request_incomplete', 'The connection ended before the request was complete.');
  }
  if (code === 'HPE_INVALID_METHOD' && first && err.rawPacket !== undefined) {
    // A method the parser does not know, on a request line that is otherwise readable: the same
    // answer the gateway gives a known method a path does not serve.
    const line = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+) (\S+) HTTP\/1\.[01]\r?\n/.exec(err.rawPacket.toString('latin1'));
    if (line !== null) {
      const method = line[1] as string;
      const path = (line[2] as string).split('?')[0] as string;
      const allow = matchRoute(path)?.allow;
      return allow === undefined
        ? envelopeResponse('endpoint_not_supported', `Sluice does not serve ${method} ${path}.`)
        : envelopeResponse('method_not_allowed', `${method} is not allowed on ${path}; use ${allow}.`, { Allow: allow });
    }
  }
  const why =
    code === 'HPE_INVALID_CONTENT_LENGTH'
      ? 'its Content-Length is not a valid length'
      : code === 'HPE_UNEXPECTED_CONTENT_LENGTH' || code === 'HPE_INVALID_TRANSFER_ENCODING'
        ? 'it declares both a Content-Length and a Transfer-Encoding'
        : code.startsWith('HPE_INVALID_CHUNK') || code === 'HPE_CHUNK_EXTENSIONS_OVERFLOW'
          ? 'its chunked body is malformed'
          : code === 'HPE_INVALID_METHOD'
            ? 'it does not begin with a valid request line (a Content-Length shorter than the body sent leaves the rest to be read as a request)'
            : 'it is not well-formed HTTP/1.1';
  return envelopeResponse('malformed_request', `The request cannot be read: ${why}.`);
}

/**
 * Serves a streaming handler over HTTP/1.1.
 *
 * Body handling follows SPEC's size rule without ever buffering an oversized upload: a request
 * declaring a `content-length` above `maxBodyBytes` reaches the handler with no body read (and no
 * `100 Continue`), so the handler refuses it from the header; one declaring no length is read
 * to `maxBodyBytes + 1` bytes and no further, so the handler refuses it by size. In both cases
 * the connection is closed after the response instead of draining the rest of the upload.
 */
export async function serveLambda(options: ServeLambdaOptions): Promise<LambdaServer> {
  const host = options.host ?? '127.0.0.1';
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const log = options.log ?? ((message: string) => console.error(message));
  const functionName = options.functionName ?? 'sluice-local-gateway';
  const highWaterMark = streamingHighWaterMark(options.handler);
  if (!isStreamingHandler(options.handler)) {
    log(
      `[local] warning: the handler is not wrapped in awslambda.streamifyResponse; a Function URL in ` +
        `RESPONSE_STREAM mode would not pass it a response stream`,
    );
  }

  const lingerBytes = options.lingerBytes ?? 4 * maxBodyBytes;
  const lingerMs = options.lingerMs ?? 5_000;
  const running = new Set<Promise<void>>();
  const server = createServer({
    noDelay: true,
    requestTimeout: options.requestTimeoutMs ?? 300_000,
    headersTimeout: options.headersTimeoutMs ?? 60_000,
  });

  /**
   * Closes a connection after its last answer without resetting it: our side ends (FIN once the
   * answer is written), and what the client still sends is read and dropped until it closes its
   * side, or `lingerBytes` more arrive, or `lingerMs` pass. Closing with unread bytes in the
   * socket would send a reset, and a client still uploading would then lose the answer.
   */
  const linger = (socket: Socket, req?: IncomingMessage): void => {
    const connection = connectionOf(socket);
    if (connection.lingering) return;
    connection.lingering = true;
    connection.closing = true;
    const limit = socket.bytesRead + lingerBytes;
    const stop = (): void => {
      clearInterval(watch);
      clearTimeout(timer);
      socket.destroy();
    };
    const watch = setInterval(() => {
      if (socket.bytesRead > limit) stop();
    }, 20);
    const timer = setTimeout(stop, lingerMs);
    socket.once('end', stop);
    socket.once('close', () => {
      clearInterval(watch);
      clearTimeout(timer);
    });
    socket.end();
    req?.resume();
    socket.resume();
  };

  const onRequest = (req: IncomingMessage, res: ServerResponse, continueAllowed: boolean): void => {
    const connection = connectionOf(req.socket);
    if (connection.closing) {
      // Parsed from what a client sent after the connection's last answer: never answered.
      req.resume();
      return;
    }
    connection.requests += 1;
    const answered = new Promise<void>((resolve) => {
      res.once('finish', resolve);
      res.once('close', resolve);
    });
    connection.answers.set(req, answered);
    void answered.then(() => connection.answers.delete(req));
    const invocation = handle(req, res, continueAllowed).catch((err: unknown) => {
      log(`[local] request failed outside the handler: ${describeError(err)}`);
      res.destroy();
    });
    running.add(invocation);
    void invocation.finally(() => running.delete(invocation));
  };
  // A client that half-closes after its requests (it has sent everything) still gets every answer;
  // Node's default would drop the answers under way.
  Object.assign(server, { httpAllowHalfOpen: true });
  server.on('request', (req: IncomingMessage, res: ServerResponse) => onRequest(req, res, false));
  // With this listener Node no longer answers `Expect: 100-continue` by itself, so an upload
  // that is refused anyway is never invited.
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => onRequest(req, res, true));
  server.on('clientError', (err: NodeJS.ErrnoException & { rawPacket?: Buffer }, socket: Socket) => {
    const connection = connectionOf(socket);
    // The parser repeats its error for every later chunk; the connection is answered once.
    if (connection.closing) return;
    connection.closing = true;
    // Complete requests before the unreadable part are answered first, in order (the parser may
    // meet the error in the same chunk as their last bytes, before their handlers have run). A
    // request whose body was still incomplete will not get the rest: this answer replaces it.
    const before: Promise<void>[] = [];
    for (const [req, answered] of connection.answers) {
      const giveUp = connection.reading.get(req);
      if (!req.complete && giveUp !== undefined) giveUp();
      else before.push(answered);
    }
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const answer = parserRefusal(err, connection.requests === 0);
    void Promise.allSettled(before).then(() => {
      if (socket.destroyed || !socket.writable) {
        socket.destroy();
        return;
      }
      socket.write(answer);
      linger(socket);
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse, continueAllowed: boolean): Promise<void> {
    const socket = req.socket;
    const connection = connectionOf(socket);
    socket.setNoDelay(true);
    const declared = declaredLength(req);
    const refuseUnread = declared !== undefined && declared > maxBodyBytes;
    let body: Buffer;
    let cut = false;
    if (refuseUnread) {
      body = Buffer.alloc(0);
    } else {
      if (continueAllowed) res.writeContinue();
      let giveUp = (): void => undefined;
      const cancelled = new Promise<undefined>((resolve) => {
        giveUp = () => resolve(undefined);
      });
      connection.reading.set(req, giveUp);
      const read = await Promise.race([readBody(req, maxBodyBytes), cancelled]);
      connection.reading.delete(req);
      // The client gave up mid-upload, or sent what cannot be read (answered by clientError).
      if (read === undefined) {
        connection.answers.delete(req);
        return;
      }
      ({ body, cut } = read);
    }
    if (refuseUnread || cut) {
      // The handler refuses without the rest of the upload; `Connection: close` tells the client.
      // Node ends the connection once the answer is sent (`destroySoon`); it closes gently instead,
      // reading and dropping what the client is still sending, so the client gets the 413.
      res.shouldKeepAlive = false;
      connection.closing = true;
      socket.destroySoon = () => linger(socket, req);
    }

    const event = toEvent(req, body);
    const context = makeLambdaContext({ functionName, timeoutMs: options.timeoutMs });
    const exchange = new FunctionUrlResponse(res, log, event.requestContext.requestId);
    const stream = new RuntimeResponseStream(exchange, highWaterMark);
    // The handler's stream never fails from the client's side; anything else is a handler bug.
    stream.on('error', (err) => log(`[local] response stream error (${event.requestContext.requestId}): ${describeError(err)}`));
    try {
      await options.handler(event, stream, context);
    } catch (err) {
      log(`[local] handler failed (${event.requestContext.requestId}): ${describeError(err)}`);
      exchange.fail();
      return;
    }
    if (!stream.writableEnded) {
      log(`[local] warning: the handler returned without ending its response stream (${event.requestContext.requestId}); ending it`);
      stream.end();
    }
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port: options.port ?? 0, exclusive: true }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the server has no TCP address');
  const port = address.port;
  const urlHost = host.includes(':') ? `[${host}]` : host;

  let closing: Promise<void> | undefined;
  return {
    url: `http://${urlHost}:${port}`,
    port,
    close: () => (closing ??= closeServer(server, running, options.closeGraceMs ?? 10_000)),
  };
}

async function closeServer(server: Server, running: Set<Promise<void>>, graceMs: number): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  let timer: NodeJS.Timeout | undefined;
  const grace = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, graceMs);
  });
  await Promise.race([Promise.allSettled([...running]), grace]);
  clearTimeout(timer);
  server.closeAllConnections();
  await closed;
}

function declaredLength(req: IncomingMessage): number | undefined {
  const raw = req.headers['content-length'];
  if (raw === undefined) return undefined;
  const n = Number(raw);
  return Number.isSafeInteger(n) && n >= 0 ? n : undefined;
}

/** Reads the body to `max + 1` bytes at most; undefined when the client aborted the upload. */
function readBody(req: IncomingMessage, max: number): Promise<{ body: Buffer; cut: boolean } | undefined> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (result: { body: Buffer; cut: boolean } | undefined): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('aborted', onAborted);
      req.off('error', onAborted);
      resolve(result);
    };
    const onData = (chunk: Buffer): void => {
      const room = max + 1 - size;
      if (chunk.length >= room) {
        chunks.push(chunk.subarray(0, room));
        // Enough to know the body is too large: read nothing more.
        req.pause();
        finish({ body: Buffer.concat(chunks), cut: true });
        return;
      }
      chunks.push(chunk);
      size += chunk.length;
    };
    const onEnd = (): void => finish({ body: Buffer.concat(chunks), cut: false });
    const onAborted = (): void => finish(undefined);
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('aborted', onAborted);
    req.on('error', onAborted);
  });
}

/** A payload format 2.0 event, as a Function URL builds it. */
function toEvent(req: IncomingMessage, body: Buffer): APIGatewayProxyEventV2 {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const rawPath = q === -1 ? url : url.slice(0, q);
  const rawQueryString = q === -1 ? '' : url.slice(q + 1);
  const now = new Date();
  const sourceIp = normaliseIp(req.socket.remoteAddress ?? '127.0.0.1');

  const headers: Record<string, string> = {};
  let cookies: string[] | undefined;
  // rawHeaders keeps repeated headers apart; the Function URL joins them with commas.
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    const name = (req.rawHeaders[i] ?? '').toLowerCase();
    const value = req.rawHeaders[i + 1] ?? '';
    if (name === 'cookie') {
      cookies = [...(cookies ?? []), ...value.split(';').map((c) => c.trim()).filter((c) => c !== '')];
      continue;
    }
    headers[name] = headers[name] === undefined ? value : `${headers[name]},${value}`;
  }
  headers['x-forwarded-for'] ??= sourceIp;
  headers['x-forwarded-proto'] ??= 'http';
  headers['x-forwarded-port'] ??= String(req.socket.localPort ?? '');
  const host = headers.host ?? 'localhost';

  let queryStringParameters: Record<string, string> | undefined;
  if (rawQueryString !== '') {
    queryStringParameters = {};
    for (const [key, value] of new URLSearchParams(rawQueryString)) {
      const prev = queryStringParameters[key];
      queryStringParameters[key] = prev === undefined ? value : `${prev},${value}`;
    }
  }

  return {
    version: '2.0',
    routeKey: '$default',
    rawPath,
    rawQueryString,
    cookies,
    headers,
    queryStringParameters,
    requestContext: {
      accountId: 'anonymous',
      apiId: 'local',
      domainName: host,
      domainPrefix: host.split('.')[0] ?? host,
      http: {
        method: req.method ?? 'GET',
        path: rawPath,
        protocol: `HTTP/${req.httpVersion}`,
        sourceIp,
        userAgent: headers['user-agent'] ?? '',
      },
      requestId: randomUUID(),
      routeKey: '$default',
      stage: '$default',
      time: formatRequestTime(now),
      timeEpoch: now.getTime(),
    },
    body: body.length === 0 ? undefined : body.toString('base64'),
    isBase64Encoded: body.length > 0,
  };
}

function normaliseIp(address: string): string {
  return address.startsWith('::ffff:') ? address.slice('::ffff:'.length) : address;
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** `22/Nov/2026:04:29:41 +0000`, the Function URL's `requestContext.time` format. */
function formatRequestTime(d: Date): string {
  const pad = (n: number): string => String(n).padStart(2, '0');
  return (
    `${pad(d.getUTCDate())}/${MONTHS[d.getUTCMonth()]}/${d.getUTCFullYear()}:` +
    `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())} +0000`
  );
}

/**
 * The Function URL's side of one response: decodes the prelude, sends status and headers with
 * the first body bytes, and passes every chunk on at once, honouring the socket's backpressure.
 */
class FunctionUrlResponse implements ResponseSink {
  private pending: Buffer | undefined; // prelude bytes until the delimiter
  private started = false;
  private clientGone = false;

  constructor(
    private readonly res: ServerResponse,
    private readonly log: (message: string) => void,
    private readonly requestId: string,
  ) {
    res.on('close', () => {
      if (!res.writableFinished) this.clientGone = true;
    });
    // A write racing a reset socket reports here; the client is gone either way.
    res.on('error', () => {
      this.clientGone = true;
    });
  }

  write(contentType: string, chunk: Buffer, done: () => void): void {
    if (!this.started) {
      if (contentType !== METADATA_PRELUDE_CONTENT_TYPE) {
        this.start(200, { 'content-type': contentType }, []);
      } else {
        const buffered = this.pending === undefined ? chunk : Buffer.concat([this.pending, chunk]);
        const end = findDelimiter(buffered);
        if (end === -1) {
          this.pending = buffered;
          done();
          return;
        }
        this.pending = undefined;
        const prelude = parsePrelude(buffered.subarray(0, end));
        if (prelude === undefined) {
          this.log(`[local] the response prelude is not valid JSON (${this.requestId}); answering 502`);
          this.badGateway();
          done();
          return;
        }
        this.start(prelude.statusCode, prelude.headers, prelude.cookies);
        chunk = buffered.subarray(end + PRELUDE_DELIMITER_LENGTH);
        if (chunk.length === 0) {
          done();
          return;
        }
      }
    }
    this.send(chunk, done);
  }

  end(contentType: string, done: () => void): void {
    if (!this.started) {
      if (contentType === METADATA_PRELUDE_CONTENT_TYPE) {
        // The runtime writes the prelude only inside write(); a stream ended without one reaches
        // the Function URL without it, which then answers as below.
        if (this.pending === undefined) {
          this.log(
            `[local] warning: the response stream was ended without any write() after HttpResponseStream.from ` +
              `(${this.requestId}); as deployed, the status and headers are lost (200, empty). Write before end().`,
          );
          this.start(200, {}, []);
        } else {
          this.log(
            `[local] warning: the response body arrived without its prelude (end(chunk) after HttpResponseStream.from, ` +
              `with no write() first) (${this.requestId}); as deployed, this answers 502. Call write(chunk), then end().`,
          );
          this.badGateway();
          done();
          return;
        }
      } else {
        this.start(200, { 'content-type': contentType }, []);
      }
    }
    if (this.clientGone || this.res.writableEnded) {
      done();
      return;
    }
    let called = false;
    const once = (): void => {
      if (called) return;
      called = true;
      this.res.off('close', once);
      done();
    };
    // `finish` may never come if the client leaves while the tail is in flight.
    this.res.once('close', once);
    this.res.end(once);
  }

  /** The handler threw: 502 before anything was sent, a cut connection after. */
  fail(): void {
    if (this.clientGone || this.res.writableEnded) return;
    if (!this.started) {
      this.badGateway();
      return;
    }
    this.res.destroy();
  }

  private start(statusCode: number, headers: Readonly<Record<string, string>>, cookies: readonly string[]): void {
    this.started = true;
    if (this.clientGone) return;
    const out: Record<string, string | string[]> = { ...headers };
    if (cookies.length > 0) out['set-cookie'] = [...cookies];
    this.res.writeHead(statusCode, out);
    // Status and headers leave now, even if the first body chunk is empty or comes later.
    this.res.flushHeaders();
  }

  private send(chunk: Buffer, done: () => void): void {
    if (this.clientGone || this.res.writableEnded || this.res.destroyed) {
      // A Function URL keeps accepting writes from a function whose client went away.
      done();
      return;
    }
    if (this.res.write(chunk)) {
      done();
      return;
    }
    const resume = (): void => {
      this.res.off('drain', resume);
      this.res.off('close', resume);
      done();
    };
    this.res.on('drain', resume);
    this.res.on('close', resume);
  }

  private badGateway(): void {
    this.started = true;
    if (this.clientGone || this.res.headersSent) {
      this.res.destroy();
      return;
    }
    const body = JSON.stringify({ message: 'Internal Server Error' });
    this.res.writeHead(502, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    this.res.end(body);
    this.clientGone = true; // nothing more goes to this client
  }
}

function findDelimiter(buffer: Buffer): number {
  let run = 0;
  for (let i = 0; i < buffer.length; i += 1) {
    run = buffer[i] === 0 ? run + 1 : 0;
    if (run === PRELUDE_DELIMITER_LENGTH) return i - PRELUDE_DELIMITER_LENGTH + 1;
  }
  return -1;
}

interface DecodedPrelude {
  readonly statusCode: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly cookies: readonly string[];
}

function parsePrelude(raw: Buffer): DecodedPrelude | undefined {
  let value: unknown;
  try {
    value = JSON.parse(raw.toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const prelude = value as { statusCode?: unknown; headers?: unknown; cookies?: unknown };
  const statusCode = typeof prelude.statusCode === 'number' ? prelude.statusCode : 200;
  const headers: Record<string, string> = {};
  if (typeof prelude.headers === 'object' && prelude.headers !== null) {
    for (const [name, v] of Object.entries(prelude.headers)) {
      if (v !== undefined && v !== null) headers[name.toLowerCase()] = String(v);
    }
  }
  const cookies = Array.isArray(prelude.cookies) ? prelude.cookies.filter((c): c is string => typeof c === 'string') : [];
  return { statusCode, headers, cookies };
}

function describeError(err: unknown): string {
  return err instanceof Error ? (err.stack ?? err.message) : String(err);
}
