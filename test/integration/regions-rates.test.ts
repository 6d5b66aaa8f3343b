/**
 * The spend-rate cap's headroom and a key's request rate moving between regions (issue 23;
 * docs/regions.md, "The spend-rate cap moved between regions", "The request rate moved between
 * regions"), on two DynamoDB Locals joined by the local replicator,
 * a transfer agent per region (`test/support/two-regions.ts`). The cap is split 50/50; each
 * region's headroom is on its slices (`rr` under the tag `rc`, its share), and a transfer moves it
 * on slice 0, for good under that cap.
 *
 * - A 100-way race with all the traffic in one region admits the whole cap (not its half), exactly:
 *   every refusal `spend_rate_exceeded` with the whole cap; while it runs, what both regions hold
 *   live never sums past the cap; a late request is refused at once, without asking again (the
 *   other region said it had nothing left); the credit invariant holds summed over both regions.
 * - When the other region truly has nothing, a short request asks once and is refused 429; the
 *   next is refused without an ask.
 * - A transfer is applied exactly once under replayed stream records and racing receivers; what was
 *   received stays this region's headroom (it admits its share plus the transfer, no more).
 * - A changed cap is a new tag: a transfer under the old cap counts for neither region under the
 *   new one (each admits its share of the new cap less what it holds live, the sum exactly the new
 *   cap), and counts again when the old cap is set again (a rewrite never undoes a move under the
 *   cap it rewrites for).
 * - A key's request rate split 50/50, all the traffic in one region: a 100-way race admits the
 *   whole rate in the minute, exactly, every refusal `rate_limit_exceeded`, both regions' counts
 *   never past the rate while it runs; a transfer of the minute's requests is applied once under
 *   replays and racing receivers, and each region alone then admits its share plus or minus it.
 * - The door's count (`countRequest`: a `GET`, or a request refused before admission) asks as an
 *   admission does: 100 counts at once in one region count the whole rate, exactly.
 * - The same with a key credit limit tracked, so the minute counts on the key window's item
 *   (`keyRateWindow`): a give counts on the giver's minute slot, a receive raises the receiver's
 *   minute bound (`b<m>`); the race admits the whole rate with no request counter written, and a
 *   transfer is applied once (the bound raised once) under replays and racing receivers.
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { peerCounters, quantityId, type Quantity } from '../../lambdas/core/transfers';
import { partitionSlots } from '../../lambdas/core/spend-rate';
import { monthNumber } from '../../lambdas/core/windows';
import type { AdmissionLimits } from '../../lambdas/gateway/ports';
import { boundSlotName, COUNT_SPAN, minuteRequests, minuteUsed, SLICE_NAMES, sliceView } from '../../lambdas/store/items';
import { keyPk, slicePk } from '../../lambdas/store/keys';
import { windowKeys } from '../../lambdas/core/windows';
import { asRegion, regionTag, type RegionSetup } from '../../lambdas/store/regions';
import { regionalPk } from '../../lambdas/store/regions-lens';
import { RegionalLedger } from '../../lambdas/store/regions-ledger';
import { RegionTransfers, transferPk } from '../../lambdas/store/regions-transfers';
import { NOW, OPEN, requestsTagged, settlement } from '../support/ledger-fixtures';
import { HOME, race, replayedAndRaced, settleAll, startTwoRegions, WEST, type TwoRegions, type TwoRegionsRegion } from '../support/two-regions';

jest.setTimeout(600_000);

const SETUP: RegionSetup = { regions: [HOME, WEST], region: HOME, weights: [1, 1], transferWaitMs: 15_000 };
const COST = 1_000;
/** The cap: 60 requests' worth in a rolling minute (each region's share is 30). */
const CAP = 60 * COST;
/** Slices read for a region's live reservations (a workspace here has one; growth would add more). */
const SLICES = 4;

type Region = TwoRegionsRegion<{ ledger?: RegionalLedger }>;

let fx: TwoRegions<{ ledger?: RegionalLedger }>;
let east: Region;
let west: Region;

beforeAll(async () => {
  fx = await startTwoRegions({ tag: 'sr', setup: SETUP, lagMs: 200, extra: () => ({}) });
  ({ east, west } = fx);
  for (const r of [east, west]) r.ledger = new RegionalLedger(r.raw, fx.tables(), asRegion(SETUP, r.name));
}, 300_000);

afterAll(async () => {
  await fx?.stop();
});

const request = requestsTagged('sr');
const ledgerOf = (r: Region): RegionalLedger => {
  if (r.ledger === undefined) throw new Error(`no ledger in ${r.name}`);
  return r.ledger;
};
const admitting = (r: Region): { name: string; ledger: RegionalLedger } => ({ name: r.name, ledger: ledgerOf(r) });
/** A process of region `r` that never asks (its own headroom alone decides). */
const alone = (r: Region): { name: string; ledger: RegionalLedger } => ({ name: r.name, ledger: new RegionalLedger(r.raw, fx.tables(), { ...asRegion(SETUP, r.name), transferWaitMs: 0 }) });
const transfersOf = (r: Region): RegionTransfers => new RegionTransfers(r.raw, fx.tables(), asRegion(SETUP, r.name));

/** The cap, on an otherwise open request (plenty of credit, no other limit). */
const capLimits = (capMicros = CAP): AdmissionLimits => ({ ...OPEN, spendRateCapMicros: capMicros });
const spend = (capMicros = CAP): Quantity => ({ kind: 'spend', capMicros });

/** A region's slice `i` as its own replica holds it (only it writes it). */
async function sliceOf(r: Region, ws: string, i: number): Promise<Record<string, unknown> | undefined> {
  const pk = regionalPk(slicePk(ws, i), 'BALANCE', regionTag(SETUP, r.name));
  return (await r.doc.send(new GetCommand({ TableName: fx.t('ledger'), Key: { pk, sk: 'BALANCE' }, ConsistentRead: true }))).Item;
}

/** What a region's slices hold live of the spend rate at `now` (reservations counted until 60 s after their second). */
async function liveIn(r: Region, ws: string, now = NOW): Promise<number> {
  let live = 0;
  for (let i = 0; i < SLICES; i += 1) {
    const item = await sliceOf(r, ws, i);
    if (item !== undefined) live += partitionSlots(sliceView(i, item, monthNumber(now)).slots, now).liveMicros;
  }
  return live;
}

/** A region's transfer item of `q` as its own replica holds it. */
async function transferItem(r: Region, ws: string, q: Quantity): Promise<Record<string, unknown> | undefined> {
  return (await r.doc.send(new GetCommand({ TableName: fx.t('ledger'), Key: { pk: `${transferPk(ws)}${regionTag(SETUP, r.name)}`, sk: quantityId(q) }, ConsistentRead: true }))).Item;
}

/** A workspace with plenty of credit in both regions. */
async function creditedWorkspace(): Promise<string> {
  const ws = await fx.workspace();
  await fx.credit(east, ws, 1_000 * COST);
  await fx.credit(west, ws, 1_000 * COST);
  return ws;
}

describe("the spend-rate cap split between two regions, its headroom moved", () => {
  test('a 100-way race with all the traffic in one region admits the whole cap, exactly; never past it while it runs; a late request is refused without asking; the credit invariant holds', async () => {
    const ws = await creditedWorkspace();
    let running = true;
    let maxLive = 0;
    // Reservations only grow while the race runs (one second, nothing ages out): a read of one
    // region after the other is a lower bound of the sum at the second read.
    const watch = (async () => {
      while (running) {
        maxLive = Math.max(maxLive, (await liveIn(east, ws)) + (await liveIn(west, ws)));
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    const { admitted, refused } = await race(Array.from({ length: 100 }, () => ({ region: admitting(west), request: request(ws, COST, { limits: capLimits() }) })));
    running = false;
    await watch;
    expect(admitted.get(WEST)?.length).toBe(CAP / COST);
    expect(refused).toEqual(Array.from({ length: 100 - CAP / COST }, () => 'spend_rate_exceeded'));
    expect(maxLive).toBeLessThanOrEqual(CAP);
    expect((await liveIn(east, ws)) + (await liveIn(west, ws))).toBe(CAP);
    // The east, which had no traffic, gave its whole share: its slice 0 holds no headroom.
    expect((await sliceOf(east, ws, 0))?.[SLICE_NAMES.rateRoom]).toBe(0);

    // The east answered the west's last ask with nothing left: a late request is refused at once,
    // with the whole cap, and asks nothing more.
    const asked = peerCounters(await transferItem(west, ws, spend()), HOME).asked;
    const late = await ledgerOf(west).admit(request(ws, COST, { limits: capLimits() }));
    expect(late).toMatchObject({ admitted: false, refusal: { kind: 'spend_rate_exceeded', capMicros: CAP } });
    expect(peerCounters(await transferItem(west, ws, spend()), HOME).asked).toBe(asked);

    await settleAll(ledgerOf(west), admitted.get(WEST) ?? [], settlement(COST));
    await fx.expectInvariant(ws, 2_000 * COST);
  });

  test('when the other region truly has nothing, a short request asks once and is refused 429; the next is refused without an ask', async () => {
    const ws = await creditedWorkspace();
    const east30 = await race(Array.from({ length: 30 }, () => ({ region: alone(east), request: request(ws, COST, { limits: capLimits() }) })));
    expect(east30.admitted.get(HOME)?.length).toBe(CAP / 2 / COST);
    await fx.caughtUp(ws);
    const west32 = await race(Array.from({ length: 32 }, () => ({ region: admitting(west), request: request(ws, COST, { limits: capLimits() }) })));
    expect(west32.admitted.get(WEST)?.length).toBe(CAP / 2 / COST);
    expect(west32.refused).toEqual(['spend_rate_exceeded', 'spend_rate_exceeded']);
    const item = await transferItem(west, ws, spend());
    // One ask (the two short requests gathered into it), answered with nothing and nothing left.
    expect(peerCounters(item, HOME).asked).toBeGreaterThan(0);
    await fx.caughtUp(ws);
    const answer = peerCounters(await transferItem(east, ws, spend()), WEST);
    expect(answer).toMatchObject({ sent: 0, left: 0, answered: peerCounters(item, HOME).asked });
    const late = await ledgerOf(west).admit(request(ws, COST, { limits: capLimits() }));
    expect(late).toMatchObject({ admitted: false, refusal: { kind: 'spend_rate_exceeded', capMicros: CAP } });
    expect(peerCounters(await transferItem(west, ws, spend()), HOME).asked).toBe(peerCounters(item, HOME).asked);
    await settleAll(ledgerOf(east), east30.admitted.get(HOME) ?? [], settlement(COST));
    await settleAll(ledgerOf(west), west32.admitted.get(WEST) ?? [], settlement(COST));
    await fx.expectInvariant(ws, 2_000 * COST);
  });

  test("a transfer of the cap's headroom is applied exactly once under replayed stream records and racing receivers, and stays the receiver's", async () => {
    const ws = await creditedWorkspace();
    const q = spend();
    await east.agent?.stop();
    await west.agent?.stop();
    try {
      const eastX = transfersOf(east);
      const westX = transfersOf(west);
      await westX.ask(ws, q, HOME, 7 * COST);
      await fx.caughtUp(ws);
      // Both regions at their share (nothing live): the ask, no more; the east's slice 0 (never
      // written) is written whole with its share less the give.
      expect(await eastX.answer(ws, q, WEST)).toBe(7 * COST);
      expect(await eastX.answer(ws, q, WEST)).toBe(0);
      expect(await sliceOf(east, ws, 0)).toMatchObject({ [SLICE_NAMES.rateCap]: CAP / 2, [SLICE_NAMES.rateRoom]: CAP / 2 - 7 * COST });
      await fx.caughtUp(ws);
      const { credited } = await replayedAndRaced(fx, westX, ws, q);
      expect(credited).toBeLessThanOrEqual(7 * COST);
      expect(await sliceOf(west, ws, 0)).toMatchObject({ [SLICE_NAMES.rateCap]: CAP / 2, [SLICE_NAMES.rateRoom]: CAP / 2 + 7 * COST });
      expect((await westX.counters(ws, q))[HOME]).toMatchObject({ recv: 7 * COST, asked: 7 * COST });
      expect((await eastX.counters(ws, q))[WEST]).toMatchObject({ sent: 7 * COST, answered: 7 * COST });
      // On their own, the west admits 37 and refuses the rest; the east, 23: the whole cap.
      const west37 = await race(Array.from({ length: 40 }, () => ({ region: alone(west), request: request(ws, COST, { limits: capLimits() }) })));
      expect(west37.admitted.get(WEST)?.length).toBe(37);
      expect(west37.refused).toEqual(['spend_rate_exceeded', 'spend_rate_exceeded', 'spend_rate_exceeded']);
      const east23 = await race(Array.from({ length: 25 }, () => ({ region: alone(east), request: request(ws, COST, { limits: capLimits() }) })));
      expect(east23.admitted.get(HOME)?.length).toBe(23);
      // A minute on, every reservation aged out: the move is still there (it returned to the
      // receiver's headroom, not to the giver's).
      const later = NOW + 2 * 60_000;
      const west37again = await race(Array.from({ length: 40 }, () => ({ region: alone(west), request: request(ws, COST, { limits: capLimits(), now: later, expiresAt: later + 600_000 }) })));
      expect(west37again.admitted.get(WEST)?.length).toBe(37);
      const east23again = await race(Array.from({ length: 25 }, () => ({ region: alone(east), request: request(ws, COST, { limits: capLimits(), now: later, expiresAt: later + 600_000 }) })));
      expect(east23again.admitted.get(HOME)?.length).toBe(23);
      await settleAll(ledgerOf(west), west37.admitted.get(WEST) ?? [], settlement(COST));
      await settleAll(ledgerOf(east), east23.admitted.get(HOME) ?? [], settlement(COST));
      await settleAll(ledgerOf(west), west37again.admitted.get(WEST) ?? [], settlement(COST, later + 1_000));
      await settleAll(ledgerOf(east), east23again.admitted.get(HOME) ?? [], settlement(COST, later + 1_000));
      await fx.expectInvariant(ws, 2_000 * COST);
    } finally {
      for (const r of [east, west]) await fx.startAgent(r);
    }
  });

  test('a changed cap is a new tag: a transfer under the old cap counts for neither region under the new one, and again under the old one set again', async () => {
    const ws = await creditedWorkspace();
    const A = 20 * COST;
    const B = 40 * COST;
    await east.agent?.stop();
    await west.agent?.stop();
    try {
      const eastX = transfersOf(east);
      const westX = transfersOf(west);
      // Under A (10 each), the east gives the west 6.
      await westX.ask(ws, spend(A), HOME, 6 * COST);
      await fx.caughtUp(ws);
      expect(await eastX.answer(ws, spend(A), WEST)).toBe(6 * COST);
      // The cap becomes B (20 each) before the west received it; the west admits its share of B.
      const westB = await race(Array.from({ length: 22 }, () => ({ region: alone(west), request: request(ws, COST, { limits: capLimits(B) }) })));
      expect(westB.admitted.get(WEST)?.length).toBe(20);
      // The transfer under A lands now: counted (once), but no headroom under B.
      await fx.caughtUp(ws);
      expect(await westX.receive(ws, spend(A), HOME)).toBe(6 * COST);
      expect(await westX.receive(ws, spend(A), HOME)).toBe(0);
      const westMore = await race([{ region: alone(west), request: request(ws, COST, { limits: capLimits(B) }) }]);
      expect(westMore.refused).toEqual(['spend_rate_exceeded']);
      // The east's headroom under B is rewritten from its share of B: what it gave under A is not
      // taken from it. The two admit exactly B.
      const eastB = await race(Array.from({ length: 22 }, () => ({ region: alone(east), request: request(ws, COST, { limits: capLimits(B) }) })));
      expect(eastB.admitted.get(HOME)?.length).toBe(20);
      expect((await liveIn(east, ws)) + (await liveIn(west, ws))).toBe(B);

      // A again, once every reservation aged out: the move under A counts again, in both regions.
      const later = NOW + 2 * 60_000;
      const at = { now: later, expiresAt: later + 600_000 };
      const westA = await race(Array.from({ length: 18 }, () => ({ region: alone(west), request: request(ws, COST, { limits: capLimits(A), ...at }) })));
      expect(westA.admitted.get(WEST)?.length).toBe(16);
      const eastA = await race(Array.from({ length: 6 }, () => ({ region: alone(east), request: request(ws, COST, { limits: capLimits(A), ...at }) })));
      expect(eastA.admitted.get(HOME)?.length).toBe(4);
      expect((await liveIn(east, ws, later)) + (await liveIn(west, ws, later))).toBe(A);

      await settleAll(ledgerOf(west), westB.admitted.get(WEST) ?? [], settlement(COST));
      await settleAll(ledgerOf(east), eastB.admitted.get(HOME) ?? [], settlement(COST));
      await settleAll(ledgerOf(west), westA.admitted.get(WEST) ?? [], settlement(COST, later + 1_000));
      await settleAll(ledgerOf(east), eastA.admitted.get(HOME) ?? [], settlement(COST, later + 1_000));
      await fx.expectInvariant(ws, 2_000 * COST);
    } finally {
      for (const r of [east, west]) await fx.startAgent(r);
    }
  });
});

/** A key's request rate per minute, on an otherwise open request. */
const RATE = 60;
const rateLimits = (rate = RATE): AdmissionLimits => ({ ...OPEN, keyRatePerMinute: rate });
const rateQuantity = (keyId = 'key_a'): Quantity => ({ kind: 'rate', keyId, windowSk: windowKeys.rate(keyId, NOW), ratePerMinute: RATE });

/** What a region's key slice 0 counts of the minute (its requests, plus what it gave, less what it received), in its own replica. */
async function countIn(r: Region, ws: string, keyId = 'key_a'): Promise<number> {
  const key = { pk: `${keyPk(ws, keyId)}${regionTag(SETUP, r.name)}`, sk: windowKeys.rate(keyId, NOW) };
  const item = (await r.doc.send(new GetCommand({ TableName: fx.t('ledger'), Key: key, ConsistentRead: true }))).Item;
  return typeof item?.requests === 'number' ? item.requests : 0;
}

/** A key credit limit that binds nothing here but is tracked, so the key's minutes count on its window's item. */
const KEY_WINDOW = windowKeys.key('key_a', 'monthly', NOW);
const windowRateLimits = (rate = RATE): AdmissionLimits => ({ ...OPEN, keyRatePerMinute: rate, keyLimitMicros: 100_000 * COST, keyRateWindow: KEY_WINDOW });
const windowRateQuantity = (): Quantity => ({ kind: 'rate', keyId: 'key_a', windowSk: windowKeys.rate('key_a', NOW), ratePerMinute: RATE, rateWindow: KEY_WINDOW });
const MINUTE = Math.floor(NOW / 60_000);

/** A region's key slice 0 item at `sk`, in its own replica. */
async function keyItem(r: Region, ws: string, sk: string): Promise<Record<string, unknown> | undefined> {
  const key = { pk: `${keyPk(ws, 'key_a')}${regionTag(SETUP, r.name)}`, sk };
  return (await r.doc.send(new GetCommand({ TableName: fx.t('ledger'), Key: key, ConsistentRead: true }))).Item;
}

/** What a region's key slice 0 counts of the minute on its window item (its requests, plus what it gave, less the room it received). */
async function windowCountIn(r: Region, ws: string): Promise<number> {
  return minuteUsed(await keyItem(r, ws, KEY_WINDOW), MINUTE, RATE / 2);
}

/**
 * Where a key's minute is counted: on its request counter, or on its key window's item (a key
 * whose credit limit is tracked). The same races and transfers run on both.
 */
interface MinutePlace {
  readonly place: string;
  readonly limits: () => AdmissionLimits;
  readonly quantity: () => Quantity;
  /** What a region's key slice 0 counts of the minute there: its requests, plus what it gave, less what it received. */
  readonly used: (r: Region, ws: string) => Promise<number>;
  /** The requests the giving region's slot holds (what it counted and gave). */
  readonly giverRequests: (ws: string) => Promise<number>;
  /** The place's own checks after the race, the west having borrowed the east's whole share. */
  readonly afterRace: (ws: string) => Promise<void>;
  /** The place's own checks once the east gave 7 and the west received them once (`image`: the east's transfer item as the west's stream showed it). */
  readonly afterReceive: (ws: string, image: Record<string, unknown>) => Promise<void>;
}

const PLACES: readonly MinutePlace[] = [
  {
    place: "its minute's requests moved",
    limits: () => rateLimits(),
    quantity: () => rateQuantity(),
    used: (r, ws) => countIn(r, ws),
    giverRequests: (ws) => countIn(east, ws),
    afterRace: async () => undefined,
    afterReceive: async () => undefined,
  },
  {
    place: 'its minute counted on the key window and moved',
    limits: () => windowRateLimits(),
    quantity: () => windowRateQuantity(),
    used: (r, ws) => windowCountIn(r, ws),
    giverRequests: async (ws) => minuteRequests(await keyItem(east, ws, KEY_WINDOW), MINUTE),
    afterRace: async (ws) => {
      // The west's bound holds what the east gave on its window's slot.
      const westWindow = await keyItem(west, ws, KEY_WINDOW);
      expect(minuteRequests(westWindow, MINUTE)).toBe(RATE);
      expect(westWindow?.[boundSlotName(MINUTE)]).toBe(MINUTE * COUNT_SPAN + RATE);
      // The minute counted on the window only: neither region wrote the key's counter.
      expect(await keyItem(east, ws, windowKeys.rate('key_a', NOW))).toBeUndefined();
      expect(await keyItem(west, ws, windowKeys.rate('key_a', NOW))).toBeUndefined();
      expect((await transferItem(west, ws, windowRateQuantity()))?.rateWindow).toBe(KEY_WINDOW);
    },
    afterReceive: async (ws, image) => {
      expect(image.rateWindow).toBe(KEY_WINDOW);
      // Raised once: the share and the seven received.
      expect((await keyItem(west, ws, KEY_WINDOW))?.[boundSlotName(MINUTE)]).toBe(MINUTE * COUNT_SPAN + RATE / 2 + 7);
    },
  },
];

describe.each(PLACES)("a key's request rate split between two regions, $place", (at) => {
  test('a 100-way race with all the traffic in one region admits the whole rate in the minute, exactly; the counts never past it while it runs; a late request is refused without asking', async () => {
    const ws = await creditedWorkspace();
    let running = true;
    let maxCount = 0;
    // The east's count only grows (it has no traffic: what it gives), read first: a lower bound of the sum at the second read.
    const watch = (async () => {
      while (running) {
        maxCount = Math.max(maxCount, (await at.used(east, ws)) + (await at.used(west, ws)));
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    const { admitted, refused } = await race(Array.from({ length: 100 }, () => ({ region: admitting(west), request: request(ws, COST, { limits: at.limits() }) })));
    running = false;
    await watch;
    expect(admitted.get(WEST)?.length).toBe(RATE);
    expect(refused).toEqual(Array.from({ length: 100 - RATE }, () => 'rate_limit_exceeded'));
    expect(maxCount).toBeLessThanOrEqual(RATE);
    // The east, which had no traffic, gave its whole share of the minute.
    expect(await at.giverRequests(ws)).toBe(RATE / 2);
    expect(await at.used(west, ws)).toBe(RATE / 2);
    await at.afterRace(ws);
    const asked = peerCounters(await transferItem(west, ws, at.quantity()), HOME).asked;
    const late = await ledgerOf(west).admit(request(ws, COST, { limits: at.limits() }));
    expect(late).toMatchObject({ admitted: false, refusal: { kind: 'rate_limit_exceeded' } });
    expect(peerCounters(await transferItem(west, ws, at.quantity()), HOME).asked).toBe(asked);
    await settleAll(ledgerOf(west), admitted.get(WEST) ?? [], settlement(COST));
    await fx.expectInvariant(ws, 2_000 * COST);
  });

  test("the door's count (a GET, or a request refused before admission) asks too: 100 at once in one region count the whole rate in the minute, exactly; a late one is refused without asking", async () => {
    const ws = await creditedWorkspace();
    const window = at.limits().keyRateWindow;
    const counted = await Promise.all(Array.from({ length: 100 }, () => ledgerOf(west).countRequest(ws, 'key_a', RATE, NOW, window)));
    expect(counted.filter((c) => c.retryAfterSeconds === undefined)).toHaveLength(RATE);
    expect(counted.filter((c) => c.retryAfterSeconds !== undefined)).toHaveLength(100 - RATE);
    // The east, which had no traffic, gave its whole share of the minute; the west counts its own share.
    expect(await at.giverRequests(ws)).toBe(RATE / 2);
    expect(await at.used(west, ws)).toBe(RATE / 2);
    const asked = peerCounters(await transferItem(west, ws, at.quantity()), HOME).asked;
    expect(asked).toBeGreaterThan(0);
    expect((await ledgerOf(west).countRequest(ws, 'key_a', RATE, NOW, window)).retryAfterSeconds).toBeGreaterThan(0);
    expect(peerCounters(await transferItem(west, ws, at.quantity()), HOME).asked).toBe(asked);
  });

  test("a transfer of a key's minute is applied exactly once under replayed stream records and racing receivers", async () => {
    const ws = await creditedWorkspace();
    const q = at.quantity();
    await east.agent?.stop();
    await west.agent?.stop();
    try {
      const eastX = transfersOf(east);
      const westX = transfersOf(west);
      await westX.ask(ws, q, HOME, 7);
      await fx.caughtUp(ws);
      expect(await eastX.answer(ws, q, WEST)).toBe(7);
      expect(await eastX.answer(ws, q, WEST)).toBe(0);
      expect(await at.giverRequests(ws)).toBe(7);
      await fx.caughtUp(ws);
      const { image, credited } = await replayedAndRaced(fx, westX, ws, q);
      expect(image.keyId).toBe('key_a');
      expect(credited).toBeLessThanOrEqual(7);
      await at.afterReceive(ws, image);
      expect(await at.used(west, ws)).toBe(-7);
      expect((await westX.counters(ws, q))[HOME]).toMatchObject({ recv: 7, asked: 7 });
      // On their own, the west admits 37 of the key's requests this minute and refuses the rest; the east, 23.
      const west37 = await race(Array.from({ length: 40 }, () => ({ region: alone(west), request: request(ws, COST, { limits: at.limits() }) })));
      expect(west37.admitted.get(WEST)?.length).toBe(37);
      expect(west37.refused).toEqual(['rate_limit_exceeded', 'rate_limit_exceeded', 'rate_limit_exceeded']);
      const east23 = await race(Array.from({ length: 25 }, () => ({ region: alone(east), request: request(ws, COST, { limits: at.limits() }) })));
      expect(east23.admitted.get(HOME)?.length).toBe(23);
      expect(east23.refused).toEqual(['rate_limit_exceeded', 'rate_limit_exceeded']);
      await settleAll(ledgerOf(west), west37.admitted.get(WEST) ?? [], settlement(COST));
      await settleAll(ledgerOf(east), east23.admitted.get(HOME) ?? [], settlement(COST));
      await fx.expectInvariant(ws, 2_000 * COST);
    } finally {
      for (const r of [east, west]) await fx.startAgent(r);
    }
  });
});
