/**
 * The minute-tagged request count a key window item would carry (lambdas/store/items.ts,
 * `addMinuteCount`): how a slot's value is read back and when a refused write's value is an
 * earlier minute's (overwritten) rather than a later one's (never).
 */
import { COUNT_SLOTS, COUNT_SPAN, addMinuteCount, boundSlotName, closesMinute, countSlotName, givenSlotName, minuteBound, minuteCapacity, minuteGive, minuteReceive, minuteRequests, minuteShareRebalance, minuteShareView, minuteUsed, staleCount } from '../../lambdas/store/items';
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

describe("a key's minute on its window item moved between regions (the bound slot)", () => {
  const floor = MINUTE * COUNT_SPAN;
  const q = countSlotName(MINUTE);
  const b = boundSlotName(MINUTE);
  const earlier = (MINUTE - COUNT_SLOTS) * COUNT_SPAN;
  const values = (built: { ExpressionAttributeValues?: Record<string, unknown> } | undefined): unknown[] => Object.values(built?.ExpressionAttributeValues ?? {});

  it("reads the room received as the share's bound, and only this minute's", () => {
    expect(b).toBe(`b${MINUTE % COUNT_SLOTS}`);
    expect(minuteBound({ [b]: floor + 37 }, MINUTE)).toBe(floor + 37);
    expect(minuteCapacity({ [b]: floor + 37 }, MINUTE, 30)).toBe(37);
    expect(minuteUsed({ [q]: floor + 35, [b]: floor + 37 }, MINUTE, 30)).toBe(28);
    // An earlier minute's bound is below the floor: nothing received this minute.
    expect(minuteBound({ [b]: earlier + 37 }, MINUTE)).toBeUndefined();
    expect(minuteCapacity({ [b]: earlier + 37 }, MINUTE, 30)).toBe(30);
    expect(minuteUsed({ [q]: floor + 12, [b]: earlier + 37 }, MINUTE, 30)).toBe(12);
    // A bound written under a lower share binds no lower than the share now.
    expect(minuteCapacity({ [b]: floor + 25 }, MINUTE, 30)).toBe(30);
    // The snapshot's key slice 0 figure counts it as used less, as a counter's receive does.
    expect(minuteShareView({ [q]: floor + 35, [b]: floor + 37 }, MINUTE, 30)).toMatchObject({ used: 28, given: 0 });
  });

  it("admits under the bound as an alternative to the share, naming it literally (the expression's names and the item's removals unchanged)", () => {
    const u = new UpdateBuilder();
    addMinuteCount(u, { minute: MINUTE, rate: 30 });
    const built = u.build();
    expect(built.ConditionExpression).toContain(`< ${b})`);
    expect(Object.values(built.ExpressionAttributeNames ?? {})).toEqual([q]);
    expect((built.UpdateExpression.split('REMOVE ')[1] ?? '').split(', ').every((name) => name.startsWith('q'))).toBe(true);
  });

  it('lends key slice 0 past its share up to the bound received, and no further', () => {
    const withBound = minuteShareRebalance({ slice: 0, delta: 4 }, { [q]: floor + 30, [b]: floor + 37 }, MINUTE, 30);
    expect(values(withBound)).toEqual(expect.arrayContaining([4, floor + 33]));
    const without = minuteShareRebalance({ slice: 0, delta: 4 }, { [q]: floor + 20 }, MINUTE, 30);
    expect(values(without)).toEqual(expect.arrayContaining([4, floor + 26]));
    // A new minute's first loan may start at the bound's capacity, not past it.
    expect(minuteShareRebalance({ slice: 0, delta: 35 }, { [b]: floor + 37 }, MINUTE, 30)).toBeDefined();
    expect(minuteShareRebalance({ slice: 0, delta: 38 }, { [b]: floor + 37 }, MINUTE, 30)).toBeUndefined();
  });

  it("gives on the giver's minute slot, conditioned on the room, a free or earlier minute's slot written whole", () => {
    const give = minuteGive({ [q]: floor + 10 }, MINUTE, 30, 7, 99);
    expect(give?.UpdateExpression).toMatch(/ADD/);
    expect(give?.ConditionExpression).toContain('BETWEEN');
    expect(values(give)).toEqual(expect.arrayContaining([7, floor, floor + 23, 99]));
    // More than the room (share less what is counted) is no give.
    expect(minuteGive({ [q]: floor + 25 }, MINUTE, 30, 6, undefined)).toBeUndefined();
    expect(minuteGive({ [q]: floor + 25 }, MINUTE, 30, 5, undefined)).toBeDefined();
    // Room received counts, and the give is then conditioned on the bound still being there.
    const past = minuteGive({ [q]: floor + 30, [b]: floor + 37 }, MINUTE, 30, 7, undefined);
    expect(values(past)).toEqual(expect.arrayContaining([floor + 30, floor + 37]));
    expect(past?.ConditionExpression).toContain('>=');
    const fresh = minuteGive({ [q]: earlier + 12 }, MINUTE, 30, 7, undefined);
    expect(fresh?.UpdateExpression).toMatch(/^SET /);
    expect(values(fresh)).toEqual(expect.arrayContaining([earlier + 12, floor + 7]));
    expect(minuteGive(undefined, MINUTE, 30, 7, undefined)?.ConditionExpression).toContain('attribute_not_exists');
    expect(minuteGive(undefined, MINUTE, 30, 31, undefined)).toBeUndefined();
  });

  it('receives by raising the bound (started at the share when free or an earlier minute\'s), and keeps at most three bounds', () => {
    const first = minuteReceive(undefined, MINUTE, 30, 7, 99);
    expect(first?.ConditionExpression).toContain('attribute_not_exists');
    expect(values(first)).toEqual(expect.arrayContaining([floor + 37, 99]));
    const more = minuteReceive({ [b]: floor + 37 }, MINUTE, 30, 5, undefined);
    expect(more?.UpdateExpression).toMatch(/ADD/);
    expect(values(more)).toEqual(expect.arrayContaining([5, floor]));
    const over = minuteReceive({ [b]: earlier + 37 }, MINUTE, 30, 5, undefined);
    expect(values(over)).toEqual(expect.arrayContaining([earlier + 37, floor + 35]));
    // A later minute's bound in the slot: the minute is long over, only the counters move.
    expect(minuteReceive({ [b]: (MINUTE + COUNT_SLOTS) * COUNT_SPAN + 3 }, MINUTE, 30, 5, undefined)).toBeUndefined();
    const removed = (first?.UpdateExpression.split('REMOVE ')[1] ?? '').split(', ');
    expect(removed).toHaveLength(COUNT_SLOTS - 3);
    expect(removed).not.toEqual(expect.arrayContaining([boundSlotName(MINUTE - 1), b, boundSlotName(MINUTE + 1)]));
    expect(removed).toEqual(expect.arrayContaining([boundSlotName(MINUTE + 2), boundSlotName(MINUTE - 2)]));
  });
});
