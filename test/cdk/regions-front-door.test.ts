/**
 * The front door's CloudFront Function, as generated for a stage (lib/front-door-function.ts), run
 * against a stand-in of CloudFront's `cloudfront` module (its KeyValueStore handle and origin
 * helpers): which origin a request goes to for each set of health flags, failing open, and the
 * wardens' state machine and store merging (lambdas/warden/health.ts).
 */
import { FAILOVER_STATUS_CODES, REGIONS_KEY, gatewayOriginId, routerCode } from '../../lib/front-door-function';
import { HEARTBEAT_STALE_MS, PROBE_THRESHOLD, afterProbe, mergeStates, ownEntryToWrite, ownState, parseStates, parseWardenConfig, probeOk, type RegionHealth } from '../../lambdas/warden/health';
import { REGIONS_KEY as WARDEN_KEY } from '../../lambdas/warden/handler-constants';

interface Routed {
  readonly selected?: string;
  readonly group?: { originIds: string[]; failoverCriteria: { statusCodes: number[] } };
  readonly request: unknown;
}

/** Runs the generated code once with the store holding `stored` (or failing to read). */
async function route(regions: readonly string[], stored: string | Error | undefined, viewerIp = '198.51.100.7'): Promise<Routed> {
  const calls: { selected?: string; group?: Routed['group'] } = {};
  const cf = {
    kvs: () => ({
      get: (key: string): Promise<string> => {
        if (key !== REGIONS_KEY) return Promise.reject(new Error(`unexpected key ${key}`));
        if (stored instanceof Error) return Promise.reject(stored);
        if (stored === undefined) return Promise.reject(new Error('key not found'));
        return Promise.resolve(stored);
      },
    }),
    selectRequestOriginById: (id: string): void => {
      calls.selected = id;
    },
    createRequestOriginGroup: (group: Routed['group']): void => {
      calls.group = group;
    },
  };
  const source = routerCode(regions).replace("import cf from 'cloudfront';", '');
  // The function's module scope, with `cf` given in place of the import.
  const factory = new Function('cf', `${source}\nreturn handler;`) as (c: typeof cf) => (event: unknown) => Promise<unknown>;
  const request = { method: 'POST', uri: '/v1/chat/completions' };
  const out = await factory(cf)({ request, viewer: { ip: viewerIp } });
  return { ...calls, request: out };
}

const TWO = ['us-east-1', 'us-west-2'];
const THREE = ['us-east-1', 'us-west-2', 'eu-west-1'];

describe('the front door function', () => {
  it('sends a request to a healthy region, with the next healthy one as the edge failover for GETs', async () => {
    const r = await route(TWO, JSON.stringify({ 'us-east-1': 'up', 'us-west-2': 'up' }));
    expect(r.selected).toBeUndefined();
    expect(r.group?.failoverCriteria.statusCodes).toEqual([...FAILOVER_STATUS_CODES]);
    expect([...(r.group?.originIds ?? [])].sort()).toEqual(TWO.map(gatewayOriginId).sort());
    expect(r.request).toEqual({ method: 'POST', uri: '/v1/chat/completions' });
  });

  it('never sends a request to a region marked down or stale', async () => {
    for (const ip of ['198.51.100.1', '198.51.100.2', '203.0.113.9', '2001:db8::1']) {
      const down = await route(TWO, JSON.stringify({ 'us-east-1': 'down', 'us-west-2': 'up' }), ip);
      expect(down.group).toBeUndefined();
      expect(down.selected).toBe(gatewayOriginId('us-west-2'));
      const stale = await route(THREE, JSON.stringify({ 'us-west-2': 'stale', 'eu-west-1': 'down' }), ip);
      expect(stale.selected).toBe(gatewayOriginId('us-east-1'));
      const oneDown = await route(THREE, JSON.stringify({ 'us-west-2': 'down' }), ip);
      expect(oneDown.group?.originIds).not.toContain(gatewayOriginId('us-west-2'));
      expect(oneDown.group?.originIds).toHaveLength(2);
    }
  });

  it('spreads viewers over the healthy regions, each viewer keeping to one', async () => {
    const firsts = new Set<string>();
    for (let i = 0; i < 40; i += 1) {
      const ip = `198.51.100.${i}`;
      const a = await route(THREE, '{}', ip);
      const b = await route(THREE, '{}', ip);
      expect(a.group?.originIds[0]).toBe(b.group?.originIds[0]);
      firsts.add(String(a.group?.originIds[0]));
    }
    expect(firsts.size).toBe(3);
  });

  it('fails open: every region is used when the store cannot be read, has no key, holds garbage, or marks every region down', async () => {
    for (const stored of [new Error('store unavailable'), undefined, 'not json', JSON.stringify({ 'us-east-1': 'down', 'us-west-2': 'down' })]) {
      const r = await route(TWO, stored);
      expect(r.group).toBeDefined();
      expect([...(r.group?.originIds ?? [])].sort()).toEqual(TWO.map(gatewayOriginId).sort());
    }
  });

  it('is generated for two regions or more only', () => {
    expect(() => routerCode(['us-east-1'])).toThrow(/two regions or more/);
  });
});

describe('the warden', () => {
  const up: RegionHealth = { state: 'up', streak: 0 };

  it('marks a region down after three failed probes in a row, and up after three good ones', () => {
    expect(PROBE_THRESHOLD).toBe(3);
    let h = up;
    h = afterProbe(h, false);
    h = afterProbe(h, false);
    expect(h).toEqual({ state: 'up', streak: 2 });
    // A good probe between failures starts the count again.
    h = afterProbe(h, true);
    expect(h).toEqual(up);
    for (let i = 0; i < 3; i += 1) h = afterProbe(h, false);
    expect(h).toEqual({ state: 'down', streak: 0 });
    h = afterProbe(afterProbe(h, true), true);
    expect(h.state).toBe('down');
    h = afterProbe(h, true);
    expect(h).toEqual({ state: 'up', streak: 0 });
  });

  it('counts a 5xx or no answer as a failure, any answer below 500 (a refused probe key included) as the gateway answering', () => {
    expect(probeOk(undefined)).toBe(false);
    expect(probeOk(500)).toBe(false);
    expect(probeOk(503)).toBe(false);
    expect(probeOk(200)).toBe(true);
    expect(probeOk(401)).toBe(true);
    expect(probeOk(429)).toBe(true);
  });

  it('writes only the regions it changed over what the store holds, so two wardens keep each other\'s changes', () => {
    expect(mergeStates({ 'us-east-1': 'up', 'us-west-2': 'stale' }, { 'us-east-1': 'down' })).toBe('{"us-east-1":"down","us-west-2":"stale"}');
    // A region's stale mark is cleared by its own warden only; another's probes may still mark it down.
    expect(mergeStates({ 'us-east-1': 'up', 'us-west-2': 'stale' }, { 'us-west-2': 'up' }, 'us-east-1')).toBe('{"us-east-1":"up","us-west-2":"stale"}');
    expect(mergeStates({ 'us-east-1': 'up', 'us-west-2': 'stale' }, { 'us-west-2': 'up' }, 'us-west-2')).toBe('{"us-east-1":"up","us-west-2":"up"}');
    expect(mergeStates({ 'us-east-1': 'up', 'us-west-2': 'stale' }, { 'us-west-2': 'down' }, 'us-east-1')).toBe('{"us-east-1":"up","us-west-2":"down"}');
    expect(parseStates('{"us-east-1":"down","x":"bogus","us-west-2":"up"}')).toEqual({ 'us-east-1': 'down', 'us-west-2': 'up' });
    expect(parseStates('[1]')).toEqual({});
    expect(parseStates('nope')).toEqual({});
    expect(parseStates(undefined)).toEqual({});
  });

  it('marks its own region stale when the configuration home\'s heartbeat is older than 30 s there, and only then', () => {
    const view = { probed: 'up', isHome: false, homeUp: true, heartbeatAgeMs: 5_000 } as const;
    expect(HEARTBEAT_STALE_MS).toBe(30_000);
    expect(ownState(view)).toBe('up');
    expect(ownState({ ...view, heartbeatAgeMs: 30_000 })).toBe('up');
    expect(ownState({ ...view, heartbeatAgeMs: 30_001 })).toBe('stale');
    // Its own probes failing: down, whatever the heartbeat.
    expect(ownState({ ...view, probed: 'down', heartbeatAgeMs: 90_000 })).toBe('down');
    expect(ownState({ ...view, probed: 'down' })).toBe('down');
    // The home writes the heartbeat: never stale itself.
    expect(ownState({ ...view, isHome: true, heartbeatAgeMs: 90_000 })).toBe('up');
    // The home lost: its heartbeat stopping is not lag (nothing changes there), and the others must serve.
    expect(ownState({ ...view, homeUp: false, heartbeatAgeMs: 90_000 })).toBe('up');
    // No heartbeat yet (a new stage): no evidence of lag.
    expect(ownState({ ...view, heartbeatAgeMs: undefined })).toBe('up');
  });

  it('writes its own region\'s stale mark whenever the store disagrees, and up or down only when its probes change', () => {
    expect(ownEntryToWrite('up', 'up', true)).toBeUndefined();
    expect(ownEntryToWrite('stale', 'up', false)).toBe('stale');
    expect(ownEntryToWrite('stale', undefined, false)).toBe('stale');
    expect(ownEntryToWrite('up', 'stale', false)).toBe('up');
    expect(ownEntryToWrite('down', 'stale', false)).toBe('down');
    // Another warden found this region down: kept until this warden's own probes change.
    expect(ownEntryToWrite('up', 'down', false)).toBeUndefined();
    expect(ownEntryToWrite('up', 'down', true)).toBe('up');
    expect(ownEntryToWrite('down', 'up', true)).toBe('down');
  });

  it('reads the key the function reads, and refuses a configuration without a store or with a gateway that is not https', () => {
    expect(WARDEN_KEY).toBe(REGIONS_KEY);
    const ok = parseWardenConfig(JSON.stringify({ kvsArn: 'arn:aws:cloudfront::123456789012:key-value-store/abc', gateways: { 'us-east-1': 'https://x.lambda-url.us-east-1.on.aws/' } }));
    expect(ok.gateways['us-east-1']).toBe('https://x.lambda-url.us-east-1.on.aws/');
    expect(() => parseWardenConfig(JSON.stringify({ gateways: {} }))).toThrow(/kvsArn/);
    expect(() => parseWardenConfig(JSON.stringify({ kvsArn: 'arn:x', gateways: { 'us-east-1': 'http://plain' } }))).toThrow(/not an https URL/);
  });
});
