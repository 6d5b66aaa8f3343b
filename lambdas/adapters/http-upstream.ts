/**
 * Provider calls over node:http(s) with keep-alive agents: the response body is a Readable that
 * the relay consumes chunk by chunk, so nothing is buffered beyond what the client has not read.
 *
 * A pooled connection can be closed by the provider just as it is reused (its idle timeout fired
 * while the request was on its way). Two things keep that from failing a request without ever
 * sending one twice: idle pooled connections are closed by this side first (after
 * `idleSocketMs`, under the 5 s idle timeout of Node-based servers and well under the usual
 * providers'), and a request whose write the kernel refused outright (EPIPE on a reused socket,
 * before any byte of an answer: nothing reached the provider) is sent again, once, on a fresh
 * connection. A reset after the request went out is not retried here: the provider may have read
 * it, and a route moves on to its next model instead.
 */
import http from 'node:http';
import https from 'node:https';
import type { Upstream, UpstreamRequest, UpstreamResponse } from '../gateway/ports';

/** Idle pooled connections are closed after this long, before the provider's side closes them. */
export const DEFAULT_IDLE_SOCKET_MS = 4_000;

/** The kernel refused the write: the peer had already closed, so nothing of the request left. */
const CLOSED_AT_REUSE = new Set(['EPIPE']);

/** How a failed attempt can be told apart from one the provider may have seen. */
export function closedAtReuse(err: unknown, reusedSocket: boolean, answered: boolean): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return reusedSocket && !answered && typeof code === 'string' && CLOSED_AT_REUSE.has(code);
}

export class HttpUpstream implements Upstream {
  private readonly httpAgent: http.Agent;
  private readonly httpsAgent: https.Agent;

  /** @param idleSocketMs how long a pooled connection may sit idle before this side closes it */
  constructor(idleSocketMs = DEFAULT_IDLE_SOCKET_MS) {
    // The agent's `timeout` ends sockets idle in its free pool; a socket in use is left alone.
    const agentOptions = { keepAlive: true, keepAliveMsecs: 30_000, maxSockets: 256, timeout: idleSocketMs };
    this.httpAgent = new http.Agent(agentOptions);
    this.httpsAgent = new https.Agent(agentOptions);
  }
  /** Requests sent again on a fresh connection after their pooled one was found closed. */
  resent = 0;

  async send(request: UpstreamRequest): Promise<UpstreamResponse> {
    try {
      return await this.attempt(request, true);
    } catch (err) {
      if (!(err instanceof PooledConnectionClosedError) || request.signal.aborted) throw err instanceof PooledConnectionClosedError ? err.cause : err;
      this.resent += 1;
      return this.attempt(request, false);
    }
  }

  private attempt(request: UpstreamRequest, pooled: boolean): Promise<UpstreamResponse> {
    const url = new URL(request.url);
    const secure = url.protocol === 'https:';
    const transport = secure ? https : http;
    // The retry takes a connection of its own (the pool could hand out another stale one); it
    // keeps the pool for the next request all the same.
    const agent = pooled ? (secure ? this.httpsAgent : this.httpAgent) : false;
    return new Promise((resolve, reject) => {
      let answered = false;
      const req = transport.request(url, { method: 'POST', headers: request.headers, agent, signal: request.signal }, (res) => {
        answered = true;
        res.socket?.setNoDelay(true);
        const headers: Record<string, string | undefined> = {};
        for (const [name, value] of Object.entries(res.headers)) headers[name] = Array.isArray(value) ? value.join(', ') : value;
        resolve({ status: res.statusCode ?? 502, headers, body: res });
      });
      req.on('error', (err) => {
        reject(pooled && closedAtReuse(err, req.reusedSocket, answered) ? new PooledConnectionClosedError(err) : err);
      });
      req.setNoDelay(true);
      req.end(request.body);
    });
  }

  /** Closes idle sockets (local mode and tests). */
  close(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }
}

/** The pooled connection was closed by the provider before it read the request. */
class PooledConnectionClosedError extends Error {
  override readonly name = 'PooledConnectionClosedError';
  constructor(override readonly cause: unknown) {
    super('the pooled connection was closed by the provider at reuse');
  }
}
