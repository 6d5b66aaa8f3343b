/**
 * The cost model (`bench/cost-model.ts`), its price book (`bench/cost-prices.ts`), its inputs from
 * bench.json (`bench/cost-inputs.ts`) and its report (`bench/cost-report.ts`): the arithmetic,
 * table-driven, on exact decimals, against the real price book and a fixed set of measurements.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { costChart, tickStep } from '../../bench/cost-chart';
import { fitLine, managedFrom, measuredFrom, overheadPoints, stageProfiles, storeUnitsFrom } from '../../bench/cost-inputs';
import {
  ASSUMPTIONS,
  COMPONENTS,
  LINES,
  aggregatorBatch,
  breakEvenRate,
  cpuShare,
  gatewayOverheadMs,
  deployedBatching,
  managedFleet,
  managedProfile,
  providerSpendUsd,
  rateGrid,
  regionalBatching,
  scenarioCost,
  unitsAtBatch,
  wireBytes,
  type LineName,
  type Measured,
  type Scenario,
  type ScenarioCost,
  type StageProfile,
} from '../../bench/cost-model';
import { loadPriceBook, parsePriceBook, PriceBookError } from '../../bench/cost-prices';
import { runNote } from '../../bench/cost';
import { buildCostReport, costJson, regionScenarios, renderCostChart, renderCostReport, scenarios } from '../../bench/cost-report';
import { Exact } from '../../bench/exact';

const book = loadPriceBook();
const E = (v: number | string): Exact => Exact.of(v);

/** Measurements chosen so that each line's arithmetic can be checked by hand. */
const MEASURED: Measured = {
  store: {
    source: 'test',
    gateway: { noLimits: { writeUnits: 16, readUnits: 1 }, allLimits: { writeUnits: 20, readUnits: 1 } },
    aggregator: {
      noLimits: [
        { batchSize: 1, writeUnits: 14, readUnits: 0 },
        { batchSize: 100, writeUnits: 2.12, readUnits: 0 },
      ],
      allLimits: [
        { batchSize: 1, writeUnits: 14, readUnits: 0 },
        { batchSize: 100, writeUnits: 2.12, readUnits: 0 },
      ],
    },
  },
  gatewayLogBytesPerRequest: 734,
  sweeper: { logBytesPerRun: 300, msPerRun: 400, readUnitsPerRun: 128 },
  notifier: { logBytesPerRun: 200, msPerRun: 100 },
  aggregator: { fixedMs: 20, perRowMs: 1, logBytesPerBatch: 0 },
  storage: { usageRowBytes: 400, usageRowCopies: 2, markerBytes: 60, markerDays: 35 },
  wire: { clientFixedBytes: 1_000, clientBytesPerToken: 200, providerFixedBytes: 800, providerBytesPerToken: 150, requestFixedBytes: 500 },
  overhead: { points: [{ memoryMb: 128, overheadMs: 0 }, { memoryMb: 1024, overheadMs: 12 }], uncappedMs: 10, cpuPerRequestUs: 1_000 },
  cpuPerChunkUs: 10,
  lookupsPerRefresh: 2,
  sources: {},
};

const STAGE: StageProfile = { name: 'prod', gatewayMemoryMb: 1024, workerMemoryMb: 512, logRetentionDays: 180, usageRetentionDays: 400 };

/** Each component is the sum of its lines, and the total the sum of the components. */
function expectAddsUp(cost: ScenarioCost): void {
  for (const c of COMPONENTS) {
    const mine = (Object.keys(LINES) as LineName[]).filter((l) => LINES[l] === c);
    expect(cost.components[c].toString()).toBe(Exact.sum(mine.map((l) => cost.lines[l])).toString());
  }
  expect(cost.total.toString()).toBe(Exact.sum(COMPONENTS.map((c) => cost.components[c])).toString());
}

function scenario(over: Partial<Scenario>): Scenario {
  return { name: 't', stage: STAGE, compute: 'on-demand', memoryMb: 128, replySeconds: 5, requestsPerSecond: 100, ...over };
}

describe('the price book', () => {
  it('reads every price and limit from bench/aws-prices.json, each with a source and a date', () => {
    expect(book.prices.lambdaArmGbSecond.value.toString()).toBe('0.0000133334');
    expect(book.prices.dynamoWriteUnit.value.mul(E(1_000_000)).toString()).toBe('0.625');
    expect(book.limits.lambdaMbPerVcpu.value.toString()).toBe('1769');
    for (const p of [...Object.values(book.prices), ...book.instances]) {
      expect(p.source.length).toBeGreaterThan(10);
      expect(p.read).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    }
    expect(book.instances.map((i) => i.name).sort()).toEqual(['c7g.large', 'c7g.xlarge', 'm7g.large', 'm7g.xlarge']);
  });

  const raw = JSON.parse(readFileSync(path.join(__dirname, '../../bench/aws-prices.json'), 'utf8')) as { prices: Record<string, Record<string, unknown>> };
  it.each([
    ['a missing price', (j: typeof raw) => delete j.prices.dynamoWriteUnit, /prices\.dynamoWriteUnit is missing/],
    ['a price that is not a decimal', (j: typeof raw) => ((j.prices.dynamoWriteUnit as Record<string, unknown>).usd = '1,25'), /not a decimal/],
    ['a price read on no date', (j: typeof raw) => ((j.prices.lambdaRequest as Record<string, unknown>).read = 'last week'), /read must be a date/],
    ['a price without a source', (j: typeof raw) => ((j.prices.lambdaRequest as Record<string, unknown>).source = ''), /source is missing/],
    ['an instance type of unknown size', (j: typeof raw) => (j.prices['ec2Hour.z9.huge'] = { usd: '1', source: 'somewhere', read: '2026-01-01' }), /no known size/],
  ])('refuses %s', (_name, spoil, message) => {
    const copy = JSON.parse(JSON.stringify(raw)) as typeof raw;
    spoil(copy);
    expect(() => parsePriceBook(copy)).toThrow(PriceBookError);
    expect(() => parsePriceBook(copy)).toThrow(message);
  });
});

describe('the pieces', () => {
  it.each([
    [128, '0.07235726399'],
    [1769, '1.00000000000'],
    [1024, '0.57885811193'],
  ])('Lambda gives %i MB %s of a vCPU', (mb, share) => {
    expect(cpuShare(mb, book.limits.lambdaMbPerVcpu.value).toFixed(11)).toBe(share);
  });

  // The deployed mapping (lambdas/aggregator/mapping.ts): up to 1,000 records gathered for 60 s,
  // two records a request, one of them handed over.
  it.each([
    [0.4, '24'],
    [10, '500'],
    [100, '500'],
    [399, '500'],
    [1_000, '500'],
    [2_000, '500'],
  ])('the aggregator sees batches of %p rows at %p req/s', (rate, rows) => {
    expect(aggregatorBatch(rate, book.limits.streamPollsPerSecond.value, ASSUMPTIONS).toString()).toBe(rows);
  });

  it.each([
    ['a 1 s window', { batchSize: 100, windowSeconds: 1, recordsPerRequest: 2, rowsPerRequest: 1, shards: 2 }, 10, '5'],
    ['a full batch', { batchSize: 100, windowSeconds: 1, recordsPerRequest: 2, rowsPerRequest: 1, shards: 2 }, 1_000, '50'],
    ['no window: a quarter second', { batchSize: 100, windowSeconds: 0, recordsPerRequest: 1, rowsPerRequest: 1, shards: 1 }, 10, '2.5'],
    ['at least one row', { batchSize: 100, windowSeconds: 0, recordsPerRequest: 1, rowsPerRequest: 1, shards: 4 }, 1, '1'],
  ])('follows the store map\'s batching: %s', (_name, batching, rate, rows) => {
    expect(aggregatorBatch(rate, book.limits.streamPollsPerSecond.value, ASSUMPTIONS, batching).toString()).toBe(rows);
  });

  const points = [
    { batchSize: 1, units: 14 },
    { batchSize: 100, units: 2.12 },
  ];
  it.each([
    ['below the points', '0.5', '14'],
    ['at the first', '1', '14'],
    ['between them, linear in 1/b', '50', '2.24'],
    ['at the last', '100', '2.12'],
    ['beyond the last', '250', '2.12'],
  ])('aggregator units %s', (_name, b, units) => {
    expect(unitsAtBatch(points, E(b)).toString()).toBe(units);
  });

  it('one measured batch size stands for every batch size; none is zero', () => {
    expect(unitsAtBatch([{ batchSize: 100, units: 14 }], E('2.5')).toString()).toBe('14');
    expect(unitsAtBatch([], E(25)).isZero()).toBe(true);
  });

  it('takes the overhead measured at a memory size, and estimates the others from CPU stretched by the share', () => {
    const mbPerVcpu = book.limits.lambdaMbPerVcpu.value;
    expect(gatewayOverheadMs(MEASURED.overhead, 1024, mbPerVcpu)).toEqual({ ms: 12, measured: true });
    const est = gatewayOverheadMs(MEASURED.overhead, 256, mbPerVcpu);
    expect(est.measured).toBe(false);
    // 10 ms unconstrained, and 1 ms of CPU that takes 1769/256 ms at the share: 5.91 ms more.
    expect(est.ms).toBeCloseTo(10 + (1769 / 256 - 1), 9);
    expect(gatewayOverheadMs(MEASURED.overhead, 4096, mbPerVcpu).ms).toBe(10);
  });

  it('counts the bytes of a request on the wire, framing included', () => {
    const w = wireBytes(MEASURED, 250, ASSUMPTIONS);
    // (500 + 1,000 tokens × 4 B) × 1.1; (800 + 250 × 150) × 1.1; (1,000 + 250 × 200) × 1.1.
    expect(w.toProvider.toString()).toBe('4950');
    expect(w.fromProvider.toString()).toBe('42130');
    expect(w.toClient.toString()).toBe('56100');
  });

  it.each([
    ['the minimum', 1, 5, 0.001, 3, 'minimum'],
    ['concurrency', 50, 5, 0.001, 4, 'concurrency'],
    ['CPU', 100, 0.1, 0.05, 10, 'cpu'],
  ])('sizes managed instances by %s', (_name, rate, seconds, cpu, environments, boundBy) => {
    const f = managedFleet(book, ASSUMPTIONS, managedProfile(book, ASSUMPTIONS, STAGE), rate, seconds, cpu);
    expect(f.environments).toBe(environments);
    expect(f.boundBy).toBe(boundBy);
    expect(f.instances).toBeGreaterThanOrEqual(3);
    expect(f.instances * f.environmentsPerInstance).toBeGreaterThanOrEqual(environments);
    // The cheapest fleet of the book: no instance type holds the environments for less.
    for (const t of book.instances) {
      const per = Math.min(Math.floor(t.vcpus / 1), Math.floor(t.memoryGib / 2));
      if (per >= 1) expect(f.usdPerHour.le(t.value.mul(E(Math.max(3, Math.ceil(environments / per)))))).toBe(true);
    }
  });

  it("follows a stage's own managed-instance settings: its instance types, its minimum, its NAT gateways", () => {
    const stage: StageProfile = { ...STAGE, managed: { instanceTypes: ['m7g.xlarge'], perEnvironmentConcurrency: 32, minEnvironments: 4, maxEnvironments: 6, memoryMb: 4096, memoryGiBPerVcpu: 2, availabilityZones: 3, natGateways: 1 } };
    const cfg = managedProfile(book, ASSUMPTIONS, stage);
    const f = managedFleet(book, ASSUMPTIONS, cfg, 50, 5, 0.001);
    // 250 in flight, 32 a 4 GB (2 vCPU) environment: 8; two on an m7g.xlarge (4 vCPU, 16 GiB): 4 instances.
    // Eight is more than the stage's ceiling of six: priced, and said.
    expect(f).toMatchObject({ environments: 8, instanceType: 'm7g.xlarge', instances: 4, environmentsPerInstance: 2, overCeiling: true });
    const c = scenarioCost(book, MEASURED, scenario({ stage, compute: 'managed-instances', memoryMb: 4096, requestsPerSecond: 50 }), 'allLimits');
    expect(c.lines.natHours.toString()).toBe(E('0.05').mul(E(730)).mul(E(1_000_000)).div(E(50 * 730 * 3600)).toString());
    // One NAT gateway for three zones: two zones' traffic crosses to it and back, $0.01 a GB each way.
    expect(c.lines.crossZone.toString()).toBe(c.lines.natBytes.div(E('0.045')).mul(E(2)).div(E(3)).mul(E(2)).mul(E('0.01')).toString());
    expect(() => managedFleet(book, ASSUMPTIONS, { ...cfg, instanceTypes: ['z9.huge'] }, 1, 1, 0)).toThrow(/add its price/);
  });

  it('reads the managed-instance settings a stage carries, and nothing from a stage without them', () => {
    expect(managedFrom({ managedInstances: { instanceTypes: ['c7g.large'], perEnvironmentConcurrency: 64, minEnvironments: 3, maxEnvironments: 30, memoryMb: 2048, memoryGiBPerVcpu: 2, maxVcpus: 64, availabilityZones: 3, natGateways: 3 } })).toEqual({
      instanceTypes: ['c7g.large'],
      perEnvironmentConcurrency: 64,
      minEnvironments: 3,
      maxEnvironments: 30,
      memoryMb: 2048,
      memoryGiBPerVcpu: 2,
      availabilityZones: 3,
      natGateways: 3,
    });
    expect(managedFrom({ gatewayMemoryMb: 128 })).toBeUndefined();
  });

  it('prices a provider request from the catalog rates (micro-units of a cent)', () => {
    // 1,500 tokens at 40,000 thousandths of a cent per million, 400 at 160,000: 124,000 micro-cents.
    expect(providerSpendUsd({ inputRateThousandths: 40_000, cachedInputRateThousandths: 10_000, outputRateThousandths: 160_000 }, 1_500, 400).toString()).toBe('0.00124');
  });
});

describe('scenarioCost', () => {
  const onDemand128 = scenarioCost(book, MEASURED, scenario({}), 'allLimits');

  it('bills 128 MB for the whole 5 s reply: $8.333375 a million, and $0.20 of requests', () => {
    expect(onDemand128.gatewayBilledMs).toBe(5_000);
    expect(onDemand128.lines.gatewayDuration.toString()).toBe('8.333375');
    expect(onDemand128.lines.gatewayRequests.toString()).toBe('0.2');
  });

  it('rounds the billed duration up to the millisecond, overhead included', () => {
    const c = scenarioCost(book, { ...MEASURED, overhead: { ...MEASURED.overhead, points: [{ memoryMb: 128, overheadMs: 12.2 }] } }, scenario({}), 'allLimits');
    expect(c.gatewayBilledMs).toBe(5_013);
    expect(c.lines.gatewayDuration.toString()).toBe(E(128).div(E(1024)).mul(E('5.013')).mul(E('0.0000133334')).mul(E(1_000_000)).toString());
  });

  it.each([
    ['noLimits', '10'],
    ['allLimits', '12.5'],
  ] as const)('prices the gateway write units of a workspace with %s at $0.625 a million units', (variant, usd) => {
    expect(scenarioCost(book, MEASURED, scenario({}), variant).lines.gatewayWrites.toString()).toBe(usd);
  });

  it.each([
    [10, '500'],
    [100, '500'],
    [1_000, '500'],
  ])('prices the aggregator at the batch it sees at %p req/s (%s rows)', (rate, rows) => {
    const c = scenarioCost(book, MEASURED, scenario({ requestsPerSecond: rate }), 'allLimits');
    expect(c.aggregatorBatch.toString()).toBe(rows);
    const units = unitsAtBatch([{ batchSize: 1, units: 14 }, { batchSize: 100, units: 2.12 }], E(rows));
    expect(c.lines.aggregatorWrites.toString()).toBe(units.mul(E('0.625')).toString());
    // One invocation per batch, each 20 ms + 1 ms a row (rounded up to the ms) at 512 MB.
    const ms = E(20).add(E(rows)).ceil();
    expect(c.lines.aggregator.toString()).toBe(Exact.ONE.div(E(rows)).mul(E('0.0000002').add(E('0.5').mul(ms).div(E(1000)).mul(E('0.0000133334')))).mul(E(1_000_000)).toString());
  });

  it('spreads the fixed monthly costs over the volume: ten times the rate, a tenth per million', () => {
    const low = scenarioCost(book, MEASURED, scenario({ requestsPerSecond: 10 }), 'allLimits');
    const high = scenarioCost(book, MEASURED, scenario({ requestsPerSecond: 100 }), 'allLimits');
    for (const line of ['sweeper', 'notifier', 'metrics', 'secretsStored'] as const) {
      expect(low.lines[line].isZero()).toBe(false);
      expect(low.lines[line].div(high.lines[line]).toString()).toBe('10');
    }
  });

  it('prices the metrics: 80 custom metrics at $0.30 a month over 730 h of 100 req/s', () => {
    expect(onDemand128.lines.metrics.toString()).toBe(E(80).mul(E('0.30')).mul(E(1_000_000)).div(E(100 * 730 * 3600)).toString());
  });

  it('reads each provider key once per cache lifetime per environment, never more than once a request', () => {
    // 5 s of a 300 s lifetime: a sixtieth of a call per request, at $0.05 per 10,000 calls.
    expect(onDemand128.lines.secretsCalls.toString()).toBe(E(5).div(E(300)).mul(E('0.000005')).mul(E(1_000_000)).toString());
    const long = scenarioCost(book, MEASURED, scenario({ replySeconds: 600 }), 'allLimits');
    expect(long.lines.secretsCalls.toString()).toBe(E('0.000005').mul(E(1_000_000)).toString());
  });

  it('stores the usage row twice (table and index) for the retention, with backups', () => {
    const months = (days: number): Exact => E(days * 86_400).div(E(730 * 3600));
    const gb = (bytes: number): Exact => E(bytes).div(E(2 ** 30));
    const expected = gb(500).mul(E(2)).mul(months(400)).add(gb(160).mul(months(35))).mul(E('0.45')).mul(E(1_000_000));
    expect(onDemand128.lines.storage.toString()).toBe(expected.toString());
  });

  it('charges no streaming bytes for a reply under 6 MB, and transfer out for the reply and the prompt', () => {
    expect(onDemand128.lines.streamedBytes.isZero()).toBe(true);
    const w = wireBytes(MEASURED, 250, ASSUMPTIONS);
    expect(onDemand128.lines.transferOut.toString()).toBe(w.toClient.add(w.toProvider).div(E(2 ** 30)).mul(E('0.09')).mul(E(1_000_000)).toString());
  });

  it('puts every line in one component, and the components add up to the total', () => {
    expectAddsUp(onDemand128);
  });

  it('bills managed instances by the instance, not by the second, and adds the 15% fee and the NAT', () => {
    const c = scenarioCost(book, MEASURED, scenario({ compute: 'managed-instances', memoryMb: 2048, requestsPerSecond: 50 }), 'allLimits');
    expect(c.lines.gatewayDuration.isZero()).toBe(true);
    expect(c.fleet).toBeDefined();
    const monthly = (c.fleet?.usdPerHour ?? Exact.ZERO).mul(E(730));
    expect(c.lines.instances.toString()).toBe(monthly.mul(E(1_000_000)).div(E(50 * 730 * 3600)).toString());
    expect(c.lines.managementFee.toString()).toBe(c.lines.instances.mul(E('0.15')).toString());
    // Three NAT gateways by the hour, each with its public IPv4 address; one per zone, so nothing crosses zones.
    expect(c.lines.natHours.toString()).toBe(E('0.05').mul(E(3)).mul(E(730)).mul(E(1_000_000)).div(E(50 * 730 * 3600)).toString());
    expect(c.lines.natBytes.isZero()).toBe(false);
    expect(c.lines.crossZone.isZero()).toBe(true);
  });

  it('finds where managed instances cost no more than on-demand, and says when they never do', () => {
    const rate = breakEvenRate(book, MEASURED, STAGE, 1024, 5, rateGrid());
    expect(rate).toBeDefined();
    const at = (r: number, compute: Scenario['compute']): Exact =>
      scenarioCost(book, MEASURED, scenario({ compute, memoryMb: compute === 'on-demand' ? 1024 : 2048, requestsPerSecond: r }), 'allLimits').total;
    expect(at(rate as number, 'managed-instances').le(at(rate as number, 'on-demand'))).toBe(true);
    const below = rateGrid().filter((r) => r < (rate as number)).pop();
    if (below !== undefined) expect(at(below, 'on-demand').lt(at(below, 'managed-instances'))).toBe(true);
    expect(breakEvenRate(book, MEASURED, STAGE, 1024, 5, [0.001])).toBeUndefined();
  });
});

describe('inputs from bench.json', () => {
  const todays = {
    aggregatorBatchSize: 100,
    loads: [
      { name: 'many workspaces', perRequest: { gateway: { calls: 2, writes: 10, units: 23.37 }, aggregator: { calls: 1, writes: 7, units: 14 } } },
      { name: 'one key, 1 slice', perRequest: { gateway: { calls: 2, writes: 10, units: 23 }, aggregator: { calls: 0.02, writes: 1.1, units: 2.2 } } },
    ],
  };

  it("reads today's store map: the many-workspace load, one figure for both variants, no reads", () => {
    const s = storeUnitsFrom(todays);
    expect(s?.gateway.noLimits).toEqual({ writeUnits: 23.37, readUnits: null });
    expect(s?.gateway.allLimits).toEqual({ writeUnits: 23.37, readUnits: null });
    expect(s?.aggregator.allLimits).toEqual([{ batchSize: 100, writeUnits: 14, readUnits: null }]);
    expect(s?.batching).toBeUndefined();
  });

  it('reads a store map that reports both variants, reads, the aggregator at each rate, its batching and a sweeper run', () => {
    const variant = (limits: string, gw: number, at10: number) => ({
      name: limits,
      limits,
      gateway: { writeUnits: gw, indexWriteUnits: 1, readUnits: 0.5 },
      aggregator: { '1000': { rowsPerBatch: 50, writeUnits: 2.1, readUnits: 0 }, '10': { rowsPerBatch: 5, writeUnits: at10, readUnits: 0 } },
    });
    const s = storeUnitsFrom({
      variants: [variant('none', 15, 4), variant('every', 19, 5)],
      aggregatorBatching: { batchSize: 100, windowSeconds: 1, recordsPerRequest: 2, rowsPerRequest: 1, shards: 2, rowsPerBatch: { '10': 5 } },
      sweeperRun: { readCalls: 256, readUnits: 128, writeUnits: 0 },
    });
    expect(s?.gateway).toEqual({ noLimits: { writeUnits: 15, readUnits: 0.5 }, allLimits: { writeUnits: 19, readUnits: 0.5 } });
    expect(s?.aggregator.noLimits).toEqual([{ batchSize: 5, writeUnits: 4, readUnits: 0 }, { batchSize: 50, writeUnits: 2.1, readUnits: 0 }]);
    expect(s?.aggregator.allLimits[0]).toEqual({ batchSize: 5, writeUnits: 5, readUnits: 0 });
    expect(s?.batching).toEqual({ batchSize: 100, windowSeconds: 1, recordsPerRequest: 2, rowsPerRequest: 1, shards: 2 });
    expect(s?.sweeperRun).toEqual({ readUnits: 128, writeUnits: 0 });
  });

  it('has nothing from variants that lack one of the two', () => {
    expect(storeUnitsFrom({ variants: [{ limits: 'none', gateway: { writeUnits: 15 }, aggregator: {} }] })).toBeUndefined();
  });

  it.each([[undefined], [{}], [{ loads: [] }], [{ loads: [{ name: 'many workspaces', perRequest: {} }] }]])('has nothing from %p', (map) => {
    expect(storeUnitsFrom(map)).toBeUndefined();
  });

  it('says which figures it stated when bench.json lacks them', () => {
    const m = measuredFrom({});
    expect(m.sources.dynamodbUnits).toMatch(/^stated/);
    expect(m.sources.wire).toMatch(/^stated/);
    expect(m.store.gateway.allLimits.writeUnits).toBe(23);
    // The usage table alone: its one index (the sweeper's, keys only, open rows only) copies no row.
    expect(m.storage.usageRowCopies).toBe(1);
  });

  it('takes what bench.json measured', () => {
    const m = measuredFrom({
      storeMap: todays,
      costInputs: { gatewayLogBytesPerRequest: 812, sweeper: { logBytesPerRun: 310, msPerRun: 90, queriesPerRun: 256 }, aggregator: { points: [{ rows: 25, ms: 45 }, { rows: 100, ms: 120 }], logBytesPerBatch: 0 } },
      cpuShare: [{ memoryMb: 128, addedP50Ms: 60, settleP50Ms: 20 }, { memoryMb: 512, addedP50Ms: 12 }],
      nonStreamedC1: { addedP50: 5 },
      gatewayTimeline: { nonStreamed: { settle: { p50: 3 } } },
      cpu: { perNonStreamedRequestUs: 2_280, perChunkBusyUs: 17.5 },
    });
    expect(m.sources.gatewayLogBytesPerRequest).toMatch(/^measured/);
    expect(m.gatewayLogBytesPerRequest).toBe(812);
    expect(m.sweeper.readUnitsPerRun).toBe(128);
    expect(m.aggregator.fixedMs).toBeCloseTo(20, 9);
    expect(m.aggregator.perRowMs).toBeCloseTo(1, 9);
    expect(m.overhead).toEqual({ points: [{ memoryMb: 128, overheadMs: 80 }, { memoryMb: 512, overheadMs: 12 }], uncappedMs: 8, cpuPerRequestUs: 2_280 });
    expect(m.cpuPerChunkUs).toBe(17.5);
  });

  it.each([
    [[], { fixedMs: 0, perRowMs: 0 }],
    [[{ rows: 100, ms: 70 }], { fixedMs: 70, perRowMs: 0 }],
    [[{ rows: 10, ms: 30 }, { rows: 110, ms: 130 }], { fixedMs: 20, perRowMs: 1 }],
  ])('fits the aggregator time to %j', (points, line) => {
    const fit = fitLine(points);
    expect(fit.fixedMs).toBeCloseTo(line.fixedMs, 9);
    expect(fit.perRowMs).toBeCloseTo(line.perRowMs, 9);
  });

  it('reads the overhead points of the CPU share', () => {
    expect(overheadPoints([{ memoryMb: 256, addedP50Ms: -1, settleP50Ms: 4 }, { note: 'skipped' }])).toEqual([{ memoryMb: 256, overheadMs: 4 }]);
    expect(overheadPoints('nothing')).toEqual([]);
  });

  it("reads every stage's memory and retention from lib/stage.ts", () => {
    const stages = stageProfiles();
    expect(stages.map((s) => s.name)).toEqual(['dev', 'stg', 'prod']);
    for (const s of stages) {
      expect(s.gatewayMemoryMb).toBeGreaterThanOrEqual(128);
      expect(s.logRetentionDays).toBeGreaterThan(0);
      // lib/stage.ts carries each stage's managed-instance settings, and the model reads them.
      expect(s.managed?.minEnvironments).toBeGreaterThanOrEqual(1);
      expect(s.managed?.natGateways).toBeGreaterThanOrEqual(1);
    }
  });
});

describe('the report', () => {
  const stages = stageProfiles();
  const report = buildCostReport(book, MEASURED, stages);
  const json = costJson(report) as { scenarios: Record<string, unknown>[]; goals: { met: boolean; figureUsd: number; limitUsd: number }[] };

  it('prices each stage at replies of 1, 5 and 30 s and three rates, a memory sweep, and managed instances at four rates', () => {
    expect(scenarios(book, stages)).toHaveLength(stages.length * 9 + 4 + 12);
    const managed = json.scenarios.filter((s) => s.compute === 'managed-instances').map((s) => s.requestsPerSecond);
    expect([...new Set(managed)]).toEqual([10, 50, 100, 1_000]);
  });

  it('writes each scenario as bench.json cost.scenarios says, its components adding up to its total', () => {
    for (const s of json.scenarios) {
      expect(Object.keys(s)).toEqual(expect.arrayContaining(['name', 'compute', 'memoryMb', 'replySeconds', 'requestsPerSecond', 'usdPerMillion']));
      const u = s.usdPerMillion as Record<string, number>;
      expect(u.total).toBeCloseTo(u.lambda + u.dynamodb + u.logs + u.other, 3);
    }
  });

  it('judges every goal against its limit', () => {
    expect(json.goals).toHaveLength(stages.length + 3);
    for (const g of json.goals) expect(g.met).toBe(g.figureUsd <= g.limitUsd);
  });

  it('prints the tables and draws the chart', () => {
    const text = renderCostReport(report);
    expect(text).toContain('cost goal');
    expect(text).toContain('managed instances at no traffic');
    const svg = renderCostChart(report);
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg).toContain('on-demand goal $20');
  });
});

describe('the chart', () => {
  it.each([
    [6, 1],
    [20, 5],
    [97, 20],
    [450, 100],
  ])('ticks up to %p every %p', (max, step) => {
    expect(tickStep(max)).toBe(step);
  });

  it('draws one stacked bar per scenario', () => {
    const svg = costChart('t', 's', [{ label: 'a', parts: { lambda: 1, dynamodb: 2, logs: 0, other: 1 } }, { label: 'b', parts: { lambda: 3, dynamodb: 0, logs: 0, other: 0 } }], []);
    expect(svg.match(/<rect x="[\d.]+" y="[\d.]+" width="[\d.]+" height="18"/g)).toHaveLength(4);
    expect(svg).toContain('$4.00');
  });
});

describe('the run a chart is drawn from', () => {
  it.each([
    [{ when: '2026-11-26T17:00:00Z', options: { quick: true }, machine: { loadAverageStart: 26.71, cpus: 2 } }, 'run of 2026-11-26 (--quick), load 26.7 on 2 cores'],
    [{ when: '2026-11-27T09:00:00Z', options: { quick: false }, machine: { loadAverageStart: 0.06, cpus: 2 } }, 'run of 2026-11-27, load 0.1 on 2 cores'],
    [{}, 'run of no main run'],
  ])('names %j', (bench, note) => {
    expect(runNote(bench)).toBe(note);
  });
});

describe('two regions', () => {
  // The store map's replicated figures for a second region, chosen to check by hand: the gateway's
  // 20 units are transactions (10 as plain writes there) plus 2 index writes; the aggregator's
  // totals likewise halved.
  const REPLICATED = {
    gateway: { writeUnits: 11, indexWriteUnits: 2, upperBoundWriteUnits: 20, bytes: 3_000 },
    aggregator: [
      { batchSize: 1, writeUnits: 7, indexWriteUnits: 0, upperBoundWriteUnits: 14, bytes: 400 },
      { batchSize: 100, writeUnits: 1.06, indexWriteUnits: 0, upperBoundWriteUnits: 2.12, bytes: 100 },
    ],
  };
  const TWO: Measured = { ...MEASURED, store: { ...MEASURED.store, replicated: { noLimits: REPLICATED, allLimits: REPLICATED } } };
  const one = scenarioCost(book, TWO, scenario({}), 'allLimits');
  const two = scenarioCost(book, TWO, scenario({ regions: 2 }), 'allLimits');
  const regionLines: LineName[] = ['warden', 'replicatedWrites', 'replicaIndexWrites', 'replicatedTtlDeletes', 'frontDoorWrites', 'crossRegion', 'cloudfrontRequests', 'cloudfrontFunction', 'kvsReads', 'toOrigin'];
  const perMillionOfMonthly = (usdPerMonth: Exact): Exact => usdPerMonth.mul(E(1_000_000)).div(E(100 * 730 * 3600));
  const gb = (bytes: number): Exact => E(bytes).div(E(2 ** 30));

  it('one region is today\'s stack: every line as without a regions count, the two-region lines zero', () => {
    const without = scenarioCost(book, TWO, scenario({}), 'allLimits');
    const withOne = scenarioCost(book, TWO, scenario({ regions: 1 }), 'allLimits');
    for (const l of Object.keys(LINES) as LineName[]) expect(withOne.lines[l].toString()).toBe(without.lines[l].toString());
    for (const l of regionLines) expect(withOne.lines[l].isZero()).toBe(true);
    expect(withOne.total.toString()).toBe(without.total.toString());
    expect(withOne.regions).toBe(1);
    expect(withOne.replication).toBeUndefined();
    // The replicated figures change nothing in one region: the same as the measurements without them.
    expect(scenarioCost(book, MEASURED, scenario({ regions: 1 }), 'allLimits').total.toString()).toBe(without.total.toString());
    expect(withOne.lines.gatewayDuration.toString()).toBe('8.333375');
  });

  it("batches each region's own rows from a stream that carries both regions' records", () => {
    // Prod's mapping at 100 req/s on one shard: one region gathers 1,000 records (500 rows); each of
    // two regions gathers 1,000 records of which half are the other region's, so 250 of its own rows.
    expect(two.aggregatorBatch.toString()).toBe('250');
    expect(one.aggregatorBatch.toString()).toBe('500');
    const b = { batchSize: 1000, windowSeconds: 60, recordsPerRequest: 2, rowsPerRequest: 1, shards: 4 };
    expect(regionalBatching(b, 2)).toEqual({ ...b, recordsPerRequest: 4 });
    // The store map's four shards at 10 req/s: 150 rows a batch in one region, 75 in each of two.
    expect(aggregatorBatch(10, book.limits.streamPollsPerSecond.value, ASSUMPTIONS, b).toString()).toBe('150');
    expect(aggregatorBatch(5, book.limits.streamPollsPerSecond.value, ASSUMPTIONS, regionalBatching(b, 2)).toString()).toBe('75');
    expect(deployedBatching(2_500, ASSUMPTIONS).shards).toBe(3);
    // Twice the invocations per row: 1 / 250 of a request's and the aggregator's time (20 ms + 250 ms) at 512 MB.
    expect(two.lines.aggregator.toString()).toBe(E(1).div(E(250)).mul(E('0.0000002').add(E('0.5').mul(E(270)).div(E(1000)).mul(E('0.0000133334')))).mul(E(1_000_000)).toString());
  });

  it('bills the other region the replicated table writes as rWRU at the WRU price: (11 - 2) + 1.06 units, $6.2875 a million', () => {
    expect(book.prices.dynamoReplicatedWriteUnit.value.toString()).toBe(book.prices.dynamoWriteUnit.value.toString());
    expect(two.lines.replicatedWrites.toString()).toBe('6.2875');
  });

  it('bills the index writes again in the other region, as ordinary write units: 2 units, $1.25', () => {
    expect(two.lines.replicaIndexWrites.toString()).toBe('1.25');
  });

  it('keeps the writing region\'s own units as they were', () => {
    expect(two.lines.gatewayWrites.toString()).toBe(one.lines.gatewayWrites.toString());
    expect(two.lines.gatewayWrites.toString()).toBe('12.5');
    // The aggregator's own units at its smaller batch (here beyond the last point: the same).
    expect(two.lines.aggregatorWrites.toString()).toBe(E('2.12').mul(E('0.625')).toString());
  });

  it('bills the TTL delete of each usage row (1 unit) and its share of a group of counted rows (60 / 1,024) where it is replicated', () => {
    expect(two.lines.replicatedTtlDeletes.toString()).toBe('0.66162109375');
  });

  it('stores every item, with its backups, in both regions', () => {
    expect(two.lines.storage.toString()).toBe(one.lines.storage.mul(E(2)).toString());
  });

  it('charges the replicated bytes at $0.02 a GB from us-east-1', () => {
    expect(book.prices.interRegionGb.value.toString()).toBe('0.02');
    expect(two.lines.crossRegion.toString()).toBe(gb(3_100).mul(E('0.02')).mul(E(1_000_000)).toString());
  });

  it('runs a sweeper in each region, the notifier in the configuration home, metrics and secret replicas in each', () => {
    expect(two.lines.sweeper.toString()).toBe(one.lines.sweeper.mul(E(2)).toString());
    expect(two.lines.notifier.toString()).toBe(one.lines.notifier.toString());
    expect(two.lines.metrics.toString()).toBe(one.lines.metrics.mul(E(2)).toString());
    expect(two.lines.secretsStored.toString()).toBe(one.lines.secretsStored.mul(E(2)).toString());
    // Each sweeper's idle reads: 128 units a run, every minute, in each region.
    expect(two.lines.reads.sub(one.lines.reads).toString()).toBe(perMillionOfMonthly(E(43_800).mul(E(128)).mul(E('0.000000125'))).toString());
  });

  it('prices the front door per request: $1.00 of CloudFront requests, $0.10 of its function, $0.03 of KeyValueStore reads, the prompt carried to the origin', () => {
    expect(two.lines.cloudfrontRequests.toString()).toBe('1');
    expect(two.lines.cloudfrontFunction.toString()).toBe('0.1');
    expect(two.lines.kvsReads.toString()).toBe('0.03');
    const w = wireBytes(MEASURED, 250, ASSUMPTIONS);
    expect(two.lines.toOrigin.toString()).toBe(w.toProvider.div(E(2 ** 30)).mul(E('0.02')).mul(E(1_000_000)).toString());
    // The reply leaves through CloudFront at $0.085 a GB; the prompt to the provider as before.
    expect(two.lines.transferOut.toString()).toBe(w.toClient.div(E(2 ** 30)).mul(E('0.085')).add(w.toProvider.div(E(2 ** 30)).mul(E('0.09'))).mul(E(1_000_000)).toString());
  });

  it('prices the wardens: two 128 MB functions busy 55 s a minute, and their probes of both regions every 5 s', () => {
    // 43,800 runs a month each; 2,102,400 probes (2 wardens × 2 regions × 525,600), each a gateway invocation (0 ms over at 128 MB here).
    const runs = E(43_800).mul(E(2)).mul(E('0.0000002').add(E('0.125').mul(E(55)).mul(E('0.0000133334'))));
    const probes = E(2_102_400).mul(E('0.0000002'));
    expect(two.lines.warden.toString()).toBe(perMillionOfMonthly(runs.add(probes)).toString());
    // About $4 a month a warden (docs/regions.md).
    expect(Number(E(43_800).mul(E('0.125').mul(E(55)).mul(E('0.0000133334'))).toFixed(2))).toBe(4.02);
  });

  it('writes each probe and heartbeat once and replicates it once', () => {
    expect(two.lines.frontDoorWrites.toString()).toBe(perMillionOfMonthly(E(2_102_400 + 525_600).mul(E('0.00000125'))).toString());
  });

  it('reports the replicated units, the bytes, and the total were a transaction\'s copy billed doubled', () => {
    expect(two.regions).toBe(2);
    expect(two.replication?.writeUnits.toString()).toBe('12.06');
    expect(two.replication?.upperBoundWriteUnits.toString()).toBe('22.12');
    expect(two.replication?.bytes.toString()).toBe('3100');
    // (20 - 11) + (2.12 - 1.06) more units at $0.625 a million.
    expect(two.replication?.upperBoundTotal.sub(two.total).toString()).toBe('6.2875');
  });

  it('adds up: the components are the lines, the total the components', () => {
    expectAddsUp(two);
  });

  it("without the store map's replicated figures, bills the writing region's own units and a kilobyte each (an upper bound)", () => {
    const c = scenarioCost(book, MEASURED, scenario({ regions: 2 }), 'allLimits');
    // 20 gateway units and 2.12 of the aggregator's, all as table writes.
    expect(c.lines.replicatedWrites.toString()).toBe(E('22.12').mul(E('0.625')).toString());
    expect(c.lines.replicaIndexWrites.isZero()).toBe(true);
    expect(c.lines.crossRegion.toString()).toBe(E('22.12').mul(E(1024)).div(E(2 ** 30)).mul(E('0.02')).mul(E(1_000_000)).toString());
    expect(c.replication?.upperBoundTotal.toString()).toBe(c.total.toString());
  });

  it('runs a fleet of managed instances and the NAT gateways in each region, each sized for its half of the traffic', () => {
    const oneManaged = scenarioCost(book, TWO, scenario({ compute: 'managed-instances', memoryMb: 2048, requestsPerSecond: 50 }), 'allLimits');
    const twoManaged = scenarioCost(book, TWO, scenario({ compute: 'managed-instances', memoryMb: 2048, requestsPerSecond: 50, regions: 2 }), 'allLimits');
    // 50 req/s needs the minimum fleet in one region; two regions each keep their own minimum.
    expect(twoManaged.fleet?.instances).toBe(oneManaged.fleet?.instances);
    expect(twoManaged.lines.instances.toString()).toBe(oneManaged.lines.instances.mul(E(2)).toString());
    expect(twoManaged.lines.natHours.toString()).toBe(oneManaged.lines.natHours.mul(E(2)).toString());
  });

  it('reads the replicated figures from the store map, and says where they came from', () => {
    const variant = (limits: string) => ({
      limits,
      gateway: { writeUnits: 20, indexWriteUnits: 2, readUnits: 1 },
      aggregator: { '10': { rowsPerBatch: 150, writeUnits: 1, readUnits: 0 } },
      replicated: {
        gateway: { writeUnits: 11, indexWriteUnits: 2, upperBoundWriteUnits: 20, bytes: 3_000 },
        aggregator: { '100': { rowsPerBatch: 500, writeUnits: 0.25, indexWriteUnits: 0, upperBoundWriteUnits: 0.5, bytes: 50 }, '10': { rowsPerBatch: 150, writeUnits: 0.5, indexWriteUnits: 0, upperBoundWriteUnits: 1, bytes: 80 } },
        totalWriteUnits: { '10': 11.5 },
      },
    });
    const map = { variants: [variant('none'), variant('every')], sweeperRun: { readCalls: 256, readUnits: 128, writeUnits: 0, replicatedWriteUnits: 0 } };
    const s = storeUnitsFrom(map);
    expect(s?.replicated?.allLimits).toEqual({
      gateway: { writeUnits: 11, indexWriteUnits: 2, upperBoundWriteUnits: 20, bytes: 3_000 },
      aggregator: [
        { batchSize: 150, writeUnits: 0.5, indexWriteUnits: 0, upperBoundWriteUnits: 1, bytes: 80 },
        { batchSize: 500, writeUnits: 0.25, indexWriteUnits: 0, upperBoundWriteUnits: 0.5, bytes: 50 },
      ],
    });
    expect(s?.sweeperRun).toEqual({ readUnits: 128, writeUnits: 0, replicatedWriteUnits: 0 });
    expect(measuredFrom({ storeMap: map }).sources.replicatedUnits).toMatch(/^measured/);
    const older = { variants: map.variants.map(({ replicated: _r, ...rest }) => rest) };
    expect(storeUnitsFrom(older)?.replicated).toBeUndefined();
    expect(measuredFrom({ storeMap: older }).sources.replicatedUnits).toMatch(/^stated/);
  });

  it('adds two-region scenarios to the report, each with its regions, and prints their table', () => {
    const stages = stageProfiles();
    const report = buildCostReport(book, TWO, stages);
    const list = regionScenarios(book, stages);
    // Prod at three rates, the other stages at the goal's, prod's managed instances at theirs.
    expect(list).toHaveLength(3 + (stages.length - 1) + 1);
    expect(list.every((x) => x.regions === 2)).toBe(true);
    const json = costJson(report) as { scenarios: { regions: number; name: string; replication?: Record<string, number> }[] };
    expect(json.scenarios).toHaveLength(scenarios(book, stages).length + list.length);
    expect(json.scenarios.every((x) => x.regions === 1 || x.regions === 2)).toBe(true);
    expect(json.scenarios.filter((x) => x.regions === 2).every((x) => x.replication !== undefined)).toBe(true);
    const text = renderCostReport(report);
    expect(text).toContain('two regions');
    expect(text).toContain('replicatedWrites');
  });
});
