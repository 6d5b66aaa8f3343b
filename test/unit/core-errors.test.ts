/**
 * The error catalog against SPEC's Errors table, and the envelope renderer.
 * Where SPEC shows a dash the value is ours (README); those columns are `undefined` below and
 * only the closed type set is checked for them.
 */
import {
  ERROR_CATALOG,
  SluiceError,
  errorFrame,
  relayedRefusal,
  renderError,
  type ErrorKind,
  type ErrorType,
} from '../../lambdas/core/errors';

const TYPES: readonly ErrorType[] = [
  'invalid_request_error',
  'authentication_error',
  'permission_error',
  'not_found_error',
  'rate_limit_error',
  'api_error',
  'insufficient_quota',
  'server_error',
];

interface SpecRow {
  readonly kind: ErrorKind;
  readonly status: number;
  /** `undefined`: SPEC shows a dash (ours to choose); otherwise exact. */
  readonly code: string | null | undefined;
  readonly type: ErrorType | undefined;
  readonly param: string | null | undefined;
}

// SPEC.md "Errors", row by row.
const SPEC_ROWS: readonly SpecRow[] = [
  { kind: 'model_missing', status: 400, code: null, type: 'invalid_request_error', param: 'model' },
  { kind: 'model_invalid', status: 400, code: undefined, type: undefined, param: 'model' },
  { kind: 'model_id_not_pinned', status: 400, code: 'model_id_not_pinned', type: undefined, param: undefined },
  { kind: 'context_length_exceeded', status: 400, code: 'context_length_exceeded', type: 'invalid_request_error', param: 'messages' },
  { kind: 'provider_key_refused_400', status: 400, code: 'provider_key_refused', type: 'invalid_request_error', param: null },
  { kind: 'unsupported_value_store', status: 400, code: 'unsupported_value', type: undefined, param: 'store' },
  { kind: 'invalid_api_key', status: 401, code: 'invalid_api_key', type: 'authentication_error', param: null },
  { kind: 'key_expired', status: 401, code: 'key_expired', type: 'authentication_error', param: null },
  { kind: 'insufficient_credit', status: 402, code: 'insufficient_credit', type: 'insufficient_quota', param: null },
  { kind: 'key_limit_exceeded', status: 402, code: 'key_limit_exceeded', type: 'insufficient_quota', param: null },
  { kind: 'member_limit_exceeded', status: 402, code: 'member_limit_exceeded', type: undefined, param: undefined },
  { kind: 'workspace_limit_exceeded', status: 402, code: 'workspace_limit_exceeded', type: undefined, param: undefined },
  { kind: 'model_not_permitted', status: 403, code: 'model_not_permitted', type: 'permission_error', param: null },
  { kind: 'model_not_found', status: 404, code: 'model_not_found', type: 'not_found_error', param: null },
  { kind: 'model_not_available', status: 404, code: 'model_not_available', type: 'not_found_error', param: null },
  { kind: 'endpoint_not_supported', status: 404, code: 'endpoint_not_supported', type: undefined, param: undefined },
  { kind: 'method_not_allowed', status: 405, code: 'method_not_allowed', type: 'invalid_request_error', param: null },
  { kind: 'payload_too_large', status: 413, code: 'payload_too_large', type: 'invalid_request_error', param: null },
  { kind: 'rate_limit_exceeded', status: 429, code: 'rate_limit_exceeded', type: 'rate_limit_error', param: null },
  { kind: 'spend_rate_exceeded', status: 429, code: 'spend_rate_exceeded', type: 'rate_limit_error', param: null },
  { kind: 'upstream_rate_limited', status: 429, code: 'upstream_rate_limited', type: undefined, param: undefined },
  { kind: 'provider_key_refused_429', status: 429, code: 'provider_key_refused', type: undefined, param: undefined },
  { kind: 'internal', status: 500, code: null, type: 'api_error', param: null },
  { kind: 'paused_by_owner', status: 503, code: 'paused_by_owner', type: undefined, param: undefined },
  { kind: 'balance_unavailable', status: 503, code: 'balance_unavailable', type: undefined, param: undefined },
  { kind: 'model_not_priceable', status: 503, code: 'model_not_priceable', type: undefined, param: undefined },
  { kind: 'model_pricing_unreadable', status: 503, code: 'model_pricing_unreadable', type: undefined, param: undefined },
  { kind: 'model_permissions_unreadable', status: 503, code: 'model_permissions_unreadable', type: undefined, param: undefined },
  { kind: 'no_provider_configured', status: 503, code: 'no_provider_configured', type: 'api_error', param: null },
  { kind: 'request_timeout', status: 504, code: undefined, type: undefined, param: undefined },
];

describe('ERROR_CATALOG matches SPEC Errors', () => {
  test.each(SPEC_ROWS.map((r) => [r.kind, r] as const))('%s', (kind, row) => {
    const got = ERROR_CATALOG[kind];
    expect(got.status).toBe(row.status);
    if (row.code !== undefined) expect(got.code).toBe(row.code);
    else expect(typeof got.code === 'string' && got.code.length > 0).toBe(true);
    if (row.type !== undefined) expect(got.type).toBe(row.type);
    if (row.param !== undefined) expect(got.param).toBe(row.param);
    expect(TYPES).toContain(got.type);
  });

  test('every catalog row has a type in the closed set and a status in the error range', () => {
    for (const [kind, row] of Object.entries(ERROR_CATALOG)) {
      expect([kind, TYPES.includes(row.type)]).toEqual([kind, true]);
      expect([kind, row.status >= 400 && row.status <= 599]).toEqual([kind, true]);
    }
  });

  test('every SPEC code is in the catalog', () => {
    const codes = new Set<string | null>(Object.values(ERROR_CATALOG).map((r) => r.code));
    for (const row of SPEC_ROWS) if (typeof row.code === 'string') expect(codes.has(row.code)).toBe(true);
  });

  test('where SPEC shows a dash, the type follows the status as errors.ts documents', () => {
    const byStatus: Record<number, ErrorType> = {
      400: 'invalid_request_error',
      402: 'insufficient_quota',
      404: 'not_found_error',
      429: 'rate_limit_error',
      503: 'server_error',
      504: 'server_error',
    };
    for (const row of SPEC_ROWS) {
      if (row.type === undefined) expect([row.kind, ERROR_CATALOG[row.kind].type]).toEqual([row.kind, byStatus[row.status]]);
    }
  });
});

describe('renderError', () => {
  test('exactly the five envelope fields and nothing else', () => {
    const err = new SluiceError('key_limit_exceeded', 'over the key limit', { 'Retry-After': '7' });
    const out = renderError(err, 'req_1');
    expect(out.status).toBe(402);
    expect(out.headers).toEqual({ 'Retry-After': '7' });
    expect(Object.keys(out.body)).toEqual(['error']);
    expect(Object.keys(out.body.error).sort()).toEqual(['code', 'message', 'param', 'request_id', 'type']);
    expect(out.body.error).toEqual({
      message: 'over the key limit',
      type: 'insufficient_quota',
      param: null,
      code: 'key_limit_exceeded',
      request_id: 'req_1',
    });
    // Serialised, the body carries nothing more either (no stack, no name).
    const parsed: unknown = JSON.parse(JSON.stringify(out.body));
    expect(parsed).toEqual({ error: out.body.error });
  });

  test('the headers of the rendering are a copy', () => {
    const err = new SluiceError('method_not_allowed', 'no', { Allow: 'POST' });
    const out = renderError(err, 'r');
    out.headers.Allow = 'GET';
    expect(err.headers).toEqual({ Allow: 'POST' });
  });

  test.each([
    ['a plain Error', new Error('secret host db-7.internal:5432 exploded')],
    ['a TypeError', new TypeError('cannot read x of undefined')],
    ['a string', 'boom /home/app/x.ts'],
    ['undefined', undefined],
    ['an object pretending to be an error', { status: 400, code: 'x', message: 'leak', type: 'invalid_request_error' }],
  ])('%s becomes a bare 500 api_error with a generic message', (_label, thrown) => {
    const out = renderError(thrown, 'req_9');
    expect(out.status).toBe(500);
    expect(out.headers).toEqual({});
    expect(out.body).toEqual({
      error: { message: expect.any(String), type: 'api_error', param: null, code: null, request_id: 'req_9' },
    });
    const msg = out.body.error.message;
    expect(msg).not.toMatch(/secret|db-7|exploded|undefined|home|leak|at /);
    expect(JSON.stringify(out.body)).not.toContain('stack');
  });
});

describe('relayedRefusal', () => {
  test("keeps the provider's status, message, param and code", () => {
    const e = relayedRefusal(422, {
      error: { message: "Unsupported parameter: 'logprobs'", type: 'invalid_request_error', param: 'logprobs', code: 'unsupported_parameter' },
    });
    expect(e).toBeInstanceOf(SluiceError);
    expect(e.kind).toBe('provider_refusal');
    const out = renderError(e, 'r');
    expect(out.status).toBe(422);
    expect(out.body.error).toEqual({
      message: "Unsupported parameter: 'logprobs'",
      type: 'invalid_request_error',
      param: 'logprobs',
      code: 'unsupported_parameter',
      request_id: 'r',
    });
  });

  test.each([
    ['outside the closed set', 'BadRequest'],
    ['not a string', 7],
    ['empty', ''],
    ['missing', undefined],
  ])('a type %s is forced to invalid_request_error', (_label, type) => {
    const e = relayedRefusal(400, { error: { message: 'm', type, code: 'c' } });
    expect(e.type).toBe('invalid_request_error');
    expect(e.status).toBe(400);
    expect(e.code).toBe('c');
  });

  test.each(TYPES.map((t) => [t]))('a type in the closed set (%s) is kept', (type) => {
    expect(relayedRefusal(404, { error: { message: 'm', type } }).type).toBe(type);
  });

  test.each([
    ['no body', undefined],
    ['a string body', 'Bad Request'],
    ['no error key', { message: 'x' }],
    ['error is a string', { error: 'bad' }],
  ])('%s: generic message naming the status, null code and param', (_label, body) => {
    const e = relayedRefusal(409, body);
    expect(e.status).toBe(409);
    expect(e.type).toBe('invalid_request_error');
    expect(e.code).toBeNull();
    expect(e.param).toBeNull();
    expect(e.message).toContain('409');
  });

  test('non-string param and code become null', () => {
    const e = relayedRefusal(400, { error: { message: 'm', param: 3, code: 400 } });
    expect(e.param).toBeNull();
    expect(e.code).toBeNull();
  });

  test('only provider_refusal may carry its own row', () => {
    const e = new SluiceError('insufficient_credit', 'm', {}, { status: 418, type: 'api_error', code: 'x', param: 'y' });
    expect([e.status, e.type, e.code, e.param]).toEqual([402, 'insufficient_quota', 'insufficient_credit', null]);
  });
});

describe('errorFrame', () => {
  test('one `data: {...}\\n\\n` frame in the envelope', () => {
    const frame = errorFrame('balance_exhausted', 'The balance ran out.\nLine two', 'req_5');
    expect(frame.startsWith('data: ')).toBe(true);
    expect(frame.endsWith('\n\n')).toBe(true);
    const inner = frame.slice('data: '.length, -2);
    expect(inner).not.toContain('\n');
    expect(JSON.parse(inner)).toEqual({
      error: { message: 'The balance ran out.\nLine two', type: 'insufficient_quota', param: null, code: 'balance_exhausted', request_id: 'req_5' },
    });
  });
});
