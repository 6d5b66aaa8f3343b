/**
 * Model prices at the operator's edge. The catalog keeps a rate as thousandths of a minor unit
 * per million tokens (an integer: `40000` is USD 0.40 per million); operators write it in major
 * units per million tokens, as providers publish it (`0.40`, `$0.40`, `USD 0.40`), to five
 * decimal places at most (the catalog's precision), or with `--minor-units` in minor units per
 * million tokens to three places (`40`, `0.125`). Pure and integer-only.
 */
import { formatMoney, LEDGER_CURRENCY } from '../lambdas/core/money-format';

/** Thousandths of a minor unit per major unit. */
const THOUSANDTHS_PER_MAJOR = 100_000;
/** Thousandths per minor unit. */
const THOUSANDTHS_PER_MINOR = 1_000;
/** Micro-units per thousandth of a minor unit, to print a rate with the ledger's formatter. */
const MICROS_PER_THOUSANDTH = 1_000;

/** A price the operator wrote that is not one. */
export class RateFormatError extends Error {
  override readonly name = 'RateFormatError';
}

/**
 * Reads a price per million tokens into the catalog's unit (thousandths of a minor unit per
 * million tokens). Throws {@link RateFormatError} naming what is wrong.
 */
export function parseRate(raw: string, opts: { minorUnits?: boolean } = {}): number {
  const text = raw.trim();
  if (opts.minorUnits === true) {
    const m = /^(\d{1,12})(?:\.(\d{1,3}))?$/.exec(text);
    if (m === null) throw new RateFormatError(`${JSON.stringify(raw)} is not a price in minor units per million tokens (e.g. 40 or 0.125; three decimal places at most)`);
    return checked(Number(m[1]) * THOUSANDTHS_PER_MINOR + Number((m[2] ?? '').padEnd(3, '0')), raw);
  }
  const m = /^(?:\$|USD\s*)?(\d{1,10})(?:\.(\d{1,5}))?$/i.exec(text);
  if (m === null) {
    throw new RateFormatError(
      `${JSON.stringify(raw)} is not a price in ${LEDGER_CURRENCY} per million tokens: write 0.40, $2.50 or ${LEDGER_CURRENCY} 0.075 (five decimal places at most)`,
    );
  }
  return checked(Number(m[1]) * THOUSANDTHS_PER_MAJOR + Number((m[2] ?? '').padEnd(5, '0')), raw);
}

function checked(thousandths: number, raw: string): number {
  if (!Number.isSafeInteger(thousandths * MICROS_PER_THOUSANDTH)) throw new RateFormatError(`${JSON.stringify(raw)} is too large`);
  return thousandths;
}

/** A catalog rate as a person reads it: `USD 0.40` (per million tokens); `-` when there is none. */
export function formatRate(thousandths: number | null): string {
  return thousandths === null ? '-' : formatMoney(thousandths * MICROS_PER_THOUSANDTH);
}

/** A token count option: a whole number of at least 1 (`128000`, `128k`, `1m`). */
export function parseTokens(raw: string, what: string): number {
  const m = /^(\d{1,10})([km]?)$/i.exec(raw.trim());
  const n = m === null ? NaN : Number(m[1]) * (m[2]?.toLowerCase() === 'k' ? 1_000 : m[2]?.toLowerCase() === 'm' ? 1_000_000 : 1);
  if (!Number.isSafeInteger(n) || n < 1) throw new RateFormatError(`${what} must be a whole number of tokens of at least 1 (e.g. 128000 or 128k), not ${JSON.stringify(raw)}`);
  return n;
}
