/** The local replicator's decisions (local/regions/replication-book.ts) and images, without DynamoDB. */
import { ABSENT, fingerprint, fromSdkImage, type JsonImage, toSdkImage } from '../../local/regions/images';
import { LATE_RECORD_MS, type Plan, ReplicationBook, wins } from '../../local/regions/replication-book';

const T = 'items';
const keys = (pk: string): JsonImage => ({ pk: { S: pk } });
const item = (pk: string, v: string): JsonImage => ({ pk: { S: pk }, v: { S: v } });

/** A book for regions a and b (and c where asked) whose plans are applied as DynamoDB would. */
function setup(regions = ['a', 'b']) {
  const book = new ReplicationBook(regions);
  /** What each region's table holds, by pk. */
  const tables: Record<string, Map<string, JsonImage>> = Object.fromEntries(regions.map((r) => [r, new Map()]));
  /** Applies a plan like PutItem/DeleteItem with ALL_OLD; returns the old image. */
  const write = (plan: Plan, now: number): void => {
    const table = tables[plan.target] as Map<string, JsonImage>;
    const pk = plan.keys.pk?.S ?? '';
    const old = table.get(pk);
    if (plan.image === null) table.delete(pk);
    else table.set(pk, plan.image);
    book.applied(plan, old, now);
  };
  return { book, tables, write };
}

/** Writes `v` in region `from` and copies it everywhere, every record consumed: the book knows what each region holds. */
function everywhere(ctx: ReturnType<typeof setup>, regions: readonly string[], from: string, pk: string, v: string, at: number): void {
  ctx.tables[from]?.set(pk, item(pk, v));
  ctx.book.observe(from, T, keys(pk), item(pk, v), at);
  for (const plan of ctx.book.due(at + 10_000, 0)) ctx.write(plan, at);
  for (const region of regions) if (region !== from) ctx.book.observe(region, T, keys(pk), item(pk, v), at);
  expect(ctx.book.outstanding()).toEqual({ pending: 0, expected: 0 });
}

describe('fingerprint', () => {
  it('is the same for equal items, whatever the order of names and set members', () => {
    const one: JsonImage = { b: { SS: ['x', 'y'] }, a: { M: { q: { N: '1' }, p: { L: [{ S: 'z' }, { NULL: true }] } } } };
    const two: JsonImage = { a: { M: { p: { L: [{ S: 'z' }, { NULL: true }] }, q: { N: '1' } } }, b: { SS: ['y', 'x'] } };
    expect(fingerprint(one)).toBe(fingerprint(two));
  });

  it.each<[string, JsonImage, JsonImage]>([
    ['a number and a string', { v: { N: '1' } }, { v: { S: '1' } }],
    ['list order', { v: { L: [{ S: 'a' }, { S: 'b' }] } }, { v: { L: [{ S: 'b' }, { S: 'a' }] } }],
    ['an extra attribute', { v: { S: 'a' } }, { v: { S: 'a' }, w: { BOOL: false } }],
    ['true and false', { v: { BOOL: true } }, { v: { BOOL: false } }],
  ])('tells apart %s', (_what, one, two) => {
    expect(fingerprint(one)).not.toBe(fingerprint(two));
  });

  it('has a mark of its own for an absent item', () => {
    expect(fingerprint(undefined)).toBe(ABSENT);
    expect(fingerprint(null)).toBe(ABSENT);
    expect(fingerprint({})).not.toBe(ABSENT);
  });

  it('survives the trip to the SDK shape and back, binary included', () => {
    const image: JsonImage = { b: { B: Buffer.from([0, 1, 254]).toString('base64') }, bs: { BS: ['AA==', 'AQ=='] }, n: { NS: ['1', '2'] }, m: { M: { s: { S: 'é' } } } };
    const sdk = toSdkImage(image);
    expect(sdk.b?.B).toEqual(new Uint8Array([0, 1, 254]));
    expect(fromSdkImage(sdk)).toEqual(image);
    expect(fromSdkImage(undefined)).toBeUndefined();
  });
});

describe('wins (last writer wins)', () => {
  it.each([
    [{ fp: 'x', ts: 2, origin: 'a' }, { fp: 'y', ts: 1, origin: 'b' }, true],
    [{ fp: 'x', ts: 1, origin: 'b' }, { fp: 'y', ts: 2, origin: 'a' }, false],
    [{ fp: 'x', ts: 5, origin: 'b' }, { fp: 'y', ts: 5, origin: 'a' }, true],
    [{ fp: 'x', ts: 5, origin: 'a' }, { fp: 'y', ts: 5, origin: 'b' }, false],
    [{ fp: 'x', ts: 5, origin: 'a' }, { fp: 'x', ts: 5, origin: 'a' }, false],
  ])('%j over %j: %s', (a, b, expected) => {
    expect(wins(a, b)).toBe(expected);
  });
});

describe('ReplicationBook', () => {
  it('refuses fewer than two regions, or a region twice', () => {
    expect(() => new ReplicationBook(['a'])).toThrow('two or more');
    expect(() => new ReplicationBook(['a', 'a'])).toThrow('two or more');
  });

  it('makes a local write due in every other region once the lag has passed, and not before', () => {
    const { book } = setup(['a', 'b', 'c']);
    expect(book.observe('a', T, keys('k'), item('k', '1'), 1_000)).toBe('local');
    expect(book.due(1_499, 500)).toEqual([]);
    const plans = book.due(1_500, 500);
    expect(plans.map((p) => p.target).sort()).toEqual(['b', 'c']);
    expect(plans[0]).toMatchObject({ table: T, keys: keys('k'), image: item('k', '1'), version: { ts: 1_000, origin: 'a' } });
    // A region that cannot take writes keeps its write due.
    expect(book.due(1_500, 500, (r) => r !== 'c').map((p) => p.target)).toEqual(['b']);
  });

  it('consumes the record of its own write in the receiving stream, and copies nothing back', () => {
    const { book, write } = setup();
    book.observe('a', T, keys('k'), item('k', '1'), 1_000);
    for (const plan of book.due(2_000, 500)) write(plan, 2_000);
    expect(book.observe('b', T, keys('k'), item('k', '1'), 2_010)).toBe('echo');
    expect(book.due(10_000, 500)).toEqual([]);
    expect(book.outstanding()).toEqual({ pending: 0, expected: 0 });
    expect(book.stats).toMatchObject({ local: 1, echoes: 1, applied: 1 });
  });

  it('expects no record from a write over an equal item (DynamoDB writes none)', () => {
    const { book, tables, write } = setup();
    tables.b?.set('k', item('k', '1'));
    book.observe('a', T, keys('k'), item('k', '1'), 1_000);
    for (const plan of book.due(2_000, 500)) write(plan, 2_000);
    expect(book.outstanding()).toEqual({ pending: 0, expected: 0 });
    expect(book.stats.unchanged).toBe(1);
    // So a later local write in b with the same content is a write of b's, copied to a.
    expect(book.observe('b', T, keys('k'), item('k', '2'), 3_000)).toBe('local');
  });

  it("drops a write when the target holds a later version, and folds a region's writes into its latest", () => {
    const { book, tables, write } = setup();
    book.observe('a', T, keys('k'), item('k', 'a1'), 1_000);
    book.observe('a', T, keys('k'), item('k', 'a2'), 1_050);
    book.observe('b', T, keys('k'), item('k', 'b'), 1_100);
    const plans = book.due(5_000, 500);
    // a's two writes are one write due in b, and b's is later, so it is dropped; b's goes to a.
    expect(plans).toHaveLength(1);
    expect(plans[0]).toMatchObject({ target: 'a', image: item('k', 'b') });
    for (const plan of plans) write(plan, 5_000);
    expect(tables.a?.get('k')).toEqual(item('k', 'b'));
    expect(book.stats.dropped).toBe(1);
  });

  it('copies an item written more often than once a lag a lag after the oldest write it folds, with the latest image', () => {
    const { book, tables, write } = setup();
    // Written every 400 ms with a 1 s lag: each write folds into the one due, which stays due at 2 000.
    for (let i = 0; i < 5; i += 1) book.observe('a', T, keys('k'), item('k', `a${i}`), 1_000 + 400 * i);
    expect(book.due(1_999, 1_000)).toEqual([]);
    const plans = book.due(2_600, 1_000);
    expect(plans).toHaveLength(1);
    expect(plans[0]).toMatchObject({ target: 'b', image: item('k', 'a4') });
    for (const plan of plans) write(plan, 2_600);
    expect(tables.b?.get('k')).toEqual(item('k', 'a4'));
    book.observe('b', T, keys('k'), item('k', 'a4'), 2_610);
    // The next write starts its own lag.
    book.observe('a', T, keys('k'), item('k', 'a5'), 2_700);
    expect(book.due(3_699, 1_000)).toEqual([]);
    expect(book.due(3_800, 1_000).map((p) => p.image)).toEqual([item('k', 'a5')]);
  });

  it('breaks a tie in write time by the larger region name', () => {
    // Two writes with one time can only come from saved state: the book's own times never repeat.
    const fa = fingerprint(item('k', 'a'));
    const fb = fingerprint(item('k', 'b'));
    const tied = new ReplicationBook(['a', 'b'], {
      version: 1,
      lastTs: 1_000,
      entries: [
        {
          table: T,
          keys: keys('k'),
          held: { a: { fp: fa, ts: 1_000, origin: 'a' }, b: { fp: fb, ts: 1_000, origin: 'b' } },
          pending: {
            a: { image: item('k', 'b'), version: { fp: fb, ts: 1_000, origin: 'b' }, immediate: false },
            b: { image: item('k', 'a'), version: { fp: fa, ts: 1_000, origin: 'a' }, immediate: false },
          },
          expect: {},
          touched: 1_000,
        },
      ],
    });
    // b's version (the larger name) goes to a; a's is dropped in b.
    expect(tied.due(5_000, 500).map((p) => [p.target, p.image?.v?.S])).toEqual([['a', 'b']]);
    expect(tied.stats.dropped).toBe(1);
  });

  it('restores a local write that landed just before a replicated one, and copies it on', () => {
    const ctx = setup(['a', 'b', 'c']);
    const { book, tables, write } = ctx;
    everywhere(ctx, ['a', 'b', 'c'], 'a', 'k', 'v0', 500);
    tables.a?.set('k', item('k', 'a'));
    book.observe('a', T, keys('k'), item('k', 'a'), 1_000);
    // b writes locally after the book last read b's stream: the replicated write finds it.
    tables.b?.set('k', item('k', 'b-unseen'));
    for (const plan of book.due(1_500, 500).filter((p) => p.target === 'b')) write(plan, 1_500);
    expect(book.stats.races).toBe(1);
    // The restore is due in b at once; the copy to a after the lag; c's copy of a's write, due
    // now and not yet made, has the restore folded into it and stays due when a's was.
    const now = book.due(1_500, 500);
    expect(now.map((p) => [p.target, p.image?.v?.S]).sort()).toEqual([
      ['b', 'b-unseen'],
      ['c', 'b-unseen'],
    ]);
    for (const plan of now) write(plan, 1_500);
    expect(tables.b?.get('k')).toEqual(item('k', 'b-unseen'));
    for (const plan of book.due(2_100, 500)) write(plan, 2_100);
    for (const region of ['a', 'b', 'c']) expect(tables[region]?.get('k')).toEqual(item('k', 'b-unseen'));
    // b's stream then shows, in order: its own write, the replicated one, the restore. All consumed.
    expect(book.observe('b', T, keys('k'), item('k', 'b-unseen'), 2_200)).toBe('echo');
    expect(book.observe('b', T, keys('k'), item('k', 'a'), 2_200)).toBe('echo');
    expect(book.observe('b', T, keys('k'), item('k', 'b-unseen'), 2_200)).toBe('echo');
    expect(book.observe('a', T, keys('k'), item('k', 'b-unseen'), 2_200)).toBe('echo');
    expect(book.observe('c', T, keys('k'), item('k', 'b-unseen'), 2_200)).toBe('echo');
    expect(book.outstanding()).toEqual({ pending: 0, expected: 0 });
    expect(book.due(10_000, 500)).toEqual([]);
  });

  it('passes over older local records that come before an expected one', () => {
    const ctx = setup();
    const { book, tables, write } = ctx;
    everywhere(ctx, ['a', 'b'], 'a', 'k', 'v0', 500);
    tables.a?.set('k', item('k', 'a'));
    book.observe('a', T, keys('k'), item('k', 'a'), 1_000);
    tables.b?.set('k', item('k', 'b2'));
    for (const plan of book.due(1_500, 500)) write(plan, 1_500);
    // b wrote b1 then b2 before the replicated write; b1 was never seen and is already overtaken.
    expect(book.observe('b', T, keys('k'), item('k', 'b1'), 1_600)).toBe('superseded');
    expect(book.observe('b', T, keys('k'), item('k', 'b2'), 1_600)).toBe('echo');
  });

  it('takes an item it knows nothing of in the target for older than the write (an item idle long enough to be forgotten)', () => {
    const { book, tables, write } = setup();
    tables.b?.set('k', item('k', 'long-ago'));
    book.observe('a', T, keys('k'), item('k', 'a'), 1_000);
    for (const plan of book.due(1_500, 500)) write(plan, 1_500);
    expect(tables.b?.get('k')).toEqual(item('k', 'a'));
    expect(book.stats.races).toBe(0);
    expect(book.observe('b', T, keys('k'), item('k', 'a'), 1_600)).toBe('echo');
  });

  it('drops expected records full reads of the stream did not meet, once they are later than a record can be', () => {
    const { book, write } = setup();
    book.observe('a', T, keys('k'), item('k', '1'), 1_000);
    for (const plan of book.due(1_500, 500)) write(plan, 1_500);
    book.drained('b', T, 1_500); // started at the write's time: it may have missed it
    book.drained('b', T, 1_500 + LATE_RECORD_MS); // a busy DynamoDB Local may show it later still
    expect(book.outstanding().expected).toBe(1);
    book.drained('b', T, 1_501 + LATE_RECORD_MS);
    expect(book.outstanding().expected).toBe(0);
    expect(book.stats.expired).toBe(1);
    expect(book.observe('b', T, keys('k'), item('k', '2'), 9_000)).toBe('local');
  });

  it('never copies back its own write whose record came after its expectation was dropped, over a later write in the region it came from', () => {
    const { book, tables, write } = setup();
    // a writes 1; the copy to b is made, and b's stream shows its record only much later.
    tables.a?.set('k', item('k', '1'));
    book.observe('a', T, keys('k'), item('k', '1'), 1_000);
    for (const plan of book.due(1_500, 500)) write(plan, 1_500);
    book.drained('b', T, 1_501 + LATE_RECORD_MS);
    expect(book.stats.expired).toBe(1);
    // Meanwhile a writes 2 (a credit), read from a's stream.
    tables.a?.set('k', item('k', '2'));
    expect(book.observe('a', T, keys('k'), item('k', '2'), 7_000)).toBe('local');
    // b's late record of the copy: the replicator's own write, not b's.
    expect(book.observe('b', T, keys('k'), item('k', '1'), 7_100)).toBe('echo');
    expect(book.stats.late).toBe(1);
    for (const plan of book.due(60_000, 500)) write(plan, 60_000);
    expect(tables.a?.get('k')).toEqual(item('k', '2'));
    expect(tables.b?.get('k')).toEqual(item('k', '2'));
  });

  it('takes a record matching a later expected one for its own write, dropping the expected records before it', () => {
    const { book, tables, write } = setup();
    tables.a?.set('k', item('k', '1'));
    book.observe('a', T, keys('k'), item('k', '1'), 1_000);
    for (const plan of book.due(1_500, 500)) write(plan, 1_500);
    tables.a?.set('k', item('k', '2'));
    book.observe('a', T, keys('k'), item('k', '2'), 1_600);
    for (const plan of book.due(2_200, 500)) write(plan, 2_200);
    // b expects the records of both copies; the first never shows (a stream folds nothing, but a
    // DynamoDB Local restored from its file may have lost it): the second is still known as an echo.
    expect(book.observe('b', T, keys('k'), item('k', '2'), 2_300)).toBe('echo');
    expect(book.outstanding()).toEqual({ pending: 0, expected: 0 });
  });

  it('after a restart, takes records equal to a known version for echoes until the stream was read to its end', () => {
    const { book } = setup();
    book.observe('a', T, keys('k'), item('k', '1'), 1_000);
    const restarted = new ReplicationBook(['a', 'b'], JSON.parse(JSON.stringify(book.toJSON())));
    restarted.startReplay([T]);
    // b's copy was made after the last save: its record is read again, and is not b's own write.
    expect(restarted.observe('b', T, keys('k'), item('k', '1'), 2_000)).toBe('replayed');
    expect(restarted.due(5_000, 500).map((p) => p.target)).toEqual(['b']);
    restarted.drained('b', T, 2_100);
    expect(restarted.observe('b', T, keys('k'), item('k', '3'), 3_000)).toBe('local');
  });

  it('keeps writes due across a save and a restart', () => {
    const { book } = setup();
    book.observe('a', T, keys('k'), item('k', '1'), 1_000);
    const restarted = new ReplicationBook(['a', 'b'], JSON.parse(JSON.stringify(book.toJSON())));
    expect(restarted.due(1_500, 500)).toEqual(book.due(1_500, 500));
    expect(restarted.outstanding()).toEqual({ pending: 1, expected: 0 });
  });

  it('forgets idle items with nothing due or expected, and only those', () => {
    const { book, write } = setup();
    book.observe('a', T, keys('done'), item('done', '1'), 1_000);
    for (const plan of book.due(1_500, 500)) write(plan, 1_500);
    book.observe('b', T, keys('done'), item('done', '1'), 1_600);
    book.observe('a', T, keys('waiting'), item('waiting', '1'), 1_000);
    expect(book.prune(100_000, 10_000)).toBe(1);
    expect(book.size).toBe(1);
    expect(book.heldBy('a', T, keys('waiting'))).toMatchObject({ origin: 'a' });
  });

  it('forgets what a region held when its database was replaced', () => {
    const { book, write } = setup();
    book.observe('a', T, keys('k'), item('k', '1'), 1_000);
    for (const plan of book.due(1_500, 500)) write(plan, 1_500);
    book.forgetRegion('b');
    expect(book.heldBy('b', T, keys('k'))).toBeUndefined();
    expect(book.outstanding().expected).toBe(0);
  });
});
