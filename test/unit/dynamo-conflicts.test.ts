import { ItemLocks, cancelledForConflict, writeConflict, type Passage } from '../../bench/dynamo-conflicts';

const passed = (p: Passage): (() => void) => {
  if (!p.passed) throw new Error(`expected to pass, met ${p.conflicts.join(',')}`);
  return p.release;
};
const met = (p: Passage): readonly number[] => (p.passed ? [] : p.conflicts);

describe('ItemLocks: DynamoDB transaction conflicts for a proxy', () => {
  let now: number;
  let locks: ItemLocks;
  beforeEach(() => {
    now = 0;
    locks = new ItemLocks(10, () => now);
  });

  it.each([
    // [what is ongoing, the call that arrives, the indexes it meets]
    ['a transaction on b', 'transact write a,b,c', [1]],
    ['a transaction on b', 'transact write x,y', []],
    ['a transaction on b', 'single write b', [0]],
    ['a transaction on b', 'transact get c,b', [1]],
    ['a single write on b', 'transact write b', []],
    ['a single write on b', 'single write b', []],
    ['a single write on b', 'transact get a,b', [1]],
  ] as const)('with %s ongoing, %s meets %j', (ongoing, call, expected) => {
    if (ongoing === 'a transaction on b') passed(locks.transactWrite(['b']));
    else passed(locks.singleWrite('b'));
    const [kind, ids] = [call.slice(0, call.lastIndexOf(' ')), call.slice(call.lastIndexOf(' ') + 1).split(',')];
    const p = kind === 'transact write' ? locks.transactWrite(ids) : kind === 'single write' ? locks.singleWrite(ids[0] as string) : locks.transactGet(ids);
    expect(met(p)).toEqual(expected);
  });

  it('holds items until the reply or the window, whichever is first', () => {
    const release = passed(locks.transactWrite(['a']));
    now = 9;
    expect(met(locks.transactWrite(['a']))).toEqual([0]);
    release();
    expect(locks.transactWrite(['a']).passed).toBe(true); // answered: free at once
    now = 18;
    expect(met(locks.transactWrite(['a']))).toEqual([0]); // the one passed at 9 holds it, unanswered, until 19
    now = 19;
    expect(locks.transactWrite(['a']).passed).toBe(true); // its window is over though it has no reply
  });

  it('a cancelled transaction holds nothing', () => {
    passed(locks.transactWrite(['a']));
    expect(met(locks.transactWrite(['a', 'b']))).toEqual([0]);
    expect(locks.transactWrite(['b']).passed).toBe(true);
  });

  it('forgets released and expired holds', () => {
    const r1 = passed(locks.transactWrite(['a', 'b']));
    passed(locks.singleWrite('c'));
    expect(locks.holding()).toBe(3);
    r1();
    expect(locks.holding()).toBe(1);
    now = 10;
    expect(locks.holding()).toBe(0);
  });

  it("answers in DynamoDB's shapes", () => {
    expect(cancelledForConflict(3, [1])).toEqual({
      __type: 'com.amazonaws.dynamodb.v20120810#TransactionCanceledException',
      Message: 'Transaction cancelled, please refer cancellation reasons for specific reasons [None, TransactionConflict, None]',
      CancellationReasons: [{ Code: 'None' }, { Code: 'TransactionConflict', Message: 'Transaction is ongoing for the item' }, { Code: 'None' }],
    });
    expect(writeConflict().__type).toBe('com.amazonaws.dynamodb.v20120810#TransactionConflictException');
  });
});
