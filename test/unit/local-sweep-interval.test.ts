/** Local mode's sweeper interval is a setting (issue 14, item 8). */
import { DEFAULT_SWEEP_EVERY_MS, SWEEP_EVERY_ENV, sweepEveryMs } from '../../local/sweep-interval';

describe('sweepEveryMs', () => {
  it.each([
    [undefined, DEFAULT_SWEEP_EVERY_MS],
    ['', DEFAULT_SWEEP_EVERY_MS],
    ['1000', 1000],
    ['100', 100],
  ])('%j → %i', (raw, expected) => {
    expect(sweepEveryMs({ [SWEEP_EVERY_ENV]: raw })).toBe(expected);
  });

  it.each(['99', '0', '-5', '1.5', 'soon', '1e3x'])('refuses %j', (raw) => {
    expect(() => sweepEveryMs({ [SWEEP_EVERY_ENV]: raw })).toThrow(SWEEP_EVERY_ENV);
  });
});
