/**
 * The environment a function of a multi-region stage gets beside `ENV` (`config.ts`): which
 * region it runs in, which is the stage's home, and every region of the stage (docs/regions.md).
 * A one-region stage sets none of them; readers treat their absence as "one region, the home".
 */
export const REGION_ENV = {
  /** The region this function runs in and writes for (its items carry this region's tag). */
  region: 'SLUICE_REGION',
  /** The stage's home region: its items keep today's keys, and it is the configuration home by default. */
  homeRegion: 'SLUICE_HOME_REGION',
  /** Every region of the stage, comma-separated, home first (readers sum every region's items). */
  regions: 'SLUICE_REGIONS',
} as const;
