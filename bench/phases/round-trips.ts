/**
 * `npm run bench -- --round-trips-only`: only the phases that count the gateway's store round
 * trips, the non-streamed latency phase and the streamed time-to-first-byte phase, as a full run
 * has them (same plan, same order after the warm-up), then their round-trip figures, each warm
 * request that did not make exactly one round trip before its first byte named by its calls.
 * No store map, no CPU or memory phases: a quick way to check the "exactly 1" target.
 */
import type { Plan } from '../args';
import { fmtHist } from '../report-targets';
import { offTargetRows } from '../report-tables';
import type { TripReport } from '../report';
import { log, type Stack } from '../stack';
import { nonStreamedLatency } from './latency';
import { streamTtfb } from './ttfb';
import { warmUp } from './warm-up';

/** The round-trip figures of one phase, as lines. */
export function tripLines(label: string, t: TripReport): string[] {
  return [
    `${label}: ${t.samples} requests, ${t.warm} warm; ledger round trips before the first byte, warm: ${fmtHist(t.ledgerBeforeFirstByteOnWarm)} (trips:requests)`,
    ...offTargetRows(t, label).map(([what, calls]) => `${what}: ${calls}`),
    `${label}: during the reply ${fmtHist(t.during)}, after its end ${fmtHist(t.afterEnd)}, lookups before the first byte ${fmtHist(t.lookupsBeforeFirstByte)}`,
  ];
}

/** Runs the warm-up and the two round-trip phases; returns both reports (and prints them). */
export async function roundTripsOnly(stack: Stack, plan: Plan): Promise<{ nonStreamed: TripReport; streamed: TripReport }> {
  await warmUp(stack, plan);
  const latency = await nonStreamedLatency(stack, plan);
  const ttfb = await streamTtfb(stack, plan);
  const lines = [...tripLines('non-stream', latency.trips), ...tripLines('stream', ttfb.trips)];
  process.stdout.write(`${lines.join('\n')}\n`);
  const exact = [latency.trips, ttfb.trips].every((t) => t.ledgerBeforeFirstByteOnWarm.every((e) => e.value === 1));
  log(exact ? 'every warm request made exactly 1 store round trip before its first byte' : 'some warm requests did not make exactly 1 store round trip before their first byte');
  return { nonStreamed: latency.trips, streamed: ttfb.trips };
}
