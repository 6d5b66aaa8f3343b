/**
 * The session API's bridge to the management API: `/console/api/<rest>` is the management
 * route `/admin/v1/workspaces/<the session's workspace>/<rest>`, run by the very `handleAdmin`
 * the CLI calls, as the signed-in member (the audit's author). Before it runs, the role table of
 * `core/console-roles.ts` decides whether this member may make that change; a refused change
 * answers 403 whatever the page showed.
 */
import { ADMIN_BASE_PATH, handleAdmin, type AdminResponse } from '../admin/app';
import { ROUTES } from '../admin/routes';
import { decideConsoleAction } from '../core/console-roles';
import { json, refusal, type ConsoleResponse } from './http';
import { consolePrincipal, type ConsoleDeps, type ConsoleSession } from './ports';

/** A management call on the session's workspace. */
export interface WorkspaceCall {
  readonly method: string;
  /** Path segments after `/workspaces/<ws>`, decoded. */
  readonly rest: readonly string[];
  readonly query?: Readonly<Record<string, string | undefined>>;
  readonly body?: Readonly<Record<string, unknown>>;
  readonly requestId: string;
}

function matches(pattern: readonly string[], parts: readonly string[]): boolean {
  return pattern.length === parts.length && pattern.every((p, i) => p.startsWith(':') || p === parts[i]);
}

/** The audit action of the management route a call reaches; undefined for a read or no route. */
function actionOf(method: string, parts: readonly string[]): { found: boolean; action?: string } {
  const route = ROUTES.find((r) => r.method === method.toUpperCase() && matches(r.pattern, parts));
  return route === undefined ? { found: false } : { found: true, ...(route.action === undefined ? {} : { action: route.action }) };
}

/** Why this member may not make this call, or undefined when they may. */
export function forbiddenReason(session: ConsoleSession, call: Pick<WorkspaceCall, 'method' | 'rest'>): string | undefined {
  const parts = ['workspaces', session.workspaceId, ...call.rest];
  const route = actionOf(call.method, parts);
  if (!route.found || route.action === undefined) return undefined; // a read, or a 404/405 the management API gives
  const decision = decideConsoleAction(session.role, route.action);
  return decision.allowed ? undefined : decision.reason;
}

/**
 * Runs one management call as the signed-in member. A key minted from the console is minted
 * for the member who minted it, so their monthly limit counts it.
 */
export async function callWorkspace(deps: ConsoleDeps, session: ConsoleSession, call: WorkspaceCall): Promise<AdminResponse> {
  const reason = forbiddenReason(session, call);
  if (reason !== undefined) {
    const r = refusal(403, 'permission_error', 'forbidden', reason, call.requestId);
    return { status: r.status, headers: r.headers, body: r.body };
  }
  let body = call.body ?? {};
  if (call.method === 'POST' && call.rest.length === 1 && call.rest[0] === 'keys') body = { ...body, memberId: session.memberId };
  const path = `${ADMIN_BASE_PATH}/workspaces/${[session.workspaceId, ...call.rest].map(encodeURIComponent).join('/')}`;
  return handleAdmin(
    { method: call.method, path, query: call.query ?? {}, body: JSON.stringify(body), principal: consolePrincipal(session), requestId: call.requestId },
    deps.admin,
  );
}

/** A management answer as a console answer (same status and envelope). */
export function asConsoleResponse(res: AdminResponse, requestId: string): ConsoleResponse {
  let parsed: unknown;
  try {
    parsed = JSON.parse(res.body);
  } catch {
    parsed = {};
  }
  const out = json(res.status, requestId, parsed);
  return { ...out, headers: { ...out.headers, ...(res.headers['allow'] === undefined ? {} : { allow: res.headers['allow'] }) } };
}

/** Reads one management answer as JSON, throwing its envelope's message when it is a refusal. */
export async function readWorkspace<T>(deps: ConsoleDeps, session: ConsoleSession, rest: readonly string[], requestId: string, query: Record<string, string> = {}): Promise<T> {
  const res = await callWorkspace(deps, session, { method: 'GET', rest, query, requestId });
  const parsed = JSON.parse(res.body) as T & { error?: { message?: string } };
  if (res.status >= 400) throw new Error(parsed.error?.message ?? `management read failed (${res.status})`);
  return parsed;
}
