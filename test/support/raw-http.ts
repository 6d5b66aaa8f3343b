/**
 * Raw HTTP/1.1 for the hostile-client tests: bytes written to a socket exactly as given (the
 * malformed requests no client library will send), and every response read back off the wire,
 * in order, until the server closes the connection.
 */
import net from 'node:net';

/** One response as it came off the wire. */
export interface RawResponse {
  readonly status: number;
  /** Lower-case names. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

/** What a connection got: its responses in order, and how it ended. */
export interface RawExchange {
  readonly responses: readonly RawResponse[];
  /** The server reset the connection (the client saw ECONNRESET or EPIPE). */
  readonly reset: boolean;
  /** Bytes the client managed to write. */
  readonly written: number;
}

/** Splits a byte stream into HTTP/1.1 responses (Content-Length, chunked, or to the end). */
export function parseResponses(raw: Buffer): RawResponse[] {
  const out: RawResponse[] = [];
  let at = 0;
  while (at < raw.length) {
    const headEnd = raw.indexOf('\r\n\r\n', at);
    if (headEnd === -1) break;
    const head = raw.subarray(at, headEnd).toString('latin1').split('\r\n');
    const status = Number((head[0] ?? '').split(' ')[1]);
    const headers: Record<string, string> = {};
    for (const line of head.slice(1)) {
      const i = line.indexOf(':');
      if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
    }
    let pos = headEnd + 4;
    let body: Buffer;
    if (status === 100) {
      at = pos;
      continue;
    }
    if (headers['content-length'] !== undefined) {
      const n = Number(headers['content-length']);
      body = raw.subarray(pos, pos + n);
      pos += n;
    } else if ((headers['transfer-encoding'] ?? '').includes('chunked')) {
      const parts: Buffer[] = [];
      for (;;) {
        const lineEnd = raw.indexOf('\r\n', pos);
        if (lineEnd === -1) {
          pos = raw.length;
          break;
        }
        const size = parseInt(raw.subarray(pos, lineEnd).toString('latin1'), 16);
        pos = lineEnd + 2;
        if (!(size > 0)) {
          pos = Math.min(raw.length, pos + 2);
          break;
        }
        parts.push(raw.subarray(pos, pos + size));
        pos += size + 2;
      }
      body = Buffer.concat(parts);
    } else {
      body = raw.subarray(pos);
      pos = raw.length;
    }
    out.push({ status, headers, body: body.toString('utf8') });
    at = pos;
  }
  return out;
}

/** Options for {@link exchange}. */
export interface ExchangeOptions {
  /** Half-close after writing (the client says it has sent everything). @default false */
  readonly endAfterWrite?: boolean;
  /** After the given bytes, keep writing this filler until the server stops the connection... */
  readonly keepWriting?: Buffer;
  /** ...or until this many filler bytes are written (then wait, without half-closing). @default no limit */
  readonly fillerBytes?: number;
  /** Give up (and fail) after this long. @default 10000 */
  readonly timeoutMs?: number;
}

/** Writes `request` on a fresh connection and reads every response until the server closes it. */
export function exchange(port: number, request: Buffer | string, options: ExchangeOptions = {}): Promise<RawExchange> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    const chunks: Buffer[] = [];
    let reset = false;
    let written = 0;
    let closed = false;
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no close within ${options.timeoutMs ?? 10_000} ms; got ${Buffer.concat(chunks).toString('latin1').slice(0, 300)}`));
    }, options.timeoutMs ?? 10_000);
    socket.on('data', (d: Buffer) => chunks.push(d));
    socket.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'ECONNRESET' || err.code === 'EPIPE') reset = true;
    });
    socket.on('close', () => {
      closed = true;
      clearTimeout(timer);
      resolve({ responses: parseResponses(Buffer.concat(chunks)), reset, written });
    });
    socket.on('connect', () => {
      const first = Buffer.from(request);
      socket.write(first, () => {
        written += first.length;
      });
      if (options.keepWriting !== undefined) {
        const filler = options.keepWriting;
        let queued = 0;
        const pump = (): void => {
          while (!closed && !socket.destroyed && socket.writable && queued < (options.fillerBytes ?? Number.POSITIVE_INFINITY)) {
            queued += filler.length;
            const more = socket.write(filler, (err) => {
              if (err === undefined || err === null) written += filler.length;
            });
            if (!more) {
              socket.once('drain', pump);
              return;
            }
          }
        };
        pump();
      } else if (options.endAfterWrite === true) {
        socket.end();
      }
    });
  });
}
