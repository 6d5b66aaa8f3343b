/**
 * The regional ledger on two DynamoDB Locals of its own ("us-east-1", the home region, and
 * "us-west-2") joined by the local replicator (global tables' last writer wins, replicated writes
 * in the other stream), each region with its own ledger process and transfer agent: 200-way races
 * on a balance and on a key limit split between the regions admit exactly what fits, summed; an
 * urgent transfer brings a short region what the other has; a transfer is credited exactly once
 * under replays and racing receivers; every write a region makes is to its own items; after
 * replication catches up, credited = available + held + spent summed over both regions (plus what
 * is in transit: nothing); each region's sweeper settles only its own holds; each usage row is
 * counted once though both streams carry it.
 */
import { randomBytes } from 'node:crypto';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, GetCommand, TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { DynamoDBStreamEvent } from 'aws-lambda';
import type { DocumentSender, DynamoWire } from '../../lambdas/adapters/dynamo-wire';
import { aggregate } from '../../lambdas/aggregator/aggregate';
import { USAGE_STREAM_FILTERS } from '../../lambdas/aggregator/mapping';
import { regionUsageFilters } from '../../lib/aggregator';
import { readUsage } from '../../lambdas/aggregator/read';
import type { AdmissionLimits, AdmitRequest } from '../../lambdas/gateway/ports';
import type { HoldRecord } from '../../lambdas/shared/records';
import { tableName } from '../../lambdas/shared/schema';
import { ROLLUP_SK, rollupPk } from '../../lambdas/store/rollups';
import { requestRowKey } from '../../lambdas/store/keys';
import { requestIdDigits } from '../../lambdas/core/request-id';
import { readBalanceEverywhere, readRegionalBalance } from '../../lambdas/store/regions-balance';
import { RegionalLedger } from '../../lambdas/store/regions-ledger';
import { RegionTransfers } from '../../lambdas/store/regions-transfers';
import { asRegion, regionTag, type RegionSetup } from '../../lambdas/store/regions';
import { handleTransferRecords } from '../../lambdas/transfer/agent';
import { sweep } from '../../lambdas/sweeper/sweep';
import type { DynamoLocal } from '../../local/dynamo-local';
import type { LocalTransferAgent } from '../../local/regions/transfer-agent';
import { startStreamPoller } from '../../local/stream-poller';
import { NOW, OPEN, requestsTagged, settlement } from '../support/ledger-fixtures';
import { HOME, race as raceIn, settleAll as settleHolds, startTwoRegions, WEST, type TwoRegions } from '../support/two-regions';

jest.setTimeout(600_000);

const SETUP: RegionSetup = { regions: [HOME, WEST], region: HOME, weights: [1, 1], transferWaitMs: 15_000 };
const COST = 1_000;

/** One write a region's processes sent: the table, the item's key, and (a request row) the region it says it is. */
interface Written {
  readonly table: string;
  readonly pk: string;
  readonly region?: unknown;
}

/** Records every item a sender writes (transactions, updates, puts) and passes the call on. */
function recording(inner: DocumentSender, log: Written[]): DocumentSender {
  const note = (table: string | undefined, key: Record<string, unknown> | undefined, region?: unknown): void => {
    if (table !== undefined && key !== undefined) log.push({ table, pk: String(key.pk), ...(region !== undefined ? { region } : {}) });
  };
  const send = async (command: Parameters<DocumentSender['send']>[0]): Promise<unknown> => {
    if (command instanceof TransactWriteCommand) {
      for (const t of command.input.TransactItems ?? []) {
        if (t.Put !== undefined) note(t.Put.TableName, t.Put.Item, t.Put.Item?.region ?? 'none');
        if (t.Update !== undefined) note(t.Update.TableName, t.Update.Key);
        if (t.Delete !== undefined) note(t.Delete.TableName, t.Delete.Key);
      }
    }
    if (command instanceof UpdateCommand) note(command.input.TableName, command.input.Key);
    return (inner.send as (c: typeof command) => Promise<unknown>).call(inner, command);
  };
  return { send } as DocumentSender;
}

interface Region {
  readonly name: string;
  readonly db: DynamoLocal;
  readonly client: DynamoDBClient;
  readonly doc: DynamoDBDocumentClient;
  readonly wire: DynamoWire;
  readonly writes: Written[];
  readonly raw: DocumentSender;
  ledger: RegionalLedger;
  agent?: LocalTransferAgent;
}

let fx: TwoRegions<{ writes: Written[] }>;
let prefix: string;
let east: Region;
let west: Region;
const t = (name: Parameters<typeof tableName>[1]): string => tableName(prefix, name);
const tables = (): { ledger: string; usage: string } => ({ ledger: t('ledger'), usage: t('usage') });

beforeAll(async () => {
  fx = await startTwoRegions({ tag: 'r', setup: SETUP, lagMs: 200, extra: () => ({ writes: [] as Written[] }), wrap: (inner, r) => recording(inner, r.writes) });
  prefix = fx.prefix;
  // The fixture's own region objects (a test may start another agent on one: the fixture stops whichever is there).
  east = Object.assign(fx.east, { ledger: new RegionalLedger(fx.east.raw, tables(), asRegion(SETUP, HOME)) });
  west = Object.assign(fx.west, { ledger: new RegionalLedger(fx.west.raw, tables(), asRegion(SETUP, WEST)) });
}, 300_000);

afterAll(async () => {
  await fx?.stop();
});

const request = requestsTagged('g');

/** Every item of a table a replica holds (minute counters aside), by key. */
const ledgerItems = (r: Region, table: 'ledger' | 'usage' = 'ledger'): Promise<Map<string, unknown>> => fx.items(r, table);

/** Waits for replication to catch up (every ledger and usage item the same in both replicas). */
const caughtUp = (): Promise<void> => fx.caughtUp();

/** A workspace made in the home region (its home slice 0, as the management API makes it), replicated to the other. */
const workspace = (): Promise<string> => fx.workspace();

const credit = (region: Region, ws: string, micros: number): Promise<void> => fx.credit(region, ws, micros);

/** Every request at once; one refused `in_transit` is retried as a client would (`race` in the fixture). */
const race = (requests: { region: Region; request: AdmitRequest }[]): Promise<{ admitted: Map<string, HoldRecord[]>; refused: string[] }> => raceIn(requests);

const settleAll = (region: Region, holds: readonly HoldRecord[], charge = COST): Promise<void> => settleHolds(region.ledger, holds, settlement(charge));

/** The invariant summed over both regions, read in each region's replica once replication has caught up; both replicas agree. */
const expectInvariant = (ws: string, creditedMicros: number): Promise<void> => fx.expectInvariant(ws, creditedMicros);

/** The region whose partition key this is (the home region's keys carry no tag). */
function ownerOf(pk: string): string {
  const at = pk.indexOf('@');
  return at < 0 ? HOME : (pk.slice(at + 1).split('#')[0] as string);
}

describe('two regions sharing global tables', () => {
  test('a 200-way race on a balance split between two regions admits exactly what each region holds, summed', async () => {
    const ws = await workspace();
    await credit(east, ws, 50 * COST);
    await credit(west, ws, 50 * COST);
    const { admitted, refused } = await race([
      ...Array.from({ length: 100 }, () => ({ region: east, request: request(ws, COST) })),
      ...Array.from({ length: 100 }, () => ({ region: west, request: request(ws, COST) })),
    ]);
    const total = (admitted.get(HOME)?.length ?? 0) + (admitted.get(WEST)?.length ?? 0);
    expect(total).toBe(100);
    expect(refused).toEqual(Array.from({ length: 100 }, () => 'insufficient_credit'));
    await settleAll(east, admitted.get(HOME) ?? []);
    await settleAll(west, admitted.get(WEST) ?? []);
    await expectInvariant(ws, 100 * COST);
    const b = await readRegionalBalance(east.doc, tables(), SETUP, ws);
    expect(b.spentMicros).toBe(100 * COST);
    expect(b.availableMicros).toBe(0);
  });

  test('a region short of credit gets it from the other by an urgent transfer: a 200-way race in the region holding none admits exactly what the other held', async () => {
    const ws = await workspace();
    await credit(east, ws, 60 * COST);
    const { admitted, refused } = await race(Array.from({ length: 200 }, () => ({ region: west, request: request(ws, COST) })));
    expect(admitted.get(WEST)?.length).toBe(60);
    expect(refused).toEqual(Array.from({ length: 140 }, () => 'insufficient_credit'));
    await settleAll(west, admitted.get(WEST) ?? []);
    await expectInvariant(ws, 60 * COST);
    const b = await readRegionalBalance(west.doc, tables(), SETUP, ws);
    const [home, other] = b.regions;
    expect(home?.sentMicros).toBe(60 * COST);
    expect(other?.receivedMicros).toBe(60 * COST);
    expect(b.inTransitMicros).toBe(0);
    // The balance an operator reads (workspace show, the management API) sums both regions.
    const summed = await readBalanceEverywhere(west.doc, tables(), SETUP, ws, NOW);
    expect([summed.creditedMicros, summed.spentMicros, summed.availableMicros, summed.heldMicros]).toEqual([60 * COST, 60 * COST, 0, 0]);
  });

  test('a 200-way race on a key limit split between two regions admits exactly the limit, summed; the short region borrows headroom', async () => {
    const ws = await workspace();
    await credit(east, ws, 1_000 * COST);
    await credit(west, ws, 1_000 * COST);
    const limits: AdmissionLimits = { ...OPEN, keyLimitMicros: 100 * COST, keyWindow: 'monthly' };
    // Even: each region's share (50) is what it admits.
    const even = await race([
      ...Array.from({ length: 100 }, () => ({ region: east, request: request(ws, COST, { limits }) })),
      ...Array.from({ length: 100 }, () => ({ region: west, request: request(ws, COST, { limits }) })),
    ]);
    expect((even.admitted.get(HOME)?.length ?? 0) + (even.admitted.get(WEST)?.length ?? 0)).toBe(100);
    expect(new Set(even.refused)).toEqual(new Set(['key_limit_exceeded']));
    await settleAll(east, even.admitted.get(HOME) ?? []);
    await settleAll(west, even.admitted.get(WEST) ?? []);

    // Uneven, on a new key: every request in the west, which borrows the east's share.
    const key2 = { ...limits };
    const uneven = await race(Array.from({ length: 200 }, () => ({ region: west, request: request(ws, COST, { limits: key2, keyId: 'key_b' }) })));
    expect(uneven.admitted.get(WEST)?.length).toBe(100);
    expect(uneven.refused).toEqual(Array.from({ length: 100 }, () => 'key_limit_exceeded'));
    await settleAll(west, uneven.admitted.get(WEST) ?? []);
    await expectInvariant(ws, 2_000 * COST);
  });

  test('a transfer is credited exactly once under replayed stream records and racing receivers', async () => {
    const ws = await workspace();
    await credit(east, ws, 10 * COST);
    await east.agent?.stop();
    await west.agent?.stop();
    try {
      const eastX = new RegionTransfers(east.raw, tables(), asRegion(SETUP, HOME));
      const westX = new RegionTransfers(west.raw, tables(), asRegion(SETUP, WEST));
      await westX.ask(ws, { kind: 'credit' }, HOME, 7 * COST);
      await caughtUp();
      expect(await eastX.answer(ws, { kind: 'credit' }, WEST)).toBe(7 * COST);
      // Answered once: a second answer (a redelivered ask) gives nothing.
      expect(await eastX.answer(ws, { kind: 'credit' }, WEST)).toBe(0);
      await caughtUp();
      // The east's transfer item as the west's stream shows it, replayed three times in one batch and in three batches.
      const image = (await west.doc.send(new GetCommand({ TableName: t('ledger'), Key: { pk: `XFER#${ws}`, sk: 'CREDIT' }, ConsistentRead: true }))).Item ?? {};
      const S = (v: unknown): { S: string } => ({ S: String(v) });
      const record = { eventName: 'MODIFY' as const, dynamodb: { NewImage: { pk: S(image.pk), sk: S(image.sk), region: S(image.region), ws: S(image.ws) }, SequenceNumber: '1' } };
      const event = { Records: [record, record, record] } as unknown as DynamoDBStreamEvent;
      const got = await Promise.all([
        ...Array.from({ length: 10 }, () => westX.receive(ws, { kind: 'credit' }, HOME)),
        handleTransferRecords(westX, event),
        handleTransferRecords(westX, event),
        handleTransferRecords(westX, event),
      ]);
      const credited = got.filter((g): g is number => typeof g === 'number').reduce((a, b) => a + b, 0);
      expect(credited).toBeLessThanOrEqual(7 * COST);
      const b = await readRegionalBalance(west.doc, tables(), SETUP, ws);
      expect(b.regions[1]?.creditedMicros).toBe(7 * COST);
      expect(b.regions[1]?.receivedMicros).toBe(7 * COST);
      expect(b.regions[0]?.creditedMicros).toBe(3 * COST);
      await expectInvariant(ws, 10 * COST);
    } finally {
      for (const r of [east, west]) await fx.startAgent(r);
    }
  });

  test('an ask the other region has not answered within the wait is 503 in transit, never a 402 on a rich workspace; its answer brings the asker its part, so the requests after it ask nothing', async () => {
    const ws = await workspace();
    await credit(east, ws, 1_000 * COST);
    await caughtUp();
    await east.agent?.stop();
    try {
      const quick = new RegionalLedger(west.raw, tables(), { ...asRegion(SETUP, WEST), transferWaitMs: 600 });
      expect(await quick.admit(request(ws, COST))).toEqual({ admitted: false, refusal: { kind: 'in_transit', retryAfterSeconds: 1 } });
      // A process that counts a region lost once it left an ask unanswered (here at once): its
      // share is stranded there, not used up, so the next short request is refused at once (not
      // made to wait again, the lost region not asked) with a 503 to retry, never a 402 telling a
      // rich workspace it is out of credit.
      const strict = new RegionalLedger(west.raw, tables(), { ...asRegion(SETUP, WEST), transferWaitMs: 600 }, undefined, 0);
      expect((await strict.admit(request(ws, COST))).admitted).toBe(false);
      const asked = async (): Promise<number> => (await strict.transfers.counters(ws, { kind: 'credit' }))[HOME]?.asked ?? -1;
      const askedBefore = await asked();
      const lost = await strict.admit(request(ws, COST));
      expect(lost).toEqual({ admitted: false, refusal: { kind: 'in_transit', retryAfterSeconds: 1 } });
      expect(await asked()).toBe(askedBefore); // no new ask: nothing was waited for
      // More than the lost region holds could cover: that is the workspace's own 402, at once.
      expect(await strict.admit(request(ws, 2_000 * COST))).toMatchObject({ admitted: false, refusal: { kind: 'insufficient_credit', availableMicros: 1_000 * COST } });
      expect(await asked()).toBe(askedBefore);
    } finally {
      await fx.startAgent(east);
    }
    // Answered now: not the one request's cost but at least the west's part (half) of what both
    // hold spare. (The first ask, left unanswered, may be answered on its own, and the giver's view
    // of what the west holds is a replica's: items replicate one by one, so a second answer can
    // see the west's receipt and not yet its slice, and give more. Never more than the east had.)
    const first = await west.ledger.admit(request(ws, COST));
    expect(first.admitted).toBe(true);
    await caughtUp();
    const moved = await readRegionalBalance(west.doc, tables(), SETUP, ws);
    const sent = moved.regions[0]?.sentMicros ?? 0;
    expect(sent).toBeGreaterThanOrEqual(500 * COST);
    expect(sent).toBeLessThanOrEqual(1_000 * COST);
    expect(moved.regions.map((r) => [r.region, r.sentMicros, r.receivedMicros])).toEqual([
      [HOME, sent, 0],
      [WEST, 0, sent],
    ]);
    // Forty more in the west are served from what came: no further move.
    const more = await race(Array.from({ length: 40 }, () => ({ region: west, request: request(ws, COST) })));
    expect(more.admitted.get(WEST)?.length).toBe(40);
    await caughtUp();
    const after = await readRegionalBalance(west.doc, tables(), SETUP, ws);
    expect(after.regions.map((r) => r.sentMicros)).toEqual([sent, 0]);
    if (first.admitted) await settleAll(west, [first.hold]);
    await settleAll(west, more.admitted.get(WEST) ?? []);
    await expectInvariant(ws, 1_000 * COST);
  });

  test("a stream's hold that outgrows its region's share asks the other region for the rest, as an admission does, and grows; past what both hold it is cut", async () => {
    const ws = await workspace();
    await credit(east, ws, 100 * COST);
    await caughtUp();
    // The west holds nothing: its first request asks, and gets its part of what both hold spare.
    const first = await west.ledger.admit(request(ws, COST));
    if (!first.admitted) throw new Error('the first request in the west was refused');
    await caughtUp();
    const before = await readRegionalBalance(west.doc, tables(), SETUP, ws);
    const westSpare = before.regions[1]?.availableMicros ?? 0;
    expect(westSpare).toBeGreaterThan(0);
    expect(before.regions[0]?.availableMicros).toBeGreaterThan(10 * COST);
    // Grown by more than the west holds, less than both hold: the west asks, the east gives, the hold grows.
    const extra = westSpare + 5 * COST;
    expect(await west.ledger.extend(first.hold, extra, OPEN, NOW + 500)).toBe(true);
    const grown = { ...first.hold, amountMicros: first.hold.amountMicros + extra };
    // Past what both hold: cut (the stream ends balance_exhausted), nothing held for it.
    expect(await west.ledger.extend(grown, 200 * COST, OPEN, NOW + 600)).toBe(false);
    // Settled on what it produced: the invariant summed over both regions, the grown hold given back whole.
    expect(await west.ledger.settle(grown, settlement(extra))).toBe(true);
    await expectInvariant(ws, 100 * COST);
    const after = await readRegionalBalance(west.doc, tables(), SETUP, ws);
    expect({ held: after.heldMicros, spent: after.spentMicros }).toEqual({ held: 0, spent: extra });
  });

  test("a store fault while reading the other region's figures is a 503 to retry, not a 402: whether it could cover the request is unknown", async () => {
    const ws = await workspace();
    await credit(west, ws, 10 * COST);
    await caughtUp();
    // The east's database, failing every read of the west's items (its tagged keys) as a store fault would.
    const failing: DocumentSender = {
      send: ((command: { input?: { Key?: { pk?: unknown } } }) => {
        if (command instanceof GetCommand && String(command.input.Key?.pk ?? '').includes(`@${WEST}`)) return Promise.reject(Object.assign(new Error('no answer in time'), { code: 'ETIMEDOUT' }));
        return (east.raw.send as (c: unknown) => Promise<unknown>)(command);
      }) as DocumentSender['send'],
    } as DocumentSender;
    const faulty = new RegionalLedger(failing, tables(), { ...asRegion(SETUP, HOME), transferWaitMs: 2_000 });
    expect(await faulty.admit(request(ws, COST))).toEqual({ admitted: false, refusal: { kind: 'in_transit', retryAfterSeconds: 1 } });
    // With the store answering, the same request is served from the west's credit.
    const served = await east.ledger.admit(request(ws, COST));
    expect(served.admitted).toBe(true);
    if (served.admitted) await settleAll(east, [served.hold]);
    await expectInvariant(ws, 10 * COST);
  });

  test("a top-up in the home region not yet replicated is asked for, never refused 402 on the home's stale zero; a workspace with no credit anywhere still gets its 402 from the home's answer", async () => {
    const ws = await workspace();
    const wait = { ...asRegion(SETUP, WEST), transferWaitMs: 1_500 };
    fx.replicator.setLag(600_000);
    try {
      // Topped up in the home while nothing replicates: the west's replica shows the home with no credit ever.
      await credit(east, ws, 10 * COST);
      const early = new RegionalLedger(west.raw, tables(), wait);
      expect(await early.admit(request(ws, COST))).toEqual({ admitted: false, refusal: { kind: 'in_transit', retryAfterSeconds: 1 } });
      const asked = (await early.transfers.counters(ws, { kind: 'credit' }))[HOME]?.asked ?? 0;
      expect(asked).toBeGreaterThanOrEqual(COST);
    } finally {
      fx.replicator.setLag(200);
    }
    // Replication flows again: the ask reaches the home, its answer comes back, the retry is served.
    let served: Awaited<ReturnType<RegionalLedger['admit']>> | undefined;
    for (let attempt = 0; attempt < 60 && served?.admitted !== true; attempt += 1) {
      served = await west.ledger.admit(request(ws, COST));
      if (!served.admitted) {
        expect(served.refusal.kind).toBe('in_transit');
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    }
    expect(served?.admitted).toBe(true);
    if (served?.admitted) await settleAll(west, [served.hold]);
    await expectInvariant(ws, 10 * COST);

    // Never funded: the west asks (the home's zero could be a top-up on its way), the home answers
    // with nothing left, and that answer is the 402.
    const broke = await workspace();
    const none = await west.ledger.admit(request(broke, COST));
    expect(none).toMatchObject({ admitted: false, refusal: { kind: 'insufficient_credit' } });
    const askedOnce = (await west.ledger.transfers.counters(broke, { kind: 'credit' }))[HOME]?.asked ?? 0;
    expect(askedOnce).toBeGreaterThan(0);
    // Once the home has answered, its zero is believed: refused at once, with no new ask.
    await caughtUp();
    expect(await west.ledger.admit(request(broke, COST))).toMatchObject({ admitted: false, refusal: { kind: 'insufficient_credit' } });
    expect((await west.ledger.transfers.counters(broke, { kind: 'credit' }))[HOME]?.asked ?? 0).toBe(askedOnce);
    await expectInvariant(broke, 0);
  });

  test("each region's sweeper settles only its own holds", async () => {
    const ws = await workspace();
    await credit(east, ws, 10 * COST);
    await credit(west, ws, 10 * COST);
    const soon = { now: NOW, expiresAt: NOW + 1 };
    const e = await east.ledger.admit(request(ws, COST, soon));
    const w = await west.ledger.admit(request(ws, COST, soon));
    expect(e.admitted && w.admitted).toBe(true);
    await caughtUp();
    // While a region is lost its share is stranded: neither spent nor lost, shown to the operator.
    const lost = await readRegionalBalance(west.doc, tables(), SETUP, ws, [HOME]);
    expect(lost.strandedMicros).toBe(10 * COST);
    expect(lost.regions.map((r) => [r.region, r.down, r.heldMicros])).toEqual([
      [HOME, true, COST],
      [WEST, false, COST],
    ]);
    const sweepIn = (r: Region): ReturnType<typeof sweep> =>
      sweep({ doc: r.doc, usageTable: t('usage'), ledger: r.ledger, stage: 'test', writeLine: () => undefined, region: { name: r.name, tag: regionTag(SETUP, r.name) } }, NOW + 10_000);
    expect((await sweepIn(east)).swept).toBe(1);
    expect((await sweepIn(west)).swept).toBe(1);
    // A failed admission's release gives back on its own region's items, and a release of one that
    // never landed leaves a tombstone row that says whose it is.
    const id = (): string => `req_${requestIdDigits(NOW, randomBytes(7).toString('hex'))}`;
    const landed = await west.ledger.admit(request(ws, COST, { holdId: id() }));
    expect(landed.admitted).toBe(true);
    if (landed.admitted) await west.ledger.release(ws, landed.hold.holdId, NOW + 1000);
    const never = id();
    await west.ledger.release(ws, never, NOW + 1000);
    const tomb = (await west.doc.send(new GetCommand({ TableName: t('usage'), Key: requestRowKey(ws, never, NOW), ConsistentRead: true }))).Item;
    expect([tomb?.state, tomb?.region]).toEqual(['released', WEST]);
    await expectInvariant(ws, 20 * COST);
  });

  test('every item a region wrote is its own, and every request row it put says so', async () => {
    expect(east.writes.length).toBeGreaterThan(100);
    expect(west.writes.length).toBeGreaterThan(100);
    for (const r of [east, west]) {
      for (const w of r.writes) {
        if (w.table === t('ledger')) expect(`${w.pk} ${ownerOf(w.pk)}`).toBe(`${w.pk} ${r.name}`);
        else if (w.region !== undefined) expect(`${w.pk} ${String(w.region)}`).toBe(`${w.pk} ${r.name}`);
      }
    }
    // And every ledger item both replicas hold, written by one region only, is the same in both.
    await caughtUp();
    const [a, b] = [await ledgerItems(east), await ledgerItems(west)];
    expect([...a.keys()].sort()).toEqual([...b.keys()].sort());
    for (const [k, v] of a) expect(b.get(k)).toEqual(v);
  });

  test("each region's aggregator counts only its own rows, though both streams carry every row: each row once", async () => {
    const ws = await workspace();
    await credit(east, ws, 10 * COST);
    await credit(west, ws, 10 * COST);
    const got = await race([...Array.from({ length: 4 }, () => ({ region: east, request: request(ws, COST) })), ...Array.from({ length: 6 }, () => ({ region: west, request: request(ws, COST) }))]);
    await settleAll(east, got.admitted.get(HOME) ?? []);
    await settleAll(west, got.admitted.get(WEST) ?? []);
    await caughtUp();
    const counted = new Map<string, number>();
    for (const r of [east, west]) {
      // Unfiltered, each region's stream carries all ten rows' settlements: its own and the other's, replicated.
      let everySettled = 0;
      const raw = await startStreamPoller({
        endpoint: r.db.endpoint,
        tableName: t('usage'),
        autoStart: false,
        batchSize: 1000,
        handler: async (event) => {
          everySettled += event.Records.filter((x) => x.dynamodb?.NewImage?.workspaceId?.S === ws && x.dynamodb?.NewImage?.state?.S === 'settled').length;
        },
      });
      await raw.drain();
      await raw.stop();
      expect(everySettled).toBe(10);
      let handed = 0;
      const poller = await startStreamPoller({
        endpoint: r.db.endpoint,
        tableName: t('usage'),
        autoStart: false,
        batchSize: 1000,
        filters: regionUsageFilters(USAGE_STREAM_FILTERS, r.name, r.name === HOME),
        handler: async (event) => {
          handed += event.Records.filter((x) => x.dynamodb?.NewImage?.workspaceId?.S === ws && x.dynamodb?.NewImage?.state?.S === 'settled').length;
          // Twice: a redelivered batch counts nothing more.
          await aggregate({ doc: r.doc, rollupsTable: t('rollups'), region: { name: r.name, tag: regionTag(SETUP, r.name) } }, event);
          return aggregate({ doc: r.doc, rollupsTable: t('rollups'), region: { name: r.name, tag: regionTag(SETUP, r.name) } }, event);
        },
      });
      await poller.drain();
      await poller.stop();
      const day = new Date(NOW).toISOString().slice(0, 10);
      const item = (await r.doc.send(new GetCommand({ TableName: t('rollups'), Key: { pk: rollupPk(`${ws}${regionTag(SETUP, r.name)}`, 'day', day), sk: ROLLUP_SK.all }, ConsistentRead: true }))).Item;
      counted.set(r.name, Number(item?.requests ?? 0));
      expect(handed).toBe(r.name === HOME ? 4 : 6);
    }
    expect(counted.get(HOME)).toBe(4);
    expect(counted.get(WEST)).toBe(6);
    // Replicated, the report in either region adds both regions' rollups: each row once.
    await fx.replicator.settle({ timeoutMs: 120_000 });
    const day = new Date(NOW).toISOString().slice(0, 10);
    for (const r of [east, west]) {
      const until = Date.now() + 60_000;
      let rows = await readUsage(r.doc, prefix, { workspaceId: ws, period: 'day', from: day, to: day, regionTags: ['', regionTag(SETUP, WEST)] });
      while (rows.find((x) => x.scope === 'all')?.requests !== 10 && Date.now() < until) {
        await new Promise((resolve) => setTimeout(resolve, 250));
        rows = await readUsage(r.doc, prefix, { workspaceId: ws, period: 'day', from: day, to: day, regionTags: ['', regionTag(SETUP, WEST)] });
      }
      expect(rows.find((x) => x.scope === 'all')?.requests).toBe(10);
    }
  });
});
