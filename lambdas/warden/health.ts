/**
 * The warden's view of each region's health (docs/regions.md, "The front door"): a region is
 * `down` after three failed probes in a row (no answer within the timeout, or a 5xx) and `up`
 * again after three good ones. Plain data, no I/O: the handler probes and writes.
 */
import type { ConfigHomeRecord } from '../core/config-home';
import { heartbeatKey } from './handler-constants';

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

/** A heartbeat item as a warden read it in its own region's replica. */
export interface HeartbeatRead {
  /** When it was written, epoch milliseconds (the writer's clock). */
  readonly at: number;
  /** The region whose warden wrote it (an item written before heartbeats named their writer: the stage's home region). */
  readonly writer: string;
}

/** The configuration home as a warden read it this round, in its own region's replica (`lambdas/store/config-home.ts`). */
export interface ConfigHomeSeen {
  /** The configuration home (`configurationHome`: the recorded move's region, else the stage's home region). */
  readonly home: string;
  /**
   * When the recorded move naming `home` was written, epoch milliseconds (by `home`'s own
   * management API, in `home`: only a move's target records it); undefined when no record names it.
   */
  readonly movedAt: number | undefined;
}

/**
 * A heartbeat item as stored (`at`, `region`), or undefined when there is none or it has no time.
 * An item without `region` was written before heartbeats named their writer, when only the
 * stage's home region (`stageHome`) wrote them.
 */
export function parseHeartbeat(item: Readonly<Record<string, unknown>> | undefined, stageHome: string): HeartbeatRead | undefined {
  const at = item?.['at'];
  if (typeof at !== 'number' || !Number.isFinite(at)) return undefined;
  const writer = item?.['region'];
  return { at, writer: typeof writer === 'string' && writer !== '' ? writer : stageHome };
}

/** What the configuration home `home`, read with its `record`, says of when this replica last heard from it. */
export function configHomeSeen(home: string, record: ConfigHomeRecord | undefined): ConfigHomeSeen {
  return { home, movedAt: record !== undefined && record.region === home ? record.at : undefined };
}

/**
 * Which heartbeat item a warden handles this round: the warden of the configuration home (as its
 * own replica says) writes its own region's item; every other warden, the stage's home region's
 * included when the configuration home is elsewhere, reads the configuration home's item.
 */
export function heartbeatPlan(own: string, stageHome: string, configHome: string): { readonly write: boolean; readonly key: { readonly pk: string; readonly sk: string } } {
  const write = own === configHome;
  return { write, key: heartbeatKey(write ? own : configHome, stageHome) };
}

/**
 * How long this region's replica has not heard from the configuration home, milliseconds: the
 * time since the latest write the home made that the replica holds, of two. Its heartbeat, when
 * its writer is the configuration home. And the record of the move to it: the home's own
 * management API wrote it in the home, so a replica holding it has heard from the home at that
 * time, and right after a move (before the new home's first heartbeat has arrived, or when its
 * item is left from an earlier time it was the home) the age counts from the move, not from a
 * heartbeat of long ago. A heartbeat written by any other region is no evidence of freshness
 * (what that region had heard says nothing about the configuration home's changes): it counts as
 * not written, so its age is the time since the move. Undefined when there is neither (a stage
 * whose home was never moved and whose home's warden has not run yet): no evidence of lag.
 */
export function heartbeatAge(now: number, seen: ConfigHomeSeen, heartbeat: HeartbeatRead | undefined): number | undefined {
  const fromHome = heartbeat !== undefined && heartbeat.writer === seen.home ? heartbeat.at : undefined;
  const heard = [fromHome, seen.movedAt].filter((t): t is number => t !== undefined && Number.isFinite(t));
  return heard.length === 0 ? undefined : Math.max(0, now - Math.max(...heard));
}

/** What a warden knows of its own region when it decides the state to publish for it. */
export interface OwnRegionView {
  /** Its own region's state by its probes (`up` or `down`). */
  readonly probed: RegionState;
  /** Whether its own region is the configuration home as its own replica says (it writes the heartbeat, and is never stale). */
  readonly isHome: boolean;
  /** Whether its probes find the configuration home (as its own replica says) up. */
  readonly homeUp: boolean;
  /** How long its own region's replica has not heard from the configuration home (`heartbeatAge`), milliseconds; undefined when there is no evidence yet. */
  readonly heartbeatAgeMs: number | undefined;
}

/**
 * The state a warden publishes for its own region (docs/regions.md, "Configuration"): `down` by
 * its probes; `stale` when replication from the configuration home lags past
 * {@link HEARTBEAT_STALE_MS} (a key revoked or a workspace paused there may not have reached this
 * region: it leaves the rotation until it has heard); otherwise `up`. A heartbeat that stopped
 * because the home is down is not lag (nothing is being changed there): the region serves, or a
 * lost home would take every region out with it. No heartbeat yet (a new stage, before the home's
 * warden's first run) is no evidence of lag either. The configuration home is the one this
 * region's replica names: an old home back from a loss that has not yet received the move still
 * counts itself the home (never stale) until its catch-up brings the move (docs/regions.md, "A
 * region lost"); from then on it is stale until it holds a heartbeat of the moved home younger
 * than the bound.
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
