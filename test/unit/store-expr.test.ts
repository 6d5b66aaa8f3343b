/**
 * The store's expression builder keeps exactly the placeholders its expressions use (DynamoDB
 * refuses any other): the same choice as the regular expression per placeholder it used before,
 * over generated builders, and the cases that matter by name (`:v1` beside `:v10`, names used only
 * in a condition, nothing used at all).
 */
import fc from 'fast-check';
import { UpdateBuilder, type BuiltUpdate } from '../../lambdas/store/expr';

/** The rule before: a placeholder is used when it appears and no name character follows it. */
function usedBefore(built: BuiltUpdate, all: { names: Record<string, string>; values: Record<string, unknown> }): { names: string[]; values: string[] } {
  const text = `${built.UpdateExpression} ${built.ConditionExpression ?? ''}`;
  const used = (key: string): boolean => new RegExp(`${key}(?![A-Za-z0-9_])`).test(text);
  return { names: Object.keys(all.names).filter(used), values: Object.keys(all.values).filter(used) };
}

describe('UpdateBuilder.build', () => {
  it('keeps :v1 when only :v10 would also match it, and drops what no expression uses', () => {
    const u = new UpdateBuilder();
    const placeholders = Array.from({ length: 10 }, (_, i) => u.v(i));
    u.a('unused');
    u.set(`${u.a('n')} = ${placeholders[9]}`).when(`${u.a('ttl')} > ${placeholders[0]}`);
    expect(u.build()).toEqual({
      UpdateExpression: 'SET #n = :v10',
      ConditionExpression: '(#ttl > :v1)',
      ExpressionAttributeNames: { '#n': 'n', '#ttl': 'ttl' },
      ExpressionAttributeValues: { ':v1': 0, ':v10': 9 },
    });
  });

  it('leaves the maps out when nothing is used', () => {
    const u = new UpdateBuilder();
    u.v(1);
    u.a('x');
    u.set('a = b');
    expect(u.build()).toEqual({ UpdateExpression: 'SET a = b' });
  });

  it('chooses the placeholders the rule before chose, for any builder', () => {
    const name = fc.stringMatching(/^[a-z][A-Za-z0-9_.-]{0,6}$/);
    const step = fc.oneof(
      fc.record({ kind: fc.constant('add' as const), name, amount: fc.integer() }),
      fc.record({ kind: fc.constant('set' as const), name, value: fc.integer(), useValue: fc.boolean() }),
      fc.record({ kind: fc.constant('when' as const), name, value: fc.integer() }),
      fc.record({ kind: fc.constant('remove' as const), name }),
      fc.record({ kind: fc.constant('unused' as const), name, value: fc.integer() }),
    );
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 16 }), (steps) => {
        const u = new UpdateBuilder();
        const all = { names: {} as Record<string, string>, values: {} as Record<string, unknown> };
        const a = (n: string): string => {
          const key = u.a(n);
          all.names[key] = n;
          return key;
        };
        const v = (x: number): string => {
          const key = u.v(x);
          all.values[key] = x;
          return key;
        };
        for (const s of steps) {
          if (s.kind === 'add') {
            u.add(s.name, s.amount);
            // add() names its attribute through a(): the same placeholder, registered again here as a candidate.
            a(s.name);
          } else if (s.kind === 'set') u.set(`${a(s.name)} = ${s.useValue ? v(s.value) : 'x'}`);
          else if (s.kind === 'when') u.when(`${a(s.name)} < ${v(s.value)}`);
          else if (s.kind === 'remove') {
            u.remove(s.name);
            a(s.name);
          }
          else {
            a(`${s.name}z`);
            v(s.value);
          }
        }
        // add() hands out placeholders of its own: every one the builder could have made is a candidate.
        for (let i = 1; i <= 64; i += 1) if (!(`:v${i}` in all.values)) all.values[`:v${i}`] = undefined;
        const built = u.build();
        const before = usedBefore(built, all);
        expect(Object.keys(built.ExpressionAttributeNames ?? {}).sort()).toEqual(before.names.sort());
        expect(Object.keys(built.ExpressionAttributeValues ?? {}).sort()).toEqual(before.values.sort());
      }),
      { numRuns: 500 },
    );
  });

  it('spells every name as it did before the names were remembered, past the bound of that memory too', () => {
    const spelled = (name: string): string => `#${name.replace(/[^A-Za-z0-9]/g, (c) => `_${c.charCodeAt(0).toString(16)}_`)}`;
    // 5,000 distinct names (more than the 4,096 remembered), each twice, the slot names among them.
    const names = ['-', '_', 'ttl', 'held', ...Array.from({ length: 5_000 }, (_, i) => `w_${i}.x`)];
    for (const round of [1, 2]) {
      for (const name of names) {
        const u = new UpdateBuilder();
        const key = u.a(name);
        expect([round, key]).toEqual([round, spelled(name)]);
        expect(u.set(`${key} = ${u.v(1)}`).build().ExpressionAttributeNames).toEqual({ [key]: name });
      }
    }
  });
});
