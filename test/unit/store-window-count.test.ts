/**
 * The minute-tagged request count a key window item would carry (lambdas/store/items.ts,
 * `addMinuteCount`): how a slot's value is read back and when a refused write's value is an
 * earlier minute's (overwritten) rather than a later one's (never).
 */
import { COUNT_SLOTS, COUNT_SPAN, addMinuteCount, closesMinute, countSlotName, givenSlotName, minuteRequests, minuteShareRebalance, minuteShareView, staleCount } from '../../lambdas/store/items';
import { UpdateBuilder } from '../../lambdas/store/expr';

const MINUTE = 29_890_000;

describe('the count slots of a key window item', () => {
  it('names a minute by its slot, five slots round', () => {
    expect(countSlotName(MINUTE)).toBe(`q${MINUTE % COUNT_SLOTS}`);
    expect(countSlotName(MINUTE + COUNT_SLOTS)).toBe(countSlotName(MINUTE));
    expect(countSlotName(MINUTE + 1)).not.toBe(countSlotName(MINUTE));
  });

  it("reads a slot's requests only when it holds that minute", () => {
    const slot = countSlotName(MINUTE);
    expect(minuteRequests({ [slot]: MINUTE * COUNT_SPAN + 36 }, MINUTE)).toBe(36);
    expect(minuteRequests({ [slot]: (MINUTE - COUNT_SLOTS) * COUNT_SPAN + 36 }, MINUTE)).toBe(0);
    expect(minuteRequests({}, MINUTE)).toBe(0);
    expect(minuteRequests(undefined, MINUTE)).toBe(0);
  });

  it('calls a value stale only when it is an earlier minute', () => {
    const slot = countSlotName(MINUTE);
    const earlier = (MINUTE - COUNT_SLOTS) * COUNT_SPAN + 5;
    expect(staleCount({ [slot]: earlier }, MINUTE)).toBe(earlier);
    expect(staleCount({ [slot]: MINUTE * COUNT_SPAN + 37 }, MINUTE)).toBeUndefined();
    expect(staleCount({ [slot]: (MINUTE + COUNT_SLOTS) * COUNT_SPAN + 1 }, MINUTE)).toBeUndefined();
    expect(staleCount({}, MINUTE)).toBeUndefined();
  });

  it("writes the minute's slot under the rate and removes every other slot but the minutes before and after", () => {
    const u = new UpdateBuilder();
    addMinuteCount(u, { minute: MINUTE, rate: 37 });
    const built = u.build();
    expect(Object.values(built.ExpressionAttributeNames ?? {})).toEqual([countSlotName(MINUTE)]);
    const removed = (built.UpdateExpression.split('REMOVE ')[1] ?? '').split(', ');
    expect(removed).toHaveLength(COUNT_SLOTS - 3);
    expect(removed).not.toEqual(expect.arrayContaining([countSlotName(MINUTE - 1)]));
    expect(removed).not.toEqual(expect.arrayContaining([countSlotName(MINUTE + 1)]));
    expect(removed).toEqual(expect.arrayContaining([countSlotName(MINUTE + 2), countSlotName(MINUTE - 2)]));
    expect(removed.some((name) => name === countSlotName(MINUTE))).toBe(false);
    expect(givenSlotName(MINUTE)).toBe(`g${MINUTE % COUNT_SLOTS}`);
    expect(Object.values(built.ExpressionAttributeValues ?? {})).toEqual(expect.arrayContaining([MINUTE * COUNT_SPAN, MINUTE * COUNT_SPAN + 36, 1]));
    expect(built.ConditionExpression).toContain('BETWEEN');
  });

  it('starts the minute over on an earlier minute\'s slot in its reset form', () => {
    const u = new UpdateBuilder();
    addMinuteCount(u, { minute: MINUTE, rate: 37, reset: true });
    const built = u.build();
    expect(Object.values(built.ExpressionAttributeValues ?? {})).toEqual([MINUTE * COUNT_SPAN, MINUTE * COUNT_SPAN + 1]);
    expect(built.ConditionExpression).toContain('<');
    expect(built.ConditionExpression).not.toContain('BETWEEN');
  });

  it('keeps every value below 2^53 for a century of minutes and the largest count', () => {
    const minute = Math.floor(Date.UTC(2126, 0, 1) / 60_000);
    expect(minute * COUNT_SPAN + COUNT_SPAN - 1).toBeLessThan(Number.MAX_SAFE_INTEGER);
  });
});

describe("key slice 0's lending on its window item's minute slots", () => {
  const floor = MINUTE * COUNT_SPAN;
  const q = countSlotName(MINUTE);
  const g = givenSlotName(MINUTE);

  it('reads a share of the minute as the counter would (used includes what it lent)', () => {
    expect(minuteShareView({ [q]: floor + 12, [g]: floor + 5 }, MINUTE, 20)).toMatchObject({ slice: 0, used: 12, given: 5 });
    expect(minuteShareView({ [q]: floor - COUNT_SLOTS * COUNT_SPAN + 12, [g]: floor - COUNT_SLOTS * COUNT_SPAN + 5 }, MINUTE, 20)).toMatchObject({ used: 0, given: 0 });
  });

  it('lends within the rate by adding to both slots of this minute', () => {
    const built = minuteShareRebalance({ slice: 0, delta: 4 }, { [q]: floor + 10, [g]: floor + 1 }, MINUTE, 37);
    expect(built?.UpdateExpression).toMatch(/^ADD /);
    expect(Object.values(built?.ExpressionAttributeValues ?? {})).toEqual(expect.arrayContaining([4, floor + 33]));
  });

  it('starts a minute whose slots hold an earlier minute with the loan, on exactly what was read', () => {
    const old = floor - COUNT_SLOTS * COUNT_SPAN + 7;
    const built = minuteShareRebalance({ slice: 0, delta: 4 }, { [q]: old }, MINUTE, 37);
    expect(built?.ConditionExpression).toContain('attribute_not_exists');
    expect(Object.values(built?.ExpressionAttributeValues ?? {})).toEqual(expect.arrayContaining([old, floor + 4]));
    // Nothing lent in a minute cannot be returned.
    expect(minuteShareRebalance({ slice: 0, delta: -1 }, { [q]: old }, MINUTE, 37)).toBeUndefined();
  });

  it('retags both slots on exactly what was read', () => {
    const built = minuteShareRebalance({ slice: 0, delta: 0, givenSet: 3 }, { [q]: floor + 10, [g]: floor + 6 }, MINUTE, 37);
    expect(Object.values(built?.ExpressionAttributeValues ?? {})).toEqual(expect.arrayContaining([floor + 10, floor + 6, floor + 7, floor + 3]));
  });

  it('closes a minute to an arming mark up to the last minute it names', () => {
    expect(closesMinute({ closedForMember: MINUTE + 1 }, 'closedForMember', MINUTE)).toBe(true);
    expect(closesMinute({ closedForMember: MINUTE + 1 }, 'closedForMember', MINUTE + 2)).toBe(false);
    expect(closesMinute({}, 'closedForMember', MINUTE)).toBe(false);
    const u = new UpdateBuilder();
    addMinuteCount(u, { minute: MINUTE, rate: 37, closed: ['closedForMember'] });
    expect(u.build().ConditionExpression).toContain('closedForMember');
  });
});
