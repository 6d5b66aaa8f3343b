/**
 * The management API on loopback, for local mode: the same `handleAdmin` the deployed function
 * runs, behind a plain `node:http` server. Where the deployed URL relies on IAM, this one checks
 * an admin token that `npm start` creates on the first start and keeps in `.sluice/admin-token`
 * (mode 0600): only someone who can read that file can manage the local stage. Every change is
 * audited with the principal `local`.
 */
import { randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { chmod, readFile, writeFile } from 'node:fs/promises';
import { ADMIN_MAX_BODY_BYTES, handleAdmin, type AdminDeps } from '../lambdas/admin/app';
import { adminErrorBody } from '../lambdas/admin/refusals';
import { listenOn } from './listen';

/** The header the local admin token travels in. */
export const ADMIN_TOKEN_HEADER = 'authorization';

/** A running local management API. */
export interface AdminServer {
  /** e.g. `http://127.0.0.1:8788`; paths begin `/admin/v1`. */
  readonly url: string;
  close(): Promise<void>;
}

/**
 * Reads the admin token at `path`, or creates one (32 random bytes, base64url) with mode 0600
 * when there is none. Returns the token and whether it was created now.
 */
export async function ensureAdminToken(path: string): Promise<{ token: string; created: boolean }> {
  try {
    const token = (await readFile(path, 'utf8')).trim();
    if (token.length >= 32) {
      await chmod(path, 0o600);
      return { token, created: false };
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const token = randomBytes(32).toString('base64url');
  await writeFile(path, `${token}\n`, { mode: 0o600 });
  await chmod(path, 0o600);
  return { token, created: true };
}

function tokenMatches(header: string | undefined, token: string): boolean {
  const m = /^Bearer (\S+)$/.exec(header ?? '');
  if (m === null) return false;
  const given = Buffer.from(m[1] as string);
  const expected = Buffer.from(token);
  // Constant time, so the token cannot be guessed a character at a time from response timings.
  return given.length === expected.length && timingSafeEqual(given, expected);
}

async function readBody(req: IncomingMessage): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > ADMIN_MAX_BODY_BYTES) return undefined;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Starts the local management API on `host:port` (port 0 picks a free one). */
export async function serveAdmin(opts: { deps: AdminDeps; token: string; host?: string; port: number }): Promise<AdminServer> {
  const host = opts.host ?? '127.0.0.1';
  const server: Server = createServer((req, res) => {
    void (async () => {
      const requestId = `req_${randomUUID().replace(/-/g, '')}`;
      const send = (status: number, headers: Record<string, string>, body: string): void => {
        res.writeHead(status, { ...headers, 'content-length': String(Buffer.byteLength(body)) });
        res.end(body);
      };
      if (!tokenMatches(req.headers[ADMIN_TOKEN_HEADER], opts.token)) {
        send(401, { 'content-type': 'application/json', 'x-sluice-request-id': requestId, 'x-request-id': requestId },
          adminErrorBody({ message: 'The local management API needs the admin token from .sluice/admin-token as a Bearer token.', type: 'authentication_error', code: 'unauthenticated', requestId }));
        req.resume();
        return;
      }
      const body = await readBody(req);
      if (body === undefined) {
        send(413, { 'content-type': 'application/json' }, adminErrorBody({ message: `the body is over ${ADMIN_MAX_BODY_BYTES} bytes`, type: 'invalid_request_error', code: 'payload_too_large', requestId }));
        return;
      }
      const url = new URL(req.url ?? '/', 'http://local');
      const query: Record<string, string> = {};
      for (const [k, v] of url.searchParams) query[k] = v;
      const out = await handleAdmin({ method: req.method ?? 'GET', path: url.pathname, query, body, principal: 'local', requestId }, opts.deps);
      send(out.status, { ...out.headers }, out.body);
    })().catch(() => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  const { port, close } = await listenOn(server, opts.port, host);
  return { url: `http://${host}:${port}`, close };
}
