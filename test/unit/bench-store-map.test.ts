/**
 * The store write map's arithmetic: DynamoDB's item sizes and write units, the index writes
 * derived from the table schema, and the ceilings drawn from a run's writes.
 */
import { ROLLUP_SHARDS, rollupPk } from '../../lambdas/store/rollups';
import {
  ceilingOf,
  familyOfChoices,
  hottest,
  itemKind,
  itemSize,
  itemSizes,
  keyPartitions,
  keyWrites,
  numberSize,
  partitionText,
  readUnits,
  replicatedWrite,
  replicatedWrites,
  rollupFamilies,
  rowsPerBatch,
  storeFamilies,
  valueSize,
  writeUnits,
  type ItemWrite,
  type KeyFamily,
  type KeyWrite,
  type StreamBatching,
  type WireItem,
} from '../../bench/store-map-model';
import { EXPIRY_SHARDS, USAGE_SHARDS, expiryShard, keyPk, monthPk, slicePk, usagePk, windowKey } from '../../lambdas/store/keys';
import type { TableSchema } from '../../lambdas/shared/schema';

describe('DynamoDB sizes', () => {
  it.each([
    ['0', 2],
    ['7', 2],
    ['12', 2],
    ['123', 3],
    ['-1234', 3],
    ['1000000', 2], // trailing zeroes are not significant
    ['0.000015', 2],
    ['3.14159', 4],
    ['12345678901234567890', 11],
  ])('the number %s takes %i bytes', (n, bytes) => {
    expect(numberSize(n)).toBe(bytes);
  });

  it.each([
    ['a string, by its UTF-8 bytes', { S: 'héllo' }, 6],
    ['binary, by its bytes', { B: Buffer.from([1, 2, 3, 4]).toString('base64') }, 4],
    ['a boolean', { BOOL: true }, 1],
    ['null', { NULL: true }, 1],
    ['an empty map', { M: {} }, 3],
    ['a map: 3 + per element 1 + name + value', { M: { a: { N: '1' }, bb: { S: 'xyz' } } }, 3 + (1 + 1 + 2) + (1 + 2 + 3)],
    ['a list: 3 + per element 1 + value', { L: [{ S: 'ab' }, { BOOL: false }] }, 3 + (1 + 2) + (1 + 1)],
    ['a string set', { SS: ['a', 'bc'] }, 3],
  ])('%s', (_name, value, bytes) => {
    expect(valueSize(value)).toBe(bytes);
  });

  it('an item is its names and values', () => {
    expect(itemSize({ pk: { S: 'WS#ws_1' }, sk: { S: 'BALANCE' }, availableMicros: { N: '1000' } })).toBe(2 + 7 + 2 + 7 + 15 + 2);
  });

  it.each([
    [0, false, 1],
    [1, false, 1],
    [1024, false, 1],
    [1025, false, 2],
    [3000, false, 3],
    [100, true, 2],
    [1025, true, 4],
  ])('%i bytes, transactional %s: %i units', (bytes, transactional, units) => {
    expect(writeUnits(bytes, transactional)).toBe(units);
  });
});

// A table of open holds with an ALL index (the layout before requests' rows), its keys-only twin, and its items.
const holds: TableSchema = {
  name: 'usage',
  partitionKey: { name: 'holdId', type: 'S' },
  indexes: [{ indexName: 'byExpiry', partitionKey: { name: 'open', type: 'S' }, sortKey: { name: 'expiresAt', type: 'N' } }],
  stream: false,
};
const keysOnly: TableSchema = { ...holds, indexes: [{ ...(holds.indexes[0] as TableSchema['indexes'][number]), projection: 'KEYS_ONLY' }] };
const key: WireItem = { holdId: { S: 'req_1' } };
const open = (expiresAt: string): WireItem => ({ ...key, open: { S: '1' }, expiresAt: { N: expiresAt }, workspaceId: { S: 'ws_a' } });
const closed: WireItem = { ...key, workspaceId: { S: 'ws_a' } };
const big: WireItem = { ...key, open: { S: '1' }, expiresAt: { N: '5' }, pad: { S: 'x'.repeat(1500) } };

describe('keyWrites: the table and its indexes, from the schema', () => {
  const ledger: TableSchema = { name: 'ledger', partitionKey: { name: 'pk', type: 'S' }, sortKey: { name: 'sk', type: 'S' }, indexes: [], stream: false };
  const write = (over: Partial<ItemWrite>): ItemWrite => ({ source: 'gateway', op: 'Put', table: 'usage', transactional: true, key, workspaces: ['ws_a'], ...over });
  const brief = (ws: readonly KeyWrite[]): [string, number][] => ws.map((w) => [w.partition, w.units]);

  it.each<[string, ItemWrite, TableSchema, [string, number][]]>([
    ['a put of an open hold: the table (doubled) and the index entry (not)', write({ after: open('100') }), holds, [
      ['usage holdId=req_1', 2],
      ['usage/byExpiry open=1', 1],
    ]],
    ['a delete of an open hold: the index entry goes too', write({ op: 'Delete', before: open('100') }), holds, [
      ['usage holdId=req_1', 2],
      ['usage/byExpiry open=1', 1],
    ]],
    ['an update that keeps the index key: one index write', write({ op: 'Update', before: open('100'), after: { ...open('100'), extra: { N: '1' } } }), holds, [
      ['usage holdId=req_1', 2],
      ['usage/byExpiry open=1', 1],
    ]],
    ['an update that moves the index key: a delete and a put', write({ op: 'Update', before: open('100'), after: open('200') }), holds, [
      ['usage holdId=req_1', 2],
      ['usage/byExpiry open=1', 1],
      ['usage/byExpiry open=1', 1],
    ]],
    ['an update that removes the index key: the entry is deleted', write({ op: 'Update', before: open('100'), after: closed }), holds, [
      ['usage holdId=req_1', 2],
      ['usage/byExpiry open=1', 1],
    ]],
    ['an item without the index key: no index write', write({ after: closed, transactional: false }), holds, [['usage holdId=req_1', 1]]],
    ['a large item: units by KB, the larger of before and after', write({ op: 'Update', before: big, after: open('5') }), holds, [
      ['usage holdId=req_1', 4],
      ['usage/byExpiry open=1', 2],
    ]],
    ['a table without indexes', write({ table: 'ledger', op: 'Update', key: { pk: { S: 'WS#a' }, sk: { S: 'BALANCE' } }, after: { pk: { S: 'WS#a' }, sk: { S: 'BALANCE' } } }), ledger, [['ledger pk=WS#a', 2]]],
    ['units DynamoDB reported win over the computed ones', write({ after: open('1'), transactional: false, reportedUnits: 3 }), holds, [
      ['usage holdId=req_1', 3],
      ['usage/byExpiry open=1', 1],
    ]],
    // Keys only: the entry is the keys, written when the item gains, loses or moves its index key.
    ['keys only: a put of an open hold writes its entry', write({ after: open('100') }), keysOnly, [
      ['usage holdId=req_1', 2],
      ['usage/byExpiry open=1', 1],
    ]],
    ['keys only: an update that keeps the index key writes no entry', write({ op: 'Update', before: open('100'), after: { ...open('100'), extra: { N: '1' } } }), keysOnly, [['usage holdId=req_1', 2]]],
    ['keys only: an update that removes the index key deletes the entry', write({ op: 'Update', before: open('100'), after: closed }), keysOnly, [
      ['usage holdId=req_1', 2],
      ['usage/byExpiry open=1', 1],
    ]],
    ['keys only: a large item\'s entry is its keys, one unit', write({ op: 'Update', before: big, after: closed }), keysOnly, [
      ['usage holdId=req_1', 4],
      ['usage/byExpiry open=1', 1],
    ]],
  ])('%s', (_name, w, schema, expected) => {
    expect(brief(keyWrites(w, schema))).toEqual(expected);
  });

  it('names the item by the whole primary key', () => {
    const [w] = keyWrites(write({ table: 'ledger', key: { pk: { S: 'WS#a' }, sk: { S: 'MONTH#2026-11' } }, after: { pk: { S: 'WS#a' }, sk: { S: 'MONTH#2026-11' } } }), ledger);
    expect(w?.item).toBe('ledger pk=WS#a sk=MONTH#2026-11');
  });
});

describe('hottest keys and ceilings', () => {
  const kw = (partition: string, item: string, units: number, workspaces: string[]): KeyWrite => ({ source: 'gateway', target: partition.split(' ')[0] as string, partition, item, units, workspaces });
  // Four requests, of two workspaces: a shared index key taking 2 units each, each workspace's partition 14.
  const writes: KeyWrite[] = [
    ...[0, 1, 2, 3].map((i) => kw('holds/byExpiry open=1', `holds/byExpiry holdId=r${i}`, 2, [i < 2 ? 'ws_a' : 'ws_b'])),
    ...[0, 1].flatMap(() => [kw('ledger pk=WS#a', 'ledger pk=WS#a sk=BALANCE', 8, ['ws_a']), kw('ledger pk=WS#a', 'ledger pk=WS#a sk=MONTH', 6, ['ws_a'])]),
    ...[0, 1].flatMap(() => [kw('ledger pk=WS#b', 'ledger pk=WS#b sk=BALANCE', 8, ['ws_b']), kw('ledger pk=WS#b', 'ledger pk=WS#b sk=MONTH', 6, ['ws_b'])]),
  ];

  it('ranks partition key values by units per request', () => {
    const top = hottest(writes, 4, 'partition');
    expect(top.map((h) => [h.key, h.unitsPerRequest, h.workspaces])).toEqual([
      ['ledger pk=WS#a', 7, 1],
      ['ledger pk=WS#b', 7, 1],
      ['holds/byExpiry open=1', 2, 2],
    ]);
    expect(ceilingOf(top)).toBe(142);
  });

  it('the service ceiling counts only keys written by more than one workspace', () => {
    const shared = hottest(writes, 4, 'partition', true);
    expect(shared.map((h) => h.key)).toEqual(['holds/byExpiry open=1']);
    expect(ceilingOf(shared)).toBe(500);
    expect(ceilingOf(hottest(writes, 4, 'item', true))).toBeNull();
  });

  it('a key written once (a request\'s own marker) is no shared key, whoever wrote it', () => {
    const once = [...writes, kw('rollups pk=SEEN#r9', 'rollups pk=SEEN#r9 sk=SEEN', 400, [])];
    expect(hottest(once, 4, 'partition', true).map((h) => h.key)).toEqual(['holds/byExpiry open=1']);
    const twice = [...once, kw('rollups pk=SEEN#r9', 'rollups pk=SEEN#r9 sk=SEEN', 400, [])];
    expect(hottest(twice, 4, 'partition', true).map((h) => h.key)).toEqual(['rollups pk=SEEN#r9', 'holds/byExpiry open=1']);
  });

  it('ranks items separately', () => {
    const top = hottest(writes, 4, 'item');
    expect(top[0]).toMatchObject({ key: 'ledger pk=WS#a sk=BALANCE', unitsPerRequest: 4, ceilingRps: 250 });
  });
});

describe('key families: hash-sharded keys modelled over their shard count', () => {
  const kw = (partition: string, item: string, units: number, workspaces: string[]): KeyWrite => ({ source: 'gateway', target: partition.split(' ')[0] as string, partition, item, units, workspaces });
  const family = (name: string, shards: number, value: (i: number) => string): KeyFamily => ({ name, partitions: Array.from({ length: shards }, (_, i) => partitionText('holds/byX', 'shard', value(i))) });

  it.each([
    // [shards, holds (one request each, 2 units on its shard), shards they land on, modelled units per request, modelled ceiling, busiest seen]
    [256, 192, 64, 2 / 256, 128_000, 'holds/byX shard=X0'],
    [32, 64, 2, 2 / 32, 16_000, 'holds/byX shard=X0'],
    [4, 8, 1, 2 / 4, 2_000, 'holds/byX shard=X0'],
  ])('%i shards: total units over the shard count, whatever the sample put on one (%i requests on %i shard(s))', (shards, requests, landed, perRequest, ceiling, busiest) => {
    const f = family('holds/byX shard=X<n>', shards, (i) => `X${i}`);
    // A skewed sample: every hold on the first `landed` shards, the first shard taking the most.
    const writes = Array.from({ length: requests }, (_, r) => kw(partitionText('holds/byX', 'shard', `X${r % (landed + 1) === landed ? 0 : r % (landed + 1)}`), `holds/byX holdId=h${r}`, 2, [r % 2 === 0 ? 'ws_a' : 'ws_b']));
    const [top] = hottest(writes, requests, 'partition', true, [f]);
    expect(top).toMatchObject({ key: 'holds/byX shard=X<n>', shards, workspaces: 2 });
    expect(top?.unitsPerRequest).toBeCloseTo(perRequest, 12);
    expect(ceilingOf(hottest(writes, requests, 'partition', true, [f]))).toBe(ceiling);
    expect(top?.observed?.key).toBe(busiest);
    // The busiest shard seen took more than its uniform share: printed, not used for the ceiling.
    expect(top?.observed?.unitsPerRequest ?? 0).toBeGreaterThan(perRequest);
  });

  it('a family\'s items of one sort key are spread too; items outside the partition (index entries) stay as they are', () => {
    const f = family('holds/byX shard=S<n>', 48, (i) => `S${i}`);
    const writes = [
      ...Array.from({ length: 96 }, (_, r) => kw(partitionText('holds/byX', 'shard', `S${r % 48}`), `holds/byX shard=S${r % 48} sk=BALANCE`, 8, ['ws_a'])),
      kw(partitionText('holds/byX', 'shard', 'S0'), 'holds/byX holdId=h1', 1, ['ws_a']),
    ];
    const items = hottest(writes, 96, 'item', false, [f]);
    expect(items[0]).toMatchObject({ key: 'holds/byX shard=S<n> sk=BALANCE', shards: 48 });
    expect(items[0]?.unitsPerRequest).toBeCloseTo(8 / 48, 12);
    expect(Math.floor(items[0]?.ceilingRps ?? 0)).toBe(6_000);
    expect(items[1]).toMatchObject({ key: 'holds/byX holdId=h1' });
    expect(items[1]?.shards).toBeUndefined();
    const partitions = hottest(writes, 96, 'partition', false, [f]);
    expect(partitions).toHaveLength(1);
    expect(partitions[0]?.unitsPerRequest).toBeCloseTo((96 * 8 + 1) / 96 / 48, 12);
  });

  it('a key outside every family keeps its own ceiling', () => {
    const f = family('holds/byX shard=X<n>', 256, (i) => `X${i}`);
    const writes = [kw('ledger pk=WS#a', 'ledger pk=WS#a sk=BALANCE', 8, ['ws_a']), kw('ledger pk=WS#a', 'ledger pk=WS#a sk=BALANCE', 8, ['ws_a'])];
    const [top] = hottest(writes, 4, 'partition', false, [f]);
    expect(top).toMatchObject({ key: 'ledger pk=WS#a', unitsPerRequest: 4, ceilingRps: 250 });
    expect(top?.shards).toBeUndefined();
  });
});

describe('storeFamilies: from the store\'s own key functions and shard counts', () => {
  const families = storeFamilies([
    { workspaceId: 'ws_one', slices: 1 },
    { workspaceId: 'ws_many', slices: 48 },
  ]);
  const holding = (partition: string): KeyFamily | undefined => families.find((f) => f.partitions.includes(partition));

  it.each([
    ['the expiry index shard of an open request', partitionText('usage/byExpiryShard', 'expiryShard', expiryShard('h_123')), EXPIRY_SHARDS],
    ['a usage partition of a one-slice workspace', partitionText('usage', 'pk', usagePk('ws_one', 'r_1')), USAGE_SHARDS],
    ['a usage partition of a sliced workspace', partitionText('usage', 'pk', usagePk('ws_many', 'r_2')), USAGE_SHARDS],
    ['slice 0 of a sliced workspace (its historical key)', partitionText('ledger', 'pk', slicePk('ws_many', 0)), 48],
    ['slice 47 of a sliced workspace', partitionText('ledger', 'pk', slicePk('ws_many', 47)), 48],
    ['a month share of a sliced workspace', partitionText('ledger', 'pk', monthPk('ws_many', 13)), 48],
  ])('%s is in a family of its shard count', (_what, partition, shards) => {
    expect(holding(partition)?.partitions).toHaveLength(shards);
  });

  it.each([
    ['a one-slice workspace\'s slice: one key, no family', partitionText('ledger', 'pk', slicePk('ws_one', 0))],
    ['a one-slice workspace\'s month share', partitionText('ledger', 'pk', monthPk('ws_one', 0))],
    ['a slice past the workspace\'s count', partitionText('ledger', 'pk', slicePk('ws_many', 48))],
    ['another workspace\'s usage', partitionText('usage', 'pk', usagePk('ws_other', 'r_1'))],
  ])('%s is in none', (_what, partition) => {
    expect(holding(partition)).toBeUndefined();
  });

  it('the expiry index family is the one the schema names', () => {
    expect(families[0]?.name).toBe(`usage/byExpiryShard expiryShard=X<0..${EXPIRY_SHARDS - 1}>`);
    expect(families[0]?.partitions[0]).toBe('usage/byExpiryShard expiryShard=X0');
  });
});

describe('familyOfChoices: hash-picked choices that share values', () => {
  it.each([
    // [choices, values (choice i lands on i mod values), distinct values, effective shards]
    [48, 48, 48, 48],
    [48, 8, 8, 8], // six choices on each value: 1/8 each
    [12, 8, 8, 6], // values 0-3 take two choices each: the busiest takes 2/12
    [5, 1, 1, 1],
  ])('%i choices over %i values: %i values, %i shards', (choices, values, distinct, shards) => {
    const f = familyOfChoices('f', choices, (i) => `t pk=V${i % values}`);
    expect(f.partitions).toHaveLength(distinct);
    expect(f.shards).toBe(shards);
  });

  it('the busiest value\'s share sets the ceiling', () => {
    const f = familyOfChoices('t pk=V<n>', 12, (i) => `t pk=V${i % 8}`);
    const writes: KeyWrite[] = Array.from({ length: 12 }, (_, i) => ({ source: 'gateway', target: 't', partition: `t pk=V${i % 8}`, item: `t pk=V${i % 8} sk=A`, units: 6, workspaces: ['ws'] }));
    const [top] = hottest(writes, 12, 'partition', false, [f]);
    // 6 units per request over 6 effective shards: 1 unit each, 1,000 req/s (V0 takes 2 of 12 requests).
    expect(top?.unitsPerRequest).toBeCloseTo(1, 12);
    expect(ceilingOf([top as NonNullable<typeof top>])).toBe(1_000);
  });
});

describe('keyPartitions: a key\'s own partitions, as the store places them', () => {
  it('follows windowKey for every workspace slice', () => {
    const pks = new Set(Array.from({ length: 48 }, (_, i) => windowKey('ws_a', i, 'KEYWIN#key_1#0').pk));
    expect(new Set(keyPartitions('ws_a', 'key_1', 48))).toEqual(new Set([...pks].map((pk) => partitionText('ledger', 'pk', pk))));
    expect(keyPartitions('ws_a', 'key_1', 1)).toEqual([partitionText('ledger', 'pk', keyPk('ws_a', 'key_1'))]);
  });

  it('a key family exists only when its items spread over more than one value', () => {
    const spread = new Set(keyPartitions('ws_a', 'key_1', 48)).size;
    const families = storeFamilies([{ workspaceId: 'ws_a', slices: 48, keyIds: ['key_1'] }]);
    const keyFamily = families.find((f) => f.partitions.includes(partitionText('ledger', 'pk', keyPk('ws_a', 'key_1'))));
    if (spread === 1) expect(keyFamily).toBeUndefined();
    else expect(keyFamily?.partitions).toHaveLength(spread);
  });
});

describe('rollupFamilies: a hot workspace\'s rollup shards, from the store\'s own key functions', () => {
  const pk = (v: string): string => partitionText('rollups', 'pk', v);
  const periods = [
    { period: 'day' as const, periodId: '2027-02-13' },
    { period: 'month' as const, periodId: '2027-02' },
  ];
  it.each<[string, string[], number]>([
    ['nothing written', [], 0],
    ['a quiet workspace: shard 0 only', [pk(rollupPk('ws_a', 'day', '2027-02-13'))], 0],
    ['a spread day', [pk(rollupPk('ws_a', 'day', '2027-02-13')), pk(rollupPk('ws_a', 'day', '2027-02-13', 3))], 1],
    ['a spread day and month', [pk(rollupPk('ws_a', 'day', '2027-02-13', 1)), pk(rollupPk('ws_a', 'day', '2027-02-13', 3)), pk(rollupPk('ws_a', 'month', '2027-02', 2)), pk(rollupPk('ws_a', 'month', '2027-02'))], 2],
  ])('%s', (_name, written, count) => {
    const families = rollupFamilies([{ workspaceId: 'ws_a', slices: 1 }], periods, new Set(written));
    expect(families).toHaveLength(count);
    for (const f of families) expect(f.partitions).toHaveLength(ROLLUP_SHARDS);
  });

  it('models a spread day from its total over the shards', () => {
    const written = Array.from({ length: 16 }, (_, b) => pk(rollupPk('ws_a', 'day', '2027-02-13', b % ROLLUP_SHARDS)));
    const families = rollupFamilies([{ workspaceId: 'ws_a', slices: 1 }], periods, new Set(written));
    // 16 batches of 50 rows, 7 day items each, 2 units each.
    const writes: KeyWrite[] = written.flatMap((p) => Array.from({ length: 7 }, (_, i) => ({ source: 'aggregator', target: 'rollups', partition: p, item: `${p} sk=I${i}`, units: 2, workspaces: ['ws_a'] })));
    const [top] = hottest(writes, 16 * 50, 'partition', false, families);
    expect(top?.shards).toBe(ROLLUP_SHARDS);
    expect(top?.unitsPerRequest).toBeCloseTo(0.28 / ROLLUP_SHARDS, 12);
  });
});

describe('read units', () => {
  it.each<[number, 'eventual' | 'strong' | 'transactional', number]>([
    [0, 'eventual', 0.5],
    [0, 'strong', 1],
    [4096, 'strong', 1],
    [4097, 'strong', 2],
    [9000, 'eventual', 1.5],
    [100, 'transactional', 2],
    [8193, 'transactional', 6],
  ])('%i bytes, %s: %d units', (bytes, kind, units) => {
    expect(readUnits(bytes, kind)).toBe(units);
  });
});

describe('rowsPerBatch: the aggregator\'s batches, from the mapping and the traffic', () => {
  const today: StreamBatching = { batchSize: 100, windowSeconds: 0, recordsPerRequest: 1, rowsPerRequest: 1, shards: 4 };
  const windowed: StreamBatching = { batchSize: 1000, windowSeconds: 30, recordsPerRequest: 2, rowsPerRequest: 1, shards: 4 };
  it.each<[string, StreamBatching, number, number]>([
    // No window: a poll's worth, four polls a second per shard.
    ['no window, 10 req/s: a row at a time', today, 10, 1],
    ['no window, 100 req/s', today, 100, 6],
    ['no window, 1,000 req/s', today, 1000, 63],
    ['no window, 100,000 req/s: the batch size binds', today, 100_000, 100],
    // A 30 s window gathers 30 s of a shard's records, up to the batch size counted before the filter.
    ['a window, 10 req/s', windowed, 10, 75],
    ['a window, 100 req/s: the batch size binds (records, half of them rows)', windowed, 100, 500],
    ['a window, 1,000 req/s', windowed, 1000, 500],
  ])('%s', (_name, b, rps, rows) => {
    expect(rowsPerBatch(rps, b)).toBe(rows);
  });
});

describe('itemSizes: what a load wrote, by kind of item', () => {
  const ledger = { sortKey: { name: 'sk', type: 'S' as const } };
  const w = (sk: string, bytes: number): ItemWrite => ({
    source: 'gateway',
    op: 'Update',
    table: 'ledger',
    transactional: true,
    key: { pk: { S: 'WS#a' }, sk: { S: sk } },
    after: { pad: { S: 'x'.repeat(bytes - 3) } },
    workspaces: ['a'],
  });
  it('names a kind by its table and the head of its sort key', () => {
    expect(itemKind(w('BALANCE', 10), ledger)).toBe('ledger BALANCE');
    expect(itemKind(w('MONTH#2027-02', 10), ledger)).toBe('ledger MONTH');
    expect(itemKind(w('2027-02-13T10:00:00.000Z#req_1', 10), ledger)).toBe('ledger <time>');
    expect(itemKind({ table: 'holds', key: { holdId: { S: 'h' } } }, {})).toBe('holds');
  });
  it('gives the largest, the mean and the writes over 1 KB, largest kind first', () => {
    const sizes = itemSizes([w('BALANCE', 900), w('BALANCE', 1100), w('MONTH#2027-02', 200)], () => ledger);
    expect(Object.keys(sizes)).toEqual(['ledger BALANCE', 'ledger MONTH']);
    expect(sizes['ledger BALANCE']).toEqual({ writes: 2, maxBytes: 1100, meanBytes: 1000, overOneKb: 1, units: 2 + 4 });
  });
});

describe('replicated writes: what a second region is billed for a write (global tables)', () => {
  const write = (over: Partial<ItemWrite>): ItemWrite => ({ source: 'gateway', op: 'Put', table: 'usage', transactional: true, key, workspaces: ['ws_a'], ...over });

  it.each<[string, ItemWrite, TableSchema, { units: number; upperBoundUnits: number; indexUnits: number; bytes: number }]>([
    // A transaction's put: 2 units where it runs; replicated, 1 as a plain write (2 if AWS bills the copy doubled), and the index entry there.
    ['a transactional put of an open hold', write({ after: open('100') }), holds, { units: 1, upperBoundUnits: 2, indexUnits: 1, bytes: itemSize(open('100')) }],
    ['a plain put: the same units in both regions', write({ after: open('100'), transactional: false }), holds, { units: 1, upperBoundUnits: 1, indexUnits: 1, bytes: itemSize(open('100')) }],
    ['a delete: its key replicated, the index entry deleted there too', write({ op: 'Delete', before: open('100') }), holds, { units: 1, upperBoundUnits: 2, indexUnits: 1, bytes: itemSize(key) }],
    ['an update that moves the index key: two index writes there', write({ op: 'Update', before: open('100'), after: open('200') }), holds, { units: 1, upperBoundUnits: 2, indexUnits: 2, bytes: itemSize(open('200')) }],
    ['a large item: units by KB of the larger image', write({ op: 'Update', before: big, after: open('5') }), holds, { units: 2, upperBoundUnits: 4, indexUnits: 2, bytes: itemSize(open('5')) }],
    ['keys only, the index key kept: no index write there', write({ op: 'Update', before: open('100'), after: { ...open('100'), extra: { N: '1' } } }), keysOnly, { units: 1, upperBoundUnits: 2, indexUnits: 0, bytes: itemSize({ ...open('100'), extra: { N: '1' } }) }],
    ['a condition check writes nothing, so nothing is replicated', write({ op: 'ConditionCheck', before: open('100'), after: open('100') }), holds, { units: 0, upperBoundUnits: 0, indexUnits: 0, bytes: 0 }],
  ])('%s', (_name, w, schema, expected) => {
    expect(replicatedWrite(w, schema)).toEqual(expected);
  });

  it('DynamoDB Local\'s reported units do not change what the other region is billed', () => {
    expect(replicatedWrite(write({ after: open('1'), transactional: false, reportedUnits: 3 }), holds).units).toBe(1);
  });

  it('sums a load\'s writes', () => {
    const writes = [write({ after: open('100') }), write({ op: 'Update', before: open('100'), after: closed }), write({ op: 'ConditionCheck', before: closed })];
    expect(replicatedWrites(writes, () => holds)).toEqual({ units: 2, upperBoundUnits: 4, indexUnits: 2, bytes: itemSize(open('100')) + itemSize(closed) });
  });
});
