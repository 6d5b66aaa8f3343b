/** SPEC Errors rule 4: upstream_rate_limited's Retry-After is the provider's figure held to 1..60, or 5. */
import { retryAfterSeconds } from '../../lambdas/core/upstream-failure';

/** The clock is a parameter of the core function; these cases read it now. */
const retryAfter = (header: string | undefined): number => retryAfterSeconds(header, Date.now());

describe('retryAfter', () => {
  test.each<[string | undefined, number]>([
    [undefined, 5],
    ['', 5],
    ['   ', 5],
    ['soon', 5],
    ['0', 1],
    ['1', 1],
    ['7', 7],
    [' 12 ', 12],
    ['+7', 7],
    ['30', 30],
    ['60', 60],
    ['61', 60],
    ['3600', 60],
    ['1.2', 2],
    ['0.4', 1],
    ['-5', 1],
  ])('%j → %d', (header, seconds) => {
    expect(retryAfter(header)).toBe(seconds);
  });

  test('an HTTP-date: the seconds until then, held to 1..60', () => {
    const inHalfMinute = retryAfter(new Date(Date.now() + 30_000).toUTCString());
    expect(inHalfMinute).toBeGreaterThanOrEqual(29);
    expect(inHalfMinute).toBeLessThanOrEqual(31);
    expect(retryAfter(new Date(Date.now() - 60_000).toUTCString())).toBe(1);
    expect(retryAfter(new Date(Date.now() + 3_600_000).toUTCString())).toBe(60);
  });

  test('always a whole number of seconds within 1..60', () => {
    for (const h of [undefined, '', 'x', '0', '0.001', '59.01', '1e9', '-1', '99999999999999999999', 'Wed, 21 Oct 2015 07:28:00 GMT']) {
      const s = retryAfter(h);
      expect(Number.isInteger(s)).toBe(true);
      expect(s).toBeGreaterThanOrEqual(1);
      expect(s).toBeLessThanOrEqual(60);
    }
  });
});
