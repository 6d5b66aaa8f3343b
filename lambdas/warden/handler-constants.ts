/** The front door's KeyValueStore key the wardens write and the CloudFront Function reads (`lib/front-door-function.ts` generates the function with the same key; a test holds them equal). */
export const REGIONS_KEY = 'regions';

/**
 * The configuration home's heartbeat (docs/regions.md, "Configuration"): one item of the
 * workspaces table (where the pause and every workspace's settings live) that only the home's
 * warden writes, every probe round, with the time it wrote it (`at`, epoch milliseconds). Each
 * other region's warden reads it in its own replica: its age there is how far replication from the
 * home lags. No listing reads it (they filter on their own sort keys).
 */
export const HEARTBEAT_KEY = { pk: 'STAGE', sk: 'HEARTBEAT' } as const;
