/** Limit windows on UTC calendars. */
import { execFileSync } from 'node:child_process';
import * as path from 'node:path';
import type { WindowCadence } from '../../lambdas/shared/records';
import { dayId, monthId, secondsToNextMinute, weekId, windowEnd, windowId, windowKeys } from '../../lambdas/core/windows';

const utc = (y: number, mo: number, d: number, h = 0, mi = 0, s = 0, ms = 0): number => Date.UTC(y, mo - 1, d, h, mi, s, ms);

// Instants a millisecond either side of UTC midnight: any local-time getter in a zone other than
// UTC would put one of each pair on the wrong side.
describe('ids across UTC boundaries', () => {
  test.each<[string, number, string, string, string]>([
    ['last ms of the year', utc(2026, 12, 31, 23, 59, 59, 999), '2026-12', '2026-12-31', 'W2026-12-28'],
    ['first ms of the year', utc(2027, 1, 1), '2027-01', '2027-01-01', 'W2026-12-28'],
    ['leap day', utc(2028, 2, 29, 12), '2028-02', '2028-02-29', 'W2028-02-28'],
    ['after the leap day', utc(2028, 3, 1, 0, 0, 0, 1), '2028-03', '2028-03-01', 'W2028-02-28'],
    ['Sunday last ms (still the Monday-started week)', utc(2026, 11, 22, 23, 59, 59, 999), '2026-11', '2026-11-22', 'W2026-11-16'],
    ['Monday first ms (a new week)', utc(2026, 11, 23), '2026-11', '2026-11-23', 'W2026-11-23'],
    ['Monday last ms', utc(2026, 11, 23, 23, 59, 59, 999), '2026-11', '2026-11-23', 'W2026-11-23'],
    ['week spanning a month end', utc(2026, 12, 1, 0, 30), '2026-12', '2026-12-01', 'W2026-11-30'],
    ['epoch', 0, '1970-01', '1970-01-01', 'W1969-12-29'],
  ])('%s', (_l, t, month, day, week) => {
    expect(monthId(t)).toBe(month);
    expect(dayId(t)).toBe(day);
    expect(weekId(t)).toBe(week);
  });

  test.each<[WindowCadence, string]>([
    ['daily', 'D2026-12-31'],
    ['weekly', 'W2026-12-28'],
    ['monthly', 'M2026-12'],
    ['never', 'ALL'],
  ])('windowId %s', (cadence, id) => {
    expect(windowId(cadence, utc(2026, 12, 31, 23, 59, 59, 999))).toBe(id);
  });

  test('ledger keys', () => {
    const t = utc(2026, 11, 22, 23, 59, 59, 999);
    expect(windowKeys.key('k1', 'monthly', t)).toBe('KEYWIN#k1#M2026-11');
    expect(windowKeys.key('k1', 'never', t)).toBe('KEYWIN#k1#ALL');
    expect(windowKeys.member('m1', t)).toBe('MEMBERMONTH#m1#2026-11');
    expect(windowKeys.workspace(t)).toBe('MONTH#2026-11');
    expect(windowKeys.rate('k1', t)).toBe(`RATE#k1#${Math.floor(t / 60_000)}`);
    expect(windowKeys.rate('k1', t + 1)).toBe(`RATE#k1#${Math.floor(t / 60_000) + 1}`);
  });
});

describe('windowEnd', () => {
  test.each<[string, WindowCadence, number, number | undefined]>([
    ['daily, mid-day', 'daily', utc(2026, 11, 22, 12), utc(2026, 11, 23)],
    ['daily, last ms', 'daily', utc(2026, 11, 22, 23, 59, 59, 999), utc(2026, 11, 23)],
    ['daily, first ms', 'daily', utc(2026, 11, 23), utc(2026, 11, 24)],
    ['daily, year end', 'daily', utc(2026, 12, 31, 23), utc(2027, 1, 1)],
    ['weekly, Monday first ms', 'weekly', utc(2026, 11, 23), utc(2026, 11, 30)],
    ['weekly, Sunday last ms', 'weekly', utc(2026, 11, 22, 23, 59, 59, 999), utc(2026, 11, 23)],
    ['weekly, Wednesday across a month end', 'weekly', utc(2026, 12, 30, 10), utc(2027, 1, 4)],
    ['monthly, mid-month', 'monthly', utc(2026, 11, 15), utc(2026, 12, 1)],
    ['monthly, December', 'monthly', utc(2026, 12, 31, 23, 59, 59, 999), utc(2027, 1, 1)],
    ['monthly, leap February', 'monthly', utc(2028, 2, 29, 23), utc(2028, 3, 1)],
    ['monthly, first ms', 'monthly', utc(2027, 1, 1), utc(2027, 2, 1)],
    ['never', 'never', utc(2026, 11, 22), undefined],
  ])('%s', (_l, cadence, t, end) => {
    expect(windowEnd(cadence, t)).toBe(end);
  });

  test('the end of a window is the start of the next id', () => {
    for (const cadence of ['daily', 'weekly', 'monthly'] as const) {
      const t = utc(2026, 12, 31, 23, 59, 59, 999);
      const end = windowEnd(cadence, t) as number;
      expect(windowId(cadence, end - 1)).toBe(windowId(cadence, t));
      expect(windowId(cadence, end)).not.toBe(windowId(cadence, t));
    }
  });
});

describe('secondsToNextMinute', () => {
  test.each([
    [utc(2026, 11, 22, 10, 0, 0, 0), 60],
    [utc(2026, 11, 22, 10, 0, 0, 1), 60],
    [utc(2026, 11, 22, 10, 0, 0, 999), 60],
    [utc(2026, 11, 22, 10, 0, 1, 0), 59],
    [utc(2026, 11, 22, 10, 0, 30, 500), 30],
    [utc(2026, 11, 22, 10, 0, 59, 0), 1],
    [utc(2026, 11, 22, 10, 0, 59, 1), 1],
    [utc(2026, 11, 22, 10, 0, 59, 999), 1],
  ])('%d → %d', (t, s) => {
    expect(secondsToNextMinute(t)).toBe(s);
  });
});

// Setting process.env.TZ inside a jest worker does not reach the clock, so the ids are computed in
// child processes whose zone is set at start: far east, far west, and a half-hour offset.
describe('the ids do not depend on the process time zone', () => {
  const root = path.resolve(__dirname, '../..');
  const instants = [
    utc(2026, 12, 31, 23, 59, 59, 999),
    utc(2027, 1, 1),
    utc(2026, 11, 22, 23, 59, 59, 999),
    utc(2026, 11, 23, 0, 0, 0, 1),
    utc(2028, 2, 29, 0, 30),
  ];
  const compute = (ts: readonly number[]): string[] =>
    ts.flatMap((t) => [
      monthId(t),
      dayId(t),
      weekId(t),
      ...(['daily', 'weekly', 'monthly'] as const).map((c) => String(windowEnd(c, t))),
    ]);
  const expected = compute(instants);

  test.each(['Pacific/Kiritimati', 'Pacific/Pago_Pago', 'Asia/Kolkata', 'America/St_Johns'])('TZ=%s', (tz) => {
    const script =
      `const w = require(${JSON.stringify(path.join(root, 'lambdas/core/windows.ts'))});` +
      `const ts = ${JSON.stringify(instants)};` +
      `if (new Date(${utc(2027, 1, 1)}).getHours() === 0 && new Date(${utc(2027, 1, 1)}).getMinutes() === 0) throw new Error('TZ not applied');` +
      `process.stdout.write(JSON.stringify(ts.flatMap((t) => [w.monthId(t), w.dayId(t), w.weekId(t), ...['daily','weekly','monthly'].map((c) => String(w.windowEnd(c, t)))])));`;
    const out = execFileSync(process.execPath, ['--require', 'tsx/cjs', '-e', script], {
      cwd: root,
      env: { ...process.env, TZ: tz },
      encoding: 'utf8',
    });
    expect(JSON.parse(out)).toEqual(expected);
  });
});
