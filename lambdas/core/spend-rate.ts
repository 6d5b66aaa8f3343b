/**
 * The spend rate cap over a rolling 60 seconds. Reservations are kept in per-second buckets on
 * the balance item; a bucket counts until 60 s after the END of its second, so a reservation
 * counts for at least 60 s (SPEC) and at most 61 s. Pure arithmetic over the buckets.
 */

export const SPEND_WINDOW_MS = 60_000;

/** The bucket (epoch second) a reservation made at `now` falls in. */
export function bucketOf(now: number): number {
  return Math.floor(now / 1000);
}

/** Epoch ms at which a bucket stops counting. */
export function bucketExpiry(second: number): number {
  return (second + 1) * 1000 + SPEND_WINDOW_MS;
}

/** Splits buckets into what still counts and what has aged out. */
export function partitionBuckets(
  buckets: Readonly<Record<string, number>>,
  now: number,
): { readonly liveMicros: number; readonly expired: readonly (readonly [string, number])[]; readonly earliestLive?: number } {
  let liveMicros = 0;
  let earliestLive: number | undefined;
  const expired: (readonly [string, number])[] = [];
  for (const [key, value] of Object.entries(buckets)) {
    const second = Number(key);
    if (bucketExpiry(second) <= now) {
      expired.push([key, value]);
    } else {
      liveMicros += value;
      if (earliestLive === undefined || second < earliestLive) earliestLive = second;
    }
  }
  return earliestLive === undefined ? { liveMicros, expired } : { liveMicros, expired, earliestLive };
}

/** SPEC: the refusal clears 60 s after the earliest counted reservation; whole seconds, at least 1. */
export function spendRetryAfterSeconds(earliestLive: number | undefined, now: number): number {
  if (earliestLive === undefined) return 1;
  return Math.max(1, Math.ceil((bucketExpiry(earliestLive) - now) / 1000));
}

/**
 * Slots of the bounded spend-rate record on a ledger slice: second `s` lives in slot `s mod 64`.
 * A slot is reused 64 s later, after its reservation stopped counting (61 s at most), so the
 * record never grows with traffic; the writer that finds an aged-out second in its slot removes
 * it and returns its amount to the slice's headroom in the same write.
 */
export const RATE_SLOTS = 64;

/** The slot a second's reservations go in. */
export function slotOf(second: number): number {
  return ((second % RATE_SLOTS) + RATE_SLOTS) % RATE_SLOTS;
}

/** One occupied slot as stored: its second and what was reserved in it. */
export interface RateSlot {
  readonly slot: number;
  readonly second: number;
  readonly micros: number;
}

/** Splits slots into what still counts at `now` and what has aged out. */
export function partitionSlots(
  slots: readonly RateSlot[],
  now: number,
): { readonly liveMicros: number; readonly expired: readonly RateSlot[]; readonly earliestLive?: number } {
  const buckets: Record<string, number> = {};
  const expired: RateSlot[] = [];
  for (const s of slots) {
    if (bucketExpiry(s.second) <= now) expired.push(s);
    else buckets[String(s.second)] = (buckets[String(s.second)] ?? 0) + s.micros;
  }
  const live = partitionBuckets(buckets, now);
  return live.earliestLive === undefined ? { liveMicros: live.liveMicros, expired } : { liveMicros: live.liveMicros, expired, earliestLive: live.earliestLive };
}

/**
 * The slots as a writer that knew `slots` leaves them after reserving `micros` at `second`: the
 * slot's amount grows within its second and starts over on a new one (an aged-out second there
 * is overwritten). Lets a process keep what it knows of a slice current after its own writes, so
 * its next reservation's condition names what is really stored.
 */
export function slotsAfterReservation(slots: readonly RateSlot[], second: number, micros: number): RateSlot[] {
  const k = slotOf(second);
  const held = slotAt(slots, k);
  const next: RateSlot = { slot: k, second, micros: held !== undefined && held.second === second ? held.micros + micros : micros };
  // Loops and a module-level comparator, no closure made per call: a closure's optimized code is
  // dropped at each full collection once its last instance is gone (docs/gateway.md, "Pretenuring").
  const out: RateSlot[] = [];
  for (const s of slots) if (s.slot !== k) out.push(s);
  out.push(next);
  return out.sort(bySlot);
}

const bySlot = (a: RateSlot, b: RateSlot): number => a.slot - b.slot;

/** The entry for slot `k`, if the slots hold one (the first, as `find` would). */
export function slotAt(slots: readonly RateSlot[], k: number): RateSlot | undefined {
  for (const s of slots) if (s.slot === k) return s;
  return undefined;
}

/** The slots left once `pruned` (aged-out entries, each removed only if still exactly as seen) are gone. */
export function slotsAfterPrune(slots: readonly RateSlot[], pruned: readonly RateSlot[]): RateSlot[] {
  return slots.filter((s) => !pruned.some((p) => p.slot === s.slot && p.second === s.second && p.micros === s.micros));
}

/**
 * A slot keeps its second and its amount in one number, so that 64 slots stay small enough for
 * the slice item to stay under 1 KB (one write unit, two in a transaction, where a second
 * attribute per slot took it past 1 KB and doubled every write of the slice). The value is
 * `tag × SLOT_SPAN + micros`, `tag` being the slot's lap (its second ÷ 64) modulo
 * {@link SLOT_LAPS}. The tag leads, so a condition can ask "this slot is free or already this
 * lap's, and can take this much more" as a range (`BETWEEN`), and a reservation within the same
 * second adds its micro-units to the value. Every value stays below 2^53, so it reads back exact.
 */
export const SLOT_LAPS = 900;
/** What one slot's value holds of micro-units: below 10^13 (10 million minor units reserved in one second on one slice). */
export const SLOT_SPAN = 10_000_000_000_000;
/**
 * Laps a writer's clock may trail the slice's guard lap. The guard lap `g` (stored with the
 * slots) keeps every slot's lap within `[g − LAP_SKEW, g − LAP_SKEW + SLOT_LAPS)`, so the tag
 * names exactly one lap: a reservation may be written only at a lap in that range, and the guard
 * is moved forward only after every slot older than the new range was removed.
 */
export const LAP_SKEW = 2;

const mod = (a: number, m: number): number => ((a % m) + m) % m;

/** The lap (64-second round of the slots) a second is in. */
export function lapOf(second: number): number {
  return Math.floor(second / RATE_SLOTS);
}

/** The stored value of a slot holding `micros` reserved in `second`. */
export function slotValue(second: number, micros: number): number {
  return mod(lapOf(second), SLOT_LAPS) * SLOT_SPAN + micros;
}

/** The lowest stored value of `second`'s lap (its tag with nothing reserved). */
export function lapFloor(second: number): number {
  return slotValue(second, 0);
}

/** Reads slot `slot`'s stored `value` back, under guard lap `guard`: its second and micro-units. */
export function slotEntry(slot: number, value: number, guard: number): RateSlot {
  const tag = Math.floor(value / SLOT_SPAN);
  const low = guard - LAP_SKEW;
  const lap = low + mod(tag - low, SLOT_LAPS);
  return { slot, second: lap * RATE_SLOTS + slot, micros: value - tag * SLOT_SPAN };
}

/** The guard laps under which a reservation in `second` may be written: `[lap − SLOT_LAPS + LAP_SKEW + 1, lap + LAP_SKEW]`. */
export function guardRange(second: number): { readonly low: number; readonly high: number } {
  const lap = lapOf(second);
  return { low: lap - SLOT_LAPS + LAP_SKEW + 1, high: lap + LAP_SKEW };
}

/** Whether guard lap `guard` (undefined: none yet) lets a reservation in `second` be written. */
export function guardAdmits(guard: number | undefined, second: number): boolean {
  if (guard === undefined) return true;
  const r = guardRange(second);
  return guard >= r.low && guard <= r.high;
}
