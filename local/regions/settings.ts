/**
 * The settings of `npm run start:regions` and the names of the variables it gives each region's
 * process. Kept apart from the entry points, which start running when imported.
 */

import { REGION_ENV as RUNTIME_REGION_ENV } from '../../lambdas/shared/region-env';

/** The variable naming the region a process serves (the runtime's, `lambdas/shared/region-env.ts`). */
export const REGION_ENV = RUNTIME_REGION_ENV.region;
/** The variable listing the stage's regions, comma-separated, the home region first. */
export const REGIONS_ENV = RUNTIME_REGION_ENV.regions;
/** The variable naming the stage's home region (the first of the regions). */
export const HOME_REGION_ENV = RUNTIME_REGION_ENV.homeRegion;
/** The replicator's lag, milliseconds (500 by default). */
export const LAG_ENV = 'SLUICE_REPLICATION_LAG_MS';
/** `spread` (by default: one region per client connection) or `ordered` (the first healthy region). */
export const ROUTING_ENV = 'SLUICE_FRONT_DOOR_ROUTING';

/** How each region's DynamoDB Local compiles: `full` (HotSpot's default) or `quick` (see `jit` in `../dynamo-local.ts`). */
export const JIT_ENV = 'SLUICE_DYNAMODB_JIT';

/** Two regions, as the example stage lists them; the first is the home region. */
export const DEFAULT_REGIONS: readonly string[] = ['us-east-1', 'us-west-2'];
export const DEFAULT_LAG_MS = 500;

/** The regions from `SLUICE_REGIONS` (two or more distinct names of letters, digits and dashes). */
export function regionsFrom(env: Readonly<Record<string, string | undefined>>): string[] {
  const raw = env[REGIONS_ENV];
  if (raw === undefined || raw.trim() === '') return [...DEFAULT_REGIONS];
  const names = raw.split(',').map((name) => name.trim());
  if (names.length < 2 || new Set(names).size !== names.length || names.some((name) => !/^[a-z][a-z0-9-]{0,30}$/.test(name))) {
    throw new Error(`${REGIONS_ENV} must list two or more distinct region names (a-z, 0-9, -), comma-separated; got ${JSON.stringify(raw)}`);
  }
  return names;
}

/** The replicator's lag from `SLUICE_REPLICATION_LAG_MS`. */
export function lagFrom(env: Readonly<Record<string, string | undefined>>): number {
  const raw = env[LAG_ENV];
  if (raw === undefined || raw === '') return DEFAULT_LAG_MS;
  const ms = Number(raw);
  if (!Number.isSafeInteger(ms) || ms < 0 || ms > 600_000) throw new Error(`${LAG_ENV} must be 0 to 600000 milliseconds, got ${JSON.stringify(raw)}`);
  return ms;
}

/**
 * The regions' DynamoDB Locals' compilation from `SLUICE_DYNAMODB_JIT`: `full` by default, for a
 * run that lasts; `quick` (C1 only) for one of a few minutes, such as a test's.
 */
export function jitFrom(env: Readonly<Record<string, string | undefined>>): 'quick' | 'full' {
  const raw = env[JIT_ENV];
  if (raw === undefined || raw === '' || raw === 'full') return 'full';
  if (raw === 'quick') return 'quick';
  throw new Error(`${JIT_ENV} must be full or quick, got ${JSON.stringify(raw)}`);
}

/** The front door's routing from `SLUICE_FRONT_DOOR_ROUTING`. */
export function routingFrom(env: Readonly<Record<string, string | undefined>>): 'spread' | 'ordered' {
  const raw = env[ROUTING_ENV];
  if (raw === undefined || raw === '' || raw === 'spread') return 'spread';
  if (raw === 'ordered') return 'ordered';
  throw new Error(`${ROUTING_ENV} must be spread or ordered, got ${JSON.stringify(raw)}`);
}

/** What `.sluice/regions/state.json` holds while `start:regions` runs (tests and operators read it). */
export interface RegionsStateFile {
  readonly pid: number;
  /** The front door's base URL with `/v1`: the one address clients use. */
  readonly baseUrl: string | null;
  readonly adminUrl: string | null;
  readonly consoleUrl: string | null;
  readonly simulatorUrl: string | null;
  readonly tablePrefix: string;
  readonly lagMs: number;
  /** In order; the first is the home region (configuration, management API, console). */
  readonly regions: readonly RegionState[];
}

/** One region's processes; a PID is null while that part is down. */
export interface RegionState {
  readonly name: string;
  readonly endpoint: string;
  readonly dataDir: string;
  /** Its DynamoDB Local (Java; leader of its own process group). */
  readonly dynamodbPid: number | null;
  /** Its gateway, aggregator and sweeper (Node; leader of its own process group). */
  readonly gatewayPid: number | null;
  readonly gatewayUrl: string | null;
}
