/** The aggregator's arithmetic: rows summed per totals item, and batches cut to fit a transaction. */
import { chunkRows, ITEMS_PER_ROW, rollupShards, SPREAD_MIN_ROWS, sumRows, type UsageFacts } from '../../lambdas/aggregator/totals';
import { ROLLUP_SHARDS } from '../../lambdas/store/rollups';

const AT = Date.UTC(2026, 10, 30, 23, 59); // the last minute of November, UTC

function facts(over: Partial<UsageFacts> = {}): UsageFacts {
  return {
    workspaceId: 'ws_a',
    requestId: 'r',
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
  const rows = (n: number, make: (i: number) => Partial<UsageFacts>) => Array.from({ length: n }, (_, i) => ({ facts: facts({ requestId: `r${i}`, ...make(i) }) }));
  const size = (chunk: readonly { facts: UsageFacts }[]): number => chunk.length + sumRows(chunk.map((r) => r.facts)).length;

  it.each([
    ['one workspace, one key', rows(100, () => ({})), [94, 6]],
    ['one workspace, five keys', rows(100, (i) => ({ keyId: `k${i % 5}` })), [86, 14]],
    ['a workspace per row', rows(30, (i) => ({ workspaceId: `ws${i}` })), [14, 14, 2]],
    ['nothing', [], []],
  ] as const)('%s', (_name, input, lengths) => {
    const chunks = chunkRows(input);
    expect(chunks.map((c) => c.length)).toEqual(lengths);
    for (const c of chunks) expect(size(c)).toBeLessThanOrEqual(100);
    expect(chunks.flat()).toEqual(input);
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
