/**
 * The warden's view of each region's health (docs/regions.md, "The front door"): a region is
 * `down` after three failed probes in a row (no answer within the timeout, or a 5xx) and `up`
 * again after three good ones. Plain data, no I/O: the handler probes and writes.
 */

/** A region's state in the front door's store. `stale` (replication from the home lagging) is written by the heartbeat check, not by probes. */
export type RegionState = 'up' | 'down' | 'stale';

/** Consecutive results needed to change a region's state. */
export const PROBE_THRESHOLD = 3;

/** One region as a warden tracks it. */
export interface RegionHealth {
  readonly state: RegionState;
  /** Consecutive probes disagreeing with `state`. */
  readonly streak: number;
}

/** A probe answer counts as healthy below 500: a 4xx (the probe key refused) is a gateway that answers. */
export function probeOk(status: number | undefined): boolean {
  return status !== undefined && status < 500;
}

/** The health after one probe: the streak grows while probes disagree with the state, and the state flips at {@link PROBE_THRESHOLD}. */
export function afterProbe(health: RegionHealth, ok: boolean, threshold = PROBE_THRESHOLD): RegionHealth {
  const agrees = ok ? health.state === 'up' : health.state !== 'up';
  if (agrees) return { state: health.state, streak: 0 };
  const streak = health.streak + 1;
  if (streak < threshold) return { state: health.state, streak };
  return { state: ok ? 'up' : 'down', streak: 0 };
}

/** Parses the store's `regions` value; anything unreadable is no information (every region counts as up). */
export function parseStates(value: string | undefined): Record<string, RegionState> {
  if (value === undefined) return {};
  try {
    const parsed = JSON.parse(value) as unknown;
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return {};
    const out: Record<string, RegionState> = {};
    for (const [region, state] of Object.entries(parsed as Record<string, unknown>)) {
      if (state === 'up' || state === 'down' || state === 'stale') out[region] = state;
    }
    return out;
  } catch {
    return {};
  }
}

/**
 * The value to write when `changed` regions moved to new states: what the store holds now, with
 * only the regions this warden changed replaced, so two wardens writing in turn keep each other's
 * changes (a write that lost the ETag race reads again and merges). A region's `stale` mark is its
 * own warden's to clear (only it reads that region's replica): another warden whose probes found
 * the region answering again leaves it stale; `writer` is the writing warden's region.
 */
export function mergeStates(current: Readonly<Record<string, RegionState>>, changed: Readonly<Record<string, RegionState>>, writer?: string): string {
  const merged: Record<string, RegionState> = { ...current };
  for (const [region, state] of Object.entries(changed)) {
    if (state === 'up' && current[region] === 'stale' && writer !== undefined && region !== writer) continue;
    merged[region] = state;
  }
  return JSON.stringify(Object.fromEntries(Object.keys(merged).sort().map((r) => [r, merged[r]])));
}

/** A region whose last heartbeat from the configuration home is older than this is `stale`, milliseconds. */
export const HEARTBEAT_STALE_MS = 30_000;

/** What a warden knows of its own region when it decides the state to publish for it. */
export interface OwnRegionView {
  /** Its own region's state by its probes (`up` or `down`). */
  readonly probed: RegionState;
  /** Whether its own region is the configuration home (which writes the heartbeat, and is never stale). */
  readonly isHome: boolean;
  /** Whether its probes find the configuration home up. */
  readonly homeUp: boolean;
  /** The age of the home's heartbeat as its own region's replica holds it, milliseconds; undefined when there is none yet. */
  readonly heartbeatAgeMs: number | undefined;
}

/**
 * The state a warden publishes for its own region (docs/regions.md, "Configuration"): `down` by
 * its probes; `stale` when replication from the configuration home lags past
 * {@link HEARTBEAT_STALE_MS} (a key revoked or a workspace paused there may not have reached this
 * region: it leaves the rotation until it has heard); otherwise `up`. A heartbeat that stopped
 * because the home is down is not lag (nothing is being changed there): the region serves, or a
 * lost home would take every region out with it. No heartbeat yet (a new stage, before the home's
 * warden's first run) is no evidence of lag either.
 */
export function ownState(view: OwnRegionView, staleAfterMs = HEARTBEAT_STALE_MS): RegionState {
  if (view.probed === 'down') return 'down';
  if (view.isHome || !view.homeUp || view.heartbeatAgeMs === undefined) return 'up';
  return view.heartbeatAgeMs > staleAfterMs ? 'stale' : 'up';
}

/** The front door's configuration the warden reads (a secret the front door's stack writes). */
export interface WardenConfig {
  /** The KeyValueStore holding the `regions` key. */
  readonly kvsArn: string;
  /** The stage's regions, home first, and each one's gateway Function URL (`https://…/`). */
  readonly gateways: Readonly<Record<string, string>>;
}

/** Parses and checks the configuration secret's value; throws on anything else. */
export function parseWardenConfig(value: string): WardenConfig {
  const parsed = JSON.parse(value) as Partial<WardenConfig>;
  if (typeof parsed.kvsArn !== 'string' || !parsed.kvsArn.startsWith('arn:')) throw new Error('warden config: kvsArn missing');
  const gateways = parsed.gateways;
  if (gateways === undefined || gateways === null || typeof gateways !== 'object') throw new Error('warden config: gateways missing');
  for (const [region, url] of Object.entries(gateways)) {
    if (typeof url !== 'string' || !url.startsWith('https://')) throw new Error(`warden config: gateway of ${region} is not an https URL`);
  }
  return { kvsArn: parsed.kvsArn, gateways };
}

/**
 * What a warden writes for its own region after a round, if anything: `mine` is its state by
 * `ownState`, `published` what the store held for it when last read or written, `probeFlipped`
 * whether its probes changed its up/down view this round. Up and down are written on the probes'
 * changes, as for any region (another warden's differing view is kept until this one's changes);
 * `stale` is this warden's alone to set and clear, so any disagreement about it is written.
 */
export function ownEntryToWrite(mine: RegionState, published: RegionState | undefined, probeFlipped: boolean): RegionState | undefined {
  const was = published ?? 'up';
  if (mine === was) return undefined;
  return probeFlipped || mine === 'stale' || was === 'stale' ? mine : undefined;
}
