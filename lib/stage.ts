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
}

/** Settings as written per stage; the derived names are filled in by {@link stageSettings}. */
type StageValues = Omit<StageSettings, 'name' | 'tablePrefix' | 'byokSecretPrefix'>;

// Memory: the gateway mostly waits on the provider while a stream runs, and Lambda bills
// GB-seconds for the whole stream, so it gets enough for a 6 MB body and no more.
const VALUES: Readonly<Record<StageName, StageValues>> = {
  dev: {
    removalPolicy: RemovalPolicy.DESTROY,
    deletionProtection: false,
    keyRatePerMinute: 600,
    holdGraceMs: 60_000,
    logRetention: RetentionDays.ONE_WEEK,
    gatewayMemoryMb: 512,
    workerMemoryMb: 256,
    alarms: {
      gatewayErrorsPer5Min: 25,
      gatewayThrottlesPer5Min: 25,
      sweeperErrorsPer15Min: 5,
      aggregatorIteratorAgeMs: 15 * 60_000,
      deadLetterMessages: 1,
    },
  },
  stg: {
    removalPolicy: RemovalPolicy.DESTROY,
    deletionProtection: false,
    keyRatePerMinute: 600,
    holdGraceMs: 60_000,
    logRetention: RetentionDays.ONE_MONTH,
    gatewayMemoryMb: 1024,
    workerMemoryMb: 256,
    alarms: {
      gatewayErrorsPer5Min: 10,
      gatewayThrottlesPer5Min: 10,
      sweeperErrorsPer15Min: 3,
      aggregatorIteratorAgeMs: 10 * 60_000,
      deadLetterMessages: 1,
    },
  },
  prod: {
    // Balances and usage are customers' money: a stack deletion must never take them along.
    removalPolicy: RemovalPolicy.RETAIN,
    deletionProtection: true,
    keyRatePerMinute: 600,
    holdGraceMs: 60_000,
    logRetention: RetentionDays.SIX_MONTHS,
    gatewayMemoryMb: 1024,
    workerMemoryMb: 512,
    alarms: {
      gatewayErrorsPer5Min: 5,
      gatewayThrottlesPer5Min: 1,
      sweeperErrorsPer15Min: 2,
      aggregatorIteratorAgeMs: 5 * 60_000,
      deadLetterMessages: 1,
    },
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

const RETENTION_VALUES: readonly number[] = Object.values(RetentionDays).filter(
  (v): v is number => typeof v === 'number',
);

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
  if (s.name === 'prod' && (s.removalPolicy !== RemovalPolicy.RETAIN || !s.deletionProtection)) {
    throw new StageConfigError('prod must retain its stateful resources and protect its tables from deletion');
  }
  return Object.freeze({ ...s, alarms: Object.freeze({ ...a }) });
}

/**
 * The validated settings of a stage. `undefined` (no `-c stage`) means {@link DEFAULT_STAGE};
 * anything else that is not `dev`, `stg` or `prod` throws {@link StageConfigError}.
 */
export function stageSettings(stage: unknown): StageSettings {
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
  });
}
