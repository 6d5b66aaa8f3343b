/**
 * The shape rules of provider names and pinned model ids, for the catalog and the operator tools.
 * Pure. SPEC's length and characters of a model field have their home in `core/model-id.ts`.
 */
import { MAX_MODEL_ID_LENGTH, MODEL_FIELD_CHARS } from '../core/model-id';
import { InvalidPinnedIdError } from './errors';

/** Provider names: they are the part of a model id before the first slash. */
const PROVIDER_NAME = /^[a-z0-9][a-z0-9._-]*$/;
/** Prefixes the gateway reads as routes, so no provider may be called by them. */
export const RESERVED_PROVIDER_NAMES: readonly string[] = ['profile', 'sluice'];

/** Whether a string is a well-formed model field value (SPEC charset and length). */
export function isModelFieldShaped(value: string): boolean {
  return value.length > 0 && value.length <= MAX_MODEL_ID_LENGTH && MODEL_FIELD_CHARS.test(value);
}

/** Whether a name may be a provider name. */
export function isProviderName(value: string): boolean {
  return PROVIDER_NAME.test(value) && value.length <= 64 && !RESERVED_PROVIDER_NAMES.includes(value);
}

/**
 * Checks a provider-pinned id `<provider>/<model>` (split at the FIRST slash, the rest verbatim)
 * and returns its two parts; throws {@link InvalidPinnedIdError}. Route slugs are not pinned ids.
 */
export function parsePinnedId(value: string, what = 'model id'): { provider: string; model: string } {
  if (!isModelFieldShaped(value)) {
    throw new InvalidPinnedIdError(`${what} ${JSON.stringify(value)} must be 1 to ${MAX_MODEL_ID_LENGTH} characters of letters, digits and . _ : / @ -`);
  }
  const slash = value.indexOf('/');
  if (slash <= 0 || slash === value.length - 1) throw new InvalidPinnedIdError(`${what} ${JSON.stringify(value)} must be pinned as <provider>/<model>`);
  const provider = value.slice(0, slash);
  if (!isProviderName(provider)) throw new InvalidPinnedIdError(`${what} ${JSON.stringify(value)} does not name a provider before its first slash`);
  return { provider, model: value.slice(slash + 1) };
}
