/**
 * Admission decisions over a workspace's ledger slices, pure: no store, no clock of its own.
 *
 * A hot workspace's limited quantities are split into slices (escrow): each slice holds part of
 * the available credit, part of the spend-rate cap's headroom and part of the month limit's
 * headroom. An admission debits one slice; when that slice cannot cover the need, headroom moves
 * from other slices (a conditional transaction that can neither create nor destroy a unit); and
 * only a consistent snapshot of every slice, showing the whole cannot cover, refuses. These
 * functions make those three decisions: which refusal (SPEC's order, 402 before 429), which moves.
 *
 * Headroom that was never written is virtual: slice 0 owns all of it (the cap, the month limit),
 * every other slice none, which is what the store writes when it first touches such an item.
 */
import type { AdmissionLimits, Refusal } from '../gateway/ports';
import type { KeyShareView } from './key-slices';
import { partitionSlots, spendRetryAfterSeconds, type RateSlot } from './spend-rate';
import { secondsToNextMinute } from './windows';

/** One slice's share of a workspace month, as read. */
export interface MonthShareView {
  readonly exists: boolean;
  readonly settledMicros: number;
  readonly heldMicros: number;
  readonly usedMicros: number;
  readonly roomMicros: number;
  /** The month limit the headroom was written under; -1 for none. */
  readonly limitMicros: number;
  /**
   * The month (`yyyymm`) the slice's share is stored for, when one is: this month's (then
   * `exists`), or an earlier one's, which a write of this month's share starts over.
   */
  readonly storedMonth?: number;
}

/** One slice as read from the store. */
export interface SliceView {
  readonly slice: number;
  readonly availableMicros: number;
  readonly heldMicros: number;
  readonly spentMicros: number;
  readonly creditedMicros: number;
  /** The cap the slice's spend-rate headroom was written under; undefined: never written. */
  readonly rateCap?: number;
  readonly rateRoom: number;
  readonly rateTotal: number;
  /** The guard lap that tells the slots' seconds apart (see `core/spend-rate.ts`); undefined: no slot written yet. */
  readonly rateGuard?: number;
  readonly slots: readonly RateSlot[];
  readonly month: MonthShareView;
}

/** A limit window that is not sliced (a key's window, a member's month). */
export interface WindowView {
  readonly settledMicros: number;
  readonly heldMicros: number;
  readonly usedMicros: number;
}

/** Everything one admission's decision reads, taken as one consistent snapshot. */
export interface AdmissionSnapshot {
  /** Every slice ever used, by number (retired ones included: they may still hold money). */
  readonly slices: readonly SliceView[];
  /** How many slices admissions use now (slices 0..active-1). */
  readonly active: number;
  readonly keyRequests: number;
  readonly keyWindow?: WindowView;
  readonly memberMonth?: WindowView;
  /** The key's request counter on each key slice read (see key-slices.ts); `keyRequests` is their real total. */
  readonly keyCounters?: readonly KeyShareView[];
  /** The key's window on each key slice read; `keyWindow` is their real total. */
  readonly keyWindows?: readonly KeyShareView[];
}

/** What one admission asks. */
export interface AdmissionAsk {
  readonly needMicros: number;
  readonly limits: AdmissionLimits;
  readonly byok: boolean;
  readonly hasMember: boolean;
  readonly now: number;
}

/** The month-limit tag a request is checked under: the limit, or -1 when none is set. */
export function monthTag(limits: AdmissionLimits): number {
  return limits.workspaceLimitMicros ?? -1;
}

/** A slice's spend-rate headroom, with never-written headroom as the store would create it. */
export function rateRoomOf(s: SliceView, capMicros: number): number {
  if (s.rateCap === undefined) return s.slice === 0 ? capMicros : 0;
  return s.rateRoom;
}

/** A slice's month headroom, likewise. */
export function monthRoomOf(s: SliceView, limitMicros: number): number {
  if (!s.month.exists) return s.slice === 0 ? limitMicros : 0;
  return s.month.roomMicros;
}

/** Whether some slice's spend-rate headroom was written under another cap (the cap changed). */
export function rateNeedsRetag(snapshot: AdmissionSnapshot, capMicros: number): boolean {
  return snapshot.slices.some((s) => s.rateCap !== undefined && s.rateCap !== capMicros);
}

/** Whether some slice's month headroom was written under another limit (the limit changed). */
export function monthNeedsRetag(snapshot: AdmissionSnapshot, limits: AdmissionLimits): boolean {
  if (limits.workspaceLimitMicros === undefined) return false;
  return snapshot.slices.some((s) => s.month.exists && s.month.limitMicros !== limits.workspaceLimitMicros);
}

const sum = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0);

/**
 * The refusal a snapshot calls for, in SPEC's order: the key's request rate, then the 402s
 * (credit, the key's limit, the member's month, the workspace's month), then the spend rate; or
 * undefined when the whole workspace can cover the need. Every figure is workspace-wide.
 */
export function refusalFor(snapshot: AdmissionSnapshot, ask: AdmissionAsk): Refusal | undefined {
  const { limits, now } = ask;
  const need = ask.needMicros;
  if (snapshot.keyRequests >= limits.keyRatePerMinute) return { kind: 'rate_limit_exceeded', retryAfterSeconds: secondsToNextMinute(now) };
  if (ask.byok) return undefined;
  const available = sum(snapshot.slices.map((s) => s.availableMicros));
  if (available < need) return { kind: 'insufficient_credit', availableMicros: available };
  if (limits.keyLimitMicros !== undefined) {
    const w = snapshot.keyWindow ?? { settledMicros: 0, heldMicros: 0, usedMicros: 0 };
    if (w.usedMicros + need > limits.keyLimitMicros) {
      return { kind: 'key_limit_exceeded', settledMicros: w.settledMicros, heldMicros: w.heldMicros, limitMicros: limits.keyLimitMicros };
    }
  }
  if (ask.hasMember && limits.memberLimitMicros !== undefined) {
    const used = snapshot.memberMonth?.usedMicros ?? 0;
    if (used + need > limits.memberLimitMicros) return { kind: 'member_limit_exceeded', usedMicros: used, limitMicros: limits.memberLimitMicros };
  }
  if (limits.workspaceLimitMicros !== undefined) {
    const used = sum(snapshot.slices.map((s) => s.month.usedMicros));
    if (used + need > limits.workspaceLimitMicros) return { kind: 'workspace_limit_exceeded', usedMicros: used, limitMicros: limits.workspaceLimitMicros };
  }
  let live = 0;
  let earliest: number | undefined;
  for (const s of snapshot.slices) {
    const p = partitionSlots(s.slots, now);
    live += p.liveMicros;
    if (p.earliestLive !== undefined && (earliest === undefined || p.earliestLive < earliest)) earliest = p.earliestLive;
  }
  // A region's capacity is its share plus what transfers moved into it under this cap (docs/regions.md).
  const capacity = limits.spendRateCapMicros + (limits.spendRateMovedMicros ?? 0);
  if (need > capacity || live + need > capacity) {
    return { kind: 'spend_rate_exceeded', retryAfterSeconds: spendRetryAfterSeconds(earliest, now), capMicros: limits.spendRateCapMicros };
  }
  return undefined;
}

/** What a rebalance does to one slice. Deltas are what the slice gains (negative: gives). */
export interface SliceEdit {
  readonly slice: number;
  readonly availableDelta: number;
  /** Aged-out spend-rate slots to remove; their amounts return to this slice's headroom. */
  readonly prune: readonly RateSlot[];
  /** Headroom moved, after pruning; or, with `rateSet`, ignored. */
  readonly rateDelta: number;
  /** The headroom to write outright under the current cap (the cap changed or was never written). */
  readonly rateSet?: number;
  readonly monthDelta: number;
  /** The month headroom to write outright under the current limit (the limit changed). */
  readonly monthSet?: number;
}

/** One rebalance: conditional moves between slices that let `target` cover the need. */
export interface RebalancePlan {
  readonly target: number;
  readonly edits: readonly SliceEdit[];
}

/**
 * Moves `deficit` plus a fair buffer into `target` from the others, retired slices first (they
 * should empty), then the richest. Returns what each slice gives (positive numbers).
 */
function gather(spare: readonly number[], target: number, active: number, deficit: number, need: number): number[] {
  const gives = spare.map(() => 0);
  if (deficit <= 0) return gives;
  const total = sum(spare);
  // Beyond the deficit, take a fair share of what is left so the next requests do not move again.
  const buffer = Math.max(0, Math.floor((total - need) / Math.max(1, active)));
  let want = deficit + buffer;
  const order = spare
    .map((v, i) => ({ i, v }))
    .filter((x) => x.i !== target && x.v > 0)
    .sort((a, b) => Number(b.i >= active) - Number(a.i >= active) || b.v - a.v);
  for (const { i, v } of order) {
    if (want <= 0) break;
    const take = i >= active ? v : Math.min(v, want);
    gives[i] = take;
    want -= take;
  }
  return gives;
}

/**
 * The moves that let slice `target` cover the need, given a snapshot on which
 * {@link refusalFor} found no refusal. Headroom written under an old cap or limit is rewritten
 * whole (all of it on the target), from what every slice has used.
 */
export function planRebalance(snapshot: AdmissionSnapshot, target: number, ask: AdmissionAsk): RebalancePlan {
  const { limits, now } = ask;
  const need = ask.needMicros;
  const cap = limits.spendRateCapMicros;
  const slices = snapshot.slices;
  const pruned = slices.map((s) => partitionSlots(s.slots, now));

  const money = gather(
    slices.map((s) => s.availableMicros),
    target,
    snapshot.active,
    need - (slices[target]?.availableMicros ?? 0),
    need,
  );

  const retagRate = rateNeedsRetag(snapshot, cap);
  const rateSpare = slices.map((s, i) => rateRoomOf(s, cap) + sum((pruned[i]?.expired ?? []).map((e) => e.micros)));
  const rate = retagRate ? slices.map(() => 0) : gather(rateSpare, target, snapshot.active, need - (rateSpare[target] ?? 0), need);
  const liveTotal = sum(pruned.map((p) => p.liveMicros));

  const limit = limits.workspaceLimitMicros;
  const retagMonth = monthNeedsRetag(snapshot, limits);
  const monthSpare = slices.map((s) => (limit === undefined ? 0 : monthRoomOf(s, limit)));
  const month =
    limit === undefined || retagMonth ? slices.map(() => 0) : gather(monthSpare, target, snapshot.active, need - (monthSpare[target] ?? 0), need);
  const usedTotal = sum(slices.map((s) => s.month.usedMicros));

  const edits: SliceEdit[] = [];
  slices.forEach((s, i) => {
    const isTarget = i === target;
    const expired = pruned[i]?.expired ?? [];
    const giveMoney = money[i] ?? 0;
    const giveRate = rate[i] ?? 0;
    const giveMonth = month[i] ?? 0;
    const touched = isTarget || giveMoney > 0 || giveRate > 0 || giveMonth > 0 || retagRate || retagMonth;
    if (!touched) return;
    edits.push({
      slice: s.slice,
      availableDelta: isTarget ? sum(money) : -giveMoney,
      prune: expired,
      rateDelta: isTarget ? sum(rate) : -giveRate,
      ...(retagRate ? { rateSet: isTarget ? cap + (limits.spendRateMovedMicros ?? 0) - liveTotal : 0 } : {}),
      monthDelta: isTarget ? sum(month) : -giveMonth,
      ...(retagMonth && limit !== undefined ? { monthSet: isTarget ? limit - usedTotal : 0 } : {}),
    });
  });
  return { target, edits };
}

/**
 * Whether a workspace should get more slices: when, over a recent run of admissions, more than
 * one in five met a transaction conflict. Grows by half (at least one), or doubles when more than
 * half met one (a burst on too few slices, where every second at that count costs retries and
 * 503s), up to `max`.
 */
export function grownSliceCount(current: number, conflicts: number, admissions: number, max: number): number {
  if (admissions < 50 || conflicts * 5 <= admissions || current >= max) return current;
  const step = conflicts * 2 > admissions ? current : Math.ceil(current / 2);
  return Math.min(max, current + Math.max(1, step));
}

/**
 * The slice an admission tries next after its transaction was cancelled for a conflict: another
 * of the `active` slices (`draw` in [0, 1) picks which), since the one it met is busy with another
 * transaction right now and would most likely still be when the retry arrives. One slice: itself.
 */
export function sliceAfterConflict(slice: number, active: number, draw: number): number {
  if (active <= 1) return 0;
  const step = 1 + Math.min(active - 2, Math.floor(Math.max(0, draw) * (active - 1)));
  return (slice + step) % active;
}
