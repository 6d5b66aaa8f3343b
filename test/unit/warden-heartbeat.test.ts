/**
 * The wardens' heartbeat following the recorded configuration home (issue 23; docs/regions.md,
 * "Configuration" and "A region lost"): which region writes which item, how long a region's
 * replica has not heard from the configuration home, and the stale decision that follows, with
 * the home moved, an old home returning before and after its catch-up, and a heartbeat written by
 * a region that is not the configuration home (lambdas/warden/health.ts, handler-constants.ts).
 */
import type { ConfigHomeRecord } from '../../lambdas/core/config-home';
import { configurationHome } from '../../lambdas/core/config-home';
import { HEARTBEAT_KEY, heartbeatKey } from '../../lambdas/warden/handler-constants';
import { configHomeSeen, heartbeatAge, heartbeatPlan, HEARTBEAT_STALE_MS, ownState, parseHeartbeat, type HeartbeatRead, type RegionState } from '../../lambdas/warden/health';

const X = 'us-east-1';
const Y = 'us-west-2';
const Z = 'eu-west-1';
const REGIONS = [X, Y, Z];
const T0 = 1_800_000_000_000;
const S = 1_000;

const moveTo = (region: string, at: number, generation = 1): ConfigHomeRecord => ({ region, generation, at, by: 'arn:aws:iam::123456789012:role/ops', requestId: 'req_1' });

/** The items a region's replica holds: the configuration home's record, and each heartbeat item by its sort key. */
interface Replica {
  readonly record?: ConfigHomeRecord;
  readonly items?: Readonly<Record<string, Record<string, unknown>>>;
}

/**
 * One round of `own`'s warden as the handler runs it (`lambdas/warden/heartbeat.ts`, then
 * `ownState`): what it writes, if anything, and the state it publishes for its own region.
 */
function round(own: string, replica: Replica, now: number, probes: { readonly ownUp?: boolean; readonly down?: readonly string[] } = {}): { writes: string | undefined; reads: string | undefined; ageMs: number | undefined; state: RegionState } {
  const home = configurationHome(REGIONS, replica.record);
  const plan = heartbeatPlan(own, X, home);
  const ageMs = plan.write ? 0 : heartbeatAge(now, configHomeSeen(home, replica.record), parseHeartbeat(replica.items?.[plan.key.sk], X));
  const state = ownState({ probed: probes.ownUp === false ? 'down' : 'up', isHome: plan.write, homeUp: !(probes.down ?? []).includes(home), heartbeatAgeMs: ageMs });
  return { writes: plan.write ? plan.key.sk : undefined, reads: plan.write ? undefined : plan.key.sk, ageMs, state };
}

const beat = (writer: string, at: number): Record<string, unknown> => ({ pk: 'STAGE', sk: heartbeatKey(writer, X).sk, at, region: writer });

describe('which region writes the heartbeat', () => {
  it('is the configuration home as the warden\'s own replica names it, each region writing its own item', () => {
    // No move: the stage's home region writes today's item, the others read it.
    expect(heartbeatPlan(X, X, X)).toEqual({ write: true, key: HEARTBEAT_KEY });
    expect(heartbeatPlan(Y, X, X)).toEqual({ write: false, key: HEARTBEAT_KEY });
    // Moved to Y: Y writes its own tagged item; the old home and every other region read Y's.
    expect(heartbeatPlan(Y, X, Y)).toEqual({ write: true, key: { pk: 'STAGE', sk: `HEARTBEAT@${Y}` } });
    expect(heartbeatPlan(X, X, Y)).toEqual({ write: false, key: { pk: 'STAGE', sk: `HEARTBEAT@${Y}` } });
    expect(heartbeatPlan(Z, X, Y)).toEqual({ write: false, key: { pk: 'STAGE', sk: `HEARTBEAT@${Y}` } });
  });

  it('gives every item one writer, whatever each region believes the home is (two homes at once write two items)', () => {
    const writers = new Map<string, Set<string>>();
    for (const own of REGIONS) {
      for (const believed of REGIONS) {
        const plan = heartbeatPlan(own, X, believed);
        if (!plan.write) continue;
        const set = writers.get(plan.key.sk) ?? new Set<string>();
        set.add(own);
        writers.set(plan.key.sk, set);
      }
    }
    expect([...writers.entries()].map(([sk, set]) => [sk, [...set]]).sort()).toEqual([
      ['HEARTBEAT', [X]],
      [`HEARTBEAT@${Z}`, [Z]],
      [`HEARTBEAT@${Y}`, [Y]],
    ].sort());
  });

  it('follows a move within the round that reads it, and a move back', () => {
    expect(round(X, {}, T0).writes).toBe('HEARTBEAT');
    expect(round(Y, {}, T0).writes).toBeUndefined();
    const moved = { record: moveTo(Y, T0) };
    expect(round(Y, moved, T0 + S).writes).toBe(`HEARTBEAT@${Y}`);
    expect(round(X, moved, T0 + S)).toMatchObject({ writes: undefined, reads: `HEARTBEAT@${Y}` });
    const back = { record: moveTo(X, T0 + 600 * S, 2) };
    expect(round(X, back, T0 + 601 * S).writes).toBe('HEARTBEAT');
    expect(round(Y, back, T0 + 601 * S)).toMatchObject({ writes: undefined, reads: 'HEARTBEAT' });
  });
});

describe('how long a replica has not heard from the configuration home', () => {
  const home = (h: string, record?: ConfigHomeRecord) => configHomeSeen(h, record);

  it('is the home\'s heartbeat\'s age, or nothing at all before the first one on a stage never moved', () => {
    expect(heartbeatAge(T0 + 7 * S, home(X), { at: T0, writer: X })).toBe(7 * S);
    expect(heartbeatAge(T0, home(X), undefined)).toBeUndefined();
    // A writer's clock a little ahead is no negative age.
    expect(heartbeatAge(T0, home(X), { at: T0 + 2 * S, writer: X })).toBe(0);
  });

  it('counts from the move when the moved home\'s heartbeat has not arrived yet or is left from an earlier time it was the home', () => {
    const seen = home(Y, moveTo(Y, T0));
    expect(seen.movedAt).toBe(T0);
    expect(heartbeatAge(T0 + 3 * S, seen, undefined)).toBe(3 * S);
    expect(heartbeatAge(T0 + 3 * S, seen, { at: T0 - 3_600 * S, writer: Y })).toBe(3 * S);
    expect(heartbeatAge(T0 + 40 * S, seen, { at: T0 + 35 * S, writer: Y })).toBe(5 * S);
  });

  it('takes no freshness from a heartbeat written by a region that is not the configuration home: it counts as not written since the move', () => {
    const seen = home(Y, moveTo(Y, T0));
    // X wrote a second ago (an old home back from a loss that has not heard of the move): no evidence of hearing from Y.
    expect(heartbeatAge(T0 + 60 * S, seen, { at: T0 + 59 * S, writer: X })).toBe(60 * S);
    // No move recorded (the home is the stage's home region) and a heartbeat by another: no evidence either way.
    expect(heartbeatAge(T0 + 60 * S, home(X), { at: T0 + 59 * S, writer: Y })).toBeUndefined();
  });

  it('counts a record naming another region than the home (one no longer listed) as no move to the home', () => {
    expect(configHomeSeen(X, moveTo('ap-south-1', T0)).movedAt).toBeUndefined();
    expect(configHomeSeen(X, undefined).movedAt).toBeUndefined();
  });

  it('reads an item written before heartbeats named their writer as the stage\'s home region\'s', () => {
    expect(parseHeartbeat({ pk: 'STAGE', sk: 'HEARTBEAT', at: T0 }, X)).toEqual<HeartbeatRead>({ at: T0, writer: X });
    expect(parseHeartbeat({ at: T0, region: Y }, X)).toEqual<HeartbeatRead>({ at: T0, writer: Y });
    expect(parseHeartbeat({ at: 'soon', region: Y }, X)).toBeUndefined();
    expect(parseHeartbeat(undefined, X)).toBeUndefined();
  });
});

describe('the stale decision with the configuration home moved', () => {
  const moved = moveTo(Y, T0);

  it('marks another region stale past 30 s without the moved home\'s heartbeat, and never the moved home itself', () => {
    const fresh = { record: moved, items: { [`HEARTBEAT@${Y}`]: beat(Y, T0 + 100 * S) } };
    expect(round(Z, fresh, T0 + 105 * S)).toMatchObject({ ageMs: 5 * S, state: 'up' });
    expect(round(Z, fresh, T0 + 100 * S + HEARTBEAT_STALE_MS)).toMatchObject({ state: 'up' });
    expect(round(Z, fresh, T0 + 100 * S + HEARTBEAT_STALE_MS + 1)).toMatchObject({ state: 'stale' });
    // The moved home found down by this warden's probes: its heartbeat stopping is not lag.
    expect(round(Z, fresh, T0 + 200 * S, { down: [Y] }).state).toBe('up');
    // The old home being down no longer excuses lag behind the moved one.
    expect(round(Z, fresh, T0 + 200 * S, { down: [X] }).state).toBe('stale');
    // The moved home: writes, and is never stale.
    expect(round(Y, { record: moved }, T0 + 3_600 * S)).toMatchObject({ ageMs: 0, state: 'up' });
  });

  it('keeps the others serving right after the move, before the new home\'s first heartbeat arrives, and only for 30 s', () => {
    // The old home's last heartbeat is an hour old (it was lost); the move arrived 3 s ago.
    const justMoved = { record: moved, items: { HEARTBEAT: beat(X, T0 - 3_600 * S) } };
    expect(round(Z, justMoved, T0 + 3 * S)).toMatchObject({ reads: `HEARTBEAT@${Y}`, ageMs: 3 * S, state: 'up' });
    expect(round(Z, justMoved, T0 + 31 * S).state).toBe('stale');
  });

  it('marks an old home that has caught up stale until it holds a recent heartbeat of the moved home, whatever it wrote itself', () => {
    // Back from a loss, its replica now holds the move (an hour old) and its own item, which it wrote a second ago while it believed it was the home.
    const caughtUpToMove = { record: moved, items: { HEARTBEAT: beat(X, T0 + 3_599 * S) } };
    expect(round(X, caughtUpToMove, T0 + 3_600 * S)).toMatchObject({ writes: undefined, reads: `HEARTBEAT@${Y}`, ageMs: 3_600 * S, state: 'stale' });
    const caughtUp = { record: moved, items: { ...caughtUpToMove.items, [`HEARTBEAT@${Y}`]: beat(Y, T0 + 3_598 * S) } };
    expect(round(X, caughtUp, T0 + 3_600 * S)).toMatchObject({ ageMs: 2 * S, state: 'up' });
  });

  it('leaves an old home that has not yet received the move counting itself the home (the window bounded by its catch-up)', () => {
    // Its replica has neither the move nor Y's heartbeats: it writes today's item and is never stale.
    const behind = { items: { HEARTBEAT: beat(X, T0 - 3_600 * S) } };
    expect(round(X, behind, T0 + 3_600 * S)).toMatchObject({ writes: 'HEARTBEAT', ageMs: 0, state: 'up' });
    // What it writes is its own item: the regions that know the home is Y never read it.
    const elsewhere = { record: moved, items: { HEARTBEAT: beat(X, T0 + 3_600 * S), [`HEARTBEAT@${Y}`]: beat(Y, T0 + 3_590 * S) } };
    expect(round(Z, elsewhere, T0 + 3_601 * S)).toMatchObject({ reads: `HEARTBEAT@${Y}`, ageMs: 11 * S, state: 'up' });
  });

  it('takes no freshness from a heartbeat written by a region that is not the configuration home, even under the home\'s key', () => {
    // An item under Y's key naming X (not written by this code; a damaged or hand-made item): as if nothing since the move.
    const odd = { record: moved, items: { [`HEARTBEAT@${Y}`]: { ...beat(Y, T0 + 59 * S), region: X } } };
    expect(round(Z, odd, T0 + 60 * S)).toMatchObject({ ageMs: 60 * S, state: 'stale' });
  });

  it('reads the stage\'s home region\'s item again once the home is moved back, counting from the move back', () => {
    const back = { record: moveTo(X, T0 + 3_600 * S, 2), items: { HEARTBEAT: beat(X, T0 - 3_600 * S), [`HEARTBEAT@${Y}`]: beat(Y, T0 + 3_599 * S) } };
    expect(round(Y, back, T0 + 3_610 * S)).toMatchObject({ writes: undefined, reads: 'HEARTBEAT', ageMs: 10 * S, state: 'up' });
    expect(round(Y, back, T0 + 3_640 * S).state).toBe('stale');
    expect(round(Y, { ...back, items: { ...back.items, HEARTBEAT: beat(X, T0 + 3_639 * S) } }, T0 + 3_640 * S).state).toBe('up');
  });
});
