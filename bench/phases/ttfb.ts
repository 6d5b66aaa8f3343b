/**
 * Phase 4: streamed time to first byte, the gateway, the direct call, the bare relay and one
 * floor transaction in rotating turns, with the gateway's round trips and timeline.
 */
import type { Plan } from '../args';
import { postStream, type Timing } from '../load';
import { phaseReport, side, tripReport, type PhaseReport, type Side, type TripReport } from '../report';
import { log, type Stack } from '../stack';
import { summarize, type Summary } from '../stats';
import { expectOk, rotation } from './requests';

export interface Ttfb {
  readonly samples: { readonly gateway: number[]; readonly direct: number[]; readonly relay: number[] };
  /** The floor's transactions taken in turn with these streams. */
  readonly floorSamples: number[];
  readonly ttfb: Side;
  readonly floorStream: Summary;
  readonly trips: TripReport;
  readonly phases: PhaseReport;
}

/** Runs phase 4 and returns its samples and figures; the floor's samples are this phase's own. */
export async function streamTtfb(stack: Stack, plan: Plan): Promise<Ttfb> {
  const { gw, gwT, directT, relayT, floor } = stack;
  const { shortStream, bodyFor, keyFor } = stack.requests;
  log(`streamed time to first byte (${plan.ttfbStreams} rounds of gateway, direct and bare relay streams and one transaction)`);
  const samples = { gateway: [] as number[], direct: [] as number[], relay: [] as number[] };
  const gatewayTimings: Timing[] = [];
  floor.takeSamples();
  await gw.record(true);
  for (let i = 0; i < plan.ttfbStreams; i += 1) {
    for (const t of rotation([gwT, directT, relayT, undefined], i)) {
      if (t === undefined) {
        await floor.transaction(true);
        continue;
      }
      const r = await postStream(t, bodyFor(t, shortStream), keyFor(t));
      expectOk(r, `${t.name} stream`);
      if (t.name === 'gateway' && (!r.sawDone || !r.sawUsageComment)) throw new Error('a gateway stream ended without [DONE] or without its usage comment');
      samples[t.name].push(r.ttfbMs);
      if (t.name === 'gateway') gatewayTimings.push(r);
      if (t.name === 'gateway') await gw.idle();
    }
  }
  await gw.record(false);
  const gatewaySamples = await gw.samples();
  const floorSamples = floor.takeSamples();
  return {
    samples,
    floorSamples,
    ttfb: side(samples.gateway, samples.direct, samples.relay),
    floorStream: summarize(floorSamples),
    trips: tripReport(gatewaySamples),
    phases: phaseReport(gatewaySamples, gatewayTimings, true),
  };
}
