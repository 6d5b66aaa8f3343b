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
}

/** Settings chosen per deploy rather than written per stage (CDK context). */
export interface StageOverrides {
  /** See {@link StageSettings.alarmEmail}. */
  readonly alarmEmail?: string;
  /** See {@link ConsoleSettings.origin}. */
  readonly consoleOrigin?: string;
}

/**
 * The per-key request rate of a deployed stage: 1,000 requests a second. A key's items on one key
 * slice take 6 write units per request (see docs/store.md), so its 8 key slices carry 1,333 req/s
 * and the rate, not the store, is what binds; below that, the store would be idle while keys were
 * refused. Local mode and tests keep the config's low default (600 a minute).
 */
const DEPLOYED_KEY_RATE_PER_MINUTE = 60_000;

/** Settings as written per stage; the derived names are filled in by {@link stageSettings}. */
type StageValues = Omit<StageSettings, 'name' | 'tablePrefix' | 'byokSecretPrefix' | 'alarmEmail'>;

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
// written beside the value. Not yet chosen that way: the values below predate the measurement.
const VALUES: Readonly<Record<StageName, StageValues>> = {
  dev: {
    removalPolicy: RemovalPolicy.DESTROY,
    deletionProtection: false,
    keyRatePerMinute: DEPLOYED_KEY_RATE_PER_MINUTE,
    holdGraceMs: 60_000,
    logRetention: RetentionDays.ONE_WEEK,
    // To be set from the CPU share on a quiet machine (a loaded smoke run, 2026-11-26: 512 MB
    // missed the added-latency, first-byte and chunk-gap targets; so did 1,024 MB on that machine).
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
  },
  stg: {
    removalPolicy: RemovalPolicy.DESTROY,
    deletionProtection: false,
    keyRatePerMinute: DEPLOYED_KEY_RATE_PER_MINUTE,
    holdGraceMs: 60_000,
    logRetention: RetentionDays.ONE_MONTH,
    // To be set from the CPU share on a quiet machine (see dev).
    gatewayMemoryMb: 1024,
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
  },
  prod: {
    // Balances and usage are customers' money: a stack deletion must never take them along.
    removalPolicy: RemovalPolicy.RETAIN,
    deletionProtection: true,
    keyRatePerMinute: DEPLOYED_KEY_RATE_PER_MINUTE,
    holdGraceMs: 60_000,
    logRetention: RetentionDays.SIX_MONTHS,
    // To be set from the CPU share on a quiet machine (see dev).
    gatewayMemoryMb: 1024,
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
  },
};

/** Thrown for an unknown stage or an invalid setting, so `cdk synth` fails before any deploy. */
export class StageConfigError extends Error {
  override readonly name = 'StageConfigError';
}

/** Whether `value` names a deployable stage. */
export function isStageName(value: unknown): value is StageName {
  return typeof value === 'string' && (STAGE_NAMES as readonly string[]).includes(value);
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
  if (s.alarmEmail !== undefined && !EMAIL.test(s.alarmEmail)) {
    throw new StageConfigError(`${s.name}.alarmEmail must be an e-mail address, got ${JSON.stringify(s.alarmEmail)}`);
  }
  if (s.name === 'prod' && (s.removalPolicy !== RemovalPolicy.RETAIN || !s.deletionProtection)) {
    throw new StageConfigError('prod must retain its stateful resources and protect its tables from deletion');
  }
  return Object.freeze({ ...s, alarms: Object.freeze({ ...a }), console: Object.freeze({ ...s.console }) });
}

/**
 * The validated settings of a stage. `undefined` (no `-c stage`) means {@link DEFAULT_STAGE};
 * anything else that is not `dev`, `stg` or `prod` throws {@link StageConfigError}, as does an
 * override that fails validation.
 */
export function stageSettings(stage: unknown, overrides: StageOverrides = {}): StageSettings {
  const name = stage === undefined ? DEFAULT_STAGE : stage;
  if (!isStageName(name)) {
    throw new StageConfigError(
      `unknown stage ${JSON.stringify(name)}: pass -c stage=${STAGE_NAMES.join('|')} (default ${DEFAULT_STAGE})`,
    );
  }
  return validateStageSettings({
    name,
    tablePrefix: `sluice-${name}-`,
    byokSecretPrefix: `sluice/${name}/byok/`,
    ...VALUES[name],
    ...(overrides.alarmEmail === undefined || overrides.alarmEmail === '' ? {} : { alarmEmail: overrides.alarmEmail }),
    ...(overrides.consoleOrigin === undefined || overrides.consoleOrigin === ''
      ? {}
      : { console: { ...VALUES[name].console, origin: overrides.consoleOrigin } }),
  });
}
