/**
 * The console's HTTP shapes, apart from any runtime: a request as the handler decodes it, a
 * response as it writes it back, cookies, and SPEC's error envelope for the session API.
 */
import { adminErrorBody } from '../admin/refusals';
import type { ErrorType } from '../core/errors';

/** One console request, decoded from whichever runtime carried it. */
export interface ConsoleRequest {
  readonly method: string;
  /** The raw path, e.g. `/console/keys`. */
  readonly path: string;
  readonly query: Readonly<Record<string, string | undefined>>;
  /** Header names in lower case. */
  readonly headers: Readonly<Record<string, string | undefined>>;
  /** Cookie pairs as sent (`name=value`). */
  readonly cookies: readonly string[];
  readonly body: string | undefined;
  readonly requestId: string;
}

/** What goes back: `cookies` are `Set-Cookie` values (a Function URL's `cookies` field). */
export interface ConsoleResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly cookies?: readonly string[];
  readonly body: string;
}

/** The session cookie: `__Host-` so it is Secure, host-only and for the whole site. */
export const SESSION_COOKIE = '__Host-sluice_session';

/** The header a change carries its session's CSRF token in. */
export const CSRF_HEADER = 'x-sluice-csrf';

/** Headers every answer carries: no caching of anything personal, no framing, no sniffing. */
const SAFE_HEADERS: Readonly<Record<string, string>> = {
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'same-origin',
};

/** The value of one cookie, or undefined. */
export function cookieValue(req: ConsoleRequest, name: string): string | undefined {
  const pairs = [...req.cookies, ...(req.headers['cookie'] ?? '').split(';')];
  for (const pair of pairs) {
    const at = pair.indexOf('=');
    if (at > 0 && pair.slice(0, at).trim() === name) return pair.slice(at + 1).trim();
  }
  return undefined;
}

/** A `Set-Cookie` value for the session id, HttpOnly, Secure, SameSite=Strict, with an expiry. */
export function sessionCookie(sessionId: string, expiresAt: number): string {
  return `${SESSION_COOKIE}=${sessionId}; Path=/; HttpOnly; Secure; SameSite=Strict; Expires=${new Date(expiresAt).toUTCString()}`;
}

/** A `Set-Cookie` value that removes the session cookie. */
export function clearedSessionCookie(): string {
  return `${SESSION_COOKIE}=; Path=/; HttpOnly; Secure; SameSite=Strict; Expires=Thu, 01 Jan 1970 00:00:00 GMT`;
}

function ids(requestId: string): Record<string, string> {
  return { 'x-sluice-request-id': requestId, 'x-request-id': requestId };
}

/** A JSON answer. */
export function json(status: number, requestId: string, body: unknown, cookies?: readonly string[]): ConsoleResponse {
  return { status, headers: { ...SAFE_HEADERS, ...ids(requestId), 'content-type': 'application/json' }, ...(cookies === undefined ? {} : { cookies }), body: JSON.stringify(body) };
}

/** A refusal in SPEC's envelope. */
export function refusal(status: number, type: ErrorType, code: string, message: string, requestId: string, cookies?: readonly string[]): ConsoleResponse {
  return {
    status,
    headers: { ...SAFE_HEADERS, ...ids(requestId), 'content-type': 'application/json' },
    ...(cookies === undefined ? {} : { cookies }),
    body: adminErrorBody({ message, type, code, requestId }),
  };
}

/** Content-Security-Policy of every page: scripts and styles from the console itself only. */
const PAGE_CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/** An HTML page. */
export function html(status: number, requestId: string, body: string, cookies?: readonly string[]): ConsoleResponse {
  return {
    status,
    headers: { ...SAFE_HEADERS, ...ids(requestId), 'content-type': 'text/html; charset=utf-8', 'content-security-policy': PAGE_CSP },
    ...(cookies === undefined ? {} : { cookies }),
    body,
  };
}

/** A redirect (303: the browser follows with a GET). */
export function redirect(requestId: string, location: string, cookies?: readonly string[]): ConsoleResponse {
  return { status: 303, headers: { ...SAFE_HEADERS, ...ids(requestId), location }, ...(cookies === undefined ? {} : { cookies }), body: '' };
}
