/**
 * Money in people's units at the operator's edges: amounts are read and shown in major units
 * with the currency (`USD 20.50`), while the ledger keeps integer micro-units (millionths of a
 * minor unit). Pure and integer-only: no floating point touches an amount.
 */

/** The ledger's currency; every catalog rate is in it. */
export const LEDGER_CURRENCY = 'USD';
/** Minor units per major unit (cents per dollar). */
export const MINOR_PER_MAJOR = 100;
/** Micro-units per minor unit. */
export const MICROS_PER_MINOR = 1_000_000;
const MICROS_PER_MAJOR = MINOR_PER_MAJOR * MICROS_PER_MINOR;
/** Decimal places of a major amount down to the micro-unit. */
const MAX_PLACES = 8;

/** An amount the operator wrote that is not one. */
export class AmountFormatError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AmountFormatError';
  }
}

/**
 * Micro-units as major units with the currency: `USD 20.50`, two places at least, more only
 * when the amount has them (`USD 0.00012345`).
 */
export function formatMoney(micros: number): string {
  const sign = micros < 0 ? '-' : '';
  const abs = Math.abs(micros);
  const whole = Math.floor(abs / MICROS_PER_MAJOR);
  let frac = String(abs - whole * MICROS_PER_MAJOR).padStart(MAX_PLACES, '0');
  while (frac.length > 2 && frac.endsWith('0')) frac = frac.slice(0, -1);
  return `${LEDGER_CURRENCY} ${sign}${whole}.${frac}`;
}

/**
 * Reads an amount in major units into whole minor units: `20.50`, `20`, `$20`, `USD 20.50`,
 * `-5` or `+5` when `signed`. At most two decimal places (a minor unit is the smallest amount an
 * operator sets). With `minorUnits`, the text is a whole number of minor units instead.
 */
export function parseAmount(raw: string, opts: { minorUnits?: boolean; signed?: boolean } = {}): number {
  const text = raw.trim();
  if (opts.minorUnits === true) {
    if (!(opts.signed === true ? /^-?\d+$/ : /^\d+$/).test(text)) {
      throw new AmountFormatError(`${JSON.stringify(raw)} is not a whole number of minor units`);
    }
    return checked(Number(text), raw);
  }
  const m = /^([-+])?\s*(?:\$|USD\s*)?([-+])?(\d{1,15})(?:\.(\d{1,2}))?$/i.exec(text);
  if (m === null) {
    throw new AmountFormatError(`${JSON.stringify(raw)} is not an amount in ${LEDGER_CURRENCY}: write 20.50, $20 or ${LEDGER_CURRENCY} 20.50 (two decimal places at most)`);
  }
  if (m[1] !== undefined && m[2] !== undefined) throw new AmountFormatError(`${JSON.stringify(raw)} has two signs`);
  const negative = m[1] === '-' || m[2] === '-';
  if (negative && opts.signed !== true) throw new AmountFormatError(`${JSON.stringify(raw)}: the amount cannot be negative`);
  const minor = Number(m[3]) * MINOR_PER_MAJOR + Number((m[4] ?? '').padEnd(2, '0'));
  return checked(negative ? -minor : minor, raw);
}

function checked(minor: number, raw: string): number {
  if (!Number.isSafeInteger(minor * MICROS_PER_MINOR)) throw new AmountFormatError(`${JSON.stringify(raw)} is too large`);
  return minor;
}
