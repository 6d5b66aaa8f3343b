/**
 * The shipped `config/providers.json` and `config/catalog.json`: every entry passes the import's
 * strict validation, and the figures are in the units the gateway charges by.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { CatalogModel, ProviderConfig } from '../../lambdas/shared/catalog-types';
import {
  catalogItemToModel,
  catalogItemToProvider,
  checkCatalog,
  modelToItem,
  parseCatalogModel,
  parseProviderConfig,
  providerToItem,
} from '../../lambdas/catalog/items';
import { CatalogValidationError } from '../../lambdas/store/directory-errors';
import { loadCatalogFiles } from '../../local/ops';

const CONFIG = resolve(__dirname, '../../config');
const rawProviders = JSON.parse(readFileSync(resolve(CONFIG, 'providers.json'), 'utf8')) as Record<string, unknown>[];
const rawModels = JSON.parse(readFileSync(resolve(CONFIG, 'catalog.json'), 'utf8')) as Record<string, unknown>[];
const { providers, models } = loadCatalogFiles();
const byId = new Map(models.map((m) => [m.id, m]));
const model = (id: string): CatalogModel => {
  const m = byId.get(id);
  if (m === undefined) throw new Error(`${id} is not in the catalog`);
  return m;
};

describe('config/providers.json and config/catalog.json', () => {
  it('validate entry by entry and as a whole, losing nothing', () => {
    expect(providers).toHaveLength(rawProviders.length);
    expect(models).toHaveLength(rawModels.length);
    // Validation normalises nothing away: the parsed entries are the file's entries.
    expect(JSON.parse(JSON.stringify(models))).toEqual(rawModels);
    expect(JSON.parse(JSON.stringify(providers))).toEqual(rawProviders);
  });

  it('have unique ids and provider names', () => {
    expect(new Set(models.map((m) => m.id)).size).toBe(models.length);
    expect(new Set(providers.map((p) => p.name)).size).toBe(providers.length);
  });

  it('name a catalogued provider for every model, with an id SPEC accepts', () => {
    const names = new Set(providers.map((p) => p.name));
    for (const m of models) {
      expect(names.has(m.provider)).toBe(true);
      expect(m.id).toBe(`${m.provider}/${m.providerModelId}`);
      expect(m.id.length).toBeLessThanOrEqual(128);
      expect(m.id).toMatch(/^[A-Za-z0-9._:/@-]+$/);
    }
  });

  it('price every model in integer thousandths of a minor unit per million tokens', () => {
    for (const m of models) {
      for (const r of [m.inputRateThousandths, m.cachedInputRateThousandths, m.outputRateThousandths]) {
        expect(Number.isSafeInteger(r)).toBe(true);
      }
      expect(m.cachedInputRateThousandths ?? 0).toBeLessThanOrEqual(m.inputRateThousandths ?? 0);
      expect(m.currencyCode).toBe('USD');
    }
  });

  it.each([
    // $0.40 / $0.10 / $1.60 per million tokens = 40 / 10 / 160 cents = 40000 / 10000 / 160000.
    ['openai/gpt-4.1-mini', 40_000, 10_000, 160_000],
    ['openai/gpt-4o', 250_000, 125_000, 1_000_000],
    ['anthropic/claude-sonnet-4-20250514', 300_000, 30_000, 1_500_000],
    ['google/gemini-2.5-flash', 30_000, 3_000, 250_000],
    ['deepseek/deepseek-chat', 28_000, 2_800, 42_000],
  ])('%s costs %i / %i / %i thousandths per million (input, cached, output)', (id, input, cached, output) => {
    const m = model(id);
    expect([m.inputRateThousandths, m.cachedInputRateThousandths, m.outputRateThousandths]).toEqual([input, cached, output]);
  });

  it('offers the responses family only where the provider serves it (openai and the simulator)', () => {
    const withResponses = new Set(models.filter((m) => m.endpointFamilies.includes('responses')).map((m) => m.provider));
    expect([...withResponses].sort()).toEqual(['local', 'openai']);
    for (const p of providers) expect(p.families.includes('responses')).toBe(p.name === 'openai' || p.name === 'local');
  });

  it('keeps each real provider key in a stage secret or an environment variable, and the simulator keyless', () => {
    for (const p of providers) {
      if (p.name === 'local') {
        expect(p.keySource).toBe('none');
        expect(p.baseUrlEnv).toBe('SLUICE_LOCAL_UPSTREAM_URL');
        continue;
      }
      expect(p.keySource).toEqual({ secretName: `sluice/{stage}/providers/${p.name}`, env: `SLUICE_PROVIDER_KEY_${p.name.toUpperCase()}` });
      expect(p.baseUrl.startsWith('https://')).toBe(true);
    }
    expect(providers.find((p) => p.name === 'anthropic')?.requiresMaxTokens).toBe(true);
    expect(providers.find((p) => p.name === 'openai')?.streamUsageOnRequest).toBe(true);
  });

  it('carries at least three models for each major provider, and both of DeepSeek\'s', () => {
    const count = (name: string): number => models.filter((m) => m.provider === name).length;
    for (const name of ['openai', 'anthropic', 'google', 'mistral', 'groq', 'xai']) expect(count(name)).toBeGreaterThanOrEqual(3);
    // DeepSeek's API serves exactly two model ids.
    expect(count('deepseek')).toBe(2);
  });

  it('gives parameters in thousandths of their own unit', () => {
    const temperature = model('openai/gpt-4.1').parameters.find((p) => p.name === 'temperature');
    expect(temperature).toMatchObject({ type: 'number', min_milli: 0, max_milli: 2000, default_milli: 1000 });
    const ceiling = model('openai/gpt-4.1').parameters.find((p) => p.name === 'max_completion_tokens');
    expect(ceiling?.max_milli).toBe(32_768 * 1000);
  });

  it('holds the simulator models the gateway tests rely on', () => {
    expect(model('local/sim-small')).toMatchObject({ status: 'served', maxOutputTokens: 4096, contextWindowTokens: 128000 });
    expect(model('local/sim-large').outputRateThousandths).toBeGreaterThan(model('local/sim-small').outputRateThousandths ?? 0);
    expect(model('local/sim-no-max').maxOutputTokens).toBeNull();
    expect(model('local/sim-retired')).toMatchObject({ status: 'retired', replacement: 'local/sim-small' });
    expect(model('local/sim-retired-norepl').status).toBe('retired');
    expect(model('local/sim-retired-norepl').replacement).toBeUndefined();
    expect(model('local/sim-unreachable').status).toBe('unreachable');
    expect(model('local/sim-not-served').status).toBe('not_served');
    expect(model('local/sim-chat-only').endpointFamilies).toEqual(['chat_completions']);
    expect(model('local/org/sim-nested').providerModelId).toBe('org/sim-nested');
  });

  it('reads back through the gateway readers exactly as written', () => {
    for (const p of providers) expect(catalogItemToProvider(providerToItem(p) as unknown as Record<string, unknown>)).toEqual(p);
    for (const m of models) expect(catalogItemToModel(modelToItem(m) as unknown as Record<string, unknown>)).toEqual(m);
  });
});

describe('catalog validation', () => {
  const good = rawModels.find((m) => m['id'] === 'openai/gpt-4.1-mini') as Record<string, unknown>;
  const goodProvider = rawProviders.find((p) => p['name'] === 'openai') as Record<string, unknown>;

  it.each<[string, Record<string, unknown>, RegExp]>([
    ['an unknown field', { ...good, inputRate: 1 }, /inputRate is not a known field/],
    ['a fractional rate', { ...good, inputRateThousandths: 40.5 }, /inputRateThousandths must be an integer/],
    ['a negative rate', { ...good, outputRateThousandths: -1 }, /outputRateThousandths/],
    ['half the rates null', { ...good, outputRateThousandths: null }, /all integers or all null/],
    ['a cached rate above input', { ...good, cachedInputRateThousandths: 50_000 }, /cachedInputRateThousandths is above/],
    ['an id that is not provider/providerModelId', { ...good, id: 'openai/gpt-4.1' }, /id must be exactly/],
    ['a bare id', { ...good, id: 'gpt-4.1-mini', provider: 'openai' }, /id is invalid/],
    ['a character SPEC refuses', { ...good, id: 'openai/gpt 4', providerModelId: 'gpt 4' }, /id is invalid/],
    ['a replacement on a served model', { ...good, replacement: 'openai/gpt-4.1' }, /replacement is only for a retired model/],
    ['an unknown status', { ...good, status: 'gone' }, /status must be one of/],
    ['an unknown family', { ...good, endpointFamilies: ['embeddings'] }, /endpointFamilies holds "embeddings"/],
    ['a capability word outside yes/no/unknown', { ...good, capabilities: { ...(good['capabilities'] as object), vision: 'maybe' } }, /vision must be one of/],
    ['created in milliseconds', { ...good, created: 1_744_588_800_000 }, /created must be an integer/],
    ['a lower-case currency', { ...good, currencyCode: 'usd' }, /currencyCode/],
  ])('refuses %s, naming the entry', (_what, entry, message) => {
    const attempt = (): unknown => parseCatalogModel(entry, 'catalog.json entry 7 (openai/gpt-4.1-mini)');
    expect(attempt).toThrow(CatalogValidationError);
    expect(attempt).toThrow(/^catalog\.json entry 7 \(openai\/gpt-4\.1-mini\)/);
    expect(attempt).toThrow(message);
  });

  it.each<[string, Record<string, unknown>, RegExp]>([
    ['a reserved name', { ...goodProvider, name: 'profile' }, /name must be/],
    ['a slash in the name', { ...goodProvider, name: 'open/ai' }, /name must be/],
    ['a trailing slash on the base URL', { ...goodProvider, baseUrl: 'https://api.openai.com/v1/' }, /must not end with a slash/],
    ['a misspelt flag', { ...goodProvider, requiresMaxToken: true }, /requiresMaxToken is not a known field/],
    ['a key source that is neither none nor a secret', { ...goodProvider, keySource: 'env' }, /keySource: must be a JSON object/],
  ])('refuses a provider with %s', (_what, entry, message) => {
    expect(() => parseProviderConfig(entry, 'providers.json entry 0 (openai)')).toThrow(message);
  });

  it('refuses a model whose provider is missing, a duplicated id, and a dangling replacement', () => {
    const p = providers.filter((x) => x.name !== 'mistral');
    const where = { providers: 'providers.json', models: 'catalog.json' };
    expect(() => checkCatalog(p, models, where)).toThrow(/provider mistral is not in providers\.json/);
    const m = model('openai/gpt-4.1-mini');
    expect(() => checkCatalog(providers, [m, m], where)).toThrow(/entry 1 \(openai\/gpt-4\.1-mini\): id is listed twice/);
    const retired: CatalogModel = { ...m, status: 'retired', replacement: 'openai/not-there' };
    expect(() => checkCatalog(providers, [retired], where)).toThrow(/replacement openai\/not-there is not in the catalog/);
    const chatOnly: ProviderConfig = { ...(providers.find((x) => x.name === 'openai') as ProviderConfig), families: ['chat_completions'] };
    expect(() => checkCatalog([chatOnly], [m], where)).toThrow(/does not serve responses/);
  });
});
