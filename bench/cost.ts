/**
 * The cost model's run: reads the last `bench-results/bench.json` (the main run's figures and
 * `costInputs`, the store map, the CPU share), prices every scenario (`cost-report.ts`), prints
 * the tables, merges `cost` into bench.json and draws `bench-results/cost.svg`. When bench.json
 * holds no store map, the store map runs first (its own stack, about three minutes), unless the
 * run was told to leave it out; then the model says it used stated figures.
 *
 *   npm run bench -- --cost-only            this part alone, from the last bench.json
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Options } from './args';
import { RESULTS_DIR, mergeBenchJson, readBenchJson } from './bench-json';
import { measuredFrom, stageProfiles, storeUnitsFrom } from './cost-inputs';
import { loadPriceBook } from './cost-prices';
import { buildCostReport, costJson, renderCostChart, renderCostReport, type CostReport } from './cost-report';
import { log } from './stack';
import { runStoreMap, writeStoreMap } from './store-map';

/** Which run the figures come from: its date, whether it was quick, the machine's load. */
export function runNote(bench: Readonly<Record<string, unknown>>): string {
  const machine = (bench.machine ?? {}) as { loadAverageStart?: unknown; cpus?: unknown };
  const options = (bench.options ?? {}) as { quick?: unknown };
  const when = typeof bench.when === 'string' ? bench.when.slice(0, 10) : 'no main run';
  const load = typeof machine.loadAverageStart === 'number' ? `, load ${machine.loadAverageStart.toFixed(1)} on ${String(machine.cpus)} cores` : '';
  return `run of ${when}${options.quick === true ? ' (--quick)' : ''}${load}`;
}

/** Runs the cost model; `storeMapIfMissing` runs the store map first when bench.json has none. */
export async function costMain(options: Pick<Options, 'quick'>, storeMapIfMissing: boolean): Promise<CostReport> {
  let bench = readBenchJson();
  if (storeUnitsFrom(bench.storeMap) === undefined) {
    if (storeMapIfMissing) {
      log('cost model: bench.json has no store map; running it first');
      writeStoreMap(await runStoreMap({ quick: options.quick }), RESULTS_DIR);
      bench = readBenchJson();
    } else log('cost model: bench.json has no store map; using the stated write units (see the inputs below)');
  }
  const report = buildCostReport(loadPriceBook(), measuredFrom(bench), stageProfiles());
  process.stdout.write(`${renderCostReport(report)}\n`);
  mergeBenchJson({ cost: costJson(report) });
  const svg = path.join(RESULTS_DIR, 'cost.svg');
  writeFileSync(svg, renderCostChart(report, runNote(bench)));
  log(`cost model: merged cost into bench-results/bench.json; chart in ${path.relative(process.cwd(), svg)}`);
  return report;
}
