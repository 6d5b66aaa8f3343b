/**
 * The one error catalog: every refusal Sluice makes, with SPEC's status, type, code and param.
 * A new code cannot be used without its row here, and `renderError` is the only function that
 * builds the envelope, so no error body can carry anything SPEC does not list.
 */

export type ErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'rate_limit_error'
  | 'api_error'
  | 'insufficient_quota'
  | 'server_error';

interface CatalogRow {
  readonly status: number;
  readonly type: ErrorType;
  readonly code: string | null;
  readonly param: string | null;
}

/**
 * SPEC's Errors table. Where SPEC shows a dash for the type or param, the choice is ours and the
 * README lists it: the type follows the status (400 invalid_request_error, 402 insufficient_quota,
 * 404 not_found_error, 429 rate_limit_error, 503 server_error, 504 server_error) and the param is
 * null unless a field is at fault.
 */
export const ERROR_CATALOG = {
  model_missing: { status: 400, type: 'invalid_request_error', code: null, param: 'model' },
  model_invalid: { status: 400, type: 'invalid_request_error', code: 'invalid_model_id', param: 'model' },
  model_id_not_pinned: { status: 400, type: 'invalid_request_error', code: 'model_id_not_pinned', param: 'model' },
  invalid_json: { status: 400, type: 'invalid_request_error', code: 'invalid_json', param: null },
  invalid_body: { status: 400, type: 'invalid_request_error', code: 'invalid_request_body', param: null },
  context_length_exceeded: { status: 400, type: 'invalid_request_error', code: 'context_length_exceeded', param: 'messages' },
  provider_key_refused_400: { status: 400, type: 'invalid_request_error', code: 'provider_key_refused', param: null },
  unsupported_value_store: { status: 400, type: 'invalid_request_error', code: 'unsupported_value', param: 'store' },
  invalid_api_key: { status: 401, type: 'authentication_error', code: 'invalid_api_key', param: null },
  key_expired: { status: 401, type: 'authentication_error', code: 'key_expired', param: null },
  insufficient_credit: { status: 402, type: 'insufficient_quota', code: 'insufficient_credit', param: null },
  key_limit_exceeded: { status: 402, type: 'insufficient_quota', code: 'key_limit_exceeded', param: null },
  member_limit_exceeded: { status: 402, type: 'insufficient_quota', code: 'member_limit_exceeded', param: null },
  workspace_limit_exceeded: { status: 402, type: 'insufficient_quota', code: 'workspace_limit_exceeded', param: null },
  model_not_permitted: { status: 403, type: 'permission_error', code: 'model_not_permitted', param: null },
  model_not_found: { status: 404, type: 'not_found_error', code: 'model_not_found', param: null },
  model_not_available: { status: 404, type: 'not_found_error', code: 'model_not_available', param: null },
  endpoint_not_supported: { status: 404, type: 'not_found_error', code: 'endpoint_not_supported', param: null },
  method_not_allowed: { status: 405, type: 'invalid_request_error', code: 'method_not_allowed', param: null },
  payload_too_large: { status: 413, type: 'invalid_request_error', code: 'payload_too_large', param: null },
  rate_limit_exceeded: { status: 429, type: 'rate_limit_error', code: 'rate_limit_exceeded', param: null },
  spend_rate_exceeded: { status: 429, type: 'rate_limit_error', code: 'spend_rate_exceeded', param: null },
  upstream_rate_limited: { status: 429, type: 'rate_limit_error', code: 'upstream_rate_limited', param: null },
  provider_key_refused_429: { status: 429, type: 'rate_limit_error', code: 'provider_key_refused', param: null },
  internal: { status: 500, type: 'api_error', code: null, param: null },
  paused_by_owner: { status: 503, type: 'server_error', code: 'paused_by_owner', param: null },
  balance_unavailable: { status: 503, type: 'server_error', code: 'balance_unavailable', param: null },
  model_not_priceable: { status: 503, type: 'server_error', code: 'model_not_priceable', param: null },
  model_pricing_unreadable: { status: 503, type: 'server_error', code: 'model_pricing_unreadable', param: null },
  model_permissions_unreadable: { status: 503, type: 'server_error', code: 'model_permissions_unreadable', param: null },
  no_provider_configured: { status: 503, type: 'api_error', code: 'no_provider_configured', param: null },
  request_timeout: { status: 504, type: 'server_error', code: 'request_timeout', param: null },
  // Requests the HTTP layer cannot read (local mode's node:http parser; deployed, AWS's front end
  // answers these itself): a framing error, headers too large, a request not sent in time.
  malformed_request: { status: 400, type: 'invalid_request_error', code: 'malformed_request', param: null },
  request_headers_too_large: { status: 431, type: 'invalid_request_error', code: 'request_headers_too_large', param: null },
  request_incomplete: { status: 408, type: 'invalid_request_error', code: 'request_incomplete', param: null },
  // A provider's own refusal, relayed with the provider's status, type, param, code and wording.
  provider_refusal: { status: 400, type: 'invalid_request_error', code: null, param: null },
  // In-band only (a stream that had already begun): never a status of its own.
  balance_exhausted: { status: 402, type: 'insufficient_quota', code: 'balance_exhausted', param: null },
  upstream_stream_failed: { status: 502, type: 'api_error', code: 'upstream_stream_failed', param: null },
} as const satisfies Record<string, CatalogRow>;

export type ErrorKind = keyof typeof ERROR_CATALOG;

/** A refusal or fault with its catalog row, a message for a person, and optional extra headers. */
export class SluiceError extends Error {
  readonly kind: ErrorKind;
  readonly status: number;
  readonly type: ErrorType;
  readonly code: string | null;
  readonly param: string | null;
  /** Response headers this refusal carries (`Retry-After`, `Allow`). */
  readonly headers: Readonly<Record<string, string>>;

  constructor(kind: ErrorKind, message: string, headers: Record<string, string> = {}, relayed?: CatalogRow) {
    super(message);
    this.name = 'SluiceError';
    // Only a provider's relayed refusal may carry its own row; every other kind is the catalog's.
    const row: CatalogRow = kind === 'provider_refusal' && relayed !== undefined ? relayed : ERROR_CATALOG[kind];
    this.kind = kind;
    this.status = row.status;
    this.type = row.type;
    this.code = row.code;
    this.param = row.param;
    this.headers = headers;
  }
}

const ERROR_TYPES: ReadonlySet<string> = new Set<ErrorType>([
  'invalid_request_error',
  'authentication_error',
  'permission_error',
  'not_found_error',
  'rate_limit_error',
  'api_error',
  'insufficient_quota',
  'server_error',
]);

/**
 * A provider's 400-series refusal of the request, relayed with the provider's status and wording
 * in SPEC's envelope. A type outside SPEC's closed set becomes `invalid_request_error`.
 */
export function relayedRefusal(status: number, providerBody: unknown): SluiceError {
  const error =
    providerBody !== null && typeof providerBody === 'object' && 'error' in providerBody
      ? (providerBody as { error: unknown }).error
      : undefined;
  const e = error !== null && typeof error === 'object' ? (error as Record<string, unknown>) : {};
  const str = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);
  const type = str(e.type);
  return new SluiceError('provider_refusal', str(e.message) ?? `The provider refused the request (status ${status}).`, {}, {
    status,
    type: type !== null && ERROR_TYPES.has(type) ? (type as ErrorType) : 'invalid_request_error',
    code: str(e.code),
    param: str(e.param),
  });
}

/** The wire envelope: one top-level `error` key and exactly these fields. */
export interface ErrorEnvelope {
  readonly error: {
    readonly message: string;
    readonly type: ErrorType;
    readonly param: string | null;
    readonly code: string | null;
    readonly request_id: string;
  };
}

/** Renders SPEC's envelope for an error. Anything that is not a SluiceError becomes a bare 500. */
export function renderError(err: unknown, requestId: string): { status: number; headers: Record<string, string>; body: ErrorEnvelope } {
  const e = err instanceof SluiceError ? err : new SluiceError('internal', 'The server had an error while processing your request.');
  return {
    status: e.status,
    headers: { ...e.headers },
    body: { error: { message: e.message, type: e.type, param: e.param, code: e.code, request_id: requestId } },
  };
}

/** Builds an in-band stream error frame (`data: {...}\n\n`) in the same envelope. */
export function errorFrame(kind: ErrorKind, message: string, requestId: string): string {
  const { body } = renderError(new SluiceError(kind, message), requestId);
  return `data: ${JSON.stringify(body)}\n\n`;
}
