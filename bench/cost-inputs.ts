/**
 * The cost model's inputs, read from bench.json: the store map's units (`storeUnitsFrom`, the one
 * function that knows the store map's field names), the figures the bench's cost phase measured
 * (`costInputs`), the CPU share's overheads (`cpuShare`) and the gateway's own CPU (`cpu`). Where a
 * figure is missing, a stated one stands in and `sources` says so, so the report never passes a
 * guess off as a measurement.
 */
import { stageSettings, STAGE_NAMES } from '../lib/stage';
import { TABLES } from '../lambdas/shared/schema';
import {
  LIMIT_VARIANTS,
  type AggregatorPoint,
  type LimitVariant,
  type ManagedProfile,
  type Measured,
  type OverheadPoint,
  type ReplicatedPoint,
  type ReplicatedStore,
  type StageProfile,
  type StoreUnits,
  type StreamBatching,
} from './cost-model';

type Json = Readonly<Record<string, unknown>>;

function obj(v: unknown): Json | undefined {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : undefined;
}

function num(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

function at(root: unknown, ...path: readonly string[]): unknown {
  let v: unknown = root;
  for (const k of path) v = obj(v)?.[k];
  return v;
}

/** The load of today's store map whose requests are a service's typical mix: many workspaces, one key each. */
const TYPICAL_LOAD = 'many workspaces';

/** The store map's name for a variant's limits, and the model's. */
const VARIANT_OF: Readonly<Record<string, LimitVariant>> = { none: 'noLimits', every: 'allLimits' };

function batchingFrom(v: unknown): StreamBatching | undefined {
  const batchSize = num(at(v, 'batchSize'));
  const windowSeconds = num(at(v, 'windowSeconds'));
  const recordsPerRequest = num(at(v, 'recordsPerRequest'));
  const rowsPerRequest = num(at(v, 'rowsPerRequest'));
  const shards = num(at(v, 'shards'));
  return batchSize === undefined || windowSeconds === undefined || recordsPerRequest === undefined || rowsPerRequest === undefined || shards === undefined
    ? undefined
    : { batchSize, windowSeconds, recordsPerRequest, rowsPerRequest, shards };
}

/** A store map's replicated figures (`writeUnits`, `indexWriteUnits`, `upperBoundWriteUnits`, `bytes`), or undefined. */
function replicatedPointFrom(v: unknown): ReplicatedPoint | undefined {
  const writeUnits = num(at(v, 'writeUnits'));
  const bytes = num(at(v, 'bytes'));
  if (writeUnits === undefined || bytes === undefined) return undefined;
  return { writeUnits, indexWriteUnits: num(at(v, 'indexWriteUnits')) ?? 0, upperBoundWriteUnits: num(at(v, 'upperBoundWriteUnits')) ?? writeUnits, bytes };
}

/** A variant's `replicated` figures: the gateway's, and the aggregator's at the batch size of each rate. */
function replicatedStoreFrom(v: unknown): ReplicatedStore | undefined {
  const gateway = replicatedPointFrom(at(v, 'replicated', 'gateway'));
  if (gateway === undefined) return undefined;
  const aggregator = Object.values(obj(at(v, 'replicated', 'aggregator')) ?? {})
    .flatMap((p) => {
      const batchSize = num(at(p, 'rowsPerBatch'));
      const point = replicatedPointFrom(p);
      return batchSize === undefined || point === undefined ? [] : [{ batchSize, ...point }];
    })
    .sort((x, y) => x.batchSize - y.batchSize);
  return { gateway, aggregator };
}

/**
 * The store map's figures (bench.json `storeMap`) as units, or undefined when it holds none. The
 * one function that knows the store map's field names.
 *
 * - `storeMap.variants` (the `store-rows` branch, in progress): per variant (`limits`: `none`,
 *   `every`) the gateway's write and read units per request, and the aggregator's per request at
 *   the batches it gets at each rate (`aggregator["<rate>"].rowsPerBatch`); the mapping's
 *   batching (`aggregatorBatching`) and one sweeper run (`sweeperRun`).
 * - Today's map: write units per request by source for each load, no reads, no variants, the
 *   aggregator at the one batch size its stream poller used: the many-workspace load stands for
 *   both variants.
 */
export function storeUnitsFrom(storeMap: unknown): StoreUnits | undefined {
  const map = obj(storeMap);
  if (map === undefined) return undefined;
  if (Array.isArray(map.variants) && map.variants.length > 0) {
    const gateway = {} as Record<LimitVariant, { writeUnits: number; readUnits: number | null }>;
    const aggregator = {} as Record<LimitVariant, AggregatorPoint[]>;
    const replicated = {} as Record<LimitVariant, ReplicatedStore>;
    for (const v of map.variants) {
      const variant = VARIANT_OF[String(at(v, 'limits'))];
      const writeUnits = num(at(v, 'gateway', 'writeUnits'));
      if (variant === undefined || writeUnits === undefined) continue;
      gateway[variant] = { writeUnits, readUnits: num(at(v, 'gateway', 'readUnits')) ?? null };
      aggregator[variant] = Object.values(obj(at(v, 'aggregator')) ?? {})
        .flatMap((p) => {
          const batchSize = num(at(p, 'rowsPerBatch'));
          const units = num(at(p, 'writeUnits'));
          return batchSize === undefined || units === undefined ? [] : [{ batchSize, writeUnits: units, readUnits: num(at(p, 'readUnits')) ?? null }];
        })
        .sort((x, y) => x.batchSize - y.batchSize);
      const r = replicatedStoreFrom(v);
      if (r !== undefined) replicated[variant] = r;
    }
    if (LIMIT_VARIANTS.some((v) => gateway[v] === undefined)) return undefined;
    const hasReplicated = LIMIT_VARIANTS.every((v) => replicated[v] !== undefined);
    const batching = batchingFrom(at(map, 'aggregatorBatching'));
    const sweeperReads = num(at(map, 'sweeperRun', 'readUnits'));
    const sweeperReplicated = num(at(map, 'sweeperRun', 'replicatedWriteUnits'));
    return {
      source: `storeMap.variants (limits none and every${hasReplicated ? ', with their replicated figures' : ''}), storeMap.aggregatorBatching, storeMap.sweeperRun`,
      gateway,
      aggregator,
      ...(batching === undefined ? {} : { batching }),
      ...(sweeperReads === undefined
        ? {}
        : { sweeperRun: { readUnits: sweeperReads, writeUnits: num(at(map, 'sweeperRun', 'writeUnits')) ?? 0, ...(sweeperReplicated === undefined ? {} : { replicatedWriteUnits: sweeperReplicated }) } }),
      ...(hasReplicated ? { replicated } : {}),
    };
  }
  const loads = Array.isArray(map.loads) ? map.loads : [];
  const load = loads.find((l) => at(l, 'name') === TYPICAL_LOAD);
  const gatewayUnits = num(at(load, 'perRequest', 'gateway', 'units'));
  const aggregatorUnits = num(at(load, 'perRequest', 'aggregator', 'units'));
  const batchSize = num(map.aggregatorBatchSize) ?? 100;
  if (gatewayUnits === undefined || aggregatorUnits === undefined) return undefined;
  const one = { writeUnits: gatewayUnits, readUnits: null };
  const points = [{ batchSize, writeUnits: aggregatorUnits, readUnits: null }];
  return {
    source: `storeMap.loads["${TYPICAL_LOAD}"].perRequest (one figure for both limit variants; aggregator at batch ${batchSize} only; no read units)`,
    gateway: { noLimits: one, allLimits: one },
    aggregator: { noLimits: points, allLimits: points },
  };
}

/** The issue's figures (the bench's store map before the store's redesign), when bench.json has no store map. */
const STATED_POINTS = [{ batchSize: 100, writeUnits: 14, readUnits: null }];
const STATED_STORE: StoreUnits = {
  source: 'stated: issue 21 (gateway ~23, aggregator ~14 write units per request at local batch sizes); no store map in bench.json',
  gateway: { noLimits: { writeUnits: 23, readUnits: null }, allLimits: { writeUnits: 23, readUnits: null } },
  aggregator: { noLimits: STATED_POINTS, allLimits: STATED_POINTS },
};

/** Stated stand-ins for what the cost phase measures (docs/cost.md gives their reasons). */
const STATED = {
  gatewayLogBytesPerRequest: 700,
  sweeper: { logBytesPerRun: 400, msPerRun: 500, readUnitsPerRun: 128 },
  notifier: { logBytesPerRun: 300, msPerRun: 200 },
  aggregator: { fixedMs: 30, perRowMs: 1, logBytesPerBatch: 0 },
  storage: { usageRowBytes: 500, markerBytes: 80, markerDays: 35 },
  wire: { clientFixedBytes: 1_200, clientBytesPerToken: 180, providerFixedBytes: 900, providerBytesPerToken: 170, requestFixedBytes: 600 },
  lookupsPerRefresh: 3,
  // The issue's figures: 4.6 ms of CPU per non-streamed request, about 5 ms added and 3 ms settling.
  overhead: { uncappedMs: 8, cpuPerRequestUs: 4_600 },
  cpuPerChunkUs: 18,
};

/** The cost phase's figures (bench.json `costInputs`, written by `phases/cost-measures.ts`). */
export interface CostInputs {
  readonly gatewayLogBytesPerRequest: number;
  readonly sweeper: { readonly logBytesPerRun: number; readonly msPerRun: number; readonly queriesPerRun: number };
  readonly notifier: { readonly logBytesPerRun: number; readonly msPerRun: number };
  readonly aggregator: { readonly points: readonly { readonly rows: number; readonly ms: number }[]; readonly logBytesPerBatch: number };
  readonly storage: { readonly usageRowBytes: number; readonly markerBytes: number; readonly markerDays: number };
  readonly wire: Measured['wire'];
  readonly lookupsPerRefresh: number;
}

/** `fixed + perRow × rows` through two or more points (least squares); one point is all fixed. */
export function fitLine(points: readonly { readonly rows: number; readonly ms: number }[]): { fixedMs: number; perRowMs: number } {
  if (points.length === 0) return { fixedMs: 0, perRowMs: 0 };
  if (points.length === 1) return { fixedMs: (points[0] as { ms: number }).ms, perRowMs: 0 };
  const n = points.length;
  const mx = points.reduce((s, p) => s + p.rows, 0) / n;
  const my = points.reduce((s, p) => s + p.ms, 0) / n;
  const sxx = points.reduce((s, p) => s + (p.rows - mx) ** 2, 0);
  const slope = sxx === 0 ? 0 : points.reduce((s, p) => s + (p.rows - mx) * (p.ms - my), 0) / sxx;
  const perRowMs = Math.max(0, slope);
  return { fixedMs: Math.max(0, my - perRowMs * mx), perRowMs };
}

/** The overhead points of bench.json `cpuShare`: added latency plus settlement, p50, per memory size. */
export function overheadPoints(cpuShare: unknown): OverheadPoint[] {
  if (!Array.isArray(cpuShare)) return [];
  return cpuShare.flatMap((e) => {
    const memoryMb = num(at(e, 'memoryMb'));
    const added = num(at(e, 'addedP50Ms'));
    const settle = num(at(e, 'settleP50Ms'));
    return memoryMb === undefined || added === undefined ? [] : [{ memoryMb, overheadMs: Math.max(0, added) + Math.max(0, settle ?? 0) }];
  });
}

/** Builds the model's `Measured` from a parsed bench.json (any of its parts may be missing). */
export function measuredFrom(bench: unknown): Measured {
  const sources: Record<string, string> = {};
  const store = storeUnitsFrom(at(bench, 'storeMap'));
  sources.dynamodbUnits = store?.source ?? STATED_STORE.source;
  sources.replicatedUnits =
    store?.replicated !== undefined
      ? 'measured: bench.json storeMap.variants[].replicated (a second region: write units as plain writes, index writes, bytes)'
      : "stated: no replicated figures in bench.json; a second region is billed the writing region's own units (an upper bound: a transaction's writes doubled) and 1 KB a unit replicated";
  const ci = obj(at(bench, 'costInputs')) as Partial<CostInputs> | undefined;
  const measuredOr = <T>(name: string, value: T | undefined, stated: T, what: string): T => {
    sources[name] = value === undefined ? `stated (${what} not in bench.json)` : `measured: bench.json costInputs.${name}`;
    return value ?? stated;
  };
  const aggregatorPoints = ci?.aggregator?.points;
  const aggregatorLine = aggregatorPoints === undefined || aggregatorPoints.length === 0 ? undefined : fitLine(aggregatorPoints);
  const uncappedAdded = num(at(bench, 'nonStreamedC1', 'addedP50'));
  const uncappedSettle = num(at(bench, 'gatewayTimeline', 'nonStreamed', 'settle', 'p50'));
  const cpuPerRequestUs = num(at(bench, 'cpu', 'perNonStreamedRequestUs'));
  const cpuPerChunkUs = num(at(bench, 'cpu', 'perChunkBusyUs'));
  const points = overheadPoints(at(bench, 'cpuShare'));
  sources.overhead =
    points.length > 0
      ? `measured under the CPU share at ${points.map((p) => `${p.memoryMb} MB`).join(', ')} (bench.json cpuShare); other sizes estimated`
      : uncappedAdded !== undefined
        ? 'estimated: the unconstrained run (bench.json nonStreamedC1, gatewayTimeline, cpu) with its CPU stretched by the share'
        : 'stated: issue 21 (4.6 ms CPU per request), stretched by the share';
  sources.cpuPerChunk = cpuPerChunkUs === undefined ? 'stated (bench.json cpu.perChunkBusyUs missing)' : 'measured: bench.json cpu.perChunkBusyUs';
  return {
    store: store ?? STATED_STORE,
    gatewayLogBytesPerRequest: measuredOr('gatewayLogBytesPerRequest', ci?.gatewayLogBytesPerRequest, STATED.gatewayLogBytesPerRequest, 'the gateway log bytes'),
    sweeper: (() => {
      const s = measuredOr('sweeper', ci?.sweeper, undefined, 'the sweeper run');
      // Each Query of an expiry shard reads at least half a unit (eventually consistent, up to 4 KB).
      return s === undefined ? STATED.sweeper : { logBytesPerRun: s.logBytesPerRun, msPerRun: s.msPerRun, readUnitsPerRun: s.queriesPerRun * 0.5 };
    })(),
    notifier: measuredOr('notifier', ci?.notifier, STATED.notifier, 'the notifier run'),
    aggregator: (() => {
      sources.aggregator = aggregatorLine === undefined ? 'stated (no aggregator batches timed in bench.json)' : 'measured: bench.json costInputs.aggregator (DynamoDB Local on loopback)';
      return aggregatorLine === undefined ? STATED.aggregator : { ...aggregatorLine, logBytesPerBatch: ci?.aggregator?.logBytesPerBatch ?? 0 };
    })(),
    // The usage table and each of its indexes (projection ALL, lambdas/shared/schema.ts) store the row.
    storage: { ...measuredOr('storage', ci?.storage, STATED.storage, 'the stored item sizes'), usageRowCopies: 1 + TABLES.usage.indexes.filter((i) => (i.projection ?? 'ALL') === 'ALL').length },
    wire: measuredOr('wire', ci?.wire, STATED.wire, 'the reply bytes'),
    overhead: {
      points,
      uncappedMs: uncappedAdded === undefined ? STATED.overhead.uncappedMs : Math.max(0, uncappedAdded) + Math.max(0, uncappedSettle ?? 0),
      cpuPerRequestUs: cpuPerRequestUs ?? STATED.overhead.cpuPerRequestUs,
    },
    cpuPerChunkUs: cpuPerChunkUs ?? STATED.cpuPerChunkUs,
    lookupsPerRefresh: measuredOr('lookupsPerRefresh', ci?.lookupsPerRefresh, STATED.lookupsPerRefresh, 'the directory reads per refresh'),
    sources,
  };
}

/**
 * A stage's managed-instance settings (lib/stage.ts `managedInstances`, which the `managed`
 * branch adds), read without depending on their type; undefined when the settings lack them.
 */
export function managedFrom(settings: unknown): ManagedProfile | undefined {
  const m = obj(at(settings, 'managedInstances'));
  if (m === undefined) return undefined;
  const perEnvironmentConcurrency = num(m.perEnvironmentConcurrency);
  const minEnvironments = num(m.minEnvironments);
  const memoryMb = num(m.memoryMb);
  const memoryGiBPerVcpu = num(m.memoryGiBPerVcpu);
  const natGateways = num(m.natGateways);
  if (perEnvironmentConcurrency === undefined || minEnvironments === undefined || memoryMb === undefined || memoryGiBPerVcpu === undefined || natGateways === undefined) return undefined;
  const types = Array.isArray(m.instanceTypes) ? m.instanceTypes.filter((t): t is string => typeof t === 'string') : undefined;
  const maxEnvironments = num(m.maxEnvironments);
  return {
    ...(types === undefined || types.length === 0 ? {} : { instanceTypes: types }),
    perEnvironmentConcurrency,
    minEnvironments,
    ...(maxEnvironments === undefined ? {} : { maxEnvironments }),
    memoryMb,
    memoryGiBPerVcpu,
    availabilityZones: num(m.availabilityZones) ?? 3,
    natGateways,
  };
}

/** Every deployable stage's settings the model needs, from lib/stage.ts. */
export function stageProfiles(): StageProfile[] {
  return STAGE_NAMES.map((name) => {
    const s = stageSettings(name);
    const managed = managedFrom(s);
    return { name, gatewayMemoryMb: s.gatewayMemoryMb, workerMemoryMb: s.workerMemoryMb, logRetentionDays: s.logRetention, usageRetentionDays: s.usageRetentionDays, ...(managed === undefined ? {} : { managed }) };
  });
}
