/** Phase 5: the gap between chunks on paced streams, rotating; each relay's CPU over its own streams. */
import type { Plan } from '../args';
import { postStream, type StreamTiming } from '../load';
import type { GatewayStats } from '../protocol';
import { side, type Side } from '../report';
import { log, type Stack } from '../stack';
import { StreamCounts, expectOk, rotation } from './requests';

export interface ChunkGaps {
  readonly samples: { readonly gateway: number[]; readonly direct: number[]; readonly relay: number[] };
  readonly gap: Side;
  readonly counts: { readonly gateway: StreamCounts; readonly direct: StreamCounts; readonly relay: StreamCounts };
  /** The gateway's and the relay's stats before and after the long paced streams. */
  readonly before: { readonly gateway: GatewayStats; readonly relay: GatewayStats };
  readonly after: { readonly gateway: GatewayStats; readonly relay: GatewayStats };
}

function gaps(t: StreamTiming): number[] {
  return t.frameTimes.slice(1).map((v, i) => v - (t.frameTimes[i] as number));
}

/** Runs phase 5: `plan.gapStreams` paced streams per side, with the stats phase 6 regresses on. */
export async function chunkGaps(stack: Stack, plan: Plan): Promise<ChunkGaps> {
  const { gw, relay, gwT, directT, relayT } = stack;
  const { paced, bodyFor, keyFor } = stack.requests;
  log(`gap between chunks (${plan.gapStreams} streams per side, up to ${plan.gapTokens} tokens ${plan.gapDelayMs} ms apart)`);
  const samples = { gateway: [] as number[], direct: [] as number[], relay: [] as number[] };
  const counts = { gateway: new StreamCounts(), direct: new StreamCounts(), relay: new StreamCounts() };
  const before = { gateway: await gw.idle(), relay: await relay.idle() };
  for (let i = 0; i < plan.gapStreams; i += 1) {
    for (const t of rotation([gwT, directT, relayT], i)) {
      const r = await postStream(t, bodyFor(t, paced), keyFor(t));
      expectOk(r, `${t.name} stream`);
      samples[t.name].push(...gaps(r));
      counts[t.name].add(r);
    }
  }
  const after = { gateway: await gw.idle(), relay: await relay.idle() };
  return { samples, gap: side(samples.gateway, samples.direct, samples.relay), counts, before, after };
}
