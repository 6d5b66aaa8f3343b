/**
 * Item builders and readers for the ledger: every update and condition the ledger, holds and
 * usage rows are written with lives here (or in the modules beside it), each with its reason.
 *
 * A slice item (`BALANCE`) holds, in one item kept under 1 KB (one write unit, two in a
 * transaction) however busy the workspace:
 * - `availableMicros`, `heldMicros`, `spentMicros`, `creditedMicros`: the slice's money, with
 *   `credited = available + held + spent` on every slice (moves carry `credited` along);
 * - the spend-rate cap's headroom on this slice: `rc` (the cap it was written under), `rr` (the
 *   headroom), `rt` (what its live reservations total), `rl` (the guard lap) and 64 cyclic
 *   one-second slots, slot k under the one-character name `SLOT_NAMES[k]`, each one number
 *   holding its second's lap and its amount (see `core/spend-rate.ts`);
 * - the slice's share of the workspace month: `mo` (the month, `yyyymm`), `ms` settled, `mh`
 *   held, `mu` used (their sum), `mr` its share of the month limit's headroom and `ml` the limit
 *   that headroom was written under (-1: none). A new month's share starts over on the same
 *   attributes (see {@link addMonthDebit});
 * - on slice 0 only: `sliceCount` (slices admissions use), `sliceHigh` (most ever used, so
 *   retired slices are still read), `sliceFloor` (the operator's setting), `sliceChangedAt`.
 * Names are short because every byte of the item is paid on every write: 64 slots of one
 * character and a 16-digit number each, about 640 bytes, leave the rest of the item room.
 *
 * A key window (`KEYWIN#…`, on each key slice) and a member month (`MEMBERMONTH#…`) hold
 * `settledMicros`, `heldMicros` and `usedMicros` (their sum); a key slice j > 0 also `roomMicros`
 * and `limitMicros` (what key slice 0 lent it, and under which limit). They are written only while
 * their limit is tracked; `armed` marks the instant an arming's base was written (see
 * `limit-arming.ts`), after which a write that only tracks is refused.
 */
import type { MonthShareView, SliceEdit, SliceView, WindowView } from '../core/admission';
import type { KeyShareEdit, KeyShareView } from '../core/key-slices';
import { LAP_SKEW, RATE_SLOTS, SLOT_LAPS, SLOT_SPAN, bucketExpiry, guardRange, lapFloor, lapOf, slotAt, slotEntry, slotOf, slotValue, type RateSlot } from '../core/spend-rate';
import { UpdateBuilder, type BuiltUpdate } from './expr';

/** An item as the document client returns it. */
export type Item = Record<string, unknown>;

function num(v: unknown): number {
  return typeof v === 'number' ? v : 0;
}

/** Attribute names of a slice item that are not its money's. */
export const SLICE_NAMES = {
  rateCap: 'rc',
  rateRoom: 'rr',
  rateTotal: 'rt',
  guard: 'rl',
  month: 'mo',
  monthSettled: 'ms',
  monthHeld: 'mh',
  monthUsed: 'mu',
  monthRoom: 'mr',
  monthLimit: 'ml',
} as const;
const N = SLICE_NAMES;

/** Slot k's attribute: the k-th base64url digit, one character (64 of them, one per slot). */
export const SLOT_NAMES = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

/** The attribute of slot `k`. */
export function slotName(k: number): string {
  return SLOT_NAMES.charAt(k);
}

/** The slice's guard lap (`rl`), when it has one. */
export function guardOf(item: Item | undefined): number | undefined {
  const g = item?.[N.guard];
  return typeof g === 'number' ? g : undefined;
}

/** The occupied spend-rate slots of a slice item. */
export function slotsOf(item: Item | undefined): RateSlot[] {
  const out: RateSlot[] = [];
  const guard = guardOf(item);
  if (item === undefined || guard === undefined) return out;
  for (let k = 0; k < RATE_SLOTS; k += 1) {
    const value = item[slotName(k)];
    if (typeof value === 'number') out.push(slotEntry(k, value, guard));
  }
  return out;
}

/** The slice item's share of month `month` (`yyyymm`); a share of another month (or none) is empty. */
export function monthView(item: Item | undefined, month: number): MonthShareView {
  const stored = item?.[N.month];
  const storedMonth = typeof stored === 'number' ? stored : undefined;
  if (item === undefined || storedMonth !== month) {
    return { exists: false, settledMicros: 0, heldMicros: 0, usedMicros: 0, roomMicros: 0, limitMicros: -1, ...(storedMonth === undefined ? {} : { storedMonth }) };
  }
  return {
    exists: true,
    settledMicros: num(item[N.monthSettled]),
    heldMicros: num(item[N.monthHeld]),
    usedMicros: num(item[N.monthUsed]),
    roomMicros: num(item[N.monthRoom]),
    limitMicros: typeof item[N.monthLimit] === 'number' ? (item[N.monthLimit] as number) : -1,
    storedMonth,
  };
}

/** A slice item as a view, with its share of month `month` (`yyyymm`). */
export function sliceView(slice: number, item: Item | undefined, month: number): SliceView {
  const i = item ?? {};
  const guard = guardOf(item);
  return {
    slice,
    availableMicros: num(i.availableMicros),
    heldMicros: num(i.heldMicros),
    spentMicros: num(i.spentMicros),
    creditedMicros: num(i.creditedMicros),
    ...(typeof i[N.rateCap] === 'number' ? { rateCap: i[N.rateCap] as number } : {}),
    rateRoom: num(i[N.rateRoom]),
    rateTotal: num(i[N.rateTotal]),
    ...(guard === undefined ? {} : { rateGuard: guard }),
    slots: slotsOf(item),
    month: monthView(item, month),
  };
}

/** A window item as a view. */
export function windowView(item: Item | undefined): WindowView | undefined {
  if (item === undefined) return undefined;
  return { settledMicros: num(item.settledMicros), heldMicros: num(item.heldMicros), usedMicros: num(item.usedMicros) };
}

/** Whether a key window or member month item says its arming's base is written (see `limit-arming.ts`). */
export function isArmed(item: Item | undefined): boolean {
  return typeof item?.armed === 'number';
}

/**
 * Adds a reservation of `micros` to the spend-rate record of a slice at second `second`.
 * `known` is the slice as last seen: when it shows an aged-out second in the slot, that entry is
 * overwritten in the same write (conditioned on exactly what was seen) and its amount returns to
 * the headroom; otherwise the slot must be empty or already this lap's with room for the amount.
 * The guard lap must let this second be told apart from every other slot's (else the write is
 * refused and the caller first tidies the slots, {@link guardReset}).
 * With `roomCheck`, the headroom must cover the reservation (admission); an extension is not
 * refused by the cap but still counts.
 */
export function addReservation(
  u: UpdateBuilder,
  args: { slice: number; known: SliceView | undefined; second: number; micros: number; capMicros: number; roomCheck: boolean },
): void {
  const { slice, known, second, micros, capMicros } = args;
  const k = slotOf(second);
  const seen = known === undefined ? undefined : slotAt(known.slots, k);
  const stale = seen !== undefined && seen.second !== second ? seen : undefined;
  const freed = stale?.micros ?? 0;
  const slot = u.a(slotName(k));
  if (stale !== undefined) {
    // The slot holds a second 64 s old or more, long past counting: overwrite it.
    u.when(`${slot} = ${u.v(slotValue(stale.second, stale.micros))}`);
    u.set(`${slot} = ${u.v(slotValue(second, micros))}`);
  } else {
    // Free, or this lap's (so this second's: a slot is one second of its lap) with room in the value.
    const floor = lapFloor(second);
    u.when(`attribute_not_exists(${slot}) OR ${slot} BETWEEN ${u.v(floor)} AND ${u.v(floor + SLOT_SPAN - 1 - micros)}`);
    u.set(`${slot} = if_not_exists(${slot}, ${u.v(floor)}) + ${u.v(micros)}`);
  }
  const guard = u.a(N.guard);
  const range = guardRange(second);
  u.when(`attribute_not_exists(${guard}) OR ${guard} BETWEEN ${u.v(range.low)} AND ${u.v(range.high)}`);
  u.set(`${guard} = if_not_exists(${guard}, ${u.v(lapOf(second))})`);
  u.add(N.rateTotal, micros - freed);
  // Never-written headroom: slice 0 owns the whole cap, the others none (see core/admission.ts).
  const init = slice === 0 ? capMicros : 0;
  const room = u.a(N.rateRoom);
  const cap = u.a(N.rateCap);
  u.set(`${room} = if_not_exists(${room}, ${u.v(init)}) + ${u.v(freed - micros)}, ${cap} = if_not_exists(${cap}, ${u.v(capMicros)})`);
  if (args.roomCheck) {
    const mustHave = micros - freed;
    const written = `${cap} = ${u.v(capMicros)} AND ${room} >= ${u.v(mustHave)}`;
    u.when(init >= mustHave ? `attribute_not_exists(${cap}) OR (${written})` : written);
  } else {
    u.when(`attribute_not_exists(${cap}) OR ${cap} = ${u.v(capMicros)}`);
  }
}

/** What a slice's month share is debited with: the month, the limit (if any), and what is known of the item. */
export interface MonthDebit {
  /** The month the request counts in (`yyyymm`). */
  readonly month: number;
  readonly limitMicros: number | undefined;
  /** Whether the share's headroom must cover the need (false for a write that only counts). */
  readonly check: boolean;
  /** The slice as last seen, when known: its share's month decides whether this write starts a new month's share. */
  readonly known?: MonthShareView;
}

/**
 * The slice's share of the workspace month, on the slice item. Under a limit, the share's
 * headroom must cover the need; a share never written (or written for an earlier month) starts
 * with the whole limit on slice 0 and none elsewhere.
 *
 * A condition cannot reset a figure, so a new month's share is written whole, and only by a
 * writer that knows the item holds an earlier month's (from its last read or refused write,
 * conditioned on exactly that month); a writer that believes the share is this month's, or that
 * knows nothing, adds to it, conditioned on the item holding this month's share or none. A wrong
 * belief is refused (ALL_OLD tells the truth) and written again, so this costs a second write
 * once per slice and process at a month's start, never a wrong figure.
 */
export function addMonthDebit(u: UpdateBuilder, args: MonthDebit & { slice: number; micros: number }): void {
  const { slice, micros, month } = args;
  const tag = args.limitMicros ?? -1;
  const init = slice === 0 && args.limitMicros !== undefined ? args.limitMicros : 0;
  const checked = args.check && args.limitMicros !== undefined;
  const mo = u.a(N.month);
  const room = u.a(N.monthRoom);
  const limit = u.a(N.monthLimit);
  const older = args.known?.storedMonth;
  if (older !== undefined && older < month && (!checked || init >= micros)) {
    u.when(`${mo} = ${u.v(older)}`);
    u.set(`${mo} = ${u.v(month)}, ${u.a(N.monthSettled)} = ${u.v(0)}, ${u.a(N.monthHeld)} = ${u.v(micros)}, ${u.a(N.monthUsed)} = ${u.v(micros)}`);
    u.set(`${room} = ${u.v(init - micros)}, ${limit} = ${u.v(tag)}`);
    return;
  }
  const settled = u.a(N.monthSettled);
  u.set(`${mo} = if_not_exists(${mo}, ${u.v(month)}), ${settled} = if_not_exists(${settled}, ${u.v(0)})`);
  u.set(`${limit} = if_not_exists(${limit}, ${u.v(tag)}), ${room} = if_not_exists(${room}, ${u.v(init)}) - ${u.v(micros)}`);
  u.add(N.monthHeld, micros).add(N.monthUsed, micros);
  if (!checked) {
    u.when(`attribute_not_exists(${mo}) OR ${mo} = ${u.v(month)}`);
    return;
  }
  const written = `${mo} = ${u.v(month)} AND ${limit} = ${u.v(tag)} AND ${room} >= ${u.v(micros)}`;
  u.when(init >= micros ? `attribute_not_exists(${mo}) OR (${written})` : written);
}

/** The slice's part of an admission (or an extension): the money, the month share, then the reservation. */
export function sliceDebit(args: {
  slice: number;
  known: SliceView | undefined;
  micros: number;
  second: number;
  capMicros: number;
  roomCheck: boolean;
  /** The month share to debit; absent for an extension of a hold whose month has ended. */
  month?: MonthDebit;
  /** On slice 0: the slice count this process believes in; a change refuses the write, and ALL_OLD tells the new count. */
  believedCount?: number;
}): BuiltUpdate {
  const u = new UpdateBuilder();
  // The slice's available credit covers the hold (other slices are moved in first when it cannot).
  u.when(`${u.a('availableMicros')} >= ${u.v(args.micros)}`);
  if (args.slice === 0 && args.believedCount !== undefined) {
    const count = u.a('sliceCount');
    u.when(args.believedCount === 1 ? `attribute_not_exists(${count}) OR ${count} = ${u.v(1)}` : `${count} = ${u.v(args.believedCount)}`);
  }
  u.add('availableMicros', -args.micros).add('heldMicros', args.micros);
  if (args.month !== undefined) addMonthDebit(u, { ...args.month, slice: args.slice, micros: args.micros });
  addReservation(u, args);
  return u.build();
}

/** The slice's part of a settlement: the hold leaves `held`, the charge goes to `spent`, the rest back to `available`; and its month share likewise. */
export function sliceSettle(args: {
  holdMicros: number;
  chargeMicros: number;
  releaseMicros: number;
  deficitMicros: number;
  /** The month the hold counted in (`yyyymm`), while the slice still holds that month's share; absent: leave the share alone. */
  month?: number;
}): BuiltUpdate {
  const u = new UpdateBuilder();
  u.add('availableMicros', args.releaseMicros).add('heldMicros', -args.holdMicros).add('spentMicros', args.chargeMicros);
  // A charge above the hold may take from the slice only what it has.
  if (args.deficitMicros > 0) u.when(`${u.a('availableMicros')} >= ${u.v(args.deficitMicros)}`);
  if (args.month !== undefined) {
    // Only onto the hold's own month: a share started over for a later month never takes an older hold's figures.
    const delta = args.chargeMicros - args.holdMicros;
    u.when(`${u.a(N.month)} = ${u.v(args.month)}`);
    u.add(N.monthHeld, -args.holdMicros).add(N.monthSettled, args.chargeMicros).add(N.monthUsed, delta).add(N.monthRoom, -delta);
  }
  return u.build();
}

/** A key window (key slice j > 0): the need out of the headroom lent to it under this limit. Without a limit, counted unchecked. */
export function keyShareDebit(args: { micros: number; limitMicros: number | undefined; ttl: number | undefined; check: boolean; unarmed?: boolean }): BuiltUpdate {
  const u = new UpdateBuilder();
  const tag = args.limitMicros ?? -1;
  const room = u.a('roomMicros');
  const limit = u.a('limitMicros');
  const settled = u.a('settledMicros');
  u.set(`${settled} = if_not_exists(${settled}, ${u.v(0)})`);
  u.set(`${limit} = if_not_exists(${limit}, ${u.v(tag)})`);
  u.set(`${room} = if_not_exists(${room}, ${u.v(0)}) - ${u.v(args.micros)}`);
  // A key window that never ends has no ttl (a 0 would have DynamoDB collect it at once).
  if (args.ttl !== undefined) {
    const ttl = u.a('ttl');
    u.set(`${ttl} = if_not_exists(${ttl}, ${u.v(args.ttl)})`);
  }
  u.add('heldMicros', args.micros).add('usedMicros', args.micros);
  if (args.check && args.limitMicros !== undefined) u.when(`${limit} = ${u.v(tag)} AND ${room} >= ${u.v(args.micros)}`);
  if (args.unarmed === true) u.when(`attribute_not_exists(${u.a('armed')})`);
  return u.build();
}

/**
 * The per-key request rate on key slice 0's window item, for the minutes a key window counts
 * (`keyRateWindow` in `core/windows.ts`): the minute's requests live in one of {@link COUNT_SLOTS}
 * attributes, `q<minute mod COUNT_SLOTS>`, as one number `minute × 10⁷ + requests`, so a condition
 * can tell which minute the figure belongs to (the spend-rate slots' pattern, the whole epoch
 * minute as the tag: below 2⁵³ until about the year 3680); what slice 0 lent the key's other
 * slices that minute (the counter's `given`) likewise in `g<…>`. A new minute is a slot of its
 * own, so nothing resets. Every count removes every other slot but the minute before and after
 * (clocks a moment apart at a minute's turn; named literally, one constant clause per minute), so
 * the item keeps at most three. A slot can still hold a minute sixty or more before, when the
 * key's last writes fell on the minutes either side of it: the write is refused on it, ALL_OLD
 * shows it, and the write is sent again in its `reset` form, which overwrites any earlier
 * minute's value ({@link MinuteCount.reset}). With sixty slots that second round trip is rare: a
 * model of a key's Poisson traffic puts it at under 2% of requests for a key that sees one every
 * few hours, 0.3% at one every 20 minutes, none measurable from one every five minutes up (with
 * five slots it was 30%, 24% and 6% at one a minute).
 */
export const COUNT_SLOTS = 60;
/** A count slot's value is `minute × COUNT_SPAN + requests`. */
export const COUNT_SPAN = 10_000_000;

/** The literal REMOVE list of every `prefix` slot but those of the minutes before, of and after `minute mod COUNT_SLOTS`, one per slot. */
const othersOf = (prefix: string): string[] =>
  Array.from({ length: COUNT_SLOTS }, (_, s) =>
    Array.from({ length: COUNT_SLOTS - 3 }, (_, i) => `${prefix}${(s + 2 + i) % COUNT_SLOTS}`).join(', '),
  );
const OTHER_COUNTS = othersOf('q');
const OTHER_GIVEN = othersOf('g');
const OTHER_BOUNDS = othersOf('b');

/** The attribute of the count slot of epoch minute `minute`. */
export function countSlotName(minute: number): string {
  return `q${minute % COUNT_SLOTS}`;
}

/** The attribute of the lent-out slot of epoch minute `minute` (key slice 0's `given`). */
export function givenSlotName(minute: number): string {
  return `g${minute % COUNT_SLOTS}`;
}

/**
 * The attribute of the bound slot of epoch minute `minute`: room other regions moved here in that
 * minute (docs/regions.md, "The request rate moved between regions"), as `minute × 10⁷ + share +
 * received`, the highest count (exclusive) the minute's slot may reach. A count cannot go down
 * under a receive (a value below `minute × 10⁷` reads as an earlier minute), so the received room
 * raises the bound instead; a bound left from an earlier minute is below the minute's floor and
 * admits nothing.
 */
export function boundSlotName(minute: number): string {
  return `b${minute % COUNT_SLOTS}`;
}

/** What an admission counts on the window item: one request of `minute` under `rate`. */
export interface MinuteCount {
  readonly minute: number;
  readonly rate: number;
  /** The slot holds an earlier minute's value (a refusal's ALL_OLD said so): overwritten, whatever that value. */
  readonly reset?: boolean;
  /** Arming marks (`CLOSED_FOR`) the count must not meet for its minute: those of the windows the request does not count. */
  readonly closed?: ClosedFor;
}

function minuteValue(item: Item | undefined, name: string, minute: number): number {
  const value = item?.[name];
  if (typeof value !== 'number') return 0;
  return Math.floor(value / COUNT_SPAN) === minute ? value % COUNT_SPAN : 0;
}

/** The requests of `minute` on a window item (0 when its slot holds another minute's, or nothing). */
export function minuteRequests(item: Item | undefined, minute: number): number {
  return minuteValue(item, countSlotName(minute), minute);
}

/** What key slice 0 lent the other key slices in `minute`, on its window item. */
export function minuteGiven(item: Item | undefined, minute: number): number {
  return minuteValue(item, givenSlotName(minute), minute);
}

/** The bound slot's value of `minute` (`floor + share + received`), when it holds this minute's; else undefined (nothing received this minute). */
export function minuteBound(item: Item | undefined, minute: number): number | undefined {
  const value = item?.[boundSlotName(minute)];
  return typeof value === 'number' && Math.floor(value / COUNT_SPAN) === minute ? value : undefined;
}

/**
 * What `minute`'s slots on a window item allow of requests under a share of `share` (the region's
 * share of the rate): the share, or the bound the room received from other regions sets, the
 * larger (a bound written under a rate since raised binds no lower than the new share).
 */
export function minuteCapacity(item: Item | undefined, minute: number, share: number): number {
  const bound = minuteBound(item, minute);
  return bound === undefined ? share : Math.max(share, bound - minute * COUNT_SPAN);
}

/**
 * The minute's count on a window item as the share sees it: its requests (what it counted, lent
 * and gave) less the room received, so `used < share` is the condition the slots enforce, as on a
 * counter a receive takes off `requests` (possibly below zero).
 */
export function minuteUsed(item: Item | undefined, minute: number, share: number): number {
  return minuteRequests(item, minute) - (minuteCapacity(item, minute, share) - share);
}

/** An earlier minute's value in the slot of `minute` on a refused write's item, if that is why it was refused. */
export function staleCount(item: Item | undefined, minute: number): number | undefined {
  const value = item?.[countSlotName(minute)];
  return typeof value === 'number' && value < minute * COUNT_SPAN ? value : undefined;
}

/**
 * Whether an arming's mark on a window item closes `minute`: the mark holds the last minute it
 * closes (a window item outlives the minutes an arming marks; a counter is one minute).
 */
export function closesMinute(item: Item | undefined, mark: ClosedFor[number], minute: number): boolean {
  const value = item?.[mark];
  return typeof value === 'number' && value >= minute;
}

/** Adds one request of the minute to the window item's count slot: `requests < rate` in that minute. */
export function addMinuteCount(u: UpdateBuilder, count: MinuteCount): void {
  const floor = count.minute * COUNT_SPAN;
  // A rate the slot cannot hold (10⁷ a minute, far above any key's) binds at what it can.
  const rate = Math.min(count.rate, COUNT_SPAN - 1);
  const slot = u.a(countSlotName(count.minute));
  if (count.reset === true) {
    // An earlier minute's figure is no count of this one: start over at one.
    u.when(`attribute_not_exists(${slot}) OR ${slot} < ${u.v(floor)}`);
    u.set(`${slot} = ${u.v(floor + 1)}`);
  } else {
    // Free, or already this minute's with room under the rate, or under the bound room received
    // from other regions raised (a bound of an earlier minute is below the floor: never met).
    // (Named literally, as the REMOVE list's slots are: its name is no reserved word.)
    const bound = boundSlotName(count.minute);
    u.when(`attribute_not_exists(${slot}) OR ${slot} BETWEEN ${u.v(floor)} AND ${u.v(floor + rate - 1)} OR (${slot} >= ${u.v(floor)} AND ${slot} < ${bound})`);
    u.set(`${slot} = if_not_exists(${slot}, ${u.v(floor)}) + ${u.v(1)}`);
  }
  for (const mark of count.closed ?? []) u.when(`attribute_not_exists(${u.a(mark)}) OR ${u.a(mark)} < ${u.v(count.minute)}`);
  // Every slot but the minutes before and after: no clock is that far apart, and an earlier minute's figure left there would cost a second write.
  u.removeNamed(OTHER_COUNTS[count.minute % COUNT_SLOTS] as string);
}

/**
 * The ttl of a key window item made by a write that does not know the window's end (the door's
 * count, an arming's mark): the longest window's end past `now`, plus the 400 days the ledger
 * keeps windows; none for a window that never ends (its id is `ALL`). Written only if the item
 * has none, so an admission's exact ttl is never shortened.
 */
export function countWindowTtl(sk: string, now: number): number | undefined {
  if (/#ALL(~|$)/.test(sk)) return undefined;
  return Math.floor(now / 1000) + (32 + 400) * 86_400;
}

/** A request counted on a key window without money (a BYOK admission, the door's count, a limit's old window): the count and the item's ttl. */
export function windowCount(count: MinuteCount, ttl: number | undefined): BuiltUpdate {
  const u = new UpdateBuilder();
  addMinuteCount(u, count);
  if (ttl !== undefined) {
    const t = u.a('ttl');
    u.set(`${t} = if_not_exists(${t}, ${u.v(ttl)})`);
  }
  return u.build();
}

/**
 * Key slice 0's request share of `minute` on its window item, as a view (the counter's `requests`
 * and `given`) under the region's share `share` of the rate: what other regions moved here that
 * minute (its bound) counted as used less, as a receive on a counter takes it off `requests`.
 */
export function minuteShareView(item: Item | undefined, minute: number, share: number): KeyShareView {
  const used = minuteUsed(item, minute, share);
  const given = minuteGiven(item, minute);
  return { slice: 0, exists: item !== undefined, used, settled: 0, held: 0, given, room: 0, tag: -1 };
}

/**
 * Key slice 0's part of a key rebalance of requests, on its window item's slots for `minute`:
 * `used` and `given` move together (lent, positive; returned, negative), lending only within the
 * rate (or the bound room received from other regions that minute set); a slot holding an earlier minute's value (as `item` shows it) is overwritten on exactly
 * that value. A retag sets both, conditioned on exactly what was read.
 */
export function minuteShareRebalance(edit: KeyShareEdit, item: Item | undefined, minute: number, limit: number): BuiltUpdate | undefined {
  const u = new UpdateBuilder();
  const rate = Math.min(limit, COUNT_SPAN - 1);
  const floor = minute * COUNT_SPAN;
  const q = countSlotName(minute);
  const g = givenSlotName(minute);
  const raw = (name: string): unknown => item?.[name];
  const exactly = (name: string): string => {
    const v = raw(name);
    return typeof v === 'number' ? `${u.a(name)} = ${u.v(v)}` : `attribute_not_exists(${u.a(name)})`;
  };
  const current = (name: string): boolean => {
    const v = raw(name);
    return typeof v === 'number' && Math.floor(v / COUNT_SPAN) === minute;
  };
  const used = minuteRequests(item, minute);
  const given = minuteGiven(item, minute);
  // Room received from other regions this minute raises what the slot may reach.
  const cap = Math.min(minuteCapacity(item, minute, rate), COUNT_SPAN - 1);
  // What slice 0 lent in other minutes is over: the given slots stay as few as the counts.
  u.removeNamed(OTHER_GIVEN[minute % COUNT_SLOTS] as string);
  if (edit.givenSet !== undefined) {
    u.when(exactly(q)).when(exactly(g));
    u.set(`${u.a(q)} = ${u.v(floor + used - given + edit.givenSet)}, ${u.a(g)} = ${u.v(floor + edit.givenSet)}`);
    return u.build();
  }
  if (edit.delta === 0) return undefined;
  for (const name of [q, g]) {
    if (current(name)) {
      u.add(name, edit.delta);
      if (name === g && edit.delta < 0) u.when(`${u.a(g)} >= ${u.v(floor - edit.delta)}`);
      if (name === q && edit.delta > 0) u.when(`${u.a(q)} <= ${u.v(floor + cap - edit.delta)}`);
      else u.when(`${u.a(name)} >= ${u.v(floor)}`);
    } else {
      // Nothing of this minute yet: it starts at the move (a return needs something lent, so only a loan gets here).
      if (edit.delta < 0 || edit.delta > cap) return undefined;
      u.when(exactly(name));
      u.setTo(name, floor + edit.delta);
    }
  }
  return u.build();
}

/**
 * A give of `x` of a key's requests of `minute` to another region, on key slice 0's window item
 * the minute counts on (docs/regions.md, "The request rate moved between regions"): counted on
 * the minute's slot as requests (so `used ≤ capacity − x`, the region's share or the bound room
 * it received that minute set, `item` as read); a slot free or holding an earlier minute is
 * written `floor + x`, conditioned on exactly what was read. Undefined when `x` cannot fit.
 */
export function minuteGive(item: Item | undefined, minute: number, share: number, x: number, ttl: number | undefined): BuiltUpdate | undefined {
  const u = new UpdateBuilder();
  const floor = minute * COUNT_SPAN;
  const name = countSlotName(minute);
  const q = u.a(name);
  const seen = item?.[name];
  const cap = Math.min(minuteCapacity(item, minute, share), COUNT_SPAN - 1);
  if (x <= 0 || x > cap - Math.max(0, minuteRequests(item, minute))) return undefined;
  if (typeof seen === 'number' && Math.floor(seen / COUNT_SPAN) === minute) {
    u.add(name, x);
    u.when(`${q} BETWEEN ${u.v(floor)} AND ${u.v(floor + cap - x)}`);
  } else {
    u.when(typeof seen === 'number' ? `${q} = ${u.v(seen)}` : `attribute_not_exists(${q})`);
    u.set(`${q} = ${u.v(floor + x)}`);
  }
  // A capacity above the share is the bound's, which only grows within its minute.
  if (cap > share) u.when(`${u.a(boundSlotName(minute))} >= ${u.v(floor + cap)}`);
  if (ttl !== undefined) {
    const t = u.a('ttl');
    u.set(`${t} = if_not_exists(${t}, ${u.v(ttl)})`);
  }
  return u.build();
}

/**
 * A receive of `x` of a key's requests of `minute` from another region, on key slice 0's window
 * item the minute counts on: the minute's bound slot raised by `x` (a bound of this minute,
 * conditioned on still being this minute's), or written `floor + share + x` where it is free or
 * holds an earlier minute's (conditioned on exactly what was read); every other minute's bound
 * but its neighbours' removed. Undefined when the slot holds a later minute's bound (the minute
 * is long over: only the counters move).
 */
export function minuteReceive(item: Item | undefined, minute: number, share: number, x: number, ttl: number | undefined): BuiltUpdate | undefined {
  const u = new UpdateBuilder();
  const floor = minute * COUNT_SPAN;
  const name = boundSlotName(minute);
  const b = u.a(name);
  const seen = item?.[name];
  if (typeof seen === 'number' && seen >= floor + COUNT_SPAN) return undefined;
  if (typeof seen === 'number' && seen >= floor) {
    u.add(name, x);
    u.when(`${b} BETWEEN ${u.v(floor)} AND ${u.v(floor + COUNT_SPAN - 1)}`);
  } else {
    u.when(typeof seen === 'number' ? `${b} = ${u.v(seen)}` : `attribute_not_exists(${b})`);
    u.set(`${b} = ${u.v(floor + Math.min(share, COUNT_SPAN - 1) + x)}`);
  }
  // Only a receive writes a bound, so it keeps them few: every other minute's but its neighbours'
  // goes (an earlier minute's bound admits nothing anyway), and the item holds at most three.
  u.removeNamed(OTHER_BOUNDS[minute % COUNT_SLOTS] as string);
  if (ttl !== undefined) {
    const t = u.a('ttl');
    u.set(`${t} = if_not_exists(${t}, ${u.v(ttl)})`);
  }
  return u.build();
}

/**
 * A window that is not sliced (key slice 0's window, a member month): `used + need <= limit`, as
 * `used <= limit - need`. With `unarmed` (its limit is being armed), it only counts, and only
 * until the arming's base is written.
 */
export function windowDebit(args: { micros: number; limitMicros: number | undefined; ttl: number | undefined; check: boolean; unarmed?: boolean; count?: MinuteCount }): BuiltUpdate {
  const u = new UpdateBuilder();
  if (args.count !== undefined) addMinuteCount(u, args.count);
  const settled = u.a('settledMicros');
  u.set(`${settled} = if_not_exists(${settled}, ${u.v(0)})`);
  if (args.ttl !== undefined) {
    const ttl = u.a('ttl');
    u.set(`${ttl} = if_not_exists(${ttl}, ${u.v(args.ttl)})`);
  }
  u.add('heldMicros', args.micros).add('usedMicros', args.micros);
  if (args.check && args.limitMicros !== undefined) {
    const used = u.a('usedMicros');
    u.when(`attribute_not_exists(${used}) OR ${used} <= ${u.v(args.limitMicros - args.micros)}`);
  }
  if (args.unarmed === true) u.when(`attribute_not_exists(${u.a('armed')})`);
  return u.build();
}

/**
 * Marks an arming leaves on a key's request counters (`limit-arming.ts`): an admission that does
 * not count the key's window (or its member's month) is refused where one is set.
 */
export const CLOSED_FOR = { key: 'closedForKey', member: 'closedForMember' } as const;

/** The closing marks an admission's counter write must not find: those of the windows it does not count. */
export type ClosedFor = readonly (typeof CLOSED_FOR)[keyof typeof CLOSED_FOR][];

/** The key's request counter for one minute: at most `limit` requests. */
export function requestCount(limit: number, ttl: number, closed: ClosedFor = []): BuiltUpdate {
  const u = new UpdateBuilder();
  const requests = u.a('requests');
  u.add('requests', 1).set(`${u.a('ttl')} = ${u.v(ttl)}`);
  u.when(`attribute_not_exists(${requests}) OR ${requests} < ${u.v(limit)}`);
  for (const mark of closed) u.when(`attribute_not_exists(${u.a(mark)})`);
  return u.build();
}

/**
 * An arming's mark on a key window item some of its minutes count on (`keyRateWindow`): the mark
 * holds the last minute it closes, since the item outlives them. Made if missing, with a ttl that
 * never shortens the window's.
 */
export function closeCountWindow(mark: ClosedFor[number], lastMinute: number, ttl: number | undefined): BuiltUpdate {
  const u = new UpdateBuilder();
  u.setTo(mark, lastMinute);
  if (ttl !== undefined) u.set(`${u.a('ttl')} = if_not_exists(${u.a('ttl')}, ${u.v(ttl)})`);
  return u.build();
}

/** Takes an arming's mark off one minute's request counter (the limit was removed), if the counter is still there. */
export function reopenCounter(mark: ClosedFor[number]): BuiltUpdate {
  const u = new UpdateBuilder();
  u.remove(mark).when(`attribute_exists(${u.a('pk')})`);
  return u.build();
}

/**
 * An arming's mark on one minute's request counter: from now on an admission of that minute that
 * does not count the window is refused. The counter item is made if missing, with a counter's ttl.
 */
export function closeCounter(mark: ClosedFor[number], generation: number, ttl: number): BuiltUpdate {
  const u = new UpdateBuilder();
  u.set(`${u.a(mark)} = ${u.v(generation)}, ${u.a('ttl')} = if_not_exists(${u.a('ttl')}, ${u.v(ttl)})`);
  return u.build();
}

/** A window's (key window, member month) part of a settlement: held becomes settled, the rest is freed. */
export function windowSettle(args: { holdMicros: number; chargeMicros: number; withRoom: boolean }): BuiltUpdate {
  const u = new UpdateBuilder();
  const delta = args.chargeMicros - args.holdMicros;
  u.add('heldMicros', -args.holdMicros).add('settledMicros', args.chargeMicros).add('usedMicros', delta);
  if (args.withRoom) u.add('roomMicros', -delta);
  return u.build();
}

/** Removes aged-out slots, each conditioned on exactly what was read; returns what they held. */
function pruneSlots(u: UpdateBuilder, slots: readonly RateSlot[]): number {
  let freed = 0;
  for (const s of slots) {
    freed += s.micros;
    u.when(`${u.a(slotName(s.slot))} = ${u.v(slotValue(s.second, s.micros))}`);
    u.remove(slotName(s.slot));
  }
  return freed;
}

/**
 * Moves the guard lap to `to`: the caller removes in the same write every slot older than
 * `to − LAP_SKEW` (or outside the new range), so every slot left is told apart under the new
 * guard. Conditioned on the guard read, so two movers cannot interleave.
 */
function moveGuard(u: UpdateBuilder, seen: number | undefined, to: number): void {
  const guard = u.a(N.guard);
  u.when(seen === undefined ? `attribute_not_exists(${guard})` : `${guard} = ${u.v(seen)}`);
  u.set(`${guard} = ${u.v(to)}`);
}

/** Laps after which a tidy moves the guard lap even when it removes no slot, well inside {@link SLOT_LAPS}. */
export const GUARD_REFRESH_LAPS = 64;

/** Whether every slot left under guard lap `guard` is told apart (its lap within the guard's range). */
function fitsGuard(slots: readonly RateSlot[], guard: number): boolean {
  const low = guard - LAP_SKEW;
  return slots.every((s) => lapOf(s.second) >= low && lapOf(s.second) <= low + SLOT_LAPS - 1);
}

/**
 * The guard lap a tidy at `second` that removes `pruned` (every slot aged out, as read) moves the
 * guard to: this second's lap, when the guard is behind it and either the tidy removes slots
 * anyway or the guard is {@link GUARD_REFRESH_LAPS} laps old; undefined: leave it. Only ever
 * forward, and only when every slot left is told apart under the new guard.
 */
export function guardTarget(seen: SliceView, second: number, pruned: readonly RateSlot[]): number | undefined {
  const lap = lapOf(second);
  const guard = seen.rateGuard;
  if (guard === undefined || guard >= lap) return undefined;
  if (pruned.length === 0 && guard >= lap - GUARD_REFRESH_LAPS) return undefined;
  const left = seen.slots.filter((s) => !pruned.some((p) => p.slot === s.slot && p.second === s.second));
  return fitsGuard(left, lap) ? lap : undefined;
}

/**
 * One slice's part of a rebalance. Givers are conditioned on having what they give (and on the
 * cap and limit their headroom was written under); a rewrite under a new cap or limit is
 * conditioned on exactly the totals it was computed from, so a concurrent change cancels it.
 * `month`: the month and limit the month share's edit is under (absent: no month limit, no edit).
 * `guardTo`: move the guard lap there (a tidy that removed every older slot).
 */
export function sliceRebalance(edit: SliceEdit, seen: SliceView, capMicros: number, month?: { id: number; limitMicros: number }, guardTo?: number): BuiltUpdate | undefined {
  const u = new UpdateBuilder();
  let touched = false;
  if (edit.availableDelta !== 0) {
    touched = true;
    u.add('availableMicros', edit.availableDelta).add('creditedMicros', edit.availableDelta);
    if (edit.availableDelta < 0) u.when(`${u.a('availableMicros')} >= ${u.v(-edit.availableDelta)}`);
  }
  const freed = pruneSlots(u, edit.prune);
  if (edit.prune.length > 0) touched = true;
  if (guardTo !== undefined) {
    touched = true;
    moveGuard(u, seen.rateGuard, guardTo);
  }
  if (freed > 0) u.add(N.rateTotal, -freed);
  const room = u.a(N.rateRoom);
  const cap = u.a(N.rateCap);
  if (edit.rateSet !== undefined) {
    touched = true;
    const total = u.a(N.rateTotal);
    u.when(seen.rateTotal === 0 ? `attribute_not_exists(${total}) OR ${total} = ${u.v(0)}` : `${total} = ${u.v(seen.rateTotal)}`);
    u.set(`${room} = ${u.v(edit.rateSet)}, ${cap} = ${u.v(capMicros)}`);
  } else if (edit.rateDelta !== 0 || freed > 0) {
    touched = true;
    const init = seen.slice === 0 ? capMicros : 0;
    u.set(`${room} = if_not_exists(${room}, ${u.v(init)}) + ${u.v(edit.rateDelta + freed)}, ${cap} = if_not_exists(${cap}, ${u.v(capMicros)})`);
    const give = -edit.rateDelta - freed;
    if (give > 0) {
      const written = `${cap} = ${u.v(capMicros)} AND ${room} >= ${u.v(give)}`;
      u.when(init >= give ? `attribute_not_exists(${cap}) OR (${written})` : written);
    } else {
      u.when(`attribute_not_exists(${cap}) OR ${cap} = ${u.v(capMicros)}`);
    }
  }
  if (month !== undefined && addMonthRebalance(u, edit, seen, month.id, month.limitMicros)) touched = true;
  return touched ? u.build() : undefined;
}

/** One slice's month share in a rebalance, on the slice item; false when it has nothing to write. */
function addMonthRebalance(u: UpdateBuilder, edit: SliceEdit, seen: SliceView, month: number, limitMicros: number): boolean {
  if (edit.monthSet === undefined && edit.monthDelta === 0) return false;
  const mo = u.a(N.month);
  const room = u.a(N.monthRoom);
  const limit = u.a(N.monthLimit);
  const used = u.a(N.monthUsed);
  const init = seen.slice === 0 ? limitMicros : 0;
  if (!seen.month.exists) {
    // No share of this month yet (none, or an earlier month's): it starts here, whole, on exactly what was read.
    const older = seen.month.storedMonth;
    u.when(older === undefined ? `attribute_not_exists(${mo})` : `${mo} = ${u.v(older)}`);
    const startRoom = edit.monthSet ?? init + edit.monthDelta;
    u.set(`${mo} = ${u.v(month)}, ${u.a(N.monthSettled)} = ${u.v(0)}, ${u.a(N.monthHeld)} = ${u.v(0)}, ${used} = ${u.v(0)}`);
    u.set(`${room} = ${u.v(startRoom)}, ${limit} = ${u.v(limitMicros)}`);
    return true;
  }
  u.when(`${mo} = ${u.v(month)}`);
  if (edit.monthSet !== undefined) {
    u.when(`${used} = ${u.v(seen.month.usedMicros)}`);
    u.set(`${room} = ${u.v(edit.monthSet)}, ${limit} = ${u.v(limitMicros)}`);
    return true;
  }
  u.add(N.monthRoom, edit.monthDelta);
  if (edit.monthDelta < 0) u.when(`${limit} = ${u.v(limitMicros)} AND ${room} >= ${u.v(-edit.monthDelta)}`);
  else u.when(`${limit} = ${u.v(limitMicros)}`);
  return true;
}

/**
 * The write that lets a reservation at `second` go through when the slice's guard lap no longer
 * tells its slots apart (a slice untouched for most of {@link SLOT_LAPS} laps, or a clock behind
 * it): every slot aged out at `now` or outside the new guard's range is removed (its amount back
 * to the headroom), and the guard moves to this second's lap. Conditioned on what was read.
 */
export function guardReset(seen: SliceView, second: number, now: number, capMicros: number): { built: BuiltUpdate; pruned: RateSlot[] } {
  const lap = lapOf(second);
  const pruned = seen.slots.filter((s) => bucketExpiry(s.second) <= now || !fitsGuard([s], lap));
  const u = new UpdateBuilder();
  const freed = pruneSlots(u, pruned);
  moveGuard(u, seen.rateGuard, lap);
  if (freed > 0) {
    u.add(N.rateTotal, -freed);
    const room = u.a(N.rateRoom);
    const cap = u.a(N.rateCap);
    u.set(`${room} = if_not_exists(${room}, ${u.v(seen.slice === 0 ? capMicros : 0)}) + ${u.v(freed)}`);
    u.when(`attribute_not_exists(${cap}) OR ${cap} = ${u.v(seen.rateCap ?? capMicros)}`);
  }
  return { built: u.build(), pruned };
}

/** The attribute names of a key share: the request counter's, or the key window's. */
export interface KeyShareNames {
  readonly used: string;
  readonly given: string;
  readonly room: string;
  readonly tag: string;
}

/** The request counter's names (slice 0 keeps `requests`, as it always had). */
export const COUNTER_NAMES: KeyShareNames = { used: 'requests', given: 'given', room: 'room', tag: 'lim' };
/** The key window's names. */
export const KEY_WINDOW_NAMES: KeyShareNames = { used: 'usedMicros', given: 'givenMicros', room: 'roomMicros', tag: 'limitMicros' };

/** A key share (counter or window) on key slice `slice` as a view; a missing item is empty. */
export function keyShareView(slice: number, item: Item | undefined, names: KeyShareNames): KeyShareView {
  const i = item ?? {};
  return {
    slice,
    exists: item !== undefined,
    used: num(i[names.used]),
    settled: num(i.settledMicros),
    held: num(i.heldMicros),
    given: num(i[names.given]),
    room: num(i[names.room]),
    tag: typeof i[names.tag] === 'number' ? (i[names.tag] as number) : -1,
  };
}

/** The request counter on key slice j > 0: one request out of the headroom lent to it under this rate. */
export function keyCounterDebit(limit: number, ttl: number, closed: ClosedFor = []): BuiltUpdate {
  const u = new UpdateBuilder();
  u.add('requests', 1).add('room', -1).set(`${u.a('ttl')} = ${u.v(ttl)}`);
  u.when(`${u.a('lim')} = ${u.v(limit)} AND ${u.a('room')} >= ${u.v(1)}`);
  for (const mark of closed) u.when(`attribute_not_exists(${u.a(mark)})`);
  return u.build();
}

// Not parenthesised: `when` adds the parentheses, and DynamoDB refuses redundant ones.
const equalsSeen = (u: UpdateBuilder, name: string, seen: number): string =>
  seen === 0 ? `attribute_not_exists(${u.a(name)}) OR ${u.a(name)} = ${u.v(0)}` : `${u.a(name)} = ${u.v(seen)}`;

/**
 * One key share's part of a key rebalance. Slice 0 lends (its `used` and `given` grow together,
 * so its own condition still bounds the real total) only within its limit, and takes back what
 * others return; a slice j gives only what it has under the current limit. A retag is
 * conditioned on exactly the figures it was computed from.
 */
export function keyShareRebalance(edit: KeyShareEdit, seen: KeyShareView, names: KeyShareNames, limit: number, ttl: number | undefined): BuiltUpdate | undefined {
  const u = new UpdateBuilder();
  if (ttl !== undefined) u.set(`${u.a('ttl')} = if_not_exists(${u.a('ttl')}, ${u.v(ttl)})`);
  if (edit.slice === 0) {
    if (edit.givenSet !== undefined) {
      const used = seen.used - seen.given + edit.givenSet;
      u.when(equalsSeen(u, names.used, seen.used)).when(equalsSeen(u, names.given, seen.given));
      u.set(`${u.a(names.used)} = ${u.v(used)}, ${u.a(names.given)} = ${u.v(edit.givenSet)}`);
      return u.build();
    }
    if (edit.delta === 0) return undefined;
    u.add(names.used, edit.delta).add(names.given, edit.delta);
    if (edit.delta > 0) u.when(`attribute_not_exists(${u.a(names.used)}) OR ${u.a(names.used)} <= ${u.v(limit - edit.delta)}`);
    return u.build();
  }
  if (edit.retag === true) {
    u.when(equalsSeen(u, names.used, seen.used));
    u.set(`${u.a(names.room)} = ${u.v(0)}, ${u.a(names.tag)} = ${u.v(limit)}`);
    return u.build();
  }
  if (edit.delta === 0) return undefined;
  u.add(names.room, edit.delta).set(`${u.a(names.tag)} = if_not_exists(${u.a(names.tag)}, ${u.v(limit)})`);
  if (edit.delta < 0) u.when(`${u.a(names.tag)} = ${u.v(limit)} AND ${u.a(names.room)} >= ${u.v(-edit.delta)}`);
  else u.when(`attribute_not_exists(${u.a(names.tag)}) OR ${u.a(names.tag)} = ${u.v(limit)}`);
  return u.build();
}
