/** The spend rate cap's per-second buckets over a rolling 60 seconds. */
import {
  LAP_SKEW,
  RATE_SLOTS,
  SLOT_LAPS,
  SLOT_SPAN,
  SPEND_WINDOW_MS,
  bucketExpiry,
  bucketOf,
  guardAdmits,
  guardRange,
  lapFloor,
  lapOf,
  partitionBuckets,
  slotEntry,
  slotOf,
  slotValue,
  slotsAfterPrune,
  slotsAfterReservation,
  spendRetryAfterSeconds,
  type RateSlot,
} from '../../lambdas/core/spend-rate';

const S = 1_790_000_000; // an epoch second
const at = (second: number, ms = 0): number => second * 1000 + ms;

describe('buckets', () => {
  test.each([
    [at(S), S],
    [at(S, 999), S],
    [at(S + 1), S + 1],
  ])('bucketOf(%d) = %d', (now, second) => {
    expect(bucketOf(now)).toBe(second);
  });

  test('a bucket stops counting 60 s after the END of its second', () => {
    expect(SPEND_WINDOW_MS).toBe(60_000);
    expect(bucketExpiry(S)).toBe(at(S + 61));
  });

  test('every reservation counts for at least 60 s and at most 61 s (SPEC)', () => {
    for (const ms of [0, 1, 500, 999]) {
      const reservedAt = at(S, ms);
      const expiry = bucketExpiry(bucketOf(reservedAt));
      expect(expiry - reservedAt).toBeGreaterThanOrEqual(60_000);
      expect(expiry - reservedAt).toBeLessThanOrEqual(61_000);
    }
  });
});

describe('partitionBuckets at exact boundaries', () => {
  test.each<[string, number, number, string[], number | undefined]>([
    ['all live, just reserved', at(S + 2), 600, [], S],
    ['one ms before the oldest bucket expires', at(S + 61) - 1, 600, [], S],
    ['the oldest bucket expires exactly at its expiry', at(S + 61), 500, [String(S)], S + 1],
    ['one ms later, same', at(S + 61) + 1, 500, [String(S)], S + 1],
    ['second bucket expires at its own expiry', at(S + 62), 200, [String(S), String(S + 1)], S + 30],
    ['everything expired', at(S + 91), 0, [String(S), String(S + 1), String(S + 30)], undefined],
  ])('%s', (_l, now, live, expiredKeys, earliest) => {
    const buckets = { [String(S)]: 100, [String(S + 1)]: 300, [String(S + 30)]: 200 };
    const p = partitionBuckets(buckets, now);
    expect(p.liveMicros).toBe(live);
    expect(p.expired.map(([k]) => k).sort()).toEqual(expiredKeys.sort());
    for (const [k, v] of p.expired) expect(v).toBe(buckets[k]);
    expect(p.earliestLive).toBe(earliest);
    if (earliest === undefined) expect('earliestLive' in p).toBe(false);
  });

  test('empty buckets', () => {
    expect(partitionBuckets({}, at(S))).toEqual({ liveMicros: 0, expired: [] });
  });

  test('earliest live does not depend on key order', () => {
    const p = partitionBuckets({ [String(S + 5)]: 1, [String(S + 2)]: 1, [String(S + 9)]: 1 }, at(S + 10));
    expect(p.earliestLive).toBe(S + 2);
    expect(p.liveMicros).toBe(3);
  });
});

describe('spendRetryAfterSeconds: clears when the earliest counted reservation ages out', () => {
  test.each<[string, number | undefined, number, number]>([
    ['nothing counted', undefined, at(S), 1],
    ['reserved this very ms', S, at(S), 61],
    ['late in the same second', S, at(S, 999), 61],
    ['a second later', S, at(S + 1), 60],
    ['half a second into the next', S, at(S + 1, 500), 60],
    ['1 ms before expiry', S, at(S + 61) - 1, 1],
    ['1.001 s before expiry', S, at(S + 61) - 1001, 2],
    ['exactly at expiry', S, at(S + 61), 1],
    ['past expiry', S, at(S + 70), 1],
  ])('%s', (_l, earliest, now, seconds) => {
    expect(spendRetryAfterSeconds(earliest, now)).toBe(seconds);
  });

  test('waiting the advised seconds is enough for the earliest bucket to age out', () => {
    for (const ms of [0, 1, 250, 999, 1000, 30_000, 59_999]) {
      const now = at(S) + ms;
      const wait = spendRetryAfterSeconds(S, now);
      expect(Number.isInteger(wait)).toBe(true);
      const later = partitionBuckets({ [String(S)]: 10 }, now + wait * 1000);
      expect(later.liveMicros).toBe(0);
    }
  });
});

describe('slots as this process leaves them after its own writes', () => {
  const slot = (second: number, micros: number): RateSlot => ({ slot: slotOf(second), second, micros });
  const known = [slot(S, 100), slot(S + 1, 300), slot(S + 30, 200)];
  test.each<[string, readonly RateSlot[], number, number, RateSlot[]]>([
    ['an empty slot takes the reservation', known, S + 2, 50, [...known, slot(S + 2, 50)]],
    ['the same second adds to its slot', known, S + 1, 50, [slot(S, 100), slot(S + 1, 350), slot(S + 30, 200)]],
    ['a second 64 s on overwrites the aged-out one in its slot', known, S + RATE_SLOTS, 70, [slot(S + RATE_SLOTS, 70), slot(S + 1, 300), slot(S + 30, 200)]],
    ['nothing known: only the new slot', [], S + 5, 9, [slot(S + 5, 9)]],
  ])('reservation: %s', (_l, slots, second, micros, expected) => {
    expect(slotsAfterReservation(slots, second, micros)).toEqual([...expected].sort((a, b) => a.slot - b.slot));
    expect(slots).toBe(slots); // the input is not changed
  });

  test.each<[string, RateSlot[], RateSlot[]]>([
    ['pruned slots are gone', [slot(S, 100), slot(S + 1, 300)], [slot(S + 30, 200)]],
    ['an entry that differs from what was pruned stays (it was not removed)', [slot(S, 99)], known],
    ['nothing pruned: unchanged', [], known],
  ])('prune: %s', (_l, pruned, expected) => {
    expect(slotsAfterPrune(known, pruned)).toEqual(expected);
  });

  test('a slot pruned and then reserved in holds only the new second', () => {
    const after = slotsAfterReservation(slotsAfterPrune(known, [slot(S, 100)]), S + RATE_SLOTS, 5);
    expect(after.filter((s) => s.slot === slotOf(S))).toEqual([slot(S + RATE_SLOTS, 5)]);
  });
});

describe('a slot in one number: its lap and its amount', () => {
  const guard = lapOf(S);

  test.each<[string, number, number]>([
    ['this second, a small amount', S, 1],
    ['this second, the most a slot holds', S, SLOT_SPAN - 1],
    ['a second LAP_SKEW laps behind the guard', S - LAP_SKEW * RATE_SLOTS, 123_456_789],
    ['the last lap the guard tells apart', (guard - LAP_SKEW + SLOT_LAPS - 1) * RATE_SLOTS + 7, 42],
  ])('reads back exactly: %s', (_l, second, micros) => {
    const value = slotValue(second, micros);
    expect(Number.isSafeInteger(value)).toBe(true);
    expect(slotEntry(slotOf(second), value, guard)).toEqual({ slot: slotOf(second), second, micros });
  });

  test('every value stays an exact JavaScript integer (below 2^53)', () => {
    expect((SLOT_LAPS - 1) * SLOT_SPAN + (SLOT_SPAN - 1)).toBeLessThanOrEqual(Number.MAX_SAFE_INTEGER);
  });

  test("a lap's values are one range, so a condition can ask for it (BETWEEN floor AND floor + SLOT_SPAN - 1 - amount)", () => {
    const floor = lapFloor(S);
    for (const second of [S, S + 1, S + RATE_SLOTS - 1 - (S % RATE_SLOTS)]) expect(lapFloor(second)).toBe(floor);
    expect(slotValue(S, 500)).toBe(floor + 500);
    // The next lap's values are outside it, the same slot's previous lap's too.
    expect(lapFloor(S + RATE_SLOTS)).not.toBe(floor);
    expect(slotValue(S - RATE_SLOTS, 500) < floor || slotValue(S - RATE_SLOTS, 500) >= floor + SLOT_SPAN).toBe(true);
  });

  test('the same tag SLOT_LAPS laps apart is a different lap: the guard decides which', () => {
    const later = S + SLOT_LAPS * RATE_SLOTS;
    expect(slotValue(later, 9)).toBe(slotValue(S, 9));
    expect(slotEntry(slotOf(S), slotValue(S, 9), lapOf(S)).second).toBe(S);
    expect(slotEntry(slotOf(S), slotValue(S, 9), lapOf(later)).second).toBe(later);
  });

  test.each<[string, number | undefined, boolean]>([
    ['no guard yet', undefined, true],
    ['the guard at this lap', lapOf(S), true],
    ['a guard LAP_SKEW laps ahead (a writer a little behind)', lapOf(S) + LAP_SKEW, true],
    ['a guard further ahead (a clock far behind)', lapOf(S) + LAP_SKEW + 1, false],
    ['the oldest guard still telling this lap apart', lapOf(S) - SLOT_LAPS + LAP_SKEW + 1, true],
    ['a guard one lap older than that', lapOf(S) - SLOT_LAPS + LAP_SKEW, false],
  ])('a reservation may be written under %s: %s', (_l, g, admits) => {
    expect(guardAdmits(g, S)).toBe(admits);
    if (g !== undefined) expect(g >= guardRange(S).low && g <= guardRange(S).high).toBe(admits);
  });
});
