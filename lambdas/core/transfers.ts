/**
 * Moving a workspace's credit, or a key limit's headroom, between regions without an item both
 * write (docs/regions.md, "Moving headroom between regions"): pure decisions over monotone
 * counters, with no store. Each region keeps, on a transfer item of its own per workspace and
 * quantity, four counters per other region `p`, each only ever growing:
 *
 * - `sent[p]`: everything it has ever given to `p`;
 * - `recv[p]`: everything it has ever credited from `p` (advanced to a `sent` it read, never past);
 * - `asked[p]`: everything it has ever asked `p` for (urgently: a request is waiting);
 * - `answered[p]`: the `asked` of `p`'s it has answered up to (with anything from 0 to the amount).
 *
 * In transit from `g` to `r` is `sent_g[r] − recv_r[g] ≥ 0`: on neither side, spendable by no one,
 * never lost. Credit moves between slices (`available`); a key limit's headroom moves on the two
 * regions' key windows (key slice 0's `used` up by a give, down by a receive), and a member month
 * limit's on the two regions' member month items likewise, so the limit each region's ledger
 * checks is its fixed share and a region's capacity is `share − used`. A workspace month limit's
 * headroom moves on the regions' slice 0 month shares (`mr` room and `mu` used, one down and the
 * other up by the same amount), keeping `Σ mr + Σ mu = share` in each region. The spend-rate
 * cap's headroom moves on the regions' slice 0 headroom (`rr`, under the tag `rc` = the region's
 * share of the cap): a permanent move of cap share under that cap, so each region keeps
 * `Σ rr + live reservations = share + Σ recv − Σ sent` (its capacity) whatever ages out, and
 * re-derives its headroom under a changed cap as that capacity less what is live
 * ({@link rateRoomAfterRetag}).
 */
import { rateNeedsRetag, rateRoomOf, type AdmissionSnapshot } from './admission';
import { partitionSlots } from './spend-rate';

/** A region's counters towards one other region, on its own transfer item. */
export interface PeerCounters {
  readonly sent: number;
  readonly recv: number;
  readonly asked: number;
  readonly answered: number;
  /**
   * Not a counter: what the region had spare of the quantity once its last answer to `p` was
   * given. An answer short of the ask with nothing left is the proof that the workspace had no more
   * there (a 402); short with some left (it could not gather it in time) is not.
   */
  readonly left: number;
}

/**
 * What a quantity is: a workspace's credit, one key window's headroom under one limit, one member
 * month's headroom under one limit, the workspace month's (`yyyy-mm`) headroom under one limit,
 * the spend-rate cap's headroom under one cap (the whole cap across regions: the tag), or one
 * key's requests of one minute (`windowSk` its request counter's sort key, `RATE#<key>#<minute>`)
 * under one rate per minute.
 */
export type Quantity =
  | { readonly kind: 'credit' }
  | { readonly kind: 'spend'; readonly capMicros: number }
  | {
      readonly kind: 'rate';
      readonly keyId: string;
      readonly windowSk: string;
      readonly ratePerMinute: number;
      /**
       * The key window item the minute counts on, when it counts on one (`keyRateWindow`: a key
       * whose credit limit is tracked): the moves go on its count and bound slots, not on the
       * counter. Not part of the quantity's id (every region derives the same place for a minute
       * from the key's record); stamped on the transfer item so a giver's agent knows it.
       */
      readonly rateWindow?: string;
    }
  | { readonly kind: 'month'; readonly month: string; readonly limitMicros: number }
  | { readonly kind: 'key'; readonly keyId: string; readonly windowSk: string; readonly limitMicros: number }
  | { readonly kind: 'member'; readonly memberId: string; readonly windowSk: string; readonly limitMicros: number };

/** A quantity moved on a window item (a key window or a member month): its `usedMicros` carries what was given and received. */
export type WindowQuantity = Extract<Quantity, { kind: 'key' | 'member' }>;

/**
 * The transfer item's sort key of a quantity: a window's (`KEYWIN#…`, `MEMBERMONTH#…`) carries its
 * limit, so a changed limit starts afresh (transfers under the old limit are void).
 */
export function quantityId(q: Quantity): string {
  if (q.kind === 'credit') return 'CREDIT';
  if (q.kind === 'spend') return `SPEND~L${q.capMicros}`;
  if (q.kind === 'rate') return `${q.windowSk}~L${q.ratePerMinute}`;
  return q.kind === 'month' ? `MONTH#${q.month}~L${q.limitMicros}` : `${q.windowSk}~L${q.limitMicros}`;
}

const MONTH_ID = /^\d{4}-(0[1-9]|1[0-2])$/;

/**
 * The quantity a transfer item's sort key names, with the key or member its item is stamped with
 * (`keyId`, `memberId`; for a key's minute, `rateWindow`, the key window it counts on, if any);
 * undefined for one this version does not know.
 */
export function quantityOf(sk: string, keyId: unknown, memberId?: unknown, rateWindow?: unknown): Quantity | undefined {
  if (sk === 'CREDIT') return { kind: 'credit' };
  const at = sk.lastIndexOf('~L');
  if (at < 0) return undefined;
  const limitMicros = Number(sk.slice(at + 2));
  if (!Number.isSafeInteger(limitMicros) || limitMicros < 0) return undefined;
  const windowSk = sk.slice(0, at);
  if (windowSk === 'SPEND') return { kind: 'spend', capMicros: limitMicros };
  if (sk.startsWith('RATE#') && typeof keyId === 'string') {
    // The minute's place is the key's window only when that window is the key's own (a stamp naming another key's is ignored).
    const onWindow = typeof rateWindow === 'string' && rateWindow.startsWith(`KEYWIN#${keyId}#`);
    return { kind: 'rate', keyId, windowSk, ratePerMinute: limitMicros, ...(onWindow ? { rateWindow } : {}) };
  }
  if (sk.startsWith('KEYWIN#') && typeof keyId === 'string') return { kind: 'key', keyId, windowSk, limitMicros };
  if (sk.startsWith('MEMBERMONTH#') && typeof memberId === 'string') return { kind: 'member', memberId, windowSk, limitMicros };
  if (sk.startsWith('MONTH#') && MONTH_ID.test(windowSk.slice('MONTH#'.length))) return { kind: 'month', month: windowSk.slice('MONTH#'.length), limitMicros };
  return undefined;
}

/** The counters' attribute names towards region `peer` (region names hold `-`: always written through expression names). */
export function counterNames(peer: string): { readonly sent: string; readonly recv: string; readonly asked: string; readonly answered: string; readonly left: string } {
  return { sent: `sent_${peer}`, recv: `recv_${peer}`, asked: `asked_${peer}`, answered: `answered_${peer}`, left: `left_${peer}` };
}

function count(v: unknown): number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : 0;
}

/** A transfer item's counters towards `peer` (a missing item or counter is 0). */
export function peerCounters(item: Record<string, unknown> | undefined, peer: string): PeerCounters {
  const n = counterNames(peer);
  return { sent: count(item?.[n.sent]), recv: count(item?.[n.recv]), asked: count(item?.[n.asked]), answered: count(item?.[n.answered]), left: count(item?.[n.left]) };
}

/**
 * What region `peer` has spare of a quantity, as this region can tell: its figure as replicated
 * here, plus what this region sent it that its item here does not show credited yet (replication
 * is behind: the peer has it, or will).
 */
export function seenSpare(replicatedSpare: number, sentToPeer: number, peerRecvFromMe: number): number {
  return Math.max(0, replicatedSpare) + Math.max(0, sentToPeer - peerRecvFromMe);
}

/**
 * What a receiving region credits from `giver` now: what the giver's item (as replicated, possibly
 * behind, never ahead) says it sent, less what the receiver has already credited; 0 when nothing
 * new has arrived.
 */
export function receivable(giverSentToMe: number, myRecvFromGiver: number): number {
  return Math.max(0, giverSentToMe - myRecvFromGiver);
}

/**
 * What a giving region gives in answer to an ask: the part not answered yet, and more when that
 * leaves the asker below its weighted part of what the two hold spare (`askerWeight /
 * (askerWeight + giverWeight)` of both spares, the asker's as replicated at the giver), so a region
 * whose traffic runs above its share asks once and then serves, not once per request; never more
 * than the giver has spare (an ask has a request waiting: down to zero). 0 when nothing new is
 * asked. Pure arithmetic on integers (a product of a balance and a weight can pass 2^53: BigInt).
 */
export function giveFor(ask: { readonly asked: number; readonly answered: number }, spare: { readonly giver: number; readonly asker: number }, weight: { readonly giver: number; readonly asker: number }): number {
  const open = ask.asked - ask.answered;
  if (open <= 0) return 0;
  const giver = Math.max(0, spare.giver);
  const asker = Math.max(0, spare.asker);
  const fair = Number(((BigInt(giver) + BigInt(asker)) * BigInt(weight.asker)) / BigInt(weight.asker + weight.giver)) - asker;
  return Math.max(0, Math.min(giver, Math.max(open, fair)));
}

/** What a region's counters under one quantity have moved into it: everything it credited from the others less everything it gave them (negative when it gave more). */
export function movedIn(item: Record<string, unknown> | undefined, peers: readonly string[]): number {
  return peers.reduce((a, p) => {
    const c = peerCounters(item, p);
    return a + c.recv - c.sent;
  }, 0);
}

/**
 * The tag rule of the spend-rate cap: a region's headroom written under a changed cap (a new tag,
 * `rc`) is its share of the new cap, plus what transfers under that cap have moved into it
 * (`movedIn` of the cap's counters: 0 for a cap never moved under, and what a cap set before, then
 * changed and set again, left moved), less its live reservations. Transfers under another cap are
 * not counted (they are that cap's), and a move under this cap is never undone by the rewrite.
 */
export function rateRoomAfterRetag(shareMicros: number, movedMicros: number, liveMicros: number): number {
  return shareMicros + movedMicros - liveMicros;
}

/**
 * What a region has spare of the spend-rate cap's headroom at `now`, by its slices as read: the
 * headroom on them (never-written headroom as slice 0's share) plus what aged out in slots not
 * tidied yet; when the slices were written under another cap, its capacity under this one
 * ({@link rateRoomAfterRetag}). Never below 0.
 */
export function spendSpare(snapshot: AdmissionSnapshot, shareMicros: number, movedMicros: number, now: number): number {
  const parts = snapshot.slices.map((s) => ({ s, p: partitionSlots(s.slots, now) }));
  if (rateNeedsRetag(snapshot, shareMicros)) {
    return Math.max(0, rateRoomAfterRetag(shareMicros, movedMicros, parts.reduce((a, { p }) => a + p.liveMicros, 0)));
  }
  return Math.max(0, parts.reduce((a, { s, p }) => a + rateRoomOf(s, shareMicros) + p.expired.reduce((b, e) => b + e.micros, 0), 0));
}
