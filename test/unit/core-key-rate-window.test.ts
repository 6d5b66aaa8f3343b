/**
 * Where a key's requests of a minute are counted (`keyRateWindow`, lambdas/core/windows.ts): on
 * its limit's window only for minutes that start at or after tracking began; on a removed or
 * re-armed limit's window until its `until`, newest first; else on the minute's counter. And the
 * record a limit change leaves behind agrees with the record before it for every minute a gateway
 * may still hold the old one.
 */
import { keyRateWindow, minuteCeil, windowKeys, type KeyRateRecord } from '../../lambdas/core/windows';

const T = Date.UTC(2026, 10, 22, 12, 0, 20); // 20 s into a minute
const MINUTE = 60_000;
const minuteStart = (ms: number): number => Math.floor(ms / MINUTE) * MINUTE;

describe('keyRateWindow', () => {
  it('counts on the counter without a limit, and on the window of a limit tracked all along', () => {
    expect(keyRateWindow('k', {}, T)).toBeUndefined();
    expect(keyRateWindow('k', { creditLimitMicros: 5, creditWindow: 'daily' }, T)).toBe(windowKeys.key('k', 'daily', T));
  });

  it("counts a limit's window only from the first minute that starts at or after trackFrom", () => {
    const record: KeyRateRecord = { creditLimitMicros: 5, creditWindow: 'monthly', creditTrackFrom: T };
    expect(keyRateWindow('k', record, T + 10_000)).toBeUndefined(); // same minute as trackFrom: the counter
    expect(keyRateWindow('k', record, T - 30_000)).toBeUndefined();
    expect(keyRateWindow('k', record, minuteStart(T) + MINUTE)).toBe(windowKeys.key('k', 'monthly', T + MINUTE, T));
    // A trackFrom on a minute's start counts that very minute.
    expect(keyRateWindow('k', { ...record, creditTrackFrom: minuteStart(T) }, T)).toBe(windowKeys.key('k', 'monthly', T, minuteStart(T)));
  });

  it("counts on a removed limit's window until its until, from its generation on", () => {
    const until = minuteCeil(T + 6_300);
    const record: KeyRateRecord = { creditCountWindows: [{ cadence: 'weekly', generation: T - 10 * MINUTE, until }] };
    expect(keyRateWindow('k', record, T)).toBe(windowKeys.key('k', 'weekly', T, T - 10 * MINUTE));
    expect(keyRateWindow('k', record, until)).toBeUndefined();
    expect(keyRateWindow('k', record, T - 11 * MINUTE)).toBeUndefined();
  });

  it('a new limit counts its own window from its minute; before it, the newest old window that covers the minute', () => {
    const first = T - 30 * MINUTE;
    const second = T - 5 * MINUTE;
    const record: KeyRateRecord = {
      creditLimitMicros: 7,
      creditWindow: 'daily',
      creditTrackFrom: T + MINUTE,
      creditCountWindows: [
        { cadence: 'monthly', generation: second, until: minuteCeil(T + 2 * MINUTE) },
        { cadence: 'weekly', generation: first, until: minuteCeil(T + 3 * MINUTE) },
      ],
    };
    expect(keyRateWindow('k', record, T + 2 * MINUTE)).toBe(windowKeys.key('k', 'daily', T + 2 * MINUTE, T + MINUTE));
    expect(keyRateWindow('k', record, T)).toBe(windowKeys.key('k', 'monthly', T, second));
    // Before the second limit's generation: the first one's window.
    expect(keyRateWindow('k', record, T - 10 * MINUTE)).toBe(windowKeys.key('k', 'weekly', T - 10 * MINUTE, first));
  });

  it('a gateway with the record before a removal and one with the record after count every minute before until on the same item', () => {
    const removedAt = T;
    const before: KeyRateRecord = { creditLimitMicros: 9, creditWindow: 'monthly', creditTrackFrom: T - 20 * MINUTE };
    const until = minuteCeil(removedAt + 5_000 + 1_000);
    const after: KeyRateRecord = { creditCountWindows: [{ cadence: 'monthly', generation: T - 20 * MINUTE, until }] };
    // The old record lives in caches up to removedAt + the cache lifetime, before until.
    for (let at = removedAt - 2 * MINUTE; at < until; at += 7_000) expect(keyRateWindow('k', after, at)).toBe(keyRateWindow('k', before, at));
  });
});
