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
 */
import { MAX_BODY_BYTES } from '../lambdas/core/limits';
import { randomUUID } from 'node:crypto';
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
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

  const running = new Set<Promise<void>>();
  const server = createServer({ noDelay: true });

  const onRequest = (req: IncomingMessage, res: ServerResponse, continueAllowed: boolean): void => {
    const invocation = handle(req, res, continueAllowed).catch((err: unknown) => {
      log(`[local] request failed outside the handler: ${describeError(err)}`);
      res.destroy();
    });
    running.add(invocation);
    void invocation.finally(() => running.delete(invocation));
  };
  server.on('request', (req: IncomingMessage, res: ServerResponse) => onRequest(req, res, false));
  // With this listener Node no longer answers `Expect: 100-continue` by itself, so an upload
  // that is refused anyway is never invited.
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => onRequest(req, res, true));
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
  });

  async function handle(req: IncomingMessage, res: ServerResponse, continueAllowed: boolean): Promise<void> {
    req.socket.setNoDelay(true);
    const declared = declaredLength(req);
    const refuseUnread = declared !== undefined && declared > maxBodyBytes;
    let body: Buffer;
    let cut = false;
    if (refuseUnread) {
      body = Buffer.alloc(0);
    } else {
      if (continueAllowed) res.writeContinue();
      const read = await readBody(req, maxBodyBytes);
      if (read === undefined) return; // the client gave up mid-upload: nothing to invoke
      ({ body, cut } = read);
    }
    if (refuseUnread || cut) {
      // The rest of the upload stays unread; `Connection: close` tells the client, and Node
      // closes the socket once the response is sent.
      res.shouldKeepAlive = false;
      res.once('finish', () => {
        // Node starts discarding an unread body after the response; stop that, so the socket
        // closes with the upload still unread instead of pulling it off the wire.
        req.pause();
        req.socket.destroySoon();
      });
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
