/**
 * Two regions of one stage on one machine, for the regional ledger's suites: two DynamoDB Locals
 * ("us-east-1", the home region, and "us-west-2"), each with every table and the ledger's and
 * rollups' streams on (global tables stream every replica), joined by the local replicator
 * (global tables' last writer wins, replicated writes in the other stream), and a transfer agent
 * per region polling its own stream. A suite starts it in `beforeAll` and stops it in `afterAll`;
 * each region's sender (what its ledgers and its agent write through) can be wrapped to watch the
 * writes it sends.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type DynamoDBClient, UpdateTableCommand } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand, PutCommand, ScanCommand } from '@aws-sdk/lib-dynamodb';
import type { DynamoDBStreamEvent } from 'aws-lambda';
import { wireClient } from '../../lambdas/adapters/dynamo-client';
import type { DocumentSender, DynamoWire } from '../../lambdas/adapters/dynamo-wire';
import type { AdmitOutcome, AdmitRequest, Settlement } from '../../lambdas/gateway/ports';
import type { HoldRecord } from '../../lambdas/shared/records';
import { ALL_TABLES, tableName } from '../../lambdas/shared/schema';
import { creditRegion, readRegionalBalance } from '../../lambdas/store/regions-balance';
import { asRegion, type RegionSetup } from '../../lambdas/store/regions';
import { transferPk, type RegionTransfers } from '../../lambdas/store/regions-transfers';
import { quantityId, type Quantity } from '../../lambdas/core/transfers';
import { handleTransferRecords } from '../../lambdas/transfer/agent';
import { type DynamoLocal, startDynamoLocal } from '../../local/dynamo-local';
import { startReplicator, type Replicator } from '../../local/regions/replicator';
import { startTransferAgent, type LocalTransferAgent } from '../../local/regions/transfer-agent';
import { ensureTables, makeDynamoClient } from '../../local/tables';
import { RACE_LIMITS } from './dynamo';

export const HOME = 'us-east-1';
export const WEST = 'us-west-2';

/** One region: its DynamoDB Local, clients, the sender its ledgers write through, its transfer agent, and what the suite keeps with it (`X`). */
export type TwoRegionsRegion<X> = X & {
  readonly name: string;
  readonly db: DynamoLocal;
  readonly client: DynamoDBClient;
  readonly doc: DynamoDBDocumentClient;
  readonly wire: DynamoWire;
  /** The region's database as its ledgers write it (wrapped by the suite's `wrap`, if any). */
  readonly raw: DocumentSender;
  /** Started with the fixture; a suite may stop it and start another (the fixture stops whichever is here at the end). */
  agent?: LocalTransferAgent;
};

/** How a suite wants its two regions. */
export interface TwoRegionsOptions<X> {
  /** A letter or two for the tables' prefix (each suite its own). */
  readonly tag: string;
  readonly setup: RegionSetup;
  readonly lagMs: number;
  /** Each DynamoDB Local keeps its data in a temporary directory (removed at the end) rather than in memory. @default false */
  readonly onDisk?: boolean;
  /**
   * Every table replicated (and streamed), as a deployed stage's are, rather than the ledger's,
   * usage and rollups alone: for a suite that changes configuration (keys, workspaces, audit) in
   * one region and reads it in the other. @default false
   */
  readonly everyTable?: boolean;
  /** What the suite keeps with each region (its write log, say). */
  readonly extra: (name: string) => X;
  /** Wraps a region's sender (its ledgers' and its agent's), to watch what it writes. @default unwrapped */
  readonly wrap?: (inner: DocumentSender, region: X & { readonly name: string }) => DocumentSender;
}

/** Two running regions and what the suites do with them. */
export interface TwoRegions<X> {
  readonly east: TwoRegionsRegion<X>;
  readonly west: TwoRegionsRegion<X>;
  readonly replicator: Replicator;
  readonly prefix: string;
  /** A table's name under the suite's prefix. */
  t(name: Parameters<typeof tableName>[1]): string;
  tables(): { ledger: string; usage: string };
  /**
   * Waits for replication to catch up: the replicator has nothing waiting, and both replicas hold
   * the same items (a DynamoDB Local on a loaded machine can show a write in its stream a moment
   * after the replicator's pass found the stream empty): of one workspace's ledger items when
   * `ws` is given, else every ledger and usage item.
   */
  caughtUp(ws?: string): Promise<void>;
  /** Every item of a table a replica holds (minute counters aside, not their transfer items; of one workspace's ledger when `ws` is given), by `<pk> <sk>`. */
  items(r: TwoRegionsRegion<X>, table: 'ledger' | 'usage', ws?: string): Promise<Map<string, Record<string, unknown>>>;
  /** A workspace made in the home region (its home slice 0, as the management API makes it), replicated to the other. */
  workspace(): Promise<string>;
  /** Starts `region`'s transfer agent again (after a test stopped it), as the fixture started it. */
  startAgent(region: TwoRegionsRegion<X>): Promise<void>;
  /**
   * The credit invariant, once replication has caught up: read in each replica, credited plus what
   * is in transit is every credit, available + held + spent = credited with nothing held, summed
   * over both regions; both replicas agree.
   */
  expectInvariant(ws: string, creditedMicros: number): Promise<void>;
  /** A top-up landing in `region`'s slices. */
  credit(region: TwoRegionsRegion<X>, ws: string, micros: number): Promise<void>;
  stop(): Promise<void>;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** An item as text, attributes in order (replicas may list them in different orders). */
export function canonical(item: unknown): string {
  return JSON.stringify(Object.entries((item ?? {}) as Record<string, unknown>).sort(([a], [b]) => a.localeCompare(b)));
}

/** Starts both regions, the replicator and the agents (a suite's `beforeAll`, with a timeout of minutes: a JVM each). */
export async function startTwoRegions<X>(options: TwoRegionsOptions<X>): Promise<TwoRegions<X>> {
  const { setup } = options;
  const dir = options.onDisk === true ? await mkdtemp(join(tmpdir(), `sluice-regions-${options.tag}-`)) : undefined;
  const prefix = `${options.tag}${randomBytes(3).toString('hex')}-`;
  const t = (name: Parameters<typeof tableName>[1]): string => tableName(prefix, name);
  const tables = (): { ledger: string; usage: string } => ({ ledger: t('ledger'), usage: t('usage') });
  const wrap = (inner: DocumentSender, region: X & { readonly name: string }): DocumentSender => (options.wrap === undefined ? inner : options.wrap(inner, region));

  const startRegion = async (name: string): Promise<TwoRegionsRegion<X>> => {
    // In memory unless asked: nothing here outlives the run, and a database in memory answers faster than one on disk.
    // A suite's own instances live a minute or two: C1 only halves their CPU (the shared one keeps C2).
    const db = await startDynamoLocal({ ...(dir === undefined ? {} : { dataDir: join(dir, name) }), readyTimeoutMs: 240_000, jit: 'quick' });
    const client = makeDynamoClient(db.endpoint);
    const doc = DynamoDBDocumentClient.from(client, { marshallOptions: { removeUndefinedValues: true } });
    const wire = wireClient({ dynamoEndpoint: db.endpoint }, doc, process.env, RACE_LIMITS);
    const own = { ...options.extra(name), name };
    return Object.assign(own, { db, client, doc, wire, raw: wrap(wire, own) }) as TwoRegionsRegion<X>;
  };

  const [east, west] = await Promise.all([startRegion(HOME), startRegion(WEST)]);
  // Each region's tables in its own DynamoDB Local, both at once.
  await Promise.all(
    [east, west].map(async (r) => {
      await ensureTables(r.client, prefix, { streamEveryTable: options.everyTable === true });
      // Global tables stream every replica (MREC replicates through the streams); `everyTable` streams them all already.
      for (const table of options.everyTable === true ? [] : (['ledger', 'rollups'] as const)) {
        await r.client.send(new UpdateTableCommand({ TableName: t(table), StreamSpecification: { StreamEnabled: true, StreamViewType: 'NEW_IMAGE' } }));
      }
    }),
  );
  const replicator = await startReplicator({
    regions: [east, west].map((r) => ({ name: r.name, endpoint: r.db.endpoint })),
    tables: options.everyTable === true ? ALL_TABLES.map((schema) => t(schema.name)) : [t('ledger'), t('usage'), t('rollups')],
    lagMs: options.lagMs,
    log: () => undefined,
  });
  const startAgent = async (r: TwoRegionsRegion<X>): Promise<void> => {
    r.agent = await startTransferAgent({ endpoint: r.db.endpoint, tablePrefix: prefix, setup, region: r.name, intervalMs: 100, wrap: (doc) => wrap(doc, r), log: () => undefined });
  };
  for (const r of [east, west]) await startAgent(r);

  const items = async (r: TwoRegionsRegion<X>, table: 'ledger' | 'usage', ws?: string): Promise<Map<string, Record<string, unknown>>> => {
    const out = new Map<string, Record<string, unknown>>();
    let start: Record<string, unknown> | undefined;
    do {
      const page = await r.doc.send(new ScanCommand({ TableName: t(table), ConsistentRead: true, ExclusiveStartKey: start }));
      for (const i of page.Items ?? []) {
        // Minute counters aside (a transfer item of a key's minute, `XFER#…` / `RATE#…~L<rate>`, is not one).
        if ((ws === undefined || String(i.pk).includes(ws)) && (!String(i.sk).startsWith('RATE#') || String(i.pk).startsWith('XFER#'))) out.set(`${String(i.pk)} ${String(i.sk)}`, i);
      }
      start = page.LastEvaluatedKey;
    } while (start !== undefined);
    return out;
  };

  const caughtUp = async (ws?: string): Promise<void> => {
    const until = Date.now() + 120_000;
    for (;;) {
      await replicator.settle({ timeoutMs: 120_000 });
      let same = true;
      for (const table of ws === undefined ? (['ledger', 'usage'] as const) : (['ledger'] as const)) {
        const [a, b] = [await items(east, table, ws), await items(west, table, ws)];
        same &&= a.size === b.size && [...a].every(([k, v]) => canonical(b.get(k)) === canonical(v));
      }
      if (same || Date.now() > until) return;
      await sleep(ws === undefined ? 250 : 200);
    }
  };

  return {
    east,
    west,
    replicator,
    prefix,
    t,
    tables,
    caughtUp,
    items,
    startAgent,
    async workspace() {
      const ws = `ws_${randomBytes(6).toString('hex')}`;
      await east.doc.send(new PutCommand({ TableName: t('ledger'), Item: { pk: `WS#${ws}`, sk: 'BALANCE', availableMicros: 0, heldMicros: 0, spentMicros: 0, creditedMicros: 0 } }));
      await caughtUp(ws);
      return ws;
    },
    async expectInvariant(ws, creditedMicros) {
      await caughtUp();
      const seen = [];
      for (const r of [east, west]) {
        const b = await readRegionalBalance(r.doc, tables(), setup, ws);
        expect(b.creditedMicros + b.inTransitMicros).toBe(creditedMicros);
        expect(b.availableMicros + b.heldMicros + b.spentMicros).toBe(b.creditedMicros);
        expect(b.heldMicros).toBe(0);
        seen.push(b);
      }
      expect(seen[0]).toEqual(seen[1]);
    },
    async credit(region, ws, micros) {
      await creditRegion(region.raw, tables(), asRegion(setup, region.name), { workspaceId: ws, micros });
    },
    async stop() {
      for (const r of [east, west]) await r.agent?.stop();
      await replicator.stop();
      for (const r of [east, west]) {
        r.wire.destroy();
        r.client.destroy();
        await r.db.stop();
      }
      if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    },
  };
}

/** A region's admissions, as a race drives them. */
export interface Admitting {
  readonly name: string;
  readonly ledger: { admit(request: AdmitRequest): Promise<AdmitOutcome> };
}

/**
 * Every request at once; one refused `in_transit` (money on its way from the other region when
 * the wait ran out: `503 balance_unavailable`, which SPEC tells clients to retry) is retried as a
 * client would, a moment later (a refusal wrote nothing, so the same request is sent again), up to
 * 20 times. Resolves to the holds placed, by region name, and the refusals' kinds.
 */
export async function race(requests: readonly { region: Admitting; request: AdmitRequest }[]): Promise<{ admitted: Map<string, HoldRecord[]>; refused: string[] }> {
  const once = async (r: { region: Admitting; request: AdmitRequest }): Promise<AdmitOutcome> => {
    for (let attempt = 1; ; attempt += 1) {
      const out = await r.region.ledger.admit(r.request);
      if (out.admitted || out.refusal.kind !== 'in_transit' || attempt >= 20) return out;
      await sleep(250);
    }
  };
  const outcomes = await Promise.all(requests.map(async (r) => ({ region: r.region.name, out: await once(r) })));
  const admitted = new Map<string, HoldRecord[]>([
    [HOME, []],
    [WEST, []],
  ]);
  const refused: string[] = [];
  for (const o of outcomes) {
    if (o.out.admitted) admitted.get(o.region)?.push(o.out.hold);
    else refused.push(o.out.refusal.kind);
  }
  return { admitted, refused };
}

/** Settles every hold in the region that admitted it, each charged `settlement`'s figures; each settles once. */
export async function settleAll(ledger: { settle(hold: HoldRecord, settlement: Settlement): Promise<boolean> }, holds: readonly HoldRecord[], settlement: Settlement): Promise<void> {
  for (const h of holds) expect(await ledger.settle(h, settlement)).toBe(true);
}

/**
 * The east's transfer item of `q` as the west's stream shows it (with the member or key it is of,
 * if any), replayed three times in one batch and in three batches, while ten receivers of the west
 * (`westX`) race them: what the receivers say they credited, and the item.
 */
export async function replayedAndRaced<X>(fx: TwoRegions<X>, westX: RegionTransfers, ws: string, q: Quantity): Promise<{ image: Record<string, unknown>; credited: number }> {
  const image = (await fx.west.doc.send(new GetCommand({ TableName: fx.t('ledger'), Key: { pk: transferPk(ws), sk: quantityId(q) }, ConsistentRead: true }))).Item ?? {};
  const S = (v: unknown): { S: string } => ({ S: String(v) });
  const stamp = {
    ...(image.memberId === undefined ? {} : { memberId: S(image.memberId) }),
    ...(image.keyId === undefined ? {} : { keyId: S(image.keyId) }),
    ...(image.rateWindow === undefined ? {} : { rateWindow: S(image.rateWindow) }),
  };
  const record = { eventName: 'MODIFY' as const, dynamodb: { NewImage: { pk: S(image.pk), sk: S(image.sk), region: S(image.region), ws: S(image.ws), ...stamp }, SequenceNumber: '1' } };
  const event = { Records: [record, record, record] } as unknown as DynamoDBStreamEvent;
  const got = await Promise.all([
    ...Array.from({ length: 10 }, () => westX.receive(ws, q, HOME)),
    handleTransferRecords(westX, event),
    handleTransferRecords(westX, event),
    handleTransferRecords(westX, event),
  ]);
  return { image, credited: got.filter((g): g is number => typeof g === 'number').reduce((a, b) => a + b, 0) };
}
