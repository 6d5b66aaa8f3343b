/**
 * The catalog table's item layout and the validation of catalog entries, written by the import
 * (deploy-time and `sluice catalog import`) and read by the gateway, in one place so they cannot
 * drift. Pure: no SDK, no I/O, so the gateway can import it as is.
 *
 * Layout (table `catalog`, partition key `pk` only):
 * - `{ pk: "PROVIDER#<name>", kind: "provider", data: <ProviderConfig> }`
 * - `{ pk: "MODEL#<id>",      kind: "model",    data: <CatalogModel> }`
 *
 * `data` is the validated object exactly as in `config/*.json` (a DynamoDB map; `null` stays
 * `null`, optional fields are absent). The readers validate again on the way out, so a hand-edited
 * or half-written item is refused loudly instead of pricing a request wrongly.
 */
import { TOKEN_ENCODINGS } from '../core/token-count';
import type {
  Capability,
  CatalogModel,
  ModelParameter,
  ModelStatus,
  ProviderAuth,
  ProviderConfig,
} from '../shared/catalog-types';
import type { EndpointFamily } from '../shared/records';
import { baseUrlProblem } from './base-url';
import { CatalogValidationError } from './errors';
import { isModelFieldShaped, isProviderName, parsePinnedId } from './ids';

/** Partition-key prefix of provider items. */
export const PROVIDER_PK_PREFIX = 'PROVIDER#';
/** Partition-key prefix of model items. */
export const MODEL_PK_PREFIX = 'MODEL#';

/** The catalog-table key of a provider. */
export function providerPk(name: string): string {
  return `${PROVIDER_PK_PREFIX}${name}`;
}

/** The catalog-table key of a model (the full pinned id, slashes included). */
export function modelPk(id: string): string {
  return `${MODEL_PK_PREFIX}${id}`;
}

/** A provider item as stored. */
export interface ProviderItem {
  readonly pk: string;
  readonly kind: 'provider';
  readonly data: ProviderConfig;
}

/** A model item as stored. */
export interface ModelItem {
  readonly pk: string;
  readonly kind: 'model';
  readonly data: CatalogModel;
}

/** Builds the stored item of a validated provider. */
export function providerToItem(provider: ProviderConfig): ProviderItem {
  return { pk: providerPk(provider.name), kind: 'provider', data: provider };
}

/** Builds the stored item of a validated model. */
export function modelToItem(model: CatalogModel): ModelItem {
  return { pk: modelPk(model.id), kind: 'model', data: model };
}

/**
 * Reads a provider item back. Throws `CatalogValidationError` when the item is not one this
 * module wrote (wrong key, wrong kind, or `data` that fails validation).
 */
export function catalogItemToProvider(item: Readonly<Record<string, unknown>>): ProviderConfig {
  const where = `catalog item ${String(item['pk'])}`;
  if (item['kind'] !== 'provider' || typeof item['pk'] !== 'string' || !item['pk'].startsWith(PROVIDER_PK_PREFIX)) {
    throw new CatalogValidationError(`${where}: not a provider item`);
  }
  // Stored: valid when written. A base-URL rule tightened since must not make the catalog unreadable.
  const provider = parseProviderConfig(item['data'], where, { stored: true });
  if (providerPk(provider.name) !== item['pk']) throw new CatalogValidationError(`${where}: data.name does not match pk`);
  return provider;
}

/** Reads a model item back; throws `CatalogValidationError` like `catalogItemToProvider`. */
export function catalogItemToModel(item: Readonly<Record<string, unknown>>): CatalogModel {
  const where = `catalog item ${String(item['pk'])}`;
  if (item['kind'] !== 'model' || typeof item['pk'] !== 'string' || !item['pk'].startsWith(MODEL_PK_PREFIX)) {
    throw new CatalogValidationError(`${where}: not a model item`);
  }
  const model = parseCatalogModel(item['data'], where);
  if (modelPk(model.id) !== item['pk']) throw new CatalogValidationError(`${where}: data.id does not match pk`);
  return model;
}

// ---------------------------------------------------------------------------------------------
// Strict validation. Unknown fields are refused too: a misspelt `requiresMaxToken` silently
// ignored would change what the gateway sends upstream.

const FAMILIES: readonly EndpointFamily[] = ['chat_completions', 'responses'];
const STATUSES: readonly ModelStatus[] = ['served', 'not_served', 'retired', 'unreachable'];
const CAPABILITY_WORDS: readonly Capability[] = ['yes', 'no', 'unknown'];
const CAPABILITY_KEYS = ['audio', 'json_mode', 'streaming', 'tools', 'vision'] as const;
const PARAMETER_TYPES: readonly ModelParameter['type'][] = ['boolean', 'enum', 'integer', 'number', 'string'];
const ENV_NAME = /^[A-Z_][A-Z0-9_]*$/;
/** Secrets Manager's own rule for names (`{stage}` is substituted before use). */
const SECRET_NAME = /^[A-Za-z0-9/_+=.@{}-]{1,512}$/;
const HEADER_NAME = /^[a-z0-9-]+$/;
const CURRENCY = /^[A-Z]{3}$/;
/** Epoch seconds before this are implausible and after it are probably milliseconds. */
const CREATED_MAX = 10_000_000_000;

/** Reads typed fields of one JSON object, naming the entry and field in every complaint. */
class Fields {
  private readonly obj: Readonly<Record<string, unknown>>;
  private readonly where: string;

  constructor(value: unknown, where: string, allowed: readonly string[]) {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      throw new CatalogValidationError(`${where}: must be a JSON object`);
    }
    this.obj = value as Readonly<Record<string, unknown>>;
    this.where = where;
    const unknown = Object.keys(this.obj).filter((k) => !allowed.includes(k));
    if (unknown.length > 0) this.fail(unknown[0] ?? '', 'is not a known field');
  }

  fail(field: string, problem: string): never {
    throw new CatalogValidationError(`${this.where}: ${field} ${problem}`);
  }

  has(field: string): boolean {
    return this.obj[field] !== undefined;
  }

  raw(field: string): unknown {
    return this.obj[field];
  }

  string(field: string): string {
    const v = this.obj[field];
    if (typeof v !== 'string' || v.length === 0) this.fail(field, 'must be a non-empty string');
    return v;
  }

  stringOrNull(field: string): string | null {
    const v = this.obj[field];
    if (v === null) return null;
    if (typeof v !== 'string') this.fail(field, 'must be a string or null');
    return v;
  }

  boolean(field: string): boolean {
    const v = this.obj[field];
    if (typeof v !== 'boolean') this.fail(field, 'must be true or false');
    return v;
  }

  int(field: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
    const v = this.obj[field];
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max) {
      this.fail(field, `must be an integer from ${min} to ${max}`);
    }
    return v;
  }

  intOrNull(field: string, min: number): number | null {
    const v = this.obj[field];
    if (v === null) return null;
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min) {
      this.fail(field, `must be an integer of at least ${min}, or null`);
    }
    return v;
  }

  oneOf<T extends string>(field: string, allowed: readonly T[]): T {
    const v = this.obj[field];
    if (typeof v !== 'string' || !(allowed as readonly string[]).includes(v)) {
      this.fail(field, `must be one of ${allowed.join(', ')}`);
    }
    return v as T;
  }

  setOf<T extends string>(field: string, allowed: readonly T[]): readonly T[] {
    const v = this.obj[field];
    if (!Array.isArray(v) || v.length === 0) this.fail(field, `must be a non-empty array of ${allowed.join(', ')}`);
    const out: T[] = [];
    for (const e of v) {
      if (typeof e !== 'string' || !(allowed as readonly string[]).includes(e)) {
        this.fail(field, `holds ${JSON.stringify(e)}, not one of ${allowed.join(', ')}`);
      }
      if (out.includes(e as T)) this.fail(field, `lists ${e} twice`);
      out.push(e as T);
    }
    return out;
  }
}

const PROVIDER_FIELDS = [
  'name',
  'displayName',
  'baseUrl',
  'auth',
  'requiresMaxTokens',
  'streamUsageOnRequest',
  'families',
  'keySource',
  'baseUrlEnv',
] as const;

/** The base-URL rule items stored before `baseUrlProblem` are held to: absolute http(s), no query or fragment. */
function storedBaseUrlProblem(baseUrl: string): string | undefined {
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    return 'must be an absolute URL';
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'must be http or https';
  return url.search !== '' || url.hash !== '' ? 'must carry no query or fragment' : undefined;
}

/**
 * Validates one provider entry strictly; `where` names it in errors. The base URL is held to
 * `baseUrlProblem` (`http(s)://host[:port]/path`, no credential), except for an entry read back
 * from the table (`stored`), which is held to the rule it was written under.
 */
export function parseProviderConfig(value: unknown, where: string, opts: { readonly stored?: boolean } = {}): ProviderConfig {
  const f: Fields = new Fields(value, where, PROVIDER_FIELDS);
  const name = f.string('name');
  if (!isProviderName(name)) {
    f.fail('name', 'must be lower-case letters, digits, . _ - (no slash), and not profile or sluice');
  }
  const baseUrl = f.string('baseUrl');
  const problem = opts.stored === true ? storedBaseUrlProblem(baseUrl) : baseUrlProblem(baseUrl);
  if (problem !== undefined) f.fail('baseUrl', problem);
  // The gateway appends `/chat/completions`; a trailing slash would double it.
  if (baseUrl.endsWith('/')) f.fail('baseUrl', 'must not end with a slash');

  const authFields: Fields = new Fields(f.raw('auth'), `${where} auth`, ['header', 'prefix']);
  const header = authFields.string('header');
  if (!HEADER_NAME.test(header)) authFields.fail('header', 'must be a lower-case header name');
  const prefix = authFields.raw('prefix');
  if (typeof prefix !== 'string') authFields.fail('prefix', 'must be a string (empty for a bare key)');
  const auth: ProviderAuth = { header, prefix };

  const keySourceRaw = f.raw('keySource');
  let keySource: ProviderConfig['keySource'];
  if (keySourceRaw === 'none') {
    keySource = 'none';
  } else {
    const ks: Fields = new Fields(keySourceRaw, `${where} keySource`, ['secretName', 'env']);
    const secretName = ks.string('secretName');
    if (!SECRET_NAME.test(secretName)) ks.fail('secretName', 'must be a Secrets Manager name (letters, digits, / _ + = . @ -)');
    // A provider added at run time keeps its key in the secret store only, so it names no variable.
    if (ks.has('env')) {
      const env = ks.string('env');
      if (!ENV_NAME.test(env)) ks.fail('env', 'must be an environment variable name');
      keySource = { secretName, env };
    } else {
      keySource = { secretName };
    }
  }

  const provider: {
    -readonly [K in keyof ProviderConfig]: ProviderConfig[K];
  } = {
    name,
    displayName: f.string('displayName'),
    baseUrl,
    auth,
    requiresMaxTokens: f.boolean('requiresMaxTokens'),
    streamUsageOnRequest: f.boolean('streamUsageOnRequest'),
    families: f.setOf('families', FAMILIES),
    keySource,
  };
  if (f.has('baseUrlEnv')) {
    const env = f.string('baseUrlEnv');
    if (!ENV_NAME.test(env)) f.fail('baseUrlEnv', 'must be an environment variable name');
    provider.baseUrlEnv = env;
  }
  return provider;
}

const MODEL_FIELDS = [
  'id',
  'provider',
  'providerModelId',
  'displayName',
  'author',
  'created',
  'contextWindowTokens',
  'maxOutputTokens',
  'inputRateThousandths',
  'cachedInputRateThousandths',
  'outputRateThousandths',
  'currencyCode',
  'endpointFamilies',
  'capabilities',
  'status',
  'replacement',
  'parameters',
  'tokenizer',
] as const;

const PARAMETER_FIELDS = [
  'name',
  'type',
  'min_milli',
  'max_milli',
  'default_milli',
  'enum_values',
  'sent_by_default',
  'note',
] as const;

function parseParameter(value: unknown, where: string): ModelParameter {
  const f: Fields = new Fields(value, where, PARAMETER_FIELDS);
  // Every field is spelled out, null where nothing is recorded, so an omission is never a guess.
  for (const field of PARAMETER_FIELDS) if (f.raw(field) === undefined) f.fail(field, 'is missing (use null for none)');
  const type = f.oneOf('type', PARAMETER_TYPES);
  const milli = (field: string): number | null => {
    const v = f.raw(field);
    if (v === null) return null;
    if (typeof v !== 'number' || !Number.isSafeInteger(v)) f.fail(field, 'must be an integer (thousandths) or null');
    return v;
  };
  const min = milli('min_milli');
  const max = milli('max_milli');
  const dflt = milli('default_milli');
  if (min !== null && max !== null && min > max) f.fail('min_milli', 'is above max_milli');
  if (dflt !== null && ((min !== null && dflt < min) || (max !== null && dflt > max))) f.fail('default_milli', 'is outside min_milli..max_milli');
  const enumRaw = f.raw('enum_values');
  let enumValues: readonly string[] | null = null;
  if (type === 'enum') {
    if (!Array.isArray(enumRaw) || enumRaw.length === 0 || !enumRaw.every((e) => typeof e === 'string' && e.length > 0)) {
      f.fail('enum_values', 'must be a non-empty array of strings for an enum');
    }
    if (new Set(enumRaw).size !== enumRaw.length) f.fail('enum_values', 'lists a value twice');
    enumValues = enumRaw as string[];
  } else if (enumRaw !== null) {
    f.fail('enum_values', 'must be null unless type is enum');
  }
  return {
    name: f.string('name'),
    type,
    min_milli: min,
    max_milli: max,
    default_milli: dflt,
    enum_values: enumValues,
    sent_by_default: f.boolean('sent_by_default'),
    note: f.stringOrNull('note'),
  };
}

/** Validates one model entry strictly (on its own; `checkCatalog` cross-checks the set). */
export function parseCatalogModel(value: unknown, where: string): CatalogModel {
  const f: Fields = new Fields(value, where, MODEL_FIELDS);
  const id = f.string('id');
  let pinned: { provider: string; model: string };
  try {
    pinned = parsePinnedId(id);
  } catch (e) {
    f.fail('id', e instanceof Error ? `is invalid: ${e.message}` : 'is invalid');
  }
  const provider = f.string('provider');
  const providerModelId = f.string('providerModelId');
  if (pinned.provider !== provider || pinned.model !== providerModelId) {
    f.fail('id', `must be exactly <provider>/<providerModelId> (${provider}/${providerModelId})`);
  }

  const capsFields: Fields = new Fields(f.raw('capabilities'), `${where} capabilities`, CAPABILITY_KEYS);
  const capabilities = {
    audio: capsFields.oneOf('audio', CAPABILITY_WORDS),
    json_mode: capsFields.oneOf('json_mode', CAPABILITY_WORDS),
    streaming: capsFields.oneOf('streaming', CAPABILITY_WORDS),
    tools: capsFields.oneOf('tools', CAPABILITY_WORDS),
    vision: capsFields.oneOf('vision', CAPABILITY_WORDS),
  };

  const input = f.intOrNull('inputRateThousandths', 0);
  const cached = f.intOrNull('cachedInputRateThousandths', 0);
  const output = f.intOrNull('outputRateThousandths', 0);
  // Pricing is all or nothing: a half-priced model would charge some kinds of token at zero.
  if ((input === null) !== (output === null) || (input === null) !== (cached === null)) {
    f.fail('inputRateThousandths', 'cachedInputRateThousandths and outputRateThousandths must be all integers or all null');
  }
  if (input !== null && cached !== null && cached > input) {
    f.fail('cachedInputRateThousandths', 'is above inputRateThousandths (a cache read never costs more; use the input rate when there is no discount)');
  }

  const status = f.oneOf('status', STATUSES);
  let replacement: string | undefined;
  if (f.has('replacement')) {
    if (status !== 'retired') f.fail('replacement', 'is only for a retired model');
    replacement = f.string('replacement');
    if (!isModelFieldShaped(replacement) || !replacement.includes('/')) f.fail('replacement', 'must be a pinned model id');
    if (replacement === id) f.fail('replacement', 'names the model itself');
  }

  const paramsRaw = f.raw('parameters');
  if (!Array.isArray(paramsRaw)) f.fail('parameters', 'must be an array (empty when none is recorded)');
  const parameters = paramsRaw.map((p, i) => parseParameter(p, `${where} parameters[${i}]`));
  const names = new Set<string>();
  for (const p of parameters) {
    if (names.has(p.name)) f.fail('parameters', `lists ${p.name} twice`);
    names.add(p.name);
  }

  const model: { -readonly [K in keyof CatalogModel]: CatalogModel[K] } = {
    id,
    provider,
    providerModelId,
    displayName: f.string('displayName'),
    author: f.string('author'),
    created: f.int('created', 1, CREATED_MAX),
    contextWindowTokens: f.intOrNull('contextWindowTokens', 1),
    maxOutputTokens: f.intOrNull('maxOutputTokens', 1),
    inputRateThousandths: input,
    cachedInputRateThousandths: cached,
    outputRateThousandths: output,
    currencyCode: f.string('currencyCode'),
    endpointFamilies: f.setOf('endpointFamilies', FAMILIES),
    capabilities,
    status,
    parameters,
  };
  if (!CURRENCY.test(model.currencyCode)) f.fail('currencyCode', 'must be a three-letter ISO 4217 code');
  if (model.contextWindowTokens !== null && model.maxOutputTokens !== null && model.maxOutputTokens > model.contextWindowTokens) {
    f.fail('maxOutputTokens', 'is above contextWindowTokens');
  }
  if (replacement !== undefined) model.replacement = replacement;
  if (f.has('tokenizer')) model.tokenizer = f.oneOf('tokenizer', TOKEN_ENCODINGS);
  return model;
}

/**
 * Cross-checks a whole catalog: unique provider names and model ids, every model's provider
 * present and offering the model's endpoint families, and a replacement that is catalogued.
 */
export function checkCatalog(
  providers: readonly ProviderConfig[],
  models: readonly CatalogModel[],
  where: { providers: string; models: string },
): void {
  const byName = new Map<string, ProviderConfig>();
  providers.forEach((p, i) => {
    if (byName.has(p.name)) throw new CatalogValidationError(`${where.providers} entry ${i} (${p.name}): name is listed twice`);
    byName.set(p.name, p);
  });
  const ids = new Set<string>();
  models.forEach((m, i) => {
    const at = `${where.models} entry ${i} (${m.id})`;
    if (ids.has(m.id)) throw new CatalogValidationError(`${at}: id is listed twice`);
    ids.add(m.id);
    const p = byName.get(m.provider);
    if (p === undefined) throw new CatalogValidationError(`${at}: provider ${m.provider} is not in ${where.providers}`);
    const missing = m.endpointFamilies.filter((fam) => !p.families.includes(fam));
    if (missing.length > 0) throw new CatalogValidationError(`${at}: provider ${p.name} does not serve ${missing.join(', ')}`);
    if (m.currencyCode !== models[0]?.currencyCode) {
      // One balance per workspace in one currency: mixed currencies cannot be charged to it.
      throw new CatalogValidationError(`${at}: currencyCode ${m.currencyCode} differs from the catalog's ${models[0]?.currencyCode ?? ''}`);
    }
  });
  models.forEach((m, i) => {
    if (m.replacement !== undefined && !ids.has(m.replacement)) {
      throw new CatalogValidationError(`${where.models} entry ${i} (${m.id}): replacement ${m.replacement} is not in the catalog`);
    }
  });
}
