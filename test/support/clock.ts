/**
 * A fixed test calendar that stays ahead of the real clock.
 *
 * The ledger takes its clock as a parameter, so its tests pin "now" to a known date. DynamoDB
 * Local, though, runs TTL on the real clock: it deletes every item whose `ttl` has passed, in a
 * sweep about every 10 s. A test clock in the past makes a minute's request counter (`ttl` =
 * now + 180 s) expire as it is written, and a sweep in the middle of a race resets the minute: a
 * 200-way race against a rate of 37 then admits 74. So the pinned dates are in a future year with
 * the same calendar as 2026 (same weekdays, not a leap year): every `ttl` a test writes is in the
 * future and no sweep can collect what a test still counts on.
 */

/** The first year after the real one whose calendar is 2026's (1 January a Thursday, 365 days). */
function calendarYear(): number {
  for (let y = new Date().getUTCFullYear() + 1; ; y += 1) {
    const leap = (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
    if (!leap && new Date(Date.UTC(y, 0, 1)).getUTCDay() === 4) return y;
  }
}

/** The tests' year: in the future, with 2026's weekdays (22 November is a Sunday). */
export const TEST_YEAR = calendarYear();

/** `Date.UTC` in {@link TEST_YEAR}: `month` from 0, as `Date.UTC` takes it. */
export function testDate(month: number, day: number, hour = 0, minute = 0, second = 0, ms = 0): number {
  return Date.UTC(TEST_YEAR, month, day, hour, minute, second, ms);
}
