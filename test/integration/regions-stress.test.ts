/**
 * A stress test of the regional ledger (issue 23: 0 overspend of any limit across regions at any
 * moment). Two DynamoDB Locals ("us-east-1", the home region, and "us-west-2") joined by the local
 * replicator with a small lag, a transfer agent per region on its stream, and two ledger
 * processes per region (as two Lambda instances are: each its own memory of what it received and
 * its own gathered asks), driven through `RegionalLedger.admit` directly (no gateway): hundreds of
 * admissions in overlapping waves leaning now on one region, now on the other, so asks and gives
 * cross in both directions; transfer waits short enough to run out while transfers are in flight;
 * a refusal whose own (widened) figures say the whole could cover, or a failure as a 503, retried
 * as a client would (the path that once admitted 114 where 70 fit); the workspace on four slices
 * in each region, so four key slices lend each other headroom; no hold settled during the race.
 *
 * - A key limit: while the race runs, each region's key windows are read (consistently, in its own
 *   replica) and the sum over both regions of what they hold and settled never exceeds the limit
 *   (each region's figure only grows during the race, so two reads one after the other are a lower
 *   bound of the sum at the second); at the end, each region's rows are exactly what it admitted,
 *   its windows hold what its rows hold, the sum fits, and nothing is left in transit.
 * - A poor workspace: what the slices hold never exceeds the credit; once replication has caught
 *   up, credited = available + held + spent summed over both regions, plus what is in transit.
 * - A key limit raised mid-race: what the requests made under the first limit hold fits the first
 *   limit, and the whole fits the second.
 * - What a region's key slice 0 lent its other key slices (one request on each of the east's key
 *   slices 1 to 3), given to the other region: one request after another in the west, exactly what
 *   the key limit fits (or the rate allows, counted on the request counter or on the key window)
 *   is admitted over both regions, then the limit's own refusal.
 *
 * Each race prints its figures (admitted, what fits, transfer amounts asked and sent each way in
 * holds, the transfer writes each region made, the largest sum seen while it ran).
 */
import { randomBytes } from 'node:crypto';
import { BatchGetCommand, GetCommand, PutCommand, ScanCommand, TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { DocumentSender } from '../../lambdas/adapters/dynamo-wire';
import { peerCounters, quantityId, type Quantity } from '../../lambdas/core/transfers';
import { windowKeys } from '../../lambdas/core/windows';
import type { AdmissionLimits, AdmitRequest, Refusal } from '../../lambdas/gateway/ports';
import { tableName } from '../../lambdas/shared/schema';
import { keySlicePk, shardOf } from '../../lambdas/store/keys';
import { armWindow } from '../../lambdas/store/limit-arming';
import { writeSliceCount } from '../../lambdas/store/ledger';
import { creditRegion, lensFor, readRegionalBalance } from '../../lambdas/store/regions-balance';
import { RegionalLedger } from '../../lambdas/store/regions-ledger';
import { regionalPk } from '../../lambdas/store/regions-lens';
import { transferPk } from '../../lambdas/store/regions-transfers';
import { asRegion, regionTag, type RegionSetup } from '../../lambdas/store/regions';
import { NOW, OPEN, requestsTagged } from '../support/ledger-fixtures';
import { HOME, startTwoRegions, WEST, type TwoRegions, type TwoRegionsRegion } from '../support/two-regions';

jest.setTimeout(600_000);

/** Waits short enough to run out while a transfer is still crossing (lag there and back, plus the agents' polls). */
const WAITS = [150, 400] as const;
const SETUP: RegionSetup = { regions: [HOME, WEST], region: HOME, weights: [1, 1], transferWaitMs: WAITS[0] };
/** An odd hold and an odd remainder on every limit: shares and transfers are never whole holds. */
const HOLD = 7_919;
const ODD = 3_001;
const SLICES = 4;
const KEY = 'key_a';
/**
 * A client retries a 503 (and here a refusal whose figures say the whole could cover) this many
 * times. The end-to-end client's 10 cost about twice the time for the same findings here (both
 * runs keep asking while transfers cross); 4 keeps the file's run time in bounds.
 */
const RETRIES = 4;
const REPLICATION_LAG_MS = 150;

/** What one region's processes wrote of the transfer protocol: asks, answers that gave something, receipts that credited something. */
interface TransferWrites {
  asks: number;
  gives: number;
  answers: number;
  receipts: number;
}

/** A region of the fixture, with the transfer-protocol writes its processes sent, per workspace. */
type Region = TwoRegionsRegion<{ readonly writes: Map<string, TransferWrites> }>;

let fx: TwoRegions<{ readonly writes: Map<string, TransferWrites> }>;
let prefix: string;
let east: Region;
let west: Region;
const t = (name: Parameters<typeof tableName>[1]): string => tableName(prefix, name);
const tables = (): { ledger: string; usage: string } => ({ ledger: t('ledger'), usage: t('usage') });

/** The workspace a transfer item's partition key names (`XFER#<ws>[@region]`). */
function xferWorkspace(pk: unknown): string | undefined {
  const s = String(pk);
  return s.startsWith('XFER#') ? s.slice('XFER#'.length).split('@')[0] : undefined;
}

/** Counts the transfer protocol's writes a region's processes send (asks, answers, receipts), by workspace, and passes each call on. */
function counting(inner: DocumentSender, writes: Map<string, TransferWrites>): DocumentSender {
  const of = (ws: string): TransferWrites => {
    let w = writes.get(ws);
    if (w === undefined) {
      w = { asks: 0, gives: 0, answers: 0, receipts: 0 };
      writes.set(ws, w);
    }
    return w;
  };
  const send = async (command: Parameters<DocumentSender['send']>[0]): Promise<unknown> => {
    const out = await (inner.send as (c: typeof command) => Promise<unknown>).call(inner, command);
    if (command instanceof UpdateCommand) {
      const ws = xferWorkspace(command.input.Key?.pk);
      if (ws !== undefined) of(ws).asks += 1;
    }
    if (command instanceof TransactWriteCommand) {
      const items = (command as TransactWriteCommand).input.TransactItems ?? [];
      const x = items.find((i) => xferWorkspace(i.Update?.Key?.pk) !== undefined)?.Update;
      const ws = xferWorkspace(x?.Key?.pk);
      if (x !== undefined && ws !== undefined) {
        const names = Object.values(x.ExpressionAttributeNames ?? {}) as string[];
        if (names.some((n) => n.startsWith('answered_'))) {
          of(ws).answers += 1;
          if (items.length > 1) of(ws).gives += 1;
        } else if (names.some((n) => n.startsWith('recv_'))) of(ws).receipts += 1;
      }
    }
    return out;
  };
  return { send } as DocumentSender;
}

beforeAll(async () => {
  // In memory: nothing here outlives the run, and a database in memory answers faster than one on disk.
  fx = await startTwoRegions({ tag: 's', setup: SETUP, lagMs: REPLICATION_LAG_MS, extra: () => ({ writes: new Map<string, TransferWrites>() }), wrap: (inner, r) => counting(inner, r.writes) });
  ({ prefix, east, west } = fx);
}, 300_000);

afterAll(async () => {
  await fx?.stop();
});

const request = requestsTagged('x');
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const num = (v: unknown): number => (typeof v === 'number' ? v : 0);

/** Waits until the replicator has nothing waiting and both replicas hold the same items of the workspace. */
const caughtUp = (ws: string): Promise<void> => fx.caughtUp(ws);

/**
 * A workspace made in the home region, credited in each region, on {@link SLICES} slices in each
 * (each region's own slice 0 says so, written by that region, as an operator's `workspace slices`
 * does), replicated to both.
 */
async function workspace(credit: { east: number; west: number }): Promise<string> {
  const ws = await fx.workspace();
  for (const r of [east, west]) {
    const micros = r === east ? credit.east : credit.west;
    // The west's slice 0 is made by its first credit: every region gets one, however small.
    await creditRegion(r.raw, tables(), asRegion(SETUP, r.name), { workspaceId: ws, micros: Math.max(1, micros) });
    expect(await writeSliceCount(lensFor(r.raw, tables(), SETUP, r.name), t('ledger'), ws, undefined, SLICES, SLICES)).toBe(true);
  }
  await caughtUp(ws);
  return ws;
}

/** Two ledger processes per region, each with its own transfer wait (a Lambda instance each). */
function ledgers(): { region: Region; ledger: RegionalLedger; waitMs: number }[] {
  return [east, west].flatMap((region) => WAITS.map((waitMs) => ({ region, waitMs, ledger: new RegionalLedger(region.raw, tables(), { ...asRegion(SETUP, region.name), transferWaitMs: waitMs }) })));
}

/** The key's window items on every key slice of one region, read consistently in that region's replica (only it writes them). */
async function keyWindows(r: Region, ws: string, keyId: string): Promise<{ held: number; settled: number }> {
  const sk = windowKeys.key(keyId, 'monthly', NOW);
  const keys = Array.from({ length: 8 }, (_, k) => ({ pk: regionalPk(keySlicePk(ws, keyId, k), sk, regionTag(SETUP, r.name)), sk }));
  const out = await r.doc.send(new BatchGetCommand({ RequestItems: { [t('ledger')]: { Keys: keys, ConsistentRead: true } } }));
  expect(Object.keys(out.UnprocessedKeys ?? {})).toHaveLength(0);
  const items = out.Responses?.[t('ledger')] ?? [];
  return { held: items.reduce((a, i) => a + num(i.heldMicros), 0), settled: items.reduce((a, i) => a + num(i.settledMicros), 0) };
}

/** What a region's own slices of the workspace hold, read consistently in its replica. */
async function slicesHeld(r: Region, ws: string): Promise<number> {
  const keys = Array.from({ length: SLICES }, (_, i) => {
    const pk = i === 0 ? `WS#${ws}` : `WS#${ws}#S${i}`;
    return { pk: regionalPk(pk, 'BALANCE', regionTag(SETUP, r.name)), sk: 'BALANCE' };
  });
  const out = await r.doc.send(new BatchGetCommand({ RequestItems: { [t('ledger')]: { Keys: keys, ConsistentRead: true } } }));
  return (out.Responses?.[t('ledger')] ?? []).reduce((a, i) => a + num(i.heldMicros), 0);
}

/** The open request rows a region put for the workspace (in its own replica): how many, and what they hold. */
async function openRows(r: Region, ws: string): Promise<{ count: number; micros: number; ids: Set<string> }> {
  const ids = new Set<string>();
  let micros = 0;
  let start: Record<string, unknown> | undefined;
  do {
    const page = await r.doc.send(new ScanCommand({ TableName: t('usage'), ConsistentRead: true, ExclusiveStartKey: start }));
    for (const i of page.Items ?? []) {
      if (i.workspaceId === ws && i.region === r.name && i.state === 'open') {
        ids.add(String(i.requestId));
        micros += num(i.amountMicros);
      }
    }
    start = page.LastEvaluatedKey;
  } while (start !== undefined);
  return { count: ids.size, micros, ids };
}

/** One request as a client makes it: refused after a wait that ran out, or failed as a 503, it is sent again (a new request id) up to {@link RETRIES} times. */
interface Client {
  readonly region: Region;
  readonly ledger: RegionalLedger;
  readonly waitMs: number;
  readonly limits: AdmissionLimits;
  readonly keyId: string;
  /** Start after this many milliseconds (from the race's first refusal, with `afterRefusal`). */
  readonly at: number;
  readonly afterRefusal: boolean;
  /** The wave it belongs to. */
  readonly wave: number;
  /** Retry a refusal that came only after the wait ran out (the experimental 503 behaviour). */
  readonly retryAfterWait: boolean;
}

interface Tally {
  admitted: { region: string; holdId: string; limit: number }[];
  refusals: Map<string, number>;
  /** Refusals whose own figures (widened with the other regions') say the whole could cover: a transfer was under way when the wait ran out. */
  waitedOut: number;
  /** Admissions that failed (thrown: a 503). */
  failures: Map<string, number>;
  retries: number;
  /** Resolves at the race's first refusal (or when the first wave is done without one). */
  readonly refused: Promise<void>;
  readonly markRefused: () => void;
}


/** Whether a refusal's own figures (widened with the other regions' as replicated) say the whole could have covered the request. */
function coverableRefusal(refusal: Refusal, amount: number): boolean {
  if (refusal.kind === 'key_limit_exceeded') return refusal.settledMicros + refusal.heldMicros + amount <= refusal.limitMicros;
  if (refusal.kind === 'insufficient_credit') return refusal.availableMicros >= amount;
  return false;
}

async function runClient(c: Client, ws: string, amount: number, tally: Tally): Promise<void> {
  if (c.afterRefusal) await tally.refused;
  await sleep(c.at);
  for (let attempt = 0; attempt <= RETRIES; attempt += 1) {
    const r = request(ws, amount, { limits: c.limits, keyId: c.keyId });
    let again = false;
    try {
      const out = await c.ledger.admit(r);
      if (out.admitted) {
        tally.admitted.push({ region: c.region.name, holdId: out.hold.holdId, limit: c.limits.keyLimitMicros ?? -1 });
        return;
      }
      tally.markRefused();
      const kind = out.refusal.kind;
      tally.refusals.set(kind, (tally.refusals.get(kind) ?? 0) + 1);
      // Refused though every region's figures (as this region read them) could cover: a transfer was under way when the wait ran out.
      const coverable = coverableRefusal(out.refusal, amount);
      if (coverable) tally.waitedOut += 1;
      // A refusal this version may name for a store that could not answer in time: retried as a 503.
      again = (coverable && c.retryAfterWait) || !['key_limit_exceeded', 'insufficient_credit'].includes(kind);
    } catch (err) {
      const name = err instanceof Error ? err.name : String(err);
      tally.failures.set(name, (tally.failures.get(name) ?? 0) + 1);
      again = true;
    }
    if (!again) return;
    tally.retries += 1;
    await sleep(20 + Math.floor(Math.random() * 80));
  }
}

/**
 * A wave of clients: how many, what share of them in the east, when it starts (ms; from the
 * race's first refusal with `afterRefusal`, so the waves overlap the same way however loaded the
 * machine), and over how long its clients start.
 */
interface Wave {
  readonly size: number;
  readonly east: number;
  readonly at: number;
  readonly afterRefusal: boolean;
  readonly spreadMs: number;
}

/**
 * The default race: one wave all in the east (it runs out of its share and asks the idle west),
 * one all in the west as the east's first asks cross (the west answers while its own clients
 * spend, runs out, and asks the east back while the east still asks it: asks and gives cross),
 * and an even one, each spread over both ledger processes of its region.
 */
const WAVES: readonly Wave[] = [
  { size: 70, east: 1, at: 0, afterRefusal: false, spreadMs: 100 },
  { size: 70, east: 0, at: 250, afterRefusal: true, spreadMs: 150 },
  { size: 50, east: 0.5, at: 800, afterRefusal: true, spreadMs: 300 },
];

/** The same shape, smaller, for the races beside the main one. */
const SMALL_WAVES: readonly Wave[] = WAVES.map((w) => ({ ...w, size: Math.round(w.size * 0.7) }));

function waves(limitsAt: (wave: number) => AdmissionLimits, plan: readonly Wave[], retryAfterWait: boolean, keyId = KEY): Client[] {
  const processes = ledgers();
  const clients: Client[] = [];
  for (const [w, wave] of plan.entries()) {
    for (let i = 0; i < wave.size; i += 1) {
      const inEast = i < Math.round(wave.size * wave.east);
      const candidates = processes.filter((p) => p.region === (inEast ? east : west));
      const p = candidates[i % candidates.length] as (typeof processes)[number];
      const at = wave.at + Math.floor(Math.random() * wave.spreadMs);
      clients.push({ region: p.region, ledger: p.ledger, waitMs: p.waitMs, limits: limitsAt(w), keyId, at, afterRefusal: wave.afterRefusal, wave: w, retryAfterWait });
    }
  }
  return clients;
}

/** Reads a quantity's counters on each region's transfer item (in that region's own replica). */
async function transferCounters(ws: string, q: Quantity): Promise<{ eastAsked: number; eastSent: number; westAsked: number; westSent: number; inTransit: number }> {
  const read = async (r: Region): Promise<Record<string, unknown> | undefined> =>
    (await r.doc.send(new GetCommand({ TableName: t('ledger'), Key: { pk: `${transferPk(ws)}${regionTag(SETUP, r.name)}`, sk: quantityId(q) }, ConsistentRead: true }))).Item;
  const [e, w] = [peerCounters(await read(east), WEST), peerCounters(await read(west), HOME)];
  return { eastAsked: e.asked, eastSent: e.sent, westAsked: w.asked, westSent: w.sent, inTransit: e.sent - w.recv + (w.sent - e.recv) };
}

/** While `running`, reads both regions' key windows over and over: the largest sum over both regions seen, and whether any region's held ever went down (nothing settles during the race). */
function watchKeyWindows(ws: string, keyId: string): { stop: () => Promise<{ maxSum: number; reads: number; wentDown: string[] }> } {
  let running = true;
  let maxSum = 0;
  let reads = 0;
  const last = new Map<string, number>();
  const wentDown: string[] = [];
  const loop = (async () => {
    while (running) {
      let sum = 0;
      for (const r of [east, west]) {
        const w = await keyWindows(r, ws, keyId);
        if (w.held < (last.get(r.name) ?? 0)) wentDown.push(`${r.name}: ${last.get(r.name)} -> ${w.held}`);
        last.set(r.name, w.held);
        sum += w.held + w.settled;
      }
      // Each region's figure only grows during the race, so a sum of two reads made one after the other is at most the true sum at the second read.
      maxSum = Math.max(maxSum, sum);
      reads += 1;
      await sleep(100);
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return { maxSum, reads, wentDown };
    },
  };
}

function newTally(): Tally {
  let markRefused = (): void => undefined;
  const refused = new Promise<void>((resolve) => {
    markRefused = resolve;
  });
  return { admitted: [], refusals: new Map(), waitedOut: 0, failures: new Map(), retries: 0, refused, markRefused };
}

/** Runs a race's clients: the later waves start from its first refusal, or once the first wave is done without one. */
async function race(clients: readonly Client[], ws: string, tally: Tally): Promise<void> {
  const first = Promise.all(clients.filter((c) => c.wave === 0).map((c) => runClient(c, ws, HOLD, tally))).then(() => tally.markRefused());
  await Promise.all([first, ...clients.filter((c) => c.wave !== 0).map((c) => runClient(c, ws, HOLD, tally))]);
}

const holds = (micros: number): string => (micros / HOLD).toFixed(2);

/** What every race's log line gives: refusals, waits, failures and retries, the asks and gives between the regions in holds, each region's writes. */
function raceFigures(ws: string, tally: Tally, counters: { eastAsked: number; eastSent: number; westAsked: number; westSent: number }): Record<string, unknown> {
  return {
    refusals: Object.fromEntries(tally.refusals),
    waitedOut: tally.waitedOut,
    failures: Object.fromEntries(tally.failures),
    retries: tally.retries,
    askedHolds: { eastOfWest: holds(counters.eastAsked), westOfEast: holds(counters.westAsked) },
    sentHolds: { eastToWest: holds(counters.eastSent), westToEast: holds(counters.westSent) },
    writes: { [HOME]: east.writes.get(ws), [WEST]: west.writes.get(ws) },
  };
}

/** What the race did, for the log: the figures the report gives per run. */
function figures(label: string, f: Record<string, unknown>): void {
  console.log(`regions-stress ${label}: ${JSON.stringify(f)}`);
}

/** Checks a key race's end state: rows are what was admitted, windows hold what the rows hold, the sum fits. */
async function expectKeyFits(ws: string, keyId: string, tally: Tally, limit: number): Promise<{ held: number }> {
  let held = 0;
  for (const r of [east, west]) {
    const rows = await openRows(r, ws);
    const mine = tally.admitted.filter((a) => a.region === r.name);
    expect({ region: r.name, rows: rows.count }).toEqual({ region: r.name, rows: mine.length });
    expect(mine.every((a) => rows.ids.has(a.holdId))).toBe(true);
    const w = await keyWindows(r, ws, keyId);
    expect({ region: r.name, windowsHold: w.held + w.settled }).toEqual({ region: r.name, windowsHold: rows.micros });
    held += w.held + w.settled;
  }
  expect(held).toBeLessThanOrEqual(limit);
  expect(tally.admitted.length).toBeLessThanOrEqual(Math.floor(limit / HOLD));
  return { held };
}

describe('regional limits under crossing asks and gives', () => {
  // Several runs of each, retrying refusals after a wait that ran out (the experimental 503) or not.
  test('a key limit fitting 70 holds, hundreds of admissions over both regions, refusals after a wait retried: never more than the limit, summed, at any moment', async () => {
    const retryAfterWait = true;
    const ws = await workspace({ east: 1_000 * HOLD, west: 1_000 * HOLD });
    const limit = 70 * HOLD + ODD;
    const limits: AdmissionLimits = { ...OPEN, keyLimitMicros: limit, keyWindow: 'monthly' };
    const tally = newTally();
    const watch = watchKeyWindows(ws, KEY);
    const started = Date.now();
    await race(waves(() => limits, WAVES, retryAfterWait), ws, tally);
    const raceMs = Date.now() - started;
    const seen = await watch.stop();
    const counters = await transferCounters(ws, { kind: 'key', keyId: KEY, windowSk: windowKeys.key(KEY, 'monthly', NOW), limitMicros: limit });
    const { held } = await expectKeyFits(ws, KEY, tally, limit);
    figures('key', {
      retryAfterWait,
      admitted: tally.admitted.length,
      fits: Math.floor(limit / HOLD),
      byRegion: { [HOME]: tally.admitted.filter((a) => a.region === HOME).length, [WEST]: tally.admitted.filter((a) => a.region === WEST).length },
      heldHolds: holds(held),
      maxSumSeenHolds: holds(seen.maxSum),
      watchReads: seen.reads,
      ...raceFigures(ws, tally, counters),
      raceMs,
    });
    expect(seen.wentDown).toEqual([]);
    expect(seen.maxSum).toBeLessThanOrEqual(limit);
    // The race moved headroom both ways (else it tested nothing of the transfers).
    expect(counters.eastAsked + counters.westAsked).toBeGreaterThan(0);
    expect(counters.eastSent + counters.westSent).toBeGreaterThan(0);
    await caughtUp(ws);
    const after = await transferCounters(ws, { kind: 'key', keyId: KEY, windowSk: windowKeys.key(KEY, 'monthly', NOW), limitMicros: limit });
    expect(after.inTransit).toBe(0);
  });

  test('a poor workspace whose credit fits 60 holds: what the slices hold never exceeds the credit; summed over regions, credited = available + held + spent, plus what is in transit', async () => {
    const credit = { east: 42 * HOLD + ODD, west: 18 * HOLD };
    const total = credit.east + credit.west;
    const ws = await workspace(credit);
    const tally = newTally();
    let maxHeld = 0;
    let running = true;
    const watch = (async () => {
      while (running) {
        maxHeld = Math.max(maxHeld, (await slicesHeld(east, ws)) + (await slicesHeld(west, ws)));
        await sleep(100);
      }
    })();
    await race(waves(() => OPEN, SMALL_WAVES, true), ws, tally);
    running = false;
    await watch;
    let held = 0;
    for (const r of [east, west]) {
      const rows = await openRows(r, ws);
      const mine = tally.admitted.filter((a) => a.region === r.name);
      expect({ region: r.name, rows: rows.count }).toEqual({ region: r.name, rows: mine.length });
      const slices = await slicesHeld(r, ws);
      expect({ region: r.name, slicesHold: slices }).toEqual({ region: r.name, slicesHold: rows.micros });
      held += slices;
    }
    const counters = await transferCounters(ws, { kind: 'credit' });
    figures('credit', {
      admitted: tally.admitted.length,
      fits: Math.floor(total / HOLD),
      heldHolds: holds(held),
      maxHeldSeenHolds: holds(maxHeld),
      ...raceFigures(ws, tally, counters),
    });
    expect(held).toBeLessThanOrEqual(total);
    expect(maxHeld).toBeLessThanOrEqual(total);
    expect(tally.admitted.length).toBeLessThanOrEqual(Math.floor(total / HOLD));
    // The race moved credit (else it tested nothing of the transfers).
    expect(counters.eastAsked + counters.westAsked).toBeGreaterThan(0);
    expect(counters.eastSent + counters.westSent).toBeGreaterThan(0);
    await caughtUp(ws);
    for (const r of [east, west]) {
      const b = await readRegionalBalance(r.doc, tables(), SETUP, ws);
      expect(b.creditedMicros + b.inTransitMicros).toBe(total);
      expect(b.availableMicros + b.heldMicros + b.spentMicros).toBe(b.creditedMicros);
      expect(b.heldMicros).toBe(held);
      expect(b.inTransitMicros).toBe(0);
      for (const m of b.regions) expect(m.availableMicros).toBeGreaterThanOrEqual(0);
    }
  });

  test('a key limit raised mid-race: what the requests made under the first limit hold fits it, and the whole fits the second', async () => {
    const ws = await workspace({ east: 1_000 * HOLD, west: 1_000 * HOLD });
    const first = 50 * HOLD + ODD;
    const second = 80 * HOLD + ODD;
    // The first wave's clients carry the first limit; the later waves (from the first refusal on, while the first wave's admissions, waits and transfers are still in flight) the second, as gateways whose cached key record changed.
    const limitsAt = (wave: number): AdmissionLimits => ({ ...OPEN, keyWindow: 'monthly', keyLimitMicros: wave === 0 ? first : second });
    const tally = newTally();
    const watch = watchKeyWindows(ws, KEY);
    await race(waves(limitsAt, SMALL_WAVES, false), ws, tally);
    const seen = await watch.stop();
    const { held } = await expectKeyFits(ws, KEY, tally, second);
    const underFirst = tally.admitted.filter((a) => a.limit === first).length;
    figures('key limit raised', {
      admitted: tally.admitted.length,
      underFirst,
      fitsFirst: Math.floor(first / HOLD),
      fitsSecond: Math.floor(second / HOLD),
      heldHolds: holds(held),
      maxSumSeenHolds: holds(seen.maxSum),
      refusals: Object.fromEntries(tally.refusals),
      waitedOut: tally.waitedOut,
      failures: Object.fromEntries(tally.failures),
      retries: tally.retries,
      writes: { [HOME]: east.writes.get(ws), [WEST]: west.writes.get(ws) },
    });
    expect(underFirst * HOLD).toBeLessThanOrEqual(first);
    expect(seen.wentDown).toEqual([]);
    expect(seen.maxSum).toBeLessThanOrEqual(second);
  });

  test('a key limit set on a window nobody tracked, armed in the home region while the gateways still count it: never more than the limit, summed, once the home region enforces it', async () => {
    const ws = await workspace({ east: 1_000 * HOLD, west: 1_000 * HOLD });
    const keyId = 'key_armed';
    const limit = 70 * HOLD + ODD;
    // Tracking began an hour before the race's "now", in the same month: the window has a base to arm.
    const trackFrom = NOW - 3_600_000;
    const keyHash = `h${randomBytes(8).toString('hex')}`;
    await east.doc.send(new PutCommand({ TableName: t('keys'), Item: { keyHash, keyId, workspaceId: ws, creditLimitMicros: limit, creditWindow: 'monthly', creditTrackFrom: trackFrom } }));
    // The management API's arming, in the home region (its configuration home): it returns once the base is written and the record says armed.
    await armWindow({ doc: east.doc, tablePrefix: prefix, stage: 'test', now: () => NOW, cacheTtlMs: 1_000 }, { kind: 'key', workspaceId: ws, keyId, keyHash, cadence: 'monthly', generation: trackFrom });
    // Gateways whose cached key record does not say armed yet (in the other region, until the record's replica and their caches catch up) still send the arming's limits.
    const limits: AdmissionLimits = { ...OPEN, keyWindow: 'monthly', keyLimitMicros: limit, keyLimitArming: true, keyWindowGeneration: trackFrom };
    const tally = newTally();
    await race(waves(() => limits, [{ size: 120, east: 0.5, at: 0, afterRefusal: false, spreadMs: 200 }], false, keyId), ws, tally);
    let held = 0;
    const sk = windowKeys.key(keyId, 'monthly', NOW, trackFrom);
    for (const r of [east, west]) {
      const keys = Array.from({ length: 8 }, (_, k) => ({ pk: regionalPk(keySlicePk(ws, keyId, k), sk, regionTag(SETUP, r.name)), sk }));
      const out = await r.doc.send(new BatchGetCommand({ RequestItems: { [t('ledger')]: { Keys: keys, ConsistentRead: true } } }));
      held += (out.Responses?.[t('ledger')] ?? []).reduce((a, i) => a + num(i.heldMicros) + num(i.settledMicros), 0);
    }
    figures('armed', { admitted: tally.admitted.length, fits: Math.floor(limit / HOLD), byRegion: { [HOME]: tally.admitted.filter((a) => a.region === HOME).length, [WEST]: tally.admitted.filter((a) => a.region === WEST).length }, heldHolds: holds(held), refusals: Object.fromEntries(tally.refusals) });
    expect(held).toBeLessThanOrEqual(limit);
    expect(tally.admitted.length).toBeLessThanOrEqual(Math.floor(limit / HOLD));
  });
});

describe("what a region lent its own key slices, given to another region", () => {
  /** One request on each of the workspace's slices 1..SLICES-1, so on each key slice j > 0: key slice 0 lends each of them part of its room. */
  function offSliceZero(ws: string, limits: AdmissionLimits): AdmitRequest[] {
    const out: AdmitRequest[] = [];
    for (let slice = 1; slice < SLICES; slice += 1) {
      let r = request(ws, HOLD, { limits });
      while (shardOf(r.holdId, SLICES) !== slice) r = request(ws, HOLD, { limits });
      out.push(r);
    }
    return out;
  }

  /** One region's ledger process with a wait long enough for any transfer on a quiet fixture. */
  const patient = (r: Region): RegionalLedger => new RegionalLedger(r.raw, tables(), { ...asRegion(SETUP, r.name), transferWaitMs: 20_000 });

  /** The west admits one request after another until one is refused: how many, and the refusal. */
  async function westUntilRefused(ws: string, limits: AdmissionLimits, most: number): Promise<{ admitted: number; refusal: string | undefined }> {
    const west1 = patient(west);
    for (let i = 0; i < most; i += 1) {
      const out = await west1.admit(request(ws, HOLD, { limits }));
      if (!out.admitted) return { admitted: i, refusal: out.refusal.kind };
    }
    return { admitted: most, refusal: undefined };
  }

  test("a key limit: the giver takes back what its key slice 0 lent its other key slices before it gives; one request after another, exactly what fits is admitted, and the next is refused 402", async () => {
    const ws = await workspace({ east: 1_000 * HOLD, west: 1_000 * HOLD });
    const limit = 20 * HOLD + ODD;
    const limits: AdmissionLimits = { ...OPEN, keyLimitMicros: limit, keyWindow: 'monthly' };
    const east1 = patient(east);
    for (const r of offSliceZero(ws, limits)) expect((await east1.admit(r)).admitted).toBe(true);
    // The east's key slice 0 lent its other key slices more than those three spent (a fair part of what was left each time).
    const sk = windowKeys.key(KEY, 'monthly', NOW);
    const zero = await east.doc.send(new GetCommand({ TableName: t('ledger'), Key: { pk: regionalPk(keySlicePk(ws, KEY, 0), sk, regionTag(SETUP, HOME)), sk }, ConsistentRead: true }));
    expect(num(zero.Item?.givenMicros)).toBeGreaterThan(6 * HOLD);
    await caughtUp(ws);
    const west1 = await westUntilRefused(ws, limits, 40);
    figures('lent key slices, key limit', { east: 3, west: west1.admitted, fits: Math.floor(limit / HOLD), refusal: west1.refusal });
    expect({ admitted: 3 + west1.admitted, refusal: west1.refusal }).toEqual({ admitted: Math.floor(limit / HOLD), refusal: 'key_limit_exceeded' });
    // What both regions' key windows hold is exactly what was admitted: every give was counted once on each side.
    let held = 0;
    for (const r of [east, west]) {
      const w = await keyWindows(r, ws, KEY);
      held += w.held + w.settled;
    }
    expect(held).toBe(Math.floor(limit / HOLD) * HOLD);
  });

  // The minute counts on the key's request counter, or on its key window's item when its credit limit is tracked.
  test.each([
    { place: 'on its request counter', window: false },
    { place: "on its key window's item", window: true },
  ])("a key's request rate, $place: the giver takes back what its key slice 0 lent its other key slices before it gives; exactly the rate is admitted in the minute, and the next is refused 429", async ({ window }) => {
    const ws = await workspace({ east: 1_000 * HOLD, west: 1_000 * HOLD });
    const rate = 41;
    const limits: AdmissionLimits = { ...OPEN, keyRatePerMinute: rate, ...(window ? { keyLimitMicros: 1_000 * HOLD, keyWindow: 'monthly', keyRateWindow: windowKeys.key(KEY, 'monthly', NOW) } : {}) };
    const east1 = patient(east);
    for (const r of offSliceZero(ws, limits)) expect((await east1.admit(r)).admitted).toBe(true);
    await caughtUp(ws);
    const west1 = await westUntilRefused(ws, limits, 60);
    figures('lent key slices, rate', { window, east: 3, west: west1.admitted, fits: rate, refusal: west1.refusal });
    expect({ admitted: 3 + west1.admitted, refusal: west1.refusal }).toEqual({ admitted: rate, refusal: 'rate_limit_exceeded' });
  });
});
