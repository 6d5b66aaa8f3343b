/**
 * Exact rational numbers for the cost model: prices are decimal strings (`"0.0000133334"`), and a
 * price times a million requests must come out as the decimal a person would write, not as a
 * float's nearest neighbour. A value is a fraction of two `bigint`s, kept in lowest terms; it is
 * turned into a float or a rounded decimal only to be shown.
 */

/** Thrown for text that is not a plain decimal, or a division by zero. */
export class ExactError extends Error {
  override readonly name = 'ExactError';
}

const DECIMAL = /^([+-]?)(\d+)(?:\.(\d*))?(?:e([+-]?\d+))?$/i;

function gcd(a: bigint, b: bigint): bigint {
  let x = a < 0n ? -a : a;
  let y = b < 0n ? -b : b;
  while (y !== 0n) [x, y] = [y, x % y];
  return x;
}

/** An exact rational number. */
export class Exact {
  private constructor(
    readonly num: bigint,
    readonly den: bigint,
  ) {}

  /** `num / den` in lowest terms, the sign on the numerator. */
  static ratio(num: bigint, den: bigint): Exact {
    if (den === 0n) throw new ExactError('division by zero');
    const sign = den < 0n ? -1n : 1n;
    const g = gcd(num, den) || 1n;
    return new Exact((sign * num) / g, (sign * den) / g);
  }

  /**
   * A decimal string (`"0.625"`, `"6.25e-7"`), an integer, or a finite float read as the decimal
   * it prints as (`0.1` is one tenth, not the binary fraction nearest it): measured figures arrive
   * as floats and are taken at their printed value.
   */
  static of(value: string | number | bigint): Exact {
    if (typeof value === 'bigint') return new Exact(value, 1n);
    if (typeof value === 'number') {
      if (!Number.isFinite(value)) throw new ExactError(`not a finite number: ${value}`);
      if (Number.isSafeInteger(value)) return new Exact(BigInt(value), 1n);
      return Exact.of(String(value));
    }
    const m = DECIMAL.exec(value.trim());
    if (m === null) throw new ExactError(`not a decimal: ${JSON.stringify(value)}`);
    const [, sign, whole, frac = '', exp = '0'] = m;
    const digits = BigInt(`${whole}${frac}`) * (sign === '-' ? -1n : 1n);
    const scale = Number(exp) - frac.length;
    return scale >= 0 ? Exact.ratio(digits * 10n ** BigInt(scale), 1n) : Exact.ratio(digits, 10n ** BigInt(-scale));
  }

  static readonly ZERO = new Exact(0n, 1n);
  static readonly ONE = new Exact(1n, 1n);

  add(o: Exact): Exact {
    return Exact.ratio(this.num * o.den + o.num * this.den, this.den * o.den);
  }

  sub(o: Exact): Exact {
    return Exact.ratio(this.num * o.den - o.num * this.den, this.den * o.den);
  }

  mul(o: Exact): Exact {
    return Exact.ratio(this.num * o.num, this.den * o.den);
  }

  div(o: Exact): Exact {
    if (o.num === 0n) throw new ExactError('division by zero');
    return Exact.ratio(this.num * o.den, this.den * o.num);
  }

  /** -1, 0 or 1 as this is below, equal to or above `o`. */
  cmp(o: Exact): number {
    const d = this.num * o.den - o.num * this.den;
    return d < 0n ? -1 : d > 0n ? 1 : 0;
  }

  lt(o: Exact): boolean {
    return this.cmp(o) < 0;
  }

  le(o: Exact): boolean {
    return this.cmp(o) <= 0;
  }

  isZero(): boolean {
    return this.num === 0n;
  }

  /** The smallest integer not below this. */
  ceil(): Exact {
    const q = this.num / this.den;
    const up = this.num > 0n && q * this.den !== this.num ? q + 1n : q;
    return new Exact(up, 1n);
  }

  static max(a: Exact, b: Exact): Exact {
    return a.cmp(b) >= 0 ? a : b;
  }

  static min(a: Exact, b: Exact): Exact {
    return a.cmp(b) <= 0 ? a : b;
  }

  static sum(values: readonly Exact[]): Exact {
    return values.reduce((s, v) => s.add(v), Exact.ZERO);
  }

  /** The nearest float: for charts and JSON, never for arithmetic. */
  toNumber(): number {
    return Number(this.toFixed(12));
  }

  /** Rounded half away from zero to `digits` decimals, as a string (`"8.53"`). */
  toFixed(digits: number): string {
    const f = 10n ** BigInt(digits);
    const neg = this.num < 0n;
    const n = neg ? -this.num : this.num;
    const scaled = (n * f * 2n + this.den) / (this.den * 2n);
    const whole = scaled / f;
    const frac = (scaled % f).toString().padStart(digits, '0');
    return `${neg && scaled !== 0n ? '-' : ''}${whole}${digits > 0 ? `.${frac}` : ''}`;
  }

  /** The exact decimal when it has at most `maxDigits` decimals, else undefined (a third has none). */
  toDecimal(maxDigits = 18): string | undefined {
    for (let d = 0; d <= maxDigits; d += 1) {
      if ((this.num * 10n ** BigInt(d)) % this.den === 0n) return this.toFixed(d);
    }
    return undefined;
  }

  toString(): string {
    return this.toDecimal() ?? `${this.num}/${this.den}`;
  }
}
