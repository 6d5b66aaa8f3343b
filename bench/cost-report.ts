/**
 * The cost model's report: the scenarios priced (every stage's settings, replies of 1, 5 and 30 s,
 * sustained rates; managed instances at 10 to 1,000 req/s), the goals met or missed, where
 * managed instances break even, the gateway's share of three typical requests' provider spend.
 * Built from a parsed bench.json; printed as tables, written to bench.json (`cost`) and drawn as
 * `bench-results/cost.svg`.
 */
import catalog from '../config/catalog.json';
import type { Rates } from '../lambdas/core/pricing';
import { costChart, type CostBar } from './cost-chart';
import {
  ASSUMPTIONS,
  COMPONENTS,
  LINES,
  TYPICAL_REQUESTS,
  breakEvenRate,
  managedFleet,
  managedProfile,
  outputTokens,
  providerSpendUsd,
  rateGrid,
  scenarioCost,
  type Assumptions,
  type Component,
  type LineName,
  type Measured,
  type Scenario,
  type ScenarioCost,
  type StageProfile,
} from './cost-model';
import { LIMIT_NAMES, PRICE_NAMES, type PriceBook } from './cost-prices';
import { Exact } from './exact';
import { alignLeft, alignRight } from './report-tables';

export const REPLY_SECONDS: readonly number[] = [1, 5, 30];
export const ON_DEMAND_RATES: readonly number[] = [10, 100, 1_000];
export const MANAGED_RATES: readonly number[] = [10, 50, 100, 1_000];
/** Memory sizes priced beside the stages' own, at a 5 s reply and 100 req/s. */
export const SWEEP_MEMORY_MB: readonly number[] = [128, 256, 512, 1_024];
/** The rate the on-demand goal is judged at: the aggregator's batches as they are at 100 req/s. */
export const GOAL_RATE = 100;
export const GOAL_REPLY_SECONDS = 5;
export const ON_DEMAND_GOAL_USD = 20;
export const MANAGED_GOAL_RATE = 50;
export const MANAGED_GOAL_USD = 10;
/** The region count of the two-region scenarios (`regionScenarios`, docs/cost.md "Two regions"). */
export const TWO_REGIONS = 2;

/** A goal, judged. */
export interface Goal {
  readonly name: string;
  readonly scenario: string;
  readonly figureUsd: number;
  /** The same without the data transferred out to the client and the provider, which any gateway on AWS pays. */
  readonly figureWithoutTransferUsd: number;
  readonly limitUsd: number;
  readonly met: boolean;
}

function goal(name: string, c: ScenarioCost, limitUsd: number): Goal {
  return { name, scenario: c.scenario.name, figureUsd: c.total.toNumber(), figureWithoutTransferUsd: c.total.sub(c.lines.transferOut).toNumber(), limitUsd, met: c.total.le(Exact.of(limitUsd)) };
}

/** The whole report. */
export interface CostReport {
  readonly book: PriceBook;
  readonly assumptions: Assumptions;
  readonly measured: Measured;
  readonly costs: readonly ScenarioCost[];
  readonly goals: readonly Goal[];
  readonly breakEven: readonly { readonly stage: string; readonly memoryMb: number; readonly replySeconds: number; readonly requestsPerSecond: number | null }[];
  /** Managed instances at no traffic: the minimum fleet, its fee, the NAT gateways, a month. */
  readonly managedIdleUsdPerMonth: Exact;
  readonly managedIdle: { readonly instances: number; readonly instanceType: string; readonly natGateways: number };
  readonly typical: readonly {
    readonly label: string;
    readonly model: string;
    readonly inputTokens: number;
    readonly outputTokens: number;
    readonly replySeconds: number;
    readonly providerUsd: Exact;
    readonly gateway: readonly { readonly stage: string; readonly compute: string; readonly memoryMb: number; readonly requestsPerSecond: number; readonly usd: Exact }[];
  }[];
}

const usd = (e: Exact, digits = 2): string => `$${e.toFixed(digits)}`;

const regionsSuffix = (regions: number): string => (regions === 1 ? '' : `, ${regions} regions`);

function onDemand(stage: StageProfile, memoryMb: number, replySeconds: number, requestsPerSecond: number, prefix = stage.name, regions = 1): Scenario {
  return { name: `${prefix} on-demand ${memoryMb} MB, ${replySeconds} s reply, ${requestsPerSecond} req/s${regionsSuffix(regions)}`, stage, compute: 'on-demand', memoryMb, replySeconds, requestsPerSecond, regions };
}

function managed(book: PriceBook, stage: StageProfile, replySeconds: number, requestsPerSecond: number, a: Assumptions, regions = 1): Scenario {
  const memoryMb = managedProfile(book, a, stage).memoryMb;
  return { name: `${stage.name} managed instances ${memoryMb} MB, ${replySeconds} s reply, ${requestsPerSecond} req/s${regionsSuffix(regions)}`, stage, compute: 'managed-instances', memoryMb, replySeconds, requestsPerSecond, regions };
}

const oneRegion = (s: Scenario): boolean => (s.regions ?? 1) === 1;

/** Every scenario the report prices, in the order it prints them. */
export function scenarios(book: PriceBook, stages: readonly StageProfile[], a: Assumptions = ASSUMPTIONS): Scenario[] {
  const out: Scenario[] = [];
  for (const stage of stages) for (const reply of REPLY_SECONDS) for (const rate of ON_DEMAND_RATES) out.push(onDemand(stage, stage.gatewayMemoryMb, reply, rate));
  const prod = stages.find((s) => s.name === 'prod') ?? (stages[stages.length - 1] as StageProfile);
  for (const mb of SWEEP_MEMORY_MB) out.push(onDemand(prod, mb, GOAL_REPLY_SECONDS, GOAL_RATE, 'sweep (prod settings)'));
  for (const reply of REPLY_SECONDS) for (const rate of MANAGED_RATES) out.push(managed(book, prod, reply, rate, a));
  return out;
}

/**
 * The scenarios of a stage in two regions (docs/cost.md "Two regions"): prod on-demand at its
 * memory, a 5 s reply and each on-demand rate; the other stages at the goal's rate; prod's
 * managed instances at their goal's rate. The rate is the stage's, both regions together.
 */
export function regionScenarios(book: PriceBook, stages: readonly StageProfile[], a: Assumptions = ASSUMPTIONS): Scenario[] {
  const prod = stages.find((s) => s.name === 'prod') ?? (stages[stages.length - 1] as StageProfile);
  const out: Scenario[] = [];
  for (const stage of stages) {
    const rates = stage === prod ? ON_DEMAND_RATES : [GOAL_RATE];
    for (const rate of rates) out.push(onDemand(stage, stage.gatewayMemoryMb, GOAL_REPLY_SECONDS, rate, stage.name, TWO_REGIONS));
  }
  out.push(managed(book, prod, GOAL_REPLY_SECONDS, MANAGED_GOAL_RATE, a, TWO_REGIONS));
  return out;
}

const RATES_FOR_BREAK_EVEN = rateGrid();

/** Prices every scenario and judges the goals. */
export function buildCostReport(book: PriceBook, measured: Measured, stages: readonly StageProfile[], a: Assumptions = ASSUMPTIONS): CostReport {
  const list = [...scenarios(book, stages, a), ...regionScenarios(book, stages, a)];
  const costs = list.map((s) => scenarioCost(book, measured, s, 'allLimits', a));
  // The goals are judged on one region, today's stack.
  const find = (pred: (s: Scenario) => boolean): ScenarioCost | undefined => costs.find((c) => oneRegion(c.scenario) && pred(c.scenario));
  const goals: Goal[] = [];
  for (const stage of stages) {
    const c = find((s) => s.compute === 'on-demand' && s.stage.name === stage.name && s.memoryMb === stage.gatewayMemoryMb && s.replySeconds === GOAL_REPLY_SECONDS && s.requestsPerSecond === GOAL_RATE);
    if (c === undefined) continue;
    goals.push(goal(`${stage.name}: on-demand at its memory (${stage.gatewayMemoryMb} MB), ${GOAL_REPLY_SECONDS} s reply, all-in`, c, ON_DEMAND_GOAL_USD));
  }
  for (const rate of MANAGED_RATES.filter((r) => r >= MANAGED_GOAL_RATE)) {
    const c = find((s) => s.compute === 'managed-instances' && s.replySeconds === GOAL_REPLY_SECONDS && s.requestsPerSecond === rate);
    if (c === undefined) continue;
    goals.push(goal(`managed instances at a sustained ${rate} req/s, ${GOAL_REPLY_SECONDS} s reply, all-in`, c, MANAGED_GOAL_USD));
  }
  const breakEven = stages.flatMap((stage) =>
    (stage.name === 'prod' ? REPLY_SECONDS : [GOAL_REPLY_SECONDS]).map((replySeconds) => ({
      stage: stage.name,
      memoryMb: stage.gatewayMemoryMb,
      replySeconds,
      requestsPerSecond: breakEvenRate(book, measured, stage, stage.gatewayMemoryMb, replySeconds, RATES_FOR_BREAK_EVEN, a) ?? null,
    })),
  );
  const hours = Exact.of(a.secondsPerMonth).div(Exact.of(3600));
  const prodManaged = managedProfile(book, a, stages.find((s) => s.name === 'prod') ?? (stages[stages.length - 1] as StageProfile));
  const idleFleet = managedFleet(book, a, prodManaged, 0, 0, 0);
  const managedIdleUsdPerMonth = idleFleet.usdPerHour
    .mul(Exact.ONE.add(book.prices.managedInstancesFee.value))
    .add(book.prices.natGatewayHour.value.add(book.prices.publicIpv4Hour.value).mul(Exact.of(prodManaged.natGateways)))
    .mul(hours);
  const rates = new Map((catalog as readonly (Rates & { id: string })[]).map((m) => [m.id, m]));
  const prod = stages.find((s) => s.name === 'prod') ?? (stages[stages.length - 1] as StageProfile);
  const typical = TYPICAL_REQUESTS.map((t) => {
    const r = rates.get(t.model);
    if (r === undefined) throw new Error(`typical request model ${t.model} is not in config/catalog.json`);
    const replySeconds = t.outputTokens / a.outputTokensPerSecond;
    const perRequest = (s: Scenario): Exact => scenarioCost(book, measured, s, 'allLimits', { ...a, inputTokens: t.inputTokens }).total.div(Exact.of(1_000_000));
    const gateway = [
      ...stages.map((stage) => ({ stage: stage.name, compute: 'on-demand', memoryMb: stage.gatewayMemoryMb, requestsPerSecond: GOAL_RATE, usd: perRequest(onDemand(stage, stage.gatewayMemoryMb, replySeconds, GOAL_RATE)) })),
      { stage: prod.name, compute: 'managed-instances', memoryMb: prodManaged.memoryMb, requestsPerSecond: MANAGED_GOAL_RATE, usd: perRequest(managed(book, prod, replySeconds, MANAGED_GOAL_RATE, a)) },
    ];
    return { ...t, outputTokens: outputTokens(replySeconds, a), replySeconds, providerUsd: providerSpendUsd(r, t.inputTokens, t.outputTokens), gateway };
  });
  return { book, assumptions: a, measured, costs, goals, breakEven, managedIdleUsdPerMonth, managedIdle: { instances: idleFleet.instances, instanceType: idleFleet.instanceType, natGateways: prodManaged.natGateways }, typical };
}

const n4 = (e: Exact): number => Number(e.toFixed(4));

/** What bench.json holds under `cost`. */
export function costJson(r: CostReport): Record<string, unknown> {
  return {
    when: new Date().toISOString(),
    region: r.book.region,
    note: 'USD per million requests, us-east-1 list prices (bench/aws-prices.json); the DynamoDB figures are for a workspace with every limit set (allLimits) unless named',
    prices: Object.fromEntries([
      ...PRICE_NAMES.map((n) => [n, { usd: r.book.prices[n].value.toString(), source: r.book.prices[n].source, read: r.book.prices[n].read }]),
      ...r.book.instances.map((t) => [`ec2Hour.${t.name}`, { usd: t.value.toString(), vcpus: t.vcpus, memoryGib: t.memoryGib, source: t.source, read: t.read }]),
    ]),
    limits: Object.fromEntries(LIMIT_NAMES.map((n) => [n, { value: r.book.limits[n].value.toString(), source: r.book.limits[n].source, read: r.book.limits[n].read }])),
    assumptions: r.assumptions,
    inputs: { sources: r.measured.sources, store: r.measured.store, measured: { ...r.measured, sources: undefined, store: undefined } },
    scenarios: r.costs.map((c) => ({
      name: c.scenario.name,
      stage: c.scenario.stage.name,
      compute: c.scenario.compute,
      memoryMb: c.scenario.memoryMb,
      replySeconds: c.scenario.replySeconds,
      requestsPerSecond: c.scenario.requestsPerSecond,
      regions: c.regions,
      usdPerMillion: { total: n4(c.total), lambda: n4(c.components.lambda), dynamodb: n4(c.components.dynamodb), logs: n4(c.components.logs), other: n4(c.components.other) },
      lines: Object.fromEntries((Object.keys(LINES) as LineName[]).map((l) => [l, n4(c.lines[l])])),
      aggregatorBatch: n4(c.aggregatorBatch),
      gatewayBilledMs: c.gatewayBilledMs,
      ...(c.fleet === undefined ? {} : { fleet: { ...c.fleet, usdPerHour: n4(c.fleet.usdPerHour) } }),
      ...(c.replication === undefined
        ? {}
        : {
            replication: {
              writeUnitsPerRequestInEachOtherRegion: n4(c.replication.writeUnits),
              upperBoundWriteUnitsPerRequest: n4(c.replication.upperBoundWriteUnits),
              bytesPerRequestToEachOtherRegion: n4(c.replication.bytes),
              totalIfTransactionsBilledDoubledUsd: n4(c.replication.upperBoundTotal),
            },
          }),
    })),
    goals: r.goals,
    breakEven: r.breakEven,
    managedIdleUsdPerMonth: n4(r.managedIdleUsdPerMonth),
    managedIdle: r.managedIdle,
    typicalRequests: r.typical.map((t) => ({
      label: t.label,
      model: t.model,
      inputTokens: t.inputTokens,
      outputTokens: t.outputTokens,
      replySeconds: t.replySeconds,
      providerUsd: Number(t.providerUsd.toFixed(6)),
      gateway: t.gateway.map((g) => ({ ...g, usd: Number(g.usd.toFixed(8)), sharePercent: Number(g.usd.div(t.providerUsd).mul(Exact.of(100)).toFixed(2)) })),
    })),
  };
}

function componentRow(label: string, c: ScenarioCost, extra: readonly string[] = []): string[] {
  return [label, ...COMPONENTS.map((k: Component) => usd(c.components[k])), usd(c.total), ...extra];
}

/** The report as text: the tables `npm run bench` prints. */
export function renderCostReport(r: CostReport): string {
  const out: string[] = [];
  const head = ['', 'Lambda', 'DynamoDB', 'logs', 'other', 'total'];
  out.push('cost per million requests (USD, us-east-1 list prices, every limit set; bench/aws-prices.json; docs/cost.md)');
  const stageRows: string[][] = [[`on-demand, ${GOAL_RATE} req/s`, ...head.slice(1)]];
  for (const c of r.costs.filter((x) => oneRegion(x.scenario) && x.scenario.compute === 'on-demand' && x.scenario.requestsPerSecond === GOAL_RATE && !x.scenario.name.startsWith('sweep'))) {
    stageRows.push(componentRow(`${c.scenario.stage.name} ${c.scenario.memoryMb} MB, ${c.scenario.replySeconds} s reply (billed ${c.gatewayBilledMs} ms)`, c));
  }
  out.push(alignRight(stageRows), '');
  const rateRows: string[][] = [['on-demand, 5 s reply, by rate', ...head.slice(1), 'aggregator batch']];
  for (const c of r.costs.filter((x) => oneRegion(x.scenario) && x.scenario.compute === 'on-demand' && x.scenario.replySeconds === GOAL_REPLY_SECONDS && !x.scenario.name.startsWith('sweep'))) {
    rateRows.push(componentRow(`${c.scenario.stage.name} ${c.scenario.memoryMb} MB, ${c.scenario.requestsPerSecond} req/s`, c, [c.aggregatorBatch.toFixed(1)]));
  }
  out.push(alignRight(rateRows), '');
  const sweepRows: string[][] = [[`memory, ${GOAL_REPLY_SECONDS} s reply, ${GOAL_RATE} req/s`, ...head.slice(1), 'overhead']];
  for (const c of r.costs.filter((x) => x.scenario.name.startsWith('sweep'))) {
    const measured = r.measured.overhead.points.some((p) => p.memoryMb === c.scenario.memoryMb);
    sweepRows.push(componentRow(`${c.scenario.memoryMb} MB`, c, [`${c.gatewayBilledMs - GOAL_REPLY_SECONDS * 1000} ms ${measured ? 'measured' : 'estimated'}`]));
  }
  out.push(alignRight(sweepRows), '');
  const managedRows: string[][] = [['managed instances', ...head.slice(1), 'fleet']];
  for (const c of r.costs.filter((x) => oneRegion(x.scenario) && x.scenario.compute === 'managed-instances')) {
    const f = c.fleet;
    managedRows.push(
      componentRow(`${c.scenario.requestsPerSecond} req/s, ${c.scenario.replySeconds} s reply`, c, [
        f === undefined ? '' : `${f.instances} x ${f.instanceType} (${f.environments} env, ${f.boundBy}${f.overCeiling ? `; over the stage's ${c.scenario.stage.managed?.maxEnvironments ?? '?'}` : ''})`,
      ]),
    );
  }
  out.push(alignRight(managedRows));
  out.push(`managed instances at no traffic: ${usd(r.managedIdleUsdPerMonth)} a month (${r.managedIdle.instances} x ${r.managedIdle.instanceType}, their 15% fee, ${r.managedIdle.natGateways} NAT gateways with their addresses); they do not scale to zero`);
  const be = r.breakEven.map((b) => `${b.stage} (${b.memoryMb} MB) ${b.replySeconds} s reply: ${b.requestsPerSecond === null ? 'never up to 10,000 req/s' : `from ${b.requestsPerSecond} req/s`}`);
  out.push(`managed instances cost no more than on-demand: ${be.join('; ')}`, '');
  const lineRows: string[][] = [['lines of one scenario (USD per million)', 'value']];
  const isExample = (c: ScenarioCost): boolean => c.scenario.compute === 'on-demand' && c.scenario.stage.name === 'prod' && c.scenario.replySeconds === GOAL_REPLY_SECONDS && c.scenario.requestsPerSecond === GOAL_RATE && !c.scenario.name.startsWith('sweep');
  const example = r.costs.find((c) => oneRegion(c.scenario) && isExample(c));
  if (example !== undefined) {
    lineRows[0] = [`lines: ${example.scenario.name}`, 'USD per million'];
    for (const l of Object.keys(LINES) as LineName[]) if (!example.lines[l].isZero()) lineRows.push([`  ${LINES[l]}: ${l}`, usd(example.lines[l], 4)]);
    out.push(alignLeft(lineRows), '');
  }
  out.push(...renderRegions(r, example, r.costs.find((c) => !oneRegion(c.scenario) && isExample(c))));
  const typRows: string[][] = [['typical request (same tokens, three models)', 'provider spend', ...r.typical[0]?.gateway.map((g) => `${g.stage} ${g.compute === 'on-demand' ? `${g.memoryMb} MB` : `managed @${g.requestsPerSecond}/s`}`) ?? []]];
  for (const t of r.typical) {
    typRows.push([`${t.label}: ${t.model}, ${t.inputTokens} in / ${t.outputTokens} out (${t.replySeconds} s)`, `$${t.providerUsd.toFixed(5)}`, ...t.gateway.map((g) => `$${g.usd.toFixed(6)} = ${g.usd.div(t.providerUsd).mul(Exact.of(100)).toFixed(2)}%`)]);
  }
  out.push(alignLeft(typRows), '');
  const goalRows: string[][] = [['cost goal', 'figure', 'limit', 'result', 'without data transfer out']];
  for (const g of r.goals) goalRows.push([g.name, `$${g.figureUsd.toFixed(2)}`, `<= $${g.limitUsd}`, g.met ? 'MET' : 'MISSED', `$${g.figureWithoutTransferUsd.toFixed(2)}`]);
  out.push(alignLeft(goalRows), '');
  out.push('inputs:');
  for (const [k, v] of Object.entries(r.measured.sources)) out.push(`  ${k}: ${v}`);
  const reads = [...new Set([...PRICE_NAMES.map((n) => r.book.prices[n].read), ...r.book.instances.map((t) => t.read)])].join(', ');
  out.push(`prices read ${reads} (sources in bench/aws-prices.json)`);
  return out.join('\n');
}

/** The lines that differ between one region and two or more. */
const REGION_LINES: readonly LineName[] = [
  'replicatedWrites',
  'replicaIndexWrites',
  'replicatedTtlDeletes',
  'frontDoorWrites',
  'crossRegion',
  'cloudfrontRequests',
  'cloudfrontFunction',
  'kvsReads',
  'toOrigin',
  'warden',
  'storage',
  'sweeper',
  'reads',
  'aggregator',
  'aggregatorWrites',
  'transferOut',
  'metrics',
  'secretsStored',
];

/** The two-region table: each scenario beside the same stage in one region, and the lines of prod's. */
function renderRegions(r: CostReport, oneExample: ScenarioCost | undefined, twoExample: ScenarioCost | undefined): string[] {
  const many = r.costs.filter((c) => !oneRegion(c.scenario));
  if (many.length === 0) return [];
  const out: string[] = [];
  const rows: string[][] = [['two regions (the stage rate over both; docs/cost.md "Two regions")', 'Lambda', 'DynamoDB', 'logs', 'other', 'total', 'one region', 'replicated units', 'if doubled']];
  for (const c of many) {
    const same = r.costs.find((x) => oneRegion(x.scenario) && x.scenario.stage.name === c.scenario.stage.name && x.scenario.compute === c.scenario.compute && x.scenario.memoryMb === c.scenario.memoryMb && x.scenario.replySeconds === c.scenario.replySeconds && x.scenario.requestsPerSecond === c.scenario.requestsPerSecond);
    const label = `${c.scenario.stage.name} ${c.scenario.compute === 'on-demand' ? `${c.scenario.memoryMb} MB` : 'managed'}, ${c.scenario.requestsPerSecond} req/s, ${c.scenario.replySeconds} s`;
    rows.push(
      componentRow(label, c, [
        same === undefined ? '' : usd(same.total),
        c.replication === undefined ? '' : c.replication.writeUnits.toFixed(2),
        c.replication === undefined ? '' : usd(c.replication.upperBoundTotal),
      ]),
    );
  }
  out.push(alignRight(rows));
  out.push('  replicated units: what the other region is billed per request (write units as plain writes, its index writes included); if doubled: the total were a transaction\'s replicated copy billed doubled (AWS does not say)');
  if (twoExample !== undefined) {
    const lineRows: string[][] = [[`lines that change: ${twoExample.scenario.name}`, 'two regions', 'one region']];
    for (const l of REGION_LINES) {
      const two = twoExample.lines[l];
      const one = oneExample?.lines[l] ?? Exact.ZERO;
      if (!two.isZero() || !one.isZero()) lineRows.push([`  ${LINES[l]}: ${l}`, usd(two, 4), usd(one, 4)]);
    }
    out.push(alignLeft(lineRows));
  }
  out.push('');
  return out;
}

/**
 * The chart: every memory size and stage at a 5 s reply and 100 req/s on-demand, then managed
 * instances by rate; `runNote` says which run's figures these are (date, quick, load).
 */
export function renderCostChart(r: CostReport, runNote = ''): string {
  const bar = (label: string, c: ScenarioCost): CostBar => ({ label, parts: Object.fromEntries(COMPONENTS.map((k) => [k, c.components[k].toNumber()])) as Record<Component, number> });
  const bars: CostBar[] = [];
  for (const c of r.costs) {
    const s = c.scenario;
    if (!oneRegion(s) || s.compute !== 'on-demand' || s.replySeconds !== GOAL_REPLY_SECONDS || s.requestsPerSecond !== GOAL_RATE) continue;
    bars.push(bar(s.name.startsWith('sweep') ? `on-demand ${s.memoryMb} MB` : `${s.stage.name} stage, on-demand ${s.memoryMb} MB`, c));
  }
  for (const c of r.costs) {
    const s = c.scenario;
    if (oneRegion(s) && s.compute === 'managed-instances' && s.replySeconds === GOAL_REPLY_SECONDS) bars.push(bar(`managed instances, ${s.requestsPerSecond} req/s`, c));
  }
  return costChart(
    `Sluice: cost per million requests, ${GOAL_REPLY_SECONDS} s streamed reply`,
    `on-demand at ${GOAL_RATE} req/s; us-east-1 list prices; every limit set (docs/cost.md)${runNote === '' ? '' : `; ${runNote}`}`,
    bars,
    [
      { label: `on-demand goal $${ON_DEMAND_GOAL_USD}`, usd: ON_DEMAND_GOAL_USD },
      { label: `managed goal $${MANAGED_GOAL_USD}`, usd: MANAGED_GOAL_USD },
    ],
  );
}
