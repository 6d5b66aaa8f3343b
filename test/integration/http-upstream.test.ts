/**
 * The provider client on its own keep-alive sockets (`lambdas/adapters/http-upstream.ts`): what
 * it writes, how it reads a reply as it arrives (chunked, by length, by the connection's end, after
 * a 1xx), that it stops reading while the relay is not taking the body, that an abort or a body
 * left unread ends the call and its connection, that a header carrying a line break is refused
 * before anything is sent, and TLS. Against servers on loopback: raw sockets where the bytes
 * matter, Node's own servers otherwise. (The reuse rules are `http-upstream-reuse.test.ts`.)
 */
import http from 'node:http';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import type { Readable } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import { HttpUpstream } from '../../lambdas/adapters/http-upstream';
import { localhostTls } from '../support/tls-fixture';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A raw HTTP/1.1 server: `answer` gets each request's socket and its bytes (head and body, read whole). */
async function rawServer(answer: (socket: net.Socket, request: string) => void): Promise<{ port: number; requests: string[]; connections: net.Socket[]; close(): Promise<void> }> {
  const requests: string[] = [];
  const connections: net.Socket[] = [];
  const server = net.createServer((socket) => {
    connections.push(socket);
    socket.on('error', () => undefined);
    let buffered = '';
    socket.on('data', (d: Buffer) => {
      buffered += d.toString('latin1');
      const head = buffered.indexOf('\r\n\r\n');
      if (head === -1) return;
      const length = Number(/content-length: (\d+)/i.exec(buffered.slice(0, head))?.[1] ?? '0');
      if (buffered.length < head + 4 + length) return;
      const request = buffered.slice(0, head + 4 + length);
      buffered = buffered.slice(head + 4 + length);
      requests.push(request);
      answer(socket, request);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    requests,
    connections,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of connections) s.destroy();
        server.close(() => resolve());
      }),
  };
}

function send(upstream: HttpUpstream, url: string, options: { body?: string; headers?: Record<string, string>; signal?: AbortSignal } = {}) {
  const body = Buffer.from(options.body ?? '{"model":"m"}');
  return upstream.send({ url, headers: options.headers ?? { 'content-type': 'application/json', 'content-length': String(body.length) }, body, signal: options.signal ?? new AbortController().signal });
}

async function readAll(body: Readable): Promise<string> {
  const parts: Buffer[] = [];
  for await (const part of body) parts.push(part as Buffer);
  return Buffer.concat(parts).toString('utf8');
}

/** Waits for `done` to hold (a socket's close reaches each side in its own turn of the loop); fails after a second. */
async function until(done: () => boolean): Promise<void> {
  for (let waited = 0; !done(); waited += 5) {
    if (waited > 1_000) throw new Error('still not so after a second');
    await sleep(5);
  }
}

/** Resolves once `socket` closed (or at once if it has). */
const closed = (socket: net.Socket): Promise<void> => (socket.destroyed ? Promise.resolve() : new Promise((resolve) => socket.once('close', () => resolve())));

let upstream: HttpUpstream;
beforeEach(() => {
  upstream = new HttpUpstream();
});
afterEach(() => upstream.close());

describe('HttpUpstream', () => {
  it('writes the request line, Host, the caller\'s headers in their case, keep-alive, and the body as given', async () => {
    const s = await rawServer((socket) => socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok'));
    try {
      const res = await send(upstream, `http://127.0.0.1:${s.port}/v1/chat/completions?x=1`, { body: '{"a":"é"}', headers: { 'Content-Type': 'application/json', Authorization: 'Bearer sk-test', 'content-length': '10' } });
      expect(await readAll(res.body)).toBe('ok');
      expect(s.requests[0]).toBe(`POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: 127.0.0.1:${s.port}\r\nContent-Type: application/json\r\nAuthorization: Bearer sk-test\r\ncontent-length: 10\r\nConnection: keep-alive\r\n\r\n{"a":"Ã©"}`);
      // Without a length from the caller, it is the body's.
      const again = await send(upstream, `http://127.0.0.1:${s.port}/v1/x`, { body: 'abc', headers: {} });
      await readAll(again.body);
      expect(s.requests[1]).toContain('\r\nContent-Length: 3\r\n');
      expect(s.connections).toHaveLength(1);
    } finally {
      await s.close();
    }
  });

  it('hands out a chunked body as it arrives, not once it ended', async () => {
    let serverSocket: net.Socket | undefined;
    const s = await rawServer((socket) => {
      serverSocket = socket;
      socket.write('HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n7\r\ndata: 1\r\n');
    });
    try {
      const res = await send(upstream, `http://127.0.0.1:${s.port}/v1/chat/completions`);
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe('text/event-stream');
      const first = await new Promise<Buffer>((resolve) => res.body.once('data', resolve));
      expect(first.toString()).toBe('data: 1');
      res.body.pause();
      // The rest only now: the first part was handed out while the reply was still open.
      (serverSocket as net.Socket).write('7\r\ndata: 2\r\n0\r\n\r\n');
      expect(await readAll(res.body)).toBe('data: 2');
      // Read to its end: the connection carries the next call.
      const next = await send(upstream, `http://127.0.0.1:${s.port}/v1/chat/completions`);
      (serverSocket as net.Socket).write('0\r\n\r\n');
      expect(await readAll(next.body)).toBe('data: 1');
      expect(s.connections).toHaveLength(1);
    } finally {
      await s.close();
    }
  });

  it('stops reading the socket while the body is not taken, and loses nothing when it is', async () => {
    const size = 8 * 1024 * 1024;
    const payload = Buffer.alloc(size);
    for (let i = 0; i < size; i += 1) payload[i] = i % 251;
    let written = false;
    const s = await rawServer((socket) => {
      socket.write(`HTTP/1.1 200 OK\r\ncontent-length: ${size}\r\n\r\n`);
      written = socket.write(payload);
    });
    try {
      const res = await send(upstream, `http://127.0.0.1:${s.port}/big`);
      await sleep(300);
      // Nothing read yet: the body holds a little, the rest waits in the kernel and the server.
      expect(res.body.readableLength).toBeLessThan(2 * 1024 * 1024);
      expect(written).toBe(false);
      const parts: Buffer[] = [];
      for await (const part of res.body) parts.push(part as Buffer);
      expect(Buffer.concat(parts).equals(payload)).toBe(true);
    } finally {
      await s.close();
    }
  });

  it('reads a reply framed by the connection\'s end, skips a 1xx, and joins repeated headers as Node does', async () => {
    const s = await rawServer((socket) => {
      socket.end('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nretry-after: 9\r\nX-Note: a\r\nx-note: b\r\nconnection: close\r\n\r\n{"error":"slow down"}');
    });
    try {
      const res = await send(upstream, `http://127.0.0.1:${s.port}/v1/chat/completions`);
      expect(res.status).toBe(429);
      expect(res.headers['retry-after']).toBe('7');
      expect(res.headers['x-note']).toBe('a, b');
      expect(await readAll(res.body)).toBe('{"error":"slow down"}');
      // That connection is gone: the next call opens another.
      const again = send(upstream, `http://127.0.0.1:${s.port}/v1/chat/completions`);
      expect((await again).status).toBe(429);
      expect(s.connections).toHaveLength(2);
    } finally {
      await s.close();
    }
  });

  it('an abort before the reply rejects with an AbortError and closes the connection', async () => {
    const s = await rawServer(() => undefined);
    try {
      const controller = new AbortController();
      const call = send(upstream, `http://127.0.0.1:${s.port}/slow`, { signal: controller.signal });
      while (s.requests.length === 0) await sleep(5);
      controller.abort(new Error('deadline'));
      await expect(call).rejects.toMatchObject({ name: 'AbortError' });
      await closed(s.connections[0] as net.Socket);
      // An already-aborted signal sends nothing.
      await expect(send(upstream, `http://127.0.0.1:${s.port}/slow`, { signal: controller.signal })).rejects.toMatchObject({ name: 'AbortError' });
      expect(s.requests).toHaveLength(1);
      await until(() => upstream.openSockets === 0);
    } finally {
      await s.close();
    }
  });

  it('an abort during the body ends the body with an AbortError and the connection with it', async () => {
    const s = await rawServer((socket) => socket.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n'));
    try {
      const controller = new AbortController();
      const res = await send(upstream, `http://127.0.0.1:${s.port}/stream`, { signal: controller.signal });
      const reading = readAll(res.body);
      await sleep(20);
      controller.abort();
      await expect(reading).rejects.toMatchObject({ name: 'AbortError' });
      await closed(s.connections[0] as net.Socket);
    } finally {
      await s.close();
    }
  });

  it('listens for the abort with a function, not an object, and stops listening when the reply is whole', async () => {
    // Node's EventTarget keeps what an object listener (`handleEvent`) reaches alive through every
    // young-generation collection (docs/gateway.md, "What an idle scavenge keeps"): the exchange
    // reaches its whole request.
    const s = await rawServer((socket) => socket.write('HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello'));
    const controller = new AbortController();
    const added: unknown[] = [];
    const removed: unknown[] = [];
    const add = jest.spyOn(controller.signal, 'addEventListener').mockImplementation(function (this: AbortSignal, type, listener, options) {
      added.push(listener);
      return EventTarget.prototype.addEventListener.call(this, type, listener, options);
    });
    const remove = jest.spyOn(controller.signal, 'removeEventListener').mockImplementation(function (this: AbortSignal, type, listener, options) {
      removed.push(listener);
      return EventTarget.prototype.removeEventListener.call(this, type, listener, options);
    });
    try {
      const res = await send(upstream, `http://127.0.0.1:${s.port}/whole`, { signal: controller.signal });
      expect(await readAll(res.body)).toBe('hello');
      expect(added).toHaveLength(1);
      expect(typeof added[0]).toBe('function');
      expect(removed).toContain(added[0]);
    } finally {
      add.mockRestore();
      remove.mockRestore();
      await s.close();
    }
  });

  it('a body left unread closes its connection: the next call takes a new one', async () => {
    const s = await rawServer((socket) => socket.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n'));
    try {
      const res = await send(upstream, `http://127.0.0.1:${s.port}/stream`);
      res.body.destroy();
      await closed(s.connections[0] as net.Socket);
      const next = await send(upstream, `http://127.0.0.1:${s.port}/stream`);
      next.body.destroy();
      expect(s.connections).toHaveLength(2);
    } finally {
      await s.close();
    }
  });

  it('a connection cut in the middle of a body fails the body with a reset', async () => {
    const s = await rawServer((socket) => {
      socket.write('HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\npartial');
      setTimeout(() => socket.destroy(), 20);
    });
    try {
      const res = await send(upstream, `http://127.0.0.1:${s.port}/cut`);
      await expect(readAll(res.body)).rejects.toMatchObject({ code: 'ECONNRESET' });
    } finally {
      await s.close();
    }
  });

  it('refuses a header value with a line break, naming the header and not its value, before connecting', async () => {
    const s = await rawServer(() => undefined);
    try {
      const call = send(upstream, `http://127.0.0.1:${s.port}/v1/chat/completions`, { headers: { authorization: 'Bearer sk-secret\r\nX-Injected: 1' } });
      await expect(call).rejects.toMatchObject({ code: 'ERR_INVALID_CHAR' });
      await expect(call).rejects.not.toThrow(/sk-secret/);
      await expect(send(upstream, `http://127.0.0.1:${s.port}/v1`, { headers: { 'bad name': 'x' } })).rejects.toMatchObject({ code: 'ERR_INVALID_HTTP_TOKEN' });
      await sleep(20);
      expect(s.connections).toHaveLength(0);
    } finally {
      await s.close();
    }
  });

  it('refuses a URL that is not http or https', async () => {
    await expect(send(upstream, 'ftp://127.0.0.1/v1')).rejects.toMatchObject({ code: 'ERR_INVALID_PROTOCOL' });
  });

  it('fails a refused connection with its code', async () => {
    const s = await rawServer(() => undefined);
    const port = s.port;
    await s.close();
    await expect(send(upstream, `http://127.0.0.1:${port}/v1`)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  });

  it('serves calls at once on as many connections, each reply to its own call', async () => {
    const server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => setTimeout(() => res.end(`echo:${body}`), Math.random() * 20));
    });
    server.keepAliveTimeout = 60_000;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      for (let round = 0; round < 3; round += 1) {
        const got = await Promise.all(Array.from({ length: 40 }, async (_, i) => readAll((await send(upstream, `http://127.0.0.1:${port}/e`, { body: `r${round}-${i}`, headers: {} })).body)));
        expect(got).toEqual(Array.from({ length: 40 }, (_, i) => `echo:r${round}-${i}`));
      }
      expect(upstream.openSockets).toBeLessThanOrEqual(40);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

describe('HttpUpstream over TLS', () => {
  const { cert, key } = localhostTls;

  it('keeps one TLS socket for calls one after another, resumes the session on a new one, and refuses a certificate it does not trust', async () => {
    const resumed: boolean[] = [];
    const srv = https.createServer({ cert, key }, (req, res) => {
      req.resume();
      req.on('end', () => res.end('secure'));
    });
    srv.keepAliveTimeout = 60_000;
    await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
    const { port } = srv.address() as AddressInfo;
    srv.on('secureConnection', (socket: TLSSocket) => resumed.push(socket.isSessionReused()));
    const trusting = new HttpUpstream(undefined, { tls: { ca: cert } });
    try {
      for (let i = 0; i < 3; i += 1) expect(await readAll((await send(trusting, `https://localhost:${port}/v1`)).body)).toBe('secure');
      expect(resumed).toEqual([false]);
      srv.closeIdleConnections();
      await sleep(50);
      expect(await readAll((await send(trusting, `https://localhost:${port}/v1`)).body)).toBe('secure');
      expect(resumed).toEqual([false, true]);
      await expect(send(upstream, `https://localhost:${port}/v1`)).rejects.toMatchObject({ code: 'DEPTH_ZERO_SELF_SIGNED_CERT' });
    } finally {
      trusting.close();
      srv.closeAllConnections();
      await new Promise<void>((resolve) => srv.close(() => resolve()));
    }
  });
});
