/** Provider data in action: the upstream body (SPEC's two rewrites plus DESIGN decision 4), URL and headers. */
import { promptBound, sizeHold } from '../../lambdas/core/pricing';
import {
  baseUrl,
  buildUpstreamBody,
  endpointUrl,
  serviceKey,
  serviceKeyAvailable,
  serviceSecretName,
  upstreamHeaders,
} from '../../lambdas/gateway/providers';
import type { SecretSource } from '../../lambdas/gateway/ports';
import type { CatalogModel, ProviderConfig } from '../../lambdas/shared/catalog-types';
import type { EndpointFamily } from '../../lambdas/shared/records';

const provider = (over: Partial<ProviderConfig> = {}): ProviderConfig => ({
  name: 'acme',
  displayName: 'Acme',
  baseUrl: 'https://api.acme.test/v1',
  auth: { header: 'authorization', prefix: 'Bearer ' },
  requiresMaxTokens: false,
  streamUsageOnRequest: false,
  families: ['chat_completions', 'responses'],
  keySource: { secretName: 'sluice/{stage}/provider/acme', env: 'ACME_KEY' },
  ...over,
});

const model = (over: Partial<CatalogModel> = {}): CatalogModel => ({
  id: 'acme/org/model-1',
  provider: 'acme',
  providerModelId: 'org/model-1',
  displayName: 'Model 1',
  author: 'Org',
  created: 1_700_000_000,
  contextWindowTokens: 200_000,
  maxOutputTokens: 4096,
  inputRateThousandths: 3_000_000,
  cachedInputRateThousandths: 300_000,
  outputRateThousandths: 15_000_000,
  currencyCode: 'USD',
  endpointFamilies: ['chat_completions', 'responses'],
  capabilities: { audio: 'no', json_mode: 'yes', streaming: 'yes', tools: 'yes', vision: 'unknown' },
  status: 'served',
  parameters: [],
  ...over,
});

function build(text: string, family: EndpointFamily = 'chat_completions', p: ProviderConfig = provider(), m: CatalogModel = model()) {
  return buildUpstreamBody(text, JSON.parse(text) as Record<string, unknown>, family, m, p);
}

describe('buildUpstreamBody: model', () => {
  test('only the top-level model changes; every other byte is the client\'s', () => {
    const before = '{\n  "model" : ';
    const after =
      ',\n  "messages": [{"role":"user","content":"say \\"model\\": {}","model":"nested/keep"}],\n' +
      '  "seed": 123456789012345678901234567890, "temperature": 1.0, "top_p": 1e0,\n' +
      '  "tools": [{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}], "response_format": {"type":"json_object"}\n}\n';
    const text = `${before}"profile/fast"${after}`;
    const out = build(text);
    expect(out.text).toBe(`${before}"org/model-1"${after}`);
    expect(out.injectedUsage).toBe(false);
  });

  test.each<[EndpointFamily]>([['chat_completions'], ['responses']])('%s: the provider id is passed verbatim, slashes included', (family) => {
    const out = build('{"model":"acme/org/model-1","input":"hi"}', family);
    expect(out.text).toBe('{"model":"org/model-1","input":"hi"}');
  });
});

describe('buildUpstreamBody: max_tokens (SPEC rewrite 2)', () => {
  const needs = provider({ requiresMaxTokens: true });

  test('added with the model maximum when neither ceiling is present', () => {
    const out = build('{"model":"acme/org/model-1","messages":[]}', 'chat_completions', needs);
    expect(out.text).toBe('{"model":"org/model-1","messages":[],"max_tokens":4096}');
  });

  test.each<[string, string]>([
    ['max_tokens given', '"max_tokens":10'],
    ['max_completion_tokens given', '"max_completion_tokens":10'],
    // Present but unreadable: SPEC "treated as absent, not corrected": the hold ignores it, the body keeps it.
    ['max_tokens null', '"max_tokens":null'],
    ['max_tokens a string', '"max_tokens":"10"'],
    ['max_tokens negative', '"max_tokens":-1'],
    ['max_completion_tokens null', '"max_completion_tokens":null'],
  ])('not added when %s', (_l, field) => {
    const text = `{"model":"acme/org/model-1","messages":[],${field}}`;
    expect(build(text, 'chat_completions', needs).text).toBe(`{"model":"org/model-1","messages":[],${field}}`);
  });

  test.each<[string, EndpointFamily, ProviderConfig, CatalogModel]>([
    ['a provider that does not require it', 'chat_completions', provider(), model()],
    ['the responses family', 'responses', needs, model()],
    ['a model with no published maximum', 'chat_completions', needs, model({ maxOutputTokens: null })],
  ])('not added for %s', (_l, family, p, m) => {
    expect(build('{"model":"x/y","messages":[]}', family, p, m).text).toBe('{"model":"org/model-1","messages":[]}');
  });

  // The hold must cover what the provider can produce: whenever Sluice sends max_tokens itself,
  // the hold's output ceiling is at least that figure. A chat body carrying only the responses
  // field `max_output_tokens` is read by callerCeiling as a ceiling, so the hold covers 5 tokens
  // while the provider is told it may write 4096.
  test.each<[string, string]>([
    ['no ceiling', ''],
    ['max_output_tokens (a responses field) on a chat body', ',"max_output_tokens":5'],
  ])('the hold covers the max_tokens Sluice adds (%s)', (_l, extra) => {
    const text = `{"model":"acme/org/model-1","messages":[{"role":"user","content":"hi"}]${extra}}`;
    const parsed = JSON.parse(text) as Record<string, unknown>;
    const out = buildUpstreamBody(text, parsed, 'chat_completions', model(), needs);
    const sent = (JSON.parse(out.text) as { max_tokens: number }).max_tokens;
    expect(sent).toBe(4096);
    const hold = sizeHold(model(), parsed, promptBound(Buffer.byteLength(text), parsed), 'chat_completions');
    expect(hold.outputCeilingTokens).toBeGreaterThanOrEqual(sent);
  });
});

describe('buildUpstreamBody: stream_options.include_usage (DESIGN decision 4)', () => {
  const asks = provider({ streamUsageOnRequest: true });

  test.each<[string, string, string, boolean]>([
    ['stream without stream_options: appended', '{"model":"m","stream":true}', '{"model":"org/model-1","stream":true,"stream_options":{"include_usage":true}}', true],
    [
      'merged into existing stream_options, in place',
      '{"model":"m","stream":true,"stream_options":{"continuous_usage_stats":false},"n":1}',
      '{"model":"org/model-1","stream":true,"stream_options":{"continuous_usage_stats":false,"include_usage":true},"n":1}',
      true,
    ],
    ['include_usage false counts as not asked', '{"model":"m","stream":true,"stream_options":{"include_usage":false}}', '{"model":"org/model-1","stream":true,"stream_options":{"include_usage":true}}', true],
    ['stream_options null', '{"model":"m","stream":true,"stream_options":null}', '{"model":"org/model-1","stream":true,"stream_options":{"include_usage":true}}', true],
    ['client asked: untouched', '{"model":"m","stream":true,"stream_options":{ "include_usage" : true }}', '{"model":"org/model-1","stream":true,"stream_options":{ "include_usage" : true }}', false],
    ['not a stream', '{"model":"m","stream":false}', '{"model":"org/model-1","stream":false}', false],
    ['stream absent', '{"model":"m"}', '{"model":"org/model-1"}', false],
    ['stream as a string is not a stream', '{"model":"m","stream":"true"}', '{"model":"org/model-1","stream":"true"}', false],
  ])('%s', (_l, text, expected, injected) => {
    const out = build(text, 'chat_completions', asks);
    expect(out.text).toBe(expected);
    expect(out.injectedUsage).toBe(injected);
  });

  test('not injected for a provider that always reports usage', () => {
    expect(build('{"model":"m","stream":true}')).toEqual({ text: '{"model":"org/model-1","stream":true}', injectedUsage: false });
  });

  test('not injected on the responses family', () => {
    expect(build('{"model":"m","stream":true}', 'responses', asks)).toEqual({ text: '{"model":"org/model-1","stream":true}', injectedUsage: false });
  });

  test('both rewrites together, every other byte kept', () => {
    const p = provider({ streamUsageOnRequest: true, requiresMaxTokens: true });
    const out = build('{ "model": "profile/p", "stream": true, "big": 12345678901234567890 }', 'chat_completions', p);
    expect(out.text).toBe('{ "model": "org/model-1", "stream": true, "big": 12345678901234567890,"max_tokens":4096,"stream_options":{"include_usage":true}}');
    expect(out.injectedUsage).toBe(true);
  });
});

describe('URL, headers, keys', () => {
  test.each([
    ['https://a.test/v1', 'chat_completions', 'https://a.test/v1/chat/completions'],
    ['https://a.test/v1/', 'responses', 'https://a.test/v1/responses'],
    ['https://a.test/v1///', 'chat_completions', 'https://a.test/v1/chat/completions'],
  ] as const)('endpointUrl(%s, %s)', (base, family, url) => {
    expect(endpointUrl(base, family)).toBe(url);
  });

  test('upstream headers: content type, length and the provider auth only', () => {
    expect(upstreamHeaders(provider(), 'sk-1', 42)).toEqual({ 'content-type': 'application/json', 'content-length': '42', authorization: 'Bearer sk-1' });
    expect(upstreamHeaders(provider({ auth: { header: 'x-api-key', prefix: '' } }), 'k', 1)).toEqual({ 'content-type': 'application/json', 'content-length': '1', 'x-api-key': 'k' });
    expect(upstreamHeaders(provider({ keySource: 'none' }), null, 2)).toEqual({ 'content-type': 'application/json', 'content-length': '2' });
  });

  test('base URL: the environment wins where named; a keyless provider needs it', () => {
    expect(baseUrl(provider(), {})).toBe('https://api.acme.test/v1');
    expect(baseUrl(provider({ baseUrlEnv: 'ACME_URL' }), { ACME_URL: 'http://127.0.0.1:9/v1' })).toBe('http://127.0.0.1:9/v1');
    expect(baseUrl(provider({ baseUrlEnv: 'ACME_URL' }), { ACME_URL: '' })).toBe('https://api.acme.test/v1');
    expect(baseUrl(provider({ baseUrlEnv: 'SIM_URL', keySource: 'none' }), {})).toBeUndefined();
    expect(baseUrl(provider({ baseUrlEnv: 'SIM_URL', keySource: 'none' }), { SIM_URL: 'http://127.0.0.1:7/v1' })).toBe('http://127.0.0.1:7/v1');
  });

  const secrets = (values: Record<string, string>): SecretSource => ({ get: (name) => Promise.resolve(values[name]) });
  const failing: SecretSource = { get: () => Promise.reject(new Error('denied')) };
  const deps = (s: SecretSource, env: Record<string, string> = {}) => ({ secrets: s, env, config: { stage: 'dev' } });

  test('service key from the stage secret', async () => {
    expect(serviceSecretName(provider(), 'prod')).toBe('sluice/prod/provider/acme');
    expect(serviceSecretName(provider({ keySource: 'none' }), 'prod')).toBeUndefined();
    await expect(serviceKey(provider(), deps(secrets({ 'sluice/dev/provider/acme': 'sk-dev' })))).resolves.toBe('sk-dev');
    await expect(serviceKey(provider({ keySource: 'none' }), deps(secrets({})))).resolves.toBeNull();
  });

  test.each<[string, ProviderConfig, SecretSource, Record<string, string>, boolean]>([
    ['secret present', provider(), secrets({ 'sluice/dev/provider/acme': 'k' }), {}, true],
    ['secret missing', provider(), secrets({}), {}, false],
    ['secret store failing', provider(), failing, {}, false],
    ['keyless with its URL', provider({ keySource: 'none', baseUrlEnv: 'SIM' }), failing, { SIM: 'http://x/v1' }, true],
    ['keyless without its URL', provider({ keySource: 'none', baseUrlEnv: 'SIM' }), failing, {}, false],
  ])('serviceKeyAvailable: %s', async (_l, p, s, env, expected) => {
    await expect(serviceKeyAvailable(p, deps(s, env))).resolves.toBe(expected);
  });
});
