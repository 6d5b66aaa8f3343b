/**
 * A top-up's spread (issue 23; docs/regions.md, "A top-up's spread"): a top-up made through the
 * management API in the home region sends each other region that is running (its sweeper's alive
 * mark fresh in the home's replica) its weighted part, in the top-up's own transaction, and that
 * region's transfer agent credits it there once. A region not marked running gets nothing. Two
 * DynamoDB Locals joined by the local replicator, each region's transfer agent running; the
 * sweeper's Lambda handler itself writes the mark. A region's ledger reads the marks too: a region
 * whose mark is old is counted lost by every process at once.
 */
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { MICROS_PER_MINOR } from '../../lambdas/core/money-format';
import { counterNames } from '../../lambdas/core/transfers';
import { DynamoBalancePort } from '../../lambdas/store/balance-port';
import type { AdminContext } from '../../lambdas/store/directory-context';
import { createWorkspace, showWorkspace } from '../../lambdas/store/directory-workspaces';
import { ALIVE_FRESH_MS, aliveKey, livePeers } from '../../lambdas/store/regions-alive';
import { readBalanceEverywhere, readRegionalBalance } from '../../lambdas/store/regions-balance';
import { asRegion, type RegionSetup } from '../../lambdas/store/regions';
import { RegionalLedger } from '../../lambdas/store/regions-ledger';
import { transferPk } from '../../lambdas/store/regions-transfers';
import { requestsTagged, settlement } from '../support/ledger-fixtures';
import { HOME, WEST, startTwoRegions, type TwoRegions } from '../support/two-regions';

jest.setTimeout(300_000);

const SETUP: RegionSetup = { regions: [HOME, WEST], region: HOME, weights: [1, 1], transferWaitMs: 0 };
const MINOR = MICROS_PER_MINOR;
const actor = { who: 'ops@example.com', requestId: 'req_spread' };

let fx: TwoRegions<Record<string, never>>;
let ctx: AdminContext;
let port: DynamoBalancePort;
let actorSeq = 0;

beforeAll(async () => {
  fx = await startTwoRegions({ tag: 'sp', setup: SETUP, lagMs: 150, extra: () => ({}) });
  ctx = { doc: fx.east.doc, tablePrefix: fx.prefix, stage: 'local', regions: asRegion(SETUP, HOME), now: () => Date.now() };
  port = new DynamoBalancePort(ctx);
}, 300_000);

afterAll(async () => {
  await fx?.stop();
});

const credit = (ws: string, minor: number, reference?: string) =>
  port.credit({ workspaceId: ws, micros: minor * MINOR, ...(reference === undefined ? {} : { reference }), who: actor.who, requestId: `${actor.requestId}_${(actorSeq += 1)}` });

/** The home region's credit transfer item's `sent` towards the west, in the home's replica. */
async function sentWest(ws: string): Promise<number> {
  const got = await fx.east.doc.send(new GetCommand({ TableName: fx.t('ledger'), Key: { pk: transferPk(ws), sk: 'CREDIT' }, ConsistentRead: true }));
  const v = got.Item?.[counterNames(WEST).sent];
  return typeof v === 'number' ? v : 0;
}

/**
 * Waits (up to a minute) until nothing of the workspace's credit is in transit as the west's
 * replica shows it, replication caught up. A caller reads the balance again after: a read can take
 * a receipt's counter and not its slice (one transaction, read as two items).
 */
async function landed(ws: string): Promise<void> {
  const until = Date.now() + 60_000;
  for (;;) {
    await fx.caughtUp(ws);
    if ((await readRegionalBalance(fx.west.doc, fx.tables(), SETUP, ws)).inTransitMicros === 0 || Date.now() > until) return;
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Runs the west's sweeper Lambda handler once, as its schedule does (a module of its own: it reads its settings at load). */
async function westSweeperRuns(): Promise<void> {
  const vars: Record<string, string> = {
    SLUICE_STAGE: 'dev',
    SLUICE_TABLE_PREFIX: fx.prefix,
    SLUICE_DYNAMODB_ENDPOINT: fx.west.db.endpoint,
    SLUICE_REGIONS: SETUP.regions.join(','),
    SLUICE_REGION: WEST,
  };
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  Object.assign(process.env, vars);
  const spy = jest.spyOn(process.stdout, 'write').mockImplementation(() => true);
  try {
    let handler: ((event: unknown, context?: { getRemainingTimeInMillis(): number }) => Promise<{ swept: number }>) | undefined;
    jest.isolateModules(() => {
      handler = (require('../../lambdas/sweeper/handler') as { handler: typeof handler }).handler;
    });
    expect(await (handler as NonNullable<typeof handler>)({ 'detail-type': 'Scheduled Event' }, { getRemainingTimeInMillis: () => 55_000 })).toEqual({ swept: 0 });
  } finally {
    spy.mockRestore();
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

describe("a top-up's spread", () => {
  it('keeps the whole top-up in the home region while the other region is not marked running', async () => {
    // No sweeper has run in the west yet: no mark.
    expect(await livePeers(fx.east.doc, fx.t('ledger'), SETUP, Date.now())).toEqual([]);
    const ws = await fx.workspace();
    const out = await credit(ws, 1_000);
    expect(out.applied).toBe(true);
    expect(await sentWest(ws)).toBe(0);
    await fx.caughtUp(ws);
    const b = await readRegionalBalance(fx.east.doc, fx.tables(), SETUP, ws);
    expect(b.regions.map((r) => [r.region, r.availableMicros])).toEqual([
      [HOME, 1_000 * MINOR],
      [WEST, 0],
    ]);
    await fx.expectInvariant(ws, 1_000 * MINOR);

    // A mark older than the freshness bound is a region that stopped: nothing is sent to it either.
    await fx.west.doc.send(new PutCommand({ TableName: fx.t('ledger'), Item: { ...aliveKey(WEST), at: Date.now() - ALIVE_FRESH_MS - 5_000, region: WEST } }));
    await fx.caughtUp();
    expect(await livePeers(fx.east.doc, fx.t('ledger'), SETUP, Date.now())).toEqual([]);
    await credit(ws, 300);
    expect(await sentWest(ws)).toBe(0);
    await fx.expectInvariant(ws, 1_300 * MINOR);
  });

  it("sends a running region its weighted part in the top-up's transaction; its agent credits it once, and every figure adds up", async () => {
    // The west's own sweeper marks it running; the mark replicates to the home region.
    await westSweeperRuns();
    const mark = await fx.west.doc.send(new GetCommand({ TableName: fx.t('ledger'), Key: aliveKey(WEST), ConsistentRead: true }));
    expect(Date.now() - Number(mark.Item?.at)).toBeLessThan(60_000);
    await fx.caughtUp();
    expect(await livePeers(fx.east.doc, fx.t('ledger'), SETUP, Date.now())).toEqual([WEST]);

    // A workspace as the management API makes it (its record, its home slice 0), replicated.
    const ws = (await createWorkspace(ctx, { name: 'spread' })).workspaceId;
    await fx.caughtUp(ws);
    // The west's agent held back a moment, so what is in transit can be read as an operator reads it.
    await fx.west.agent?.stop();
    // An odd amount: the west's part is rounded down, the home keeps the unit rounding leaves.
    const out = await credit(ws, 1_001, 'INV-spread-1');
    expect(out.applied).toBe(true);
    // Answered as the whole workspace's: what is on its way to the west is the workspace's too.
    expect(out.balance.availableMicros).toBe(1_001 * MINOR);
    const westPart = Math.floor((1_001 * MINOR) / 2);
    expect(await sentWest(ws)).toBe(westPart);
    // Read at once in the home region: the part in transit is counted, in no region's part.
    const now = await readBalanceEverywhere(fx.east.doc, fx.tables(), SETUP, ws);
    expect(now.availableMicros).toBe(1_001 * MINOR);
    expect(now.creditedMicros).toBe(1_001 * MINOR);
    expect((now.regions ?? []).find((r) => r.region === HOME)?.availableMicros).toBe(1_001 * MINOR - westPart);
    await fx.caughtUp(ws);
    const shown = await showWorkspace(ctx, { workspaceId: ws });
    expect([shown.balance.available.micros, shown.balance.credited.micros, shown.inTransit?.micros]).toEqual([1_001 * MINOR, 1_001 * MINOR, westPart]);
    expect(shown.regions?.map((r) => [r.region, r.available.micros])).toEqual([
      [HOME, 1_001 * MINOR - westPart],
      [WEST, 0],
    ]);
    await fx.startAgent(fx.west);

    // The same top-up sent again (its reference) is answered, not applied: nothing more is sent.
    const again = await credit(ws, 1_001, 'INV-spread-1');
    expect(again.applied).toBe(false);
    expect(await sentWest(ws)).toBe(westPart);

    // The west's agent has credited it, once: its slices hold its part, nothing is in transit.
    await landed(ws);
    const b = await readRegionalBalance(fx.west.doc, fx.tables(), SETUP, ws);
    expect(b.regions.map((r) => [r.region, r.availableMicros, r.sentMicros, r.receivedMicros])).toEqual([
      [HOME, 1_001 * MINOR - westPart, westPart, 0],
      [WEST, westPart, 0, westPart],
    ]);
    expect(b.inTransitMicros).toBe(0);
    await fx.expectInvariant(ws, 1_001 * MINOR);
    const settled = await readBalanceEverywhere(fx.west.doc, fx.tables(), SETUP, ws);
    expect([settled.availableMicros, settled.creditedMicros, settled.inTransitMicros]).toEqual([1_001 * MINOR, 1_001 * MINOR, 0]);
    expect((await showWorkspace(ctx, { workspaceId: ws })).inTransit?.micros).toBe(0);

    // A second top-up adds the west's part of it to what it sent, and lands the same way.
    await credit(ws, 200);
    expect(await sentWest(ws)).toBe(westPart + 100 * MINOR);
    await landed(ws);
    await fx.expectInvariant(ws, 1_201 * MINOR);
    const west = (await readRegionalBalance(fx.west.doc, fx.tables(), SETUP, ws)).regions.find((r) => r.region === WEST);
    expect(west?.availableMicros).toBe(westPart + 100 * MINOR);
  });
});

describe("a region whose alive mark is old, as a region's ledger reads it", () => {
  const request = requestsTagged('mk');
  /** What the west has asked of the home region for the workspace's credit, on its own item. */
  const askedOfHome = async (ledger: RegionalLedger, ws: string): Promise<number> => (await ledger.transfers.counters(ws, { kind: 'credit' }))[HOME]?.asked ?? 0;
  const markHome = async (at: number): Promise<void> => {
    await fx.east.doc.send(new PutCommand({ TableName: fx.t('ledger'), Item: { ...aliveKey(HOME), at, region: HOME } }));
    await fx.caughtUp();
  };

  it('is counted lost by every process at once: its share stranded (503, retry), not asked, no request made to wait for it', async () => {
    const ws = await fx.workspace();
    // All the credit in the home region, whose agent answers nothing now (as if it were gone).
    await fx.credit(fx.east, ws, 100 * MINOR);
    await fx.caughtUp(ws);
    await fx.east.agent?.stop();
    try {
      // Its mark fresh: a new process of the west asks it, waits and gives up (503 to retry).
      await markHome(Date.now());
      const fresh = new RegionalLedger(fx.west.raw, fx.tables(), { ...asRegion(SETUP, WEST), transferWaitMs: 300 });
      expect(await fresh.admit(request(ws, MINOR))).toEqual({ admitted: false, refusal: { kind: 'in_transit', retryAfterSeconds: 1 } });
      const asked = await askedOfHome(fresh, ws);
      expect(asked).toBeGreaterThan(0);

      // Its mark old: a new process (no silence of its own seen yet) counts it lost without asking.
      await markHome(Date.now() - ALIVE_FRESH_MS - 10_000);
      const next = new RegionalLedger(fx.west.raw, fx.tables(), { ...asRegion(SETUP, WEST), transferWaitMs: 300 });
      expect(await next.admit(request(ws, MINOR))).toEqual({ admitted: false, refusal: { kind: 'in_transit', retryAfterSeconds: 1 } });
      expect(await askedOfHome(next, ws)).toBe(asked);
      // More than it holds as last replicated: the workspace's own 402, at once.
      expect(await next.admit(request(ws, 200 * MINOR))).toMatchObject({ admitted: false, refusal: { kind: 'insufficient_credit' } });
      expect(await askedOfHome(next, ws)).toBe(asked);
    } finally {
      await fx.startAgent(fx.east);
      await markHome(Date.now());
    }
    // Running again (a fresh mark, its agent back): a new process asks and is answered.
    const back = new RegionalLedger(fx.west.raw, fx.tables(), { ...asRegion(SETUP, WEST), transferWaitMs: 10_000 });
    const admitted = await back.admit(request(ws, MINOR));
    expect(admitted.admitted).toBe(true);
    if (admitted.admitted) expect(await back.settle(admitted.hold, settlement(MINOR))).toBe(true);
    await landed(ws);
    await fx.expectInvariant(ws, 100 * MINOR);
  });
});
