/**
 * The store write map: every DynamoDB write the running gateway and the aggregator make, by
 * table, partition key value (index keys included) and item, with its write units, and every read
 * with its read units, under several loads: many workspaces; one workspace with five keys at
 * concurrency 64, on one slice and on 48; one key; and the two workspaces the write-unit goals are
 * stated for (one that sets no limit beyond the per-key request rate, one that sets every limit),
 * each measured at steady state (a minute of traffic every second first, so its slice item carries
 * the spend-rate slots a long run keeps). From it, the modelled ceilings: DynamoDB takes at most
 * 1,000 write units per second on one partition key value and on one item, so
 * `1000 / units per request` on the hottest one bounds the traffic that writes it
 * (`store-map-model.ts`). Then, locally, transaction conflicts per admission and throughput for one
 * workspace at concurrency 64 against 64 workspaces.
 *
 * The stack is the benchmark's own (DynamoDB Local, the simulator and the bundled gateway, each in
 * its own process, stopped by PID), with the gateway's and the aggregator's DynamoDB endpoint
 * pointed at a recording tap (`store-map-tap.ts`). The aggregator is the real `aggregate`, three
 * times over, each fed by a local stream poller of its own into a rollups table of its own, at the
 * batch size the deployed mapping hands it at 10, 100 and 1,000 requests per second (modelled from
 * its batch size and batching window, `rowsPerBatch`), drained after each load so its writes count
 * against that load. The sweeper runs once at the end, idle, for what a run reads.
 *
 *   npx tsx bench/store-map.ts [--quick] [--conflicts-only | --goals-only] [--conflict-window-ms=10]   on its own
 *   npm run bench -- --store-map-only [--quick]
 *
 * Output: a table on stderr/stdout, and `storeMap`, `modeledCeilings` and `hottestKeys` merged
 * into `bench-results/bench.json` (the rest of that file is kept).
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { addCredit, addMember, createKey, createWorkspace, importCatalog, setKeyCreditLimit, setMemberMonthlyLimit, setSpendRateCap, setWorkspaceMonthlyLimit, type AdminContext } from '../local/ops';
import { documentClient } from '../lambdas/adapters/dynamo-client';
import { aggregate } from '../lambdas/aggregator/aggregate';
import { USAGE_STREAM_FILTERS, USAGE_STREAM_MAPPING } from '../lambdas/aggregator/mapping';
import { sweep } from '../lambdas/sweeper/sweep';
import { loadConfig } from '../lambdas/shared/config';
import { TABLES, tableName, type TableName } from '../lambdas/shared/schema';
import { DynamoLedger, MAX_SLICES, readBalance, setLedgerSlices, type LedgerTables } from '../lambdas/store';
import { startDynamoLocal } from '../local/dynamo-local';
import { startStreamPoller } from '../local/stream-poller';
import { ensureTables, makeDynamoClient } from '../local/tables';
import { REPO_ROOT, buildBundles, bundleEnv } from './bundle';
import { closedLoop, post, targetFrom, type Target, type Timing } from './load';
import { GatewayProcess, startSimulatorProcess } from './processes';
import { dayId, monthId } from '../lambdas/core/windows';
import { ROLLUP_SHARDS } from '../lambdas/store/rollups';
import {
  ceilingOf,
  hottest,
  itemSizes,
  keyPartitions,
  keyWrites,
  rollupFamilies,
  replicatedWrites,
  rowsPerBatch,
  storeFamilies,
  type FamilyWorkspace,
  type HotKey,
  type ItemSizes,
  type ItemWrite,
  type KeyFamily,
  type KeyWrite,
  type ReadCall,
  type ReplicatedWrite,
  type RollupPeriodId,
  type StreamBatching,
} from './store-map-model';
import { ItemLocks } from './dynamo-conflicts';
import { WriteTap, type CallCounts } from './store-map-tap';

/** How big each part is. */
interface MapPlan {
  /** Workspaces of the many-workspaces load (one key each), and of the throughput comparison. */
  readonly workspaces: number;
  /** Requests per load. */
  readonly requests: number;
  /** Requests of each goal workspace's load: enough for the aggregator's largest modelled batches. */
  readonly goalRequests: number;
  /** Concurrency of the many-workspaces and five-key loads (the one-key load runs at a quarter). */
  readonly concurrency: number;
  /** Length of each throughput slice, and slices per side. */
  readonly sliceMs: number;
  readonly rounds: number;
  /** Length of the run of a workspace that grows from one slice. */
  readonly growMs: number;
}

const FULL: MapPlan = { workspaces: 64, requests: 640, goalRequests: 1000, concurrency: 64, sliceMs: 5_000, rounds: 2, growMs: 60_000 };
const QUICK: MapPlan = { workspaces: 64, requests: 192, goalRequests: 192, concurrency: 64, sliceMs: 2_000, rounds: 1, growMs: 30_000 };
/** The sliced workspace's slice count: the store's most. It has five keys, SPEC's most, like the one-slice workspace. */
const SLICES = MAX_SLICES;
const TABLE_PREFIX = 'map-';
/**
 * How long a write holds its items in the conflict model: a transaction's own time in DynamoDB,
 * of the order of its latency in the same Region (single-digit to low tens of milliseconds).
 */
const CONFLICT_WINDOW_MS = 10;
/** How often the one-slice side looks whether its workspace has grown (it stops sending then). */
const GROWTH_POLL_MS = 100;
const WATCHDOG_MS = 15 * 60_000;
/**
 * Steady state: a slice item carries a spend-rate slot for each of the last 64 seconds with a
 * reservation, so it reaches its working size only after a minute of traffic every second, which
 * the map's loads (a few seconds each) never make. The two variant workspaces get this long of
 * traffic first, a few requests each second, and their loads are measured on what it left.
 */
const STEADY_MS = 66_000;
/** Request rates at which the aggregator's batches are modelled (and drained). */
const AGGREGATOR_RATES = [10, 100, 1000] as const;
/** The rate whose aggregator writes count toward the hottest keys and ceilings (a hot workspace's). */
const CEILING_RATE = 1000;
/**
 * Stream shards of the usage table: one per partition, and an on-demand table starts with capacity
 * for 4,000 write units a second, four partitions; at these rates the usage table stays within them.
 */
const USAGE_STREAM_SHARDS = 4;
const BODY = Buffer.from(JSON.stringify({ model: 'local/sim-small', messages: [{ role: 'user', content: 'Say hello to the store map, briefly.' }], max_tokens: 64 }));

interface Caller {
  readonly workspaceId: string;
  readonly keyId: string;
  readonly rawKey: string;
}

/** One load's write map. */
export interface LoadMap {
  readonly name: string;
  readonly concurrency: number;
  /** Requests answered 200 (units are per request sent: these and the failed ones). */
  readonly requests: number;
  readonly failed: number;
  /**
   * Per request, by source (`gateway`, `aggregator@<rate>` for the aggregator at the batches it gets
   * at that many requests per second): write calls, items written, write units (of which `indexUnits`
   * on global secondary indexes), read calls and read units.
   */
  readonly perRequest: Readonly<Record<string, SourceUnits>>;
  /** The sizes of the items the load wrote, by kind (`ledger BALANCE`, …). */
  readonly itemSizes: Readonly<Record<string, ItemSizes>>;
  readonly hottestPartitions: readonly HotKey[];
  readonly hottestItems: readonly HotKey[];
  /** Keys written by more than one workspace's requests (the many-workspaces load). */
  readonly sharedPartitions: readonly HotKey[];
  readonly sharedItems: readonly HotKey[];
  /** Transactions cancelled by a conflict, per request. */
  readonly conflictsPerRequest: number;
  /** Slice count of each workspace of the load, read after it. */
  readonly slices: readonly number[];
  /**
   * The hottest partition key values and items that are not one API key's own (`KEY#<ws>#<key>`,
   * which the one-key load measures): what binds the workspace's shared items, its slices.
   */
  readonly beyondKeys: { readonly partitions: readonly HotKey[]; readonly items: readonly HotKey[] };
  /** The aggregator's hottest rollup partition key value and item (totals, not the per-request markers). */
  readonly rollups: { readonly partition?: HotKey; readonly item?: HotKey };
}

/** What one source wrote and read, per request. */
export interface SourceUnits {
  readonly calls: number;
  readonly writes: number;
  readonly units: number;
  readonly indexUnits: number;
  readonly readCalls: number;
  readonly readUnits: number;
  /** What the same writes cost in another region holding a replica (`replicatedWrite`), per request. */
  readonly replicated: ReplicatedUnits;
}

/**
 * A source's writes as another region holding a replica is billed for them, per request
 * (`replicatedWrite` in store-map-model.ts): `writeUnits`, each item write's units as a plain
 * write plus its index writes there (of which `indexWriteUnits`); `upperBoundWriteUnits`, the
 * same with a transaction's writes doubled as in their own region; `bytes` replicated.
 */
export interface ReplicatedUnits {
  readonly writeUnits: number;
  readonly indexWriteUnits: number;
  readonly upperBoundWriteUnits: number;
  readonly bytes: number;
}

/** A workspace variant the issue's goals are stated for, measured at steady state. */
export interface VariantUnits {
  readonly name: string;
  /** What it sets: `none` (SPEC's per-key request rate only, and the default spend-rate cap), or every limit. */
  readonly limits: 'none' | 'every';
  readonly requests: number;
  /** Gateway per request: write units (table and indexes), of which on indexes, and read units. */
  readonly gateway: { readonly writeUnits: number; readonly indexWriteUnits: number; readonly readUnits: number };
  /**
   * The aggregator per request at the batches it gets at each rate (requests per second): the rows
   * per batch modelled, and the mean of the batches it was drained with (a load's last batch is
   * short, and a load smaller than a batch is one batch: the figure is then an upper bound).
   */
  readonly aggregator: Readonly<Record<string, { readonly rowsPerBatch: number; readonly measuredRowsPerBatch: number; readonly writeUnits: number; readonly readUnits: number }>>;
  /** Gateway plus aggregator write units per request at each rate. */
  readonly totalWriteUnits: Readonly<Record<string, number>>;
  /**
   * With a second region: what that region is billed per request for the writes replicated to it
   * (`ReplicatedUnits`), the gateway's and the aggregator's at each rate, and their sum per rate.
   */
  readonly replicated: {
    readonly gateway: ReplicatedUnits;
    readonly aggregator: Readonly<Record<string, ReplicatedUnits & { readonly rowsPerBatch: number }>>;
    readonly totalWriteUnits: Readonly<Record<string, number>>;
  };
  /** The slice item (`ledger BALANCE`) as the load found it: largest and mean bytes, writes over 1 KB. */
  readonly sliceItem?: ItemSizes;
}

/** One side of the conflict comparison, run through the tap with DynamoDB's conflicts on. */
export interface ConflictSide {
  readonly name: string;
  readonly rps: number;
  readonly ok: number;
  readonly failed: number;
  /** Gateway TransactWriteItems cancelled for a conflict, per admitted request (admission, settlement, moves). */
  readonly conflictsPerAdmission: number;
  /** TransactGetItems (the ledger's snapshots) cancelled, and single-item writes refused, per admitted request. */
  readonly conflictedReadsPerAdmission: number;
  readonly conflictedWritesPerAdmission: number;
  /** Gateway transactions per admitted request (retries and moves included). */
  readonly transactionsPerRequest: number;
  /** Where the conflicts were met: `<operation> <key family>` and the count. */
  readonly conflictItems: Readonly<Record<string, number>>;
  /** The slice count at the end. */
  readonly slices: number;
}

/** The growing workspace, second by second: what it admitted, the conflicts met, its slice count. */
export interface GrowthPoint {
  readonly atSeconds: number;
  readonly admitted: number;
  readonly conflicts: number;
  readonly slices: number;
}

/** What the store map writes to bench.json. */
export interface StoreMapResult {
  readonly modeledCeilings: { readonly serviceRps: number | null; readonly workspaceRps: number | null; readonly keyRps: number | null };
  readonly modeledItemCeilings: { readonly serviceRps: number | null; readonly workspaceRps: number | null; readonly keyRps: number | null };
  readonly hottestKeys: {
    readonly service: { readonly partition?: HotKey; readonly item?: HotKey };
    readonly workspace: { readonly partition?: HotKey; readonly item?: HotKey };
    readonly key: { readonly partition?: HotKey; readonly item?: HotKey };
  };
  readonly storeMap: {
    /** The workspace ceilings with one slice (the five-key load), beside `modeledCeilings.workspaceRps` with many. */
    readonly oneSliceWorkspace: { readonly partitionRps: number | null; readonly itemRps: number | null };
    /** One key of a one-slice workspace (its items on one partition), beside `modeledCeilings.keyRps` for a sliced one. */
    readonly oneSliceKey: { readonly partitionRps: number | null; readonly itemRps: number | null };
    /** The sliced workspace's ceilings on what is not one API key's own (its slices, month shares, usage, rollups). */
    readonly slicedWorkspaceBeyondKeys: { readonly slices: number; readonly partitionRps: number | null; readonly itemRps: number | null };
    /** The sliced workspace's ceilings on the aggregator's rollup totals alone (sharded by batch). */
    readonly slicedWorkspaceRollups: { readonly partitionRps: number | null; readonly itemRps: number | null };
    readonly loads: readonly LoadMap[];
    /** DynamoDB's conflicts modelled at the tap (`dynamo-conflicts.ts`): a write holds its items this long at most. */
    readonly conflictWindowMs: number;
    readonly conflicts: readonly ConflictSide[];
    /** One workspace, five keys, from one slice with automatic growth: per-second figures. */
    readonly growth: readonly GrowthPoint[];
    /** Write calls whose per-table capacity, as DynamoDB Local reported it, equalled the tap's figure. */
    readonly reportedCapacity: { readonly agrees: number; readonly differs: number; readonly differences: readonly string[] };
    /** The two workspaces the write-unit goals are stated for, at steady state (see docs/bench.md). */
    readonly variants: readonly VariantUnits[];
    /** How the aggregator's batches were modelled: the mapping's settings, the stream's shards, rows per batch at each rate. */
    readonly aggregatorBatching: StreamBatching & { readonly rowsPerBatch: Readonly<Record<string, number>> };
    /** The sweeper, one run with nothing to settle: its calls and units (reads are what a run costs when idle). */
    readonly sweeperRun: { readonly readCalls: number; readonly readUnits: number; readonly writeUnits: number; readonly replicatedWriteUnits: number };
    /** How long the variants' traffic ran before they were measured, seconds. */
    readonly steadySeconds: number;
    readonly elapsedSeconds: number;
  };
}

function log(message: string): void {
  process.stderr.write(`[store-map] ${message}\n`);
}

const sum = (m: Readonly<Record<string, number>>, match: (k: string) => boolean): number => Object.entries(m).reduce((s, [k, v]) => s + (match(k) ? v : 0), 0);

/** Runs `n` requests over `concurrency` workers; `pick(i)` chooses the caller of the i-th. */
function bounded(target: Target, n: number, concurrency: number, pick: (i: number) => Caller): Promise<{ ok: number; failed: number; firstError?: string }> {
  return counted(concurrency, n, (i) => post(target, BODY, { authorization: `Bearer ${pick(i).rawKey}` }));
}

/** `n` requests over `concurrency` workers, timed; `send(i)` sends the i-th; no new one once `stopped()` says so. */
async function counted(concurrency: number, n: number, send: (i: number) => Promise<Timing>, stopped: () => boolean = () => false): Promise<{ ok: number; failed: number; elapsedMs: number; firstError?: string }> {
  let next = 0;
  let ok = 0;
  let failed = 0;
  let firstError: string | undefined;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n && !stopped()) {
        const i = next;
        next += 1;
        try {
          const t = await send(i);
          if (t.status === 200) ok += 1;
          else {
            failed += 1;
            firstError ??= `status ${t.status}`;
          }
        } catch (err) {
          failed += 1;
          firstError ??= err instanceof Error ? err.message : String(err);
        }
      }
    }),
  );
  return { ok, failed, elapsedMs: performance.now() - started, ...(firstError === undefined ? {} : { firstError }) };
}

/** A closed loop of `concurrency` workers that stops at `maxMs` or as soon as `grown()` says so (polled). */
async function untilGrown(concurrency: number, maxMs: number, send: (i: number) => Promise<Timing>, grown: () => Promise<boolean>): Promise<{ ok: number; failed: number; elapsedMs: number; firstError?: string }> {
  let stop = false;
  const deadline = performance.now() + maxMs;
  const poll = (async () => {
    while (!stop && performance.now() < deadline) {
      await new Promise((r) => setTimeout(r, GROWTH_POLL_MS));
      if (await grown()) stop = true;
    }
    stop = true;
  })();
  const run = await counted(concurrency, Number.MAX_SAFE_INTEGER, send, () => stop);
  await poll;
  return run;
}

/** Every item write of a load as the partition key values and items it loads. */
function toKeyWrites(writes: readonly ItemWrite[]): KeyWrite[] {
  return writes.flatMap((w) => keyWrites(w, TABLES[w.table as TableName]));
}

/** The days and months a load's rows may fall in: those of its start and of now (UTC). */
function periodsSince(startedAt: number): RollupPeriodId[] {
  const ids = new Map<string, RollupPeriodId>();
  for (const at of [startedAt, Date.now()]) {
    ids.set(`day ${dayId(at)}`, { period: 'day', periodId: dayId(at) });
    ids.set(`month ${monthId(at)}`, { period: 'month', periodId: monthId(at) });
  }
  return [...ids.values()];
}

/** Writes as another region holding a replica is billed for them, in all (`replicatedWrites`). */
function replicatedOf(writes: readonly ItemWrite[]): ReplicatedUnits {
  const r: ReplicatedWrite = replicatedWrites(writes, (table) => TABLES[table as TableName]);
  return { writeUnits: r.units + r.indexUnits, indexWriteUnits: r.indexUnits, upperBoundWriteUnits: r.upperBoundUnits + r.indexUnits, bytes: r.bytes };
}

/** Totals over `n` requests as figures per request. */
function perRequestOf(r: ReplicatedUnits, n: number): ReplicatedUnits {
  return { writeUnits: r.writeUnits / n, indexWriteUnits: r.indexWriteUnits / n, upperBoundWriteUnits: r.upperBoundWriteUnits / n, bytes: r.bytes / n };
}

/** The aggregator's tap source at the batches it gets at `rps` requests per second. */
const aggregatorSource = (rps: number): string => `aggregator@${rps}`;

function mapLoad(
  name: string,
  concurrency: number,
  run: { ok: number; failed: number; startedAt: number },
  taken: { writes: readonly ItemWrite[]; reads: readonly ReadCall[]; counts: CallCounts },
  workspaces: readonly FamilyWorkspace[],
  callers: readonly Caller[],
): LoadMap {
  const { writes, reads, counts } = taken;
  const ownKeys = new Set(callers.flatMap((c) => keyPartitions(c.workspaceId, c.keyId, MAX_SLICES)));
  const all = toKeyWrites(writes);
  // Each aggregator writes its own rollups table; only the one at a hot workspace's rate counts
  // toward the ceilings (the others' items bear the same keys and would be counted twice).
  const keys = all.filter((k) => !k.source.startsWith('aggregator@') || k.source === aggregatorSource(CEILING_RATE));
  const families: KeyFamily[] = [...storeFamilies(workspaces), ...rollupFamilies(workspaces, periodsSince(run.startedAt), new Set(keys.map((k) => k.partition)))];
  // The rollups' totals items: a marker (`SEEN#…`) is written per request (or per group of them) and binds nothing.
  const totals = keys.filter((k) => k.target === TABLES.rollups.name && !k.partition.includes(' pk=SEEN#'));
  // Every request sent: a rare failure (after admission) still wrote.
  const n = Math.max(1, run.ok + run.failed);
  const perRequest: Record<string, SourceUnits> = {};
  const sources = [...new Set([...all.map((k) => k.source), ...reads.map((r) => r.source)])].sort();
  for (const source of sources) {
    const mine = all.filter((k) => k.source === source);
    const read = reads.filter((r) => r.source === source);
    perRequest[source] = {
      replicated: perRequestOf(replicatedOf(writes.filter((w) => w.source === source)), n),
      calls: sum(counts.calls, (k) => k.startsWith(`${source} `) && /(PutItem|UpdateItem|DeleteItem|TransactWriteItems|BatchWriteItem)$/.test(k)) / n,
      writes: writes.filter((w) => w.source === source).length / n,
      units: mine.reduce((s, k) => s + k.units, 0) / n,
      indexUnits: mine.filter((k) => k.target.includes('/')).reduce((s, k) => s + k.units, 0) / n,
      readCalls: read.length / n,
      readUnits: read.reduce((s, r) => s + r.units, 0) / n,
    };
  }
  return {
    name,
    concurrency,
    requests: run.ok,
    failed: run.failed,
    perRequest,
    itemSizes: itemSizes(
      writes.filter((w) => w.source === 'gateway'),
      (table) => TABLES[table as TableName],
    ),
    hottestPartitions: hottest(keys, n, 'partition', false, families).slice(0, 6),
    hottestItems: hottest(keys, n, 'item', false, families).slice(0, 6),
    sharedPartitions: hottest(keys, n, 'partition', true, families).slice(0, 4),
    sharedItems: hottest(keys, n, 'item', true, families).slice(0, 4),
    conflictsPerRequest: sum(counts.conflicts, () => true) / n,
    slices: workspaces.map((w) => w.slices),
    beyondKeys: {
      partitions: hottest(keys.filter((k) => !ownKeys.has(k.partition)), n, 'partition', false, families).slice(0, 3),
      items: hottest(keys.filter((k) => !ownKeys.has(k.partition)), n, 'item', false, families).slice(0, 3),
    },
    rollups: withTop(hottest(totals, n, 'partition', false, families)[0], hottest(totals, n, 'item', false, families)[0]),
  };
}

/** A variant's figures from its load. */
function variantOf(name: string, limits: VariantUnits['limits'], load: LoadMap, batching: StreamBatching, measured: Readonly<Record<string, number>>): VariantUnits {
  const gateway = load.perRequest.gateway;
  const aggregator: Record<string, { rowsPerBatch: number; measuredRowsPerBatch: number; writeUnits: number; readUnits: number }> = {};
  const totalWriteUnits: Record<string, number> = {};
  for (const rps of AGGREGATOR_RATES) {
    const a = load.perRequest[aggregatorSource(rps)];
    aggregator[String(rps)] = { rowsPerBatch: rowsPerBatch(rps, batching), measuredRowsPerBatch: measured[String(rps)] ?? 0, writeUnits: a?.units ?? 0, readUnits: a?.readUnits ?? 0 };
    totalWriteUnits[String(rps)] = (gateway?.units ?? 0) + (a?.units ?? 0);
  }
  const sliceItem = load.itemSizes['ledger BALANCE'];
  const none: ReplicatedUnits = { writeUnits: 0, indexWriteUnits: 0, upperBoundWriteUnits: 0, bytes: 0 };
  const replicatedGateway = gateway?.replicated ?? none;
  const replicatedAggregator: Record<string, ReplicatedUnits & { rowsPerBatch: number }> = {};
  const replicatedTotal: Record<string, number> = {};
  for (const rps of AGGREGATOR_RATES) {
    const a = load.perRequest[aggregatorSource(rps)]?.replicated ?? none;
    replicatedAggregator[String(rps)] = { rowsPerBatch: rowsPerBatch(rps, batching), ...a };
    replicatedTotal[String(rps)] = replicatedGateway.writeUnits + a.writeUnits;
  }
  return {
    name,
    limits,
    requests: load.requests,
    gateway: { writeUnits: gateway?.units ?? 0, indexWriteUnits: gateway?.indexUnits ?? 0, readUnits: gateway?.readUnits ?? 0 },
    aggregator,
    totalWriteUnits,
    replicated: { gateway: replicatedGateway, aggregator: replicatedAggregator, totalWriteUnits: replicatedTotal },
    ...(sliceItem === undefined ? {} : { sliceItem }),
  };
}

/** Runs the whole store map; see the module comment. */
export async function runStoreMap(options: { readonly quick: boolean; readonly conflictsOnly?: boolean; readonly goalsOnly?: boolean; readonly conflictWindowMs?: number }): Promise<StoreMapResult> {
  // Conflicts only: the map's loads run no request (their tables come out empty).
  const plan = { ...(options.quick ? QUICK : FULL), ...(options.conflictsOnly === true ? { requests: 0, goalRequests: 0 } : {}) };
  const windowMs = options.conflictWindowMs ?? CONFLICT_WINDOW_MS;
  const started = performance.now();
  const steps: { name: string; run: () => Promise<void> }[] = [];
  const cleanup = async (): Promise<void> => {
    for (const step of steps.reverse()) {
      try {
        await step.run();
      } catch (err) {
        process.stderr.write(`store-map cleanup (${step.name}) failed: ${err instanceof Error ? err.message : String(err)}\n`);
      }
    }
    steps.length = 0;
  };
  const watchdog = setTimeout(() => {
    log(`the store map exceeded ${WATCHDOG_MS / 1000} s: stopping`);
    void cleanup().finally(() => process.exit(2));
  }, WATCHDOG_MS);
  watchdog.unref();
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'sluice-store-map-'));
  steps.push({ name: 'temp dir', run: async () => rmSync(tmp, { recursive: true, force: true }) });
  try {
    log('bundling and starting DynamoDB Local');
    const [built, dbStart] = await Promise.allSettled([buildBundles(tmp), startDynamoLocal({ detached: true, readyTimeoutMs: 60_000 })]);
    if (dbStart.status === 'fulfilled') steps.push({ name: 'DynamoDB Local', run: () => dbStart.value.stop() });
    if (built.status === 'rejected') throw built.reason;
    if (dbStart.status === 'rejected') throw dbStart.reason;
    const bundles = built.value;
    const db = dbStart.value;
    const adminClient = makeDynamoClient(db.endpoint);
    steps.push({ name: 'admin client', run: async () => adminClient.destroy() });
    await ensureTables(adminClient, TABLE_PREFIX);
    const doc = documentClient(loadConfig({ SLUICE_STAGE: 'local', SLUICE_TABLE_PREFIX: TABLE_PREFIX, SLUICE_DYNAMODB_ENDPOINT: db.endpoint }));
    steps.push({ name: 'document client', run: async () => doc.destroy() });
    const admin: AdminContext = { doc, tablePrefix: TABLE_PREFIX, stage: 'local' };
    await importCatalog(admin, {});
    const ledgerTables: LedgerTables = { ledger: tableName(TABLE_PREFIX, 'ledger'), usage: tableName(TABLE_PREFIX, 'usage') };
    const workspace = async (keys: number, slices = 1, everyLimit = false): Promise<Caller[]> => {
      const ws = await createWorkspace(admin, { name: 'store-map' });
      await addCredit(admin, { workspaceId: ws.workspaceId, minor: 1_000_000 });
      // Set through the store, as an operator would, before any request.
      if (slices > 1) await setLedgerSlices(doc, ledgerTables, ws.workspaceId, slices);
      // Every limit a workspace can set, each far above what the map spends (nothing is refused):
      // its month, its spend-rate cap (SPEC's self-set ceiling), a member's month, each key's window.
      let memberId: string | undefined;
      if (everyLimit) {
        await setWorkspaceMonthlyLimit(admin, { workspaceId: ws.workspaceId, limitMinor: 900_000 });
        await setSpendRateCap(admin, { workspaceId: ws.workspaceId, capMinor: 1_000_000 });
        memberId = (await addMember(admin, { workspaceId: ws.workspaceId, email: 'map@example.com' })).memberId;
        await setMemberMonthlyLimit(admin, { workspaceId: ws.workspaceId, memberId, limitMinor: 800_000 });
      }
      const out: Caller[] = [];
      for (let k = 0; k < keys; k += 1) {
        const key = await createKey(admin, { workspaceId: ws.workspaceId, ...(memberId === undefined ? {} : { memberId }) });
        if (everyLimit) await setKeyCreditLimit(admin, { workspaceId: ws.workspaceId, keyId: key.keyId, limitMinor: 100_000, window: 'monthly' });
        out.push({ workspaceId: ws.workspaceId, keyId: key.keyId, rawKey: key.rawKey });
      }
      return out;
    };
    const many: Caller[] = [];
    for (let i = 0; i < plan.workspaces; i += 8) many.push(...(await Promise.all(Array.from({ length: Math.min(8, plan.workspaces - i) }, () => workspace(1)))).flat());
    const five = await workspace(5);
    const [one] = await workspace(1);
    if (one === undefined) throw new Error('no key');
    const sliced = await workspace(5, SLICES);
    // One key alone in a sliced workspace: its own items spread over the key slices.
    const [oneSliced] = await workspace(1, SLICES);
    if (oneSliced === undefined) throw new Error('no key');
    // The goals' two workspaces: five keys each, one slice; one sets nothing, one sets every limit.
    const plain = await workspace(5);
    const limited = await workspace(5, 1, true);
    log(`seeded ${many.length + 6} workspaces (two of them with ${SLICES} slices, one with every limit set)`);
    // The slice count each workspace of a load has, read back after it (growth could have raised it).
    const slicesOf = async (callers: readonly Caller[]): Promise<FamilyWorkspace[]> => {
      const ids = [...new Set(callers.map((c) => c.workspaceId))];
      const out: FamilyWorkspace[] = [];
      for (const workspaceId of ids) {
        const keyIds = callers.filter((c) => c.workspaceId === workspaceId).map((c) => c.keyId);
        out.push({ workspaceId, slices: (await readBalance(doc, ledgerTables, workspaceId)).slices, keyIds });
      }
      return out;
    };

    const tap = new WriteTap(db.endpoint, TABLE_PREFIX);
    steps.push({ name: 'tap', run: () => tap.close() });
    // Raw partition key values of every key's own items (after `<table> pk=`).
    tap.workspaces = [...new Set([...many, ...five, one, ...sliced, oneSliced, ...plain, ...limited].map((c) => c.workspaceId))];
    const gatewayEndpoint = await tap.listen('gateway');
    const sweeperEndpoint = await tap.listen('sweeper');

    const sim = await startSimulatorProcess(bundles.simulator, bundleEnv({}));
    steps.push({ name: 'simulator', run: () => sim.stop() });
    await sim.control('/_sim/default', { model: 'sim-small', behavior: { kind: 'ok' } });
    const gw = await GatewayProcess.start(
      bundles.gatewayServer,
      bundleEnv({
        SLUICE_STAGE: 'local',
        SLUICE_TABLE_PREFIX: TABLE_PREFIX,
        SLUICE_DYNAMODB_ENDPOINT: gatewayEndpoint,
        SLUICE_SECRET_SOURCE: 'env',
        SLUICE_LOCAL_UPSTREAM_URL: sim.url,
        SLUICE_LOCAL_SECRETS_FILE: path.join(tmp, 'secrets.json'),
        // The per-key request rate is a stage setting; the store map is not measuring it.
        SLUICE_KEY_RATE_PER_MINUTE: '100000000',
      }),
      [],
    );
    steps.push({ name: 'gateway', run: () => gw.stop() });
    log(`DynamoDB Local pid ${db.pid}, simulator pid ${sim.pid}, gateway pid ${gw.pid}; tap ${gatewayEndpoint} (gateway)`);
    const target = targetFrom('gateway', `${gw.url}/v1`, plan.concurrency);
    steps.push({ name: 'agent', run: async () => target.agent.destroy() });

    // The aggregator, three times over: at the batches the deployed mapping hands it at 10, 100 and
    // 1,000 requests per second (modelled from its batch size and batching window: `rowsPerBatch`),
    // each reading the whole usage stream with a poller of its own into a rollups table of its own,
    // through a tap source of its own.
    const batching: StreamBatching = {
      batchSize: USAGE_STREAM_MAPPING.batchSize,
      windowSeconds: USAGE_STREAM_MAPPING.maxBatchingWindowSeconds,
      recordsPerRequest: USAGE_STREAM_MAPPING.recordsPerRequest,
      rowsPerRequest: USAGE_STREAM_MAPPING.rowsPerRequest,
      shards: USAGE_STREAM_SHARDS,
    };
    const aggregators: { rps: number; rows: number; poller: Awaited<ReturnType<typeof startStreamPoller>>; batches: number[] }[] = [];
    for (const rps of AGGREGATOR_RATES) {
      const prefix = `${TABLE_PREFIX}a${rps}-`;
      await ensureTables(adminClient, prefix);
      tap.addTable(tableName(prefix, 'rollups'), TABLES.rollups);
      const aggregatorDoc = documentClient({ dynamoEndpoint: await tap.listen(aggregatorSource(rps)) });
      steps.push({ name: `aggregator client ${rps}`, run: async () => aggregatorDoc.destroy() });
      const rows = rowsPerBatch(rps, batching);
      // Rows handed over in each batch (the load's last batch may be short of the modelled size).
      const batches: number[] = [];
      const poller = await startStreamPoller({
        endpoint: db.endpoint,
        tableName: tableName(TABLE_PREFIX, 'usage'),
        autoStart: false,
        // The batch size counts records before the mapping's filter, as modelled; the filter is the deployed one.
        batchSize: Math.max(1, Math.round((rows * batching.recordsPerRequest) / batching.rowsPerRequest)),
        filters: USAGE_STREAM_FILTERS,
        log: () => undefined,
        handler: (event) => {
          batches.push(event.Records.length);
          return aggregate({ doc: aggregatorDoc, rollupsTable: tableName(prefix, 'rollups'), writeLine: (l) => log(l) }, event);
        },
      });
      steps.push({ name: `stream poller ${rps}`, run: () => poller.stop() });
      aggregators.push({ rps, rows, poller, batches });
    }
    log(`aggregator batches modelled: ${aggregators.map((a) => `${a.rows} rows at ${a.rps} req/s`).join(', ')} (batch size ${batching.batchSize}, window ${batching.windowSeconds} s, ${batching.shards} stream shards)`);
    /**
     * Waits for the gateway to be idle, then drains the stream into the aggregators: all of them, or
     * only the one whose writes count toward the ceilings (the others drain unrecorded, to keep up).
     */
    const settle = async (every = false): Promise<void> => {
      await gw.idle(60_000);
      const mode = tap.mode;
      for (const a of aggregators) {
        if (!every && a.rps !== CEILING_RATE) {
          tap.mode = 'count';
          await a.poller.drain();
          tap.mode = mode;
        }
      }
      for (const a of aggregators) if (every || a.rps === CEILING_RATE) await a.poller.drain();
    };

    log('warm-up: every key, a few times (caches, first writes of each window)');
    const callers = options.goalsOnly === true ? [...plain, ...limited] : [...many, ...five, one, ...sliced, ...plain, ...limited];
    await bounded(target, callers.length * 3, 16, (i) => callers[i % callers.length] as Caller);
    await settle(true);
    tap.take();

    // --- The loads, in map mode ----------------------------------------------------------------
    tap.mode = 'map';
    // With --goals-only, only the goals' two workspaces are measured (the other loads send nothing).
    const otherRequests = options.goalsOnly === true ? 0 : plan.requests;
    const loads: LoadMap[] = [];
    const reported = { agrees: 0, differs: 0, differences: [] as string[] };
    const runLoad = async (name: string, concurrency: number, callersOf: readonly Caller[], pick: (i: number) => Caller, everyAggregator = false, requests = otherRequests): Promise<LoadMap> => {
      log(`load: ${name}, ${requests} requests at concurrency ${concurrency}`);
      const startedAt = Date.now();
      const run = { ...(await bounded(target, requests, concurrency, pick)), startedAt };
      if (run.firstError !== undefined) log(`  ${run.failed} failed, first: ${run.firstError}; the gateway's last output:\n${String(gw.stderr).slice(-1_500)}`);
      await settle(everyAggregator);
      const taken = tap.take();
      const { counts } = taken;
      reported.agrees += counts.reportedAgrees;
      reported.differs += counts.reportedDiffers;
      reported.differences.push(...counts.differences.slice(0, 5 - reported.differences.length));
      const map = mapLoad(name, concurrency, run, taken, await slicesOf(callersOf), callersOf);
      loads.push(map);
      return map;
    };
    const manyLoad = await runLoad('many workspaces', plan.concurrency, many, (i) => many[i % many.length] as Caller);
    const fiveLoad = await runLoad('one workspace, five keys, 1 slice', plan.concurrency, five, (i) => five[i % five.length] as Caller);
    const slicedLoad = await runLoad(`one workspace, five keys, ${SLICES} slices`, plan.concurrency, sliced, (i) => sliced[i % sliced.length] as Caller);
    const oneLoad = await runLoad('one key, 1 slice', plan.concurrency / 4, [one], () => one);
    const oneSlicedLoad = await runLoad(`one key, ${SLICES} slices`, plan.concurrency / 4, [oneSliced], () => oneSliced);
    // The goals' two workspaces, each at steady state: traffic every second for over a minute (so
    // its slice item carries the spend-rate slots a long run keeps), not measured; the stream's
    // records of it passed over; then its load, measured, with the aggregator at each rate's batches.
    const steadyLoad = async (name: string, callersOf: readonly Caller[]): Promise<{ load: LoadMap; measuredRowsPerBatch: Record<string, number> }> => {
      if (plan.goalRequests > 0) {
        tap.mode = 'count';
        log(`steady state: ${name}, a few requests a second for ${STEADY_MS / 1000} s`);
        const steady = await closedLoop(2, STEADY_MS, async () => {
          const t = await post(target, BODY, { authorization: `Bearer ${(callersOf[Math.floor(Math.random() * callersOf.length)] as Caller).rawKey}` });
          await new Promise((r) => setTimeout(r, 300));
          return t;
        });
        if (steady.firstError !== undefined) log(`  ${steady.failed} failed, first: ${steady.firstError}`);
        await gw.idle(60_000);
        for (const a of aggregators) await a.poller.skip();
        tap.take();
        tap.mode = 'map';
      }
      for (const a of aggregators) a.batches.length = 0;
      const load = await runLoad(`goal: ${name}, steady`, plan.concurrency, callersOf, (i) => callersOf[i % callersOf.length] as Caller, true, plan.goalRequests);
      const mean = (xs: readonly number[]): number => (xs.length === 0 ? 0 : xs.reduce((x, y) => x + y, 0) / xs.length);
      return { load, measuredRowsPerBatch: Object.fromEntries(aggregators.map((a) => [String(a.rps), mean(a.batches)])) };
    };
    const plainLoad = await steadyLoad('no limit beyond the per-key rate, five keys, 1 slice', plain);
    const limitedLoad = await steadyLoad('every limit set, five keys of one member, 1 slice', limited);
    const variants = [
      variantOf('no limit beyond the per-key request rate', 'none', plainLoad.load, batching, plainLoad.measuredRowsPerBatch),
      variantOf('every limit set', 'every', limitedLoad.load, batching, limitedLoad.measuredRowsPerBatch),
    ];

    // The sweeper, one run with nothing to settle: what a run reads when idle.
    tap.take();
    const sweeperDoc = documentClient({ dynamoEndpoint: sweeperEndpoint });
    steps.push({ name: 'sweeper client', run: async () => sweeperDoc.destroy() });
    await sweep({ doc: sweeperDoc, usageTable: tableName(TABLE_PREFIX, 'usage'), ledger: new DynamoLedger(sweeperDoc, ledgerTables), stage: 'local', writeLine: () => undefined }, Date.now());
    const swept = tap.take();
    const sweeperRun = {
      readCalls: swept.reads.length,
      readUnits: swept.reads.reduce((a, r) => a + r.units, 0),
      writeUnits: toKeyWrites(swept.writes).reduce((a, k) => a + k.units, 0),
      replicatedWriteUnits: replicatedOf(swept.writes).writeUnits,
    };

    // --- Conflicts, as DynamoDB would cancel them: one workspace at concurrency 64 ---------------
    // DynamoDB Local never cancels a transaction for a conflict; the tap now does, by DynamoDB's
    // rules (`dynamo-conflicts.ts`), so the gateway meets and answers them as it would there.
    const conflictPart = async (): Promise<{ conflicts: ConflictSide[]; growth: GrowthPoint[] }> => {
      tap.mode = 'count';
      tap.locks = new ItemLocks(windowMs);
      const sides = new Map<string, { ok: number; failed: number; ms: number; counts: CallCounts[]; slices: number }>();
      // The one-slice side is the ledger before escrow slices: a workspace grows its count once a
      // process has judged 50 of its admissions, so each turn takes a fresh one-slice workspace and
      // sends until it has grown (the requests in flight then finish, mostly admitted on one slice).
      const ONE_SLICE = 'one workspace, five keys, 1 slice';
      const picks: readonly string[] = ['64 workspaces', ONE_SLICE, `one workspace, five keys, ${SLICES} slices`];
      for (let round = 0; round < plan.rounds; round += 1) {
        // Alternating which side goes first, so neither always meets the machine as the other left it.
        for (const name of round % 2 === 0 ? picks : [...picks].reverse()) {
          const callers = name === ONE_SLICE ? await workspace(5) : name === '64 workspaces' ? many : sliced;
          log(`conflicts: ${name}, concurrency ${plan.concurrency}, ${name === ONE_SLICE ? 'until it grows' : `${plan.sliceMs} ms`}`);
          tap.take();
          const send = (i: number): Promise<Timing> => post(target, BODY, { authorization: `Bearer ${(callers[i % callers.length] as Caller).rawKey}` });
          const run = name === ONE_SLICE ? await untilGrown(plan.concurrency, plan.sliceMs, send, async () => ((await slicesOf(callers))[0]?.slices ?? 1) > 1) : await closedLoop(plan.concurrency, plan.sliceMs, send);
          await gw.idle(60_000);
          const s = sides.get(name) ?? { ok: 0, failed: 0, ms: 0, counts: [], slices: 1 };
          const slices = Math.max(...(await slicesOf(callers)).map((w) => w.slices));
          sides.set(name, { ok: s.ok + run.ok, failed: s.failed + run.failed, ms: s.ms + run.elapsedMs, counts: [...s.counts, tap.take().counts], slices: Math.max(s.slices, slices) });
          if (run.firstError !== undefined) log(`  ${run.failed} failed, first: ${run.firstError}`);
        }
      }
      // A fresh workspace from one slice, its count left to grow from the conflicts it meets.
      const grower = await workspace(5);
      log(`conflicts: one workspace, five keys, from 1 slice with automatic growth, ${plan.growMs} ms`);
      tap.take();
      const growth: GrowthPoint[] = [];
      let admitted = 0;
      let conflictsSoFar = 0;
      const growStart = performance.now();
      const growCounts: CallCounts[] = [];
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          await new Promise((r) => setTimeout(r, 1000));
          const counts = tap.take().counts;
          growCounts.push(counts);
          conflictsSoFar += counts.conflicts.gateway ?? 0;
          const slices = (await slicesOf(grower))[0]?.slices ?? 1;
          growth.push({ atSeconds: Math.round((performance.now() - growStart) / 100) / 10, admitted, conflicts: conflictsSoFar, slices });
        }
      })();
      const growRun = await closedLoop(plan.concurrency, plan.growMs, async (w) => {
        const t = await post(target, BODY, { authorization: `Bearer ${(grower[w % grower.length] as Caller).rawKey}` });
        if (t.status === 200) admitted += 1;
        return t;
      });
      sampling = false;
      await sampler;
      if (growRun.firstError !== undefined) log(`  ${growRun.failed} failed, first: ${growRun.firstError}`);
      await gw.idle(60_000);
      growCounts.push(tap.take().counts);
      sides.set('one workspace, five keys, from 1 slice, growing', { ok: growRun.ok, failed: growRun.failed, ms: growRun.elapsedMs, counts: growCounts, slices: (await slicesOf(grower))[0]?.slices ?? 1 });
      tap.locks = undefined;
      await settle();
      const conflicts: ConflictSide[] = [...sides].map(([name, s]) => {
        const total = (pick: (c: CallCounts) => Readonly<Record<string, number>>, key = 'gateway'): number => s.counts.reduce((a, c) => a + (pick(c)[key] ?? 0), 0);
        const items: Record<string, number> = {};
        for (const c of s.counts) for (const [k, v] of Object.entries(c.conflictItems)) if (k.startsWith('gateway ')) items[k.slice('gateway '.length)] = (items[k.slice('gateway '.length)] ?? 0) + v;
        const ok = Math.max(1, s.ok);
        return {
          name,
          rps: (s.ok * 1000) / Math.max(1, s.ms),
          ok: s.ok,
          failed: s.failed,
          conflictsPerAdmission: total((c) => c.conflicts) / ok,
          conflictedReadsPerAdmission: total((c) => c.conflictedReads) / ok,
          conflictedWritesPerAdmission: total((c) => c.conflictedWrites) / ok,
          transactionsPerRequest: (total((c) => c.calls, 'gateway TransactWriteItems') + total((c) => c.cancelled)) / ok,
          conflictItems: Object.fromEntries(Object.entries(items).sort((x, y) => y[1] - x[1]).slice(0, 6)),
          slices: s.slices,
        };
      });
      return { conflicts, growth };
    };
    // With --goals-only, no conflicts are measured.
    const { conflicts, growth } = options.goalsOnly === true ? { conflicts: [], growth: [] } : await conflictPart();

    const top = (keys: readonly HotKey[]): HotKey | undefined => keys[0];
    return {
      modeledCeilings: { serviceRps: ceilingOf(manyLoad.sharedPartitions), workspaceRps: ceilingOf(slicedLoad.hottestPartitions), keyRps: ceilingOf(oneSlicedLoad.hottestPartitions) },
      modeledItemCeilings: { serviceRps: ceilingOf(manyLoad.sharedItems), workspaceRps: ceilingOf(slicedLoad.hottestItems), keyRps: ceilingOf(oneSlicedLoad.hottestItems) },
      hottestKeys: {
        service: withTop(top(manyLoad.sharedPartitions), top(manyLoad.sharedItems)),
        workspace: withTop(top(slicedLoad.hottestPartitions), top(slicedLoad.hottestItems)),
        key: withTop(top(oneSlicedLoad.hottestPartitions), top(oneSlicedLoad.hottestItems)),
      },
      storeMap: {
        oneSliceWorkspace: { partitionRps: ceilingOf(fiveLoad.hottestPartitions), itemRps: ceilingOf(fiveLoad.hottestItems) },
        oneSliceKey: { partitionRps: ceilingOf(oneLoad.hottestPartitions), itemRps: ceilingOf(oneLoad.hottestItems) },
        slicedWorkspaceBeyondKeys: { slices: SLICES, partitionRps: ceilingOf(slicedLoad.beyondKeys.partitions), itemRps: ceilingOf(slicedLoad.beyondKeys.items) },
        slicedWorkspaceRollups: { partitionRps: ceilingOf(slicedLoad.rollups.partition === undefined ? [] : [slicedLoad.rollups.partition]), itemRps: ceilingOf(slicedLoad.rollups.item === undefined ? [] : [slicedLoad.rollups.item]) },
        loads,
        conflictWindowMs: windowMs,
        conflicts,
        growth,
        reportedCapacity: reported,
        variants,
        aggregatorBatching: { ...batching, rowsPerBatch: Object.fromEntries(aggregators.map((a) => [String(a.rps), a.rows])) },
        sweeperRun,
        steadySeconds: plan.goalRequests > 0 ? STEADY_MS / 1000 : 0,
        elapsedSeconds: (performance.now() - started) / 1000,
      },
    };
  } finally {
    clearTimeout(watchdog);
    await cleanup();
  }
}

function withTop(partition: HotKey | undefined, item: HotKey | undefined): { partition?: HotKey; item?: HotKey } {
  return { ...(partition === undefined ? {} : { partition }), ...(item === undefined ? {} : { item }) };
}

const r1 = (v: number): string => (Math.round(v * 100) / 100).toString();
const r3 = (v: number): string => (Math.round(v * 1000) / 1000).toString();
const rps = (v: number | null): string => (v === null ? 'none binds' : `${v.toLocaleString('en-US')} req/s`);

/** The store map as text. */
export function renderStoreMap(r: StoreMapResult): string {
  const lines: string[] = [];
  const c = r.modeledCeilings;
  const i = r.modeledItemCeilings;
  lines.push('store write map: modelled ceilings (1,000 write units/s / units per request on the hottest key)');
  lines.push('  a key family the store spreads by a hash (expiry index shards, usage partitions, escrow slices) counts');
  lines.push("  its total units over its shard count: uniform hashing, which a long run tends to; its busiest value seen is printed beside it");
  lines.push(`  whole service  partition ${rps(c.serviceRps).padEnd(16)} item ${rps(i.serviceRps)}   (keys written by many workspaces' requests)`);
  const b = r.storeMap.slicedWorkspaceBeyondKeys;
  lines.push(`  one workspace  partition ${rps(c.workspaceRps).padEnd(16)} item ${rps(i.workspaceRps)}   (${b.slices} slices, five keys)`);
  lines.push(`                 partition ${rps(b.partitionRps).padEnd(16)} item ${rps(b.itemRps)}   (${b.slices} slices, not counting each key's own KEY#… items)`);
  lines.push(`                 partition ${rps(r.storeMap.slicedWorkspaceRollups.partitionRps).padEnd(16)} item ${rps(r.storeMap.slicedWorkspaceRollups.itemRps)}   (${b.slices} slices: the aggregator's rollups alone, ${ROLLUP_SHARDS} shards)`);
  lines.push(`                 partition ${rps(r.storeMap.oneSliceWorkspace.partitionRps).padEnd(16)} item ${rps(r.storeMap.oneSliceWorkspace.itemRps)}   (1 slice, five keys)`);
  lines.push(`  one key        partition ${rps(c.keyRps).padEnd(16)} item ${rps(i.keyRps)}   (${b.slices} slices: its items over the key slices)`);
  lines.push(`                 partition ${rps(r.storeMap.oneSliceKey.partitionRps).padEnd(16)} item ${rps(r.storeMap.oneSliceKey.itemRps)}   (1 slice)`);
  lines.push('');
  const ab = r.storeMap.aggregatorBatching;
  lines.push(`write units per request, the goals' two workspaces at steady state (${r.storeMap.steadySeconds} s of traffic first); the aggregator at the batches it gets`);
  lines.push(`  at each rate: batch size ${ab.batchSize}, window ${ab.windowSeconds} s, ${ab.recordsPerRequest} stream record(s) and ${ab.rowsPerRequest} row(s) per request, ${ab.shards} stream shards`);
  for (const v of r.storeMap.variants) {
    lines.push(`  ${v.name} (${v.requests} requests)`);
    lines.push(`    gateway ${r1(v.gateway.writeUnits)} write units (${r1(v.gateway.indexWriteUnits)} on indexes), ${r1(v.gateway.readUnits)} read units`);
    for (const [rate, a] of Object.entries(v.aggregator)) {
      lines.push(
        `    at ${rate.padStart(4)} req/s: aggregator ${r1(a.writeUnits)} write units (${a.rowsPerBatch} rows a batch modelled, ${r1(a.measuredRowsPerBatch)} drained), ${r1(a.readUnits)} read units; total ${r1(v.totalWriteUnits[rate] ?? 0)} write units`,
      );
    }
    if (v.sliceItem !== undefined) lines.push(`    slice item: up to ${v.sliceItem.maxBytes} B (mean ${Math.round(v.sliceItem.meanBytes)}), ${v.sliceItem.overOneKb} of ${v.sliceItem.writes} writes over 1 KB`);
    // Older bench.json files have no replicated figures.
    const rep = v.replicated as VariantUnits['replicated'] | undefined;
    if (rep !== undefined) {
      const g = rep.gateway;
      lines.push(
        `    a second region is billed per request: gateway ${r1(g.writeUnits)} replicated write units as plain writes (${r1(g.indexWriteUnits)} of them index writes there;` +
          ` ${r1(g.upperBoundWriteUnits)} if a transaction's copy is billed doubled), ${Math.round(g.bytes)} bytes replicated`,
      );
      for (const [rate, a] of Object.entries(rep.aggregator)) {
        lines.push(`      at ${rate.padStart(4)} req/s: aggregator ${r1(a.writeUnits)} (${r1(a.upperBoundWriteUnits)} doubled), ${Math.round(a.bytes)} bytes; total ${r1(rep.totalWriteUnits[rate] ?? 0)} replicated write units`);
      }
    }
  }
  const sw = r.storeMap.sweeperRun;
  lines.push(`  the sweeper, one idle run: ${sw.readCalls} read calls, ${r1(sw.readUnits)} read units, ${r1(sw.writeUnits)} write units (${r1(sw.replicatedWriteUnits ?? 0)} replicated to a second region)`);
  const hot = (h: HotKey): string =>
    h.shards === undefined || h.observed === undefined
      ? `${h.key}  ${r3(h.unitsPerRequest)} u/req -> ${Math.floor(h.ceilingRps).toLocaleString('en-US')} req/s  [${h.sources.join(', ')}; ${h.workspaces} ws]`
      : `${h.key}  ${r3(h.unitsPerRequest * h.shards)} u/req over ${h.shards} shards = ${r3(h.unitsPerRequest)} each -> ${Math.floor(h.ceilingRps).toLocaleString('en-US')} req/s modelled` +
        ` (busiest seen: ${h.observed.key} ${r3(h.observed.unitsPerRequest)} u/req, ${Math.floor(h.observed.ceilingRps).toLocaleString('en-US')} req/s)  [${h.sources.join(', ')}; ${h.workspaces} ws]`;
  for (const load of r.storeMap.loads) {
    if (load.requests + load.failed === 0) continue; // a part not run (--goals-only, --conflicts-only)
    lines.push('');
    const slices = [...new Set(load.slices)].sort((a, b) => a - b).join('/');
    lines.push(`load: ${load.name} (concurrency ${load.concurrency}, ${load.requests} requests${load.failed > 0 ? `, ${load.failed} failed` : ''}; slices ${slices})`);
    for (const [source, p] of Object.entries(load.perRequest)) {
      lines.push(
        `  ${source.padEnd(15)} per request: ${r1(p.calls)} write calls, ${r1(p.writes)} items written, ${r1(p.units)} write units` +
          `${p.indexUnits > 0 ? ` (${r1(p.indexUnits)} on indexes)` : ''}; ${r1(p.readCalls)} read calls, ${r1(p.readUnits)} read units`,
      );
    }
    const big = Object.entries(load.itemSizes).slice(0, 3);
    const n = Math.max(1, load.requests + load.failed);
    if (big.length > 0) lines.push(`  largest items written: ${big.map(([k, v]) => `${k} ${v.maxBytes} B (mean ${Math.round(v.meanBytes)}, ${v.overOneKb} of ${v.writes} writes over 1 KB)`).join('; ')}`);
    const costly = Object.entries(load.itemSizes).sort((a, b) => b[1].units - a[1].units);
    if (costly.length > 0) lines.push(`  gateway write units per request by item: ${costly.map(([k, v]) => `${k} ${r1(v.units / n)}`).join(', ')}`);
    lines.push(`  transactions cancelled by conflict per request: ${r1(load.conflictsPerRequest)}`);
    lines.push('  hottest partition key values:');
    for (const h of load.hottestPartitions) lines.push(`    ${hot(h)}`);
    lines.push('  hottest items:');
    for (const h of load.hottestItems) lines.push(`    ${hot(h)}`);
    if (load.name.startsWith('one workspace')) {
      lines.push("  hottest beyond each key's own items (partition / item):");
      for (const h of [...load.beyondKeys.partitions.slice(0, 2), ...load.beyondKeys.items.slice(0, 2)]) lines.push(`    ${hot(h)}`);
    }
    if (load.rollups.partition !== undefined || load.rollups.item !== undefined) {
      lines.push("  the aggregator's rollups, hottest (partition / item):");
      for (const h of [load.rollups.partition, load.rollups.item]) if (h !== undefined) lines.push(`    ${hot(h)}`);
    }
    if (load.name === 'many workspaces') {
      lines.push('  written by more than one workspace (partition / item):');
      for (const h of [...load.sharedPartitions.slice(0, 2), ...load.sharedItems.slice(0, 2)]) lines.push(`    ${hot(h)}`);
    }
  }
  lines.push('');
  lines.push('');
  lines.push(`locally, concurrency 64: conflicts as DynamoDB would cancel them (the tap cancels a write meeting another ongoing one;`);
  lines.push(`  a write holds its items until its reply or ${r.storeMap.conflictWindowMs} ms, whichever is first; per admitted request)`);
  for (const s of r.storeMap.conflicts) {
    lines.push(`  ${s.name.padEnd(48)} ${r1(s.rps)} req/s (${s.ok} ok, ${s.failed} failed; ${s.slices} slice${s.slices === 1 ? '' : 's'} at the end)`);
    lines.push(`    transactions cancelled ${r3(s.conflictsPerAdmission)}, snapshots cancelled ${r3(s.conflictedReadsPerAdmission)}, single writes refused ${r3(s.conflictedWritesPerAdmission)}; transactions per request ${r1(s.transactionsPerRequest)}`);
    const met = Object.entries(s.conflictItems);
    if (met.length > 0) lines.push(`    met on: ${met.map(([k, v]) => `${k} ${v}`).join('; ')}`);
  }
  if (r.storeMap.growth.length > 0) {
    lines.push('  the growing workspace, every 5 s: seconds, admitted, conflicts per admission in those 5 s, slice count');
    let last = { admitted: 0, conflicts: 0 };
    r.storeMap.growth.forEach((g, i) => {
      if ((i + 1) % 5 !== 0 && i !== r.storeMap.growth.length - 1) return;
      const n = g.admitted - last.admitted;
      lines.push(`    ${String(g.atSeconds).padStart(5)} s  ${String(g.admitted).padStart(6)}  ${n > 0 ? r3((g.conflicts - last.conflicts) / n) : '-'}  ${g.slices}`);
      last = g;
    });
  }
  lines.push(`reported capacity (DynamoDB Local) equal to the computed figure on ${r.storeMap.reportedCapacity.agrees} of ${r.storeMap.reportedCapacity.agrees + r.storeMap.reportedCapacity.differs} write calls`);
  for (const d of r.storeMap.reportedCapacity.differences) lines.push(`  differs: ${d}`);
  return lines.join('\n');
}

/** Merges the store map into `bench-results/bench.json`, keeping whatever else the file holds. */
export function writeStoreMap(r: StoreMapResult, outDir = path.join(REPO_ROOT, 'bench-results')): string {
  mkdirSync(outDir, { recursive: true });
  const file = path.join(outDir, 'bench.json');
  let existing: Record<string, unknown> = {};
  if (existsSync(file)) {
    try {
      existing = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
    } catch {
      existing = {};
    }
  }
  const round = (_k: string, v: unknown): unknown => (typeof v === 'number' && !Number.isInteger(v) ? Math.round(v * 1000) / 1000 : v);
  writeFileSync(file, `${JSON.stringify({ ...existing, ...r }, round, 2)}\n`);
  return file;
}

/** `npm run bench -- --store-map-only` and `npx tsx bench/store-map.ts`: run, print, merge into bench.json. */
export async function storeMapMain(argv: readonly string[]): Promise<void> {
  const quick = argv.includes('--quick');
  const conflictsOnly = argv.includes('--conflicts-only');
  const goalsOnly = argv.includes('--goals-only');
  const windowArg = argv.find((a) => a.startsWith('--conflict-window-ms='));
  const conflictWindowMs = windowArg === undefined ? undefined : Number(windowArg.slice(windowArg.indexOf('=') + 1));
  if (conflictWindowMs !== undefined && !(conflictWindowMs > 0)) throw new Error('--conflict-window-ms=N needs a positive number of milliseconds');
  const result = await runStoreMap({ quick, conflictsOnly, goalsOnly, ...(conflictWindowMs === undefined ? {} : { conflictWindowMs }) });
  process.stdout.write(`${renderStoreMap(result)}\n`);
  // A conflicts-only or goals-only run is not a whole map: bench.json keeps the last full one.
  if (!conflictsOnly && !goalsOnly) log(`merged into ${path.relative(process.cwd(), writeStoreMap(result))}`);
}

if (require.main === module) {
  storeMapMain(process.argv.slice(2)).then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(`[store-map] failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exit(1);
    },
  );
}
