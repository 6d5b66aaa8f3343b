/**
 * The management API's catalog routes: reading providers and models, the import of the files
 * (pruning only when asked), and providers and models added and removed one at a time at run
 * time. Rates travel as exact integers in the catalog's unit (thousandths of a minor unit per
 * million tokens); a provider's key travels in the add request's body only, to the secret store.
 */
import { withoutCredentials } from '../catalog/base-url';
import { parseCatalogEntries } from '../catalog/import';
import { baseUrl as gatewayBaseUrl } from '../gateway/providers';
import { addModel, addProvider, readCatalog, removeModel, removeProvider, writeCatalog } from '../store/directory-catalog';
import { ValidationError } from '../store/directory-errors';
import type { ProviderConfig } from '../shared/catalog-types';
import type { Route, RouteCall } from './ports';

function optString(call: RouteCall, name: string): string | undefined {
  const v = call.body[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw new ValidationError(`${name} must be a string`);
  return v;
}

function needString(call: RouteCall, name: string): string {
  const v = optString(call, name);
  if (v === undefined || v === '') throw new ValidationError(`${name} is required`);
  return v;
}

function optBoolean(call: RouteCall, name: string): boolean | undefined {
  const v = call.body[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw new ValidationError(`${name} must be true or false`);
  return v;
}

function optStrings(call: RouteCall, name: string): string[] | undefined {
  const v = call.body[name];
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) throw new ValidationError(`${name} must be an array of strings`);
  return v as string[];
}

/** A whole, non-negative number (a rate or a token count); undefined when absent, null kept. */
function optCount(call: RouteCall, name: string): number | null | undefined {
  const v = call.body[name];
  if (v === undefined) return undefined;
  if (v === null) return null;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) throw new ValidationError(`${name} must be a whole number of at least 0`);
  return v;
}

function needCount(call: RouteCall, name: string): number {
  const v = optCount(call, name);
  if (v === undefined || v === null) throw new ValidationError(`${name} is required`);
  return v;
}

/** What the audit keeps of a provider: everything but the key (which the entry never holds). */
function providerSummary(p: ProviderConfig): Record<string, string | boolean | readonly string[]> {
  return {
    provider: p.name,
    baseUrl: p.baseUrl,
    authHeader: p.keySource === 'none' ? 'none' : p.auth.header,
    requiresMaxTokens: p.requiresMaxTokens,
    streamUsageOnRequest: p.streamUsageOnRequest,
    families: [...p.families],
  };
}

/**
 * A provider as `provider list` shows it: `baseUrl` is the address the stage's gateway calls, so
 * one that takes its address from the environment (local mode's simulator, `baseUrlEnv`) shows
 * the address it has there, and null where the variable is unset and the provider has no address
 * (the simulator on a deployed stage). An entry written before credentials were refused in the
 * URL shows `***@` in their place.
 */
function listedProvider(p: ProviderConfig, env: Readonly<Record<string, string | undefined>>): Omit<ProviderConfig, 'baseUrl'> & { baseUrl: string | null } {
  const address = gatewayBaseUrl(p, env);
  return { ...p, baseUrl: address === undefined ? null : withoutCredentials(address) };
}

/** Every catalog route of the management API. */
export const CATALOG_ROUTES: readonly Route[] = [
  {
    method: 'GET',
    pattern: ['catalog', 'providers'],
    async run({ deps }) {
      return { body: { providers: (await readCatalog(deps.ctx)).providers.map((p) => listedProvider(p, deps.env ?? {})) } };
    },
  },
  {
    method: 'GET',
    pattern: ['catalog', 'models'],
    async run({ deps }) {
      return { body: { models: (await readCatalog(deps.ctx)).models } };
    },
  },
  {
    method: 'POST',
    pattern: ['catalog', 'import'],
    action: 'catalog.import',
    async run(call) {
      const providers = call.body['providers'];
      const models = call.body['models'];
      if (!Array.isArray(providers) || !Array.isArray(models)) throw new ValidationError('providers and models must be arrays');
      const sources = call.body['sources'];
      // File names for the refusal's message only: the entries are what is validated.
      const names =
        typeof sources === 'object' && sources !== null && typeof (sources as Record<string, unknown>)['providers'] === 'string' && typeof (sources as Record<string, unknown>)['models'] === 'string'
          ? { providers: String((sources as Record<string, unknown>)['providers']), models: String((sources as Record<string, unknown>)['models']) }
          : undefined;
      const prune = optBoolean(call, 'prune') ?? false;
      const out = await writeCatalog(call.deps.ctx, parseCatalogEntries(providers, models, names), { prune });
      return {
        body: out,
        workspaceId: null,
        summary: {
          providers: out.providers,
          models: out.models,
          pruned: out.pruned,
          removedProviders: out.removedProviders,
          removedModels: out.removedModels,
          unlistedProviders: [...out.unlisted.providers],
          unlistedModels: [...out.unlisted.models],
        },
      };
    },
  },
  {
    method: 'POST',
    pattern: ['catalog', 'providers'],
    action: 'provider.add',
    async run(call) {
      const displayName = optString(call, 'displayName');
      const auth = optString(call, 'auth');
      const apiKey = optString(call, 'apiKey');
      const requiresMaxTokens = optBoolean(call, 'requiresMaxTokens');
      const streamUsageOnRequest = optBoolean(call, 'streamUsageOnRequest');
      const families = optStrings(call, 'families');
      const provider = await addProvider(call.deps.ctx, {
        name: needString(call, 'name'),
        baseUrl: needString(call, 'baseUrl'),
        ...(displayName === undefined ? {} : { displayName }),
        ...(auth === undefined ? {} : { auth }),
        ...(apiKey === undefined ? {} : { apiKey }),
        ...(requiresMaxTokens === undefined ? {} : { requiresMaxTokens }),
        ...(streamUsageOnRequest === undefined ? {} : { streamUsageOnRequest }),
        ...(families === undefined ? {} : { families }),
      });
      // The key is in the secret store only: never in the answer, the audit, a log or a table.
      return { body: { provider }, status: 201, workspaceId: null, summary: providerSummary(provider) };
    },
  },
  {
    method: 'DELETE',
    pattern: ['catalog', 'providers', ':name'],
    action: 'provider.remove',
    async run(call) {
      const out = await removeProvider(call.deps.ctx, call.params['name'] ?? '');
      return { body: out, workspaceId: null, summary: { ...out } };
    },
  },
  {
    method: 'POST',
    pattern: ['catalog', 'models'],
    action: 'model.add',
    async run(call) {
      const cached = optCount(call, 'cachedInputRateThousandths');
      const context = optCount(call, 'contextWindowTokens');
      const maxOutput = optCount(call, 'maxOutputTokens');
      const displayName = optString(call, 'displayName');
      const author = optString(call, 'author');
      const currencyCode = optString(call, 'currencyCode');
      const families = optStrings(call, 'families');
      const model = await addModel(call.deps.ctx, {
        id: needString(call, 'id'),
        inputRateThousandths: needCount(call, 'inputRateThousandths'),
        outputRateThousandths: needCount(call, 'outputRateThousandths'),
        ...(cached === undefined || cached === null ? {} : { cachedInputRateThousandths: cached }),
        ...(context === undefined ? {} : { contextWindowTokens: context }),
        ...(maxOutput === undefined ? {} : { maxOutputTokens: maxOutput }),
        ...(displayName === undefined ? {} : { displayName }),
        ...(author === undefined ? {} : { author }),
        ...(currencyCode === undefined ? {} : { currencyCode }),
        ...(families === undefined ? {} : { families }),
      });
      return {
        body: { model },
        status: 201,
        workspaceId: null,
        summary: {
          model: model.id,
          inputRateThousandths: model.inputRateThousandths,
          cachedInputRateThousandths: model.cachedInputRateThousandths,
          outputRateThousandths: model.outputRateThousandths,
          currencyCode: model.currencyCode,
          contextWindowTokens: model.contextWindowTokens,
          maxOutputTokens: model.maxOutputTokens,
          families: [...model.endpointFamilies],
        },
      };
    },
  },
  {
    method: 'DELETE',
    pattern: ['catalog', 'models', ':id'],
    action: 'model.remove',
    async run(call) {
      const out = await removeModel(call.deps.ctx, call.params['id'] ?? '');
      return { body: out, workspaceId: null, summary: { ...out } };
    },
  },
];
