/**
 * `npm run bench`: the gateway against the direct call, on one machine, in one run.
 *
 * Starts DynamoDB Local (Java), the upstream simulator, the gateway (the esbuild bundle) and a
 * bare pass-through relay (the control: one plain node:http hop), each in its own process, seeds
 * workspaces, and drives every side from this process with node:http keep-alive agents, in turn,
 * so that all meet the same machine state; one DynamoDB TransactWriteItems, the floor, takes its
 * turn too. Every phase is bounded by a count or a duration; the run stops by itself and stops
 * what it started, by PID (a watchdog ends it after 9 minutes whatever happens).
 *
 *   npm run bench                  full run (its main phases about 2.5 minutes on 2 cores, then the
 *                                  store map, the CPU share and the cost model)
 *   npm run bench -- --quick       a short smoke run of every part (its main phases under a minute)
 *   npm run bench -- --store-map-only   only the store write map (`store-map.ts`), which a
 *                                  full run also makes at its end (`--no-store-map` to skip it)
 *   npm run bench -- --round-trips-only   only the warm-up and the two phases that count store
 *                                  round trips (non-streamed latency, stream time to first byte)
 *   npm run bench -- --chunk-cpu-only   only the busy per-chunk CPU, gateway and bare relay in
 *                                  turn (three rounds), and the 100 MiB stream's memory: the A/B
 *                                  tool for per-chunk work (`phases/chunk-cpu.ts`)
 *   npm run bench -- --profile     also profiles the gateway (node --cpu-prof) and prints where
 *                                  its time went by source module; the profiler's own cost
 *                                  inflates that run's CPU figures
 *   npm run bench -- --cpu-share-only   only Lambda's CPU share emulated (`cpu-share.ts`: the
 *                                  gateway in a cgroup capped at each memory size's share),
 *                                  which a full run also makes after the store map
 *                                  (`--no-cpu-share` to skip it), then the cost model
 *   npm run bench -- --cost-only   only the cost model (`cost.ts`), from the last bench.json,
 *                                  which every run ends with
 *   npm run bench -- --regions-steady-only   only two regions at steady state
 *                                  (`regions-steady.ts`: `npm run start:regions` with a 1 s
 *                                  replication lag, cross-region moves per 100 requests and the
 *                                  latency targets per region), which a full run also makes after
 *                                  the CPU share (`--no-regions-steady` to skip it)
 *   npx tsx bench/cpu-breakdown.ts where a request's and a stream's CPU go, by part of the
 *                                  request path, with allocations (and instructions under
 *                                  callgrind): the A/B tool for CPU per request (docs/bench.md)
 *
 * Every figure is skewed by whatever else the machine runs: the load average is reported.
 *
 * Output: tables on stdout, `bench-results/bench.json`, `bench-results/latency.svg`,
 * `bench-results/cost.svg`.
 *
 * Cut: `args.ts` (the plans and the command line), `stack.ts` (the processes, the seeding, the
 * watchdog) and `floor.ts` (the floor's transaction), one module per phase under `phases/`, in
 * the order this file runs them, `report.ts` (the figures, their targets and the tables) and
 * `write-report.ts` (stdout, bench.json, the chart). This file only puts them in order.
 */
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { FULL, QUICK, parseArgs } from './args';
import { bigStream } from './phases/big-stream';
import { chunkCpu, chunkCpuOnly } from './phases/chunk-cpu';
import { chunkGaps } from './phases/chunk-gaps';
import { costMeasures } from './phases/cost-measures';
import { nonStreamedLatency } from './phases/latency';
import { quietControls } from './phases/quiet-controls';
import { requestCpu } from './phases/request-cpu';
import { fixedPerStream, streamCpu } from './phases/stream-cpu';
import { sdkControls } from './phases/sdk-controls';
import { throughputPhase } from './phases/throughput';
import { roundTripsOnly } from './phases/round-trips';
import { streamTtfb } from './phases/ttfb';
import { warmUp } from './phases/warm-up';
import { buildResults } from './report-targets';
import { costMain } from './cost';
import { cpuShareMain } from './cpu-share';
import { regionsSteadyMain, steadyDefaults } from './regions-steady';
import { guardRun, log, startStack } from './stack';
import { summarize } from './stats';
import { storeMapMain } from './store-map';
import { writeReport } from './write-report';

async function main(): Promise<void> {
  const options = parseArgs(process.argv.slice(2));
  const plan = options.quick ? QUICK : FULL;
  const started = performance.now();
  const loadAverageStart = os.loadavg()[0] ?? Number.NaN;
  const run = guardRun();
  try {
    const stack = await startStack(run.cleanup, plan, options);
    if (options.roundTripsOnly) {
      await roundTripsOnly(stack, plan);
      return;
    }
    await warmUp(stack, plan);
    const latency = await nonStreamedLatency(stack, plan);
    const reqCpu = await requestCpu(stack, plan);
    const seqStreams = await streamCpu(stack, plan);
    const throughput = await throughputPhase(stack, plan);
    const ttfb = await streamTtfb(stack, plan);
    const gaps = await chunkGaps(stack, plan);
    const chunk = await chunkCpu(stack, plan, gaps);
    const big = await bigStream(stack, plan, gaps.counts.gateway, reqCpu.perRequestUs);
    const sdk = await sdkControls(stack, plan);
    const costInputs = await costMeasures(stack, latency.trips);

    // Stop the stack, then the controls and the bundle's module init on a quieter machine.
    const gatewayLogLines = stack.gw.logLines;
    await stack.stopServices();
    const quiet = await quietControls(stack, plan, options);

    const floorCpu = summarize(stack.floor.cpuUs);
    const results = buildResults({
      options,
      gatewayNode: stack.gw.node,
      plan,
      bundles: stack.bundles,
      init: quiet.init,
      floor: latency.floor,
      floorStream: ttfb.floorStream,
      floorCpuUs: floorCpu,
      txnRetries: stack.floor.retries,
      c1: latency.c1,
      cpu: {
        perNonStreamedRequestUs: reqCpu.perRequestUs,
        perNonStreamedRequestSystemUs: reqCpu.perRequestSystemUs,
        relayPerRequestUs: reqCpu.relayPerRequestUs,
        wirePerTransactionUs: floorCpu.mean,
        sdkPerTransactionUs: summarize(sdk.sdkCpuUs).mean,
        sdkLowLevelPerTransactionUs: summarize(sdk.lowLevelCpuUs).mean,
        processRemainderPerRequestUs: reqCpu.perRequestUs - reqCpu.relayPerRequestUs - 2 * floorCpu.mean,
        idleWakeupUs: quiet.wakeupUs,
        own: quiet.own,
        perChunkBusyUs: chunk.busy.gateway.perChunkUs,
        relayPerChunkBusyUs: chunk.busy.relay.perChunkUs,
        fixedPerStreamUs: chunk.busy.gateway.perStreamFixedUs,
        relayFixedPerStreamUs: chunk.busy.relay.perStreamFixedUs,
        sequentialStream: {
          ...seqStreams,
          fixedUs: fixedPerStream(seqStreams.perStreamUs, seqStreams.framesPerStream, chunk.busy.gateway.perChunkUs),
          relayFixedUs: fixedPerStream(seqStreams.relayPerStreamUs, seqStreams.relayFramesPerStream, chunk.busy.relay.perChunkUs),
        },
        busy: chunk.busy,
        perChunkPacedSequentialUs: chunk.perChunkPacedSequentialUs,
        relayPerChunkPacedSequentialUs: chunk.relayPerChunkPacedSequentialUs,
        wakeupsPerChunkPacedSequential: chunk.wakeupsPerChunkPacedSequential,
        relayWakeupsPerChunkPacedSequential: chunk.relayWakeupsPerChunkPacedSequential,
        perChunkUnpacedUs: big.cpuPerChunkUs,
        framesPerLongStream: gaps.counts.gateway.frames / plan.gapStreams,
        framesPerShortStream: chunk.framesPerShortStream,
      },
      throughput: throughput.throughput,
      ttfb: ttfb.ttfb,
      gap: gaps.gap,
      frames: { gateway: gaps.counts.gateway.summary(), direct: gaps.counts.direct.summary(), relay: gaps.counts.relay.summary() },
      nonStreamTrips: latency.trips,
      streamTrips: ttfb.trips,
      phases: { nonStreamed: latency.phases, streamed: ttfb.phases },
      big,
      gatewayLogLines,
      costInputs,
      elapsedS: (performance.now() - started) / 1000,
      loadAverageStart,
      ...(quiet.profile === undefined ? {} : { profile: quiet.profile }),
    });
    writeReport(stack.outDir, plan, results, quiet.profile, {
      c1: latency.samples,
      floorC1: latency.floorSamples,
      ttfb: ttfb.samples,
      floorStream: ttfb.floorSamples,
      gap: gaps.samples,
      throughput: throughput.samples,
    });
    log(`wrote bench-results/bench.json and bench-results/latency.svg in ${Math.round((performance.now() - started) / 1000)} s`);
    if (options.profile) log('gateway CPU profile in bench-results/profile/');
  } finally {
    await run.cleanup.run();
    run.disarm();
  }
}

/**
 * The parts of a run, each on a stack of its own, in order: the main phases (bench.json written
 * afresh), the store write map (`store-map.ts`), Lambda's CPU share (`cpu-share.ts`), two regions
 * at steady state (`regions-steady.ts`), then the cost model (`cost.ts`) from what they wrote.
 * Each merges its figures into bench.json.
 */
async function everything(): Promise<void> {
  const options = parseArgs(process.argv.slice(2));
  const benchArgs = process.argv.slice(2);
  const plan = options.quick ? QUICK : FULL;
  if (options.chunkCpuOnly) return chunkCpuOnly(options);
  if (options.storeMapOnly) return storeMapMain(benchArgs);
  if (options.costOnly) {
    await costMain(options, !options.noStoreMap);
    return;
  }
  if (options.regionsSteadyOnly) {
    await regionsSteadyMain(steadyDefaults(options.quick));
    return;
  }
  if (options.cpuShareOnly) {
    await cpuShareMain(options, plan);
    await costMain(options, false);
    return;
  }
  await main();
  if (options.roundTripsOnly) return;
  if (!options.noStoreMap) await storeMapMain(benchArgs);
  if (!options.noCpuShare) await cpuShareMain(options, plan);
  if (!options.noRegionsSteady) await regionsSteadyMain(steadyDefaults(options.quick));
  await costMain(options, false);
}

everything().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`[bench] failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
