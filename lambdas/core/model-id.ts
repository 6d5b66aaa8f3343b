/**
 * The `model` field: SPEC's length and character rules and its three forms. Pure: resolution
 * against the catalog and the workspace's profiles happens elsewhere.
 */
import { SluiceError } from './errors';

export const MAX_MODEL_ID_LENGTH = 128;
/** SPEC's characters of a model field. */
export const MODEL_FIELD_CHARS = /^[A-Za-z0-9._:/@-]+$/;

/** The fixed id naming the workspace's default routing profile. */
export const AUTO_MODEL_ID = 'sluice/auto';
const PROFILE_PREFIX = 'profile/';

export type ModelRef =
  | { readonly kind: 'pinned'; readonly id: string; readonly provider: string; readonly providerModelId: string }
  | { readonly kind: 'profile'; readonly id: string; readonly identifier: string }
  | { readonly kind: 'auto'; readonly id: string };

/**
 * Parses the body's `model` value. Missing → 400 with param `model` and a null code; not a string,
 * too long or outside the character set → 400 `invalid_model_id`; no slash → `model_id_not_pinned`.
 */
export function parseModelField(value: unknown): ModelRef {
  if (value === undefined || value === null || value === '') {
    throw new SluiceError('model_missing', 'You must provide a model parameter.');
  }
  if (typeof value !== 'string') {
    throw new SluiceError('model_invalid', 'The model parameter must be a string.');
  }
  if (value.length > MAX_MODEL_ID_LENGTH) {
    throw new SluiceError('model_invalid', `The model id is longer than ${MAX_MODEL_ID_LENGTH} characters.`);
  }
  if (!MODEL_FIELD_CHARS.test(value)) {
    throw new SluiceError('model_invalid', 'The model id may hold only letters, digits and the characters . _ : / @ -');
  }
  if (value === AUTO_MODEL_ID) return { kind: 'auto', id: value };
  const slash = value.indexOf('/');
  // A leading slash names no provider either: `/gpt-4.1-mini` is as unpinned as `gpt-4.1-mini`.
  if (slash <= 0) {
    throw new SluiceError(
      'model_id_not_pinned',
      `The model id '${value}' names no provider. Send '<provider>/${value.replace(/^\//, '')}' (for example 'openai/${value.replace(/^\//, '')}') or a 'profile/<name>' slug.`,
    );
  }
  if (value.startsWith(PROFILE_PREFIX)) {
    return { kind: 'profile', id: value, identifier: value.slice(PROFILE_PREFIX.length) };
  }
  // Split once, at the first slash: everything after is the provider's own id, slashes included.
  return { kind: 'pinned', id: value, provider: value.slice(0, slash), providerModelId: value.slice(slash + 1) };
}
