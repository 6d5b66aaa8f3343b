/**
 * Which region a process runs as, and how the stage's regions split a workspace's balance and
 * limits (docs/regions.md). Every money item has one home region and only that region writes it:
 * the home region (the first listed) keeps today's keys, every other region's items carry
 * `@<region>` in their partition key (`regions-lens.ts` applies it). A stage with one region
 * (no `SLUICE_REGIONS`) is exactly today's: no tag, no lens, no `region` attribute.
 */
import { REGION_ENV } from '../shared/region-env';

/**
 * Environment variables a process reads to run as one region of a stage: the three the CDK sets
 * on every function of a stage with several regions (`lambdas/shared/region-env.ts`:
 * `SLUICE_REGIONS`, the home first; `SLUICE_REGION`, which defaults here to `AWS_REGION` when
 * listed, else the home; `SLUICE_HOME_REGION`, checked against the first listed), and the ledger's
 * own settings.
 */
export const REGION_SETTINGS_ENV = {
  ...REGION_ENV,
  /** Each region's weight (its share of every limit), comma-separated integers in the regions' order. @default equal */
  weights: 'SLUICE_REGION_WEIGHTS',
  /** How long an admission short in its region waits for an urgent transfer, milliseconds. @default 2000 */
  transferWaitMs: 'SLUICE_TRANSFER_WAIT_MS',
} as const;

/** The stage's regions as one process sees them. */
export interface RegionSetup {
  /** Every region, the home region first. */
  readonly regions: readonly string[];
  /** The region this process runs as (one of `regions`). */
  readonly region: string;
  /** Each region's weight, in `regions`' order (positive integers). */
  readonly weights: readonly number[];
  /** Bound on an urgent transfer's wait at admission, milliseconds. */
  readonly transferWaitMs: number;
}

/** Thrown at cold start on a region setting that cannot be right. */
export class RegionConfigError extends Error {
  override readonly name = 'RegionConfigError';
}

const REGION_NAME = /^[a-z0-9-]{1,32}$/;

/**
 * The region setup from the environment; undefined for a one-region stage (today's behaviour and
 * keys). Throws {@link RegionConfigError} on a bad value, so a cold start fails loudly.
 */
export function regionSetupFromEnv(env: NodeJS.ProcessEnv = process.env): RegionSetup | undefined {
  const raw = env[REGION_ENV.regions];
  if (raw === undefined || raw.trim() === '') {
    const own = env[REGION_ENV.region];
    if (own !== undefined && own !== '') throw new RegionConfigError(`${REGION_ENV.region} is set without ${REGION_ENV.regions}`);
    return undefined;
  }
  const regions = raw.split(',').map((r) => r.trim());
  if (regions.some((r) => !REGION_NAME.test(r)) || new Set(regions).size !== regions.length) {
    throw new RegionConfigError(`${REGION_ENV.regions} must list distinct region names, got ${JSON.stringify(raw)}`);
  }
  const home = env[REGION_ENV.homeRegion];
  if (home !== undefined && home !== '' && home !== regions[0]) throw new RegionConfigError(`${REGION_ENV.homeRegion} (${home}) must be the first of ${REGION_ENV.regions}`);
  const wanted = env[REGION_ENV.region] || (env.AWS_REGION !== undefined && regions.includes(env.AWS_REGION) ? env.AWS_REGION : regions[0]);
  if (wanted === undefined || !regions.includes(wanted)) throw new RegionConfigError(`${REGION_ENV.region} must be one of ${regions.join(', ')}`);
  const rawWeights = env[REGION_SETTINGS_ENV.weights];
  const weights = rawWeights === undefined || rawWeights === '' ? regions.map(() => 1) : rawWeights.split(',').map((w) => Number(w.trim()));
  if (weights.length !== regions.length || weights.some((w) => !Number.isSafeInteger(w) || w < 1)) {
    throw new RegionConfigError(`${REGION_SETTINGS_ENV.weights} must give a positive integer per region, got ${JSON.stringify(rawWeights)}`);
  }
  const wait = Number(env[REGION_SETTINGS_ENV.transferWaitMs] ?? 2000);
  if (!Number.isSafeInteger(wait) || wait < 0 || wait > 10_000) throw new RegionConfigError(`${REGION_SETTINGS_ENV.transferWaitMs} must be 0..10000`);
  return Object.freeze({ regions: Object.freeze(regions), region: wanted, weights: Object.freeze(weights), transferWaitMs: wait });
}

/** The same stage seen as another of its regions (tests and local mode run several in one process). */
export function asRegion(setup: RegionSetup, region: string): RegionSetup {
  if (!setup.regions.includes(region)) throw new RegionConfigError(`${region} is not one of ${setup.regions.join(', ')}`);
  return { ...setup, region };
}

/** The stage's home region: its items keep today's keys. */
export function homeRegion(setup: RegionSetup): string {
  return setup.regions[0] as string;
}

/** What a region's items carry in their partition keys: nothing in the home region, `@<region>` elsewhere. */
export function regionTag(setup: RegionSetup, region: string = setup.region): string {
  return region === homeRegion(setup) ? '' : `@${region}`;
}

/** The other regions of the stage. */
export function peersOf(setup: RegionSetup, region: string = setup.region): string[] {
  return setup.regions.filter((r) => r !== region);
}

/**
 * Region `region`'s share of a limit `total` (micro-units, requests): `total × w_r / Σw`,
 * rounded down, with what rounding leaves given one unit each to the first regions in order, so
 * the shares of every region always sum to exactly `total` and every region derives the same
 * split alone. A share of an unbounded figure (a safe-integer sentinel) is the figure itself.
 */
export function regionShare(setup: RegionSetup, total: number, region: string = setup.region): number {
  if (total >= Number.MAX_SAFE_INTEGER / 1024) return total;
  const sum = setup.weights.reduce((a, b) => a + b, 0);
  const floors = setup.weights.map((w) => Math.floor((total * w) / sum));
  let left = total - floors.reduce((a, b) => a + b, 0);
  const shares = floors.map((f) => {
    if (left <= 0) return f;
    left -= 1;
    return f + 1;
  });
  return shares[setup.regions.indexOf(region)] ?? 0;
}
