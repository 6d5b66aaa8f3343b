/**
 * Argument checks and money conversions shared by the admin operations. Pure: no SDK, no I/O.
 */
import { MAX_MODEL_ID_LENGTH } from '../core/model-id';
import { InvalidPinnedIdError } from '../catalog/errors';
import { RESERVED_PROVIDER_NAMES, isModelFieldShaped, isProviderName, parsePinnedId as parsePinned } from '../catalog/ids';
import { ValidationError } from './directory-errors';

/** Micro-units per minor unit: the ledger counts millionths of a cent. */
export const MICROS_PER_MINOR = 1_000_000;

/** SPEC: a model field is at most 128 characters (its home is the runtime's `core/model-id.ts`). */
export const MODEL_ID_MAX = MAX_MODEL_ID_LENGTH;

/** Routing-profile identifiers: lower case, digits, `.`, `_`, `-` (they follow `profile/` in a model field). */
const PROFILE_IDENTIFIER = /^[a-z0-9._-]+$/;
/** Longest identifier whose slug `profile/<identifier>` still fits SPEC's 128 characters. */
export const PROFILE_IDENTIFIER_MAX = MODEL_ID_MAX - 'profile/'.length;

export { RESERVED_PROVIDER_NAMES, isModelFieldShaped, isProviderName };

/**
 * Checks a provider-pinned id `<provider>/<model>` (split at the FIRST slash, the rest verbatim)
 * and returns its two parts; an operator's bad argument is a {@link ValidationError}.
 */
export function parsePinnedId(value: string, what = 'model id'): { provider: string; model: string } {
  try {
    return parsePinned(value, what);
  } catch (err) {
    if (err instanceof InvalidPinnedIdError) throw new ValidationError(err.message);
    throw err;
  }
}

/** Checks a routing-profile identifier (the part after `profile/`). */
export function checkProfileIdentifier(value: string): string {
  if (value.length === 0 || value.length > PROFILE_IDENTIFIER_MAX || !PROFILE_IDENTIFIER.test(value)) {
    throw new ValidationError(
      `profile identifier ${JSON.stringify(value)} must be 1 to ${PROFILE_IDENTIFIER_MAX} characters of a-z 0-9 . _ -`,
    );
  }
  return value;
}

/** Checks an amount of minor units and returns it in micro-units, both exact integers. */
export function minorToMicros(minor: number, what: string, opts: { allowZero?: boolean } = {}): number {
  const min = opts.allowZero === true ? 0 : 1;
  if (!Number.isSafeInteger(minor) || minor < min) {
    throw new ValidationError(`${what} must be ${min === 0 ? 'a non-negative' : 'a positive'} whole number of minor units, got ${String(minor)}`);
  }
  const micros = minor * MICROS_PER_MINOR;
  // Beyond 2^53 a number stops being an exact integer, and money must stay exact.
  if (!Number.isSafeInteger(micros)) throw new ValidationError(`${what} is too large`);
  return micros;
}

/**
 * Micro-units as a decimal string of minor units with all six places, e.g. 1_500_000 → "1.500000".
 * Done on integers so no float ever touches money.
 */
export function formatMicros(micros: number): string {
  const sign = micros < 0 ? '-' : '';
  const abs = Math.abs(micros);
  const whole = Math.floor(abs / MICROS_PER_MINOR);
  const frac = abs - whole * MICROS_PER_MINOR;
  return `${sign}${whole}.${String(frac).padStart(6, '0')}`;
}

/** Parses a whole-number command-line argument strictly (no "1e3", no "12abc", no spaces). */
export function parseWholeNumber(raw: string, what: string): number {
  if (!/^-?\d+$/.test(raw)) throw new ValidationError(`${what} must be a whole number, got ${JSON.stringify(raw)}`);
  const n = Number(raw);
  if (!Number.isSafeInteger(n)) throw new ValidationError(`${what} is too large`);
  return n;
}

/** Parses an ISO 8601 instant (with a zone or `Z`) into epoch milliseconds. */
export function parseInstant(raw: string, what: string): number {
  // A date without a zone would be read in the operator's local zone: refuse the ambiguity.
  if (!/^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2}))?$/.test(raw)) {
    throw new ValidationError(`${what} must be an ISO 8601 date or instant with a zone, e.g. 2026-01-31 or 2026-01-31T12:00:00Z`);
  }
  const ms = Date.parse(raw.length === 10 ? `${raw}T00:00:00Z` : raw);
  if (!Number.isFinite(ms)) throw new ValidationError(`${what} ${JSON.stringify(raw)} is not a real instant`);
  return ms;
}

/** Checks a short free-text label (key names, workspace names). */
export function checkLabel(value: string, what: string, max = 100): string {
  const trimmed = value.trim();
  // Control characters would corrupt the human output of `show` and `list`.
  if (trimmed.length === 0 || trimmed.length > max || /\p{Cc}/u.test(trimmed)) {
    throw new ValidationError(`${what} must be 1 to ${max} printable characters`);
  }
  return trimmed;
}

/** Checks an e-mail address loosely: it is a label for a person, never used to send anything. */
export function checkEmail(value: string): string {
  const trimmed = value.trim();
  if (trimmed.length > 254 || !/^[^\s@]+@[^\s@]+$/.test(trimmed)) {
    throw new ValidationError(`${JSON.stringify(value)} is not an e-mail address`);
  }
  return trimmed;
}
