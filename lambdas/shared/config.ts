/**
 * Runtime configuration of the functions, read and validated once at cold start into a frozen
 * object. CDK sets these variables on the functions; local mode sets them on its own process.
 */

/** Environment variable names, the single source for CDK, local mode and the functions. */
export const ENV = {
  stage: 'SLUICE_STAGE',
  tablePrefix: 'SLUICE_TABLE_PREFIX',
  /** Local mode only: DynamoDB Local's endpoint. */
  dynamoEndpoint: 'SLUICE_DYNAMODB_ENDPOINT',
  /** Per-key request rate, requests per minute. */
  keyRatePerMinute: 'SLUICE_KEY_RATE_PER_MINUTE',
  /** How long key, workspace and profile reads are cached in memory, milliseconds. */
  cacheTtlMs: 'SLUICE_CACHE_TTL_MS',
  /** How long catalog and provider reads are cached in memory, milliseconds. */
  catalogCacheTtlMs: 'SLUICE_CATALOG_CACHE_TTL_MS',
  /** Request duration limit, milliseconds (SPEC: 540 s). */
  requestLimitMs: 'SLUICE_REQUEST_LIMIT_MS',
  /** First-byte timeout of each attempt of a route except the last, milliseconds. */
  attemptTimeoutMs: 'SLUICE_ATTEMPT_TIMEOUT_MS',
  /** Grace after the request limit before the sweeper may settle a hold, milliseconds. */
  holdGraceMs: 'SLUICE_HOLD_GRACE_MS',
  /** `secrets-manager` when deployed, `env` in local mode (provider keys from variables). */
  secretSource: 'SLUICE_SECRET_SOURCE',
  /** Base URL of the local upstream simulator (provider `local`). */
  localUpstreamUrl: 'SLUICE_LOCAL_UPSTREAM_URL',
  /** Days a usage row is kept before DynamoDB TTL collects it; unset keeps rows for good. */
  usageRetentionDays: 'SLUICE_USAGE_RETENTION_DAYS',
} as const;

export interface RuntimeConfig {
  readonly stage: string;
  readonly tablePrefix: string;
  readonly dynamoEndpoint?: string;
  readonly keyRatePerMinute: number;
  readonly cacheTtlMs: number;
  readonly catalogCacheTtlMs: number;
  readonly requestLimitMs: number;
  readonly holdGraceMs: number;
  readonly attemptTimeoutMs: number;
  readonly secretSource: 'secrets-manager' | 'env';
  /** Days a usage row is kept (its `ttl` is written that far after settlement); absent keeps it for good. */
  readonly usageRetentionDays?: number;
}

function int(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < min) throw new Error(`${name} must be an integer >= ${min}, got ${JSON.stringify(raw)}`);
  return n;
}

/** Reads and validates the configuration; throws on a bad value so a cold start fails loudly. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): RuntimeConfig {
  const stage = env[ENV.stage] ?? 'local';
  const tablePrefix = env[ENV.tablePrefix] ?? `sluice-${stage}-`;
  const secretSource = env[ENV.secretSource] ?? (stage === 'local' ? 'env' : 'secrets-manager');
  if (secretSource !== 'env' && secretSource !== 'secrets-manager') {
    throw new Error(`${ENV.secretSource} must be env or secrets-manager`);
  }
  return Object.freeze({
    stage,
    tablePrefix,
    dynamoEndpoint: env[ENV.dynamoEndpoint] || undefined,
    keyRatePerMinute: int(env, ENV.keyRatePerMinute, 600, 1),
    cacheTtlMs: int(env, ENV.cacheTtlMs, 5_000, 0),
    catalogCacheTtlMs: int(env, ENV.catalogCacheTtlMs, 60_000, 0),
    requestLimitMs: int(env, ENV.requestLimitMs, 540_000, 1),
    holdGraceMs: int(env, ENV.holdGraceMs, 60_000, 0),
    attemptTimeoutMs: int(env, ENV.attemptTimeoutMs, 120_000, 1),
    secretSource,
    ...(env[ENV.usageRetentionDays] ? { usageRetentionDays: int(env, ENV.usageRetentionDays, 0, 1) } : {}),
  });
}
