/**
 * The source of the front door's CloudFront Function (viewer request, JavaScript runtime 2.0),
 * generated per stage from its regions (docs/regions.md, "The front door"). Plain strings, no CDK:
 * `test/cdk/regions-front-door.test.ts` runs the generated code against a stand-in `cloudfront` module.
 */

import { REGIONS_KEY } from '../lambdas/warden/handler-constants';

/** The KeyValueStore key the wardens write and the function reads: `{"<region>": "up" | "down" | "stale", …}`. */
export { REGIONS_KEY };

/** Origin answers on which CloudFront retries a GET, HEAD or OPTIONS on the group's second origin. */
export const FAILOVER_STATUS_CODES: readonly number[] = [500, 502, 503, 504];

/** The origin id of a region's gateway in the distribution. */
export function gatewayOriginId(region: string): string {
  return `gateway-${region}`;
}

/**
 * The function's code for `regions` (home first). Per request it reads the `regions` key, keeps
 * the regions not marked `down` or `stale` (all of them when none is left, or when the store cannot
 * be read: it fails open, never routing to nothing), picks one by a hash of the viewer's address
 * (so a client's requests keep to one region while it is healthy and clients spread over the
 * healthy ones), and sends the request to an origin group of that region and the next healthy one:
 * a POST goes to the chosen region only (CloudFront fails over GET, HEAD and OPTIONS alone), a
 * GET also fails over at the edge on a 5xx.
 */
export function routerCode(regions: readonly string[]): string {
  if (regions.length < 2) throw new Error('the front door needs two regions or more');
  const origins = Object.fromEntries(regions.map((r) => [r, gatewayOriginId(r)]));
  return [
    "import cf from 'cloudfront';",
    '',
    'const kvs = cf.kvs();',
    `const REGIONS = ${JSON.stringify(regions)};`,
    `const ORIGINS = ${JSON.stringify(origins)};`,
    `const FAILOVER = ${JSON.stringify(FAILOVER_STATUS_CODES)};`,
    '',
    'function spread(address, n) {',
    '  let h = 0;',
    '  for (let i = 0; i < address.length; i++) h = (h * 31 + address.charCodeAt(i)) % 1000003;',
    '  return h % n;',
    '}',
    '',
    'async function handler(event) {',
    '  let states = {};',
    '  try {',
    `    states = JSON.parse(await kvs.get('${REGIONS_KEY}')) || {};`,
    '  } catch (e) {',
    '    states = {};',
    '  }',
    "  let healthy = REGIONS.filter((r) => states[r] !== 'down' && states[r] !== 'stale');",
    '  if (healthy.length === 0) healthy = REGIONS;',
    "  const address = (event.viewer && event.viewer.ip) || '';",
    '  const first = healthy[spread(address, healthy.length)];',
    '  const next = healthy.filter((r) => r !== first)[0];',
    '  if (next === undefined) {',
    '    cf.selectRequestOriginById(ORIGINS[first]);',
    '  } else {',
    '    cf.createRequestOriginGroup({ originIds: [ORIGINS[first], ORIGINS[next]], failoverCriteria: { statusCodes: FAILOVER } });',
    '  }',
    '  return event.request;',
    '}',
    '',
  ].join('\n');
}
