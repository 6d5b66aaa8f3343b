/**
 * The transfer protocol on DynamoDB (docs/regions.md, "Moving headroom between regions"): every
 * write here is one transaction in the writing region, on items only that region writes (through
 * its {@link RegionLens}); another region's transfer item is only ever read, in this region's
 * replica, where it is possibly behind and never ahead (its counters only grow).
 *
 * - **Asking** (`ask`): `asked[g] += x` on the asker's own item.
 * - **Giving** (`answer`, by the giver): `answered[r]` advanced to the `asked` it read of `r`'s,
 *   `sent[r] += x`, and, in the same transaction, the giver's slice 0 loses `x` of credit
 *   (`available` and `credited`, conditioned on having it), or the window the limit is checked on
 *   (key slice 0's key window, or the member's month) counts `x` as used (conditioned on
 *   `used ≤ share − x`, the region's fixed share of the limit), or its slice 0's workspace month
 *   share moves `x` from room (`mr`) to used (`mu`) (conditioned on the month, its tag and the
 *   room; the month's headroom is first gathered onto slice 0 by a month-only rebalance). `x` is the
 *   ask, or more toward the asker's weighted part of both regions' spare (`giveFor`).
 * - **Receiving** (`receive`, by the receiver): `recv[g]` moved from the value `v` it read to the
 *   `sent[r]` it read on `g`'s item, conditioned on still being `v` (two processes racing: one
 *   wins, nothing is applied twice), and its slice 0 gains the difference (credit), or its window
 *   (key slice 0's key window, or the member's month) counts the difference as used less (a
 *   limit's headroom), or its slice 0's workspace month share moves it from used to room.
 * - A key's minute of requests moves on key slice 0's request counter (`requests` up by a give,
 *   down by a receive), or, when a tracked key limit's window counts the minute, on that window
 *   item: a give counts on the minute's slot `q<m>`, a receive raises the minute's bound `b<m>`
 *   (`minuteGive`, `minuteReceive` in `items.ts`; the slot cannot go below its minute's floor).
 *
 * The transfer item: `XFER#<ws><t>` / `CREDIT`, `<key window sk>~L<limit>`, `<member month
 * sk>~L<limit>` or `MONTH#<yyyy-mm>~L<limit>`, with `region` (the writer, for the agent's stream
 * filter), `ws`, `keyId` (a key window's) or `memberId` (a member month's), and the counters
 * (`core/transfers.ts`).
 */
import { GetCommand, TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { DocumentSender } from '../adapters/dynamo-wire';
import { monthNeedsRetag, monthRoomOf, planRebalance, type AdmissionSnapshot, type SliceEdit, type SliceView } from '../core/admission';
import type { AdmissionLimits } from '../gateway/ports';
import { counterNames, giveFor, movedIn, peerCounters, quantityId, rateRoomAfterRetag, receivable, seenSpare, spendSpare, type PeerCounters, type Quantity, type WindowQuantity } from '../core/transfers';
import { keyTotals } from '../core/key-slices';
import { monthNumber, monthNumberOf } from '../core/windows';
import { UpdateBuilder } from './expr';
import { COUNTER_NAMES, countWindowTtl, KEY_WINDOW_NAMES, keyShareView, minuteCapacity, minuteGive, minuteReceive, minuteRequests, minuteShareView, SLICE_NAMES, sliceRebalance, sliceView, type Item } from './items';
import { keyPk, memberPk, sliceKey } from './keys';
import { DynamoLedger, type KeyShareSpec, type LedgerTables } from './ledger';
import { RegionLens, regionalPk } from './regions-lens';
import { peersOf, regionShare, regionTag, type RegionSetup } from './regions';

/** Partition key of a workspace's transfer items (today's form; the lens adds the region's tag). */
export function transferPk(workspaceId: string): string {
  return `XFER#${workspaceId}`;
}

/** What a give or a receive did. */
export interface TransferStep {
  readonly peer: string;
  readonly micros: number;
}

const ATTEMPTS = 8;

/** A short jittered pause before reading again: a cancelled transfer met a busy slice or another process's transfer. */
function pause(attempt: number): Promise<void> {
  const ms = Math.min(200, 5 * 2 ** attempt) * (0.5 + Math.random());
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function cancelled(err: unknown): boolean {
  return err instanceof Error && (err.name === 'TransactionCanceledException' || err.name === 'ConditionalCheckFailedException');
}

/** `name = seen`, where a counter never written reads 0. */
function equalsSeen(u: UpdateBuilder, name: string, seen: number): string {
  const a = u.a(name);
  return seen === 0 ? `attribute_not_exists(${a}) OR ${a} = ${u.v(0)}` : `${a} = ${u.v(seen)}`;
}

/**
 * A window (key slice 0's key window, or a member month) moved by `micros` of use (a give: up; a
 * receive: down), made with today's figures if no admission made it yet, kept as long as the
 * ledger keeps its windows.
 */
function windowMove(micros: number, ttl: number | undefined): UpdateBuilder {
  const w = new UpdateBuilder();
  w.set(`${w.a('settledMicros')} = if_not_exists(${w.a('settledMicros')}, ${w.v(0)})`);
  if (ttl !== undefined) w.set(`${w.a('ttl')} = if_not_exists(${w.a('ttl')}, ${w.v(ttl)})`);
  w.add('usedMicros', micros).add('heldMicros', 0);
  return w;
}

type MonthQuantity = Extract<Quantity, { kind: 'month' }>;
type RateQuantity = Extract<Quantity, { kind: 'rate' }>;
/** A key's quantities, split over its key slices: its key window's money, its minute of requests. */
type KeyQuantity = Extract<Quantity, { kind: 'key' | 'rate' }>;

/** The epoch minute of a rate quantity (its counter's sort key, `RATE#<key>#<minute>`, ends with it). */
function rateMinuteOf(q: RateQuantity): number {
  return Number(q.windowSk.slice(q.windowSk.lastIndexOf('#') + 1));
}

/**
 * Key slice 0's request counter of the minute moved by `requests` (a give: up, conditioned on the
 * region's share of the rate still holding it, `requests ≤ share − x`, what it lent its other key
 * slices counted as used; a receive: down, below zero if need be), made if no request of the
 * minute made it yet, kept as long as the minute's counter is.
 */
function counterMove(requests: number, shareRequests: number, ttl: number | undefined): UpdateBuilder {
  const u = new UpdateBuilder();
  u.add('requests', requests);
  if (ttl !== undefined) u.set(`${u.a('ttl')} = if_not_exists(${u.a('ttl')}, ${u.v(ttl)})`);
  if (requests > 0) {
    const r = u.a('requests');
    u.when(`attribute_not_exists(${r}) OR ${r} <= ${u.v(shareRequests - requests)}`);
  }
  return u;
}

/**
 * The instant the ledger's snapshot of a month quantity's slices is read at, so its month shares
 * are that month's: now, when now is in that month (as it is but at a month's turn); else the
 * month's first instant.
 */
function monthReadAt(q: MonthQuantity): number {
  const n = monthNumberOf(q.month);
  const now = Date.now();
  return monthNumber(now) === n ? now : Date.UTC(Math.floor(n / 100), (n % 100) - 1, 1);
}

/** The limits a month-only rebalance is planned under: the region's share of the month limit, nothing else binding. */
function monthOnly(shareMicros: number): AdmissionLimits {
  return { keyWindow: 'never', spendRateCapMicros: Number.MAX_SAFE_INTEGER, keyRatePerMinute: Number.MAX_SAFE_INTEGER, workspaceLimitMicros: shareMicros };
}

/** The limits a spend-rate-only rebalance is planned under: the region's share of the cap (its tag) and what moved here under it, nothing else binding. */
function rateOnly(shareMicros: number, movedMicros: number): AdmissionLimits {
  return { keyWindow: 'never', spendRateCapMicros: shareMicros, spendRateMovedMicros: movedMicros, keyRatePerMinute: Number.MAX_SAFE_INTEGER };
}

type SpendQuantity = Extract<Quantity, { kind: 'spend' }>;

/**
 * Slice 0's spend-rate headroom moved by `micros` (a receive: > 0; a give: < 0) under the cap's tag
 * (`rc` = the region's share), on slice 0 as read (`seen`, undefined for an item not read or
 * holding no headroom yet):
 *
 * - under the tag: `rr` moves, conditioned on the tag (and, for a give, on the room);
 * - never written (no `rc`): written whole under the tag, `rr` = the region's capacity under the
 *   cap after this move (`rateRoomAfterRetag` with nothing live: a slice 0 that never held headroom
 *   has no reservation anywhere in the region), conditioned on still having none;
 * - under another tag (the cap changed here and the region has not rewritten its headroom yet, or
 *   it did under a later cap): undefined, the move is counted on the counters only. A later rewrite
 *   under this cap counts it (its capacity is its share plus what moved under the cap); a receive's
 *   transaction then checks slice 0 is still under the tag it saw (`rateTagCheck`), so a rewrite
 *   racing it is either seen or cancels it.
 */
function rateMove(seen: SliceView | undefined, micros: number, shareMicros: number, movedAfter: number): UpdateBuilder | undefined {
  const u = new UpdateBuilder();
  const rc = u.a(SLICE_NAMES.rateCap);
  const rr = u.a(SLICE_NAMES.rateRoom);
  if (seen?.rateCap === undefined) {
    u.when(`attribute_not_exists(${rc})`);
    u.set(`${rc} = ${u.v(shareMicros)}, ${rr} = ${u.v(rateRoomAfterRetag(shareMicros, movedAfter, 0))}`);
    return u;
  }
  if (seen.rateCap !== shareMicros) return undefined;
  u.add(SLICE_NAMES.rateRoom, micros);
  u.when(micros < 0 ? `${rc} = ${u.v(shareMicros)} AND ${rr} >= ${u.v(-micros)}` : `${rc} = ${u.v(shareMicros)}`);
  return u;
}

/** A check that slice 0's spend-rate headroom is still under the tag it was read under (a counter-only move's guard against a racing rewrite). */
function rateTagCheck(table: string, key: { pk: string; sk: string }, seenCap: number): { ConditionCheck: { TableName: string; Key: { pk: string; sk: string }; ConditionExpression: string; ExpressionAttributeNames: Record<string, string>; ExpressionAttributeValues: Record<string, unknown> } } {
  return { ConditionCheck: { TableName: table, Key: key, ConditionExpression: '#rc = :rc', ExpressionAttributeNames: { '#rc': SLICE_NAMES.rateCap }, ExpressionAttributeValues: { ':rc': seenCap } } };
}

/**
 * Slice 0's workspace month share moved by `micros` from room to used (a give: `micros` > 0) or
 * back (a receive: < 0), on the share as read (`stored`: the month slice 0 holds, undefined for
 * none): added to this month's share, conditioned on it still being this month's (and, for a
 * give, on its tag and room); a share of an earlier month (or none) is written whole for this
 * month, with the whole region's share as its start, conditioned on exactly what was read.
 */
function monthMove(month: number, stored: number | undefined, micros: number, shareMicros: number): UpdateBuilder {
  const N = SLICE_NAMES;
  const u = new UpdateBuilder();
  const mo = u.a(N.month);
  if (stored === month) {
    u.add(N.monthUsed, micros).add(N.monthRoom, -micros);
    const room = u.a(N.monthRoom);
    u.when(micros > 0 ? `${mo} = ${u.v(month)} AND ${u.a(N.monthLimit)} = ${u.v(shareMicros)} AND ${room} >= ${u.v(micros)}` : `${mo} = ${u.v(month)}`);
    return u;
  }
  u.when(stored === undefined ? `attribute_not_exists(${mo})` : `${mo} = ${u.v(stored)}`);
  u.set(`${mo} = ${u.v(month)}, ${u.a(N.monthSettled)} = ${u.v(0)}, ${u.a(N.monthHeld)} = ${u.v(0)}, ${u.a(N.monthUsed)} = ${u.v(micros)}`);
  u.set(`${u.a(N.monthRoom)} = ${u.v(shareMicros - micros)}, ${u.a(N.monthLimit)} = ${u.v(shareMicros)}`);
  return u;
}

/** The month slice 0's item holds a share of (`mo`), as read; undefined for none. */
async function storedMonthOf(db: DocumentSender, table: string, workspaceId: string): Promise<number | undefined> {
  const got = await db.send(new GetCommand({ TableName: table, Key: sliceKey(workspaceId, 0), ConsistentRead: true }));
  const mo = got.Item?.[SLICE_NAMES.month];
  return typeof mo === 'number' ? mo : undefined;
}

/** One region's transfers: its own items written through its lens, the others' read in its replica. */
export class RegionTransfers {
  /** The region's own items, under today's keys. */
  readonly own: RegionLens;
  /** The region's ledger (for gathering credit into slice 0 before a give). */
  readonly ledger: DynamoLedger;
  private readonly peerLedgers = new Map<string, DynamoLedger>();

  constructor(
    /** This region's database, unlensed: other regions' items are read through it. */
    private readonly raw: DocumentSender,
    private readonly tables: LedgerTables,
    readonly setup: RegionSetup,
    /** Told of each transaction conflict the region's ledger meets. */
    onConflict?: () => void,
  ) {
    this.own = new RegionLens(raw, { ledger: tables.ledger, usage: tables.usage, region: setup.region, tag: regionTag(setup) });
    // An admission's snapshot counts what transfers moved here of the spend-rate cap's headroom (its refusal, and a rewrite under a changed cap).
    this.ledger = new DynamoLedger(this.own, tables, onConflict, (workspaceId, limits) =>
      limits.spendRateCapStageMicros === undefined ? Promise.resolve(0) : this.movedInto(workspaceId, { kind: 'spend', capMicros: limits.spendRateCapStageMicros }),
    );
  }

  private itemKey(workspaceId: string, q: Quantity): { pk: string; sk: string } {
    return { pk: transferPk(workspaceId), sk: quantityId(q) };
  }

  /** This region's own transfer item (strongly consistent: only this region writes it). */
  async readOwn(workspaceId: string, q: Quantity): Promise<Item | undefined> {
    const got = await this.own.send(new GetCommand({ TableName: this.tables.ledger, Key: this.itemKey(workspaceId, q), ConsistentRead: true }));
    return got.Item;
  }

  /** Another region's transfer item as replicated here (behind by the replication lag at most; never ahead). */
  async readPeer(workspaceId: string, q: Quantity, peer: string): Promise<Item | undefined> {
    const key = { pk: `${transferPk(workspaceId)}${regionTag(this.setup, peer)}`, sk: quantityId(q) };
    const got = await this.raw.send(new GetCommand({ TableName: this.tables.ledger, Key: key, ConsistentRead: true }));
    return got.Item;
  }

  /** The stamp every write of a transfer item carries: who wrote it, of which workspace (and key or member), until when. */
  private stamp(u: UpdateBuilder, workspaceId: string, q: Quantity, ttl: number | undefined): void {
    u.set(`${u.a('region')} = ${u.v(this.setup.region)}, ${u.a('ws')} = ${u.v(workspaceId)}`);
    if (q.kind === 'key' || q.kind === 'rate') u.setTo('keyId', q.keyId);
    // Where the minute counts, when on the key's window: the giver's agent moves it there.
    if (q.kind === 'rate' && q.rateWindow !== undefined) u.setTo('rateWindow', q.rateWindow);
    if (q.kind === 'member') u.setTo('memberId', q.memberId);
    if (ttl !== undefined) u.set(`${u.a('ttl')} = if_not_exists(${u.a('ttl')}, ${u.v(ttl)})`);
  }

  /** Asks `peer` urgently for `micros` more; resolves to the cumulative amount asked (what its answer must reach). */
  async ask(workspaceId: string, q: Quantity, peer: string, micros: number, ttl?: number): Promise<number> {
    const u = new UpdateBuilder();
    this.stamp(u, workspaceId, q, ttl);
    u.add(counterNames(peer).asked, micros);
    const out = await this.own.send(new UpdateCommand({ TableName: this.tables.ledger, Key: this.itemKey(workspaceId, q), ...u.build(), ReturnValues: 'ALL_NEW' }));
    return peerCounters(out.Attributes, peer).asked;
  }

  /**
   * Credits what `peer` has sent this region and this region has not credited yet, exactly once
   * (the module comment); resolves to what this call credited (0: nothing new, or another process
   * credited it first).
   */
  async receive(workspaceId: string, q: Quantity, peer: string): Promise<number> {
    for (let attempt = 0; attempt < ATTEMPTS; attempt += 1) {
      const [theirs, mine] = await Promise.all([this.readPeer(workspaceId, q, peer), this.readOwn(workspaceId, q)]);
      const sent = peerCounters(theirs, this.setup.region).sent;
      const seen = peerCounters(mine, peer).recv;
      const delta = receivable(sent, seen);
      if (delta === 0) return 0;
      const u = new UpdateBuilder();
      const names = counterNames(peer);
      this.stamp(u, workspaceId, q, typeof theirs?.ttl === 'number' ? theirs.ttl : undefined);
      u.when(equalsSeen(u, names.recv, seen));
      u.setTo(names.recv, sent);
      const items: NonNullable<ConstructorParameters<typeof TransactWriteCommand>[0]['TransactItems']> = [{ Update: { TableName: this.tables.ledger, Key: this.itemKey(workspaceId, q), ...u.build() } }];
      if (q.kind === 'credit') {
        // Slice 0 gains it (made here if this region never held the workspace's credit).
        const s = new UpdateBuilder();
        s.add('availableMicros', delta).add('creditedMicros', delta);
        items.push({ Update: { TableName: this.tables.ledger, Key: sliceKey(workspaceId, 0), ...s.build() } });
      } else if (q.kind === 'rate' && q.rateWindow !== undefined) {
        // The minute counts on key slice 0's window item: its count cannot go down (a value
        // below the minute's floor reads as an earlier minute), so the minute's bound goes up,
        // and the admission's count condition admits that many more of the key's requests.
        const built = minuteReceive(await this.readRateHome(workspaceId, q), rateMinuteOf(q), regionShare(this.setup, q.ratePerMinute), delta, countWindowTtl(q.rateWindow, Date.now()));
        if (built !== undefined) items.push({ Update: { TableName: this.tables.ledger, Key: this.counterKey(workspaceId, q), ...built } });
      } else if (q.kind === 'rate') {
        // Key slice 0's count of the minute goes down (below zero if need be): its condition
        // `requests < share` then admits that many more of the key's requests this minute.
        items.push({ Update: { TableName: this.tables.ledger, Key: this.counterKey(workspaceId, q), ...counterMove(-delta, 0, typeof theirs?.ttl === 'number' ? theirs.ttl : undefined).build() } });
      } else if (q.kind === 'spend') {
        // Slice 0's spend-rate headroom under the cap's tag: up by the difference, for good under
        // this cap (once reserved and aged out, it returns to this region's headroom like its own).
        const share = regionShare(this.setup, q.capMicros);
        const zero = await this.sliceZero(workspaceId);
        const m = rateMove(zero, delta, share, movedIn(mine, peersOf(this.setup)) + delta);
        if (m !== undefined) items.push({ Update: { TableName: this.tables.ledger, Key: sliceKey(workspaceId, 0), ...m.build() } });
        else if (zero?.rateCap !== undefined) items.push(rateTagCheck(this.tables.ledger, sliceKey(workspaceId, 0), zero.rateCap));
      } else if (q.kind === 'month') {
        // Slice 0's month share: used down, room up (below zero used if need be), so the share
        // the region's ledger checks never moves; a share already in a later month takes
        // nothing (the month is over: nothing enforces it any more), only the counter moves.
        const month = monthNumberOf(q.month);
        const stored = await storedMonthOf(this.own, this.tables.ledger, workspaceId);
        if (stored === undefined || stored <= month) {
          const m = monthMove(month, stored, -delta, regionShare(this.setup, q.limitMicros));
          items.push({ Update: { TableName: this.tables.ledger, Key: sliceKey(workspaceId, 0), ...m.build() } });
        }
      } else {
        // The window counts it as used less (below zero if need be): the region's ledger keeps
        // checking its fixed share, so the limit it sees never moves under it.
        items.push({ Update: { TableName: this.tables.ledger, Key: this.windowKey(workspaceId, q), ...windowMove(-delta, typeof theirs?.ttl === 'number' ? theirs.ttl : undefined).build() } });
      }
      try {
        await this.own.send(new TransactWriteCommand({ TransactItems: items }));
        return delta;
      } catch (err) {
        if (!cancelled(err)) throw err;
        // Another process of this region credited it (or part of it) first, or slice 0 was busy: read again.
        await pause(attempt);
      }
    }
    return 0;
  }

  /**
   * The window a limit's quantity is checked on (key slice 0's key window, or the member's month):
   * where a region counts its use, what it gave and (less) what it received. Today's key; the lens
   * (or `windowOf`, for another region's) adds the region's tag.
   */
  private windowKey(workspaceId: string, q: WindowQuantity): { pk: string; sk: string } {
    return { pk: q.kind === 'key' ? keyPk(workspaceId, q.keyId) : memberPk(workspaceId, q.memberId), sk: q.windowSk };
  }

  /**
   * Where key slice 0 counts a rate quantity's minute: its request counter, or the key window item
   * the minute counts on (today's key; the lens adds the region's tag).
   */
  private counterKey(workspaceId: string, q: RateQuantity): { pk: string; sk: string } {
    return { pk: keyPk(workspaceId, q.keyId), sk: q.rateWindow ?? q.windowSk };
  }

  /** This region's item key slice 0 counts a rate quantity's minute on, as it is now (strongly consistent: only this region writes it). */
  private async readRateHome(workspaceId: string, q: RateQuantity): Promise<Item | undefined> {
    return (await this.own.send(new GetCommand({ TableName: this.tables.ledger, Key: this.counterKey(workspaceId, q), ConsistentRead: true }))).Item;
  }

  /**
   * How `region`'s ledger splits a key quantity over the key's slices, under its share of the
   * limit: the key window's money, or the minute's requests (`KeyShareSpec`).
   */
  private keySpec(q: KeyQuantity, region: string, ttl: number | undefined): KeyShareSpec {
    if (q.kind === 'key') return { kind: 'window', sk: q.windowSk, limitMicros: regionShare(this.setup, q.limitMicros, region), ttl };
    const rateTtl = ttl ?? Math.floor(Date.now() / 1000) + 180;
    return { kind: 'rate', sk: q.windowSk, ratePerMinute: regionShare(this.setup, q.ratePerMinute, region), minute: rateMinuteOf(q), ttl: rateTtl, ...(q.rateWindow !== undefined ? { rateWindow: q.rateWindow } : {}) };
  }

  /**
   * What `region`'s key counts of a key quantity over all its key slices, as this replica holds
   * them: used (its use, plus what it gave other regions, less what it received), settled and held.
   * Key slice 0's own figure counts what it lent the key's other key slices as used; when it has
   * lent anything, every key slice is read (consistently), and the key's totals count only what
   * they spent of it. Key slice 0 is read alone when it has lent nothing (then the others hold nothing).
   */
  async keyTotalsOf(workspaceId: string, q: KeyQuantity, region: string = this.setup.region): Promise<{ used: number; settled: number; held: number }> {
    const spec = this.keySpec(q, region, undefined);
    const own = q.kind === 'key' ? this.windowKey(workspaceId, q) : this.counterKey(workspaceId, q);
    const key = { pk: regionalPk(own.pk, own.sk, regionTag(this.setup, region)), sk: own.sk };
    const item = (await this.raw.send(new GetCommand({ TableName: this.tables.ledger, Key: key, ConsistentRead: true }))).Item;
    const zero = spec.kind === 'window' ? keyShareView(0, item, KEY_WINDOW_NAMES) : spec.rateWindow !== undefined ? minuteShareView(item, spec.minute, spec.ratePerMinute) : keyShareView(0, item, COUNTER_NAMES);
    if (zero.given <= 0) return { used: zero.used, settled: zero.settled, held: zero.held };
    return keyTotals((await this.ledgerOf(region).readKeyShares(workspaceId, q.keyId, spec)).shares);
  }

  /**
   * This region's key slice 0's own room of a key quantity (what a give may count there), after
   * taking back what it lent the key's other key slices and they have not spent, when its own room
   * is short of `want` (`DynamoLedger.reclaimKeyShares`).
   */
  private async keyRoomOnSliceZero(workspaceId: string, q: KeyQuantity, want: number, ttl: number | undefined): Promise<number> {
    const spec = this.keySpec(q, this.setup.region, ttl);
    const room = async (): Promise<number> => {
      const item = q.kind === 'key' ? (await this.own.send(new GetCommand({ TableName: this.tables.ledger, Key: this.windowKey(workspaceId, q), ConsistentRead: true }))).Item : await this.readRateHome(workspaceId, q);
      if (spec.kind === 'window') return spec.limitMicros - keyShareView(0, item, KEY_WINDOW_NAMES).used;
      if (spec.rateWindow !== undefined) return minuteCapacity(item, spec.minute, spec.ratePerMinute) - Math.max(0, minuteRequests(item, spec.minute));
      return spec.ratePerMinute - keyShareView(0, item, COUNTER_NAMES).used;
    };
    const before = await room();
    if (before >= want) return before;
    await this.ledger.reclaimKeyShares(workspaceId, q.keyId, spec, want);
    return room();
  }

  /** What `region` has spare of a quantity by its items in this replica (its own, current; another's, possibly behind). */
  async spareOf(workspaceId: string, q: Quantity, region: string = this.setup.region): Promise<number> {
    if (q.kind === 'credit') {
      const snapshot = await this.ledgerOf(region).readSlices(workspaceId);
      return snapshot.slices.reduce((a, s) => a + Math.max(0, s.availableMicros), 0);
    }
    if (q.kind === 'rate') return Math.max(0, regionShare(this.setup, q.ratePerMinute, region) - (await this.keyTotalsOf(workspaceId, q, region)).used);
    if (q.kind === 'spend') {
      const now = Date.now();
      const [snapshot, moved] = await Promise.all([this.ledgerOf(region).readSlices(workspaceId, now), this.movedInto(workspaceId, q, region)]);
      return spendSpare(snapshot, regionShare(this.setup, q.capMicros, region), moved, now);
    }
    if (q.kind === 'month') {
      const snapshot = await this.ledgerOf(region).readSlices(workspaceId, monthReadAt(q));
      return Math.max(0, regionShare(this.setup, q.limitMicros, region) - monthUsed(snapshot));
    }
    const w = q.kind === 'key' ? await this.keyTotalsOf(workspaceId, q, region) : await this.windowOf(workspaceId, q, region);
    return Math.max(0, regionShare(this.setup, q.limitMicros, region) - w.used);
  }

  /** The workspace month's settled and held in `region` (its own use: transfers never touch them), as this replica holds its slices. */
  async monthOf(workspaceId: string, q: MonthQuantity, region: string = this.setup.region): Promise<{ settled: number; held: number }> {
    const snapshot = await this.ledgerOf(region).readSlices(workspaceId, monthReadAt(q));
    return snapshot.slices.reduce((a, s) => ({ settled: a.settled + s.month.settledMicros, held: a.held + s.month.heldMicros }), { settled: 0, held: 0 });
  }

  /** What `peer` has spare of a quantity as this region can tell (`seenSpare`: its replicated figure, plus what this region sent it that it does not show yet). */
  async peerSpare(workspaceId: string, q: Quantity, peer: string): Promise<number> {
    return (await this.peerView(workspaceId, q, peer)).spare;
  }

  /** `peerSpare`, with what the same reads show of the asks between the two: `peer`'s counters towards this region (its answers) and what this region has asked of it. */
  async peerView(workspaceId: string, q: Quantity, peer: string): Promise<{ spare: number; said: PeerCounters; asked: number }> {
    const [replicated, mine, theirs] = await Promise.all([this.spareOf(workspaceId, q, peer), this.readOwn(workspaceId, q), this.readPeer(workspaceId, q, peer)]);
    const own = peerCounters(mine, peer);
    const said = peerCounters(theirs, this.setup.region);
    return { spare: seenSpare(replicated, own.sent, said.recv), said, asked: own.asked };
  }

  /** A limit's window (key slice 0's key window, or the member's month) of `region` as this replica holds it: settled, held and used (use, plus what it gave, less what it received). */
  async windowOf(workspaceId: string, q: WindowQuantity, region: string = this.setup.region): Promise<{ settled: number; held: number; used: number }> {
    const own = this.windowKey(workspaceId, q);
    const key = { pk: regionalPk(own.pk, own.sk, regionTag(this.setup, region)), sk: own.sk };
    const got = await this.raw.send(new GetCommand({ TableName: this.tables.ledger, Key: key, ConsistentRead: true }));
    const n = (v: unknown): number => (typeof v === 'number' ? v : 0);
    return { settled: n(got.Item?.settledMicros), held: n(got.Item?.heldMicros), used: n(got.Item?.usedMicros) };
  }

  /** `region`'s ledger items, through its lens (this region's own writes; another's only read). */
  ledgerOf(region: string): DynamoLedger {
    if (region === this.setup.region) return this.ledger;
    let l = this.peerLedgers.get(region);
    if (l === undefined) {
      l = new DynamoLedger(new RegionLens(this.raw, { ledger: this.tables.ledger, usage: this.tables.usage, region, tag: regionTag(this.setup, region) }), this.tables);
      this.peerLedgers.set(region, l);
    }
    return l;
  }

  private weightOf(region: string): number {
    return this.setup.weights[this.setup.regions.indexOf(region)] ?? 1;
  }

  /**
   * This region's slice 0 month share of `q`'s month, after gathering up to `want` of room into it
   * from its other slices (a month-only rebalance, planned as an admission's is and conditioned
   * the same way; a share under a stale tag is retagged first): the snapshot read after.
   */
  private async monthOnSliceZero(workspaceId: string, q: MonthQuantity, want: number): Promise<AdmissionSnapshot> {
    const at = monthReadAt(q);
    const month = monthNumberOf(q.month);
    const share = regionShare(this.setup, q.limitMicros);
    const limits = monthOnly(share);
    const snapshot = await this.ledger.readSlices(workspaceId, at);
    const zero = snapshot.slices[0];
    if (zero === undefined || (!monthNeedsRetag(snapshot, limits) && monthRoomOf(zero, share) >= want)) return snapshot;
    const plan = planRebalance(snapshot, 0, { needMicros: want, limits, byok: false, hasMember: false, now: at });
    // Only the month share moves here: the money and the spend-rate headroom stay where they are.
    await this.gather(workspaceId, snapshot, plan.edits, (e, seen) =>
      sliceRebalance({ slice: e.slice, availableDelta: 0, prune: [], rateDelta: 0, monthDelta: e.monthDelta, ...(e.monthSet !== undefined ? { monthSet: e.monthSet } : {}) }, seen, seen.rateCap ?? 0, { id: month, limitMicros: share }),
    );
    return this.ledger.readSlices(workspaceId, at);
  }

  /**
   * Writes one part of a rebalance planned onto slice 0 (each slice's edit built by `build`, each
   * conditioned as an admission's rebalance is), in one transaction; a cancelled one is left (a
   * concurrent admission or settlement changed a slice: the give takes what slice 0 has).
   */
  private async gather(workspaceId: string, snapshot: AdmissionSnapshot, edits: readonly SliceEdit[], build: (edit: SliceEdit, seen: SliceView) => ReturnType<typeof sliceRebalance>): Promise<void> {
    const items: NonNullable<ConstructorParameters<typeof TransactWriteCommand>[0]['TransactItems']> = [];
    for (const e of edits) {
      const seen = snapshot.slices[e.slice];
      const built = seen === undefined ? undefined : build(e, seen);
      if (built !== undefined) items.push({ Update: { TableName: this.tables.ledger, Key: sliceKey(workspaceId, e.slice), ...built } });
    }
    if (items.length === 0) return;
    try {
      await this.own.send(new TransactWriteCommand({ TransactItems: items }));
    } catch (err) {
      if (!cancelled(err)) throw err;
    }
  }

  /** This region's slice 0 as read now (strongly consistent); undefined when it was never written. */
  private async sliceZero(workspaceId: string): Promise<SliceView | undefined> {
    const got = await this.own.send(new GetCommand({ TableName: this.tables.ledger, Key: sliceKey(workspaceId, 0), ConsistentRead: true }));
    return got.Item === undefined ? undefined : sliceView(0, got.Item, monthNumber(Date.now()));
  }

  /**
   * What transfers of the spend-rate cap's headroom under `q`'s cap have moved into `region`
   * (received less given, `movedIn`), by its transfer item as this replica holds it (its own:
   * current). The store side of `AdmissionLimits.spendRateMovedMicros`.
   */
  async movedInto(workspaceId: string, q: SpendQuantity, region: string = this.setup.region): Promise<number> {
    const item = region === this.setup.region ? await this.readOwn(workspaceId, q) : await this.readPeer(workspaceId, q, region);
    return movedIn(item, peersOf(this.setup, region));
  }

  /**
   * This region's slice 0 after gathering up to `want` of the cap's headroom into it from its other
   * slices (a spend-rate-only rebalance, planned as an admission's is and conditioned the same way;
   * aged-out slots tidied back into the headroom; headroom under another cap rewritten first, from
   * the capacity under this one: `rateRoomAfterRetag`).
   */
  private async rateOnSliceZero(workspaceId: string, q: SpendQuantity, want: number): Promise<SliceView | undefined> {
    const now = Date.now();
    const share = regionShare(this.setup, q.capMicros);
    const [snapshot, moved] = await Promise.all([this.ledger.readSlices(workspaceId, now), this.movedInto(workspaceId, q)]);
    const zero = snapshot.slices[0];
    if (zero === undefined || zero.rateCap === undefined || (zero.rateCap === share && zero.rateRoom >= want)) return zero;
    const plan = planRebalance(snapshot, 0, { needMicros: want, limits: rateOnly(share, moved), byok: false, hasMember: false, now });
    // Only the spend-rate headroom moves here: the money and the month share stay where they are.
    await this.gather(workspaceId, snapshot, plan.edits, (e, seen) =>
      sliceRebalance({ slice: e.slice, availableDelta: 0, prune: e.prune, rateDelta: e.rateDelta, monthDelta: 0, ...(e.rateSet !== undefined ? { rateSet: e.rateSet } : {}) }, seen, share),
    );
    return this.sliceZero(workspaceId);
  }

  /** This region's slice 0 credit, after gathering up to `want` into it from its other slices. */
  private async creditOnSliceZero(workspaceId: string, want: number): Promise<number> {
    const read = async (): Promise<number> => {
      const got = await this.own.send(new GetCommand({ TableName: this.tables.ledger, Key: sliceKey(workspaceId, 0), ConsistentRead: true }));
      return typeof got.Item?.availableMicros === 'number' ? got.Item.availableMicros : 0;
    };
    const zero = await read();
    if (zero >= want) return zero;
    await this.ledger.moveCreditTo(workspaceId, 0, want - zero, Date.now()).catch(() => false);
    return read();
  }

  /**
   * Answers what `peer` has asked of this region and this region has not answered yet: gives the
   * ask, or more toward `peer`'s weighted part of what both hold spare, down to all it has (an ask
   * has a request waiting; `giveFor`), in one transaction on its own items (the module comment).
   * Resolves to what it gave (0 also when it answered with nothing).
   */
  async answer(workspaceId: string, q: Quantity, peer: string): Promise<number> {
    const weight = { giver: this.weightOf(this.setup.region), asker: this.weightOf(peer) };
    for (let attempt = 0; attempt < ATTEMPTS; attempt += 1) {
      // The last attempt answers whatever it can give, down to nothing (with what is left said):
      // an ask is never left unanswered because this region's own admissions kept taking its credit.
      const last = attempt === ATTEMPTS - 1;
      const [theirs, mine] = await Promise.all([this.readPeer(workspaceId, q, peer), this.readOwn(workspaceId, q)]);
      const asked = peerCounters(theirs, this.setup.region).asked;
      const own = peerCounters(mine, peer);
      if (asked <= own.answered) return 0;
      const ttl = typeof theirs?.ttl === 'number' ? theirs.ttl : undefined;
      const ask = { asked, answered: own.answered };
      const [giverSpare, replicatedSpare] = await Promise.all([this.spareOf(workspaceId, q), this.spareOf(workspaceId, q, peer)]);
      const askerSpare = seenSpare(replicatedSpare, own.sent, peerCounters(theirs, this.setup.region).recv);
      const items: NonNullable<ConstructorParameters<typeof TransactWriteCommand>[0]['TransactItems']> = [];
      let give: number;
      if (q.kind === 'credit') {
        const want = last ? 0 : giveFor(ask, { giver: giverSpare, asker: askerSpare }, weight);
        give = want === 0 ? 0 : Math.min(want, await this.creditOnSliceZero(workspaceId, want));
        if (give > 0) {
          const s = new UpdateBuilder();
          s.add('availableMicros', -give).add('creditedMicros', -give).when(`${s.a('availableMicros')} >= ${s.v(give)}`);
          items.push({ Update: { TableName: this.tables.ledger, Key: sliceKey(workspaceId, 0), ...s.build() } });
        }
      } else if (q.kind === 'rate' && q.rateWindow !== undefined) {
        give = last ? 0 : giveFor(ask, { giver: giverSpare, asker: askerSpare }, weight);
        // Counted on key slice 0 alone: what it lent the key's other key slices and they left unspent comes back first.
        if (give > 0) give = Math.min(give, Math.max(0, await this.keyRoomOnSliceZero(workspaceId, q, give, ttl)));
        // Counted as requests of the minute on key slice 0's window slot, conditioned on the room
        // (the share, or the bound received) still being there.
        const home = give > 0 ? await this.readRateHome(workspaceId, q) : undefined;
        const share = regionShare(this.setup, q.ratePerMinute);
        const minute = rateMinuteOf(q);
        // No more than the slot has room for as just read (the spare was read a moment before).
        give = Math.min(give, Math.max(0, minuteCapacity(home, minute, share) - Math.max(0, minuteRequests(home, minute))));
        const built = give > 0 ? minuteGive(home, minute, share, give, countWindowTtl(q.rateWindow, Date.now())) : undefined;
        if (built !== undefined) items.push({ Update: { TableName: this.tables.ledger, Key: this.counterKey(workspaceId, q), ...built } });
        else give = 0;
      } else if (q.kind === 'rate') {
        give = last ? 0 : giveFor(ask, { giver: giverSpare, asker: askerSpare }, weight);
        // Counted as requests of the minute on key slice 0's counter (what it lent and is unspent taken back first), conditioned on the room still being there.
        if (give > 0) give = Math.min(give, Math.max(0, await this.keyRoomOnSliceZero(workspaceId, q, give, ttl)));
        if (give > 0) items.push({ Update: { TableName: this.tables.ledger, Key: this.counterKey(workspaceId, q), ...counterMove(give, regionShare(this.setup, q.ratePerMinute), ttl).build() } });
      } else if (q.kind === 'spend') {
        const want = last ? 0 : giveFor(ask, { giver: giverSpare, asker: askerSpare }, weight);
        give = 0;
        if (want > 0) {
          const share = regionShare(this.setup, q.capMicros);
          const zero = await this.rateOnSliceZero(workspaceId, q, want);
          // Never written: the whole share (and what moved here) is slice 0's; under another cap (the rewrite lost a race): nothing now.
          const room = zero?.rateCap === undefined ? rateRoomAfterRetag(share, movedIn(mine, peersOf(this.setup)), 0) : zero.rateCap === share ? zero.rateRoom : 0;
          give = Math.max(0, Math.min(want, room));
          const m = give > 0 ? rateMove(zero, -give, share, movedIn(mine, peersOf(this.setup)) - give) : undefined;
          if (m !== undefined) items.push({ Update: { TableName: this.tables.ledger, Key: sliceKey(workspaceId, 0), ...m.build() } });
          else give = 0;
        }
      } else if (q.kind === 'month') {
        const want = last ? 0 : giveFor(ask, { giver: giverSpare, asker: askerSpare }, weight);
        give = 0;
        if (want > 0) {
          const month = monthNumberOf(q.month);
          const share = regionShare(this.setup, q.limitMicros);
          const snapshot = await this.monthOnSliceZero(workspaceId, q, want);
          const zero = snapshot.slices[0];
          const stored = zero?.month.storedMonth;
          // A share under a stale tag (the rebalance lost a race) or already in a later month gives nothing now.
          if (zero !== undefined && !monthNeedsRetag(snapshot, monthOnly(share)) && (stored === undefined || stored <= month)) {
            give = Math.min(want, monthRoomOf(zero, share));
            if (give > 0) items.push({ Update: { TableName: this.tables.ledger, Key: sliceKey(workspaceId, 0), ...monthMove(month, stored, give, share).build() } });
          }
        }
      } else {
        give = last ? 0 : giveFor(ask, { giver: giverSpare, asker: askerSpare }, weight);
        // A key's window: counted on key slice 0 alone, so what it lent the key's other key slices and they left unspent comes back first.
        if (give > 0 && q.kind === 'key') give = Math.min(give, Math.max(0, await this.keyRoomOnSliceZero(workspaceId, q, give, ttl)));
        if (give > 0) {
          // Counted as used on the limit's window, conditioned on the room still being there.
          const w = windowMove(give, ttl);
          const used = w.a('usedMicros');
          w.when(`attribute_not_exists(${used}) OR ${used} <= ${w.v(regionShare(this.setup, q.limitMicros) - give)}`);
          items.push({ Update: { TableName: this.tables.ledger, Key: this.windowKey(workspaceId, q), ...w.build() } });
        }
      }
      const u = new UpdateBuilder();
      const names = counterNames(peer);
      this.stamp(u, workspaceId, q, ttl);
      u.when(equalsSeen(u, names.answered, own.answered)).when(equalsSeen(u, names.sent, own.sent));
      u.set(`${u.a(names.answered)} = ${u.v(asked)}, ${u.a(names.sent)} = ${u.v(own.sent + give)}, ${u.a(names.left)} = ${u.v(Math.max(0, giverSpare - give))}`);
      items.unshift({ Update: { TableName: this.tables.ledger, Key: this.itemKey(workspaceId, q), ...u.build() } });
      try {
        await this.own.send(new TransactWriteCommand({ TransactItems: items }));
        return give;
      } catch (err) {
        if (!cancelled(err)) throw err;
        await pause(attempt);
      }
    }
    return 0;
  }

  /** Every step the agent takes for one workspace's quantity: receive what each other region sent, answer what each asked. */
  async reconcile(workspaceId: string, q: Quantity, peers: readonly string[] = peersOf(this.setup)): Promise<{ received: TransferStep[]; given: TransferStep[] }> {
    const received: TransferStep[] = [];
    const given: TransferStep[] = [];
    for (const peer of peers) {
      const r = await this.receive(workspaceId, q, peer);
      if (r > 0) received.push({ peer, micros: r });
      const g = await this.answer(workspaceId, q, peer);
      if (g > 0) given.push({ peer, micros: g });
    }
    return { received, given };
  }

  /** This region's counters towards each other region, from its own item. */
  async counters(workspaceId: string, q: Quantity): Promise<Record<string, PeerCounters>> {
    const mine = await this.readOwn(workspaceId, q);
    return Object.fromEntries(peersOf(this.setup).map((p) => [p, peerCounters(mine, p)]));
  }
}

/** What a region's slices count as used of the month a snapshot was read for (its own use, plus what it gave, less what it received). */
function monthUsed(snapshot: AdmissionSnapshot): number {
  return snapshot.slices.reduce((a, s) => a + s.month.usedMicros, 0);
}
