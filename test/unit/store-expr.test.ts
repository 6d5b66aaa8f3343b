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

  it('keeps the same placeholders for a text seen before, with each builder\'s own values', () => {
    const make = (amount: number, extras: number): BuiltUpdate => {
      const u = new UpdateBuilder();
      // Placeholders made and never used, a different number each time: the text stays the same.
      for (let i = 0; i < extras; i += 1) u.a(`spare${i}`);
      u.when(`${u.a('availableMicros')} >= ${u.v(amount)}`);
      return u.add('availableMicros', -amount).add('heldMicros', amount).build();
    };
    const first = make(5, 0);
    const again = make(7, 3);
    expect(again).toEqual({
      UpdateExpression: 'ADD #availableMicros :v2, #heldMicros :v3',
      ConditionExpression: '(#availableMicros >= :v1)',
      ExpressionAttributeNames: { '#availableMicros': 'availableMicros', '#heldMicros': 'heldMicros' },
      ExpressionAttributeValues: { ':v1': 7, ':v2': -7, ':v3': 7 },
    });
    expect(first.ExpressionAttributeValues).toEqual({ ':v1': 5, ':v2': -5, ':v3': 5 });
    // One frozen names object for the text: nothing downstream can change another command's names.
    expect(again.ExpressionAttributeNames).toBe(first.ExpressionAttributeNames);
    expect(Object.isFrozen(again.ExpressionAttributeNames)).toBe(true);
  });

  it('chooses values by the builder in hand when a text was first seen with more of them, or fewer', () => {
    const build = (values: number, clause: string): BuiltUpdate => {
      const u = new UpdateBuilder();
      for (let i = 1; i <= values; i += 1) u.v(i * 10);
      return u.set(clause).build();
    };
    // The same text, spelled by hand: once from a builder that has :v3, then from one that has only :v1, then again.
    expect(build(3, 'a = :v3, b = :v1').ExpressionAttributeValues).toEqual({ ':v1': 10, ':v3': 30 });
    expect(build(1, 'a = :v3, b = :v1').ExpressionAttributeValues).toEqual({ ':v1': 10 });
    expect(build(4, 'a = :v3, b = :v1').ExpressionAttributeValues).toEqual({ ':v1': 10, ':v3': 30 });
    expect(build(1, 'c = :v1').ExpressionAttributeValues).toEqual({ ':v1': 10 });
    expect(build(2, 'c = :v1').ExpressionAttributeValues).toEqual({ ':v1': 10 });
  });

  it('chooses as the rule before when the same texts come round again', () => {
    // The generated builders of the property above, each built twice with other values: a repeat
    // of a text must choose what a first sight of it chose.
    const name = fc.constantFrom('a', 'b', 'ttl', '-', '_');
    const step = fc.oneof(
      fc.record({ kind: fc.constant('add' as const), name }),
      fc.record({ kind: fc.constant('when' as const), name }),
      fc.record({ kind: fc.constant('unused' as const), name }),
    );
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 6 }), fc.integer(), fc.integer(), (steps, x, y) => {
        const run = (value: number): BuiltUpdate => {
          const u = new UpdateBuilder();
          for (const s of steps) {
            if (s.kind === 'add') u.add(s.name, value);
            else if (s.kind === 'when') u.when(`${u.a(s.name)} < ${u.v(value)}`);
            else {
              u.a(`${s.name}z`);
              u.v(value);
            }
          }
          return u.build();
        };
        const one = run(x);
        const two = run(y);
        expect(Object.keys(two.ExpressionAttributeNames ?? {})).toEqual(Object.keys(one.ExpressionAttributeNames ?? {}));
        expect(Object.keys(two.ExpressionAttributeValues ?? {})).toEqual(Object.keys(one.ExpressionAttributeValues ?? {}));
        expect(Object.values(two.ExpressionAttributeValues ?? {}).every((v) => v === y)).toBe(true);
        const all = { names: Object.fromEntries(steps.flatMap((s) => [[`#${s.name}`, s.name]])), values: Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`:v${i + 1}`, 0])) };
        expect(Object.keys(two.ExpressionAttributeValues ?? {}).sort()).toEqual(usedBefore(two, all).values.sort());
      }),
      { numRuns: 300 },
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
