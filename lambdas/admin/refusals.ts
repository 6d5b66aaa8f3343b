/**
 * The management API's refusals: every `AdminError` code with its HTTP status and SPEC's
 * envelope type, in one table, and the one function that renders the envelope.
 */
import type { ErrorType } from '../core/errors';

/** Status and envelope type of each refusal code the management API answers with. */
export const ADMIN_REFUSALS = {
  invalid_argument: { status: 400, type: 'invalid_request_error' },
  invalid_json: { status: 400, type: 'invalid_request_error' },
  spend_cap_refused: { status: 400, type: 'invalid_request_error' },
  catalog_invalid: { status: 400, type: 'invalid_request_error' },
  model_not_in_catalog: { status: 400, type: 'invalid_request_error' },
  unauthenticated: { status: 401, type: 'authentication_error' },
  forbidden: { status: 403, type: 'permission_error' },
  route_not_found: { status: 404, type: 'not_found_error' },
  workspace_not_found: { status: 404, type: 'not_found_error' },
  member_not_found: { status: 404, type: 'not_found_error' },
  key_not_found: { status: 404, type: 'not_found_error' },
  profile_not_found: { status: 404, type: 'not_found_error' },
  provider_not_found: { status: 404, type: 'not_found_error' },
  byok_not_set: { status: 404, type: 'not_found_error' },
  usage_not_found: { status: 404, type: 'not_found_error' },
  invitation_not_found: { status: 404, type: 'not_found_error' },
  method_not_allowed: { status: 405, type: 'invalid_request_error' },
  key_ambiguous: { status: 409, type: 'invalid_request_error' },
  key_slots_full: { status: 409, type: 'invalid_request_error' },
  key_expired: { status: 409, type: 'invalid_request_error' },
  owner_not_removable: { status: 409, type: 'invalid_request_error' },
  profile_exists: { status: 409, type: 'invalid_request_error' },
  profile_in_use: { status: 409, type: 'invalid_request_error' },
  reference_used: { status: 409, type: 'invalid_request_error' },
  below_held: { status: 409, type: 'invalid_request_error' },
  concurrent_update: { status: 409, type: 'invalid_request_error' },
  provider_exists: { status: 409, type: 'invalid_request_error' },
  provider_in_use: { status: 409, type: 'invalid_request_error' },
  model_exists: { status: 409, type: 'invalid_request_error' },
  configuration_home_elsewhere: { status: 409, type: 'invalid_request_error' },
  home_region_required: { status: 409, type: 'invalid_request_error' },
  nothing_to_move: { status: 409, type: 'invalid_request_error' },
  payload_too_large: { status: 413, type: 'invalid_request_error' },
  secret_store_missing: { status: 500, type: 'api_error' },
  audit_failed: { status: 500, type: 'api_error' },
} as const satisfies Record<string, { status: number; type: ErrorType }>;

/** A refusal code of the management API. */
export type AdminRefusalCode = keyof typeof ADMIN_REFUSALS;

/** Whether a code is one of the table's. */
export function isAdminRefusalCode(code: string): code is AdminRefusalCode {
  return Object.prototype.hasOwnProperty.call(ADMIN_REFUSALS, code);
}

/** SPEC's envelope: `{"error":{message,type,param,code,request_id}}` and nothing else. */
export function adminErrorBody(input: { message: string; type: ErrorType; code: string | null; requestId: string; param?: string | null }): string {
  return JSON.stringify({
    error: { message: input.message, type: input.type, param: input.param ?? null, code: input.code, request_id: input.requestId },
  });
}
