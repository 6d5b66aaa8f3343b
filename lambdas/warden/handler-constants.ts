/** The front door's KeyValueStore key the wardens write and the CloudFront Function reads (`lib/front-door-function.ts` generates the function with the same key; a test holds them equal). */
export const REGIONS_KEY = 'regions';
