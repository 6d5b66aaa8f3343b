/**
 * The catalog's commands: `catalog import` (the files; what the table holds beyond them is
 * listed, and removed only with `--prune`), `catalog list`, and providers and models added and
 * removed at run time (`provider add|list|remove`, `model add|remove`), all through the
 * management API, which validates and audits them. A provider's key is read from stdin (or a
 * hidden prompt), never from argv, and goes to the stage's secret store.
 *
 * Prices are per million tokens in major units (`--input-price 0.40` is USD 0.40), or in minor
 * units with `--minor-units`; `--json` keeps the catalog's integers (thousandths of a minor unit
 * per million tokens).
 */
import type { CatalogModel, ProviderConfig } from '../../lambdas/shared/catalog-types';
import { baseUrlProblem } from '../../lambdas/catalog/base-url';
import { CatalogValidationError } from '../../lambdas/catalog/errors';
import type { ImportResult } from '../../lambdas/catalog/import';
import { ValidationError } from '../../lambdas/store/directory-errors';
import { apiPath } from '../api-client';
import { readCatalogFiles } from '../catalog-files';
import { flag, need, secretGiven, str, tabular, type Command, type Values } from '../commands';
import { formatRate, parseRate, parseTokens, RateFormatError } from '../rates';

const FAMILY_WORDS: Readonly<Record<string, string>> = {
  chat: 'chat_completions',
  chat_completions: 'chat_completions',
  responses: 'responses',
};

/** `--families chat,responses` as the catalog's family names. */
function families(values: Values): string[] | undefined {
  const raw = str(values, 'families');
  if (raw === undefined) return undefined;
  return raw.split(',').map((w) => {
    const family = FAMILY_WORDS[w.trim()];
    if (family === undefined) throw new ValidationError(`--families takes chat (or chat_completions) and responses, comma-separated; not ${JSON.stringify(w)}`);
    return family;
  });
}

function rate(values: Values, name: string): number | undefined {
  const raw = str(values, name);
  if (raw === undefined) return undefined;
  try {
    return parseRate(raw, { minorUnits: flag(values, 'minor-units') });
  } catch (err) {
    if (err instanceof RateFormatError) throw new ValidationError(`--${name}: ${err.message}`);
    throw err;
  }
}

function tokens(values: Values, name: string): number | undefined {
  const raw = str(values, name);
  if (raw === undefined) return undefined;
  try {
    return parseTokens(raw, `--${name}`);
  } catch (err) {
    if (err instanceof RateFormatError) throw new ValidationError(err.message);
    throw err;
  }
}

/** One lowercase word of the stream-usage option. */
function streamUsageOnRequest(values: Values): boolean | undefined {
  const raw = str(values, 'stream-usage');
  if (raw === undefined) return undefined;
  if (raw === 'on-request') return true;
  if (raw === 'always') return false;
  throw new ValidationError('--stream-usage is on-request (usage on a stream only when stream_options.include_usage asks; OpenAI and most servers) or always');
}

function describeProvider(p: ProviderConfig): string[] {
  return [
    `provider         ${p.name}  ${p.displayName}`,
    `base url         ${p.baseUrl}`,
    `key              ${p.keySource === 'none' ? 'none sent' : `${p.auth.header}: ${p.auth.prefix}<key>, kept in secret ${p.keySource.secretName}`}`,
    `max_tokens       ${p.requiresMaxTokens ? 'required by the provider: added from the model\'s maximum output when a request names none' : 'optional'}`,
    `stream usage     ${p.streamUsageOnRequest ? 'on request: Sluice asks for it (stream_options.include_usage)' : 'always reported'}`,
    `families         ${p.families.join(', ')}`,
  ];
}

function describeModel(m: CatalogModel): string[] {
  return [
    `model            ${m.id}`,
    `input            ${formatRate(m.inputRateThousandths)} per million tokens (cached ${formatRate(m.cachedInputRateThousandths)})`,
    `output           ${formatRate(m.outputRateThousandths)} per million tokens`,
    `context window   ${m.contextWindowTokens ?? 'not recorded'}`,
    `max output       ${m.maxOutputTokens ?? 'not recorded (requests must send max_tokens)'}`,
    `families         ${m.endpointFamilies.join(', ')}`,
  ];
}

/** The catalog's commands, listed by `sluice --help` with the rest. */
export const CATALOG_COMMANDS: readonly Command[] = [
  {
    group: 'catalog',
    action: 'import',
    summary: 'validate and import the provider and model files; lists what they do not (removed only with --prune)',
    usage: '[--providers <file>] [--catalog <file>] [--prune]',
    options: { providers: { type: 'string' }, catalog: { type: 'string' }, prune: { type: 'boolean' } },
    positionals: [0, 0],
    async run(api, v) {
      const providersFile = str(v, 'providers');
      const catalogFile = str(v, 'catalog');
      // The API validates every entry before it writes anything, and names the file in its refusal.
      const entries = readCatalogFiles({
        ...(providersFile === undefined ? {} : { providersFile }),
        ...(catalogFile === undefined ? {} : { catalogFile }),
      });
      const prune = flag(v, 'prune');
      const out = await api.call<ImportResult>({
        method: 'POST',
        path: '/catalog/import',
        body: { providers: entries.providers, models: entries.models, sources: entries.sources, prune },
      });
      const unlisted = [...out.unlisted.models.map((id) => `model ${id}`), ...out.unlisted.providers.map((name) => `provider ${name}`)];
      const human = [`imported ${out.providers} providers and ${out.models} models`];
      if (unlisted.length === 0) human.push('the catalog holds nothing the files do not list');
      else if (out.pruned) human.push(`removed ${out.removedModels} models and ${out.removedProviders} providers the files do not list:`, ...unlisted.map((u) => `  ${u}`));
      else human.push(`kept ${unlisted.length} entries the files do not list (added at run time, or dropped from the files); --prune removes them:`, ...unlisted.map((u) => `  ${u}`));
      return { json: out, human };
    },
  },
  {
    group: 'catalog',
    action: 'list',
    summary: 'the catalogued models: id, status, prices per million tokens, maximum output',
    usage: '[--provider <name>] [--csv]',
    options: { provider: { type: 'string' } },
    positionals: [0, 0],
    async run(api, v) {
      const out = await api.call<{ models: CatalogModel[] }>({ method: 'GET', path: '/catalog/models' });
      const provider = str(v, 'provider');
      const models = provider === undefined ? out.models : out.models.filter((m) => m.provider === provider);
      const result = tabular(
        { models },
        ['model', 'status', 'input rate', 'output rate', 'currency', 'max output'],
        models.map((m) => [m.id, m.status, m.inputRateThousandths, m.outputRateThousandths, m.currencyCode, m.maxOutputTokens]),
        'no models',
      );
      // People read prices; --csv keeps the catalog's integers (thousandths of a minor unit per million tokens).
      const people = tabular(
        { models },
        ['model', 'status', 'input /1M', 'output /1M', 'max output'],
        models.map((m) => [m.id, m.status, formatRate(m.inputRateThousandths), formatRate(m.outputRateThousandths), m.maxOutputTokens]),
        'no models',
      );
      return { ...result, human: people.human };
    },
  },
  {
    group: 'provider',
    action: 'add',
    summary: 'add an OpenAI-compatible provider account at run time (its key read from stdin, kept in the secret store)',
    usage:
      '<name> --base-url <url> [--auth bearer|api-key|none|header:<name>] [--requires-max-tokens] [--stream-usage on-request|always] ' +
      '[--families chat,responses] [--display-name <text>]   (e.g. `pass show vllm | sluice provider add vllm --base-url https://vllm.internal/v1`)',
    options: {
      'base-url': { type: 'string' },
      auth: { type: 'string' },
      'requires-max-tokens': { type: 'boolean' },
      'stream-usage': { type: 'string' },
      families: { type: 'string' },
      'display-name': { type: 'string' },
      'key-stdin': { type: 'boolean' },
    },
    positionals: [1, 1],
    async run(api, v, p, io) {
      const name = p[0] ?? '';
      const auth = str(v, 'auth') ?? 'bearer';
      const fams = families(v);
      const usage = streamUsageOnRequest(v);
      const displayName = str(v, 'display-name');
      // Checked here too (the management API decides), so a bad URL is refused before the key is asked for.
      const baseUrl = need(v, 'base-url').replace(/\/+$/, '');
      const problem = baseUrlProblem(baseUrl);
      if (problem !== undefined) throw new CatalogValidationError(`--base-url ${problem}`);
      const body: Record<string, unknown> = {
        name,
        baseUrl,
        auth,
        requiresMaxTokens: flag(v, 'requires-max-tokens'),
        ...(usage === undefined ? {} : { streamUsageOnRequest: usage }),
        ...(fams === undefined ? {} : { families: fams }),
        ...(displayName === undefined ? {} : { displayName }),
      };
      // The key never passes through argv (shell history, ps): stdin or a hidden prompt only.
      if (auth !== 'none') body['apiKey'] = secretGiven(await io.readSecret(`${name} API key (input hidden): `), `pass show ${name} | sluice provider add ${name} --base-url …`);
      const out = await api.call<{ provider: ProviderConfig }>({ method: 'POST', path: '/catalog/providers', body });
      return { json: out, human: [...describeProvider(out.provider), '', `add its models with: sluice model add ${name}/<model> --input-price … --output-price …`] };
    },
  },
  {
    group: 'provider',
    action: 'list',
    summary: 'the catalogued provider accounts',
    usage: '[--csv]',
    options: {},
    positionals: [0, 0],
    async run(api) {
      const out = await api.call<{ providers: { name: string; displayName: string; baseUrl: string | null; baseUrlEnv?: string; families: string[] }[] }>({ method: 'GET', path: '/catalog/providers' });
      // null: the provider takes its address from a variable this stage does not set (the simulator when deployed).
      const address = (p: (typeof out.providers)[number]): string => p.baseUrl ?? `none here (${p.baseUrlEnv ?? 'unset'} is not set)`;
      return tabular(out, ['provider', 'name', 'base url', 'families'], out.providers.map((p) => [p.name, p.displayName, address(p), p.families.join(' ')]), 'no providers');
    },
  },
  {
    group: 'provider',
    action: 'remove',
    summary: 'remove a provider account that serves no catalogued model (and the key `provider add` stored)',
    usage: '<name>',
    options: {},
    positionals: [1, 1],
    async run(api, _v, p) {
      const out = await api.call<{ provider: string; secretDeleted: boolean }>({ method: 'DELETE', path: apiPath('catalog', 'providers', p[0] ?? '') });
      return { json: out, human: [`removed provider ${out.provider}${out.secretDeleted ? ' and its key' : ''}`] };
    },
  },
  {
    group: 'model',
    action: 'add',
    summary: 'add a model of a catalogued provider at run time, with its prices (per million tokens) and limits',
    usage:
      '<provider>/<model> --input-price <price> --output-price <price> [--cached-input-price <price>] [--context <tokens>] ' +
      '[--max-output <tokens>] [--families chat,responses] [--display-name <text>] [--author <text>]   (prices per million tokens: 0.40 is USD 0.40)',
    options: {
      'input-price': { type: 'string' },
      'output-price': { type: 'string' },
      'cached-input-price': { type: 'string' },
      context: { type: 'string' },
      'max-output': { type: 'string' },
      families: { type: 'string' },
      'display-name': { type: 'string' },
      author: { type: 'string' },
    },
    positionals: [1, 1],
    async run(api, v, p) {
      const input = rate(v, 'input-price');
      const output = rate(v, 'output-price');
      if (input === undefined || output === undefined) throw new ValidationError('--input-price and --output-price are required (per million tokens, e.g. 0.40)');
      const cached = rate(v, 'cached-input-price');
      const context = tokens(v, 'context');
      const maxOutput = tokens(v, 'max-output');
      const fams = families(v);
      const displayName = str(v, 'display-name');
      const author = str(v, 'author');
      const out = await api.call<{ model: CatalogModel }>({
        method: 'POST',
        path: '/catalog/models',
        body: {
          id: p[0] ?? '',
          inputRateThousandths: input,
          outputRateThousandths: output,
          ...(cached === undefined ? {} : { cachedInputRateThousandths: cached }),
          ...(context === undefined ? {} : { contextWindowTokens: context }),
          ...(maxOutput === undefined ? {} : { maxOutputTokens: maxOutput }),
          ...(fams === undefined ? {} : { families: fams }),
          ...(displayName === undefined ? {} : { displayName }),
          ...(author === undefined ? {} : { author }),
        },
      });
      return { json: out, human: describeModel(out.model), notes: ['served by every gateway within the catalog cache time (SLUICE_CATALOG_CACHE_TTL_MS, 60 s by default)'] };
    },
  },
  {
    group: 'model',
    action: 'remove',
    summary: 'remove a model from the catalog',
    usage: '<provider>/<model>',
    options: {},
    positionals: [1, 1],
    async run(api, _v, p) {
      const out = await api.call<{ model: string }>({ method: 'DELETE', path: apiPath('catalog', 'models', p[0] ?? '') });
      return { json: out, human: [`removed model ${out.model}`] };
    },
  },
];
