/**
 * Everything that differs between providers, driven by their ProviderConfig data: where to send,
 * how to present the key, and the body changes a provider needs. Generic code never branches on
 * a provider's name.
 */
import { setTopLevel } from '../core/json-splice';
import type { CatalogModel, ProviderConfig } from '../shared/catalog-types';
import type { SecretSource } from './ports';
import type { EndpointFamily } from '../shared/records';
import { FAMILIES } from './routes';

interface ProviderDeps {
  readonly secrets: SecretSource;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly config: { readonly stage: string };
}

/** Secret name of the service's own key for a provider on a stage. */
export function serviceSecretName(provider: ProviderConfig, stage: string): string | undefined {
  return provider.keySource === 'none' ? undefined : provider.keySource.secretName.replace('{stage}', stage);
}

/** The service's own key for a provider: `null` when the provider takes none, undefined when missing. */
export async function serviceKey(provider: ProviderConfig, deps: ProviderDeps): Promise<string | null | undefined> {
  const name = serviceSecretName(provider, deps.config.stage);
  if (name === undefined) return null;
  return deps.secrets.get(name);
}

/** Whether Sluice can call a provider on its own key. */
export async function serviceKeyAvailable(provider: ProviderConfig, deps: ProviderDeps): Promise<boolean> {
  if (provider.keySource === 'none') return baseUrl(provider, deps.env) !== undefined;
  try {
    return (await serviceKey(provider, deps)) !== undefined;
  } catch {
    return false;
  }
}

/** The provider's base URL (an environment variable wins where the provider names one). */
export function baseUrl(provider: ProviderConfig, env: Readonly<Record<string, string | undefined>>): string | undefined {
  const fromEnv = provider.baseUrlEnv === undefined ? undefined : env[provider.baseUrlEnv];
  if (provider.baseUrlEnv !== undefined && provider.keySource === 'none') return fromEnv || undefined;
  return fromEnv || provider.baseUrl;
}

/** The endpoint URL for a family. */
export function endpointUrl(base: string, family: EndpointFamily): string {
  return `${base.replace(/\/+$/, '')}${FAMILIES[family].upstreamPath}`;
}

/** Headers sent upstream: the provider's auth and the content type, nothing from the client. */
export function upstreamHeaders(provider: ProviderConfig, key: string | null, length: number): Record<string, string> {
  const headers: Record<string, string> = { 'content-type': 'application/json', 'content-length': String(length) };
  if (key !== null) headers[provider.auth.header] = `${provider.auth.prefix}${key}`;
  return headers;
}

/** The body as it goes to one provider, and whether Sluice asked for stream usage itself. */
export interface UpstreamBody {
  readonly text: string;
  readonly injectedUsage: boolean;
}

/**
 * Builds the body for one attempt by splicing the client's text: `model` becomes the provider's
 * own id; a provider that refuses a request without `max_tokens` gets the model's maximum (SPEC
 * rewrite 2); a stream to a provider that reports usage only when asked gets
 * `stream_options.include_usage` (DESIGN decision 4). Every other byte is the client's.
 */
export function buildUpstreamBody(
  text: string,
  parsed: Readonly<Record<string, unknown>>,
  family: EndpointFamily,
  model: CatalogModel,
  provider: ProviderConfig,
): UpstreamBody {
  const rules = FAMILIES[family];
  let out = setTopLevel(text, 'model', JSON.stringify(model.providerModelId));
  if (
    rules.addsMaxTokens &&
    provider.requiresMaxTokens &&
    !('max_tokens' in parsed) &&
    !('max_completion_tokens' in parsed) &&
    model.maxOutputTokens !== null
  ) {
    out = setTopLevel(out, 'max_tokens', String(model.maxOutputTokens));
  }
  let injectedUsage = false;
  if (rules.asksStreamUsage && parsed.stream === true && provider.streamUsageOnRequest) {
    const options = parsed.stream_options;
    const asked = options !== null && typeof options === 'object' && (options as Record<string, unknown>).include_usage === true;
    if (!asked) {
      const merged = options !== null && typeof options === 'object' && !Array.isArray(options) ? { ...options, include_usage: true } : { include_usage: true };
      out = setTopLevel(out, 'stream_options', JSON.stringify(merged));
      injectedUsage = true;
    }
  }
  return { text: out, injectedUsage };
}
