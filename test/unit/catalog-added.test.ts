/**
 * Providers and models added at run time, pure: the operator's choices become the catalog's own
 * entries (validated by the import's parsers), and prices written per million tokens in major
 * units become the catalog's integers (thousandths of a minor unit per million tokens).
 */
import { authOf, modelFromInput, providerFromInput } from '../../lambdas/catalog/added';
import { baseUrlProblem, withoutCredentials } from '../../lambdas/catalog/base-url';
import { catalogItemToProvider, providerToItem } from '../../lambdas/catalog/items';
import { CatalogValidationError } from '../../lambdas/catalog/errors';
import { formatRate, parseRate, parseTokens, RateFormatError } from '../../cli/rates';

describe('prices per million tokens', () => {
  test.each([
    ['0.40', {}, 40_000],
    ['$2.50', {}, 250_000],
    ['USD 0.075', {}, 7_500],
    ['usd 15', {}, 1_500_000],
    ['0.00001', {}, 1],
    ['0', {}, 0],
    ['40', { minorUnits: true }, 40_000],
    ['0.125', { minorUnits: true }, 125],
  ] as const)('%s %o is %i thousandths', (raw, opts, expected) => {
    expect(parseRate(raw, opts)).toBe(expected);
  });

  test.each([
    ['0.000001', {}, /five decimal places/],
    ['-1', {}, /not a price/],
    ['0.4.0', {}, /not a price/],
    ['EUR 1', {}, /not a price in USD/],
    ['', {}, /not a price/],
    ['0.1234', { minorUnits: true }, /three decimal places/],
    ['9999999999', {}, /too large/],
  ] as const)('refuses %j %o', (raw, opts, message) => {
    expect(() => parseRate(raw, opts)).toThrow(RateFormatError);
    expect(() => parseRate(raw, opts)).toThrow(message);
  });

  test.each([
    [40_000, 'USD 0.40'],
    [7_500, 'USD 0.075'],
    [1, 'USD 0.00001'],
    [null, '-'],
  ] as const)('shows %p as %s', (rate, shown) => {
    expect(formatRate(rate)).toBe(shown);
  });

  test.each([
    ['128000', 128_000],
    ['128k', 128_000],
    ['1M', 1_000_000],
  ] as const)('token count %s is %i', (raw, n) => {
    expect(parseTokens(raw, '--context')).toBe(n);
  });

  test.each(['0', '-5', '1.5', 'lots'])('refuses the token count %j', (raw) => {
    expect(() => parseTokens(raw, '--context')).toThrow(/--context must be a whole number/);
  });
});

describe('how a provider expects its key', () => {
  test.each([
    ['bearer', { header: 'authorization', prefix: 'Bearer ' }],
    ['api-key', { header: 'api-key', prefix: '' }],
    ['header:X-Api-Key', { header: 'x-api-key', prefix: '' }],
    ['none', undefined],
  ] as const)('%s', (mode, auth) => {
    expect(authOf(mode)).toEqual(auth);
  });

  test('anything else is refused', () => {
    expect(() => authOf('basic')).toThrow(CatalogValidationError);
  });
});

describe('a provider from an operator', () => {
  test('takes the defaults of an OpenAI-compatible server and names its secret, never a variable', () => {
    expect(providerFromInput({ name: 'vllm', baseUrl: 'https://vllm.internal/v1/' })).toEqual({
      name: 'vllm',
      displayName: 'vllm',
      baseUrl: 'https://vllm.internal/v1',
      auth: { header: 'authorization', prefix: 'Bearer ' },
      requiresMaxTokens: false,
      streamUsageOnRequest: true,
      families: ['chat_completions'],
      keySource: { secretName: 'sluice/{stage}/added-providers/vllm' },
    });
  });

  test('a keyless provider names no secret', () => {
    expect(providerFromInput({ name: 'ollama', baseUrl: 'http://10.0.0.5:11434/v1', auth: 'none' }).keySource).toBe('none');
  });

  test.each([
    ['a bad URL', { name: 'x', baseUrl: 'not a url' }, /baseUrl must be http\(s\):\/\/host\[:port\]\/path, with no spaces/],
    ['a URL that is not http', { name: 'x', baseUrl: 'ftp://host/v1' }, /baseUrl must be http\(s\):\/\/host\[:port\]\/path: the scheme is "ftp", not http or https/],
    ['a URL with a password', { name: 'x', baseUrl: 'https://user:pa55@host/v1' }, /baseUrl must not carry a user name or password/],
    ['a URL with a query', { name: 'x', baseUrl: 'https://host/v1?key=1' }, /no query/],
    ['a reserved name', { name: 'profile', baseUrl: 'https://host/v1' }, /name must be/],
    ['an upper-case name', { name: 'Azure', baseUrl: 'https://host/v1' }, /name must be/],
    ['an unknown family', { name: 'x', baseUrl: 'https://host/v1', families: ['embeddings'] }, /families holds "embeddings"/],
  ] as const)('refuses %s', (_name, input, message) => {
    expect(() => providerFromInput(input)).toThrow(message);
  });
});

describe("a provider's base URL: http(s)://host[:port]/path, the wrong part named", () => {
  test.each([
    'https://api.openai.com/v1',
    'http://10.0.0.5:8000/v1',
    'HTTPS://Example.COM/openai/v1',
    'http://localhost:11434',
    'http://vllm_worker-1:8000/v1',
    'http://[::1]:8000/v1',
    'https://my-resource.openai.azure.com/openai/v1',
    'https://host/a%20b/v1',
    'https://host/v1/',
  ])('accepts %s', (url) => {
    expect(baseUrlProblem(url)).toBeUndefined();
  });

  // Each refusal names the part at fault; none repeats a credential, a query or a fragment.
  test.each([
    ['user and password', 'https://alice:s3cret@api.example.com/v1', /^must not carry a user name or password \(user:password@ before the host\)/],
    ['a user alone', 'https://alice@api.example.com/v1', /^must not carry a user name or password/],
    ['an empty user', 'https://@api.example.com/v1', /^must not carry a user name or password/],
    ['a password after a path-like user', 'https://a:b@c@host/v1', /^must not carry a user name or password/],
    ['no scheme', 'api.example.com/v1', /^must be http\(s\):\/\/host\[:port\]\/path: it does not begin with http:\/\/ or https:\/\//],
    ['another scheme', 'ftp://host/v1', /: the scheme is "ftp", not http or https$/],
    ['no // after the scheme', 'https:host/v1', /: \/\/ is missing after https:$/],
    ['one slash after the scheme', 'https:/host/v1', /: \/\/ is missing after https:$/],
    ['no host', 'https:///v1', /: the host is missing$/],
    ['a host with a bad character', 'https://ho!st/v1', /: the host "ho!st" is not a host name/],
    ['an empty label', 'https://host..com/v1', /: the host "host..com" is not a host name/],
    ['a port out of range', 'https://host:99999/v1', /: the port "99999" is not a number from 1 to 65535$/],
    ['port 0', 'https://host:0/v1', /: the port "0" is not a number from 1 to 65535$/],
    ['a port that is not a number', 'https://host:http/v1', /: the port "http" is not a number/],
    ['an empty port', 'https://host:/v1', /: the port "" is not a number/],
    ['a query', 'https://host/v1?api-key=s3cret', /^must carry no query \(\?…\)/],
    ['a fragment', 'https://host/v1#s3cret', /^must carry no fragment \(#…\)/],
    ['a backslash', 'https://host\\v1', /: the path holds a backslash$/],
    ['a space', 'https://host/v 1', /with no spaces, tabs, line breaks or control characters$/],
    ['a tab inside the host', 'https://ho\tst/v1', /with no spaces, tabs, line breaks or control characters$/],
    ['a line break', 'https://host/v1\n', /with no spaces, tabs, line breaks or control characters$/],
    ['a dot-dot segment', 'https://host/a/../v1', /: the path has a \. or \.\. segment$/],
    ['an encoded dot-dot segment', 'https://host/a/%2E%2e/v1', /: the path has a \. or \.\. segment$/],
    ['a character a path cannot hold', 'https://host/v1/<x>', /: the path holds a character a URL path cannot/],
  ])('refuses %s', (_what, url, message) => {
    const problem = baseUrlProblem(url);
    expect(problem).toMatch(message);
    expect(problem).not.toContain('s3cret');
    expect(problem).not.toContain('alice');
  });

  test('a provider added with a credential in its URL is refused before anything is built from it', () => {
    expect(() => providerFromInput({ name: 'x', baseUrl: 'https://alice:s3cret@host/v1' })).toThrow(CatalogValidationError);
    expect(() => providerFromInput({ name: 'x', baseUrl: 'https://alice:s3cret@host/v1' })).not.toThrow(/s3cret/);
  });

  test('an entry stored before the rule is still read (the catalog stays readable), and is listed without its credential', () => {
    const stored = providerToItem({ ...providerFromInput({ name: 'old', baseUrl: 'https://host/v1' }), baseUrl: 'https://alice:s3cret@host/v1' });
    expect(catalogItemToProvider({ ...stored }).baseUrl).toBe('https://alice:s3cret@host/v1');
    expect(withoutCredentials('https://alice:s3cret@host/v1')).toBe('https://***@host/v1');
    expect(withoutCredentials('https://host/v1')).toBe('https://host/v1');
  });
});

describe('a model from an operator', () => {
  const provider = providerFromInput({ name: 'vllm', baseUrl: 'https://vllm.internal/v1', families: ['chat_completions'] });
  const base = { id: 'vllm/meta/llama-3.1-8b', inputRateThousandths: 10_000, outputRateThousandths: 40_000, currencyCode: 'USD' };

  test('is served, its capabilities unknown, its cached rate the input rate unless given', () => {
    expect(modelFromInput(base, provider, 1_760_000_000_123)).toEqual({
      id: 'vllm/meta/llama-3.1-8b',
      provider: 'vllm',
      providerModelId: 'meta/llama-3.1-8b',
      displayName: 'meta/llama-3.1-8b',
      author: 'vllm',
      created: 1_760_000_000,
      contextWindowTokens: null,
      maxOutputTokens: null,
      inputRateThousandths: 10_000,
      cachedInputRateThousandths: 10_000,
      outputRateThousandths: 40_000,
      currencyCode: 'USD',
      endpointFamilies: ['chat_completions'],
      capabilities: { audio: 'unknown', json_mode: 'unknown', streaming: 'unknown', tools: 'unknown', vision: 'unknown' },
      status: 'served',
      parameters: [],
    });
  });

  test.each([
    ['a cached rate above the input rate', { ...base, cachedInputRateThousandths: 20_000 }, /cachedInputRateThousandths is above/],
    ['a maximum output above the context window', { ...base, contextWindowTokens: 1000, maxOutputTokens: 4096 }, /maxOutputTokens is above/],
    ['a family the provider does not serve', { ...base, families: ['responses'] }, /does not serve responses/],
    ['a rate that is not whole', { ...base, inputRateThousandths: 1.5 }, /inputRateThousandths must be an integer/],
    ['a currency that is not a code', { ...base, currencyCode: 'dollars' }, /currencyCode/],
    ['an id outside the model-field characters', { ...base, id: 'vllm/llama 3' }, /id is invalid/],
  ] as const)('refuses %s', (_name, input, message) => {
    expect(() => modelFromInput(input, provider, 1_760_000_000_000)).toThrow(message);
  });
});
