/**
 * Providers and models added at run time, pure: the operator's choices become the catalog's own
 * entries (validated by the import's parsers), and prices written per million tokens in major
 * units become the catalog's integers (thousandths of a minor unit per million tokens).
 */
import { authOf, modelFromInput, providerFromInput } from '../../lambdas/catalog/added';
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
    ['a bad URL', { name: 'x', baseUrl: 'not a url' }, /baseUrl must be an absolute URL/],
    ['a URL that is not http', { name: 'x', baseUrl: 'ftp://host/v1' }, /baseUrl must be http or https/],
    ['a URL with a query', { name: 'x', baseUrl: 'https://host/v1?key=1' }, /no query/],
    ['a reserved name', { name: 'profile', baseUrl: 'https://host/v1' }, /name must be/],
    ['an upper-case name', { name: 'Azure', baseUrl: 'https://host/v1' }, /name must be/],
    ['an unknown family', { name: 'x', baseUrl: 'https://host/v1', families: ['embeddings'] }, /families holds "embeddings"/],
  ] as const)('refuses %s', (_name, input, message) => {
    expect(() => providerFromInput(input)).toThrow(message);
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
