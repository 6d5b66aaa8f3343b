/** Phase 3: throughput at each planned concurrency, gateway and direct in alternating slices. */
import type { Plan } from '../args';
import { closedLoop, post, type LoadResult } from '../load';
import type { Throughput } from '../report';
import { log, type Stack } from '../stack';
import { summarize } from '../stats';
import { authHeaders, cpuUs, rotation, totalTrips, type Caller } from './requests';

export interface ThroughputFigures {
  readonly throughput: Throughput[];
  /** Every request's latency, per concurrency, for the charts. */
  readonly samples: Map<number, { gateway: number[]; direct: number[] }>;
}

function merge(runs: readonly LoadResult[]): Throughput['gateway'] {
  const ok = runs.reduce((a, r) => a + r.ok, 0);
  const failed = runs.reduce((a, r) => a + r.failed, 0);
  const elapsed = runs.reduce((a, r) => a + r.elapsedMs, 0);
  const firstError = runs.find((r) => r.firstError !== undefined)?.firstError;
  return { rps: (ok / elapsed) * 1000, ok, failed, latency: summarize(runs.flatMap((r) => r.latenciesMs)), ...(firstError === undefined ? {} : { firstError }) };
}

/** Runs phase 3: for each concurrency, closed loops of `plan.sliceMs` per side for `plan.rounds` rounds. */
export async function throughputPhase(stack: Stack, plan: Plan): Promise<ThroughputFigures> {
  const { gw, gwT, directT, callers } = stack;
  const { short, directKey } = stack.requests;
  const throughput: Throughput[] = [];
  const samples = new Map<number, { gateway: number[]; direct: number[] }>();
  for (const c of plan.concurrencies) {
    log(`throughput, concurrency ${c} (${plan.rounds} x ${plan.sliceMs} ms per side)`);
    const gwReq = (w: number): ReturnType<typeof post> => post(gwT, short.gateway, authHeaders((callers[w % callers.length] as Caller).rawKey));
    const directReq = (): ReturnType<typeof post> => post(directT, short.direct, directKey);
    await closedLoop(c, 500, gwReq);
    await closedLoop(c, 500, directReq);
    const gwRuns: LoadResult[] = [];
    const directRuns: LoadResult[] = [];
    let cpu = 0;
    let trips = 0;
    for (let r = 0; r < plan.rounds; r += 1) {
      for (const which of rotation(['gateway', 'direct'] as const, r)) {
        if (which === 'gateway') {
          const s0 = await gw.idle();
          gwRuns.push(await closedLoop(c, plan.sliceMs, gwReq));
          const s1 = await gw.idle();
          cpu += cpuUs(s0, s1);
          trips += totalTrips(s1) - totalTrips(s0);
        } else {
          directRuns.push(await closedLoop(c, plan.sliceMs, directReq));
        }
      }
    }
    const g = merge(gwRuns);
    const d = merge(directRuns);
    throughput.push({ concurrency: c, gateway: g, direct: d, gatewayCpuUsPerRequest: cpu / Math.max(1, g.ok + g.failed), gatewayTripsPerRequest: trips / Math.max(1, g.ok + g.failed) });
    samples.set(c, { gateway: gwRuns.flatMap((r) => r.latenciesMs), direct: directRuns.flatMap((r) => r.latenciesMs) });
  }
  return { throughput, samples };
}
