/**
 * Month limits moving between regions (issue 23; docs/regions.md, "Moving headroom between
 * regions"), on two DynamoDB Locals joined by the local replicator, a transfer agent per region
 * (`test/support/two-regions.ts`): a member's month limit is split between the regions by weight,
 * and headroom moves on the regions' member month items as a key limit's does on its key windows.
 *
 * - A 200-way race on a member's month limit, with traffic in both regions and with all of it in
 *   one, admits exactly the limit, summed; every refusal is `member_limit_exceeded` with the
 *   member's figures summed over both regions and the whole limit; while it runs, what the two
 *   regions' member months hold and settled never sums past the limit; once settled and
 *   replicated, the two months' `used` (which carry what was given and received) sum to what was
 *   charged, never past the limit, and the credit invariant holds.
 * - A transfer of member-month headroom is applied exactly once under replayed stream records and
 *   racing receivers.
 * - The same for the workspace's month limit, whose headroom moves on each region's slice 0 month
 *   share (room `mr` and used `mu`), the workspace on four slices in each region so the slices
 *   lend each other room: exactly the limit admitted, summed; `ms + mh` never past it while the
 *   race runs; in each region, room and used of its slices always sum to its share (so its
 *   ledger keeps checking a fixed share, and the slices' lending stays exact).
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { peerCounters, quantityId, type Quantity } from '../../lambdas/core/transfers';
import { windowKeys } from '../../lambdas/core/windows';
import type { AdmissionLimits, AdmitRequest } from '../../lambdas/gateway/ports';
import { memberPk, slicePk } from '../../lambdas/store/keys';
import { SLICE_NAMES } from '../../lambdas/store/items';
import { writeSliceCount } from '../../lambdas/store/ledger';
import { lensFor } from '../../lambdas/store/regions-balance';
import { regionalPk } from '../../lambdas/store/regions-lens';
import { monthId, monthNumber } from '../../lambdas/core/windows';
import { regionShare } from '../../lambdas/store/regions';
import { RegionalLedger } from '../../lambdas/store/regions-ledger';
import { RegionTransfers, transferPk } from '../../lambdas/store/regions-transfers';
import { asRegion, regionTag, type RegionSetup } from '../../lambdas/store/regions';
import { NOW, OPEN, requestsTagged, settlement } from '../support/ledger-fixtures';
import { HOME, race, replayedAndRaced, settleAll, startTwoRegions, WEST, type TwoRegions, type TwoRegionsRegion } from '../support/two-regions';

jest.setTimeout(600_000);

const SETUP: RegionSetup = { regions: [HOME, WEST], region: HOME, weights: [1, 1], transferWaitMs: 15_000 };
const COST = 1_000;
/** The member's month limit: 100 requests (each region's share is 50). */
const LIMIT = 100 * COST;

type Region = TwoRegionsRegion<{ ledger?: RegionalLedger }>;

let fx: TwoRegions<{ ledger?: RegionalLedger }>;
let east: Region;
let west: Region;

beforeAll(async () => {
  fx = await startTwoRegions({ tag: 'm', setup: SETUP, lagMs: 200, extra: () => ({}) });
  ({ east, west } = fx);
  for (const r of [east, west]) r.ledger = new RegionalLedger(r.raw, fx.tables(), asRegion(SETUP, r.name));
}, 300_000);

afterAll(async () => {
  await fx?.stop();
});

const request = requestsTagged('m');
const num = (v: unknown): number => (typeof v === 'number' ? v : 0);
const ledgerOf = (r: Region): RegionalLedger => {
  if (r.ledger === undefined) throw new Error(`no ledger in ${r.name}`);
  return r.ledger;
};
const admitting = (r: Region): { name: string; ledger: RegionalLedger } => ({ name: r.name, ledger: ledgerOf(r) });
/** A process of region `r` that never asks (its share alone decides), for counting what a region holds after a transfer with the agents stopped. */
const alone = (r: Region): { name: string; ledger: RegionalLedger } => ({ name: r.name, ledger: new RegionalLedger(r.raw, fx.tables(), { ...asRegion(SETUP, r.name), transferWaitMs: 0 }) });

/** The member's limit, on an otherwise open request. */
const memberLimits = (limitMicros = LIMIT): AdmissionLimits => ({ ...OPEN, memberLimitMicros: limitMicros });

/** The quantity a member's month under `LIMIT` moves as. */
const memberQuantity = (memberId: string, limitMicros = LIMIT): Quantity => ({ kind: 'member', memberId, windowSk: windowKeys.member(memberId, NOW), limitMicros });

/** One region's member month, read consistently in its own replica (only it writes it). */
async function memberMonth(r: Region, ws: string, memberId: string): Promise<{ settled: number; held: number; used: number }> {
  const key = { pk: `${memberPk(ws, memberId)}${regionTag(SETUP, r.name)}`, sk: windowKeys.member(memberId, NOW) };
  const item = (await r.doc.send(new GetCommand({ TableName: fx.t('ledger'), Key: key, ConsistentRead: true }))).Item;
  return { settled: num(item?.settledMicros), held: num(item?.heldMicros), used: num(item?.usedMicros) };
}

/**
 * Reads both regions' member months over and over while a race runs: the largest sum of what
 * they hold and settled (each only grows during a race with no settlement, so a read of one after
 * the other is a lower bound of the sum at the second read).
 */
function watchMonths(ws: string, memberId: string): { stop: () => Promise<number> } {
  let running = true;
  let max = 0;
  const loop = (async () => {
    while (running) {
      const a = await memberMonth(east, ws, memberId);
      const b = await memberMonth(west, ws, memberId);
      max = Math.max(max, a.settled + a.held + b.settled + b.held);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return max;
    },
  };
}

/** What is in transit of a quantity, once replication has caught up (each region's own item, read in the other's replica too). */
async function inTransit(ws: string, q: Quantity): Promise<number> {
  const read = async (owner: Region): Promise<Record<string, unknown> | undefined> =>
    (await east.doc.send(new GetCommand({ TableName: fx.t('ledger'), Key: { pk: `${transferPk(ws)}${regionTag(SETUP, owner.name)}`, sk: quantityId(q) }, ConsistentRead: true }))).Item;
  const [e, w] = [await read(east), await read(west)];
  return peerCounters(e, WEST).sent - peerCounters(w, HOME).recv + (peerCounters(w, HOME).sent - peerCounters(e, WEST).recv);
}

/** A race on a member's limit, its figures checked while it runs and once everything is settled and replicated. */
async function memberRace(ws: string, memberId: string, requests: { region: Region; request: AdmitRequest }[]): Promise<void> {
  const watch = watchMonths(ws, memberId);
  const { admitted, refused } = await race(requests.map((r) => ({ region: admitting(r.region), request: r.request })));
  const maxSum = await watch.stop();
  const total = (admitted.get(HOME)?.length ?? 0) + (admitted.get(WEST)?.length ?? 0);
  expect(total).toBe(LIMIT / COST);
  expect(refused).toEqual(Array.from({ length: requests.length - total }, () => 'member_limit_exceeded'));
  expect(maxSum).toBeLessThanOrEqual(LIMIT);

  // A refusal now says the member's month as a whole: every region's use, the whole limit.
  const late = await ledgerOf(west).admit(request(ws, COST, { memberId, limits: memberLimits() }));
  expect(late).toEqual({ admitted: false, refusal: { kind: 'member_limit_exceeded', usedMicros: LIMIT, limitMicros: LIMIT } });

  await settleAll(ledgerOf(east), admitted.get(HOME) ?? [], settlement(COST));
  await settleAll(ledgerOf(west), admitted.get(WEST) ?? [], settlement(COST));
  await fx.caughtUp();
  const months = [await memberMonth(east, ws, memberId), await memberMonth(west, ws, memberId)];
  const moving = await inTransit(ws, memberQuantity(memberId));
  // The months' own use is what was charged; their `used` carries the moves too, which sum to what is in transit.
  expect(months.map((m) => m.held)).toEqual([0, 0]);
  expect(months.reduce((a, m) => a + m.settled, 0)).toBe(LIMIT);
  expect(months.reduce((a, m) => a + m.used, 0)).toBe(LIMIT + moving);
  expect(months.reduce((a, m) => a + m.used, 0)).toBeLessThanOrEqual(LIMIT);
  expect(moving).toBeLessThanOrEqual(0);
}

describe("a member's month limit split between two regions", () => {
  test('a 200-way race with traffic in both regions admits exactly the limit, summed; never past it while it runs; the credit invariant holds', async () => {
    const ws = await fx.workspace();
    await fx.credit(east, ws, 1_000 * COST);
    await fx.credit(west, ws, 1_000 * COST);
    // Most of the traffic in the west: it runs past its share and borrows what the east's own traffic leaves.
    await memberRace(ws, 'mem_both', [
      ...Array.from({ length: 30 }, () => ({ region: east, request: request(ws, COST, { memberId: 'mem_both', limits: memberLimits() }) })),
      ...Array.from({ length: 170 }, () => ({ region: west, request: request(ws, COST, { memberId: 'mem_both', limits: memberLimits() }) })),
    ]);
    await fx.expectInvariant(ws, 2_000 * COST);
  });

  test("a 200-way race with all the traffic in one region admits exactly the limit: the region borrows the other's whole share", async () => {
    const ws = await fx.workspace();
    await fx.credit(east, ws, 1_000 * COST);
    await fx.credit(west, ws, 1_000 * COST);
    await memberRace(
      ws,
      'mem_west',
      Array.from({ length: 200 }, () => ({ region: west, request: request(ws, COST, { memberId: 'mem_west', limits: memberLimits() }) })),
    );
    // The east gave all of its share: what the west admitted past its own came from it.
    const east0 = await memberMonth(east, ws, 'mem_west');
    expect(east0.settled).toBe(0);
    expect(east0.used).toBe(LIMIT / 2);
    // Another member of the same workspace still has its own whole limit (its own months, its own transfers).
    const other = await race(Array.from({ length: 120 }, () => ({ region: admitting(east), request: request(ws, COST, { memberId: 'mem_other', limits: memberLimits() }) })));
    expect(other.admitted.get(HOME)?.length).toBe(LIMIT / COST);
    await settleAll(ledgerOf(east), other.admitted.get(HOME) ?? [], settlement(COST));
    await fx.expectInvariant(ws, 2_000 * COST);
  });

  test("a member month's transfer is applied exactly once under replayed stream records and racing receivers", async () => {
    const ws = await fx.workspace();
    await fx.credit(east, ws, 100 * COST);
    await fx.credit(west, ws, 100 * COST);
    const memberId = 'mem_once';
    const q = memberQuantity(memberId);
    await east.agent?.stop();
    await west.agent?.stop();
    try {
      const eastX = new RegionTransfers(east.raw, fx.tables(), asRegion(SETUP, HOME));
      const westX = new RegionTransfers(west.raw, fx.tables(), asRegion(SETUP, WEST));
      await westX.ask(ws, q, HOME, 7 * COST);
      await fx.caughtUp(ws);
      // Both regions at their share (nothing used): the ask, no more.
      expect(await eastX.answer(ws, q, WEST)).toBe(7 * COST);
      expect(await eastX.answer(ws, q, WEST)).toBe(0);
      expect(await memberMonth(east, ws, memberId)).toEqual({ settled: 0, held: 0, used: 7 * COST });
      await fx.caughtUp(ws);
      const { image, credited } = await replayedAndRaced(fx, westX, ws, q);
      expect(image.memberId).toBe(memberId);
      expect(credited).toBeLessThanOrEqual(7 * COST);
      expect(await memberMonth(west, ws, memberId)).toEqual({ settled: 0, held: 0, used: -7 * COST });
      expect((await westX.counters(ws, q))[HOME]).toMatchObject({ recv: 7 * COST, asked: 7 * COST });
      expect((await eastX.counters(ws, q))[WEST]).toMatchObject({ sent: 7 * COST, answered: 7 * COST });
      // On its own (processes that never ask: the agents are stopped), the west now admits 57 of
      // the member's requests and refuses the rest; the east, 43.
      const west57 = await race(Array.from({ length: 60 }, () => ({ region: alone(west), request: request(ws, COST, { memberId, limits: memberLimits() }) })));
      expect(west57.admitted.get(WEST)?.length).toBe(57);
      expect(west57.refused).toEqual(['member_limit_exceeded', 'member_limit_exceeded', 'member_limit_exceeded']);
      const east43 = await race(Array.from({ length: 45 }, () => ({ region: alone(east), request: request(ws, COST, { memberId, limits: memberLimits() }) })));
      expect(east43.admitted.get(HOME)?.length).toBe(43);
      await settleAll(ledgerOf(west), west57.admitted.get(WEST) ?? [], settlement(COST));
      await settleAll(ledgerOf(east), east43.admitted.get(HOME) ?? [], settlement(COST));
      await fx.expectInvariant(ws, 200 * COST);
    } finally {
      for (const r of [east, west]) await fx.startAgent(r);
    }
  });
});

/** The workspace's month limit, on an otherwise open request. */
const monthLimits = (limitMicros = LIMIT): AdmissionLimits => ({ ...OPEN, workspaceLimitMicros: limitMicros });
const SLICES = 4;

/**
 * One region's workspace month, from its slices' month shares (read consistently in its own
 * replica): settled, held, used and room summed over the slices holding this month's share, and
 * a slice 0 holding none counted with the region's whole share as room (as the ledger counts it).
 */
async function workspaceMonth(r: Region, ws: string): Promise<{ settled: number; held: number; used: number; room: number }> {
  const N = SLICE_NAMES;
  const out = { settled: 0, held: 0, used: 0, room: 0 };
  for (let i = 0; i < SLICES; i += 1) {
    const pk = regionalPk(slicePk(ws, i), 'BALANCE', regionTag(SETUP, r.name));
    const item = (await r.doc.send(new GetCommand({ TableName: fx.t('ledger'), Key: { pk, sk: 'BALANCE' }, ConsistentRead: true }))).Item;
    if (item?.[N.month] !== monthNumber(NOW)) {
      if (i === 0) out.room += regionShare(SETUP, LIMIT, r.name);
      continue;
    }
    out.settled += num(item[N.monthSettled]);
    out.held += num(item[N.monthHeld]);
    out.used += num(item[N.monthUsed]);
    out.room += num(item[N.monthRoom]);
  }
  return out;
}

/** A workspace credited in both regions, on {@link SLICES} slices in each (each region's own slice 0 says so). */
async function slicedWorkspace(): Promise<string> {
  const ws = await fx.workspace();
  for (const r of [east, west]) {
    await fx.credit(r, ws, 1_000 * COST);
    expect(await writeSliceCount(lensFor(r.raw, fx.tables(), SETUP, r.name), fx.t('ledger'), ws, undefined, SLICES, SLICES)).toBe(true);
  }
  await fx.caughtUp(ws);
  return ws;
}

/** In each region, the room and used of its slices sum to its share of the limit: transfers and lending move figures, never make or lose any. */
async function expectShares(ws: string): Promise<void> {
  for (const r of [east, west]) {
    const m = await workspaceMonth(r, ws);
    expect(`${r.name} ${m.room + m.used}`).toBe(`${r.name} ${regionShare(SETUP, LIMIT, r.name)}`);
  }
}

/** A race on the workspace's month limit, its figures checked while it runs and once everything is settled and replicated. */
async function monthRace(ws: string, requests: { region: Region; request: AdmitRequest }[]): Promise<void> {
  let running = true;
  let maxSum = 0;
  const watch = (async () => {
    while (running) {
      const a = await workspaceMonth(east, ws);
      const b = await workspaceMonth(west, ws);
      maxSum = Math.max(maxSum, a.settled + a.held + b.settled + b.held);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  const { admitted, refused } = await race(requests.map((r) => ({ region: admitting(r.region), request: r.request })));
  running = false;
  await watch;
  const total = (admitted.get(HOME)?.length ?? 0) + (admitted.get(WEST)?.length ?? 0);
  expect(total).toBe(LIMIT / COST);
  expect(refused).toEqual(Array.from({ length: requests.length - total }, () => 'workspace_limit_exceeded'));
  expect(maxSum).toBeLessThanOrEqual(LIMIT);

  // A refusal now says the workspace's month as a whole: every region's use, the whole limit.
  const late = await ledgerOf(west).admit(request(ws, COST, { limits: monthLimits() }));
  expect(late).toEqual({ admitted: false, refusal: { kind: 'workspace_limit_exceeded', usedMicros: LIMIT, limitMicros: LIMIT } });

  await settleAll(ledgerOf(east), admitted.get(HOME) ?? [], settlement(COST));
  await settleAll(ledgerOf(west), admitted.get(WEST) ?? [], settlement(COST));
  await fx.caughtUp();
  const months = [await workspaceMonth(east, ws), await workspaceMonth(west, ws)];
  expect(months.map((m) => m.held)).toEqual([0, 0]);
  expect(months.reduce((a, m) => a + m.settled, 0)).toBe(LIMIT);
  // `used` carries the moves too: summed, the use plus what is in transit, never past the limit.
  expect(months.reduce((a, m) => a + m.used, 0)).toBe(LIMIT + (await inTransit(ws, { kind: 'month', month: monthId(NOW), limitMicros: LIMIT })));
  expect(months.reduce((a, m) => a + m.used, 0)).toBeLessThanOrEqual(LIMIT);
  await expectShares(ws);
}

describe("the workspace's month limit split between two regions", () => {
  test('a 200-way race with traffic in both regions, four slices in each, admits exactly the limit, summed; never past it while it runs; the credit invariant holds', async () => {
    const ws = await slicedWorkspace();
    // Most of the traffic in the west: it runs past its share and borrows what the east's own traffic leaves.
    await monthRace(ws, [
      ...Array.from({ length: 30 }, () => ({ region: east, request: request(ws, COST, { limits: monthLimits() }) })),
      ...Array.from({ length: 170 }, () => ({ region: west, request: request(ws, COST, { limits: monthLimits() }) })),
    ]);
    await fx.expectInvariant(ws, 2_000 * COST);
  });

  test("a 200-way race with all the traffic in one region admits exactly the limit: the region borrows the other's whole share", async () => {
    const ws = await slicedWorkspace();
    await monthRace(
      ws,
      Array.from({ length: 200 }, () => ({ region: west, request: request(ws, COST, { limits: monthLimits() }) })),
    );
    const east0 = await workspaceMonth(east, ws);
    expect([east0.settled, east0.used, east0.room]).toEqual([0, LIMIT / 2, 0]);
    await fx.expectInvariant(ws, 2_000 * COST);
  });

  test("a workspace month's transfer is applied exactly once under replayed stream records and racing receivers; the giver gathers its slices' room first", async () => {
    const ws = await slicedWorkspace();
    const q: Quantity = { kind: 'month', month: monthId(NOW), limitMicros: LIMIT };
    await east.agent?.stop();
    await west.agent?.stop();
    try {
      // Forty of the east's fifty on its four slices: the slices lend each other room.
      const first = await race(Array.from({ length: 40 }, () => ({ region: alone(east), request: request(ws, COST, { limits: monthLimits() }) })));
      expect(first.admitted.get(HOME)?.length).toBe(40);
      await expectShares(ws);
      const eastX = new RegionTransfers(east.raw, fx.tables(), asRegion(SETUP, HOME));
      const westX = new RegionTransfers(west.raw, fx.tables(), asRegion(SETUP, WEST));
      // All the east has left: ten, spread over its four slices, gathered onto its slice 0 for the give.
      await westX.ask(ws, q, HOME, 10 * COST);
      await fx.caughtUp(ws);
      expect(await eastX.answer(ws, q, WEST)).toBe(10 * COST);
      expect(await eastX.answer(ws, q, WEST)).toBe(0);
      expect(await workspaceMonth(east, ws)).toMatchObject({ held: 40 * COST, used: 50 * COST, room: 0 });
      await fx.caughtUp(ws);
      const { credited } = await replayedAndRaced(fx, westX, ws, q);
      expect(credited).toBeLessThanOrEqual(10 * COST);
      expect(await workspaceMonth(west, ws)).toEqual({ settled: 0, held: 0, used: -10 * COST, room: 60 * COST });
      expect((await westX.counters(ws, q))[HOME]).toMatchObject({ recv: 10 * COST, asked: 10 * COST });
      await expectShares(ws);
      // On their own, the west now admits 60 and refuses the rest; the east, nothing more.
      const west60 = await race(Array.from({ length: 63 }, () => ({ region: alone(west), request: request(ws, COST, { limits: monthLimits() }) })));
      expect(west60.admitted.get(WEST)?.length).toBe(60);
      expect(west60.refused).toEqual(['workspace_limit_exceeded', 'workspace_limit_exceeded', 'workspace_limit_exceeded']);
      const east0 = await race(Array.from({ length: 2 }, () => ({ region: alone(east), request: request(ws, COST, { limits: monthLimits() }) })));
      expect(east0.refused).toEqual(['workspace_limit_exceeded', 'workspace_limit_exceeded']);
      await settleAll(ledgerOf(west), west60.admitted.get(WEST) ?? [], settlement(COST));
      await settleAll(ledgerOf(east), first.admitted.get(HOME) ?? [], settlement(COST));
      await expectShares(ws);
      await fx.expectInvariant(ws, 2_000 * COST);
    } finally {
      for (const r of [east, west]) await fx.startAgent(r);
    }
  });
});
