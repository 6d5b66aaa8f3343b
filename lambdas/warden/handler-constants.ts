/** The front door's KeyValueStore key the wardens write and the CloudFront Function reads (`lib/front-door-function.ts` generates the function with the same key; a test holds them equal). */
export const REGIONS_KEY = 'regions';

/**
 * The configuration home's heartbeat (docs/regions.md, "Configuration"): items of the workspaces
 * table (where the pause, every workspace's settings and the configuration home's record live),
 * one per region, each written only by that region's warden while that region is the
 * configuration home, every probe round, with the time it wrote it (`at`, epoch milliseconds) and
 * its region (`region`). Every other warden reads the configuration home's item in its own
 * replica: its age there is how far replication from the home lags. One writer per item (the
 * stage's rule, docs/regions.md): an old home that has not yet heard of a move, still writing as
 * the home, writes its own item and never overwrites the moved home's. The stage's home region's
 * item keeps the key written before the heartbeat followed the configuration home
 * (`STAGE` / `HEARTBEAT`); another region's carries its tag (`STAGE` / `HEARTBEAT@<region>`). No
 * listing reads them (they filter on their own sort keys).
 */
export const HEARTBEAT_KEY = { pk: 'STAGE', sk: 'HEARTBEAT' } as const;

/** The key of `region`'s heartbeat item on a stage whose home region is `stageHome`. */
export function heartbeatKey(region: string, stageHome: string): { readonly pk: string; readonly sk: string } {
  return region === stageHome ? HEARTBEAT_KEY : { pk: HEARTBEAT_KEY.pk, sk: `${HEARTBEAT_KEY.sk}@${region}` };
}
