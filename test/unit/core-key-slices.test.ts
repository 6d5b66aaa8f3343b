import { KEY_SLICES, keySliceCount, keySliceOf, keyTotals, planKeyRebalance, type KeyShareView } from '../../lambdas/core/key-slices';

/** A key share: slice 0 takes `used` and `given`; others `used`, `room` and the tag they were lent under; none given: never written. */
function share(slice: number, over: Partial<KeyShareView> = {}): KeyShareView {
  return { slice, exists: slice === 0 || Object.keys(over).length > 0, used: 0, settled: 0, held: 0, given: 0, room: 0, tag: -1, ...over };
}

describe('key slices', () => {
  test.each([
    [0, 0],
    [7, 7],
    [8, 0],
    [47, 7],
  ])('workspace slice %i uses key slice %i', (slice, key) => {
    expect(keySliceOf(slice)).toBe(key);
  });

  test.each([
    [1, 1],
    [3, 3],
    [48, KEY_SLICES],
  ])('a workspace of %i slices has %i key slices', (slices, keys) => {
    expect(keySliceCount(slices)).toBe(keys);
  });

  test('the real total takes what slice 0 lent out of its figure', () => {
    const shares = [share(0, { used: 30, given: 20, settled: 4, held: 6 }), share(1, { used: 5, room: 7, tag: 40, held: 5 }), share(2, { used: 3, room: 5, tag: 40, settled: 3 })];
    expect(keyTotals(shares)).toEqual({ used: 18, settled: 7, held: 11 });
  });

  test.each<[string, KeyShareView[], number, number, number, ReturnType<typeof planKeyRebalance>]>([
    ['slice 0 lends the deficit plus a fair share of the rest', [share(0, { used: 4 }), share(1), share(2)], 2, 1, 40, [{ slice: 0, delta: 12 }, { slice: 2, delta: 12 }]],
    ['nothing when the target already covers', [share(0), share(1, { room: 3, tag: 40 })], 1, 2, 40, []],
    [
      'slice 0 nearly spent: the others give first, richest first',
      [share(0, { used: 39, given: 30 }), share(1, { room: 2, tag: 40 }), share(2, { room: 4, tag: 40 }), share(3)],
      3,
      5,
      40,
      [{ slice: 2, delta: -4 }, { slice: 1, delta: -1 }, { slice: 3, delta: 5 }],
    ],
    ['target 0 takes back its deficit and a fair share, richest lender first', [share(0, { used: 40, given: 10 }), share(1, { room: 3, tag: 40 }), share(2, { room: 2, tag: 40 })], 0, 1, 40, [{ slice: 1, delta: -2 }, { slice: 0, delta: -2 }]],
    ['target 0 with room of its own moves nothing', [share(0, { used: 30, given: 10 }), share(1, { room: 3, tag: 40 })], 0, 1, 40, []],
    [
      'headroom lent under another limit is taken back first, every slice\'s (a current one read before slice 0 may miss a lend), given recomputed from use',
      [share(0, { used: 20, given: 15 }), share(1, { used: 4, room: 6, tag: 40 }), share(2, { used: 3, room: 2, tag: 30 })],
      1,
      1,
      30,
      [{ slice: 1, delta: 0, retag: true }, { slice: 2, delta: 0, retag: true }, { slice: 0, delta: 0, givenSet: 7 }],
    ],
  ])('%s', (_name, shares, target, need, limit, expected) => {
    expect(planKeyRebalance(shares, target, need, limit, shares.length)).toEqual(expected);
  });

  test('slice 0 spent and the others short: slice 0 lends the rest it has', () => {
    const shares = [share(0, { used: 38, given: 30 }), share(1, { room: 1, tag: 40 }), share(2)];
    expect(planKeyRebalance(shares, 2, 3, 40, 3)).toEqual([{ slice: 1, delta: -1 }, { slice: 0, delta: 2 }, { slice: 2, delta: 3 }]);
  });

  test('no plan creates or destroys a unit: what slice 0 lends is what the others receive', () => {
    for (let used0 = 0; used0 <= 40; used0 += 5) {
      for (let room1 = 0; room1 <= 10; room1 += 5) {
        const shares = [share(0, { used: used0, given: room1 }), share(1, { room: room1, tag: 40 }), share(2), share(3)];
        const plan = planKeyRebalance(shares, 3, 2, 40, 4);
        const zero = plan.filter((e) => e.slice === 0).reduce((a, e) => a + e.delta, 0);
        const others = plan.filter((e) => e.slice !== 0).reduce((a, e) => a + e.delta, 0);
        expect(zero).toBe(others);
        expect(used0 + zero).toBeLessThanOrEqual(40);
      }
    }
  });
});
