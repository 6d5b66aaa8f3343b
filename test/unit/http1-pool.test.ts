/**
 * The store client's HTTP/1.1 connections (`lambdas/adapters/http1-pool.ts`): the reply reader
 * over every framing, split at every byte; and the pool against a real `node:http` server:
 * sockets reused, capped, replaced when the server closes them, and closed whenever an exchange
 * ends early, so a late reply never reaches another call.
 */
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { Http1Pool, Http1ProtocolError, ReplyReader, type Http1Reply } from '../../lambdas/adapters/http1-pool';
import { localhostTls } from '../support/tls-fixture';

/** Feeds `raw` to a fresh reader in the given pieces; the completed reply, or undefined. */
function read(pieces: readonly Buffer[], endAfter = false): { reply: Http1Reply; reusable: boolean } | undefined {
  const reader = new ReplyReader();
  let done: ReturnType<ReplyReader['push']>;
  for (const piece of pieces) {
    if (done !== undefined) throw new Error('bytes after the reply was complete');
    done = reader.push(piece);
  }
  return done ?? (endAfter ? reader.end() : undefined);
}

/** Every way to cut `raw` in two, and byte by byte. */
function splits(raw: string): Buffer[][] {
  const bytes = Buffer.from(raw, 'latin1');
  const out: Buffer[][] = [[bytes], [...bytes].map((b) => Buffer.from([b]))];
  for (let i = 1; i < bytes.length; i += 1) out.push([bytes.subarray(0, i), bytes.subarray(i)]);
  return out;
}

describe('ReplyReader', () => {
  const cases: { name: string; raw: string; status: number; body: string; reusable: boolean; endAfter?: boolean }[] = [
    { name: 'a Content-Length reply', raw: 'HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: 17\r\n\r\n{"TableNames":[]}', status: 200, body: '{"TableNames":[]}', reusable: true },
    { name: 'an empty body', raw: 'HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n', status: 200, body: '', reusable: true },
    { name: 'a 204', raw: 'HTTP/1.1 204 No Content\r\n\r\n', status: 204, body: '', reusable: true },
    {
      name: 'a chunked reply with an extension and a trailer',
      raw: 'HTTP/1.1 400 Bad Request\r\nTransfer-Encoding: chunked\r\n\r\n5;x=1\r\n{"a":\r\nA\r\n"0123456"}\r\n0\r\nX-Trailer: t\r\n\r\n',
      status: 400,
      body: '{"a":"0123456"}',
      reusable: true,
    },
    { name: 'a chunked reply without trailers', raw: 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n', status: 200, body: '{}', reusable: true },
    { name: 'an interim 100 before the reply', raw: 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}', status: 200, body: '{}', reusable: true },
    { name: 'Connection: close', raw: 'HTTP/1.1 500 Internal Server Error\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}', status: 500, body: '{}', reusable: false },
    { name: 'HTTP/1.0 without keep-alive', raw: 'HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}', status: 200, body: '{}', reusable: false },
    { name: 'HTTP/1.0 with keep-alive', raw: 'HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\n{}', status: 200, body: '{}', reusable: true },
    { name: 'a reply framed by the end of the connection', raw: 'HTTP/1.1 200 OK\r\n\r\n{"x":1}', status: 200, body: '{"x":1}', reusable: false, endAfter: true },
    { name: 'a multi-byte body', raw: `HTTP/1.1 200 OK\r\nContent-Length: ${Buffer.byteLength('{"s":"héllo ✓"}')}\r\n\r\n${Buffer.from('{"s":"héllo ✓"}').toString('latin1')}`, status: 200, body: '{"s":"héllo ✓"}', reusable: true },
  ];

  it.each(cases)('reads $name, however it is cut', ({ raw, status, body, reusable, endAfter }) => {
    for (const pieces of splits(raw)) {
      const done = read(pieces, endAfter);
      expect(done).toBeDefined();
      expect(done?.reply.status).toBe(status);
      expect(done?.reply.body.toString('utf8')).toBe(body);
      expect(done?.reusable).toBe(reusable);
    }
  });

  it('waits for the rest of a body that is short, and gives nothing for a cut reply at the end', () => {
    const reader = new ReplyReader();
    expect(reader.push(Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{"a"'))).toBeUndefined();
    expect(reader.end()).toBeUndefined();
  });

  it('does not trust a socket that sent more than the reply announced', () => {
    expect(read([Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}garbage')])?.reusable).toBe(false);
    expect(read([Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\nHTTP')])?.reusable).toBe(false);
  });

  it.each([
    ['no status line', 'SSH-2.0-OpenSSH\r\n\r\n'],
    ['a bad Content-Length', 'HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n'],
    ['two different Content-Lengths', 'HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n'],
    ['a header without a name', 'HTTP/1.1 200 OK\r\n: x\r\n\r\n'],
    ['a chunk size that is not hexadecimal', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n'],
    ['a chunk not ended by CRLF', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}XX'],
  ])('refuses %s', (_name, raw) => {
    expect(() => read([Buffer.from(raw, 'latin1')])).toThrow(Http1ProtocolError);
  });

  it('refuses headers that never end', () => {
    const reader = new ReplyReader();
    expect(reader.push(Buffer.from('HTTP/1.1 200 OK\r\n'))).toBeUndefined();
    expect(() => reader.push(Buffer.alloc(70 * 1024, 0x61))).toThrow(Http1ProtocolError);
  });
});

/** A real HTTP server whose handler the test sets, counting the connections it sees. */
async function server(): Promise<{ origin: URL; connections: () => number; handle: (h: http.RequestListener) => void; srv: http.Server; close(): Promise<void> }> {
  let handler: http.RequestListener = (_req, res) => res.end('{}');
  let connections = 0;
  const srv = http.createServer((req, res) => handler(req, res));
  srv.keepAliveTimeout = 60_000;
  srv.on('connection', () => (connections += 1));
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address() as AddressInfo;
  return {
    origin: new URL(`http://127.0.0.1:${port}`),
    connections: () => connections,
    handle: (h) => (handler = h),
    srv,
    close: () =>
      new Promise<void>((resolve) => {
        srv.closeAllConnections();
        srv.close(() => resolve());
      }),
  };
}

const HEAD = 'POST / HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\n';
const post = (pool: Http1Pool, body: string, limits = { deadline: Date.now() + 5_000, attemptTimeoutMs: 5_000 }): Promise<Http1Reply> =>
  pool.request(`${HEAD}content-length: ${Buffer.byteLength(body)}\r\n\r\n`, Buffer.from(body), limits);

/** Echoes the request's body, after `delayMs` when the body asks for it. */
const echo: http.RequestListener = (req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    const delayMs = Number(/delay=(\d+)/.exec(body)?.[1] ?? 0);
    setTimeout(() => {
      if (!res.destroyed) res.end(`echo:${body}`);
    }, delayMs);
  });
};

describe('Http1Pool', () => {
  let s: Awaited<ReturnType<typeof server>>;
  beforeEach(async () => {
    s = await server();
    s.handle(echo);
  });
  afterEach(async () => s.close());

  it('keeps one socket for calls one after another', async () => {
    const pool = new Http1Pool(s.origin);
    try {
      for (let i = 0; i < 5; i += 1) expect((await post(pool, `n=${i}`)).body.toString()).toBe(`echo:n=${i}`);
      expect(s.connections()).toBe(1);
    } finally {
      pool.destroy();
    }
  });

  it('reads a chunked reply the server streams in parts', async () => {
    s.handle((_req, res) => {
      res.write('{"a":');
      setTimeout(() => res.end('1}'), 5);
    });
    const pool = new Http1Pool(s.origin);
    try {
      const reply = await post(pool, '{}');
      expect(reply.status).toBe(200);
      expect(reply.body.toString()).toBe('{"a":1}');
      expect((await post(pool, '{}')).body.toString()).toBe('{"a":1}');
      expect(s.connections()).toBe(1);
    } finally {
      pool.destroy();
    }
  });

  it('opens a socket per call in flight, and no more than its cap', async () => {
    const free = new Http1Pool(s.origin);
    const capped = new Http1Pool(s.origin, { maxSockets: 2 });
    try {
      const replies = await Promise.all([1, 2, 3, 4].map((i) => post(free, `delay=20 n=${i}`)));
      expect(replies.map((r) => r.body.toString())).toEqual([1, 2, 3, 4].map((i) => `echo:delay=20 n=${i}`));
      expect(s.connections()).toBe(4);
      const before = s.connections();
      const cappedReplies = await Promise.all([1, 2, 3, 4, 5].map((i) => post(capped, `delay=20 n=${i}`)));
      expect(cappedReplies.map((r) => r.body.toString())).toEqual([1, 2, 3, 4, 5].map((i) => `echo:delay=20 n=${i}`));
      expect(s.connections() - before).toBe(2);
    } finally {
      free.destroy();
      capped.destroy();
    }
  });

  it('replaces a socket the server closed while it was idle', async () => {
    const pool = new Http1Pool(s.origin);
    try {
      expect((await post(pool, 'a')).body.toString()).toBe('echo:a');
      s.srv.closeIdleConnections();
      await new Promise((r) => setTimeout(r, 50));
      expect(pool.openSockets).toBe(0);
      expect((await post(pool, 'b')).body.toString()).toBe('echo:b');
      expect(s.connections()).toBe(2);
    } finally {
      pool.destroy();
    }
  });

  it('closes the socket of a call that ran out of time, so its late reply reaches no other call', async () => {
    const pool = new Http1Pool(s.origin, { timeoutError: () => Object.assign(new Error('late'), { code: 'ETIMEDOUT' }) });
    try {
      await expect(post(pool, 'delay=150 first', { deadline: Date.now() + 5_000, attemptTimeoutMs: 50 })).rejects.toMatchObject({ code: 'ETIMEDOUT' });
      expect((await post(pool, 'second')).body.toString()).toBe('echo:second');
      await new Promise((r) => setTimeout(r, 200));
      expect((await post(pool, 'third')).body.toString()).toBe('echo:third');
      expect(s.connections()).toBe(2);
    } finally {
      pool.destroy();
    }
  });

  it('ends a call at its deadline when that comes before the attempt limit, a socket at hand', async () => {
    const pool = new Http1Pool(s.origin, { timeoutError: () => Object.assign(new Error('late'), { code: 'ETIMEDOUT' }) });
    try {
      // Warm: an idle socket is at hand for the next call.
      expect((await post(pool, 'warm')).body.toString()).toBe('echo:warm');
      await expect(post(pool, 'delay=300 short', { deadline: Date.now() + 60, attemptTimeoutMs: 5_000 })).rejects.toMatchObject({ code: 'ETIMEDOUT' });
      // And a new socket too (none idle: the last one was closed with its late call).
      await expect(post(pool, 'delay=300 fresh', { deadline: Date.now() + 60, attemptTimeoutMs: 5_000 })).rejects.toMatchObject({ code: 'ETIMEDOUT' });
      expect((await post(pool, 'after')).body.toString()).toBe('echo:after');
    } finally {
      pool.destroy();
    }
  });

  it('counts the wait for a socket against the call deadline, and starts the attempt limit once it has one', async () => {
    const pool = new Http1Pool(s.origin, { maxSockets: 1 });
    try {
      const first = post(pool, 'delay=300 first', { deadline: Date.now() + 5_000, attemptTimeoutMs: 5_000 });
      const started = Date.now();
      await expect(post(pool, 'second', { deadline: Date.now() + 100, attemptTimeoutMs: 5_000 })).rejects.toMatchObject({ code: 'ETIMEDOUT' });
      expect(Date.now() - started).toBeLessThan(280);
      expect((await first).body.toString()).toBe('echo:delay=300 first');
      // A call that waited for the socket gets its own attempt limit from then on.
      const slow = post(pool, 'delay=200 slow', { deadline: Date.now() + 5_000, attemptTimeoutMs: 5_000 });
      const queued = post(pool, 'delay=100 queued', { deadline: Date.now() + 5_000, attemptTimeoutMs: 150 });
      expect((await slow).body.toString()).toBe('echo:delay=200 slow');
      expect((await queued).body.toString()).toBe('echo:delay=100 queued');
    } finally {
      pool.destroy();
    }
  });

  it('fails with ECONNRESET when the server cuts the connection before the reply is whole', async () => {
    s.handle((req, res) => {
      res.writeHead(200, { 'content-length': '100' });
      res.write('{"partial":');
      setTimeout(() => req.socket.destroy(), 10);
    });
    const pool = new Http1Pool(s.origin);
    try {
      await expect(post(pool, '{}')).rejects.toMatchObject({ code: 'ECONNRESET' });
    } finally {
      pool.destroy();
    }
  });

  it('fails with ECONNREFUSED when nothing listens', async () => {
    const url = s.origin;
    await s.close();
    const pool = new Http1Pool(url);
    try {
      await expect(post(pool, '{}')).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    } finally {
      pool.destroy();
      s = await server();
    }
  });

  it('closes a socket whose reply it cannot read, and keeps serving on a new one', async () => {
    let first = true;
    s.srv.removeAllListeners('request');
    s.srv.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
      if (first) {
        first = false;
        req.socket.write('NOT HTTP\r\n\r\n');
        return;
      }
      echo(req, res);
    });
    const pool = new Http1Pool(s.origin);
    try {
      await expect(post(pool, 'x')).rejects.toBeInstanceOf(Http1ProtocolError);
      expect((await post(pool, 'y')).body.toString()).toBe('echo:y');
      expect(s.connections()).toBe(2);
    } finally {
      pool.destroy();
    }
  });

  it('destroy fails the calls in flight and waiting, and the pool serves again afterwards', async () => {
    const pool = new Http1Pool(s.origin, { maxSockets: 1 });
    const inFlight = post(pool, 'delay=500 a').catch((err: unknown) => err);
    const waiting = post(pool, 'b').catch((err: unknown) => err);
    await new Promise((r) => setTimeout(r, 20));
    pool.destroy();
    expect(await inFlight).toMatchObject({ code: 'ECONNRESET' });
    expect(await waiting).toMatchObject({ code: 'ECONNRESET' });
    try {
      expect((await post(pool, 'c')).body.toString()).toBe('echo:c');
    } finally {
      pool.destroy();
    }
  });
});

describe('Http1Pool over TLS', () => {
  const { cert, key } = localhostTls;

  it('keeps one TLS socket for calls one after another, and resumes the session on a new one', async () => {
    const resumed: boolean[] = [];
    const srv = https.createServer({ cert, key }, echo);
    srv.keepAliveTimeout = 60_000;
    await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
    const { port } = srv.address() as AddressInfo;
    srv.on('secureConnection', (socket: TLSSocket) => resumed.push(socket.isSessionReused()));
    const pool = new Http1Pool(new URL(`https://localhost:${port}`), { tls: { ca: cert } });
    try {
      for (let i = 0; i < 3; i += 1) expect((await post(pool, `n=${i}`)).body.toString()).toBe(`echo:n=${i}`);
      expect(resumed).toEqual([false]);
      srv.closeIdleConnections();
      await new Promise((r) => setTimeout(r, 50));
      expect((await post(pool, 'again')).body.toString()).toBe('echo:again');
      expect(resumed).toEqual([false, true]);
    } finally {
      pool.destroy();
      srv.closeAllConnections();
      await new Promise<void>((resolve) => srv.close(() => resolve()));
    }
  });

  it('refuses a server whose certificate it does not trust', async () => {
    const srv = https.createServer({ cert, key }, echo);
    await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
    const { port } = srv.address() as AddressInfo;
    const pool = new Http1Pool(new URL(`https://localhost:${port}`));
    try {
      await expect(post(pool, 'x')).rejects.toMatchObject({ code: 'DEPTH_ZERO_SELF_SIGNED_CERT' });
    } finally {
      pool.destroy();
      srv.closeAllConnections();
      await new Promise<void>((resolve) => srv.close(() => resolve()));
    }
  });
});
