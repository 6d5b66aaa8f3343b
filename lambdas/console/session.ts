/**
 * The browser session: who is signed in (the cookie's session, then the member, read on every
 * request so a removed member or a changed role takes effect at once), and the checks every
 * change must pass before it runs (same origin, and the session's CSRF token in a header).
 */
import { timingSafeEqual } from 'node:crypto';
import { getMember, getSession } from '../store/console-auth';
import { CSRF_HEADER, SESSION_COOKIE, cookieValue, type ConsoleRequest } from './http';
import type { ConsoleDeps, ConsoleSession } from './ports';

/** The signed-in member of a request, or undefined (no cookie, unknown, expired, or no longer a member). */
export async function currentSession(req: ConsoleRequest, deps: ConsoleDeps): Promise<ConsoleSession | undefined> {
  const sessionId = cookieValue(req, SESSION_COOKIE);
  if (sessionId === undefined || !/^[A-Za-z0-9_-]{43}$/.test(sessionId)) return undefined;
  const session = await getSession(deps.admin.ctx, sessionId);
  if (session === undefined) return undefined;
  const member = await getMember(deps.admin.ctx, session.workspaceId, session.memberId);
  if (member === undefined) return undefined;
  return { sessionId, workspaceId: session.workspaceId, memberId: session.memberId, role: member.role, email: member.email ?? null, csrf: session.csrf };
}

function same(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * Why a state-changing request must be refused, or undefined when it may run. Every change must
 * come from the console's own origin (the `Origin` header, which browsers send on every
 * cross-site and every non-GET request) and, once signed in, carry the session's CSRF token in
 * `x-sluice-csrf`: a page on another site can neither read the token nor set the header without
 * a CORS preflight this console never answers.
 */
export function changeRefusal(req: ConsoleRequest, deps: ConsoleDeps, session?: ConsoleSession): string | undefined {
  const origin = req.headers['origin'];
  if (origin === undefined || origin !== deps.config.origin) return 'This change did not come from the console (its Origin does not match).';
  const site = req.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin') return 'This change did not come from the console (cross-site request).';
  if (!(req.headers['content-type'] ?? '').toLowerCase().startsWith('application/json')) return 'A change must be sent as JSON.';
  if (session !== undefined) {
    const token = req.headers[CSRF_HEADER];
    if (token === undefined || !same(token, session.csrf)) return 'This change lacks the session’s CSRF token; reload the page and try again.';
  }
  return undefined;
}
