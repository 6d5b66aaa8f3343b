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
 * changes (a write that lost the ETag race reads again and merges).
 */
export function mergeStates(current: Readonly<Record<string, RegionState>>, changed: Readonly<Record<string, RegionState>>): string {
  const merged: Record<string, RegionState> = { ...current, ...changed };
  return JSON.stringify(Object.fromEntries(Object.keys(merged).sort().map((r) => [r, merged[r]])));
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
