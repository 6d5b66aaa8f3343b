/**
 * Providers and models added at run time (`sluice provider add`, `sluice model add`): the
 * operator's few choices turned into the same `ProviderConfig` and `CatalogModel` the files hold,
 * then validated by the very parsers the import uses, so an added entry can never be one the
 * import would refuse. Pure: no SDK, no I/O; the clock is a parameter.
 */
import type { CatalogModel, ProviderAuth, ProviderConfig } from '../shared/catalog-types';
import type { EndpointFamily } from '../shared/records';
import { CatalogValidationError } from './errors';
import { parseCatalogModel, parseProviderConfig } from './items';

/**
 * How a provider expects its key: `bearer` (`Authorization: Bearer <key>`, OpenAI and most
 * servers), `api-key` (a bare key in an `api-key` header, as Azure OpenAI does), `none` (no key:
 * a self-hosted server on a private network), or `header:<name>` (a bare key in that header).
 */
export type AuthMode = 'bearer' | 'api-key' | 'none' | `header:${string}`;

/** The secret name of a run-time provider's key; `{stage}` is the stage, as in `config/providers.json`. */
export function addedProviderSecretTemplate(name: string): string {
  return `sluice/{stage}/added-providers/${name}`;
}

/** The prefix every run-time provider's secret shares on a stage (deployed grants are scoped to it). */
export function addedProviderSecretPrefix(stage: string): string {
  return `sluice/${stage}/added-providers/`;
}

/** The header and prefix of an auth mode; undefined for `none`. */
export function authOf(mode: string): ProviderAuth | undefined {
  if (mode === 'bearer') return { header: 'authorization', prefix: 'Bearer ' };
  if (mode === 'api-key') return { header: 'api-key', prefix: '' };
  if (mode === 'none') return undefined;
  if (mode.startsWith('header:')) return { header: mode.slice('header:'.length).toLowerCase(), prefix: '' };
  throw new CatalogValidationError(`auth must be bearer, api-key, none or header:<name>, not ${JSON.stringify(mode)}`);
}

/** What an operator says about a provider. */
export interface ProviderInput {
  readonly name: string;
  readonly baseUrl: string;
  readonly displayName?: string;
  /** @default 'bearer' */
  readonly auth?: string;
  /** @default false */
  readonly requiresMaxTokens?: boolean;
  /** @default true: OpenAI's own rule, followed by most compatible servers (vLLM among them) */
  readonly streamUsageOnRequest?: boolean;
  /** @default ['chat_completions'] */
  readonly families?: readonly string[];
}

/**
 * The provider entry of an operator's input, validated as an import validates a file's entry.
 * A provider that takes a key names its secret; a keyless one (`auth: none`) names none.
 * @throws CatalogValidationError naming the field at fault
 */
export function providerFromInput(input: ProviderInput): ProviderConfig {
  const auth = authOf(input.auth ?? 'bearer');
  // The stored entry needs an auth block even when no key is sent; it is never used then.
  const entry: Record<string, unknown> = {
    name: input.name,
    displayName: input.displayName ?? input.name,
    baseUrl: input.baseUrl.replace(/\/+$/, ''),
    auth: auth ?? { header: 'authorization', prefix: 'Bearer ' },
    requiresMaxTokens: input.requiresMaxTokens ?? false,
    streamUsageOnRequest: input.streamUsageOnRequest ?? true,
    families: input.families ?? ['chat_completions'],
    keySource: auth === undefined ? 'none' : { secretName: addedProviderSecretTemplate(input.name) },
  };
  return parseProviderConfig(entry, `provider ${input.name}`);
}

/** What an operator says about a model. Rates in the catalog's unit: thousandths of a minor unit per million tokens. */
export interface ModelInput {
  /** `<provider>/<provider's own model id>`. */
  readonly id: string;
  readonly inputRateThousandths: number;
  readonly outputRateThousandths: number;
  /** @default the input rate (no discount for cached input) */
  readonly cachedInputRateThousandths?: number;
  readonly contextWindowTokens?: number | null;
  readonly maxOutputTokens?: number | null;
  readonly displayName?: string;
  readonly author?: string;
  /** @default every family the provider serves */
  readonly families?: readonly string[];
  readonly currencyCode: string;
}

/**
 * The model entry of an operator's input: served, capabilities `unknown` (nobody has established
 * them), no parameters recorded, `created` now. Validated as an import validates a file's entry;
 * the provider's families and the catalog's currency are checked against `provider`.
 * @throws CatalogValidationError naming the field at fault
 */
export function modelFromInput(input: ModelInput, provider: ProviderConfig, nowMs: number): CatalogModel {
  const slash = input.id.indexOf('/');
  const providerModelId = slash < 0 ? '' : input.id.slice(slash + 1);
  const entry: Record<string, unknown> = {
    id: input.id,
    provider: provider.name,
    providerModelId,
    displayName: input.displayName ?? providerModelId,
    author: input.author ?? provider.displayName,
    created: Math.floor(nowMs / 1000),
    contextWindowTokens: input.contextWindowTokens ?? null,
    maxOutputTokens: input.maxOutputTokens ?? null,
    inputRateThousandths: input.inputRateThousandths,
    cachedInputRateThousandths: input.cachedInputRateThousandths ?? input.inputRateThousandths,
    outputRateThousandths: input.outputRateThousandths,
    currencyCode: input.currencyCode,
    endpointFamilies: input.families ?? provider.families,
    capabilities: { audio: 'unknown', json_mode: 'unknown', streaming: 'unknown', tools: 'unknown', vision: 'unknown' },
    status: 'served',
    parameters: [],
  };
  const model = parseCatalogModel(entry, `model ${input.id}`);
  const missing = model.endpointFamilies.filter((f: EndpointFamily) => !provider.families.includes(f));
  if (missing.length > 0) throw new CatalogValidationError(`model ${input.id}: provider ${provider.name} does not serve ${missing.join(', ')}`);
  return model;
}
