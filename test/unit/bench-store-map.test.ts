/**
 * The store write map's arithmetic: DynamoDB's item sizes and write units, the index writes
 * derived from the table schema, and the ceilings drawn from a run's writes.
 */
import { ceilingOf, hottest, itemSize, keyWrites, numberSize, valueSize, writeUnits, type ItemWrite, type KeyWrite, type WireItem } from '../../bench/store-map-model';
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

describe('keyWrites: the table and its indexes, from the schema', () => {
  const holds: TableSchema = {
    name: 'holds',
    partitionKey: { name: 'holdId', type: 'S' },
    indexes: [{ indexName: 'byExpiry', partitionKey: { name: 'open', type: 'S' }, sortKey: { name: 'expiresAt', type: 'N' } }],
    stream: false,
  };
  const ledger: TableSchema = { name: 'ledger', partitionKey: { name: 'pk', type: 'S' }, sortKey: { name: 'sk', type: 'S' }, indexes: [], stream: false };
  const key: WireItem = { holdId: { S: 'req_1' } };
  const open = (expiresAt: string): WireItem => ({ ...key, open: { S: '1' }, expiresAt: { N: expiresAt }, workspaceId: { S: 'ws_a' } });
  const closed: WireItem = { ...key, workspaceId: { S: 'ws_a' } };
  const big: WireItem = { ...key, open: { S: '1' }, expiresAt: { N: '5' }, pad: { S: 'x'.repeat(1500) } };
  const write = (over: Partial<ItemWrite>): ItemWrite => ({ source: 'gateway', op: 'Put', table: 'holds', transactional: true, key, workspaces: ['ws_a'], ...over });
  const brief = (ws: readonly KeyWrite[]): [string, number][] => ws.map((w) => [w.partition, w.units]);

  it.each<[string, ItemWrite, TableSchema, [string, number][]]>([
    ['a put of an open hold: the table (doubled) and the index entry (not)', write({ after: open('100') }), holds, [
      ['holds holdId=req_1', 2],
      ['holds/byExpiry open=1', 1],
    ]],
    ['a delete of an open hold: the index entry goes too', write({ op: 'Delete', before: open('100') }), holds, [
      ['holds holdId=req_1', 2],
      ['holds/byExpiry open=1', 1],
    ]],
    ['an update that keeps the index key: one index write', write({ op: 'Update', before: open('100'), after: { ...open('100'), extra: { N: '1' } } }), holds, [
      ['holds holdId=req_1', 2],
      ['holds/byExpiry open=1', 1],
    ]],
    ['an update that moves the index key: a delete and a put', write({ op: 'Update', before: open('100'), after: open('200') }), holds, [
      ['holds holdId=req_1', 2],
      ['holds/byExpiry open=1', 1],
      ['holds/byExpiry open=1', 1],
    ]],
    ['an update that removes the index key: the entry is deleted', write({ op: 'Update', before: open('100'), after: closed }), holds, [
      ['holds holdId=req_1', 2],
      ['holds/byExpiry open=1', 1],
    ]],
    ['an item without the index key: no index write', write({ after: closed, transactional: false }), holds, [['holds holdId=req_1', 1]]],
    ['a large item: units by KB, the larger of before and after', write({ op: 'Update', before: big, after: open('5') }), holds, [
      ['holds holdId=req_1', 4],
      ['holds/byExpiry open=1', 2],
    ]],
    ['a table without indexes', write({ table: 'ledger', op: 'Update', key: { pk: { S: 'WS#a' }, sk: { S: 'BALANCE' } }, after: { pk: { S: 'WS#a' }, sk: { S: 'BALANCE' } } }), ledger, [['ledger pk=WS#a', 2]]],
    ['units DynamoDB reported win over the computed ones', write({ after: open('1'), transactional: false, reportedUnits: 3 }), holds, [
      ['holds holdId=req_1', 3],
      ['holds/byExpiry open=1', 1],
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
