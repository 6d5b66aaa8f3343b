/**
 * The store write map's arithmetic, pure: DynamoDB's item size and write-unit rules, the index
 * writes a base-table write causes (derived from the table schema, never from knowledge of the
 * layout), and the modelled ceilings: DynamoDB takes at most 1,000 write units per second on one
 * partition key value and on one item, so a key that takes `u` units per request caps the
 * traffic that writes it at `1000 / u` requests per second.
 *
 * Rules (DynamoDB developer guide, "Item sizes and formats", "Read/write capacity mode"):
 * - an item's size is the sum of its attribute names' UTF-8 lengths and its values' sizes: a
 *   string its UTF-8 bytes, a number 1 byte per two significant digits plus 1, binary its bytes,
 *   a boolean or null 1 byte, a list or map 3 bytes plus 1 byte and the size of each element (a
 *   map's element includes its name), a set the sum of its elements;
 * - a write costs 1 unit per KB of the item, rounded up (at least 1); a `PutItem` or `UpdateItem`
 *   counts the larger of the item before and after, a `DeleteItem` the item deleted; inside a
 *   transaction every write costs double;
 * - a global secondary index is written when the item has the index's keys before or after the
 *   write: one write when the index key stays, two (a delete and a put) when it moves; index
 *   writes cost 1 unit per KB of the entry (they are not transactional). An entry projecting ALL is
 *   the whole item; a KEYS_ONLY entry is the index's and the table's keys, and is written only when
 *   the item gains, loses or moves its index keys (a write that changes other attributes leaves it).
 */
import { OPEN_BY_EXPIRY, TABLES, type IndexSchema, type TableSchema } from '../lambdas/shared/schema';
import { EXPIRY_SHARDS, USAGE_SHARDS, allExpiryShards, allUsagePks, keyPk, monthPk, slicePk, windowKey } from '../lambdas/store/keys';
import { ROLLUP_SHARDS, allRollupPks, rollupPk, type RollupPeriod } from '../lambdas/store/rollups';

/** An attribute value in DynamoDB's JSON wire form. */
export interface WireValue {
  readonly S?: string;
  readonly N?: string;
  readonly B?: string;
  readonly BOOL?: boolean;
  readonly NULL?: boolean;
  readonly L?: readonly WireValue[];
  readonly M?: Readonly<Record<string, WireValue>>;
  readonly SS?: readonly string[];
  readonly NS?: readonly string[];
  readonly BS?: readonly string[];
}

/** An item (or a key) in DynamoDB's JSON wire form. */
export type WireItem = Readonly<Record<string, WireValue>>;

/** DynamoDB's size of a number: 1 byte per two significant digits, plus 1. */
export function numberSize(n: string): number {
  const digits = n.replace(/^[-+]/, '').replace(/[eE].*$/, '').replace('.', '').replace(/^0+/, '').replace(/0+$/, '');
  return Math.ceil(Math.max(1, digits.length) / 2) + 1;
}

const utf8 = (s: string): number => Buffer.byteLength(s, 'utf8');

/** DynamoDB's size of one attribute value, in bytes. */
export function valueSize(v: WireValue): number {
  if (v.S !== undefined) return utf8(v.S);
  if (v.N !== undefined) return numberSize(v.N);
  if (v.B !== undefined) return Buffer.from(v.B, 'base64').length;
  if (v.BOOL !== undefined || v.NULL !== undefined) return 1;
  if (v.L !== undefined) return 3 + v.L.reduce((sum, e) => sum + 1 + valueSize(e), 0);
  if (v.M !== undefined) return 3 + Object.entries(v.M).reduce((sum, [name, e]) => sum + 1 + utf8(name) + valueSize(e), 0);
  if (v.SS !== undefined) return v.SS.reduce((sum, s) => sum + utf8(s), 0);
  if (v.NS !== undefined) return v.NS.reduce((sum, s) => sum + numberSize(s), 0);
  if (v.BS !== undefined) return v.BS.reduce((sum, s) => sum + Buffer.from(s, 'base64').length, 0);
  return 0;
}

/** DynamoDB's size of an item: its attribute names and values. */
export function itemSize(item: WireItem): number {
  return Object.entries(item).reduce((sum, [name, v]) => sum + utf8(name) + valueSize(v), 0);
}

/** Write units of one write of an item of `bytes`: 1 per KB rounded up, at least 1; doubled in a transaction. */
export function writeUnits(bytes: number, transactional: boolean): number {
  return Math.max(1, Math.ceil(bytes / 1024)) * (transactional ? 2 : 1);
}

/** One item written, as the tap saw it. */
export interface ItemWrite {
  /** Who wrote it: the gateway or the aggregator. */
  readonly source: string;
  readonly op: 'Put' | 'Update' | 'Delete' | 'ConditionCheck';
  /** The table's schema name (`ledger`, `usage`, …). */
  readonly table: string;
  readonly transactional: boolean;
  /** The item's primary key. */
  readonly key: WireItem;
  /** The item before the write, when it existed (and was known). */
  readonly before?: WireItem;
  /** The item after the write; absent after a delete. */
  readonly after?: WireItem;
  /** Workspaces the write belongs to (their ids appear in it or in its call). */
  readonly workspaces: readonly string[];
  /** Units DynamoDB reported for this write alone, when it did (single-item calls). */
  readonly reportedUnits?: number;
}

/** One partition key value (of a table or an index) and one item, written for some units. */
export interface KeyWrite {
  readonly source: string;
  /** `ledger`, or `usage/byExpiryShard` for an index. */
  readonly target: string;
  /** `target pk=value`. */
  readonly partition: string;
  /** `target pk=value sk=value`, for base tables; the base item's key for an index entry. */
  readonly item: string;
  readonly units: number;
  readonly workspaces: readonly string[];
}

const show = (v: WireValue | undefined): string => (v === undefined ? '?' : (v.S ?? v.N ?? v.B ?? JSON.stringify(v)));

function keyText(schema: Pick<TableSchema, 'partitionKey' | 'sortKey'>, item: WireItem): string {
  const pk = `${schema.partitionKey.name}=${show(item[schema.partitionKey.name])}`;
  return schema.sortKey === undefined ? pk : `${pk} ${schema.sortKey.name}=${show(item[schema.sortKey.name])}`;
}

function indexed(index: IndexSchema, item: WireItem | undefined): boolean {
  return item !== undefined && item[index.partitionKey.name] !== undefined && (index.sortKey === undefined || item[index.sortKey.name] !== undefined);
}

function sameIndexKey(index: IndexSchema, a: WireItem, b: WireItem): boolean {
  const eq = (name: string): boolean => JSON.stringify(a[name]) === JSON.stringify(b[name]);
  return eq(index.partitionKey.name) && (index.sortKey === undefined || eq(index.sortKey.name));
}

/** The partition key values and items one base-table write puts units on: the table's, then each index's. */
export function keyWrites(w: ItemWrite, schema: TableSchema): KeyWrite[] {
  const size = Math.max(w.before === undefined ? 0 : itemSize(w.before), w.after === undefined ? 0 : itemSize(w.after), itemSize(w.key));
  const base = (img: WireItem): string => keyText(schema, img);
  const out: KeyWrite[] = [
    {
      source: w.source,
      target: schema.name,
      partition: `${schema.name} ${schema.partitionKey.name}=${show(w.key[schema.partitionKey.name])}`,
      item: `${schema.name} ${base(w.key)}`,
      units: w.reportedUnits ?? writeUnits(size, w.transactional),
      workspaces: w.workspaces,
    },
  ];
  if (w.op === 'ConditionCheck') return out;
  for (const index of schema.indexes) {
    const target = `${schema.name}/${index.indexName}`;
    const keysOnly = index.projection === 'KEYS_ONLY';
    // What the index entry holds: the whole item, or only the index's and the table's keys.
    const projected = (img: WireItem): WireItem => {
      if (!keysOnly) return img;
      const names = [schema.partitionKey, schema.sortKey, index.partitionKey, index.sortKey].filter((a): a is NonNullable<typeof a> => a !== undefined).map((a) => a.name);
      return Object.fromEntries(names.filter((n) => img[n] !== undefined).map((n) => [n, img[n] as WireValue]));
    };
    const entry = (img: WireItem): KeyWrite => ({
      source: w.source,
      target,
      partition: `${target} ${index.partitionKey.name}=${show(img[index.partitionKey.name])}`,
      item: `${target} ${base(w.key)}`,
      units: writeUnits(itemSize(projected(img)), false),
      workspaces: w.workspaces,
    });
    const was = indexed(index, w.before) ? w.before : undefined;
    const is = indexed(index, w.after) ? w.after : undefined;
    if (was !== undefined && is !== undefined && sameIndexKey(index, was, is)) {
      if (!keysOnly) out.push({ ...entry(is), units: writeUnits(Math.max(itemSize(was), itemSize(is)), false) });
    } else {
      if (was !== undefined) out.push(entry(was));
      if (is !== undefined) out.push(entry(is));
    }
  }
  return out;
}

/** DynamoDB's limit per partition key value and per item, write units per second. */
export const UNITS_PER_SECOND = 1_000;

/**
 * Keys by units per request, hottest first. `by` picks partition key values or items; `shared`
 * keeps only keys written more than once by more than one workspace's requests (or by none that
 * could be told), which are the keys whose load grows with the whole service's traffic.
 *
 * A partition key value that belongs to one of `families` counts toward its family, whose units
 * per request are its total over its shard count (uniform hashing); an item of such a partition
 * counts toward the family's item of the same sort key (a slice's `BALANCE` over all slices).
 */
export function hottest(writes: readonly KeyWrite[], requests: number, by: 'partition' | 'item', shared = false, families: readonly KeyFamily[] = []): HotKey[] {
  const familyOf = new Map<string, KeyFamily>();
  for (const f of families) for (const p of f.partitions) familyOf.set(p, f);
  interface Tally {
    units: number;
    writes: number;
    workspaces: Set<string>;
    sources: Set<string>;
    family?: KeyFamily;
    members: Map<string, number>;
  }
  const tally = new Map<string, Tally>();
  for (const w of writes) {
    const family = familyOf.get(w.partition);
    let k = by === 'partition' ? w.partition : w.item;
    if (family !== undefined) {
      if (by === 'partition') k = family.name;
      else if (w.item.startsWith(`${w.partition} `)) k = `${family.name}${w.item.slice(w.partition.length)}`;
    }
    const inFamily = family !== undefined && k !== (by === 'partition' ? w.partition : w.item);
    let t = tally.get(k);
    if (t === undefined) {
      t = { units: 0, writes: 0, workspaces: new Set(), sources: new Set(), members: new Map(), ...(inFamily ? { family } : {}) };
      tally.set(k, t);
    }
    t.units += w.units;
    t.writes += 1;
    for (const ws of w.workspaces) t.workspaces.add(ws);
    t.sources.add(w.source);
    if (inFamily) {
      const member = by === 'partition' ? w.partition : w.item;
      t.members.set(member, (t.members.get(member) ?? 0) + w.units);
    }
  }
  const n = Math.max(1, requests);
  const out: HotKey[] = [];
  for (const [key, t] of tally) {
    // A key written once in a run (a request's own marker, say) says nothing about a rate.
    if (shared && (t.workspaces.size === 1 || t.writes < 2)) continue;
    const shards = t.family === undefined ? 1 : Math.max(1, t.family.shards ?? t.family.partitions.length);
    const unitsPerRequest = t.units / n / shards;
    const hot: HotKey = { key, unitsPerRequest, ceilingRps: UNITS_PER_SECOND / unitsPerRequest, workspaces: t.workspaces.size, sources: [...t.sources].sort() };
    if (t.family === undefined) {
      out.push(hot);
      continue;
    }
    const [member, units] = [...t.members].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))[0] ?? [key, 0];
    out.push({ ...hot, shards, observed: { key: member, unitsPerRequest: units / n, ceilingRps: UNITS_PER_SECOND / (units / n) } });
  }
  return out.sort((a, b) => b.unitsPerRequest - a.unitsPerRequest || a.key.localeCompare(b.key));
}

/** The ceiling a run's hottest key sets, or null when no key qualifies (nothing binds). */
export function ceilingOf(keys: readonly HotKey[]): number | null {
  const top = keys[0];
  return top === undefined ? null : Math.floor(top.ceilingRps);
}

/**
 * A key family: partition key values that differ only by a shard number the store derives from a
 * hash (the open requests' expiry index shard, a workspace's usage partition, its escrow slice). DynamoDB
 * sees each value as its own key; the store spreads its writes over them by a hash of a fresh id,
 * so over a long run each value takes `1 / shards` of the family's units. A short run samples
 * that spread (192 holds over 256 shards put 3 on the busiest), so the family's ceiling is
 * modelled from its total, and the busiest value seen is kept beside it.
 */
export interface KeyFamily {
  /** How the family is shown: `usage/byExpiryShard expiryShard=X<0..255>`. */
  readonly name: string;
  /** Every partition key value of the family, as `KeyWrite.partition` spells it. */
  readonly partitions: readonly string[];
  /**
   * How many values' worth the traffic spreads over, when not all take an equal share: the hash
   * picks one of `n` choices and several choices may map to one value (the busiest value takes
   * `max multiplicity / n`, so this is `n / max multiplicity`). Default: `partitions.length`.
   */
  readonly shards?: number;
}

/** A family from `n` hash-picked choices, choice `i` landing on `partitionOf(i)`. */
export function familyOfChoices(name: string, n: number, partitionOf: (i: number) => string): KeyFamily {
  const counts = new Map<string, number>();
  for (let i = 0; i < n; i += 1) counts.set(partitionOf(i), (counts.get(partitionOf(i)) ?? 0) + 1);
  const most = Math.max(1, ...counts.values());
  return { name, partitions: [...counts.keys()], shards: n / most };
}

/** `KeyWrite.partition` for a value of a table's (or an index's) partition key. */
export function partitionText(target: string, attribute: string, value: string): string {
  return `${target} ${attribute}=${value}`;
}

/** The busiest member of a family in the run: what was observed, beside what is modelled. */
export interface ObservedKey {
  readonly key: string;
  readonly unitsPerRequest: number;
  readonly ceilingRps: number;
}

/** A key's load over one run. */
export interface HotKey {
  readonly key: string;
  /** For a family, its total units per request over its shards (the uniform-hashing model). */
  readonly unitsPerRequest: number;
  /** `1000 / unitsPerRequest`, requests per second. */
  readonly ceilingRps: number;
  /** How many workspaces' requests wrote it. */
  readonly workspaces: number;
  /** Who wrote it (`gateway`, `aggregator`). */
  readonly sources: readonly string[];
  /** For a key family: how many values it spreads over. */
  readonly shards?: number;
  /** For a key family: its busiest value in this run (a sample of the spread). */
  readonly observed?: ObservedKey;
}

/** A workspace of a load, with the slice count its ledger had. */
export interface FamilyWorkspace {
  readonly workspaceId: string;
  readonly slices: number;
  /** Its API keys' ids, for the families of a key's own items. */
  readonly keyIds?: readonly string[];
}

/**
 * The partition key values of an API key's own items (request counter, credit window): the
 * store's `windowKey` for each workspace slice, so a store that spreads a key's items by the
 * hold's slice is followed without the map knowing how (today: one value, `KEY#<ws>#<key>`).
 */
export function keyPartitions(workspaceId: string, keyId: string, slices: number): string[] {
  const ledger = TABLES.ledger;
  return Array.from({ length: Math.max(1, slices) }, (_, i) => partitionText(ledger.name, ledger.partitionKey.name, windowKey(workspaceId, i, `KEYWIN#${keyId}#0`).pk));
}

/**
 * The store's hash-sharded key families, from its own key functions and shard counts (so the map
 * follows the layout): the open requests' expiry index (`EXPIRY_SHARDS` values, from the id), each
 * workspace's usage partitions (`USAGE_SHARDS`, from the request id), and each workspace's escrow
 * slices and their month shares (its slice count; the admission picks a slice by a hash of the
 * hold id, uniform, except a BYOK request's, which takes slice 0: the bench sends none).
 */
export function storeFamilies(workspaces: readonly FamilyWorkspace[]): KeyFamily[] {
  const usage = TABLES.usage;
  const index = usage.indexes.find((i) => i.indexName === OPEN_BY_EXPIRY);
  const out: KeyFamily[] = [];
  if (index !== undefined) {
    const target = `${usage.name}/${index.indexName}`;
    const attr = index.partitionKey.name;
    out.push({ name: partitionText(target, attr, `X<0..${EXPIRY_SHARDS - 1}>`), partitions: allExpiryShards().map((v) => partitionText(target, attr, v)) });
  }
  const ledger = TABLES.ledger;
  for (const { workspaceId: ws, slices, keyIds } of workspaces) {
    out.push({ name: partitionText(usage.name, usage.partitionKey.name, `${ws}#U<0..${USAGE_SHARDS - 1}>`), partitions: allUsagePks(ws).map((v) => partitionText(usage.name, usage.partitionKey.name, v)) });
    const n = Math.max(1, slices);
    const range = Array.from({ length: n }, (_, i) => i);
    // One slice is one key: no family, the key stands as it is.
    if (n === 1) continue;
    for (const keyId of keyIds ?? []) {
      const own = keyPartitions(ws, keyId, n);
      const family = familyOfChoices(partitionText(ledger.name, ledger.partitionKey.name, `${keyPk(ws, keyId)} (key's slices)`), n, (i) => own[i] as string);
      if (family.partitions.length > 1) out.push(family);
    }
    out.push({ name: partitionText(ledger.name, ledger.partitionKey.name, `${slicePk(ws, 1).replace(/1$/, '')}<0..${n - 1}> (escrow slices)`), partitions: range.map((i) => partitionText(ledger.name, ledger.partitionKey.name, slicePk(ws, i))) });
    out.push({ name: partitionText(ledger.name, ledger.partitionKey.name, `${monthPk(ws, 1).replace(/1$/, '')}<0..${n - 1}> (month shares)`), partitions: range.map((i) => partitionText(ledger.name, ledger.partitionKey.name, monthPk(ws, i))) });
  }
  return out;
}

/** A workspace's day or month, whose rollups may be spread over shards. */
export interface RollupPeriodId {
  readonly period: RollupPeriod;
  readonly periodId: string;
}

/**
 * The aggregator's rollup shards of each workspace's periods, as families (the store's own
 * `allRollupPks`): a batch with many rows of one workspace writes one shard, picked by a hash of
 * its first row's request id, so a run of such batches spreads uniformly over
 * `ROLLUP_SHARDS`. A quiet workspace's batches all write shard 0, so a period is a family only
 * when the run wrote more than one of its shards (`written`: `KeyWrite.partition` values); the
 * others stand as the keys they are. A drain's last, partial batch may have stayed on shard 0:
 * at a sustained rate every batch is full, so the model counts it as spread.
 */
export function rollupFamilies(workspaces: readonly FamilyWorkspace[], periods: readonly RollupPeriodId[], written: ReadonlySet<string>): KeyFamily[] {
  const rollups = TABLES.rollups;
  const out: KeyFamily[] = [];
  for (const { workspaceId } of workspaces) {
    for (const { period, periodId } of periods) {
      const partitions = allRollupPks(workspaceId, period, periodId).map((v) => partitionText(rollups.name, rollups.partitionKey.name, v));
      if (partitions.filter((p) => written.has(p)).length < 2) continue;
      out.push({ name: partitionText(rollups.name, rollups.partitionKey.name, `${rollupPk(workspaceId, period, periodId)}[#R<1..${ROLLUP_SHARDS - 1}>] (rollup shards)`), partitions });
    }
  }
  return out;
}

/**
 * Read units of one read of `bytes` (DynamoDB developer guide, "Read/write capacity mode"): 1 per
 * 4 KB, rounded up (at least one step), for a strongly consistent read; half that eventually
 * consistent; double inside a transaction (TransactGetItems). A GetItem or BatchGetItem rounds
 * each item on its own (a missing item still costs one step); a Query or Scan rounds the total it
 * read once.
 */
export function readUnits(bytes: number, kind: 'eventual' | 'strong' | 'transactional'): number {
  const steps = Math.max(1, Math.ceil(bytes / 4096));
  return steps * (kind === 'eventual' ? 0.5 : kind === 'strong' ? 1 : 2);
}

/** One read call, as the tap saw it. */
export interface ReadCall {
  readonly source: string;
  /** `GetItem`, `BatchGetItem`, `TransactGetItems`, `Query`, `Scan`. */
  readonly op: string;
  /** Schema names of the tables read (`ledger`, `usage`, …). */
  readonly tables: readonly string[];
  readonly units: number;
  /** Items the call returned. */
  readonly items: number;
}

/**
 * How the usage stream's event source mapping hands records to the aggregator, and what the
 * traffic puts on the stream: what {@link rowsPerBatch} models a batch from.
 */
export interface StreamBatching {
  /** The mapping's batch size (records read per invocation, at most). */
  readonly batchSize: number;
  /** Its batching window, seconds (0: Lambda polls each shard about 4 times a second and invokes with what it found). */
  readonly windowSeconds: number;
  /** Stream records each request puts on the usage table's stream. */
  readonly recordsPerRequest: number;
  /** Of those, how many reach the function (the mapping's filter drops the rest) and carry a row to add. */
  readonly rowsPerRequest: number;
  /** Stream shards the records spread over (one per table partition). */
  readonly shards: number;
  /** Polls per second and shard when there is no batching window. @default 4 */
  readonly pollsPerSecond?: number;
}

/**
 * The rows one aggregator invocation gets at `rps` requests per second, in steady state: each
 * shard gathers `rps × recordsPerRequest / shards` records a second, for the batching window (or
 * one poll's worth without one), up to the batch size. The batch size is taken to count records
 * before the filter, which is the smaller (the conservative) reading of Lambda's documentation;
 * at least one row.
 */
export function rowsPerBatch(rps: number, b: StreamBatching): number {
  const perShard = (rps * b.recordsPerRequest) / Math.max(1, b.shards);
  const gathered = b.windowSeconds > 0 ? perShard * b.windowSeconds : perShard / (b.pollsPerSecond ?? 4);
  const records = Math.min(b.batchSize, gathered);
  return Math.max(1, Math.round((records * b.rowsPerRequest) / Math.max(1, b.recordsPerRequest)));
}

/** The sizes of the items a load wrote, by kind of item. */
export interface ItemSizes {
  /** Writes of this kind of item. */
  readonly writes: number;
  /** The largest item (before or after a write), bytes, and the mean over the writes. */
  readonly maxBytes: number;
  readonly meanBytes: number;
  /** Writes whose item was over 1 KB (each then costs 2 units or more, 4 in a transaction). */
  readonly overOneKb: number;
  /** Write units of these writes on the table (index entries not counted), in all. */
  readonly units: number;
}

/**
 * An item's kind, for {@link itemSizes}: its table and the leading part of its sort key
 * (`ledger BALANCE`, `ledger MONTH`, `rollups KEY`), a time-led sort key as `<time>`, a table
 * without one by its name.
 */
export function itemKind(w: Pick<ItemWrite, 'table' | 'key'>, schema: Pick<TableSchema, 'sortKey'>): string {
  if (schema.sortKey === undefined) return w.table;
  const sk = show(w.key[schema.sortKey.name]);
  const head = sk.split('#')[0] ?? sk;
  return `${w.table} ${/^\d/.test(head) ? '<time>' : head}`;
}

/** The sizes of every kind of item written, largest first. */
export function itemSizes(writes: readonly ItemWrite[], schemaOf: (table: string) => Pick<TableSchema, 'sortKey'>): Record<string, ItemSizes> {
  const by = new Map<string, { writes: number; max: number; total: number; over: number; units: number }>();
  for (const w of writes) {
    if (w.op === 'ConditionCheck') continue;
    const size = Math.max(w.before === undefined ? 0 : itemSize(w.before), w.after === undefined ? 0 : itemSize(w.after));
    const kind = itemKind(w, schemaOf(w.table));
    const t = by.get(kind) ?? { writes: 0, max: 0, total: 0, over: 0, units: 0 };
    t.writes += 1;
    t.max = Math.max(t.max, size);
    t.total += size;
    t.units += w.reportedUnits ?? writeUnits(Math.max(size, itemSize(w.key)), w.transactional);
    if (size > 1024) t.over += 1;
    by.set(kind, t);
  }
  const out: Record<string, ItemSizes> = {};
  for (const [kind, t] of [...by].sort((a, b) => b[1].max - a[1].max)) out[kind] = { writes: t.writes, maxBytes: t.max, meanBytes: t.total / Math.max(1, t.writes), overOneKb: t.over, units: t.units };
  return out;
}

/**
 * What one item write costs in another region that holds a replica of its table (a DynamoDB
 * global table, multi-Region eventual consistency). AWS's billing page for global tables: a write
 * to a replica table is billed as replicated write request units, "one rWRU per replica table ...
 * for each write up to 1KB", in every region holding a replica; updates to global secondary
 * indexes are billed as ordinary write units in each region, since each replica keeps its own
 * indexes; cross-Region data transfer is charged for the replication.
 *
 * - `units`: the table write in the other region, 1 unit per KB of the larger of the item before
 *   and after (the same item, replicated), **as a plain write**: AWS's pages do not say whether a
 *   transaction's writes are billed doubled where they are replicated to, and a replicated write
 *   is applied there item by item, not as a transaction ("Transactional writes are not replicated
 *   as a unit").
 * - `upperBoundUnits`: the same write billed as it was in its own region (doubled when it was
 *   transactional): the figure if AWS did bill the replicated copy of a transaction doubled.
 * - `indexUnits`: its index writes in the other region, the same entries as in its own
 *   (`keyWrites`), 1 unit per KB, never transactional.
 * - `bytes`: what replication carries, modelled as the item as written (its image after the
 *   write, or its key for a delete); AWS does not publish the replication's wire format.
 *
 * A `ConditionCheck` writes nothing, so nothing is replicated.
 */
export interface ReplicatedWrite {
  readonly units: number;
  readonly upperBoundUnits: number;
  readonly indexUnits: number;
  readonly bytes: number;
}

/** A write's cost in another region holding a replica; see {@link ReplicatedWrite}. */
export function replicatedWrite(w: ItemWrite, schema: TableSchema): ReplicatedWrite {
  if (w.op === 'ConditionCheck') return { units: 0, upperBoundUnits: 0, indexUnits: 0, bytes: 0 };
  const size = Math.max(w.before === undefined ? 0 : itemSize(w.before), w.after === undefined ? 0 : itemSize(w.after), itemSize(w.key));
  const indexUnits = keyWrites(w, schema)
    .slice(1)
    .reduce((s, k) => s + k.units, 0);
  return { units: writeUnits(size, false), upperBoundUnits: writeUnits(size, w.transactional), indexUnits, bytes: itemSize(w.after ?? w.key) };
}

/** The replicated figures of many writes, summed. */
export function replicatedWrites(writes: readonly ItemWrite[], schemaOf: (table: string) => TableSchema): ReplicatedWrite {
  const out = { units: 0, upperBoundUnits: 0, indexUnits: 0, bytes: 0 };
  for (const w of writes) {
    const r = replicatedWrite(w, schemaOf(w.table));
    out.units += r.units;
    out.upperBoundUnits += r.upperBoundUnits;
    out.indexUnits += r.indexUnits;
    out.bytes += r.bytes;
  }
  return out;
}
