/**
 * The cost model's exact numbers (`bench/exact.ts`): decimal prices read exactly, arithmetic in
 * lowest terms, rounding only when shown.
 */
import { Exact, ExactError } from '../../bench/exact';

describe('Exact.of', () => {
  it.each([
    ['0.0000133334', '0.0000133334'],
    ['0.625', '0.625'],
    ['6.25e-7', '0.000000625'],
    ['1e3', '1000'],
    ['-0.5', '-0.5'],
    ['007', '7'],
  ])('reads %s as %s', (text, decimal) => {
    expect(Exact.of(text).toString()).toBe(decimal);
  });

  it.each([
    [0.1, '0.1'],
    [23.37, '23.37'],
    [1e-7, '0.0000001'],
    [42, '42'],
  ])('reads the float %p at its printed value %s', (value, decimal) => {
    expect(Exact.of(value).toString()).toBe(decimal);
  });

  it.each([['abc'], ['1.2.3'], [''], ['0x10']])('refuses %p', (text) => {
    expect(() => Exact.of(text)).toThrow(ExactError);
  });

  it('refuses a float that is not finite', () => {
    expect(() => Exact.of(Number.NaN)).toThrow(ExactError);
    expect(() => Exact.of(Number.POSITIVE_INFINITY)).toThrow(ExactError);
  });
});

describe('arithmetic', () => {
  it('prices 128 MB for 5 s, a million times, at the Arm rate, to the exact cent fraction', () => {
    const gbSeconds = Exact.of(128).div(Exact.of(1024)).mul(Exact.of(5));
    const duration = gbSeconds.mul(Exact.of('0.0000133334')).mul(Exact.of(1_000_000));
    expect(duration.toString()).toBe('8.333375');
    expect(duration.add(Exact.of('0.20')).toString()).toBe('8.533375');
  });

  it('keeps a third a third until it is shown', () => {
    const third = Exact.ONE.div(Exact.of(3));
    expect(third.toDecimal()).toBeUndefined();
    expect(third.mul(Exact.of(3)).toString()).toBe('1');
    expect(third.toFixed(4)).toBe('0.3333');
  });

  it.each([
    ['2.345', 2, '2.35'],
    ['-2.345', 2, '-2.35'],
    ['2.344', 2, '2.34'],
    ['0.004', 2, '0.00'],
    ['-0.004', 2, '0.00'],
    ['9.995', 2, '10.00'],
    ['12.5', 0, '13'],
  ])('rounds %s to %i decimals as %s', (text, digits, shown) => {
    expect(Exact.of(text).toFixed(digits)).toBe(shown);
  });

  it.each([
    ['2.1', '3'],
    ['2', '2'],
    ['-2.5', '-2'],
    ['0.0001', '1'],
  ])('ceil(%s) = %s', (text, up) => {
    expect(Exact.of(text).ceil().toString()).toBe(up);
  });

  it('compares and picks', () => {
    const a = Exact.of('0.1');
    const b = Exact.of('0.10000001');
    expect(a.lt(b)).toBe(true);
    expect(b.le(a)).toBe(false);
    expect(Exact.max(a, b)).toBe(b);
    expect(Exact.min(a, b)).toBe(a);
    expect(Exact.sum([a, a, a]).toString()).toBe('0.3');
  });

  it('refuses to divide by zero', () => {
    expect(() => Exact.ONE.div(Exact.ZERO)).toThrow(ExactError);
    expect(() => Exact.ratio(1n, 0n)).toThrow(ExactError);
  });
});
