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

/** One minor unit (a cent) in micro-units: amounts below it are shown with more places. */
const ONE_MINOR = MICROS_PER_MINOR;

/** 10 to the power `n` (0 to 8), as an exact integer. */
function pow10(n: number): number {
  let out = 1;
  for (let i = 0; i < n; i++) out *= 10;
  return out;
}

/**
 * Micro-units as major units with exactly `places` decimals (2 to 8), rounded half away from
 * zero, without the currency: `majorAmount(9_999_996_100, 2)` is `100.00`. Integer arithmetic
 * only (`%` and exact division), so no amount is ever a float.
 */
export function majorAmount(micros: number, places: number): string {
  if (!Number.isSafeInteger(micros)) throw new RangeError(`${micros} is not a whole number of micro-units`);
  if (!Number.isInteger(places) || places < 2 || places > MAX_PLACES) throw new RangeError(`places must be 2 to ${MAX_PLACES}, got ${places}`);
  const abs = Math.abs(micros);
  const unit = pow10(MAX_PLACES - places);
  const rest = abs % unit;
  // Half away from zero: a remainder of half a unit or more rounds up.
  const units = (abs - rest) / unit + (rest * 2 >= unit ? 1 : 0);
  const scale = pow10(places);
  const frac = units % scale;
  const whole = (units - frac) / scale;
  const sign = micros < 0 && units !== 0 ? '-' : '';
  return `${sign}${whole}.${String(frac).padStart(places, '0')}`;
}

/**
 * An amount as people read it: cents (`USD 99.999961` shows as `USD 100.00`), and more places
 * only for an amount below a cent, to two significant digits (`USD 0.0000057`). Rounded half
 * away from zero; {@link formatMoney} gives the exact figure, which the console keeps one hover
 * or click away.
 */
export function formatMoneyRounded(micros: number): string {
  const abs = Math.abs(micros);
  if (abs === 0 || abs >= ONE_MINOR) return `${LEDGER_CURRENCY} ${majorAmount(micros, 2)}`;
  // The first significant digit of a sub-cent amount sits at decimal place 8 - (digits - 1);
  // two significant digits need one place more (the eighth place is the last there is).
  const digits = String(abs).length;
  const places = Math.min(MAX_PLACES, MAX_PLACES - digits + 2);
  const rounded = majorAmount(micros, places);
  // Rounding 0.0099999 up reaches a whole cent: say it in cents.
  const text = /^-?0\.01/.test(rounded) ? majorAmount(micros, 2) : rounded.replace(/(\.\d\d\d*?)0+$/, '$1');
  return `${LEDGER_CURRENCY} ${text}`;
}

/**
 * Decimal places for the labels of an axis whose ticks are whole multiples of `stepMicros`:
 * enough to tell every tick apart, two at least (`0.002` for a step of a fifth of a cent).
 */
export function axisPlaces(stepMicros: number): number {
  if (!Number.isSafeInteger(stepMicros) || stepMicros < 1) return MAX_PLACES;
  let zeros = 0;
  let step = stepMicros;
  while (step % 10 === 0 && zeros < MAX_PLACES) {
    step /= 10;
    zeros++;
  }
  return Math.max(2, MAX_PLACES - zeros);
}
