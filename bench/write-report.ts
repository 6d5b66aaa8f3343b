/**
 * Writes a run's report: the tables on stdout (and the profile with `--profile`),
 * `bench-results/bench.json` and the latency CDFs in `bench-results/latency.svg`.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Plan } from './args';
import { cdfChart } from './chart';
import { renderProfile, type ProfileSummary } from './profile-summary';
import type { Results } from './report';
import { renderTables } from './report-tables';
import { round } from './stats';

type SideSamples = { readonly gateway: readonly number[]; readonly direct: readonly number[]; readonly relay: readonly number[] };

/** The raw samples the charts are drawn from. */
export interface ChartSamples {
  readonly c1: SideSamples;
  readonly floorC1: readonly number[];
  readonly ttfb: SideSamples;
  readonly floorStream: readonly number[];
  readonly gap: SideSamples;
  readonly throughput: ReadonlyMap<number, { readonly gateway: readonly number[]; readonly direct: readonly number[] }>;
}

const GW = '#d62728';
const DIRECT = '#1f77b4';
const RELAY = '#2ca02c';
const FLOOR = '#7f7f7f';

/** Prints the tables and writes bench.json and latency.svg under `outDir`. */
export function writeReport(outDir: string, plan: Plan, results: Results, profile: ProfileSummary | undefined, s: ChartSamples): void {
  process.stdout.write(`${renderTables(results)}\n`);
  if (profile !== undefined) process.stdout.write(`\n${renderProfile(profile)}\n`);
  writeFileSync(path.join(outDir, 'bench.json'), `${JSON.stringify(results, (_k, v: unknown) => (typeof v === 'number' ? round(v) : v), 2)}\n`);
  const sides = (x: SideSamples): { label: string; color: string; samples: readonly number[] }[] => [
    { label: 'gateway', color: GW, samples: x.gateway },
    { label: 'direct', color: DIRECT, samples: x.direct },
    { label: 'bare relay (control)', color: RELAY, samples: x.relay },
  ];
  const panels = [
    { title: 'Non-streamed latency, concurrency 1', series: [...sides(s.c1), { label: 'one TransactWriteItems', color: FLOOR, dashed: true, samples: s.floorC1 }] },
    { title: 'Streamed time to first byte', series: [...sides(s.ttfb), { label: 'one TransactWriteItems', color: FLOOR, dashed: true, samples: s.floorStream }] },
    { title: `Gap between chunks (upstream paces ${plan.gapDelayMs} ms)`, series: sides(s.gap) },
    ...plan.concurrencies.map((c) => ({
      title: `Non-streamed latency, concurrency ${c}`,
      series: [
        { label: 'gateway', color: GW, samples: s.throughput.get(c)?.gateway ?? [] },
        { label: 'direct', color: DIRECT, samples: s.throughput.get(c)?.direct ?? [] },
      ],
    })),
  ];
  writeFileSync(path.join(outDir, 'latency.svg'), cdfChart('Sluice gateway against the direct call (empirical CDFs)', panels));
}
