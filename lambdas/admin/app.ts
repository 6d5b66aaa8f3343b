/**
 * The management API (`/admin/v1/…`): JSON in and out, errors in SPEC's envelope, every change
 * audited. Knows nothing of the runtime: `handler.ts` (Lambda Function URL, IAM auth) and
 * `local/admin-server.ts` (loopback, admin token) decode their requests into an
 * {@link AdminRequest} and write the {@link AdminResponse} back.
 */
import { CatalogValidationError } from '../catalog/errors';
import { AdminError } from '../store/directory-errors';
import { recordAudit, type AuditSummary } from '../store/audit';
import type { AdminDeps } from './ports';
import { ADMIN_REFUSALS, adminErrorBody, isAdminRefusalCode } from './refusals';
import { ROUTES, type RouteResult } from './routes';

import { ADMIN_BASE_PATH, CONFIGURATION_HOME_HEADER } from './paths';
import { homeRegion } from '../store/regions';

export { ADMIN_BASE_PATH, CONFIGURATION_HOME_HEADER };
export type { AdminDeps, RouteCall } from './ports';
/** Largest request body read; a catalog import is the largest legitimate one. */
export const ADMIN_MAX_BODY_BYTES = 4 * 1024 * 1024;

/** One management request, decoded from whichever runtime carried it. */
export interface AdminRequest {
  readonly method: string;
  /** The raw path, e.g. `/admin/v1/workspaces/ws_1/keys`. */
  readonly path: string;
  readonly query: Readonly<Record<string, string | undefined>>;
  readonly body: string | undefined;
  /** Who is calling: the IAM principal ARN, or `local`; already authenticated by the runtime. */
  readonly principal: string;
  readonly requestId: string;
}

/** What goes back. */
export interface AdminResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

function respond(status: number, requestId: string, body: string, extra: Record<string, string> = {}): AdminResponse {
  return {
    status,
    headers: { 'content-type': 'application/json', 'x-sluice-request-id': requestId, 'x-request-id': requestId, ...extra },
    body,
  };
}

function refuse(requestId: string, code: string, message: string, extra: Record<string, string> = {}): AdminResponse {
  const known = isAdminRefusalCode(code) ? ADMIN_REFUSALS[code] : ADMIN_REFUSALS.invalid_argument;
  return respond(known.status, requestId, adminErrorBody({ message, type: known.type, code, requestId }), extra);
}

function parseBody(raw: string | undefined): Record<string, unknown> {
  if (raw === undefined || raw.trim() === '') return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new AdminError('invalid_json', 'the request body is not JSON');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new AdminError('invalid_json', 'the request body must be a JSON object');
  return parsed as Record<string, unknown>;
}

/** Splits a path into decoded segments after the base path, or undefined when it is not under it. */
function segments(path: string): string[] | undefined {
  if (path !== ADMIN_BASE_PATH && !path.startsWith(`${ADMIN_BASE_PATH}/`)) return undefined;
  const rest = path.slice(ADMIN_BASE_PATH.length).split('/').filter((s) => s !== '');
  try {
    return rest.map((s) => decodeURIComponent(s));
  } catch {
    return undefined;
  }
}

function match(pattern: readonly string[], parts: readonly string[]): Record<string, string> | undefined {
  if (pattern.length !== parts.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < pattern.length; i++) {
    const p = pattern[i] as string;
    const part = parts[i] as string;
    if (p.startsWith(':')) params[p.slice(1)] = part;
    else if (p !== part) return undefined;
  }
  return params;
}

const AUDIT_ATTEMPTS = 3;

async function audit(deps: AdminDeps, req: AdminRequest, action: string, result: RouteResult): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await recordAudit(deps.ctx, {
        at: (deps.ctx.now ?? Date.now)(),
        who: req.principal,
        action,
        workspaceId: result.workspaceId ?? null,
        requestId: req.requestId,
        summary: result.summary ?? ({} as AuditSummary),
      });
      return;
    } catch (err) {
      if ((err as Error).name === 'ConditionalCheckFailedException') return; // already recorded by an earlier attempt
      if (attempt >= AUDIT_ATTEMPTS) throw err;
    }
  }
}

/** Serves one management request. Never throws: every fault becomes an envelope. */
export async function handleAdmin(req: AdminRequest, deps: AdminDeps): Promise<AdminResponse> {
  const parts = segments(req.path);
  if (parts === undefined) return refuse(req.requestId, 'route_not_found', `no management route at ${req.path}; paths begin ${ADMIN_BASE_PATH}/`);
  const candidates = ROUTES.map((r) => ({ route: r, params: match(r.pattern, parts) })).filter((c) => c.params !== undefined);
  if (candidates.length === 0) return refuse(req.requestId, 'route_not_found', `no management route at ${req.path}`);
  const chosen = candidates.find((c) => c.route.method === req.method.toUpperCase());
  if (chosen === undefined) {
    const allow = [...new Set(candidates.map((c) => c.route.method))].join(', ');
    return refuse(req.requestId, 'method_not_allowed', `${req.method} is not served on ${req.path}`, { allow });
  }
  // Several regions: changes are made in the configuration home only (docs/regions.md,
  // "Configuration"): the stage's home region until an operator moves it. Elsewhere a write would
  // be a second writer of items the configuration home writes (at most five live keys and a
  // reference used once hold only with one writer), so it is refused before anything but the
  // recorded home (cached) is read; reads are served here. The move itself is the one exception:
  // its target records it while the old home may be lost.
  const regions = deps.ctx.regions;
  if (regions !== undefined && chosen.route.method !== 'GET' && chosen.route.anyRegion !== true) {
    let home: string;
    try {
      home = deps.configHome === undefined ? homeRegion(regions) : (await deps.configHome.current()).home;
    } catch (err) {
      deps.logFault?.({ kind: 'config_home_unread', error: err instanceof Error ? err.name : 'unknown', requestId: req.requestId });
      return respond(500, req.requestId, adminErrorBody({ message: 'The management API could not read where the configuration home is; quote the request id if it persists.', type: 'api_error', code: null, requestId: req.requestId }));
    }
    if (home !== regions.region) {
      return refuse(
        req.requestId,
        'configuration_home_elsewhere',
        `this management API (${regions.region}) only reads: changes are made in the configuration home, ${home} (its stack's AdminUrl); if ${home} is lost, move the configuration home with sluice stage config-home <region> sent to that region's AdminUrl`,
        { [CONFIGURATION_HOME_HEADER]: home },
      );
    }
  }
  if (req.body !== undefined && Buffer.byteLength(req.body) > ADMIN_MAX_BODY_BYTES) {
    return refuse(req.requestId, 'payload_too_large', `the body is over ${ADMIN_MAX_BODY_BYTES} bytes`);
  }
  let result: RouteResult;
  try {
    result = await chosen.route.run({
      params: chosen.params ?? {},
      query: req.query,
      body: parseBody(req.body),
      deps,
      principal: req.principal,
      requestId: req.requestId,
    });
  } catch (err) {
    if (err instanceof AdminError || err instanceof CatalogValidationError) return refuse(req.requestId, err.code, err.message);
    const name = err instanceof Error ? err.name : 'unknown';
    deps.logFault?.({ kind: 'admin_fault', error: name, route: chosen.route.action ?? chosen.route.pattern.join('/'), requestId: req.requestId });
    return respond(500, req.requestId, adminErrorBody({ message: 'The management API failed; quote the request id if it persists.', type: 'api_error', code: null, requestId: req.requestId }));
  }
  if (chosen.route.action !== undefined && result.changed !== false) {
    try {
      await audit(deps, req, chosen.route.action, result);
    } catch (err) {
      deps.logFault?.({ kind: 'audit_failed', error: err instanceof Error ? err.name : 'unknown', action: chosen.route.action, requestId: req.requestId });
      return refuse(req.requestId, 'audit_failed', `the change (${chosen.route.action}) was applied but could not be recorded in the audit trail; request ${req.requestId}`);
    }
  }
  return respond(result.status ?? 200, req.requestId, JSON.stringify(result.body));
}
