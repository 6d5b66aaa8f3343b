/**
 * The cost model: what one million requests cost to run, by component, for a stage's settings, a
 * reply duration and a sustained request rate, on Lambda (default, "on-demand") or on Lambda
 * Managed Instances. Pure: published prices (`cost-prices.ts`), figures the bench measured
 * (`Measured`, built by `cost-inputs.ts` from bench.json) and the stated assumptions below go in;
 * exact dollars come out (`exact.ts`), rounded only for display. docs/cost.md explains each line.
 */
import { USAGE_STREAM_MAPPING } from '../lambdas/aggregator/mapping';
import { chargeMicros, type Rates } from '../lambdas/core/pricing';
import { Exact } from './exact';
import type { PriceBook } from './cost-prices';

export type Compute = 'on-demand' | 'managed-instances';

/** A workspace that sets no limit beyond the per-key request rate, or one that sets every limit. */
export type LimitVariant = 'noLimits' | 'allLimits';

export const LIMIT_VARIANTS: readonly LimitVariant[] = ['noLimits', 'allLimits'];

/** Units per request of the aggregator at one batch size (rows per invocation). */
export interface AggregatorPoint {
  readonly batchSize: number;
  readonly writeUnits: number;
  readonly readUnits: number | null;
}

/**
 * How the aggregator's event source mapping batches the usage stream, when the store map says:
 * Lambda reads each shard 4 times a second (or gathers for `windowSeconds`), up to `batchSize`
 * records, `recordsPerRequest` records per request of which `rowsPerRequest` reach the function.
 */
export interface StreamBatching {
  readonly batchSize: number;
  readonly windowSeconds: number;
  readonly recordsPerRequest: number;
  readonly rowsPerRequest: number;
  readonly shards: number;
}

/**
 * Writes as another region holding a replica is billed for them, per request (the store map's
 * `replicated` figures): `writeUnits` as plain writes, index writes there included (of which
 * `indexWriteUnits`); `upperBoundWriteUnits` with a transaction's copy billed doubled; `bytes`
 * replicated.
 */
export interface ReplicatedPoint {
  readonly writeUnits: number;
  readonly indexWriteUnits: number;
  readonly upperBoundWriteUnits: number;
  readonly bytes: number;
}

/** The replicated figures of one limit variant: the gateway's, and the aggregator's at each batch size. */
export interface ReplicatedStore {
  readonly gateway: ReplicatedPoint;
  readonly aggregator: readonly (ReplicatedPoint & { readonly batchSize: number })[];
}

/** DynamoDB units as the store map measured them (`cost-inputs.ts` reads them). */
export interface StoreUnits {
  /** Which figures of bench.json these are, for the report. */
  readonly source: string;
  /** Per request, by the workspace's limits. */
  readonly gateway: Readonly<Record<LimitVariant, { readonly writeUnits: number; readonly readUnits: number | null }>>;
  /** The aggregator per request at each batch size measured, by the workspace's limits. */
  readonly aggregator: Readonly<Record<LimitVariant, readonly AggregatorPoint[]>>;
  /** The mapping's batching, when the store map reports it; else the model's own (no window). */
  readonly batching?: StreamBatching;
  /** One sweeper run's units, when the store map measures them (and what its writes cost in another region). */
  readonly sweeperRun?: { readonly readUnits: number; readonly writeUnits: number; readonly replicatedWriteUnits?: number };
  /** What another region is billed for the writes replicated to it, when the store map measures it. */
  readonly replicated?: Readonly<Record<LimitVariant, ReplicatedStore>>;
}

/** The gateway's time beyond the reply at one memory size, measured under Lambda's CPU share. */
export interface OverheadPoint {
  readonly memoryMb: number;
  /** Added latency before the reply plus the settlement after it (both billed), milliseconds, p50. */
  readonly overheadMs: number;
}

/** What the bench measured; `sources` says, for each group, whether it was measured or stated. */
export interface Measured {
  readonly store: StoreUnits;
  /** Bytes of log the gateway writes per request (its one EMF line), from its stdout. */
  readonly gatewayLogBytesPerRequest: number;
  readonly sweeper: { readonly logBytesPerRun: number; readonly msPerRun: number; readonly readUnitsPerRun: number };
  readonly notifier: { readonly logBytesPerRun: number; readonly msPerRun: number };
  /** The aggregator's invocation time: `fixedMs + perRowMs × rows`, and the log it writes per batch. */
  readonly aggregator: { readonly fixedMs: number; readonly perRowMs: number; readonly logBytesPerBatch: number };
  /**
   * Stored item sizes as DynamoDB counts them (without its 100-byte overhead), how long each is
   * kept, and how many copies of a usage row are stored (the table and each index projecting it).
   */
  readonly storage: { readonly usageRowBytes: number; readonly usageRowCopies: number; readonly markerBytes: number; readonly markerDays: number };
  /** Reply bytes the client receives: `fixed + perToken × output tokens`; the provider's own stream likewise. */
  readonly wire: { readonly clientFixedBytes: number; readonly clientBytesPerToken: number; readonly providerFixedBytes: number; readonly providerBytesPerToken: number; readonly requestFixedBytes: number };
  /** The gateway's billed time beyond the reply: measured per memory, else estimated from CPU. */
  readonly overhead: { readonly points: readonly OverheadPoint[]; readonly uncappedMs: number; readonly cpuPerRequestUs: number };
  /** CPU per streamed chunk (for sizing managed instances). */
  readonly cpuPerChunkUs: number;
  /** Directory reads one cache refresh makes (key, workspace, ...), each an eventually consistent GetItem. */
  readonly lookupsPerRefresh: number;
  readonly sources: Readonly<Record<string, string>>;
}

/**
 * What the model assumes where nothing measures it. Each is printed with the report and stated in
 * docs/cost.md; change one here and the report follows.
 */
export interface Assumptions {
  /** AWS's billing month: 730 hours. */
  readonly secondsPerMonth: number;
  readonly bytesPerGb: number;
  /** A request's prompt and how fast its reply streams: the reply's output tokens are `replySeconds × outputTokensPerSecond`. */
  readonly inputTokens: number;
  readonly outputTokensPerSecond: number;
  /** Bytes of prompt per input token (about four characters a token) sent to the provider. */
  readonly requestBytesPerInputToken: number;
  /** TLS and TCP framing on the provider's and the client's traffic, as a fraction of the bytes. */
  readonly wireOverhead: number;
  /** Provider keys one execution environment uses, and how long it caches each (`lambdas/adapters/secrets.ts`: 300 s). */
  readonly providersPerEnvironment: number;
  readonly secretTtlSeconds: number;
  /** Provider keys stored in Secrets Manager (one per provider of config/providers.json but `local`). */
  readonly secretsStored: number;
  /** CloudWatch custom metrics: the EMF lines' names times their dimension sets (stage, codes, providers). */
  readonly customMetrics: number;
  /** The sweeper's and the notifier's schedules (lib/sweeper.ts, lib/notifier.ts). */
  readonly sweeperEverySeconds: number;
  readonly notifierEverySeconds: number;
  /** START, END and REPORT, the lines Lambda itself writes per invocation (text format). */
  readonly platformLogBytesPerInvocation: number;
  /** Stored-item overhead DynamoDB adds to each item. */
  readonly dynamoItemOverheadBytes: number;
  /** Rows one stream shard takes a second (one partition of the usage table: 1,000 writes a second). */
  readonly rowsPerSecondPerShard: number;
  /**
   * Lambda Managed Instances, where the stage does not say (lib/stage.ts `managedInstances`): one
   * environment's size, NAT gateways; always: the CPU utilisation Lambda keeps (headroom for the
   * traffic to double within 5 minutes) and what an instance keeps for itself.
   */
  readonly managedFunctionGb: number;
  readonly managedGibPerVcpu: number;
  readonly managedTargetCpu: number;
  readonly managedReservedGibPerInstance: number;
  readonly natGateways: number;
  /** On a managed instance the logs and the provider traffic leave through the NAT; DynamoDB through a gateway endpoint (free). */
  readonly logsThroughNat: boolean;
  /**
   * Two regions or more (docs/regions.md): each region's warden runs every `wardenEverySeconds`
   * for `wardenBusySeconds` at `wardenMemoryMb`, probing every region's gateway every
   * `probeEverySeconds` (a probe is a gateway invocation that writes `probeWriteUnits`); the
   * configuration home writes a heartbeat item every `heartbeatEverySeconds`; the front door's
   * function reads `kvsReadsPerRequest` keys of its KeyValueStore per request; the notifier runs
   * in `notifierRegions` (the configuration home only).
   */
  readonly wardenMemoryMb: number;
  readonly wardenEverySeconds: number;
  readonly wardenBusySeconds: number;
  readonly probeEverySeconds: number;
  readonly probeWriteUnits: number;
  readonly heartbeatEverySeconds: number;
  readonly heartbeatWriteUnits: number;
  readonly kvsReadsPerRequest: number;
  readonly notifierRegions: number;
}

export const ASSUMPTIONS: Assumptions = {
  secondsPerMonth: 730 * 3600,
  // AWS bills GB as 2^30 bytes (the streaming example on the Lambda pricing page: 1 GB = 1,024 MB).
  bytesPerGb: 2 ** 30,
  inputTokens: 1_000,
  outputTokensPerSecond: 50,
  requestBytesPerInputToken: 4,
  wireOverhead: 0.1,
  providersPerEnvironment: 1,
  secretTtlSeconds: 300,
  secretsStored: 7,
  customMetrics: 80,
  sweeperEverySeconds: 60,
  notifierEverySeconds: 300,
  platformLogBytesPerInvocation: 290,
  dynamoItemOverheadBytes: 100,
  rowsPerSecondPerShard: 1_000,
  managedFunctionGb: 2,
  managedGibPerVcpu: 2,
  managedTargetCpu: 0.5,
  // AWS publishes no overhead per instance; lib/stage.ts's managed settings count two 2 GB
  // environments on a 4 GiB c7g.large, and so does the model.
  managedReservedGibPerInstance: 0,
  natGateways: 3,
  logsThroughNat: true,
  wardenMemoryMb: 128,
  wardenEverySeconds: 60,
  wardenBusySeconds: 55,
  probeEverySeconds: 5,
  probeWriteUnits: 1,
  heartbeatEverySeconds: 5,
  heartbeatWriteUnits: 1,
  kvsReadsPerRequest: 1,
  notifierRegions: 1,
};

/** A stage's gateway on Lambda Managed Instances (lib/stage.ts `managedInstances`). */
export interface ManagedProfile {
  /** Instance types the capacity provider may launch; undefined: any the price book prices. */
  readonly instanceTypes?: readonly string[];
  readonly perEnvironmentConcurrency: number;
  readonly minEnvironments: number;
  /** The stage's ceiling (`MaxExecutionEnvironments`), when it sets one: a fleet above it would be throttled. */
  readonly maxEnvironments?: number;
  readonly memoryMb: number;
  readonly memoryGiBPerVcpu: number;
  readonly availabilityZones: number;
  /** NAT gateways, each with a public IPv4 address; with fewer than zones, some traffic crosses zones to reach one. */
  readonly natGateways: number;
}

/** A stage's settings the model needs (lib/stage.ts). */
export interface StageProfile {
  readonly name: string;
  readonly gatewayMemoryMb: number;
  readonly workerMemoryMb: number;
  readonly logRetentionDays: number;
  readonly usageRetentionDays: number;
  /** When the stage settings carry them; else the published defaults and the assumptions. */
  readonly managed?: ManagedProfile;
}

/** The managed-instance settings a stage runs with: its own, else AWS's defaults and the assumptions. */
export function managedProfile(book: PriceBook, a: Assumptions, stage: StageProfile): ManagedProfile {
  if (stage.managed !== undefined) return stage.managed;
  return {
    perEnvironmentConcurrency: book.limits.managedNodeConcurrencyPerVcpu.value.toNumber() * (a.managedFunctionGb / a.managedGibPerVcpu),
    minEnvironments: book.limits.managedMinEnvironments.value.toNumber(),
    memoryMb: a.managedFunctionGb * 1024,
    memoryGiBPerVcpu: a.managedGibPerVcpu,
    availabilityZones: 3,
    natGateways: a.natGateways,
  };
}

/** One case the model prices. */
export interface Scenario {
  readonly name: string;
  readonly stage: StageProfile;
  readonly compute: Compute;
  /** The gateway's memory (on-demand); the environment size for managed instances. */
  readonly memoryMb: number;
  readonly replySeconds: number;
  /** The stage's sustained rate, all regions together, spread evenly over them. */
  readonly requestsPerSecond: number;
  /**
   * Regions the stage runs in (docs/regions.md): 1 (or absent) is today's one-region stack; two or
   * more are global tables with a replica in each, a gateway, sweeper and aggregator per region,
   * and the front door (CloudFront, its function and KeyValueStore, the wardens) before them.
   * @default 1
   */
  readonly regions?: number;
}

/** Every line the model prices, and the component (bench.json's `usdPerMillion` keys) it belongs to. */
export const LINES = {
  gatewayRequests: 'lambda',
  gatewayDuration: 'lambda',
  instances: 'lambda',
  managementFee: 'lambda',
  aggregator: 'lambda',
  sweeper: 'lambda',
  notifier: 'lambda',
  gatewayWrites: 'dynamodb',
  aggregatorWrites: 'dynamodb',
  sweeperWrites: 'dynamodb',
  reads: 'dynamodb',
  storage: 'dynamodb',
  logIngestion: 'logs',
  logStorage: 'logs',
  metrics: 'logs',
  secretsCalls: 'other',
  secretsStored: 'other',
  transferOut: 'other',
  streamedBytes: 'other',
  natHours: 'other',
  natBytes: 'other',
  crossZone: 'other',
  // Two regions or more (zero with one).
  warden: 'lambda',
  replicatedWrites: 'dynamodb',
  replicaIndexWrites: 'dynamodb',
  replicatedTtlDeletes: 'dynamodb',
  frontDoorWrites: 'dynamodb',
  crossRegion: 'other',
  cloudfrontRequests: 'other',
  cloudfrontFunction: 'other',
  kvsReads: 'other',
  toOrigin: 'other',
} as const;

export type LineName = keyof typeof LINES;
export type Component = (typeof LINES)[LineName];
export const COMPONENTS: readonly Component[] = ['lambda', 'dynamodb', 'logs', 'other'];

/** Managed instances sized for a load. */
export interface Fleet {
  readonly environments: number;
  readonly instanceType: string;
  readonly instances: number;
  readonly environmentsPerInstance: number;
  /** What sized it: the minimum, concurrency, or CPU. */
  readonly boundBy: 'minimum' | 'concurrency' | 'cpu';
  readonly usdPerHour: Exact;
  /** More environments than the stage's ceiling allows: priced as if it were raised. */
  readonly overCeiling: boolean;
}

/** A scenario's cost: USD per million requests by line and by component. */
export interface ScenarioCost {
  readonly scenario: Scenario;
  readonly variant: LimitVariant;
  readonly lines: Readonly<Record<LineName, Exact>>;
  readonly components: Readonly<Record<Component, Exact>>;
  readonly total: Exact;
  readonly aggregatorBatch: Exact;
  readonly gatewayBilledMs: number;
  readonly fleet?: Fleet;
  /** Regions priced (1 unless the scenario says). */
  readonly regions: number;
  /**
   * With two regions or more: per request, what each other region is billed for the writes
   * replicated to it (write units as plain writes, index writes included; the same with a
   * transaction's copy doubled) and the bytes replicated to it; and the total if AWS billed a
   * transaction's replicated copy doubled (the upper bound).
   */
  readonly replication?: { readonly writeUnits: Exact; readonly upperBoundWriteUnits: Exact; readonly bytes: Exact; readonly upperBoundTotal: Exact };
}

const E = (v: number | string): Exact => Exact.of(v);
const MILLION = E(1_000_000);

/** vCPU share Lambda gives a memory size: `memory ÷ 1,769` of one vCPU. */
export function cpuShare(memoryMb: number, mbPerVcpu: Exact): Exact {
  return E(memoryMb).div(mbPerVcpu);
}

/**
 * Rows in one aggregator invocation at a sustained rate: what one shard's stream gathers between
 * two polls (4 a second) or over the mapping's batching window, at most the batch size, at least
 * one. With the store map's batching (its window, records per request, shards) that is its
 * reading, kept fractional; without it the deployed mapping (`lambdas/aggregator/mapping.ts`)
 * and about one shard per 1,000 rows a second.
 */
export function aggregatorBatch(requestsPerSecond: number, pollsPerSecond: Exact, a: Assumptions, batching?: StreamBatching): Exact {
  const b: StreamBatching = batching ?? deployedBatching(requestsPerSecond, a);
  const perShard = E(requestsPerSecond).mul(E(b.recordsPerRequest)).div(E(Math.max(1, b.shards)));
  const gathered = b.windowSeconds > 0 ? perShard.mul(E(b.windowSeconds)) : perShard.div(pollsPerSecond);
  const records = Exact.min(E(b.batchSize), gathered);
  return Exact.max(Exact.ONE, records.mul(E(b.rowsPerRequest)).div(E(Math.max(1, b.recordsPerRequest))));
}

/** The deployed mapping's batching (`lambdas/aggregator/mapping.ts`), about one stream shard per 1,000 rows a second. */
export function deployedBatching(requestsPerSecond: number, a: Assumptions): StreamBatching {
  return {
    batchSize: USAGE_STREAM_MAPPING.batchSize,
    windowSeconds: USAGE_STREAM_MAPPING.maxBatchingWindowSeconds,
    recordsPerRequest: USAGE_STREAM_MAPPING.recordsPerRequest,
    rowsPerRequest: USAGE_STREAM_MAPPING.rowsPerRequest,
    shards: Math.max(1, Math.ceil(requestsPerSecond / a.rowsPerSecondPerShard)),
  };
}

/**
 * One region's aggregator among `regions`, as {@link aggregatorBatch} reads it at that region's
 * rate (the stage's over `regions`): every row is replicated, so every region's stream carries
 * every region's records (`regions` times its own), and the mapping's filter on the row's region
 * hands over only its own. The batch size and the window count all the records (the filter drops
 * the others after they are read), so a region's batches hold `1 / regions` of the rows one
 * region alone would get at the same stage rate, and it is invoked that much more often per row.
 */
export function regionalBatching(b: StreamBatching, regions: number): StreamBatching {
  return { ...b, recordsPerRequest: b.recordsPerRequest * regions };
}

/**
 * Units per request at batch size `b` from the measured points, linear in `1 / b` between the two
 * nearest (a batch's per-row writes are fixed, its totals are shared by its rows), and the nearest
 * point's figure outside them. One point gives that figure at every batch size.
 */
export function unitsAtBatch(points: readonly { readonly batchSize: number; readonly units: number }[], b: Exact): Exact {
  if (points.length === 0) return Exact.ZERO;
  const sorted = [...points].sort((x, y) => x.batchSize - y.batchSize);
  const first = sorted[0] as { batchSize: number; units: number };
  const last = sorted[sorted.length - 1] as { batchSize: number; units: number };
  if (b.le(E(first.batchSize))) return E(first.units);
  if (E(last.batchSize).le(b)) return E(last.units);
  for (let i = 1; i < sorted.length; i += 1) {
    const lo = sorted[i - 1] as { batchSize: number; units: number };
    const hi = sorted[i] as { batchSize: number; units: number };
    if (b.le(E(hi.batchSize))) {
      const inv = (x: Exact): Exact => Exact.ONE.div(x);
      const t = inv(b).sub(inv(E(hi.batchSize))).div(inv(E(lo.batchSize)).sub(inv(E(hi.batchSize))));
      return E(hi.units).add(E(lo.units).sub(E(hi.units)).mul(t));
    }
  }
  return E(last.units);
}

/**
 * The gateway's billed milliseconds beyond the reply at a memory size: the figure measured under
 * that memory's CPU share when there is one; else the unconstrained figure with its CPU stretched
 * by the share (`cpu × (1 / share − 1)` more), which is what a CPU-bound stretch would add.
 */
export function gatewayOverheadMs(overhead: Measured['overhead'], memoryMb: number, mbPerVcpu: Exact): { ms: number; measured: boolean } {
  const point = overhead.points.find((p) => p.memoryMb === memoryMb);
  if (point !== undefined) return { ms: point.overheadMs, measured: true };
  const share = Math.min(1, cpuShare(memoryMb, mbPerVcpu).toNumber());
  return { ms: overhead.uncappedMs + (overhead.cpuPerRequestUs / 1000) * (1 / share - 1), measured: false };
}

/** Output tokens of a reply of `replySeconds`. */
export function outputTokens(replySeconds: number, a: Assumptions): number {
  return Math.round(replySeconds * a.outputTokensPerSecond);
}

/** Bytes one request puts on the wire: to the provider (prompt), from it (its stream), to the client (our stream). */
export function wireBytes(m: Measured, tokensOut: number, a: Assumptions): { toProvider: Exact; fromProvider: Exact; toClient: Exact } {
  const framing = Exact.ONE.add(E(a.wireOverhead));
  return {
    toProvider: E(m.wire.requestFixedBytes).add(E(a.inputTokens * a.requestBytesPerInputToken)).mul(framing),
    fromProvider: E(m.wire.providerFixedBytes).add(E(m.wire.providerBytesPerToken).mul(E(tokensOut))).mul(framing),
    toClient: E(m.wire.clientFixedBytes).add(E(m.wire.clientBytesPerToken).mul(E(tokensOut))).mul(framing),
  };
}

/**
 * Managed instances for a sustained load: enough environments for the concurrency (64 per vCPU
 * for Node.js) and for the CPU at Lambda's target utilisation, never fewer than the minimum
 * (three, one per Availability Zone), packed on the cheapest instance type allowed that holds
 * them (an instance may keep some memory for itself), never fewer instances than that minimum.
 */
export function managedFleet(book: PriceBook, a: Assumptions, cfg: ManagedProfile, requestsPerSecond: number, inFlightSeconds: number, cpuSecondsPerRequest: number): Fleet {
  const envGb = cfg.memoryMb / 1024;
  const envVcpus = envGb / cfg.memoryGiBPerVcpu;
  const minimum = cfg.minEnvironments;
  const byConcurrency = Math.ceil((requestsPerSecond * inFlightSeconds) / cfg.perEnvironmentConcurrency);
  const byCpu = Math.ceil((requestsPerSecond * cpuSecondsPerRequest) / (envVcpus * a.managedTargetCpu));
  const environments = Math.max(minimum, byConcurrency, byCpu);
  const boundBy = environments === minimum && minimum >= Math.max(byConcurrency, byCpu) ? 'minimum' : byConcurrency >= byCpu ? 'concurrency' : 'cpu';
  let best: Fleet | undefined;
  const allowed = book.instances.filter((t) => cfg.instanceTypes === undefined || cfg.instanceTypes.includes(t.name));
  for (const t of allowed) {
    const perInstance = Math.min(Math.floor(t.vcpus / envVcpus), Math.floor((t.memoryGib - a.managedReservedGibPerInstance) / envGb));
    if (perInstance < 1) continue;
    const instances = Math.max(minimum, Math.ceil(environments / perInstance));
    const usdPerHour = t.value.mul(E(instances));
    if (best === undefined || usdPerHour.lt(best.usdPerHour)) best = { environments, instanceType: t.name, instances, environmentsPerInstance: perInstance, boundBy, usdPerHour, overCeiling: cfg.maxEnvironments !== undefined && environments > cfg.maxEnvironments };
  }
  if (best === undefined) throw new Error(`no allowed instance type the price book prices (${cfg.instanceTypes?.join(', ') ?? 'any'}) holds a ${envGb} GB environment; add its price to bench/aws-prices.json`);
  return best;
}

/** Prices one scenario for one limit variant. */
export function scenarioCost(book: PriceBook, m: Measured, s: Scenario, variant: LimitVariant, a: Assumptions = ASSUMPTIONS): ScenarioCost {
  const p = book.prices;
  const price = (name: keyof typeof p): Exact => p[name].value;
  const R = E(s.requestsPerSecond);
  const requestsPerMonth = R.mul(E(a.secondsPerMonth));
  /** A monthly amount as USD per million requests at this scenario's rate. */
  const perMillionOfMonthly = (usdPerMonth: Exact): Exact => usdPerMonth.mul(MILLION).div(requestsPerMonth);
  const perGb = (bytes: Exact): Exact => bytes.div(E(a.bytesPerGb));
  const workerGb = E(s.stage.workerMemoryMb).div(E(1024));
  const mbPerVcpu = book.limits.lambdaMbPerVcpu.value;
  const tokensOut = outputTokens(s.replySeconds, a);
  const wire = wireBytes(m, tokensOut, a);
  const lines = Object.fromEntries(Object.keys(LINES).map((k) => [k, Exact.ZERO])) as Record<LineName, Exact>;
  const managed = managedProfile(book, a, s.stage);
  // Regions: the traffic is spread evenly over them; one region is today's stack, priced as it was.
  const regions = Math.max(1, Math.floor(s.regions ?? 1));
  const others = regions - 1;
  const N = E(regions);

  // --- The gateway -----------------------------------------------------------------------------
  const overhead = gatewayOverheadMs(m.overhead, s.compute === 'on-demand' ? s.memoryMb : Math.max(s.memoryMb, 1769), mbPerVcpu);
  // Lambda bills duration rounded up to the millisecond, the whole reply and the settlement after it.
  const billedMs = Math.ceil(s.replySeconds * 1000 + overhead.ms);
  lines.gatewayRequests = price('lambdaRequest').mul(MILLION);
  let fleet: Fleet | undefined;
  if (s.compute === 'on-demand') {
    lines.gatewayDuration = E(s.memoryMb).div(E(1024)).mul(E(billedMs)).div(E(1000)).mul(price('lambdaArmGbSecond')).mul(MILLION);
  } else {
    const cpuSeconds = (m.overhead.cpuPerRequestUs + tokensOut * m.cpuPerChunkUs) / 1e6;
    // A fleet in each region, sized for that region's share of the traffic.
    fleet = managedFleet(book, a, managed, s.requestsPerSecond / regions, billedMs / 1000, cpuSeconds);
    const monthlyInstances = fleet.usdPerHour.mul(E(a.secondsPerMonth)).div(E(3600)).mul(N);
    lines.instances = perMillionOfMonthly(monthlyInstances);
    lines.managementFee = lines.instances.mul(price('managedInstancesFee'));
    // Each NAT gateway by the hour, and its public IPv4 address, in each region.
    lines.natHours = perMillionOfMonthly(price('natGatewayHour').add(price('publicIpv4Hour')).mul(E(managed.natGateways)).mul(E(a.secondsPerMonth)).div(E(3600)).mul(N));
  }

  // --- The aggregator, the sweeper and the notifier ----------------------------------------------
  // Each region's aggregator reads its own replica's stream, which carries every region's rows.
  const batch =
    regions === 1
      ? aggregatorBatch(s.requestsPerSecond, book.limits.streamPollsPerSecond.value, a, m.store.batching)
      : aggregatorBatch(s.requestsPerSecond / regions, book.limits.streamPollsPerSecond.value, a, regionalBatching(m.store.batching ?? deployedBatching(s.requestsPerSecond, a), regions));
  const invocationsPerRequest = Exact.ONE.div(batch);
  const aggregatorMs = E(m.aggregator.fixedMs).add(E(m.aggregator.perRowMs).mul(batch)).ceil();
  lines.aggregator = invocationsPerRequest.mul(price('lambdaRequest').add(workerGb.mul(aggregatorMs).div(E(1000)).mul(price('lambdaArmGbSecond')))).mul(MILLION);
  const runsPerMonth = (everySeconds: number): Exact => E(a.secondsPerMonth).div(E(everySeconds));
  const scheduled = (everySeconds: number, ms: number): Exact =>
    perMillionOfMonthly(runsPerMonth(everySeconds).mul(price('lambdaRequest').add(workerGb.mul(E(Math.ceil(ms))).div(E(1000)).mul(price('lambdaArmGbSecond')))));
  // A sweeper in each region (each settles its own holds); the notifier in the configuration home.
  lines.sweeper = scheduled(a.sweeperEverySeconds, m.sweeper.msPerRun).mul(N);
  lines.notifier = scheduled(a.notifierEverySeconds, m.notifier.msPerRun).mul(E(Math.min(regions, a.notifierRegions)));

  // --- DynamoDB ------------------------------------------------------------------------------------
  const gw = m.store.gateway[variant];
  const aggregatorPoints = m.store.aggregator[variant];
  const aggregatorWrites = unitsAtBatch(aggregatorPoints.map((x) => ({ batchSize: x.batchSize, units: x.writeUnits })), batch);
  lines.gatewayWrites = E(gw.writeUnits).mul(price('dynamoWriteUnit')).mul(MILLION);
  lines.aggregatorWrites = aggregatorWrites.mul(price('dynamoWriteUnit')).mul(MILLION);
  // Reads: the store map's figure when it measures them; else every request refreshing its
  // directory cache (an upper bound: an on-demand environment serves one request per reply).
  const aggregatorReads = aggregatorPoints.every((x) => x.readUnits !== null)
    ? unitsAtBatch(aggregatorPoints.map((x) => ({ batchSize: x.batchSize, units: x.readUnits as number })), batch)
    : Exact.ZERO;
  const gatewayReads = gw.readUnits !== null ? E(gw.readUnits) : E(m.lookupsPerRefresh).mul(E('0.5'));
  // The sweeper's reads (and its writes, when the store map measured a run) every minute.
  const sweeperRun = m.store.sweeperRun ?? { readUnits: m.sweeper.readUnitsPerRun, writeUnits: 0 };
  lines.reads = gatewayReads
    .add(aggregatorReads)
    .mul(price('dynamoReadUnit'))
    .mul(MILLION)
    .add(perMillionOfMonthly(runsPerMonth(a.sweeperEverySeconds).mul(E(sweeperRun.readUnits)).mul(price('dynamoReadUnit')).mul(N)));
  lines.sweeperWrites = perMillionOfMonthly(runsPerMonth(a.sweeperEverySeconds).mul(E(sweeperRun.writeUnits)).mul(price('dynamoWriteUnit')).mul(N));
  // Storage: the usage row for the stage's retention, the aggregator's marker for its own; every
  // table keeps continuous backups, charged on the same bytes.
  const monthsOf = (days: number): Exact => E(days).mul(E(86_400)).div(E(a.secondsPerMonth));
  const stored = (bytes: number, days: number): Exact => perGb(E(bytes + a.dynamoItemOverheadBytes)).mul(monthsOf(days));
  // Every replica stores every item, with its own continuous backups.
  lines.storage = stored(m.storage.usageRowBytes, s.stage.usageRetentionDays)
    .mul(E(m.storage.usageRowCopies))
    .add(stored(m.storage.markerBytes, m.storage.markerDays))
    .mul(price('dynamoStorageGbMonth').add(price('dynamoPitrGbMonth')))
    .mul(MILLION)
    .mul(N);

  // --- Logs and metrics ------------------------------------------------------------------------------
  const platform = E(a.platformLogBytesPerInvocation);
  // A managed instance has no per-invocation START/END/REPORT lines to speak of next to its JSON logs; kept the same here (an upper bound).
  const gatewayLogBytes = E(m.gatewayLogBytesPerRequest).add(platform);
  const workerLogBytesPerRequest = E(m.aggregator.logBytesPerBatch).add(platform).mul(invocationsPerRequest);
  const scheduledLogBytesPerMonth = runsPerMonth(a.sweeperEverySeconds)
    .mul(E(m.sweeper.logBytesPerRun).add(platform))
    .add(runsPerMonth(a.notifierEverySeconds).mul(E(m.notifier.logBytesPerRun).add(platform)));
  const logBytesPerRequest = gatewayLogBytes.add(workerLogBytesPerRequest).add(scheduledLogBytesPerMonth.div(requestsPerMonth));
  lines.logIngestion = perGb(logBytesPerRequest).mul(price('logsIngestedGb')).mul(MILLION);
  lines.logStorage = perGb(logBytesPerRequest).mul(monthsOf(s.stage.logRetentionDays)).mul(price('logsStoredGbMonth')).mul(MILLION);
  // Metrics are regional: each region's functions publish their own.
  lines.metrics = perMillionOfMonthly(E(a.customMetrics).mul(price('metricMonth')).mul(N));

  // --- Secrets, the wire, the NAT --------------------------------------------------------------------
  // Each environment reads each provider key it uses at most once per cache lifetime.
  const secretsPerRequest =
    s.compute === 'on-demand'
      ? Exact.min(E(a.providersPerEnvironment), E(a.providersPerEnvironment).mul(E(billedMs)).div(E(a.secretTtlSeconds * 1000)))
      : // One cache per worker thread (one a vCPU) of each environment.
        E((fleet as Fleet).environments * regions * (managed.memoryMb / 1024 / managed.memoryGiBPerVcpu) * a.providersPerEnvironment).div(E(a.secretTtlSeconds)).div(R);
  lines.secretsCalls = secretsPerRequest.mul(price('secretsCall')).mul(MILLION);
  // Provider keys are replicated secrets: a replica in each other region, counted as a secret.
  lines.secretsStored = perMillionOfMonthly(E(a.secretsStored).mul(price('secretMonth')).mul(N));
  // With the front door the reply leaves through CloudFront (origin fetches from AWS are free).
  lines.transferOut = perGb(wire.toClient)
    .mul(regions === 1 ? price('transferOutGb') : price('cloudfrontTransferOutGb'))
    .add(perGb(wire.toProvider).mul(price('transferOutGb')))
    .mul(MILLION);
  const streamedBeyondFree = Exact.max(Exact.ZERO, wire.toClient.sub(book.limits.streamingFreeBytesPerRequest.value));
  lines.streamedBytes = perGb(streamedBeyondFree).mul(price('lambdaStreamedGb')).mul(MILLION);
  if (s.compute === 'managed-instances') {
    const natBytes = wire.toProvider.add(wire.fromProvider).add(a.logsThroughNat ? gatewayLogBytes : Exact.ZERO);
    lines.natBytes = perGb(natBytes).mul(price('natGatewayGb')).mul(MILLION);
    // The environments of a zone without a NAT gateway reach one in another zone, both ways.
    const crossing = managed.natGateways >= managed.availabilityZones ? Exact.ZERO : E(managed.availabilityZones - managed.natGateways).div(E(managed.availabilityZones));
    lines.crossZone = perGb(natBytes).mul(crossing).mul(E(2)).mul(price('interAzGb')).mul(MILLION);
  }

  // --- Two regions or more (docs/regions.md, docs/cost.md "Two regions") ---------------------------
  /** Per request in each other region: replicated units, the same with a transaction's copy doubled, bytes; and what doubling would add, USD per million. */
  let replicated: { writeUnits: Exact; upperBoundWriteUnits: Exact; bytes: Exact; doubledExtraUsd: Exact } | undefined;
  if (others > 0) {
    // What each other region is billed for the writes replicated to it: the store map's figures,
    // else the writing region's own units (an upper bound: a transaction's writes counted doubled)
    // and a kilobyte for each of them.
    const rep = m.store.replicated?.[variant];
    const upper = (units: Exact): { writeUnits: Exact; indexWriteUnits: Exact; upperBoundWriteUnits: Exact; bytes: Exact } => ({ writeUnits: units, indexWriteUnits: Exact.ZERO, upperBoundWriteUnits: units, bytes: units.mul(E(1024)) });
    const gwRep = rep === undefined ? upper(E(gw.writeUnits)) : { writeUnits: E(rep.gateway.writeUnits), indexWriteUnits: E(rep.gateway.indexWriteUnits), upperBoundWriteUnits: E(rep.gateway.upperBoundWriteUnits), bytes: E(rep.gateway.bytes) };
    const at = (pick: (x: ReplicatedPoint) => number): Exact => unitsAtBatch((rep?.aggregator ?? []).map((x) => ({ batchSize: x.batchSize, units: pick(x) })), batch);
    const aggRep =
      rep === undefined || rep.aggregator.length === 0
        ? upper(aggregatorWrites)
        : { writeUnits: at((x) => x.writeUnits), indexWriteUnits: at((x) => x.indexWriteUnits), upperBoundWriteUnits: at((x) => x.upperBoundWriteUnits), bytes: at((x) => x.bytes) };
    const O = E(others);
    const tableUnits = gwRep.writeUnits.sub(gwRep.indexWriteUnits).add(aggRep.writeUnits).sub(aggRep.indexWriteUnits);
    // Each region's sweeper's writes are replicated to the others too.
    const sweeperReplicated = perMillionOfMonthly(runsPerMonth(a.sweeperEverySeconds).mul(E(sweeperRun.replicatedWriteUnits ?? sweeperRun.writeUnits)).mul(N).mul(O).mul(price('dynamoReplicatedWriteUnit')));
    lines.replicatedWrites = tableUnits.mul(O).mul(price('dynamoReplicatedWriteUnit')).mul(MILLION).add(sweeperReplicated);
    // Each replica keeps its own indexes: their writes are billed in every region, as plain write units.
    lines.replicaIndexWrites = gwRep.indexWriteUnits.add(aggRep.indexWriteUnits).mul(O).mul(price('dynamoWriteUnit')).mul(MILLION);
    // TTL deletes are free where they happen and replicated writes everywhere else: a usage row
    // once its retention ends, and a counted row's share of the aggregator's group of counted rows.
    const ttlUnits = E(Math.max(1, Math.ceil(m.storage.usageRowBytes / 1024))).add(E(m.storage.markerBytes).div(E(1024)));
    lines.replicatedTtlDeletes = ttlUnits.mul(O).mul(price('dynamoReplicatedWriteUnit')).mul(MILLION);
    lines.crossRegion = perGb(gwRep.bytes.add(aggRep.bytes)).mul(O).mul(price('interRegionGb')).mul(MILLION);
    // The front door: every request through CloudFront, its function and one KeyValueStore read,
    // and the request body carried from the edge to the region.
    lines.cloudfrontRequests = price('cloudfrontHttpsRequest').mul(MILLION);
    lines.cloudfrontFunction = price('cloudfrontFunctionInvocation').mul(MILLION);
    lines.kvsReads = E(a.kvsReadsPerRequest).mul(price('cloudfrontKvsRead')).mul(MILLION);
    lines.toOrigin = perGb(wire.toProvider).mul(price('cloudfrontToOriginGb')).mul(MILLION);
    // The wardens (one a region, busy most of each minute) and their probes: each warden probes
    // every region every few seconds, a gateway invocation that writes (replicated) each time.
    const wardenRun = price('lambdaRequest').add(E(a.wardenMemoryMb).div(E(1024)).mul(E(a.wardenBusySeconds)).mul(price('lambdaArmGbSecond')));
    const probesPerMonth = E(a.secondsPerMonth).div(E(a.probeEverySeconds)).mul(N).mul(N);
    const probeInvocation =
      s.compute === 'on-demand' ? price('lambdaRequest').add(E(s.memoryMb).div(E(1024)).mul(E(Math.ceil(overhead.ms))).div(E(1000)).mul(price('lambdaArmGbSecond'))) : price('lambdaRequest');
    lines.warden = perMillionOfMonthly(runsPerMonth(a.wardenEverySeconds).mul(N).mul(wardenRun).add(probesPerMonth.mul(probeInvocation)));
    const writtenEverywhere = price('dynamoWriteUnit').add(O.mul(price('dynamoReplicatedWriteUnit')));
    const heartbeatsPerMonth = E(a.secondsPerMonth).div(E(a.heartbeatEverySeconds));
    lines.frontDoorWrites = perMillionOfMonthly(probesPerMonth.mul(E(a.probeWriteUnits)).add(heartbeatsPerMonth.mul(E(a.heartbeatWriteUnits))).mul(writtenEverywhere));
    replicated = {
      writeUnits: gwRep.writeUnits.add(aggRep.writeUnits),
      upperBoundWriteUnits: gwRep.upperBoundWriteUnits.add(aggRep.upperBoundWriteUnits),
      bytes: gwRep.bytes.add(aggRep.bytes),
      doubledExtraUsd: gwRep.upperBoundWriteUnits.sub(gwRep.writeUnits).add(aggRep.upperBoundWriteUnits).sub(aggRep.writeUnits).mul(O).mul(price('dynamoReplicatedWriteUnit')).mul(MILLION),
    };
  }

  const components = Object.fromEntries(COMPONENTS.map((c) => [c, Exact.sum((Object.keys(LINES) as LineName[]).filter((l) => LINES[l] === c).map((l) => lines[l]))])) as Record<Component, Exact>;
  const total = Exact.sum(COMPONENTS.map((c) => components[c]));
  return {
    scenario: s,
    variant,
    lines,
    components,
    total,
    aggregatorBatch: batch,
    gatewayBilledMs: billedMs,
    ...(fleet === undefined ? {} : { fleet }),
    regions,
    ...(replicated === undefined
      ? {}
      : { replication: { writeUnits: replicated.writeUnits, upperBoundWriteUnits: replicated.upperBoundWriteUnits, bytes: replicated.bytes, upperBoundTotal: total.add(replicated.doubledExtraUsd) } }),
  };
}

/**
 * The lowest sustained rate (of `rates`, ascending) at which managed instances cost no more per
 * million than on-demand at `memoryMb`, or undefined if none does. On-demand is nearly flat per
 * request; managed instances carry a fixed floor (three instances, NAT gateways) that volume spreads.
 */
export function breakEvenRate(book: PriceBook, m: Measured, stage: StageProfile, memoryMb: number, replySeconds: number, rates: readonly number[], a: Assumptions = ASSUMPTIONS): number | undefined {
  for (const requestsPerSecond of rates) {
    const base = { stage, replySeconds, requestsPerSecond, name: '' };
    const onDemand = scenarioCost(book, m, { ...base, compute: 'on-demand', memoryMb }, 'allLimits', a);
    const managed = scenarioCost(book, m, { ...base, compute: 'managed-instances', memoryMb: managedProfile(book, a, stage).memoryMb }, 'allLimits', a);
    if (managed.total.le(onDemand.total)) return requestsPerSecond;
  }
  return undefined;
}

/** Rates from 0.1 to 10,000 requests a second, 20 a decade: where the break-even is looked for. */
export function rateGrid(): number[] {
  const out: number[] = [];
  for (let i = -20; i <= 80; i += 1) out.push(Number((10 ** (i / 20)).toPrecision(3)));
  return out;
}

/** A typical request: a catalogued model and the tokens it is assumed to use. */
export interface TypicalRequest {
  readonly label: string;
  readonly model: string;
  readonly inputTokens: number;
  readonly outputTokens: number;
}

/** The three requests the report weighs the gateway against: the same tokens, three model sizes. */
export const TYPICAL_REQUESTS: readonly TypicalRequest[] = [
  { label: 'small', model: 'openai/gpt-4.1-mini', inputTokens: 1_500, outputTokens: 400 },
  { label: 'mid', model: 'anthropic/claude-sonnet-4-5-20250929', inputTokens: 1_500, outputTokens: 400 },
  { label: 'large', model: 'anthropic/claude-opus-4-1-20250805', inputTokens: 1_500, outputTokens: 400 },
];

/** What a request spends at the provider, USD, from the catalog's rates (micro-units of a cent). */
export function providerSpendUsd(rates: Rates, inputTokens: number, outputTokensCount: number): Exact {
  const micros = chargeMicros({ inputTokens, cachedInputTokens: 0, outputTokens: outputTokensCount, reasoningTokens: 0 }, rates);
  return E(micros).div(E(100_000_000));
}
