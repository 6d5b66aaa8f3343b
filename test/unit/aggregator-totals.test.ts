/** The aggregator's arithmetic: rows summed per totals item, and batches cut to fit a transaction. */
import { chunkRows, ITEMS_PER_ROW, rollupShards, seenGroupOf, SPREAD_MIN_ROWS, sumRows, type UsageFacts } from '../../lambdas/aggregator/totals';
import { usagePk } from '../../lambdas/store/keys';
import { MAX_SEEN_PER_GROUP, ROLLUP_SHARDS, SEEN_GROUP_MS, compactId, seenGroupPk } from '../../lambdas/store/rollups';

const AT = Date.UTC(2026, 10, 30, 23, 59); // the last minute of November, UTC

function facts(over: Partial<UsageFacts> = {}): UsageFacts {
  return {
    workspaceId: 'ws_a',
    requestId: 'r',
    usagePk: 'ws_a#U0',
    settledAt: AT,
    keyId: 'key_a',
    model: 'openai/gpt-x',
    outcome: 'ok',
    byok: false,
    startedAt: AT,
    inputTokens: 10,
    cachedInputTokens: 2,
    outputTokens: 5,
    reasoningTokens: 1,
    chargeMicros: 100,
    uncollectedMicros: 0,
    ...over,
  };
}

describe('sumRows', () => {
  it('adds every row to its day and month, overall, by key and by model', () => {
    const deltas = sumRows([facts(), facts({ requestId: 'r2', keyId: 'key_b', chargeMicros: 50, byok: true, outcome: 'swept', uncollectedMicros: 3 })]);
    const find = (period: string, sk: string) => deltas.find((d) => d.period === period && d.sk === sk);
    expect(deltas).toHaveLength(2 * 4); // ALL, two keys, one model; day and month
    expect(find('day', 'ALL')).toEqual({
      workspaceId: 'ws_a',
      period: 'day',
      periodId: '2026-11-30',
      sk: 'ALL',
      requests: 2,
      byokRequests: 1,
      inputTokens: 20,
      cachedInputTokens: 4,
      outputTokens: 10,
      reasoningTokens: 2,
      chargeMicros: 150,
      uncollectedMicros: 3,
      outcomes: { ok: 1, swept: 1 },
    });
    expect(find('month', 'KEY#key_b')).toMatchObject({ periodId: '2026-11', requests: 1, chargeMicros: 50 });
    expect(find('month', 'MODEL#openai/gpt-x')).toMatchObject({ requests: 2 });
  });

  it.each([
    ['another workspace', { workspaceId: 'ws_b' }, 2 * ITEMS_PER_ROW],
    ['the next day (and month), UTC', { startedAt: AT + 60_000 }, 2 * ITEMS_PER_ROW],
    ['another key', { keyId: 'key_b' }, ITEMS_PER_ROW + 2],
    ['another model', { model: 'anthropic/x' }, ITEMS_PER_ROW + 2],
    ['the same items', {}, ITEMS_PER_ROW],
  ] as const)('a second row in %s', (_name, over, items) => {
    expect(sumRows([facts(), facts({ requestId: 'r2', ...over })])).toHaveLength(items);
  });
});

describe('chunkRows', () => {
  // Each row in its own usage partition (as the store spreads them) unless `make` says otherwise.
  const rows = (n: number, make: (i: number) => Partial<UsageFacts>) =>
    Array.from({ length: n }, (_, i) => {
      const over = make(i);
      const ws = over.workspaceId ?? 'ws_a';
      return { facts: facts({ requestId: `r${i}`, usagePk: usagePk(ws, `r${i}`), ...over }) };
    });
  // A transaction's items: one update per group of counted rows, one per distinct totals item.
  const size = (chunk: readonly { facts: UsageFacts }[]): number => new Set(chunk.map((r) => seenGroupOf(r.facts))).size + sumRows(chunk.map((r) => r.facts)).length;
  const inGroup = (chunk: readonly { facts: UsageFacts }[]): number => Math.max(0, ...[...new Set(chunk.map((r) => seenGroupOf(r.facts)))].map((g) => chunk.filter((r) => seenGroupOf(r.facts) === g).length));

  it.each([
    // 100 rows over a workspace's 32 usage partitions: at most 32 groups and 6 or 14 totals.
    ['one workspace, one key', rows(100, () => ({})), [100]],
    ['one workspace, five keys', rows(100, (i) => ({ keyId: `k${i % 5}` })), [100]],
    // One group and six totals a row: 14 rows a transaction.
    ['a workspace per row', rows(30, (i) => ({ workspaceId: `ws${i}` })), [14, 14, 2]],
    // Every row in one group: at most MAX_SEEN_PER_GROUP of them in one condition.
    ['one usage partition and 20 s', rows(300, () => ({ usagePk: 'ws_a#U7' })), [MAX_SEEN_PER_GROUP, MAX_SEEN_PER_GROUP, 300 - 2 * MAX_SEEN_PER_GROUP]],
    // Settled over a minute: three groups of that partition.
    ['one usage partition over a minute', rows(90, (i) => ({ usagePk: 'ws_a#U7', settledAt: AT + i * 666 })), [90]],
    ['nothing', [], []],
  ] as const)('%s', (_name, input, lengths) => {
    const chunks = chunkRows(input);
    expect(chunks.map((c) => c.length)).toEqual(lengths);
    for (const c of chunks) expect(size(c)).toBeLessThanOrEqual(100);
    for (const c of chunks) expect(inGroup(c)).toBeLessThanOrEqual(MAX_SEEN_PER_GROUP);
    expect(chunks.flat()).toEqual(input);
  });
});

describe('groups of counted rows', () => {
  it('a row goes in its usage partition\'s group of 20 s of settlement times', () => {
    expect(seenGroupOf({ usagePk: 'ws_a#U3', settledAt: 40_000 })).toBe('SEEN#ws_a#U3#2');
    expect(seenGroupOf({ usagePk: 'ws_a#U3', settledAt: 59_999 })).toBe(seenGroupPk('ws_a#U3', 40_000));
    expect(seenGroupOf({ usagePk: 'ws_a#U3', settledAt: 60_000 })).not.toBe(seenGroupPk('ws_a#U3', 40_000));
    expect(SEEN_GROUP_MS).toBe(20_000);
  });

  it.each([
    ['a gateway id: its 12 bytes in 16 base64url characters', 'req_0192f1a2b3c4d5e6f708192a', 'AZLxorPE1eb3CBkq'],
    ['any other id as it is', 'r1', 'r1'],
    ['an id of another shape as it is', 'req_XYZ', 'req_XYZ'],
  ])('compactId: %s', (_name, id, compact) => {
    expect(compactId(id)).toBe(compact);
  });
});

describe('rollupShards: which rollup shard a workspace\'s batch writes', () => {
  const rowsOf = (ws: string, n: number, prefix = ws): UsageFacts[] => Array.from({ length: n }, (_, i) => facts({ workspaceId: ws, requestId: `${prefix}_${i}` }));
  it.each<[string, UsageFacts[], string[]]>([
    ['an empty batch', [], []],
    ['a quiet workspace (a few rows)', rowsOf('ws_q', 3), []],
    ['just under the spread threshold', rowsOf('ws_q', SPREAD_MIN_ROWS - 1), []],
    ['a hot workspace beside a quiet one', [...rowsOf('ws_h', SPREAD_MIN_ROWS), ...rowsOf('ws_q', 10)], ['ws_h']],
  ])('%s', (_name, rows, spreadable) => {
    const out = rollupShards(rows);
    for (const ws of out.keys()) expect(spreadable).toContain(ws);
    for (const shard of out.values()) expect(shard).toBeGreaterThan(0);
    for (const shard of out.values()) expect(shard).toBeLessThan(ROLLUP_SHARDS);
  });

  it('picks the same shard for the same batch, and spreads many batches over every shard', () => {
    const batch = rowsOf('ws_h', 80, 'b0');
    expect(rollupShards(batch)).toEqual(rollupShards([...batch]));
    const seen = new Set<number>();
    for (let b = 0; b < 200; b += 1) seen.add(rollupShards(rowsOf('ws_h', 80, `b${b}`)).get('ws_h') ?? 0);
    expect([...seen].sort()).toEqual(Array.from({ length: ROLLUP_SHARDS }, (_, i) => i));
  });

  it('puts a spread workspace\'s deltas on its shard and leaves the others on shard 0', () => {
    const rows = [...rowsOf('ws_h', 2), ...rowsOf('ws_q', 1)];
    const deltas = sumRows(rows, new Map([['ws_h', 5]]));
    expect(deltas.filter((d) => d.workspaceId === 'ws_h').every((d) => d.shard === 5)).toBe(true);
    expect(deltas.filter((d) => d.workspaceId === 'ws_q').every((d) => d.shard === undefined)).toBe(true);
    expect(deltas.find((d) => d.workspaceId === 'ws_h' && d.period === 'day' && d.sk === 'ALL')).toMatchObject({ requests: 2 });
  });
});
