/**
 * The console on loopback, for local mode and the tests: the same `handleConsole` the deployed
 * function runs, behind a plain `node:http` server. Browsers reach it as
 * `http://localhost:<port>` (WebAuthn wants a host name, and treats localhost as a secure
 * context, so Secure cookies and passkeys work without TLS).
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { CONSOLE_MAX_BODY_BYTES, handleConsole } from '../lambdas/console/app';
import type { ConsoleDeps } from '../lambdas/console/ports';
import { listenOn } from './listen';

/** A running local console. */
export interface ConsoleServer {
  /** e.g. `http://localhost:8790`. */
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

async function readBody(req: IncomingMessage): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > CONSOLE_MAX_BODY_BYTES) return undefined;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * Listens on `host:port` (port 0 picks a free one); `deps` is built from the chosen port, since
 * the console's origin (and so its passkeys) names it.
 */
export async function serveConsole(opts: { deps: (port: number) => ConsoleDeps; host?: string; port: number }): Promise<ConsoleServer> {
  const host = opts.host ?? '127.0.0.1';
  let deps: ConsoleDeps | undefined;
  const server: Server = createServer((req, res) => {
    void (async () => {
      const requestId = `req_${randomBytes(12).toString('hex')}`;
      const body = await readBody(req);
      const url = new URL(req.url ?? '/', 'http://localhost');
      const query: Record<string, string> = {};
      for (const [k, v] of url.searchParams) query[k] = v;
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers[k] = v;
      if (deps === undefined) throw new Error('console not ready');
      const out =
        body === undefined
          ? { status: 413, headers: { 'content-type': 'text/plain' }, body: 'too large' }
          : await handleConsole({ method: req.method ?? 'GET', path: url.pathname, query, headers, cookies: [], body, requestId }, deps);
      const cookies = 'cookies' in out && out.cookies !== undefined ? [...out.cookies] : [];
      res.writeHead(out.status, { ...out.headers, ...(cookies.length === 0 ? {} : { 'set-cookie': cookies }), 'content-length': String(Buffer.byteLength(out.body)) });
      res.end(out.body);
    })().catch(() => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  const { port, close } = await listenOn(server, opts.port, host);
  deps = opts.deps(port);
  return { url: `http://localhost:${port}`, port, close };
}
