/** The low-credit notice's decision: once per crossing, re-armed only above the threshold. */
import { decideLowCredit, isThreshold, type LowCreditDecision, type LowCreditInput } from '../../lambdas/core/low-credit';

describe('decideLowCredit', () => {
  test.each<[string, LowCreditInput, LowCreditDecision]>([
    ['falls below, not yet told', { thresholdMicros: 1_000, availableMicros: 999, notified: false }, 'notify'],
    ['still below, already told', { thresholdMicros: 1_000, availableMicros: 10, notified: true }, 'none'],
    ['at zero, not yet told', { thresholdMicros: 1_000, availableMicros: 0, notified: false }, 'notify'],
    ['exactly at the threshold, not told', { thresholdMicros: 1_000, availableMicros: 1_000, notified: false }, 'none'],
    ['exactly at the threshold, told', { thresholdMicros: 1_000, availableMicros: 1_000, notified: true }, 'none'],
    ['rises above after a notice', { thresholdMicros: 1_000, availableMicros: 1_001, notified: true }, 'rearm'],
    ['above, never told', { thresholdMicros: 1_000, availableMicros: 5_000, notified: false }, 'none'],
    ['threshold removed after a notice', { availableMicros: 0, notified: true }, 'rearm'],
    ['no threshold', { availableMicros: 0, notified: false }, 'none'],
    ['threshold zero: available is never below it', { thresholdMicros: 0, availableMicros: 0, notified: false }, 'none'],
    ['fractional threshold is ignored', { thresholdMicros: 10.5, availableMicros: 0, notified: false }, 'none'],
    ['negative threshold is ignored', { thresholdMicros: -5, availableMicros: -10, notified: false }, 'none'],
    ['unusable threshold clears an old notice', { thresholdMicros: Number.NaN, availableMicros: 0, notified: true }, 'rearm'],
  ])('%s', (_label, input, expected) => {
    expect(decideLowCredit(input)).toBe(expected);
  });

  test('a falling balance checked after every settlement notifies once', () => {
    let notified = false;
    let notices = 0;
    for (let available = 2_000; available >= 0; available -= 37) {
      const d = decideLowCredit({ thresholdMicros: 1_000, availableMicros: available, notified });
      if (d === 'notify') {
        notices += 1;
        notified = true;
      }
      if (d === 'rearm') notified = false;
    }
    expect(notices).toBe(1);
  });

  test.each<[unknown, boolean]>([
    [0, true],
    [1_000_000, true],
    [-1, false],
    [1.5, false],
    ['100', false],
    [undefined, false],
    [Number.MAX_SAFE_INTEGER + 1, false],
  ])('isThreshold(%p) is %p', (value, ok) => {
    expect(isThreshold(value)).toBe(ok);
  });
});
