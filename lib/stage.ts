/**
 * Typed, validated settings for each deployable stage. `cdk synth -c stage=<name>` picks one;
 * everything stage-dependent in `lib/` reads it from here, so a stage differs from another only
 * by the values in this file.
 */
import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import { RetentionDays } from 'aws-cdk-lib/aws-logs';

/** The stages Sluice deploys to. `local` is not one of them: local mode needs no CDK. */
export const STAGE_NAMES = ['dev', 'stg', 'prod'] as const;

/** A deployable stage's name. */
export type StageName = (typeof STAGE_NAMES)[number];

/** The stage used when `-c stage=...` is not given. */
export const DEFAULT_STAGE: StageName = 'dev';

/**
 * SPEC's request duration limit. The gateway's Lambda timeout must exceed it, so that the
 * function itself, not the Lambda service, ends an overlong request with SPEC's 504 and settles.
 */
export const REQUEST_LIMIT = Duration.seconds(540);

/** Gateway Lambda timeout: 60 s above the request limit, room to write the 504 and settle. */
export const GATEWAY_TIMEOUT = Duration.seconds(600);

/**
 * How the gateway function runs. `on-demand`: Lambda's default, one request per execution
 * environment, billed per GB-second for the whole reply (waiting on the provider included), and
 * nothing at idle. `managed-instances`: Lambda Managed Instances, many concurrent requests per
 * environment on EC2 instances Lambda runs in the stage's own VPC, billed per instance-hour (plus
 * AWS's 15 % management fee) whether busy or idle; it never scales to zero. See docs/cost.md.
 */
export const COMPUTE_MODES = ['on-demand', 'managed-instances'] as const;

/** One of {@link COMPUTE_MODES}. */
export type ComputeMode = (typeof COMPUTE_MODES)[number];

/** The compute used when neither the stage nor `-c compute=...` says otherwise. */
export const DEFAULT_COMPUTE: ComputeMode = 'on-demand';

/**
 * The gateway on Lambda Managed Instances (`lib/managed-instances.ts`): the capacity provider,
 * the environments the function runs in, and the VPC they need. Used only when the stage's
 * `compute` is `managed-instances`; every stage carries values so that `-c compute=managed-instances`
 * works for any of them.
 */
export interface ManagedInstancesSettings {
  /**
   * EC2 instance types the capacity provider may launch: Graviton (the gateway is arm64), size
   * `large` or above, from AWS's C, M and R families. One type keeps the bill predictable: every
   * size of one family costs the same per vCPU, but a second family would not.
   * @default ['c7g.large'] (2 vCPU, 4 GiB: two environments of 1 vCPU and 2 GiB each)
   */
  readonly instanceTypes: readonly string[];
  /**
   * Requests one environment serves at once (`PerExecutionEnvironmentMaxConcurrency`). The
   * gateway spends milliseconds of CPU per request and seconds waiting on the provider, so one
   * vCPU carries many; Lambda also lowers the figure itself when an environment is saturated.
   * @default 64 (AWS's default for Node.js: 64 per vCPU, and an environment here has one)
   */
  readonly perEnvironmentConcurrency: number;
  /**
   * Environments kept running however quiet the stage is (`MinExecutionEnvironments`). Lambda
   * starts three by default, one per Availability Zone, so losing a zone never leaves none.
   * @default 3
   */
  readonly minEnvironments: number;
  /** Environments at most (`MaxExecutionEnvironments`): the ceiling of concurrent requests is this × {@link perEnvironmentConcurrency}. */
  readonly maxEnvironments: number;
  /**
   * Memory of one environment, MB (the function's `MemorySize`); with {@link memoryGiBPerVcpu} it
   * sets the environment's vCPUs. Managed instances need at least 2 GB.
   * @default 2048 (1 vCPU at 2 GiB per vCPU)
   */
  readonly memoryMb: number;
  /**
   * GiB of memory per vCPU of an environment (`ExecutionEnvironmentMemoryGiBPerVCpu`): 2, 4 or 8.
   * @default 2 (the gateway is CPU-light and memory-light; more GiB per vCPU buys nothing)
   */
  readonly memoryGiBPerVcpu: number;
  /**
   * vCPUs the capacity provider may run across all its instances (`MaxVCpuCount`, at least 12):
   * the stage's ceiling on instance spend. Instances are whole (2 vCPUs for a `large`), and Lambda
   * may place fewer environments on one than would fit, so allow room above
   * {@link maxEnvironments} × the environment's vCPUs.
   */
  readonly maxVcpus: number;
  /**
   * Availability Zones of the VPC, one private and one public subnet in each (2 or 3). Three
   * matches the three environments Lambda spreads over zones; a region with only two zones needs 2.
   * @default 3
   */
  readonly availabilityZones: number;
  /**
   * NAT gateways (1 up to {@link availabilityZones}): the environments' only way to providers and
   * to AWS's APIs (DynamoDB goes through a free gateway endpoint instead). One per zone keeps a
   * zone's failure from cutting the others off; one in all saves money where an outage is
   * acceptable. Each costs an hourly fee and a fee per GB it carries (docs/cost.md).
   */
  readonly natGateways: number;
}

/** Thresholds of the alarms on the stage's dashboard. */
export interface AlarmThresholds {
  /** Gateway function errors (crashes, not refusals) in 5 minutes that raise the alarm. */
  readonly gatewayErrorsPer5Min: number;
  /** Gateway invocations throttled by Lambda concurrency in 5 minutes; each is a refused client. */
  readonly gatewayThrottlesPer5Min: number;
  /** Sweeper errors in 15 minutes; a failing sweeper lets dead requests' holds pile up. */
  readonly sweeperErrorsPer15Min: number;
  /** Aggregator stream lag (IteratorAge, maximum) in milliseconds. */
  readonly aggregatorIteratorAgeMs: number;
  /** Messages in the aggregator's dead-letter queue; any message is a usage batch not rolled up. */
  readonly deadLetterMessages: number;
  /** Settlements that failed (gateway `settle_failed`, sweeper `sweep_failed` lines) in 5 minutes. */
  readonly settlementFailuresPer5Min: number;
  /** Expired holds the sweeper left open after a run (failed or deferred), for 3 runs running. */
  readonly expiredHoldsBacklog: number;
  /** Answers with one 5xx code in 5 minutes (one alarm per code; `paused_by_owner` excluded). */
  readonly serverErrorsPer5Min: number;
  /** A provider's upstream error rate (5xx or no answer), percent of its calls in 5 minutes. */
  readonly upstreamErrorRatePercent: number;
  /** Calls to a provider in 5 minutes below which its error rate is not judged (too few to mean anything). */
  readonly upstreamMinCallsPer5Min: number;
  /** DynamoDB system errors (AWS's 500s) on one table in 5 minutes. */
  readonly dynamoSystemErrorsPer5Min: number;
  /** DynamoDB throttled reads plus writes on one table in 5 minutes. */
  readonly dynamoThrottlesPer5Min: number;
  /** p99 of the gateway's time to first byte, milliseconds, 3 of 5 five-minute periods. */
  readonly firstByteP99Ms: number;
  /** p99 of the gateway's whole request time (streams included), milliseconds, 3 of 5 five-minute periods. */
  readonly latencyP99Ms: number;
}

/** The workspace console's settings (`lib/console.ts`). */
export interface ConsoleSettings {
  /** Console function memory, MB: it renders pages and verifies passkeys, it never streams. */
  readonly memoryMb: number;
  /** How long a signed-in session lasts, minutes (the session cookie's and item's expiry). */
  readonly sessionMinutes: number;
  /** Console function errors (crashes, not refusals) in 5 minutes that raise its alarm. */
  readonly errorsPer5Min: number;
  /**
   * The console's public origin, `https://<host>` with no path, when a domain of your own fronts
   * the console's Function URL. Passkeys are bound to its host name (the WebAuthn RP ID), so
   * changing it later orphans every passkey made before. Set it per deploy with
   * `-c consoleOrigin=https://console.example.com`.
   * @default the Function URL's own origin, which the function reads from each request
   */
  readonly origin?: string;
}

/** Everything that differs between stages. */
export interface StageSettings {
  readonly name: StageName;
  /** Prefix of every table name, `sluice-<stage>-` (see `lambdas/shared/schema.ts`). */
  readonly tablePrefix: string;
  /** Name prefix under which BYOK secrets are created at runtime, `sluice/<stage>/byok/`. */
  readonly byokSecretPrefix: string;
  /** Applied to tables, secrets, log groups and the dead-letter queue. */
  readonly removalPolicy: RemovalPolicy;
  /** DynamoDB deletion protection on every table. */
  readonly deletionProtection: boolean;
  /** Per-key request rate, requests per minute (SPEC: set by the service, not raisable). */
  readonly keyRatePerMinute: number;
  /** Grace after the request limit before the sweeper may settle a hold, milliseconds. */
  readonly holdGraceMs: number;
  /** Retention of every function's log group. */
  readonly logRetention: RetentionDays;
  /** Gateway memory, MB. */
  readonly gatewayMemoryMb: number;
  /** Aggregator and sweeper memory, MB. */
  readonly workerMemoryMb: number;
  readonly alarms: AlarmThresholds;
  /**
   * E-mail address subscribed to the stage's alarm topic (alarms and low-credit notices). Set it
   * per deploy with `-c alarmEmail=ops@example.com`; without one the topic has no subscriber
   * and `cdk synth` says so.
   * @default no subscription
   */
  readonly alarmEmail?: string;
  /**
   * Days a usage row is kept before DynamoDB TTL collects it. Rollups are not affected: daily
   * and monthly totals stay for good.
   */
  readonly usageRetentionDays: number;
  /** The workspace console. */
  readonly console: ConsoleSettings;
  /**
   * How the gateway function runs; the other functions always run on demand. Set it per deploy
   * with `-c compute=managed-instances`.
   * @default 'on-demand'
   */
  readonly compute: ComputeMode;
  /** The gateway on managed instances, used when {@link compute} is `managed-instances`. */
  readonly managedInstances: ManagedInstancesSettings;
  /**
   * The AWS regions the stage runs in, the first being its home region (docs/regions.md). None or
   * one: today's single stack, environment-agnostic, deployed to whichever region the CLI targets.
   * Two or more: a stack per region (`Sluice-<stage>-<region>`, the home one defining the global
   * tables) and the front door's stack. Set it per deploy with `-c regions=us-east-1,us-west-2`.
   * @default [] (one region)
   */
  readonly regions: readonly string[];
}

/** Settings chosen per deploy rather than written per stage (CDK context). */
export interface StageOverrides {
  /** See {@link StageSettings.alarmEmail}. */
  readonly alarmEmail?: string;
  /** See {@link ConsoleSettings.origin}. */
  readonly consoleOrigin?: string;
  /** See {@link StageSettings.compute}; checked against {@link COMPUTE_MODES}. */
  readonly compute?: string;
  /** See {@link StageSettings.regions}: the raw `-c regions=...` text, parsed by {@link parseRegions}. */
  readonly regions?: string;
}

/**
 * The per-key request rate of a deployed stage: 1,000 requests a second. A key's items on one key
 * slice take 6 write units per request (see docs/store.md), so its 8 key slices carry 1,333 req/s
 * and the rate, not the store, is what binds; below that, the store would be idle while keys were
 * refused. Local mode and tests keep the config's low default (600 a minute).
 */
const DEPLOYED_KEY_RATE_PER_MINUTE = 60_000;

/** Settings as written per stage; the derived names are filled in by {@link stageSettings}. */
type StageValues = Omit<StageSettings, 'name' | 'tablePrefix' | 'byokSecretPrefix' | 'alarmEmail' | 'compute' | 'regions'> & {
  readonly regions?: readonly string[];
};

/** Managed-instance values shared by stages unless one says otherwise (see {@link ManagedInstancesSettings}). */
const COMMON_MANAGED = {
  instanceTypes: ['c7g.large'],
  perEnvironmentConcurrency: 64,
  minEnvironments: 3,
  memoryMb: 2048,
  memoryGiBPerVcpu: 2,
  availabilityZones: 3,
} as const;

/** Alarm thresholds shared by stages unless one says otherwise. */
const COMMON_ALARMS = {
  settlementFailuresPer5Min: 1,
  expiredHoldsBacklog: 1,
  upstreamMinCallsPer5Min: 20,
  dynamoSystemErrorsPer5Min: 5,
  dynamoThrottlesPer5Min: 25,
  // A stream's whole duration is in LatencyMs; only a sustained p99 near the 540 s limit is news.
  latencyP99Ms: 300_000,
} as const;

// Memory: the gateway mostly waits on the provider while a stream runs, and Lambda bills
// GB-seconds for the whole stream (docs/cost.md). Each stage's gateway memory is the cheapest at
// which every latency target of the bench holds under Lambda's CPU share for that memory
// (DESIGN decision 15), measured by `npm run bench -- --cpu-share-only` on a quiet machine and
// written beside the value.
const VALUES: Readonly<Record<StageName, StageValues>> = {
  dev: {
    removalPolicy: RemovalPolicy.DESTROY,
    deletionProtection: false,
    keyRatePerMinute: DEPLOYED_KEY_RATE_PER_MINUTE,
    holdGraceMs: 60_000,
    logRetention: RetentionDays.ONE_WEEK,
    // Measured 2026-11-26 on the quiet 2-core bench machine (`npm run bench -- --cpu-share-only`,
    // load 4): 512 MB (0.289 vCPU) met every target (added p50 5.29 ms of 6.25, p99 11.9 of 16.8,
    // first byte p99 5.9 of 19.2, chunk gap p99 0.08 of 1; 2.15 ms CPU a request, 140 MiB RSS);
    // 256 MB missed added p50 (6.67 of 6.55) and p99 (55 of 23.6), 128 MB missed all five.
    // Again 2026-11-27 in a full `npm run bench` (load 2.4 to 1.3), after the provider client: 512 MB
    // met every target (added p50 5.85 of 7.03, p99 12.4 of 18.8; 2.10 ms CPU a request); 256 MB
    // met its p50s but missed added p99 (55 of 25.0) and first byte p99 (43 of 22.2).
    // Again in a full run (load 2.4 to 1.4) with V8's pretenuring off: 512 MB met every target
    // (added p50 4.52 of 5.63, p99 14.5 of 18.6; 1.91 ms CPU a request); 256 MB met its p50s but
    // missed added p99 (64 of 20.1) and first byte p99 (30 of 17.7).
    // Again 2026-11-28 in a full run with the gateway on Node 22, the deployed runtime
    // (`--gateway-node`), collecting between requests (load 3.9 to 1.8): 512 MB met every target
    // (added p50 5.24 of 5.98, p99 7.8 of 17.2; 1.39 ms CPU a request, 155 MiB); 256 MB missed
    // added p99 (26.9 of 23.8) and first byte p99 (21.1 of 20.2), and met every target in 3 of 5
    // `--cpu-share-only` runs: not yet every run, so 512 MB stays (docs/cost.md).
    // Again later that day with each size on its own gateway started with Lambda's heap options
    // for it (`lambdaNodeOptions`): 512 MB met every target (added p99 11.9 of 14.9, 136 MiB);
    // 256 MB missed a p99 in all eleven `--cpu-share-only` runs of that comparison (one process
    // or a gateway per size, with V8's defaults or Lambda's options, three with the provider
    // holding each reply 50 ms; docs/cost.md, "The heap"; docs/gateway.md, "What an idle
    // scavenge keeps").
    gatewayMemoryMb: 512,
    workerMemoryMb: 256,
    alarms: {
      gatewayErrorsPer5Min: 25,
      gatewayThrottlesPer5Min: 25,
      sweeperErrorsPer15Min: 5,
      aggregatorIteratorAgeMs: 15 * 60_000,
      deadLetterMessages: 1,
      ...COMMON_ALARMS,
      serverErrorsPer5Min: 25,
      upstreamErrorRatePercent: 50,
      firstByteP99Ms: 30_000,
    },
    usageRetentionDays: 30,
    console: { memoryMb: 512, sessionMinutes: 720, errorsPer5Min: 5 },
    // One NAT gateway: dev can live with an Availability Zone's outage cutting its egress.
    managedInstances: { ...COMMON_MANAGED, maxEnvironments: 6, maxVcpus: 12, natGateways: 1 },
  },
  stg: {
    removalPolicy: RemovalPolicy.DESTROY,
    deletionProtection: false,
    keyRatePerMinute: DEPLOYED_KEY_RATE_PER_MINUTE,
    holdGraceMs: 60_000,
    logRetention: RetentionDays.ONE_MONTH,
    // The cheapest memory meeting every target under its CPU share: 512 MB (measured, see dev).
    gatewayMemoryMb: 512,
    workerMemoryMb: 256,
    alarms: {
      gatewayErrorsPer5Min: 10,
      gatewayThrottlesPer5Min: 10,
      sweeperErrorsPer15Min: 3,
      aggregatorIteratorAgeMs: 10 * 60_000,
      deadLetterMessages: 1,
      ...COMMON_ALARMS,
      serverErrorsPer5Min: 10,
      upstreamErrorRatePercent: 25,
      firstByteP99Ms: 20_000,
    },
    usageRetentionDays: 90,
    console: { memoryMb: 512, sessionMinutes: 720, errorsPer5Min: 3 },
    managedInstances: { ...COMMON_MANAGED, maxEnvironments: 12, maxVcpus: 24, natGateways: 1 },
  },
  prod: {
    // Balances and usage are customers' money: a stack deletion must never take them along.
    removalPolicy: RemovalPolicy.RETAIN,
    deletionProtection: true,
    keyRatePerMinute: DEPLOYED_KEY_RATE_PER_MINUTE,
    holdGraceMs: 60_000,
    logRetention: RetentionDays.SIX_MONTHS,
    // The cheapest memory meeting every target under its CPU share: 512 MB (measured, see dev).
    gatewayMemoryMb: 512,
    workerMemoryMb: 512,
    alarms: {
      gatewayErrorsPer5Min: 5,
      gatewayThrottlesPer5Min: 1,
      sweeperErrorsPer15Min: 2,
      aggregatorIteratorAgeMs: 5 * 60_000,
      deadLetterMessages: 1,
      ...COMMON_ALARMS,
      serverErrorsPer5Min: 5,
      upstreamErrorRatePercent: 10,
      firstByteP99Ms: 15_000,
    },
    // Thirteen months: a full year back from any day of the current month, for statements and disputes.
    usageRetentionDays: 400,
    // Eight hours: a working day, after which an owner's session must prove the passkey again.
    console: { memoryMb: 512, sessionMinutes: 480, errorsPer5Min: 1 },
    // A NAT gateway per zone: a NAT gateway lives in one zone, and with one for all, that zone's
    // outage would cut every environment off from the providers.
    managedInstances: { ...COMMON_MANAGED, maxEnvironments: 48, maxVcpus: 96, natGateways: 3 },
  },
};

/**
 * An AWS region name as AWS spells them (`us-east-1`, `eu-central-2`, `ap-southeast-4`,
 * `us-gov-west-1`, `ca-west-1`); a typo such as `us-east1` or `US-EAST-1` is refused at synth
 * rather than at deploy.
 */
const REGION_NAME = /^[a-z]{2}(?:-gov|-iso[a-z]?)?-(?:north|south|east|west|central|northeast|northwest|southeast|southwest)-[1-9][0-9]?$/;

/**
 * Regions a stage may list at most: the front door's distribution has one origin per region, and
 * CloudFront allows 25 origins per distribution by default.
 */
export const MAX_REGIONS = 25;

/**
 * The region the front door's stack is deployed in whatever the stage's regions: CloudFront
 * publishes its metrics there (so the front door's alarms must live there) and takes its
 * certificates from there. The distribution itself is global and serves when us-east-1 does not.
 */
export const FRONT_DOOR_REGION = 'us-east-1';

/** Whether a stage spans two or more regions (and so gets global tables and a front door). */
export function isMultiRegion(stage: Pick<StageSettings, 'regions'>): boolean {
  return stage.regions.length >= 2;
}

/**
 * Parses `-c regions=us-east-1,us-west-2`: names separated by commas (spaces around them are
 * ignored), the first the home region. Empty or absent means the stage's own list. Throws
 * {@link StageConfigError} naming the bad entry: an empty entry, a name that is not a region's,
 * a region listed twice, or more than {@link MAX_REGIONS}.
 */
export function parseRegions(raw: string | undefined): readonly string[] | undefined {
  if (raw === undefined || raw.trim() === '') return undefined;
  const regions = raw.split(',').map((r) => r.trim());
  checkRegions(`-c regions=${raw}`, regions);
  return regions;
}

function checkRegions(label: string, regions: readonly string[]): void {
  if (regions.length > MAX_REGIONS) {
    throw new StageConfigError(`${label}: at most ${MAX_REGIONS} regions (CloudFront's origins per distribution), got ${regions.length}`);
  }
  const seen = new Set<string>();
  for (const region of regions) {
    if (region === '') throw new StageConfigError(`${label}: an empty region name; separate region names with single commas, e.g. -c regions=us-east-1,us-west-2`);
    if (!REGION_NAME.test(region)) {
      throw new StageConfigError(`${label}: ${JSON.stringify(region)} is not an AWS region name (lower case, like us-east-1 or eu-west-2)`);
    }
    if (seen.has(region)) throw new StageConfigError(`${label}: region ${region} is listed twice`);
    seen.add(region);
  }
}

/** Thrown for an unknown stage or an invalid setting, so `cdk synth` fails before any deploy. */
export class StageConfigError extends Error {
  override readonly name = 'StageConfigError';
}

/** Whether `value` names a deployable stage. */
export function isStageName(value: unknown): value is StageName {
  return typeof value === 'string' && (STAGE_NAMES as readonly string[]).includes(value);
}

/** Whether `value` names a compute mode. */
export function isComputeMode(value: unknown): value is ComputeMode {
  return typeof value === 'string' && (COMPUTE_MODES as readonly string[]).includes(value);
}

/** What follows from a stage's managed-instance settings. */
export interface ManagedInstancesShape {
  /** vCPUs of one environment: its memory over the memory per vCPU. */
  readonly vcpusPerEnvironment: number;
  /**
   * Node.js worker threads per environment (`AWS_LAMBDA_NODEJS_WORKER_COUNT`): one per vCPU. Each
   * worker is a copy of the gateway with its own caches and connection pools, and one event loop
   * carries all of its concurrent requests (the gateway never blocks it), so more workers than
   * vCPUs would only split the caches and multiply the memory (the runtime's own default is 8 per vCPU).
   */
  readonly workerThreads: number;
  /** Concurrent requests the stage can serve at most: max environments × requests per environment. */
  readonly maxConcurrentRequests: number;
}

/** The derived figures of {@link ManagedInstancesSettings} (the CDK and the cost model use the same). */
export function managedInstancesShape(m: ManagedInstancesSettings): ManagedInstancesShape {
  const vcpusPerEnvironment = m.memoryMb / (m.memoryGiBPerVcpu * 1024);
  return { vcpusPerEnvironment, workerThreads: vcpusPerEnvironment, maxConcurrentRequests: m.maxEnvironments * m.perEnvironmentConcurrency };
}

/** Graviton instance types of the C, M and R families (6th generation on), size large or above. */
const GRAVITON_INSTANCE_TYPE = /^[cmr][6-9]g[a-z]*\.(large|[1-9][0-9]?xlarge|xlarge|metal)$/;

/** Memory per vCPU AWS offers for an environment, GiB. */
const MEMORY_PER_VCPU_GIB: readonly number[] = [2, 4, 8];

function checkManagedInstances(stage: string, m: ManagedInstancesSettings): void {
  const at = `${stage}.managedInstances`;
  if (m.instanceTypes.length === 0 || new Set(m.instanceTypes).size !== m.instanceTypes.length) {
    throw new StageConfigError(`${at}.instanceTypes must list at least one instance type, each once`);
  }
  for (const type of m.instanceTypes) {
    if (!GRAVITON_INSTANCE_TYPE.test(type)) {
      throw new StageConfigError(`${at}.instanceTypes: ${JSON.stringify(type)} is not a Graviton (arm64) C, M or R instance of size large or above, which the arm64 gateway needs`);
    }
  }
  // AWS's bounds on PerExecutionEnvironmentMaxConcurrency.
  checkInt(`${at}.perEnvironmentConcurrency`, m.perEnvironmentConcurrency, 1, 1_600);
  if (!MEMORY_PER_VCPU_GIB.includes(m.memoryGiBPerVcpu)) {
    throw new StageConfigError(`${at}.memoryGiBPerVcpu must be one of ${MEMORY_PER_VCPU_GIB.join(', ')}, got ${String(m.memoryGiBPerVcpu)}`);
  }
  // Managed instances need 2 GB at least; Lambda's ceiling is 32 GB. Whole vCPUs only.
  checkInt(`${at}.memoryMb`, m.memoryMb, 2_048, 32_768);
  if (m.memoryMb % (m.memoryGiBPerVcpu * 1024) !== 0) {
    throw new StageConfigError(`${at}.memoryMb must be a whole number of vCPUs at ${m.memoryGiBPerVcpu} GiB each (a multiple of ${m.memoryGiBPerVcpu * 1024}), got ${m.memoryMb}`);
  }
  // Fewer than three would leave an Availability Zone without an environment (AWS starts three).
  checkInt(`${at}.minEnvironments`, m.minEnvironments, 3, 15_000);
  checkInt(`${at}.maxEnvironments`, m.maxEnvironments, m.minEnvironments, 15_000);
  const { vcpusPerEnvironment } = managedInstancesShape(m);
  // AWS's bounds on MaxVCpuCount, and room for the largest fleet of environments asked for.
  checkInt(`${at}.maxVcpus`, m.maxVcpus, Math.max(12, m.maxEnvironments * vcpusPerEnvironment), 15_000);
  checkInt(`${at}.availabilityZones`, m.availabilityZones, 2, 3);
  checkInt(`${at}.natGateways`, m.natGateways, 1, m.availabilityZones);
}

function checkInt(label: string, value: number, min: number, max: number): void {
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new StageConfigError(`${label} must be an integer in [${min}, ${max}], got ${String(value)}`);
  }
}

// Deliberately plain: one @, no spaces, a dot in the domain. SNS confirms the address itself.
const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,255}\.[^\s@.]{2,63}$/;

const RETENTION_VALUES: readonly number[] = Object.values(RetentionDays).filter(
  (v): v is number => typeof v === 'number',
);

/**
 * A deployed console's origin: https (WebAuthn and Secure cookies need a secure context, and only
 * localhost is one over http, which no deployed stage is), a host name (an RP ID cannot be an IP
 * address), and nothing after the host but an optional port.
 */
function checkConsoleOrigin(stage: string, origin: string): void {
  let url: URL | undefined;
  try {
    url = new URL(origin);
  } catch {
    url = undefined;
  }
  const ok =
    url !== undefined &&
    url.protocol === 'https:' &&
    url.origin === origin &&
    url.username === '' &&
    /^(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/.test(url.hostname);
  if (!ok) {
    throw new StageConfigError(`${stage}.console.origin must be https://<host name>[:port] with no path or trailing slash, got ${JSON.stringify(origin)}`);
  }
}

/**
 * Checks every number of a stage's settings and returns them frozen; throws
 * {@link StageConfigError} on the first bad value.
 */
export function validateStageSettings(settings: StageSettings): StageSettings {
  const s = settings;
  if (!isStageName(s.name)) throw new StageConfigError(`unknown stage ${JSON.stringify(s.name)}`);
  if (s.tablePrefix !== `sluice-${s.name}-`) {
    throw new StageConfigError(`tablePrefix must be sluice-${s.name}-, got ${JSON.stringify(s.tablePrefix)}`);
  }
  if (s.byokSecretPrefix !== `sluice/${s.name}/byok/`) {
    throw new StageConfigError(`byokSecretPrefix must be sluice/${s.name}/byok/, got ${JSON.stringify(s.byokSecretPrefix)}`);
  }
  checkInt(`${s.name}.keyRatePerMinute`, s.keyRatePerMinute, 1, 100_000);
  checkInt(`${s.name}.holdGraceMs`, s.holdGraceMs, 0, 3_600_000);
  // Lambda's own bounds on memory.
  checkInt(`${s.name}.gatewayMemoryMb`, s.gatewayMemoryMb, 128, 10_240);
  checkInt(`${s.name}.workerMemoryMb`, s.workerMemoryMb, 128, 10_240);
  if (!RETENTION_VALUES.includes(s.logRetention)) {
    throw new StageConfigError(`${s.name}.logRetention must be a RetentionDays value, got ${String(s.logRetention)}`);
  }
  // INFINITE would keep request metadata forever, against the privacy stance of DESIGN 11.
  if (s.logRetention === RetentionDays.INFINITE) {
    throw new StageConfigError(`${s.name}.logRetention must be finite`);
  }
  const a = s.alarms;
  checkInt(`${s.name}.alarms.gatewayErrorsPer5Min`, a.gatewayErrorsPer5Min, 1, 1_000_000);
  checkInt(`${s.name}.alarms.gatewayThrottlesPer5Min`, a.gatewayThrottlesPer5Min, 1, 1_000_000);
  checkInt(`${s.name}.alarms.sweeperErrorsPer15Min`, a.sweeperErrorsPer15Min, 1, 1_000);
  // DynamoDB Streams keep records 24 h; a lag alarm beyond that would fire after data loss.
  checkInt(`${s.name}.alarms.aggregatorIteratorAgeMs`, a.aggregatorIteratorAgeMs, 1_000, 24 * 3_600_000);
  checkInt(`${s.name}.alarms.deadLetterMessages`, a.deadLetterMessages, 1, 1_000_000);
  checkInt(`${s.name}.alarms.settlementFailuresPer5Min`, a.settlementFailuresPer5Min, 1, 1_000_000);
  checkInt(`${s.name}.alarms.expiredHoldsBacklog`, a.expiredHoldsBacklog, 1, 1_000_000);
  checkInt(`${s.name}.alarms.serverErrorsPer5Min`, a.serverErrorsPer5Min, 1, 1_000_000);
  checkInt(`${s.name}.alarms.upstreamErrorRatePercent`, a.upstreamErrorRatePercent, 1, 100);
  checkInt(`${s.name}.alarms.upstreamMinCallsPer5Min`, a.upstreamMinCallsPer5Min, 1, 1_000_000);
  checkInt(`${s.name}.alarms.dynamoSystemErrorsPer5Min`, a.dynamoSystemErrorsPer5Min, 1, 1_000_000);
  checkInt(`${s.name}.alarms.dynamoThrottlesPer5Min`, a.dynamoThrottlesPer5Min, 1, 1_000_000);
  // Both latencies are bounded by the request limit: a threshold above it could never fire.
  checkInt(`${s.name}.alarms.firstByteP99Ms`, a.firstByteP99Ms, 1, REQUEST_LIMIT.toMilliseconds());
  checkInt(`${s.name}.alarms.latencyP99Ms`, a.latencyP99Ms, 1, REQUEST_LIMIT.toMilliseconds());
  // TTL needs at least a day to mean anything; ten years is "keep", which is what rollups are for.
  checkInt(`${s.name}.usageRetentionDays`, s.usageRetentionDays, 1, 3_650);
  checkInt(`${s.name}.console.memoryMb`, s.console.memoryMb, 128, 10_240);
  // A week at most: a stolen session cookie must not outlive one.
  checkInt(`${s.name}.console.sessionMinutes`, s.console.sessionMinutes, 5, 7 * 24 * 60);
  checkInt(`${s.name}.console.errorsPer5Min`, s.console.errorsPer5Min, 1, 1_000_000);
  if (s.console.origin !== undefined) checkConsoleOrigin(s.name, s.console.origin);
  if (!isComputeMode(s.compute)) {
    throw new StageConfigError(`${s.name}.compute must be ${COMPUTE_MODES.join(' or ')}, got ${JSON.stringify(s.compute)}`);
  }
  checkManagedInstances(s.name, s.managedInstances);
  if (!Array.isArray(s.regions)) throw new StageConfigError(`${s.name}.regions must be a list of region names`);
  checkRegions(`${s.name}.regions`, s.regions);
  if (s.alarmEmail !== undefined && !EMAIL.test(s.alarmEmail)) {
    throw new StageConfigError(`${s.name}.alarmEmail must be an e-mail address, got ${JSON.stringify(s.alarmEmail)}`);
  }
  if (s.name === 'prod' && (s.removalPolicy !== RemovalPolicy.RETAIN || !s.deletionProtection)) {
    throw new StageConfigError('prod must retain its stateful resources and protect its tables from deletion');
  }
  return Object.freeze({
    ...s,
    alarms: Object.freeze({ ...a }),
    console: Object.freeze({ ...s.console }),
    managedInstances: Object.freeze({ ...s.managedInstances, instanceTypes: Object.freeze([...s.managedInstances.instanceTypes]) }),
    regions: Object.freeze([...s.regions]),
  });
}

/**
 * The validated settings of a stage. `undefined` (no `-c stage`) means {@link DEFAULT_STAGE};
 * anything else that is not `dev`, `stg` or `prod` throws {@link StageConfigError}, as does an
 * override that fails validation (a `compute` that is not one of {@link COMPUTE_MODES} among them).
 */
export function stageSettings(stage: unknown, overrides: StageOverrides = {}): StageSettings {
  const name = stage === undefined ? DEFAULT_STAGE : stage;
  if (!isStageName(name)) {
    throw new StageConfigError(
      `unknown stage ${JSON.stringify(name)}: pass -c stage=${STAGE_NAMES.join('|')} (default ${DEFAULT_STAGE})`,
    );
  }
  const compute = overrides.compute === undefined || overrides.compute === '' ? DEFAULT_COMPUTE : overrides.compute;
  if (!isComputeMode(compute)) {
    throw new StageConfigError(`unknown compute ${JSON.stringify(compute)}: pass -c compute=${COMPUTE_MODES.join('|')} (default ${DEFAULT_COMPUTE})`);
  }
  const regions = parseRegions(overrides.regions) ?? VALUES[name].regions ?? [];
  return validateStageSettings({
    name,
    tablePrefix: `sluice-${name}-`,
    byokSecretPrefix: `sluice/${name}/byok/`,
    ...VALUES[name],
    compute,
    regions,
    ...(overrides.alarmEmail === undefined || overrides.alarmEmail === '' ? {} : { alarmEmail: overrides.alarmEmail }),
    ...(overrides.consoleOrigin === undefined || overrides.consoleOrigin === ''
      ? {}
      : { console: { ...VALUES[name].console, origin: overrides.consoleOrigin } }),
  });
}
