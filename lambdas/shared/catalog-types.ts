/**
 * Provider accounts and catalog models, as kept in `config/*.json` and imported into the
 * catalog table. Providers differ only by these data; no code branches on a provider's name.
 */
import type { EndpointFamily } from './records';

/** How a provider expects its API key. */
export interface ProviderAuth {
  /** Header name, lower case (e.g. `authorization`, `x-api-key`). */
  readonly header: string;
  /** Prefix before the key, e.g. `Bearer ` (empty for a bare key). */
  readonly prefix: string;
}

/** One provider account Sluice serves, speaking the OpenAI wire format. */
export interface ProviderConfig {
  /** The part before the first slash of a pinned model id. */
  readonly name: string;
  readonly displayName: string;
  /** Base URL including the version segment, e.g. `https://api.openai.com/v1`. */
  readonly baseUrl: string;
  readonly auth: ProviderAuth;
  /** The provider's API refuses a request that names no `max_tokens` (SPEC rewrite 2). */
  readonly requiresMaxTokens: boolean;
  /** The provider reports usage on a stream only when sent `stream_options.include_usage`. */
  readonly streamUsageOnRequest: boolean;
  readonly families: readonly EndpointFamily[];
  /**
   * Where the service's own key lives: a Secrets Manager secret name when deployed, or an
   * environment variable in local mode. `none` for a provider that takes no key (the simulator).
   * A provider added at run time (`sluice provider add`) names no variable: its key is in the
   * secret store under `secretName` in every stage (locally, the 0600 secrets file).
   */
  readonly keySource: { readonly secretName: string; readonly env?: string } | 'none';
  /** Base URL from an environment variable instead of `baseUrl` (the local simulator). */
  readonly baseUrlEnv?: string;
}

/** Capability words: `unknown` means nobody has established it, not `no`. */
export type Capability = 'yes' | 'no' | 'unknown';

/** Whether and how a catalogued model is served now. */
export type ModelStatus = 'served' | 'not_served' | 'retired' | 'unreachable';

/** One parameter a model takes, as described in the single-model read. */
export interface ModelParameter {
  readonly name: string;
  readonly type: 'boolean' | 'enum' | 'integer' | 'number' | 'string';
  readonly min_milli: number | null;
  readonly max_milli: number | null;
  readonly default_milli: number | null;
  readonly enum_values: readonly string[] | null;
  readonly sent_by_default: boolean;
  readonly note: string | null;
}

/** One catalog model: a model as served by one provider. */
export interface CatalogModel {
  /** `<provider>/<provider_model_id>`. */
  readonly id: string;
  readonly provider: string;
  readonly providerModelId: string;
  readonly displayName: string;
  readonly author: string;
  /** Epoch seconds. */
  readonly created: number;
  readonly contextWindowTokens: number | null;
  readonly maxOutputTokens: number | null;
  /** Thousandths of a minor unit per million tokens. */
  readonly inputRateThousandths: number | null;
  /** Cached input tokens; equals the input rate when the provider gives no discount. */
  readonly cachedInputRateThousandths: number | null;
  readonly outputRateThousandths: number | null;
  readonly currencyCode: string;
  readonly endpointFamilies: readonly EndpointFamily[];
  readonly capabilities: Readonly<Record<'audio' | 'json_mode' | 'streaming' | 'tools' | 'vision', Capability>>;
  readonly status: ModelStatus;
  /** For a retired model, the replacement the provider named, if it named one. */
  readonly replacement?: string;
  readonly parameters: readonly ModelParameter[];
  /**
   * The tokenizer encoding Sluice counts this model's prompts and replies with when the provider's
   * own counts never arrive (`lambdas/core/token-count.ts`); o200k_base when absent.
   */
  readonly tokenizer?: 'o200k_base' | 'cl100k_base';
}

/** The whole of `config/catalog.json`. */
export interface CatalogFile {
  readonly providers: readonly ProviderConfig[];
  readonly models: readonly CatalogModel[];
}
