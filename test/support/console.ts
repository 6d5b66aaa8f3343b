/**
 * The console for tests: its app over a test's tables (through the same management deps the
 * loopback management API uses), a signed-in session made straight in the store for API-level
 * tests, and the loopback server with the esbuild bundle for the browser tests.
 */
import { randomBytes } from 'node:crypto';
import { handleConsole, type ConsoleRequest, type ConsoleResponse } from '../../lambdas/console/app';
import { CONSOLE_ENV, loadConsoleConfig } from '../../lambdas/console/env';
import { CSRF_HEADER, SESSION_COOKIE } from '../../lambdas/console/http';
import type { ConsoleAssets, ConsoleDeps } from '../../lambdas/console/ports';
import type { AdminDeps } from '../../lambdas/admin/ports';
import { putSession } from '../../lambdas/store/console-auth';
import { memoryAssets } from '../../local/console-assets';
import { serveConsole, type ConsoleServer } from '../../local/console-server';

/** The origin API-level tests pretend to be served on. */
export const TEST_ORIGIN = 'http://localhost:8790';

/** Console deps over a management API's deps. */
export function consoleDeps(admin: AdminDeps, origin = TEST_ORIGIN, assets: ConsoleAssets = { get: async () => undefined }): ConsoleDeps {
  return { admin, config: loadConsoleConfig({ [CONSOLE_ENV.origin]: origin }), assets, keyRatePerMinute: 600 };
}

/** A session written straight into the store: what a passkey sign-in ends with. */
export interface TestSession {
  readonly sessionId: string;
  readonly csrf: string;
}

/** Signs a member in without a browser (the passkey part is the browser tests'). */
export async function signInAs(deps: ConsoleDeps, workspaceId: string, memberId: string): Promise<TestSession> {
  const sessionId = randomBytes(32).toString('base64url');
  const csrf = randomBytes(32).toString('base64url');
  const clock = deps.admin.ctx.now ?? Date.now;
  // Expires after the console's session length on the context's clock, as a real sign-in would;
  // a test that moves the clock past it sees the session end.
  const now = clock();
  await putSession(deps.admin.ctx, sessionId, { workspaceId, memberId, csrf, createdAt: now, expiresAt: now + deps.config.sessionMs });
  return { sessionId, csrf };
}

/** Calls the console app as a browser on its origin would (cookie, Origin, CSRF header, JSON). */
export async function callConsole(
  deps: ConsoleDeps,
  session: TestSession | undefined,
  method: string,
  path: string,
  body?: unknown,
  opts: { origin?: string | null; csrf?: string | null; query?: Record<string, string> } = {},
): Promise<{ status: number; body: Record<string, unknown>; res: ConsoleResponse }> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  const origin = opts.origin === undefined ? deps.config.origin : opts.origin;
  if (origin !== null) headers['origin'] = origin;
  const csrf = opts.csrf === undefined ? session?.csrf : opts.csrf;
  if (csrf !== null && csrf !== undefined) headers[CSRF_HEADER] = csrf;
  const req: ConsoleRequest = {
    method,
    path,
    query: opts.query ?? {},
    headers,
    cookies: session === undefined ? [] : [`${SESSION_COOKIE}=${session.sessionId}`],
    body: body === undefined ? undefined : JSON.stringify(body),
    requestId: `req_${randomBytes(12).toString('hex')}`,
  };
  const res = await handleConsole(req, deps);
  let parsed: Record<string, unknown> = {};
  try {
    parsed = JSON.parse(res.body) as Record<string, unknown>;
  } catch {
    parsed = {};
  }
  return { status: res.status, body: parsed, res };
}

/** The console on a free loopback port, with the real bundle; reach it as `url` (localhost). */
export function serveTestConsole(admin: AdminDeps): Promise<ConsoleServer> {
  const assets = memoryAssets();
  return serveConsole({ port: 0, deps: (port) => consoleDeps(admin, `http://localhost:${port}`, assets) });
}
