/**
 * The console (`/console/…`): server-rendered pages, the browser bundle, and the private session
 * API (`/console/api/…`, SPEC: not an integration surface). Knows nothing of the runtime:
 * `handler.ts` (Lambda Function URL) and `local/console-server.ts` (loopback) decode their
 * requests into a {@link ConsoleRequest} and write the {@link ConsoleResponse} back.
 */
import type { AuthenticationResponseJSON, RegistrationResponseJSON } from '@simplewebauthn/server';
import { AdminError } from '../store/directory-errors';
import { deleteSession } from '../store/console-auth';
import { clearedSessionCookie, html, json, redirect, refusal, sessionCookie, type ConsoleRequest, type ConsoleResponse } from './http';
import { CONSOLE_ICON_PATHS, CONSOLE_ICON_SVG } from './icon';
import { pageFrame } from './layout';
import { joinOptions, joinVerify, signInOptions, signInVerify, SignInError, type NewSession } from './passkeys';
import { joinPage, signInPage } from './pages';
import { renderPage, PAGE_TITLES } from './page-data';
import type { ConsoleDeps, ConsoleSession } from './ports';
import { recentRequests } from './recent-requests';
import { asConsoleResponse, callWorkspace } from './session-api';
import { changeRefusal, currentSession } from './session';

export type { ConsoleRequest, ConsoleResponse } from './http';

/** Largest session API body read. */
export const CONSOLE_MAX_BODY_BYTES = 64 * 1024;

class BadBodyError extends Error {
  override readonly name = 'BadBodyError';
}

function parseBody(raw: string | undefined): Record<string, unknown> {
  if (raw === undefined || raw.trim() === '') return {};
  if (Buffer.byteLength(raw) > CONSOLE_MAX_BODY_BYTES) throw new BadBodyError(`the body is over ${CONSOLE_MAX_BODY_BYTES} bytes`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new BadBodyError('the request body is not JSON');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new BadBodyError('the request body must be a JSON object');
  return parsed as Record<string, unknown>;
}

function signedIn(req: ConsoleRequest, s: NewSession): ConsoleResponse {
  return json(200, req.requestId, { signedIn: true, next: '/console/' }, [sessionCookie(s.sessionId, s.expiresAt)]);
}

/** The browser's WebAuthn answer, checked for the shape the verifier reads before it reads it. */
function credentialOf<T>(body: Record<string, unknown>): T {
  const r = body['response'];
  const inner = typeof r === 'object' && r !== null ? (r as Record<string, unknown>)['response'] : undefined;
  const ok =
    typeof r === 'object' && r !== null && typeof (r as Record<string, unknown>)['id'] === 'string' &&
    typeof inner === 'object' && inner !== null && typeof (inner as Record<string, unknown>)['clientDataJSON'] === 'string';
  if (!ok) throw new BadBodyError('response must be the browser’s WebAuthn credential (id, response.clientDataJSON, …)');
  return r as T;
}

function str(body: Record<string, unknown>, name: string): string {
  const v = body[name];
  if (typeof v !== 'string' || v === '') throw new BadBodyError(`${name} is required`);
  return v;
}

/** The sign-in and joining routes: no session yet, so the Origin check is the CSRF defence. */
async function serveSignIn(req: ConsoleRequest, deps: ConsoleDeps, step: string): Promise<ConsoleResponse> {
  const why = changeRefusal(req, deps);
  if (why !== undefined) return refusal(403, 'permission_error', 'csrf_refused', why, req.requestId);
  const body = parseBody(req.body);
  switch (step) {
    case 'signin/options':
      return json(200, req.requestId, await signInOptions(deps));
    case 'signin/verify':
      return signedIn(req, await signInVerify(deps, { response: credentialOf<AuthenticationResponseJSON>(body) }));
    case 'join/options':
      return json(200, req.requestId, await joinOptions(deps, { workspaceId: str(body, 'workspaceId'), invitation: str(body, 'invitation') }));
    case 'join/verify':
      return signedIn(
        req,
        await joinVerify(deps, { workspaceId: str(body, 'workspaceId'), invitation: str(body, 'invitation'), response: credentialOf<RegistrationResponseJSON>(body), requestId: req.requestId }),
      );
    default:
      return refusal(404, 'not_found_error', 'route_not_found', `no console route at ${req.path}`, req.requestId);
  }
}

/** The session API proper: a signed-in member, and for a change, the Origin and CSRF checks. */
async function serveApi(req: ConsoleRequest, deps: ConsoleDeps, rest: string[]): Promise<ConsoleResponse> {
  const method = req.method.toUpperCase();
  const session = await currentSession(req, deps);
  if (session === undefined) return refusal(401, 'authentication_error', 'signed_out', 'You are not signed in (or your session ended); sign in again.', req.requestId);
  if (method !== 'GET') {
    const why = changeRefusal(req, deps, session);
    if (why !== undefined) return refusal(403, 'permission_error', 'csrf_refused', why, req.requestId);
  }
  if (rest.length === 1 && rest[0] === 'signout' && method === 'POST') {
    await deleteSession(deps.admin.ctx, session.sessionId);
    return json(200, req.requestId, { signedOut: true }, [clearedSessionCookie()]);
  }
  if (rest.length === 1 && rest[0] === 'me' && method === 'GET') return json(200, req.requestId, me(session));
  if (rest.length === 1 && rest[0] === 'recent-requests' && method === 'GET') {
    return json(200, req.requestId, { requests: await recentRequests(deps, session, req.query['limit']) });
  }
  const res = await callWorkspace(deps, session, { method, rest, query: req.query, body: parseBody(req.body), requestId: req.requestId });
  return asConsoleResponse(res, req.requestId);
}

/** The icon: public, the same for everyone, so a browser may keep it for a day. */
function icon(requestId: string): ConsoleResponse {
  return {
    status: 200,
    headers: {
      'content-type': 'image/svg+xml',
      'cache-control': 'public, max-age=86400',
      'x-content-type-options': 'nosniff',
      'content-security-policy': "default-src 'none'",
      'x-sluice-request-id': requestId,
      'x-request-id': requestId,
    },
    body: CONSOLE_ICON_SVG,
  };
}

function me(s: ConsoleSession): Record<string, unknown> {
  return { workspaceId: s.workspaceId, memberId: s.memberId, email: s.email, role: s.role };
}

function segmentsOf(path: string): string[] | undefined {
  try {
    return path.split('/').filter((x) => x !== '').map((x) => decodeURIComponent(x));
  } catch {
    return undefined;
  }
}

/** Serves one console request. Never throws: every fault becomes an envelope or an error page. */
export async function handleConsole(req: ConsoleRequest, deps: ConsoleDeps): Promise<ConsoleResponse> {
  const parts = segmentsOf(req.path);
  const method = req.method.toUpperCase();
  if (CONSOLE_ICON_PATHS.includes(req.path) && (method === 'GET' || method === 'HEAD')) return icon(req.requestId);
  if (parts === undefined || parts[0] !== 'console') return refusal(404, 'not_found_error', 'route_not_found', `no console route at ${req.path}`, req.requestId);
  const rest = parts.slice(1);
  const isApi = rest[0] === 'api';
  try {
    if (isApi) {
      const sub = rest.slice(1);
      const step = sub.join('/');
      if (['signin/options', 'signin/verify', 'join/options', 'join/verify'].includes(step)) {
        if (method !== 'POST') return refusal(405, 'invalid_request_error', 'method_not_allowed', `${method} is not served on ${req.path}`, req.requestId);
        return await serveSignIn(req, deps, step);
      }
      return await serveApi(req, deps, sub);
    }
    if (rest[0] === 'assets' && rest.length === 2 && method === 'GET') {
      const asset = await deps.assets.get(rest[1] as string);
      if (asset === undefined) return refusal(404, 'not_found_error', 'route_not_found', `no console asset ${rest[1]}`, req.requestId);
      return { status: 200, headers: { 'content-type': asset.contentType, 'cache-control': 'no-cache', 'x-content-type-options': 'nosniff' }, body: asset.body };
    }
    if (method !== 'GET') return refusal(405, 'invalid_request_error', 'method_not_allowed', `${method} is not served on ${req.path}`, req.requestId);
    const page = rest.length === 0 ? '' : rest.join('/');
    if (page === 'signin' || page === 'join') {
      const main = page === 'signin' ? signInPage() : joinPage();
      return html(200, req.requestId, pageFrame({ title: page === 'signin' ? 'Sign in' : 'Join a workspace', path: req.path, main }));
    }
    if (!(page in PAGE_TITLES)) return html(404, req.requestId, pageFrame({ title: 'Not found', path: req.path, main: '<p>No such page. <a href="/console/">Back to the console</a>.</p>' }));
    const session = await currentSession(req, deps);
    if (session === undefined) return redirect(req.requestId, '/console/signin');
    return html(200, req.requestId, await renderPage(deps, session, page, req));
  } catch (err) {
    if (err instanceof BadBodyError) return refusal(400, 'invalid_request_error', 'invalid_json', err.message, req.requestId);
    if (err instanceof SignInError) return refusal(401, 'authentication_error', 'signin_failed', err.message, req.requestId);
    if (err instanceof AdminError) {
      const status = err.code.endsWith('not_found') ? 404 : 400;
      return refusal(status, status === 404 ? 'not_found_error' : 'invalid_request_error', err.code, err.message, req.requestId);
    }
    deps.admin.logFault?.({ kind: 'console_fault', error: err instanceof Error ? err.name : 'unknown', requestId: req.requestId });
    if (isApi) return refusal(500, 'api_error', 'console_fault', 'The console failed; quote the request id if it persists.', req.requestId);
    return html(500, req.requestId, pageFrame({ title: 'Something went wrong', path: req.path, main: `<p>The console failed; quote request ${req.requestId} if it persists.</p>` }));
  }
}
