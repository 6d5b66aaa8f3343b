/**
 * Money as people read it (the console's balances, charges and chart axes): cents, more places
 * only below a cent, rounded half away from zero with integers only; the exact figure stays
 * `formatMoney`'s. Tables, no mocks.
 */
import { axisPlaces, formatMoney, formatMoneyRounded, majorAmount } from '../../lambdas/core/money-format';

describe('formatMoneyRounded', () => {
  it.each<[number, string]>([
    [0, 'USD 0.00'],
    // Cents, rounded half away from zero.
    [100_000_000_000, 'USD 1000.00'],
    [9_999_996_100, 'USD 100.00'], // the USD 99.999961
    [9_999_400_000, 'USD 99.99'], // USD 99.994
    [9_999_500_000, 'USD 100.00'], // USD 99.995: half rounds away from zero
    [1_250_000_000, 'USD 12.50'],
    [1_000_000, 'USD 0.01'], // exactly a cent
    [1_499_999, 'USD 0.01'],
    [1_500_000, 'USD 0.02'],
    [-500_000_000, 'USD -5.00'],
    [-1_500_000, 'USD -0.02'],
    // Below a cent: two significant digits, trailing zeros dropped.
    [570, 'USD 0.0000057'], // the USD 0.0000057
    [560, 'USD 0.0000056'],
    [500, 'USD 0.000005'],
    [5, 'USD 0.00000005'],
    [1, 'USD 0.00000001'],
    [56, 'USD 0.00000056'],
    [123_456, 'USD 0.0012'],
    [125_000, 'USD 0.0013'], // 0.00125 → half away from zero
    [950_000, 'USD 0.0095'],
    [999_999, 'USD 0.01'], // rounds up to a whole cent: said in cents
    [-570, 'USD -0.0000057'],
    // Large amounts stay exact integers (no float on the way).
    [9_007_199_254_740_991, 'USD 90071992.55'],
  ])('%d micro-units → %s', (micros, text) => {
    expect(formatMoneyRounded(micros)).toBe(text);
  });

  it('is exactly formatMoney whenever the amount is whole cents', () => {
    for (const micros of [0, 1_000_000, 1_234_000_000, 100_000_000_000, -7_000_000]) expect(formatMoneyRounded(micros)).toBe(formatMoney(micros));
  });
});

describe('majorAmount', () => {
  it.each<[number, number, string]>([
    [0, 2, '0.00'],
    [560, 6, '0.000006'],
    [560, 8, '0.00000560'],
    [200_000, 3, '0.002'],
    [9_999_996_100, 6, '99.999961'],
    [9_999_996_100, 4, '100.0000'],
    [-400_000, 2, '0.00'], // rounds to zero: no minus sign on nothing
    [-600_000, 2, '-0.01'],
    [9_007_199_254_740_991, 8, '90071992.54740991'],
  ])('%d at %d places → %s', (micros, places, text) => {
    expect(majorAmount(micros, places)).toBe(text);
  });

  it.each<[number, number]>([
    [0.5, 2],
    [1, 1],
    [1, 9],
    [Number.MAX_SAFE_INTEGER + 1, 2],
  ])('refuses %d at %d places', (micros, places) => {
    expect(() => majorAmount(micros, places)).toThrow(RangeError);
  });
});

describe('axisPlaces', () => {
  it.each<[number, number]>([
    [1, 8],
    [20, 7],
    [100, 6],
    [200_000, 3], // a fifth of a cent: 0.002
    [1_000_000, 2], // a cent
    [500_000_000, 2], // five dollars: still two places
    [0, 8],
  ])('a step of %d micro-units → %d places', (step, places) => {
    expect(axisPlaces(step)).toBe(places);
  });

  it('tells every tick of an axis apart', () => {
    for (const step of [1, 2, 5, 10, 50, 100, 2_000, 200_000, 1_000_000, 25_000_000]) {
      const labels = [0, 1, 2, 3, 4, 5].map((i) => majorAmount(i * step, axisPlaces(step)));
      expect(new Set(labels).size).toBe(labels.length);
    }
  });
});
