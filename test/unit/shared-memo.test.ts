/** `memoized` (lambdas/shared/memo.ts): the function's own results, each computed once while kept, never more than `max` kept. */
import { memoized } from '../../lambdas/shared/memo';

describe('memoized', () => {
  it('answers as the function does, computing each argument once while it is kept', () => {
    const calls: string[] = [];
    const upper = memoized((s) => {
      calls.push(s);
      return s.toUpperCase();
    });
    expect([upper('a'), upper('b'), upper('a'), upper('b')]).toEqual(['A', 'B', 'A', 'B']);
    expect(calls).toEqual(['a', 'b']);
  });

  it('keeps at most max results: past the bound it forgets them all and computes again, still right', () => {
    let computed = 0;
    const twice = memoized((s) => {
      computed += 1;
      return s + s;
    }, 3);
    for (const s of ['a', 'b', 'c']) twice(s);
    expect(computed).toBe(3);
    expect(twice('d')).toBe('dd'); // the fourth: the three are dropped, 'd' kept
    expect(twice('a')).toBe('aa');
    expect(computed).toBe(5);
    expect(twice('d')).toBe('dd');
    expect(computed).toBe(5);
  });
});
