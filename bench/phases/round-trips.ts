/**
 * `npm run bench -- --round-trips-only`: only what counts the gateway's store round trips. The
 * non-streamed latency phase and the streamed time-to-first-byte phase, as a full run has them
 * (same plan, same order after the warm-up), then a quiet workspace's streams: one workspace of
 * its own, one streamed request every `quietGapMs` for `quietStreamSeconds`, long enough to cross
 * the ledger's per-workspace upkeep (every 30 s after a reply) and the reuse of each spend-rate
 * slot (64 s), the two things a short phase never meets. Then the figures, with each warm request
 * that did not make exactly one round trip before its first byte named by its calls.
 */
import type { Plan } from '../args';
import { postStream } from '../load';
import { fmtHist } from '../report-targets';
import { offTargetRows } from '../report-tables';
import { tripReport, type TripReport } from '../report';
import { log, type Stack } from '../stack';
import { nonStreamedLatency } from './latency';
import { authHeaders, expectOk, type Caller } from './requests';
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

/** One quiet workspace streaming one request at a time, paced, for `plan.quietStreamSeconds`. */
async function quietStreams(stack: Stack, plan: Plan, caller: Caller): Promise<TripReport> {
  const { gw, gwT } = stack;
  const body = stack.requests.shortStream.gateway;
  const key = authHeaders(caller.rawKey);
  log(`a quiet workspace's streams, one every ${plan.quietGapMs} ms for ${plan.quietStreamSeconds} s`);
  await gw.record(true);
  const end = Date.now() + plan.quietStreamSeconds * 1000;
  while (Date.now() < end) {
    const r = await postStream(gwT, body, key);
    expectOk(r, 'quiet stream');
    await gw.idle();
    await new Promise((resolve) => setTimeout(resolve, plan.quietGapMs));
  }
  await gw.record(false);
  return tripReport(await gw.samples());
}

/** Runs the warm-up and the round-trip phases; prints and returns their reports. */
export async function roundTripsOnly(stack: Stack, plan: Plan): Promise<{ nonStreamed: TripReport; streamed: TripReport; quiet: TripReport }> {
  await warmUp(stack, plan);
  const latency = await nonStreamedLatency(stack, plan);
  const ttfb = await streamTtfb(stack, plan);
  // A workspace the earlier phases did not use (the warm-up touched it once): quiet, as the target means.
  const quietCaller = stack.callers[stack.callers.length - 1] as Caller;
  const quiet = await quietStreams(stack, plan, quietCaller);
  const reports = { nonStreamed: latency.trips, streamed: ttfb.trips, quiet };
  const lines = [...tripLines('non-stream', reports.nonStreamed), ...tripLines('stream', reports.streamed), ...tripLines('quiet stream', reports.quiet)];
  process.stdout.write(`${lines.join('\n')}\n`);
  const exact = Object.values(reports).every((t) => t.ledgerBeforeFirstByteOnWarm.every((e) => e.value === 1));
  log(exact ? 'every warm request made exactly 1 store round trip before its first byte' : 'some warm requests did not make exactly 1 store round trip before their first byte');
  return reports;
}
