/**
 * The two-region steady-state bench's counting (`bench/regions-steady-count.ts`): what one write
 * to a transfer item did, read from its counters before and after; moves per window; which
 * requests waited for a transfer; the split of traffic between the regions; where the direct calls
 * and the floors go among the requests.
 */
import { SAMPLE_DELAY_TICKS, SamplePlan, TransferTally, countWindow, eventsOf, regionOf, waitedForTransfer, type TickSamples, type TransferEvent } from '../../bench/regions-steady-count';

const REGIONS = ['us-east-1', 'us-west-2'] as const;
const credit = (region: string, counters: Record<string, number>): Record<string, unknown> => ({ pk: `XFER#ws_1${region === 'us-east-1' ? '' : `@${region}`}`, sk: 'CREDIT', region, ws: 'ws_1', ...counters });

describe('eventsOf', () => {
  it('reads an ask, then a give with its answer, then a receipt, each from the counter that grew', () => {
    const asked = credit('us-west-2', { 'asked_us-east-1': 500 });
    expect(eventsOf(undefined, asked, REGIONS, 10)).toEqual([{ kind: 'ask', region: 'us-west-2', peer: 'us-east-1', quantity: 'credit', micros: 500, at: 10 }]);
    const given = credit('us-east-1', { 'answered_us-west-2': 500, 'sent_us-west-2': 500 });
    expect(eventsOf(undefined, given, REGIONS, 20)).toEqual([{ kind: 'give', region: 'us-east-1', peer: 'us-west-2', quantity: 'credit', micros: 500, at: 20 }]);
    const received = credit('us-west-2', { 'asked_us-east-1': 500, 'recv_us-east-1': 500 });
    expect(eventsOf(asked, received, REGIONS, 30)).toEqual([{ kind: 'receive', region: 'us-west-2', peer: 'us-east-1', quantity: 'credit', micros: 500, at: 30 }]);
  });

  it('counts an answer that gave nothing apart from a give, and a second give by its growth only', () => {
    const first = credit('us-east-1', { 'answered_us-west-2': 500, 'sent_us-west-2': 500 });
    const empty = credit('us-east-1', { 'answered_us-west-2': 900, 'sent_us-west-2': 500 });
    expect(eventsOf(first, empty, REGIONS, 1).map((e) => [e.kind, e.micros])).toEqual([['emptyAnswer', 0]]);
    const more = credit('us-east-1', { 'answered_us-west-2': 1_400, 'sent_us-west-2': 800 });
    expect(eventsOf(empty, more, REGIONS, 2).map((e) => [e.kind, e.micros])).toEqual([['give', 300]]);
  });

  it("names a key window's item as a key quantity and ignores an item without a writer", () => {
    const key = { pk: 'XFER#ws_1@us-west-2', sk: 'KEYWIN#key_1#M2026-11~L5000000', region: 'us-west-2', keyId: 'key_1', 'asked_us-east-1': 7 };
    expect(eventsOf(undefined, key, REGIONS, 0)[0]?.quantity).toBe('key');
    expect(eventsOf(undefined, { pk: 'XFER#ws_1', sk: 'CREDIT', 'sent_us-west-2': 9 }, REGIONS, 0)).toEqual([]);
  });
});

describe('TransferTally', () => {
  it('follows each item on its own and adds nothing for a record read twice', () => {
    const tally = new TransferTally(REGIONS);
    const a1 = credit('us-east-1', { 'answered_us-west-2': 10, 'sent_us-west-2': 10 });
    const b1 = credit('us-west-2', { 'asked_us-east-1': 10 });
    tally.observe(b1, 1);
    tally.observe(a1, 2);
    tally.observe(a1, 3);
    tally.observe(credit('us-east-1', { 'answered_us-west-2': 30, 'sent_us-west-2': 30 }), 4);
    expect(tally.events.map((e) => [e.kind, e.region, e.micros])).toEqual([
      ['ask', 'us-west-2', 10],
      ['give', 'us-east-1', 10],
      ['give', 'us-east-1', 20],
    ]);
  });
});

describe('countWindow', () => {
  const ev = (kind: TransferEvent['kind'], at: number, micros = 5, quantity: 'credit' | 'key' = 'credit'): TransferEvent => ({ kind, region: 'us-east-1', peer: 'us-west-2', quantity, micros, at });

  it('counts gives that moved money as moves, per 100 requests of the same window', () => {
    const events = [ev('ask', 5), ev('give', 10), ev('emptyAnswer', 20, 0), ev('give', 30, 7, 'key'), ev('receive', 40), ev('give', 70)];
    const requests = Array.from({ length: 200 }, (_, i) => i * 0.5);
    const first = countWindow(events, requests, 0, 60);
    expect(first).toMatchObject({ requests: 120, moves: 2, movedMicros: 12, asks: 1, emptyAnswers: 1, receives: 1, creditMoves: 1, keyMoves: 1 });
    expect(first.movesPer100).toBeCloseTo(200 / 120, 10);
    expect(countWindow(events, requests, 60, Infinity)).toMatchObject({ requests: 80, moves: 1, asks: 0 });
  });

  it('has no rate for a window without requests', () => {
    expect(countWindow([], [], 0, 10).movesPer100).toBeNaN();
  });
});

describe('waitedForTransfer', () => {
  it('counts the requests of the asking region in flight across its ask for long enough, and no others', () => {
    const asks = [{ region: 'us-west-2', at: 1_000 }];
    const requests = [
      { region: 'us-west-2', start: 990, end: 3_100 }, // waited for the answer
      { region: 'us-west-2', start: 995, end: 1_010 }, // in flight at the ask, done at once
      { region: 'us-east-1', start: 990, end: 3_100 }, // the other region
      { region: 'us-west-2', start: 1_050, end: 3_200 }, // sent after the ask was read
    ];
    expect(waitedForTransfer(requests, asks, 500)).toBe(1);
  });
});

describe('regionOf', () => {
  it.each([50, 70, 100, 0])('keeps %i %% in the first region over the run and over every stretch', (p) => {
    const picks = Array.from({ length: 1_000 }, (_, i) => regionOf(i, p, REGIONS));
    expect(picks.filter((r) => r === 'us-east-1').length).toBe(10 * p);
    const stretch = picks.slice(137, 237).filter((r) => r === 'us-east-1').length;
    expect(Math.abs(stretch - p)).toBeLessThanOrEqual(1);
  });
});

describe('SamplePlan', () => {
  const ticks = (p: number, n: number): TickSamples[] => {
    const plan = new SamplePlan(p, REGIONS);
    return Array.from({ length: n }, (_, i) => plan.at(i));
  };

  it('sends the samples half a tick after the request, never at its instant', () => {
    expect(SAMPLE_DELAY_TICKS).toBe(0.5);
  });

  it.each([50, 70, 30, 90])('at %i %%: keeps the split, and takes each floor after one of its own region\'s requests, as often for either region', (p) => {
    const plan = ticks(p, 800);
    expect(plan.map((t) => t.region)).toEqual(Array.from({ length: 800 }, (_, i) => regionOf(i, p, REGIONS)));
    for (const region of REGIONS) {
      const floors = plan.filter((t) => t.floor === region);
      // Where the floor's transaction sits: after its own region's request (the one that shares its store).
      expect(floors.every((t) => t.region === region)).toBe(true);
      // At most one every 4 ticks per region, and most of those while its requests come often enough
      // (a floor waits for its region's next request; at 90/10 the second region has one in 10 ticks).
      const expected = Math.min(800 / 4, plan.filter((t) => t.region === region).length);
      expect(floors.length).toBeLessThanOrEqual(800 / 4);
      expect(floors.length).toBeGreaterThanOrEqual(0.75 * expected);
    }
  });

  it('at 50/50 puts the direct calls of either kind after either region\'s requests as often, one every other tick', () => {
    const plan = ticks(50, 800);
    for (const kind of ['plain', 'stream'] as const) {
      const after = REGIONS.map((r) => plan.filter((t) => t.direct === kind && t.region === r).length);
      expect(after).toEqual([100, 100]);
    }
  });

  it('still samples the floor of a region with no traffic, after the other region\'s requests', () => {
    const plan = ticks(100, 400);
    const west = plan.filter((t) => t.floor === 'us-west-2').length;
    const east = plan.filter((t) => t.floor === 'us-east-1').length;
    // One every 16 ticks: four times a floor's due interval late.
    expect(west).toBeGreaterThanOrEqual(24);
    expect(east).toBeGreaterThanOrEqual(90);
  });
});
