/**
 * The deployed console's origin when no domain of one's own fronts it: CDK sets
 * `SLUICE_CONSOLE_ORIGIN_FROM=function-url` (the function cannot be given its own URL at deploy),
 * and the handler takes `https://<requestContext.domainName>` from the first request. Proved on
 * the real handler over DynamoDB Local: a change from that origin passes the Origin check and a
 * change from any other is refused, and the setting's table of cases.
 */
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { CONSOLE_ENV, loadConsoleConfig, ORIGIN_FROM_FUNCTION_URL } from '../../lambdas/console/env';
import { ENV } from '../../lambdas/shared/config';
import { testTables, type TestTables } from '../support/dynamo';

const HOST = 'abcdefghijklmnopqrstuvwxyz012345.lambda-url.eu-west-1.on.aws';

describe('loadConsoleConfig with the Function URL as origin', () => {
  const fromUrl = { [CONSOLE_ENV.originFrom]: ORIGIN_FROM_FUNCTION_URL };
  it.each([
    ['the Function URL host', fromUrl, HOST, { origin: `https://${HOST}`, rpId: HOST }],
    ['an origin set outright, which wins', { ...fromUrl, [CONSOLE_ENV.origin]: 'https://console.example.com' }, HOST, { origin: 'https://console.example.com', rpId: 'console.example.com' }],
    ['an origin set outright without the Function URL setting', { [CONSOLE_ENV.origin]: 'https://console.example.com' }, undefined, { origin: 'https://console.example.com', rpId: 'console.example.com' }],
  ])('takes %s', (_label, env, host, expected) => {
    expect(loadConsoleConfig(env, host)).toMatchObject(expected);
  });

  it.each([
    ['no host to take it from', fromUrl, undefined, /requestContext\.domainName/],
    ['an empty host', fromUrl, '', /requestContext\.domainName/],
    ['a host that carries a path', fromUrl, `${HOST}/x`, /origin only/],
    ['another value of the setting', { [CONSOLE_ENV.originFrom]: 'host-header' }, HOST, /must name the console's origin/],
    ['neither setting', {}, HOST, /must name the console's origin/],
  ])('refuses %s', (_label, env, host, message) => {
    expect(() => loadConsoleConfig(env, host)).toThrow(message);
  });
});

describe('the console handler on its Function URL', () => {
  let tables: TestTables;
  let handler: (event: APIGatewayProxyEventV2) => Promise<APIGatewayProxyStructuredResultV2>;
  const saved = { ...process.env };

  beforeAll(async () => {
    tables = await testTables();
    // As CDK configures the deployed function, but on DynamoDB Local.
    Object.assign(process.env, {
      [ENV.stage]: 'dev',
      [ENV.tablePrefix]: tables.prefix,
      [ENV.dynamoEndpoint]: tables.endpoint,
      [ENV.secretSource]: 'secrets-manager',
      [CONSOLE_ENV.originFrom]: ORIGIN_FROM_FUNCTION_URL,
    });
    delete process.env[CONSOLE_ENV.origin];
    // A fresh module: the handler keeps its dependencies at module scope.
    jest.isolateModules(() => {
      handler = (require('../../lambdas/console/handler') as { handler: typeof handler }).handler;
    });
  });

  afterAll(() => {
    process.env = saved;
    tables.client.destroy();
  });

  const signInOptions = (origin: string): APIGatewayProxyEventV2 =>
    ({
      version: '2.0',
      routeKey: '$default',
      rawPath: '/console/api/signin/options',
      rawQueryString: '',
      headers: { origin, 'content-type': 'application/json', 'sec-fetch-site': 'same-origin' },
      cookies: [],
      body: '{}',
      isBase64Encoded: false,
      requestContext: { domainName: HOST, http: { method: 'POST', path: '/console/api/signin/options' } },
    }) as unknown as APIGatewayProxyEventV2;

  it('accepts a change from its own URL and refuses one from anywhere else', async () => {
    const ours = await handler(signInOptions(`https://${HOST}`));
    expect(ours.statusCode).toBe(200);
    // The passkey challenge is bound to the Function URL's host as relying party.
    const options = JSON.parse(String(ours.body)) as { rpId?: string; challenge?: string };
    expect(options.rpId).toBe(HOST);
    expect(options.challenge).toMatch(/^[A-Za-z0-9_-]{16,}$/);

    for (const other of ['https://evil.example.com', `http://${HOST}`, `https://${HOST}.evil.example.com`]) {
      const theirs = await handler(signInOptions(other));
      expect(theirs.statusCode).toBe(403);
      expect(String(theirs.body)).toContain('Origin does not match');
    }
  });
});
