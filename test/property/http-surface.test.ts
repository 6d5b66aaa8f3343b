/**
 * Property-based tests over the HTTP surface (issue 14, item 9), with `fast-check`: arbitrary
 * methods, paths, Authorization headers, bodies, model fields, ceilings and `store` values against
 * the real gateway behind the local HTTP layer and the simulator. Every answer is either a success
 * to a request that deserved one, or SPEC's exact envelope: one `error` key, exactly five fields,
 * a status and code pair from the error catalog (or a provider's relayed 4xx refusal), and the
 * request id in both headers and the body. Never a 500; nothing left held; the ledger invariant.
 */
import fc from 'fast-check';
import { ERROR_CATALOG } from '../../lambdas/core/errors';
import { startStack, expectInvariant, type TestStack } from '../support/stack';

let stack: TestStack;
beforeAll(async () => {
  stack = await startStack({ env: { SLUICE_KEY_RATE_PER_MINUTE: '100000' } });
});
afterAll(async () => stack?.close());

const TYPES = new Set(['invalid_request_error', 'authentication_error', 'permission_error', 'not_found_error', 'rate_limit_error', 'api_error', 'insufficient_quota', 'server_error']);
/** Sluice's own codes, each with the one status and type it may carry. */
const OWN = new Map<string | null, { status: number; type: string }[]>();
for (const row of Object.values(ERROR_CATALOG)) OWN.set(row.code, [...(OWN.get(row.code) ?? []), { status: row.status, type: row.type }]);

const ROUTED = ['/v1/chat/completions', '/v1/responses'];

const model = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('local/sim-small', 'local/sim-large', 'local/sim-chat-only', 'local/sim-no-max', 'local/sim-retired', 'local/does-not-exist', 'sim-small', 'profile/none', 'sluice/auto', 'local/org/sim-nested') },
  { weight: 1, arbitrary: fc.string({ maxLength: 140 }) },
  { weight: 1, arbitrary: fc.constant(undefined) },
  { weight: 1, arbitrary: fc.integer() },
);
const ceiling = fc.oneof(fc.constant(undefined), fc.integer({ min: 1, max: 64 }), fc.constantFrom('abc', -1, 0, 1e12, null));
const store = fc.oneof(fc.constant(undefined), fc.constantFrom(false, true, 'true', 'false', 1, 0, null));

const body = fc.oneof(
  { weight: 6, arbitrary: fc.record({ model, max_tokens: ceiling, max_completion_tokens: ceiling, store, stream: fc.boolean(), text: fc.string({ maxLength: 200 }) }) },
  { weight: 1, arbitrary: fc.json().map((j) => ({ raw: j })) },
  { weight: 1, arbitrary: fc.string({ maxLength: 60 }).map((s) => ({ raw: s })) },
);

function render(path: string, b: { raw: string } | Record<string, unknown>): string | undefined {
  if ('raw' in b && typeof b.raw === 'string') return b.raw;
  const { model: m, text, stream, store: st, max_tokens: mt, max_completion_tokens: mct } = b as Record<string, unknown>;
  const json: Record<string, unknown> = path === '/v1/responses' ? { input: text } : { messages: [{ role: 'user', content: text }] };
  if (m !== undefined) json.model = m;
  if (stream === true) json.stream = true;
  if (st !== undefined) json.store = st;
  if (mt !== undefined) json[path === '/v1/responses' ? 'max_output_tokens' : 'max_tokens'] = mt;
  if (mct !== undefined && path !== '/v1/responses') json.max_completion_tokens = mct;
  return JSON.stringify(json);
}

const request = fc.record({
  method: fc.oneof({ weight: 8, arbitrary: fc.constant('POST') }, { weight: 3, arbitrary: fc.constantFrom('GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS') }),
  path: fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom(...ROUTED) },
    { weight: 2, arbitrary: fc.constantFrom('/v1/models', '/v1/models/local/sim-small', '/v1/models/local%2Fsim-small', '/v1/models/nope/none') },
    { weight: 1, arbitrary: fc.constantFrom('/v1/embeddings', '/', '/v2/chat/completions', '/v1/chat/completions/', '/v1/models/%E0%A4%A') },
  ),
  auth: fc.oneof(
    { weight: 6, arbitrary: fc.constant('good') },
    { weight: 1, arbitrary: fc.constantFrom('none', 'Basic abc', 'Bearer', 'Bearer sk-proj-abc', `Bearer slc_dev_${'A'.repeat(43)}`, `Bearer slc_dev_${'A'.repeat(42)}`) },
  ),
  contentType: fc.constantFrom('application/json', 'text/plain', undefined),
  body,
});

it('every answer is a success or SPEC’s exact envelope with an allowed status and code', async () => {
  const seen = new Map<string, number>();
  await fc.assert(
    fc.asyncProperty(request, async (r) => {
      const headers: Record<string, string> = {};
      if (r.auth === 'good') headers.authorization = `Bearer ${stack.rawKey}`;
      else if (r.auth !== 'none') headers.authorization = r.auth;
      if (r.contentType !== undefined) headers['content-type'] = r.contentType;
      const payload = r.method === 'GET' ? undefined : render(r.path, r.body);
      const res = await fetch(`${stack.baseURL.slice(0, -3)}${r.path}`, { method: r.method, headers, body: payload });
      const text = await res.text();
      const id = res.headers.get('x-sluice-request-id');
      expect(id).toMatch(/^req_[0-9a-f]{24}$/);
      expect(res.headers.get('x-request-id')).toBe(id);
      if (res.status === 200) {
        seen.set('200', (seen.get('200') ?? 0) + 1);
        expect(['GET', 'POST']).toContain(r.method);
        return;
      }
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      const envelope = JSON.parse(text) as { error: Record<string, unknown> };
      expect(Object.keys(envelope)).toEqual(['error']);
      const e = envelope.error;
      expect(Object.keys(e).sort()).toEqual(['code', 'message', 'param', 'request_id', 'type']);
      expect(e.request_id).toBe(id);
      expect(typeof e.message).toBe('string');
      expect(TYPES.has(String(e.type))).toBe(true);
      expect(e.param === null || typeof e.param === 'string').toBe(true);
      expect(res.status).not.toBe(500);
      const own = OWN.get(e.code as string | null)?.filter((row) => row.status === res.status);
      if (own !== undefined && own.length > 0) {
        expect(own.map((row) => row.type)).toContain(e.type);
      } else {
        // A provider's own refusal of a forwarded parameter, relayed with its status and wording.
        expect(res.status).toBeGreaterThanOrEqual(400);
        expect(res.status).toBeLessThan(500);
        expect(ROUTED).toContain(r.path);
      }
      if (res.status === 405) expect(res.headers.get('allow')).toMatch(/^(GET|POST)$/);
      if (e.code === 'unsupported_value' && e.param === 'store') expect(r.path).toBe('/v1/responses');
      seen.set(`${res.status} ${String(e.code)}`, (seen.get(`${res.status} ${String(e.code)}`) ?? 0) + 1);
    }),
    { numRuns: 250, seed: Number(process.env.SLUICE_PROPERTY_SEED ?? Date.now() % 2 ** 31) },
  );
  // The generators reach both sides: successes and several distinct refusals.
  expect(seen.get('200') ?? 0).toBeGreaterThan(5);
  expect([...seen.keys()].length).toBeGreaterThan(8);
  await stack.settled(undefined, 20_000);
  const b = await stack.balance();
  expect(b.heldMicros).toBe(0);
  expectInvariant(b);
}, 120_000);

it('the store field: only the boolean false (or none) is served on /v1/responses', async () => {
  await fc.assert(
    fc.asyncProperty(fc.oneof(fc.constant(undefined), fc.jsonValue()), async (value) => {
      const json: Record<string, unknown> = { model: 'local/sim-small', input: 'x', max_output_tokens: 4 };
      if (value !== undefined) json.store = value;
      const res = await fetch(`${stack.baseURL}/responses`, { method: 'POST', headers: { authorization: `Bearer ${stack.rawKey}` }, body: JSON.stringify(json) });
      const text = await res.text();
      if (value === undefined || value === false) {
        expect(res.status).toBe(200);
      } else {
        expect(res.status).toBe(400);
        expect(JSON.parse(text).error).toMatchObject({ code: 'unsupported_value', param: 'store', type: 'invalid_request_error' });
      }
    }),
    { numRuns: 60 },
  );
  await stack.settled();
  expectInvariant(await stack.balance());
}, 60_000);
