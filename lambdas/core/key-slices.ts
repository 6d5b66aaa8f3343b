/**
 * A hot key's request counter and credit-limit window, split over key slices, pure.
 *
 * A key's items live on key slice `k = slice mod KEY_SLICES` of the hold's workspace slice, so a
 * key gets as many slices as its workspace (up to {@link KEY_SLICES}) without a second
 * mechanism. Key slice 0 is today's item, written exactly as before: its condition is
 * `used + need <= limit` (the counter: `requests < rate`) over its own figure, and that figure
 * also counts what slice 0 has lent to the others (`given`). Key slice j > 0 holds only headroom
 * lent to it (`room`, tagged with the limit it was lent under) and spends it conditionally. So the
 * real total is `Σ used − given₀` and slice 0's own condition keeps `Σ used − given₀ <= limit`:
 * no interleaving can overrun, and a move (slice 0 lends, a slice returns) can neither create nor
 * destroy a unit. A refusal is decided only from a consistent read of every key slice.
 */
import type { AdmissionLimits } from '../gateway/ports';

/** Most key slices one key has: 8 × 125 req/s per key slice (6 write units per request) = 1,333 req/s. */
export const KEY_SLICES = 8;

/** The key slice a hold on workspace slice `slice` uses. */
export function keySliceOf(slice: number): number {
  return slice % KEY_SLICES;
}

/** How many key slices a workspace with `slices` slices (ever used) may have written. */
export function keySliceCount(slices: number): number {
  return Math.max(1, Math.min(KEY_SLICES, slices));
}

/** One key slice's counter or window, as read. Money or requests alike. */
export interface KeyShareView {
  readonly slice: number;
  readonly exists: boolean;
  /** Slice 0: its own use plus what it lent. Slice j: its own use. */
  readonly used: number;
  readonly settled: number;
  readonly held: number;
  /** Slice 0: what it has lent out (net). */
  readonly given: number;
  /** Slice j: headroom lent to it and not yet spent. */
  readonly room: number;
  /** Slice j: the limit its headroom was lent under; -1 none. */
  readonly tag: number;
}

/** The key's real totals over every key slice. */
export function keyTotals(shares: readonly KeyShareView[]): { used: number; settled: number; held: number } {
  let used = 0;
  let settled = 0;
  let held = 0;
  for (const s of shares) {
    used += s.slice === 0 ? s.used - s.given : s.used;
    settled += s.settled;
    held += s.held;
  }
  return { used, settled, held };
}

/** What a key rebalance does to one key slice. */
export interface KeyShareEdit {
  readonly slice: number;
  /** Slice 0: added to `used` and `given` (lent, positive; returned, negative). Slice j: added to `room`. */
  readonly delta: number;
  /** Slice j only: rewrite `room` to 0 under the current limit (it was lent under another). */
  readonly retag?: boolean;
  /** Slice 0 only, on a retag: the new `given` (and `used` moves by the same difference). */
  readonly givenSet?: number;
}

/**
 * The moves that let key slice `target` cover `need` under `limit`, from a consistent read on
 * which the key's real total leaves room. Headroom lent under another limit is first taken back
 * whole (slice j's room to 0, slice 0's `given` recomputed from what the slices have used); the
 * next attempt then lends under the current limit. Slice 0 lends the deficit plus a fair share of
 * what is left; other slices give their spare only when slice 0 cannot cover.
 */
export function planKeyRebalance(shares: readonly KeyShareView[], target: number, need: number, limit: number, active: number): KeyShareEdit[] {
  if (target === 0) {
    // Slice 0 takes back the deficit plus a fair share of what is left, richest lender first,
    // so the others keep headroom for their own requests.
    const re0 = retagged(shares, limit);
    if (re0 !== undefined) return re0;
    const spare0 = Math.max(0, limit - (shares.find((s) => s.slice === 0)?.used ?? 0));
    const lenders = shares.filter((s) => s.slice !== 0 && s.room > 0 && s.tag === limit).sort((a, b) => b.room - a.room);
    const deficit0 = need - spare0;
    if (deficit0 <= 0) return [];
    const left = lenders.reduce((a, s) => a + s.room, 0) + spare0 - need;
    let want = deficit0 + Math.floor(Math.max(0, left) / Math.max(1, active));
    const edits: KeyShareEdit[] = [];
    let back = 0;
    for (const s of lenders) {
      if (want <= 0) break;
      const take = Math.min(s.room, want);
      edits.push({ slice: s.slice, delta: -take });
      back += take;
      want -= take;
    }
    if (back > 0) edits.push({ slice: 0, delta: -back });
    return edits;
  }
  const re = retagged(shares, limit);
  if (re !== undefined) return re;
  const zero = shares.find((s) => s.slice === 0);
  const mine = shares.find((s) => s.slice === target);
  const have = mine !== undefined && mine.tag === limit ? mine.room : 0;
  const deficit = need - have;
  if (deficit <= 0) return [];
  const spareZero = Math.max(0, limit - (zero?.used ?? 0));
  const edits: KeyShareEdit[] = [];
  if (spareZero >= deficit) {
    const left = spareZero - deficit;
    const lend = deficit + Math.floor(left / Math.max(1, active));
    edits.push({ slice: 0, delta: lend }, { slice: target, delta: lend });
    return edits;
  }
  // Slice 0 cannot cover: gather from the others (through slice 0's books, so `given` stays the sum lent).
  let want = deficit;
  let taken = 0;
  for (const s of [...shares].sort((a, b) => b.room - a.room)) {
    if (want <= 0) break;
    if (s.slice === 0 || s.slice === target || s.room <= 0 || s.tag !== limit) continue;
    const take = Math.min(s.room, want);
    edits.push({ slice: s.slice, delta: -take });
    taken += take;
    want -= take;
  }
  const fromZero = Math.min(spareZero, Math.max(0, want));
  // Returned to slice 0 (−taken) and lent on (+taken + fromZero): net fromZero on slice 0's books.
  if (fromZero !== 0) edits.push({ slice: 0, delta: fromZero });
  edits.push({ slice: target, delta: taken + fromZero });
  return edits;
}

/**
 * When some key slice's headroom was lent under another limit: take back all headroom lent, every
 * slice j's (each rewrite conditioned on the `used` it read), so what slice 0 has lent is then
 * exactly what they used. A slice j whose tag is current keeps nothing either: its room, read item
 * by item, may be older than slice 0's figures (a lend between the two reads would otherwise count
 * on slice j and no longer on slice 0), and a rewrite of its room to 0 wipes such a lend with it.
 */
function retagged(shares: readonly KeyShareView[], limit: number): KeyShareEdit[] | undefined {
  if (!shares.some((s) => s.slice !== 0 && s.exists && s.tag !== limit)) return undefined;
  const lent = shares.filter((s) => s.slice !== 0 && s.exists);
  const given = lent.reduce((a, s) => a + s.used, 0);
  return [...lent.map((s) => ({ slice: s.slice, delta: 0, retag: true })), { slice: 0, delta: 0, givenSet: given }];
}

/** The limit the key's window is checked under; -1 when the key has none. */
export function keyLimitTag(limits: AdmissionLimits): number {
  return limits.keyLimitMicros ?? -1;
}
