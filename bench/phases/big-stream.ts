/** Phase 7: a 100 MiB streamed reply: the gateway's memory, and its speed against the direct call. */
import type { Plan } from '../args';
import { postStream } from '../load';
import { MB, tripReport, type BigStream } from '../report';
import { log, type Stack } from '../stack';
import { MODEL_SHORT, bodies, cpuUs, expectOk, type StreamCounts } from './requests';

/**
 * `gatewayCounts` (phase 5's paced streams) sizes the reply in tokens; `cpuPerRequestUs`
 * (phase 2) is taken off the stream's CPU before it is shared out per chunk.
 */
export async function bigStream(stack: Stack, plan: Plan, gatewayCounts: StreamCounts, cpuPerRequestUs: number): Promise<BigStream> {
  const { gw, gwT, directT, sim } = stack;
  const { firstKey, directKey } = stack.requests;
  const bytesPerFrame = gatewayCounts.bytes / Math.max(1, gatewayCounts.frames);
  const bigTokens = Math.ceil((plan.bigBytes / bytesPerFrame) * 1.02);
  log(`a ${Math.round(plan.bigBytes / MB)} MiB streamed reply (${bigTokens} tokens), gateway then direct`);
  const bigBody = bodies(MODEL_SHORT, true, 4_096);
  const bigBehavior = { kind: 'ok', completionTokens: bigTokens, ignoreCeiling: true };
  await sim.control('/_sim/script', { model: MODEL_SHORT, behaviors: [bigBehavior] });
  await gw.gc();
  await new Promise((r) => setTimeout(r, 200));
  await gw.idle();
  await gw.peak(true);
  // The baseline is taken once tracking runs, so the growth is measured against the same sampler.
  const mem0 = await gw.stats();
  await gw.record(true);
  const bigGw = await postStream(gwT, bigBody.gateway, firstKey, { keepTimes: false, timeoutMs: 180_000 });
  expectOk(bigGw, 'gateway 100 MiB stream');
  const mem1 = await gw.idle();
  await gw.peak(false);
  await gw.record(false);
  const bigTrips = tripReport(await gw.samples());
  await gw.gc();
  const mem2 = await gw.stats();
  await sim.control('/_sim/script', { model: MODEL_SHORT, behaviors: [bigBehavior] });
  const bigDirect = await postStream(directT, bigBody.direct, directKey, { keepTimes: false, timeoutMs: 180_000 });
  expectOk(bigDirect, 'direct 100 MiB stream');
  return {
    tokens: bigTokens,
    gatewayBytes: bigGw.bytes,
    gatewayFrames: bigGw.frames,
    gatewaySeconds: bigGw.totalMs / 1000,
    gatewayMBps: bigGw.bytes / 1e6 / (bigGw.totalMs / 1000),
    directBytes: bigDirect.bytes,
    directSeconds: bigDirect.totalMs / 1000,
    directMBps: bigDirect.bytes / 1e6 / (bigDirect.totalMs / 1000),
    sawDone: bigGw.sawDone,
    rssBefore: mem0.rss,
    peakRss: mem1.peakRss,
    rssGrowth: mem1.peakRss - mem0.rss,
    heapBefore: mem0.heapUsed,
    peakHeapUsed: mem1.peakHeapUsed,
    heapGrowth: mem1.peakHeapUsed - mem0.heapUsed,
    externalGrowth: mem1.peakExternal - mem0.external,
    rssAfterGc: mem2.rss,
    cpuPerChunkUs: (cpuUs(mem0, mem1) - cpuPerRequestUs) / Math.max(1, bigGw.frames),
    holdExtensions: bigTrips.during,
  };
}
