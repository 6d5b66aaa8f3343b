/**
 * A provider that closes an idle keep-alive connection just as it is reused (issue 14, item 4):
 * the request is sent again once, on a fresh connection, and succeeds; the provider reads every
 * request exactly once. A reset after the provider began answering, or on a connection that was
 * not reused, is not retried.
 */
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { HttpUpstream, closedAtReuse } from '../../lambdas/adapters/http-upstream';

/**
 * A tiny HTTP/1.1 provider on raw sockets. `onSecond` decides what happens to the second request
 * arriving on a connection: `reset` drops the connection the moment its bytes arrive (unread, as
 * a server whose idle timeout just fired), `answer-then-reset` sends a status line and resets.
 */
async function provider(onSecond: 'reset' | 'answer-then-reset' | 'serve'): Promise<{ port: number; read: string[]; connections: number; close(): Promise<void> }> {
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
    socket.on('data', (d: Buffer) => {
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
        socket.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: keep-alive\r\ncontent-length: ${reply.length}\r\n\r\n${reply}`);
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

it('a pooled connection closed at reuse: sent again once on a fresh connection, read once', async () => {
  const p = await provider('reset');
  const upstream = new HttpUpstream();
  try {
    expect(await call(upstream, p.port, '{"n":1}')).toEqual({ status: 200, text: '{"echo":"{\\"n\\":1}"}' });
    expect(await call(upstream, p.port, '{"n":2}')).toEqual({ status: 200, text: '{"echo":"{\\"n\\":2}"}' });
    expect(p.read).toEqual(['{"n":1}', '{"n":2}']);
    expect(p.connections).toBe(2);
    expect(upstream.resent).toBe(1);
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
    ['reset on a reused socket before an answer', reset, true, false, true],
    ['EPIPE on a reused socket before an answer', Object.assign(new Error('x'), { code: 'EPIPE' }), true, false, true],
    ['reset on a fresh socket', reset, false, false, false],
    ['reset after an answer began', reset, true, true, false],
    ['a refused connection', Object.assign(new Error('x'), { code: 'ECONNREFUSED' }), true, false, false],
    ['an abort', Object.assign(new Error('x'), { name: 'AbortError', code: 'ABORT_ERR' }), true, false, false],
  ])('%s: %s', (_name, err, reused, answered, expected) => {
    expect(closedAtReuse(err, reused, answered)).toBe(expected);
  });
});
