/**
 * Item builders and readers for the ledger: every update and condition the ledger, holds and
 * usage rows are written with lives here (or in the modules beside it), each with its reason.
 *
 * A slice item (`BALANCE`) holds, in one bounded item:
 * - `availableMicros`, `heldMicros`, `spentMicros`, `creditedMicros`: the slice's money, with
 *   `credited = available + held + spent` on every slice (moves carry `credited` along);
 * - `rateCap`, `rateRoom`, `rateTotal`, `r<k>`/`s<k>`: the spend-rate cap's headroom on this
 *   slice, what its live reservations total, and 64 cyclic one-second slots (see spend-rate.ts);
 * - on slice 0 only: `sliceCount` (slices admissions use), `sliceHigh` (most ever used, so
 *   retired slices are still read), `sliceFloor` (the operator's setting).
 * A slice's month item (`MONTH#<yyyy-mm>`) holds `settledMicros`, `heldMicros`, `usedMicros`
 * (their sum), `roomMicros` (its share of the month limit's headroom) and `limitMicros`, the
 * limit that headroom was written under (-1: none).
 */
import type { MonthShareView, SliceEdit, SliceView, WindowView } from '../core/admission';
import type { KeyShareEdit, KeyShareView } from '../core/key-slices';
import { RATE_SLOTS, slotOf, type RateSlot } from '../core/spend-rate';
import { UpdateBuilder, type BuiltUpdate } from './expr';

/** An item as the document client returns it. */
export type Item = Record<string, unknown>;

function num(v: unknown): number {
  return typeof v === 'number' ? v : 0;
}

/** The occupied spend-rate slots of a slice item. */
export function slotsOf(item: Item | undefined): RateSlot[] {
  const out: RateSlot[] = [];
  if (item === undefined) return out;
  for (let k = 0; k < RATE_SLOTS; k += 1) {
    const second = item[`s${k}`];
    const micros = item[`r${k}`];
    if (typeof second === 'number') out.push({ slot: k, second, micros: num(micros) });
  }
  return out;
}

/** A month item as a view; a missing item is an empty share. */
export function monthView(item: Item | undefined): MonthShareView {
  if (item === undefined) return { exists: false, settledMicros: 0, heldMicros: 0, usedMicros: 0, roomMicros: 0, limitMicros: -1 };
  return {
    exists: true,
    settledMicros: num(item.settledMicros),
    heldMicros: num(item.heldMicros),
    usedMicros: num(item.usedMicros),
    roomMicros: num(item.roomMicros),
    limitMicros: typeof item.limitMicros === 'number' ? item.limitMicros : -1,
  };
}

/** A slice item (and its current month item) as a view. */
export function sliceView(slice: number, item: Item | undefined, month: Item | undefined): SliceView {
  const i = item ?? {};
  return {
    slice,
    availableMicros: num(i.availableMicros),
    heldMicros: num(i.heldMicros),
    spentMicros: num(i.spentMicros),
    creditedMicros: num(i.creditedMicros),
    ...(typeof i.rateCap === 'number' ? { rateCap: i.rateCap } : {}),
    rateRoom: num(i.rateRoom),
    rateTotal: num(i.rateTotal),
    slots: slotsOf(item),
    month: monthView(month),
  };
}

/** A window item as a view. */
export function windowView(item: Item | undefined): WindowView | undefined {
  if (item === undefined) return undefined;
  return { settledMicros: num(item.settledMicros), heldMicros: num(item.heldMicros), usedMicros: num(item.usedMicros) };
}

/**
 * Adds a reservation of `micros` to the spend-rate record of a slice at second `second`.
 * `known` is the slice as last seen: when it shows an aged-out second in the slot, that entry is
 * removed in the same write (conditioned on exactly what was seen) and its amount returns to the
 * headroom; otherwise the slot must be empty or already this second's.
 * With `roomCheck`, the headroom must cover the reservation (admission); an extension is not
 * refused by the cap but still counts.
 */
export function addReservation(
  u: UpdateBuilder,
  args: { slice: number; known: SliceView | undefined; second: number; micros: number; capMicros: number; roomCheck: boolean },
): void {
  const { slice, known, second, micros, capMicros } = args;
  const k = slotOf(second);
  const seen = known?.slots.find((s) => s.slot === k);
  const stale = seen !== undefined && seen.second !== second ? seen : undefined;
  const freed = stale?.micros ?? 0;
  const sAttr = u.a(`s${k}`);
  const rAttr = u.a(`r${k}`);
  if (stale !== undefined) {
    // The slot holds a second 64 s old or more, long past counting: overwrite it.
    u.when(`${sAttr} = ${u.v(stale.second)} AND ${rAttr} = ${u.v(stale.micros)}`);
    u.set(`${sAttr} = ${u.v(second)}, ${rAttr} = ${u.v(micros)}`);
  } else {
    u.when(`attribute_not_exists(${sAttr}) OR ${sAttr} = ${u.v(second)}`);
    u.set(`${sAttr} = ${u.v(second)}`).add(`r${k}`, micros);
  }
  u.add('rateTotal', micros - freed);
  // Never-written headroom: slice 0 owns the whole cap, the others none (see core/admission.ts).
  const init = slice === 0 ? capMicros : 0;
  const room = u.a('rateRoom');
  const cap = u.a('rateCap');
  u.set(`${room} = if_not_exists(${room}, ${u.v(init)}) + ${u.v(freed - micros)}, ${cap} = if_not_exists(${cap}, ${u.v(capMicros)})`);
  if (args.roomCheck) {
    const mustHave = micros - freed;
    const written = `${cap} = ${u.v(capMicros)} AND ${room} >= ${u.v(mustHave)}`;
    u.when(init >= mustHave ? `attribute_not_exists(${cap}) OR (${written})` : written);
  } else {
    u.when(`attribute_not_exists(${cap}) OR ${cap} = ${u.v(capMicros)}`);
  }
}

/** The slice's part of an admission (or an extension): the money, then the reservation. */
export function sliceDebit(args: {
  slice: number;
  known: SliceView | undefined;
  micros: number;
  second: number;
  capMicros: number;
  roomCheck: boolean;
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
  addReservation(u, args);
  return u.build();
}

/**
 * The slice's share of the workspace month. Under a limit, the share's headroom must cover the
 * need; a share never written starts with the whole limit on slice 0 and none elsewhere.
 */
export function monthDebit(args: { slice: number; micros: number; limitMicros: number | undefined; ttl: number | undefined; check: boolean }): BuiltUpdate {
  const u = new UpdateBuilder();
  const tag = args.limitMicros ?? -1;
  const init = args.slice === 0 && args.limitMicros !== undefined ? args.limitMicros : 0;
  const room = u.a('roomMicros');
  const limit = u.a('limitMicros');
  const settled = u.a('settledMicros');
  u.set(`${settled} = if_not_exists(${settled}, ${u.v(0)})`);
  u.set(`${limit} = if_not_exists(${limit}, ${u.v(tag)})`);
  u.set(`${room} = if_not_exists(${room}, ${u.v(init)}) - ${u.v(args.micros)}`);
  // A key window that never ends has no ttl (a 0 would have DynamoDB collect it at once).
  if (args.ttl !== undefined) {
    const ttl = u.a('ttl');
    u.set(`${ttl} = if_not_exists(${ttl}, ${u.v(args.ttl)})`);
  }
  u.add('heldMicros', args.micros).add('usedMicros', args.micros);
  if (args.check && args.limitMicros !== undefined) {
    const written = `${limit} = ${u.v(tag)} AND ${room} >= ${u.v(args.micros)}`;
    u.when(init >= args.micros ? `attribute_not_exists(${u.a('usedMicros')}) OR (${written})` : written);
  }
  return u.build();
}

/** A window that is not sliced (key window, member month): `used + need <= limit`, as `used <= limit - need`. */
export function windowDebit(args: { micros: number; limitMicros: number | undefined; ttl: number | undefined; check: boolean }): BuiltUpdate {
  const u = new UpdateBuilder();
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
  return u.build();
}

/** The key's request counter for one minute: at most `limit` requests. */
export function requestCount(limit: number, ttl: number): BuiltUpdate {
  const u = new UpdateBuilder();
  const requests = u.a('requests');
  u.add('requests', 1).set(`${u.a('ttl')} = ${u.v(ttl)}`);
  u.when(`attribute_not_exists(${requests}) OR ${requests} < ${u.v(limit)}`);
  return u.build();
}

/** The slice's part of a settlement: the hold leaves `held`, the charge goes to `spent`, the rest back to `available`. */
export function sliceSettle(args: { holdMicros: number; chargeMicros: number; releaseMicros: number; deficitMicros: number }): BuiltUpdate {
  const u = new UpdateBuilder();
  u.add('availableMicros', args.releaseMicros).add('heldMicros', -args.holdMicros).add('spentMicros', args.chargeMicros);
  // A charge above the hold may take from the slice only what it has.
  if (args.deficitMicros > 0) u.when(`${u.a('availableMicros')} >= ${u.v(args.deficitMicros)}`);
  return u.build();
}

/** A window's (or month share's) part of a settlement: held becomes settled, the rest is freed. */
export function windowSettle(args: { holdMicros: number; chargeMicros: number; withRoom: boolean }): BuiltUpdate {
  const u = new UpdateBuilder();
  const delta = args.chargeMicros - args.holdMicros;
  u.add('heldMicros', -args.holdMicros).add('settledMicros', args.chargeMicros).add('usedMicros', delta);
  if (args.withRoom) u.add('roomMicros', -delta);
  return u.build();
}

/**
 * One slice's part of a rebalance. Givers are conditioned on having what they give (and on the
 * cap and limit their headroom was written under); a rewrite under a new cap or limit is
 * conditioned on exactly the totals it was computed from, so a concurrent change cancels it.
 */
export function sliceRebalance(edit: SliceEdit, seen: SliceView, capMicros: number): BuiltUpdate | undefined {
  const u = new UpdateBuilder();
  let touched = false;
  if (edit.availableDelta !== 0) {
    touched = true;
    u.add('availableMicros', edit.availableDelta).add('creditedMicros', edit.availableDelta);
    if (edit.availableDelta < 0) u.when(`${u.a('availableMicros')} >= ${u.v(-edit.availableDelta)}`);
  }
  let freed = 0;
  for (const s of edit.prune) {
    touched = true;
    freed += s.micros;
    u.when(`${u.a(`s${s.slot}`)} = ${u.v(s.second)} AND ${u.a(`r${s.slot}`)} = ${u.v(s.micros)}`);
    u.remove(`s${s.slot}`).remove(`r${s.slot}`);
  }
  if (freed > 0) u.add('rateTotal', -freed);
  const room = u.a('rateRoom');
  const cap = u.a('rateCap');
  if (edit.rateSet !== undefined) {
    touched = true;
    const total = u.a('rateTotal');
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
  return touched ? u.build() : undefined;
}

/** One slice's month share in a rebalance; see {@link sliceRebalance}. */
export function monthRebalance(edit: SliceEdit, seen: SliceView, limitMicros: number, ttl: number): BuiltUpdate | undefined {
  if (edit.monthSet === undefined && edit.monthDelta === 0) return undefined;
  const u = new UpdateBuilder();
  const room = u.a('roomMicros');
  const limit = u.a('limitMicros');
  const used = u.a('usedMicros');
  for (const name of ['settledMicros', 'heldMicros', 'usedMicros']) {
    const a = u.a(name);
    u.set(`${a} = if_not_exists(${a}, ${u.v(0)})`);
  }
  const t = u.a('ttl');
  u.set(`${t} = if_not_exists(${t}, ${u.v(ttl)})`);
  if (edit.monthSet !== undefined) {
    u.when(seen.month.exists ? `${used} = ${u.v(seen.month.usedMicros)}` : `attribute_not_exists(${used})`);
    u.set(`${room} = ${u.v(edit.monthSet)}, ${limit} = ${u.v(limitMicros)}`);
    return u.build();
  }
  const init = seen.slice === 0 ? limitMicros : 0;
  u.set(`${room} = if_not_exists(${room}, ${u.v(init)}) + ${u.v(edit.monthDelta)}, ${limit} = if_not_exists(${limit}, ${u.v(limitMicros)})`);
  if (edit.monthDelta < 0) {
    const give = -edit.monthDelta;
    const written = `${limit} = ${u.v(limitMicros)} AND ${room} >= ${u.v(give)}`;
    u.when(init >= give ? `attribute_not_exists(${used}) OR (${written})` : written);
  } else {
    u.when(`attribute_not_exists(${used}) OR ${limit} = ${u.v(limitMicros)}`);
  }
  return u.build();
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
/** The key window's names (a key slice j > 0 uses the month share's `roomMicros`/`limitMicros`). */
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
export function keyCounterDebit(limit: number, ttl: number): BuiltUpdate {
  const u = new UpdateBuilder();
  u.add('requests', 1).add('room', -1).set(`${u.a('ttl')} = ${u.v(ttl)}`);
  u.when(`${u.a('lim')} = ${u.v(limit)} AND ${u.a('room')} >= ${u.v(1)}`);
  return u.build();
}

const equalsSeen = (u: UpdateBuilder, name: string, seen: number): string =>
  seen === 0 ? `(attribute_not_exists(${u.a(name)}) OR ${u.a(name)} = ${u.v(0)})` : `${u.a(name)} = ${u.v(seen)}`;

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
