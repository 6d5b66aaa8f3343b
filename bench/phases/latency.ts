/**
 * Phase 1: non-streamed latency at concurrency 1, the gateway, the direct call, the bare relay
 * and one floor transaction in rotating turns, with the gateway's round trips and timeline.
 */
import type { Plan } from '../args';
import { post, type Timing } from '../load';
import { phaseReport, side, tripReport, type PhaseReport, type Side, type TripReport } from '../report';
import { log, type Stack } from '../stack';
import { summarize, type Summary } from '../stats';
import { expectOk, rotation } from './requests';

export interface Latency {
  readonly samples: { readonly gateway: number[]; readonly direct: number[]; readonly relay: number[] };
  /** The floor's transactions taken in turn with these requests. */
  readonly floorSamples: number[];
  readonly c1: Side;
  readonly floor: Summary;
  readonly trips: TripReport;
  readonly phases: PhaseReport;
}

/** Runs phase 1 and returns its samples and figures; the floor's samples are this phase's own. */
export async function nonStreamedLatency(stack: Stack, plan: Plan): Promise<Latency> {
  const { gw, gwT, directT, relayT, floor } = stack;
  const { short, bodyFor, keyFor } = stack.requests;
  log(`non-streamed latency, concurrency 1 (${plan.latencyIterations} rounds of gateway, direct, bare relay and one transaction)`);
  const samples = { gateway: [] as number[], direct: [] as number[], relay: [] as number[] };
  const gatewayTimings: Timing[] = [];
  await gw.record(true);
  for (let i = 0; i < plan.latencyIterations; i += 1) {
    for (const which of rotation(['gateway', 'direct', 'relay', 'txn'] as const, i)) {
      if (which === 'txn') {
        await floor.transaction(true);
        continue;
      }
      const t = which === 'gateway' ? gwT : which === 'direct' ? directT : relayT;
      const r = await post(t, bodyFor(t, short), keyFor(t));
      expectOk(r, which);
      samples[which].push(r.totalMs);
      if (which === 'gateway') gatewayTimings.push(r);
      // Settlement runs after the reply; let it finish, as the next invocation of a Lambda
      // instance would, so it does not weigh on the other sides' measurements.
      if (which === 'gateway') await gw.idle();
    }
  }
  await gw.record(false);
  const gatewaySamples = await gw.samples();
  const floorSamples = floor.takeSamples();
  return {
    samples,
    floorSamples,
    c1: side(samples.gateway, samples.direct, samples.relay),
    floor: summarize(floorSamples),
    trips: tripReport(gatewaySamples),
    phases: phaseReport(gatewaySamples, gatewayTimings, false),
  };
}
