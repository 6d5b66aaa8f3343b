/**
 * Pooled provider connections (issue 14, item 4): idle ones are closed by this side before the
 * provider's idle timeout can close them under a request, so reuse never meets a closed
 * connection; a reset after the request went out (the provider may have read it) is not sent
 * again, so no request reaches a provider twice; only a write the kernel refused (EPIPE: nothing
 * left) is.
 */
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { HttpUpstream, closedAtReuse } from '../../lambdas/adapters/http-upstream';

/**
 * A tiny HTTP/1.1 provider on raw sockets. `onSecond` decides what happens to the second request
 * arriving on a connection: `reset` drops the connection the moment its bytes arrive (unread, as
 * a server whose idle timeout just fired), `answer-then-reset` sends a status line and resets.
 */
async function provider(onSecond: 'reset' | 'answer-then-reset' | 'serve', idleCloseMs?: number): Promise<{ port: number; read: string[]; connections: number; close(): Promise<void> }> {
  const read: string[] = [];
  const state = { connections: 0 };
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    state.connections += 1;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    let seen = 0;
    let buffered = '';
    // A server's keep-alive timeout: an idle connection is closed after this long.
    let idle: NodeJS.Timeout | undefined;
    const armIdle = (): void => {
      if (idleCloseMs === undefined) return;
      clearTimeout(idle);
      idle = setTimeout(() => socket.end(), idleCloseMs);
    };
    armIdle();
    socket.on('close', () => clearTimeout(idle));
    socket.on('data', (d: Buffer) => {
      clearTimeout(idle);
      buffered += d.toString('latin1');
      for (;;) {
        const head = buffered.indexOf('\r\n\r\n');
        if (head === -1) return;
        const length = Number(/content-length: (\d+)/i.exec(buffered.slice(0, head))?.[1] ?? '0');
        if (buffered.length < head + 4 + length) return;
        const body = buffered.slice(head + 4, head + 4 + length);
        buffered = buffered.slice(head + 4 + length);
        seen += 1;
        if (seen === 2 && onSecond === 'reset') {
          socket.resetAndDestroy();
          return;
        }
        read.push(body);
        if (seen === 2 && onSecond === 'answer-then-reset') {
          socket.write('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"partial":', () => socket.resetAndDestroy());
          return;
        }
        const reply = JSON.stringify({ echo: body });
        socket.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: keep-alive\r\ncontent-length: ${reply.length}\r\n\r\n${reply}`, armIdle);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    read,
    get connections() {
      return state.connections;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function call(upstream: HttpUpstream, port: number, body: string): Promise<{ status: number; text: string }> {
  const res = await upstream.send({
    url: `http://127.0.0.1:${port}/v1/chat/completions`,
    headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
    body: Buffer.from(body),
    signal: new AbortController().signal,
  });
  const chunks: Buffer[] = [];
  for await (const c of res.body) chunks.push(c as Buffer);
  return { status: res.status, text: Buffer.concat(chunks).toString('utf8') };
}

it('an idle pooled connection is closed by this side before the provider closes it, so reuse never meets a closed one', async () => {
  const p = await provider('serve', 300);
  const upstream = new HttpUpstream(150);
  try {
    for (let i = 0; i < 4; i += 1) {
      expect((await call(upstream, p.port, `{"n":${i}}`)).status).toBe(200);
      // Past our idle limit, just short of (and then past) the provider's.
      await sleep(i % 2 === 0 ? 250 : 350);
    }
    expect(p.read).toEqual(['{"n":0}', '{"n":1}', '{"n":2}', '{"n":3}']);
    expect(p.connections).toBe(4);
    expect(upstream.resent).toBe(0);
  } finally {
    upstream.close();
    await p.close();
  }
});

it('a connection reset after the request went out is not sent again: the provider may have read it', async () => {
  const p = await provider('reset');
  const upstream = new HttpUpstream();
  try {
    await call(upstream, p.port, '{"n":1}');
    await expect(call(upstream, p.port, '{"n":2}')).rejects.toMatchObject({ code: 'ECONNRESET' });
    expect(p.connections).toBe(1);
    expect(upstream.resent).toBe(0);
  } finally {
    upstream.close();
    await p.close();
  }
});

it('a reset after the provider began answering is not sent again', async () => {
  const p = await provider('answer-then-reset');
  const upstream = new HttpUpstream();
  try {
    await call(upstream, p.port, '{"n":1}');
    await expect(call(upstream, p.port, '{"n":2}')).rejects.toThrow();
    expect(p.read).toEqual(['{"n":1}', '{"n":2}']);
    expect(upstream.resent).toBe(0);
  } finally {
    upstream.close();
    await p.close();
  }
});

it('a reused connection that keeps working is reused, not replaced', async () => {
  const p = await provider('serve');
  const upstream = new HttpUpstream();
  try {
    for (let i = 0; i < 3; i += 1) await call(upstream, p.port, `{"n":${i}}`);
    expect(p.connections).toBe(1);
    expect(upstream.resent).toBe(0);
  } finally {
    upstream.close();
    await p.close();
  }
});

describe('closedAtReuse', () => {
  const reset = Object.assign(new Error('x'), { code: 'ECONNRESET' });
  it.each([
    ['reset on a reused socket before an answer (the provider may have read it)', reset, true, false, false],
    ['EPIPE on a reused socket before an answer', Object.assign(new Error('x'), { code: 'EPIPE' }), true, false, true],
    ['reset on a fresh socket', reset, false, false, false],
    ['reset after an answer began', reset, true, true, false],
    ['a refused connection', Object.assign(new Error('x'), { code: 'ECONNREFUSED' }), true, false, false],
    ['an abort', Object.assign(new Error('x'), { name: 'AbortError', code: 'ABORT_ERR' }), true, false, false],
  ])('%s: %s', (_name, err, reused, answered, expected) => {
    expect(closedAtReuse(err, reused, answered)).toBe(expected);
  });
});
