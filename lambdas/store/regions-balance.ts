/**
 * A workspace's money in a stage with several regions: a top-up lands in the slices of the region
 * whose management API wrote it (the configuration home, normally), and the balance an operator
 * reads sums every region's slices (each read in this region's replica: current for its own,
 * behind by the replication lag for the others), shows what each region has sent and received,
 * what is in transit, and what is stranded in regions the operator marks down.
 */
import { GetCommand, TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { DocumentSender } from '../adapters/dynamo-wire';
import { peerCounters, quantityId } from '../core/transfers';
import { sliceKey } from './keys';
import { DynamoLedger, type LedgerTables } from './ledger';
import { LedgerNotFoundError, readBalance, type BalanceSummary } from './balance';
import { RegionLens } from './regions-lens';
import { peersOf, regionTag, type RegionSetup } from './regions';
import { transferPk } from './regions-transfers';

/** The lens through which `region`'s items are read or written. */
export function lensFor(raw: DocumentSender, tables: LedgerTables, setup: RegionSetup, region: string = setup.region): RegionLens {
  return new RegionLens(raw, { ledger: tables.ledger, usage: tables.usage, region, tag: regionTag(setup, region) });
}

/**
 * Adds `micros` of credit to this region's slice 0 (the region `setup.region` writing it). The
 * workspace must exist (its home-region slice 0 is made with it: checked, not written); with a
 * `reference`, a top-up's payment reference is credited at most once (its marker keeps today's key,
 * written by the configuration home). Resolves false when the reference was credited before.
 */
export async function creditRegion(
  raw: DocumentSender,
  tables: LedgerTables,
  setup: RegionSetup,
  input: { readonly workspaceId: string; readonly micros: number; readonly reference?: string; readonly now?: number },
): Promise<boolean> {
  const { workspaceId, micros } = input;
  if (!Number.isSafeInteger(micros) || micros <= 0) throw new RangeError('a credit is a positive whole number of micro-units');
  const lens = lensFor(raw, tables, setup);
  const home = regionTag(setup) === '';
  const credit = {
    TableName: tables.ledger,
    Key: sliceKey(workspaceId, 0),
    UpdateExpression: 'ADD availableMicros :m, creditedMicros :m',
    // In the home region the slice is the workspace's own (made with it); elsewhere it is made by the first credit.
    ConditionExpression: home ? 'attribute_exists(pk) AND creditedMicros <= :ceiling' : 'attribute_not_exists(creditedMicros) OR creditedMicros <= :ceiling',
    ExpressionAttributeValues: { ':m': micros, ':ceiling': Number.MAX_SAFE_INTEGER - micros },
  };
  if (!home) {
    // Outside the home region, the workspace's existence is its home slice's: read in this replica, never written.
    const got = await raw.send(new GetCommand({ TableName: tables.ledger, Key: sliceKey(workspaceId, 0), ConsistentRead: true }));
    if (got.Item === undefined) throw new LedgerNotFoundError(`no ledger for workspace ${workspaceId} (not made, or not replicated here yet)`);
  }
  const items: NonNullable<ConstructorParameters<typeof TransactWriteCommand>[0]['TransactItems']> = [];
  if (input.reference !== undefined) {
    items.push({ Put: { TableName: tables.ledger, Item: { pk: sliceKey(workspaceId, 0).pk, sk: `CREDIT#${input.reference}`, micros, at: input.now ?? Date.now(), region: setup.region }, ConditionExpression: 'attribute_not_exists(pk)' } });
  }
  items.push({ Update: credit });
  try {
    if (items.length === 1 && home) {
      await lens.send(new UpdateCommand(credit));
      return true;
    }
    await lens.send(new TransactWriteCommand({ TransactItems: items }));
    return true;
  } catch (err) {
    if (!(err instanceof Error) || (err.name !== 'TransactionCanceledException' && err.name !== 'ConditionalCheckFailedException')) throw err;
    const reasons = (err as { CancellationReasons?: { Code?: string }[] }).CancellationReasons;
    if (input.reference !== undefined && reasons?.[0]?.Code === 'ConditionalCheckFailed') return false;
    throw new LedgerNotFoundError(`no ledger for workspace ${workspaceId}, or the credit is beyond exact counting`);
  }
}

/** One region's part of a workspace's money, as read in this region's replica. */
export interface RegionMoney {
  readonly region: string;
  readonly availableMicros: number;
  readonly heldMicros: number;
  readonly spentMicros: number;
  readonly creditedMicros: number;
  /** Credit this region has ever given to others, and credited from others. */
  readonly sentMicros: number;
  readonly receivedMicros: number;
  /** Whether the operator marked the region down: its available and held are stranded (neither spent nor lost). */
  readonly down: boolean;
}

/** A workspace's money over every region. */
export interface RegionalBalance {
  readonly regions: readonly RegionMoney[];
  readonly availableMicros: number;
  readonly heldMicros: number;
  readonly spentMicros: number;
  readonly creditedMicros: number;
  /** Sent by one region and not yet credited by the other: on neither side, spendable by no one, never lost. */
  readonly inTransitMicros: number;
  /** Available and held in regions marked down. */
  readonly strandedMicros: number;
}

/** What `region`'s credit transfer item, as this replica shows it, says it has sent to every other region and credited from them, in all. */
async function creditCounters(raw: DocumentSender, tables: LedgerTables, setup: RegionSetup, workspaceId: string, region: string): Promise<{ sent: number; recv: number }> {
  const key = { pk: `${transferPk(workspaceId)}${regionTag(setup, region)}`, sk: quantityId({ kind: 'credit' }) };
  const item = (await raw.send(new GetCommand({ TableName: tables.ledger, Key: key, ConsistentRead: true }))).Item;
  const peers = peersOf(setup, region).map((p) => peerCounters(item, p));
  return { sent: peers.reduce((a, c) => a + c.sent, 0), recv: peers.reduce((a, c) => a + c.recv, 0) };
}

/**
 * Every region's slices and credit transfers, summed. `credited` summed over regions plus what is
 * in transit is every credit ever added, once replication has caught up (docs/regions.md, "The
 * invariant"); read mid-flight, a region's receipt can arrive before the other's send shows, and
 * in transit reads below zero for a moment.
 */
export async function readRegionalBalance(raw: DocumentSender, tables: LedgerTables, setup: RegionSetup, workspaceId: string, down: readonly string[] = []): Promise<RegionalBalance> {
  const regions = await Promise.all(
    setup.regions.map(async (region): Promise<RegionMoney> => {
      const snapshot = await new DynamoLedger(lensFor(raw, tables, setup, region), tables).readSlices(workspaceId);
      const sum = (f: (s: (typeof snapshot.slices)[number]) => number): number => snapshot.slices.reduce((a, s) => a + f(s), 0);
      const { sent, recv } = await creditCounters(raw, tables, setup, workspaceId, region);
      return {
        region,
        availableMicros: sum((s) => s.availableMicros),
        heldMicros: sum((s) => s.heldMicros),
        spentMicros: sum((s) => s.spentMicros),
        creditedMicros: sum((s) => s.creditedMicros),
        sentMicros: sent,
        receivedMicros: recv,
        down: down.includes(region),
      };
    }),
  );
  const total = (f: (r: RegionMoney) => number): number => regions.reduce((a, r) => a + f(r), 0);
  return {
    regions,
    availableMicros: total((r) => r.availableMicros),
    heldMicros: total((r) => r.heldMicros),
    spentMicros: total((r) => r.spentMicros),
    creditedMicros: total((r) => r.creditedMicros),
    inTransitMicros: total((r) => r.sentMicros) - total((r) => r.receivedMicros),
    strandedMicros: total((r) => (r.down ? r.availableMicros + r.heldMicros : 0)),
  };
}

/** One region's part of a workspace's money, as this replica holds it. */
export interface RegionPart {
  readonly region: string;
  readonly availableMicros: number;
  readonly heldMicros: number;
}

/** `readBalanceEverywhere`'s answer: the workspace-wide sums, and in a stage with several regions each region's part. */
export interface BalanceEverywhere extends BalanceSummary {
  /** Each region's available and held, in the stage's order (absent in a stage with one region). */
  readonly regions?: readonly RegionPart[];
  /**
   * Credit one region has sent and the other not yet credited (a give, or a top-up's spread):
   * counted in the workspace-wide `available` and `credited` (it is the workspace's, spendable
   * once it lands), in no region's part. Absent in a stage with one region.
   */
  readonly inTransitMicros?: number;
}

/**
 * What is in transit between the regions' credit, as this replica shows it: every region's
 * `sent` less every region's `recv` on their credit transfer items. Not clamped: a giver's send
 * and its slice's debit are one transaction, and so are a receiver's receipt and its slice's
 * credit, so while each region's two items are read as of one moment the sum over slices and
 * transit is exact, even when the receipt shows before the send (then the giver's slice does not
 * show the debit either). Replication carries the two items apart, so a read in the moment
 * between them can be off by the transfer, as {@link readRegionalBalance} says.
 */
async function creditInTransit(raw: DocumentSender, tables: LedgerTables, setup: RegionSetup, workspaceId: string): Promise<number> {
  const counters = await Promise.all(setup.regions.map((region) => creditCounters(raw, tables, setup, workspaceId, region)));
  return counters.reduce((a, c) => a + c.sent - c.recv, 0);
}

/**
 * The workspace-wide balance an operator reads (`workspace show`, the management API's balance):
 * today's `readBalance` in one region; with several, every region's slices summed (each region's
 * read in this replica) with the credit in transit between them, slice counts and floor the home
 * region's, and each region's part (what a region that is down holds stays there, stranded, until
 * it returns).
 */
export async function readBalanceEverywhere(raw: DocumentSender, tables: LedgerTables, setup: RegionSetup | undefined, workspaceId: string, now: number = Date.now()): Promise<BalanceEverywhere> {
  if (setup === undefined) return readBalance(raw, tables, workspaceId, now);
  const [parts, inTransit] = await Promise.all([
    Promise.all(setup.regions.map((region) => readBalance(lensFor(raw, tables, setup, region), tables, workspaceId, now))),
    creditInTransit(raw, tables, setup, workspaceId),
  ]);
  const home = parts[0] as BalanceSummary;
  const sum = (f: (b: BalanceSummary) => number): number => parts.reduce((a, b) => a + f(b), 0);
  return {
    ...home,
    availableMicros: sum((b) => b.availableMicros) + inTransit,
    heldMicros: sum((b) => b.heldMicros),
    spentMicros: sum((b) => b.spentMicros),
    creditedMicros: sum((b) => b.creditedMicros) + inTransit,
    inTransitMicros: inTransit,
    month: { id: home.month.id, settledMicros: sum((b) => b.month.settledMicros), heldMicros: sum((b) => b.month.heldMicros) },
    regions: parts.map((b, i) => ({ region: setup.regions[i] as string, availableMicros: b.availableMicros, heldMicros: b.heldMicros })),
  };
}
