/**
 * The benchmark's arguments and plans: what a full run and a quick one do, bounded by counts and
 * durations. Arguments are read with `node:util`'s `parseArgs`.
 */
import { accessSync, constants, statSync } from 'node:fs';
import path from 'node:path';
import { parseArgs as parseCommandLine } from 'node:util';

// ---------------------------------------------------------------------------------------------
// Plan

export interface Plan {
  readonly workspaces: number;
  readonly warmupMs: number;
  readonly latencyIterations: number;
  readonly cpuRequests: number;
  readonly concurrencies: readonly number[];
  readonly sliceMs: number;
  readonly rounds: number;
  readonly ttfbStreams: number;
  readonly gapStreams: number;
  readonly gapTokens: number;
  readonly gapDelayMs: number;
  readonly shortTokens: number;
  /** Paced streams in flight at once for the busy-process per-chunk CPU (`chunk-cpu.ts`). */
  readonly busyConcurrency: number;
  /** Streams per busy phase, and the output tokens of each long one. */
  readonly busyStreams: number;
  readonly busyTokens: number;
  readonly bigBytes: number;
  readonly initRuns: number;
  /** TransactWriteItems over the AWS SDK, for its control figure. */
  readonly sdkCalls: number;
  /** Idle 2 ms sleeps timed for the wake-up control. */
  readonly wakeups: number;
  /** Requests the in-memory gateway serves for Sluice's own CPU (`own-cpu.ts`). */
  readonly ownRequests: number;
  /**
   * `--round-trips-only`: how long one quiet workspace streams, one request every
   * `quietGapMs`, so the run crosses the ledger's 30 s upkeep and the spend-rate slots' 64 s reuse.
   */
  readonly quietStreamSeconds: number;
  readonly quietGapMs: number;
  /**
   * The CPU share (`cpu-share.ts`): the memory sizes measured (each stage's own are added), and
   * at each, the rounds of the non-streamed latency and first-byte phases, the paced streams of
   * the chunk-gap phase and the sequential requests of the CPU figure.
   */
  readonly cpuShare: { readonly memoryMb: readonly number[]; readonly latencyIterations: number; readonly ttfbStreams: number; readonly gapStreams: number; readonly cpuRequests: number };
}

export const FULL: Plan = {
  workspaces: 64,
  warmupMs: 3_000,
  latencyIterations: 1_000,
  cpuRequests: 500,
  concurrencies: [16, 64],
  sliceMs: 4_000,
  rounds: 2,
  ttfbStreams: 300,
  gapStreams: 40,
  gapTokens: 100,
  gapDelayMs: 2,
  shortTokens: 2,
  busyConcurrency: 48,
  busyStreams: 192,
  busyTokens: 1_000,
  bigBytes: 100 * 1024 * 1024,
  initRuns: 7,
  sdkCalls: 300,
  wakeups: 500,
  ownRequests: 20_000,
  quietStreamSeconds: 150,
  quietGapMs: 250,
  cpuShare: { memoryMb: [128, 256, 512, 1_024], latencyIterations: 300, ttfbStreams: 100, gapStreams: 10, cpuRequests: 200 },
};

export const QUICK: Plan = {
  ...FULL,
  workspaces: 16,
  warmupMs: 1_000,
  latencyIterations: 150,
  cpuRequests: 100,
  sliceMs: 1_000,
  rounds: 1,
  ttfbStreams: 40,
  gapStreams: 6,
  busyStreams: 96,
  busyTokens: 600,
  bigBytes: 10 * 1024 * 1024,
  initRuns: 3,
  sdkCalls: 60,
  wakeups: 200,
  ownRequests: 5_000,
  quietStreamSeconds: 70,
  cpuShare: { memoryMb: [128], latencyIterations: 60, ttfbStreams: 20, gapStreams: 3, cpuRequests: 40 },
};

/** What the command line asked for. */
export interface Options {
  readonly quick: boolean;
  readonly profile: boolean;
  /** Only the store write map (`store-map.ts`). */
  readonly storeMapOnly: boolean;
  /** Leave the store write map out of a run. */
  readonly noStoreMap: boolean;
  /** Only the phases that count store round trips (`phases/round-trips.ts`), and no store map. */
  readonly roundTripsOnly: boolean;
  /** Only the busy per-chunk CPU (gateway and bare relay, alternately) and the 100 MiB stream (`phases/chunk-cpu.ts`). */
  readonly chunkCpuOnly: boolean;
  /** Only Lambda's CPU share emulated (`cpu-share.ts`), then the cost model. */
  readonly cpuShareOnly: boolean;
  /** Leave the CPU share out of a run. */
  readonly noCpuShare: boolean;
  /** Only the cost model, from the last bench.json (`cost.ts`). */
  readonly costOnly: boolean;
  /** Only two regions at steady state (`regions-steady.ts`). */
  readonly regionsSteadyOnly: boolean;
  /** Leave two regions at steady state out of a run. */
  readonly noRegionsSteady: boolean;
  /**
   * The CPU share's provider time, ms: the simulator holds each reply's first byte this long, on
   * every side alike, so an admission and its settlement fall in different CFS periods as they do
   * behind a real provider (0, the default: the simulator answers at once, the harshest case).
   */
  readonly providerMs: number;
  /** Extra `node` options for the gateway's process (space-separated), e.g. V8's heap sizes. */
  readonly gatewayNodeOptions: readonly string[];
  /**
   * The `node` binary for the gateway's process and the bare relay's, e.g. the deployed runtime's
   * major (`DEPLOYED_NODE_MAJOR`) when the machine's Node is another; absent: the bench's own.
   */
  readonly gatewayNode?: string;
}

/** Reads the run's switches; anything else is refused with the list of what is accepted. */
export function parseArgs(argv: readonly string[]): Options {
  try {
    const { values } = parseCommandLine({
      args: [...argv],
      options: {
        quick: { type: 'boolean', default: false },
        profile: { type: 'boolean', default: false },
        'store-map-only': { type: 'boolean', default: false },
        'no-store-map': { type: 'boolean', default: false },
        'round-trips-only': { type: 'boolean', default: false },
        'chunk-cpu-only': { type: 'boolean', default: false },
        'cpu-share-only': { type: 'boolean', default: false },
        'no-cpu-share': { type: 'boolean', default: false },
        'cost-only': { type: 'boolean', default: false },
        'regions-steady-only': { type: 'boolean', default: false },
        'no-regions-steady': { type: 'boolean', default: false },
        'provider-ms': { type: 'string', default: '0' },
        'gateway-node-options': { type: 'string', default: '' },
        'gateway-node': { type: 'string' },
      },
      strict: true,
      allowPositionals: false,
    });
    const providerMs = Number(values['provider-ms']);
    if (!Number.isSafeInteger(providerMs) || providerMs < 0 || providerMs > 10_000) throw new Error(`--provider-ms takes whole milliseconds from 0 to 10000, got ${String(values['provider-ms'])}`);
    const gatewayNodeOptions = String(values['gateway-node-options']).split(' ').filter((o) => o !== '');
    const notAnOption = gatewayNodeOptions.find((o) => !o.startsWith('--'));
    if (notAnOption !== undefined) throw new Error(`--gateway-node-options takes node options (each starting with --), got ${notAnOption}`);
    const gatewayNode = values['gateway-node'] === undefined ? undefined : path.resolve(String(values['gateway-node']));
    if (gatewayNode !== undefined && !isExecutable(gatewayNode)) throw new Error(`--gateway-node takes the path of a node binary, got ${gatewayNode} (not an executable file)`);
    return {
      quick: values.quick === true,
      profile: values.profile === true,
      storeMapOnly: values['store-map-only'] === true,
      noStoreMap: values['no-store-map'] === true,
      roundTripsOnly: values['round-trips-only'] === true,
      chunkCpuOnly: values['chunk-cpu-only'] === true,
      cpuShareOnly: values['cpu-share-only'] === true,
      noCpuShare: values['no-cpu-share'] === true,
      costOnly: values['cost-only'] === true,
      regionsSteadyOnly: values['regions-steady-only'] === true,
      noRegionsSteady: values['no-regions-steady'] === true,
      providerMs,
      gatewayNodeOptions,
      ...(gatewayNode !== undefined ? { gatewayNode } : {}),
    };
  } catch (err) {
    throw new Error(`${err instanceof Error ? err.message : String(err)} (use --quick, --profile, --store-map-only, --no-store-map, --round-trips-only, --chunk-cpu-only, --cpu-share-only, --no-cpu-share, --cost-only, --regions-steady-only, --no-regions-steady, --provider-ms N, --gateway-node-options="--flag ...", --gateway-node PATH)`);
  }
}

/** Whether `file` is a file this process may execute. */
function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return statSync(file).isFile();
  } catch {
    return false;
  }
}

/**
 * The Node.js major the deployed functions run: `lib/sluice-function.ts` pins `nodejs22.x`
 * (`test/cdk/sluice-stack.test.ts` holds the pin to this constant). V8's collector differs
 * between majors (Node 20's `AbortSignal` keeps a request's objects alive through a scavenge,
 * Node 22's does not: docs/gateway.md), so figures from another major say less about a deployment.
 */
export const DEPLOYED_NODE_MAJOR = 22;

/** A line for the log when the gateway's Node is not the deployed runtime's major, else nothing. */
export function deployedRuntimeNote(version: string): string | undefined {
  const major = Number(/^v(\d+)\./.exec(version)?.[1]);
  if (major === DEPLOYED_NODE_MAJOR) return undefined;
  return (
    `note: the gateway runs on Node ${version}; the deployed functions run Node.js ${DEPLOYED_NODE_MAJOR} (nodejs${DEPLOYED_NODE_MAJOR}.x). ` +
    `Its CPU and collector figures are that Node's: --gateway-node PATH runs the gateway on a Node ${DEPLOYED_NODE_MAJOR} binary (docs/bench.md).`
  );
}
