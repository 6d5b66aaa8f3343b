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
 * never lost.
 */

/** A region's counters towards one other region, on its own transfer item. */
export interface PeerCounters {
  readonly sent: number;
  readonly recv: number;
  readonly asked: number;
  readonly answered: number;
}

/** What a quantity is: a workspace's credit, or one key window's headroom under one limit. */
export type Quantity = { readonly kind: 'credit' } | { readonly kind: 'key'; readonly keyId: string; readonly windowSk: string; readonly limitMicros: number };

/** The transfer item's sort key of a quantity: a key window's carries its limit, so a changed limit starts afresh (transfers under the old limit are void). */
export function quantityId(q: Quantity): string {
  return q.kind === 'credit' ? 'CREDIT' : `${q.windowSk}~L${q.limitMicros}`;
}

/** The quantity a transfer item's sort key names (and, for a key window, the key it is of); undefined for one this version does not know. */
export function quantityOf(sk: string, keyId: unknown): Quantity | undefined {
  if (sk === 'CREDIT') return { kind: 'credit' };
  const at = sk.lastIndexOf('~L');
  if (!sk.startsWith('KEYWIN#') || at < 0 || typeof keyId !== 'string') return undefined;
  const limitMicros = Number(sk.slice(at + 2));
  if (!Number.isSafeInteger(limitMicros) || limitMicros < 0) return undefined;
  return { kind: 'key', keyId, windowSk: sk.slice(0, at), limitMicros };
}

/** The counters' attribute names towards region `peer` (region names hold `-`: always written through expression names). */
export function counterNames(peer: string): { readonly sent: string; readonly recv: string; readonly asked: string; readonly answered: string } {
  return { sent: `sent_${peer}`, recv: `recv_${peer}`, asked: `asked_${peer}`, answered: `answered_${peer}` };
}

function count(v: unknown): number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : 0;
}

/** A transfer item's counters towards `peer` (a missing item or counter is 0). */
export function peerCounters(item: Record<string, unknown> | undefined, peer: string): PeerCounters {
  const n = counterNames(peer);
  return { sent: count(item?.[n.sent]), recv: count(item?.[n.recv]), asked: count(item?.[n.asked]), answered: count(item?.[n.answered]) };
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
 * What a giving region gives in answer to an urgent ask: the part of the ask not answered yet,
 * down to all it has spare (an urgent ask has a request waiting); 0 when nothing is asked.
 */
export function urgentGive(askedOfMe: number, answeredSoFar: number, spare: number): number {
  return Math.max(0, Math.min(askedOfMe - answeredSoFar, spare));
}

/**
 * A region's capacity under a key limit's one window: its derived share of the limit plus all it
 * has received under it. What it has given is counted as used on its key window (so an
 * admission's condition on that item sees it at once); see docs/regions.md, "Each limit, split".
 */
export function keyCapacity(share: number, received: readonly number[]): number {
  return share + received.reduce((a, b) => a + b, 0);
}
