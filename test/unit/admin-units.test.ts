/**
 * The pure pieces of the operator's surface: money in people's units, the closest catalogued id,
 * the management API's refusal table, and how the Lambda handler reads its caller.
 */
import type { APIGatewayProxyEventV2WithIAMAuthorizer } from 'aws-lambda';
import { handleAdmin } from '../../lambdas/admin/app';
import { eventToAdminRequest, handler } from '../../lambdas/admin/handler';
import { ADMIN_REFUSALS } from '../../lambdas/admin/refusals';
import { closestId, editDistance } from '../../lambdas/core/closest-id';
import { AmountFormatError, formatMoney, parseAmount } from '../../lambdas/core/money-format';

describe('parseAmount', () => {
  it.each([
    ['20.50', {}, 2050],
    ['20.5', {}, 2050],
    ['20', {}, 2000],
    ['$20', {}, 2000],
    ['USD 20.50', {}, 2050],
    ['usd20', {}, 2000],
    ['0.01', {}, 1],
    ['-5', { signed: true }, -500],
    ['-$5.25', { signed: true }, -525],
    ['+1.00', { signed: true }, 100],
    ['-+1', { signed: true }, NaN],
    ['2050', { minorUnits: true }, 2050],
    ['-7', { minorUnits: true, signed: true }, -7],
  ] as const)('%s %j → %d minor units', (raw, opts, expected) => {
    if (Number.isNaN(expected)) expect(() => parseAmount(raw, opts)).toThrow(AmountFormatError);
    else expect(parseAmount(raw, opts)).toBe(expected);
  });

  it.each([
    ['20.505', {}],
    ['1e3', {}],
    ['20,50', {}],
    ['-5', {}],
    ['', {}],
    ['EUR 5', {}],
    ['20.50', { minorUnits: true }],
    ['-7', { minorUnits: true }],
    ['9999999999999999', {}],
  ] as const)('refuses %j %j', (raw, opts) => {
    expect(() => parseAmount(raw, opts)).toThrow(AmountFormatError);
  });
});

describe('formatMoney', () => {
  it.each([
    [0, 'USD 0.00'],
    [2_050_000_000, 'USD 20.50'],
    [100_000_000, 'USD 1.00'],
    [1, 'USD 0.00000001'],
    [4321, 'USD 0.00004321'],
    [1_234_560_000, 'USD 12.3456'],
    [-500_000_000, 'USD -5.00'],
    [123_456_789_000_000, 'USD 1234567.89'],
  ])('%d micro-units → %s', (micros, text) => {
    expect(formatMoney(micros)).toBe(text);
  });
});

describe('closestId', () => {
  const known = ['openai/gpt-4.1-mini', 'openai/gpt-4.1', 'local/sim-small', 'local/sim-large', 'anthropic/claude-3-5-haiku-20241022'];
  it.each([
    ['openai/gpt-4.1-mimi', 'openai/gpt-4.1-mini'],
    ['local/sim-smal', 'local/sim-small'],
    ['local/sim-lagre', 'local/sim-large'],
    ['OpenAI/GPT-4.1', 'openai/gpt-4.1'],
    ['mistral/mistral-large-latest', undefined],
  ])('%s → %s', (wanted, expected) => {
    expect(closestId(wanted, known)).toBe(expected);
  });

  it('measures edits', () => {
    expect(editDistance('kitten', 'sitting')).toBe(3);
    expect(editDistance('', 'abc')).toBe(3);
    expect(editDistance('same', 'same')).toBe(0);
  });
});

describe('refusal table', () => {
  it('gives every code a 4xx or 5xx status and an envelope type', () => {
    for (const [code, r] of Object.entries(ADMIN_REFUSALS)) {
      expect(r.status).toBeGreaterThanOrEqual(400);
      expect(r.type).toMatch(/_error$/);
      expect(code).toMatch(/^[a-z_]+$/);
    }
  });
});

function event(authorizer: unknown): APIGatewayProxyEventV2WithIAMAuthorizer {
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath: '/admin/v1/workspaces',
    rawQueryString: '',
    headers: {},
    isBase64Encoded: false,
    requestContext: {
      accountId: '123456789012',
      apiId: 'x',
      authorizer: authorizer as APIGatewayProxyEventV2WithIAMAuthorizer['requestContext']['authorizer'],
      domainName: 'x.lambda-url.eu-west-1.on.aws',
      domainPrefix: 'x',
      http: { method: 'GET', path: '/admin/v1/workspaces', protocol: 'HTTP/1.1', sourceIp: '1.2.3.4', userAgent: 'test' },
      requestId: 'r',
      routeKey: '$default',
      stage: '$default',
      time: '',
      timeEpoch: 0,
    },
  } as APIGatewayProxyEventV2WithIAMAuthorizer;
}

describe('the Lambda handler', () => {
  it('takes the IAM principal from the Function URL', () => {
    const arn = 'arn:aws:sts::123456789012:assumed-role/ops/alice';
    const req = eventToAdminRequest(event({ iam: { userArn: arn } }), 'req_1');
    expect(req).toMatchObject({ method: 'GET', path: '/admin/v1/workspaces', principal: arn, requestId: 'req_1' });
  });

  it('refuses, without touching anything, a request that came with no principal', async () => {
    expect(eventToAdminRequest(event(undefined), 'req_1')).toBeUndefined();
    const res = await handler(event(undefined));
    expect(typeof res === 'object' && res.statusCode).toBe(401);
    const body = JSON.parse(String(typeof res === 'object' ? res.body : '')) as { error: { code: string; type: string } };
    expect(body.error).toMatchObject({ code: 'unauthenticated', type: 'authentication_error' });
  });

  it('outside the configuration home, refuses every change with 409 configuration_home_elsewhere before touching the store, and serves reads', async () => {
    const sent: string[] = [];
    const doc = { send: async (command: { constructor: { name: string } }) => (sent.push(command.constructor.name), { Items: [] }) };
    const setup = (region: string) => ({ regions: ['us-east-1', 'us-west-2'], region, weights: [1, 1], transferWaitMs: 0 });
    const deps = (region: string) => ({ ctx: { doc: doc as never, tablePrefix: 'x-', stage: 'prod', regions: setup(region) }, balance: undefined as never });
    const changes = [
      ['POST', '/admin/v1/workspaces', '{"name":"a"}'],
      ['POST', '/admin/v1/workspaces/ws_1/credit', '{"amountMinor":100,"reference":"r"}'],
      ['POST', '/admin/v1/workspaces/ws_1/pause', undefined],
      ['PUT', '/admin/v1/workspaces/ws_1/monthly-limit', '{"amountMinor":100}'],
      ['DELETE', '/admin/v1/workspaces/ws_1/members/mem_1', undefined],
    ] as const;
    for (const [method, path, body] of changes) {
      const res = await handleAdmin({ method, path, query: {}, body, principal: 'local', requestId: 'req_3' }, deps('us-west-2'));
      expect([method, path, res.status]).toEqual([method, path, 409]);
      expect(JSON.parse(res.body)).toEqual({ error: { message: expect.stringContaining('us-east-1'), type: 'invalid_request_error', param: null, code: 'configuration_home_elsewhere', request_id: 'req_3' } });
    }
    expect(sent).toEqual([]);
    // A read is served from the region's replica.
    const read = await handleAdmin({ method: 'GET', path: '/admin/v1/workspaces', query: {}, body: undefined, principal: 'local', requestId: 'req_4' }, deps('us-west-2'));
    expect(read.status).toBe(200);
    expect(sent.length).toBeGreaterThan(0);
    // In the home region the same change reaches the store.
    sent.length = 0;
    await handleAdmin({ method: 'POST', path: '/admin/v1/workspaces', query: {}, body: '{"name":"a"}', principal: 'local', requestId: 'req_5' }, deps('us-east-1'));
    expect(sent.length).toBeGreaterThan(0);
  });

  it('answers a path outside /admin/v1 with 404 before any use case runs', async () => {
    const deps = { ctx: { doc: undefined as never, tablePrefix: 'x-', stage: 'local' }, balance: undefined as never };
    const res = await handleAdmin({ method: 'GET', path: '/v1/models', query: {}, body: undefined, principal: 'local', requestId: 'req_2' }, deps);
    expect(res.status).toBe(404);
    expect(JSON.parse(res.body)).toEqual({ error: { message: expect.any(String), type: 'not_found_error', param: null, code: 'route_not_found', request_id: 'req_2' } });
  });
});
