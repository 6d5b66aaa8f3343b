/**
 * The ledger on DynamoDB, sliced for hot workspaces. One TransactWriteItems admits (the key's
 * request counter, the request's row put open as its hold, one slice item, that slice's month
 * share, the key's window and the member's month, each conditional), one settles (the row turned
 * into its usage row, the slice, the windows; `request-rows.ts`).
 *
 * Every condition is written with `ReturnValuesOnConditionCheckFailure: ALL_OLD`, so a cancelled
 * transaction hands back the state it was refused on: a request counter at its limit refuses at
 * once, and a slice whose spend-rate slot holds an aged-out second is retried with that slot
 * overwritten. A transaction cancelled only for conflicts is tried again on another slice.
 * Anything else reads every slice item by item (never cancelled for a conflict); the pure
 * {@link refusalFor} refuses only when the whole cannot cover, and on a workspace with more than
 * one slice only on a consistent snapshot of every slice (TransactGetItems). When the whole can
 * cover, the {@link planRebalance} moves are written (one conditional transaction that cannot
 * create or destroy a unit) and the admission is tried again.
 */
import { BatchGetCommand, GetCommand, TransactGetCommand, TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import {
  grownSliceCount,
  planRebalance,
  refusalFor,
  sliceAfterConflict,
  type AdmissionAsk,
  type AdmissionSnapshot,
  type RebalancePlan,
  type SliceEdit,
  type SliceView,
} from '../core/admission';
import { KEY_SLICES as KEY_SLICE_READ, keySliceCount, keySliceOf, keyTotals, planKeyRebalance, type KeyShareEdit, type KeyShareView } from '../core/key-slices';
import { settlementAmounts } from '../core/settlement';
import { bucketOf, guardAdmits, lapOf, partitionSlots, slotAt, slotOf, slotsAfterPrune, slotsAfterReservation, type RateSlot } from '../core/spend-rate';
import { monthIdOf, monthNumber, monthNumberOf, windowEnd, windowKeys } from '../core/windows';
import type { DocumentSender } from '../adapters/dynamo-wire';
import type { AdmissionLimits, AdmitOutcome, AdmitRequest, Ledger, Refusal, Settlement } from '../gateway/ports';
import type { HoldRecord } from '../shared/records';
import { CLOSED_FOR, COUNTER_NAMES, KEY_WINDOW_NAMES, guardReset, type ClosedFor, guardTarget, isArmed, keyCounterDebit, keyShareDebit, keyShareRebalance, keyShareView, type KeyShareNames, type MonthDebit } from './items';
import { closesMinute, countWindowTtl, minuteGiven, minuteShareRebalance, minuteShareView, minuteUsed, staleCount, windowCount, type MinuteCount } from './items';
import { requestCount, sliceDebit, sliceRebalance, sliceSettle, sliceView, windowDebit, windowSettle, windowView, type Item } from './items';
import type { BuiltUpdate } from './expr';
import { SliceStatsRecorder } from './slice-stats';
import { BALANCE_SK, MAX_SLICES, keyPk, keySlicePk, memberPk, requestRowKey, shardOf, sliceKey, windowKey } from './keys';
import { extendRowUpdate, holdKey, holdOfRow, isOpenRow, openRowPut, pendingChargeUpdate, releaseRowUpdate, releasedRowCreate, rowStart, settleRowUpdate } from './request-rows';
import { requestIdTime } from '../core/request-id';

type TransactItems = NonNullable<ConstructorParameters<typeof TransactWriteCommand>[0]['TransactItems']>;
type TransactItem = TransactItems[number];

/**
 * One of a key's quantities split over its key slices, as a key rebalance moves it: its key
 * window's money (`sk` the window, under the limit this ledger checks), or its minute of requests
 * (`sk` the minute's counter; `rateWindow`, the key window item key slice 0 counts the minute on,
 * when it does). `ttl` is what a move writes on an item that has none.
 */
export type KeyShareSpec =
  | { readonly kind: 'window'; readonly sk: string; readonly limitMicros: number; readonly ttl: number | undefined }
  | { readonly kind: 'rate'; readonly sk: string; readonly ratePerMinute: number; readonly minute: number; readonly rateWindow?: string; readonly ttl: number };

/** Table names the ledger writes, and what its usage rows keep. */
export interface LedgerTables {
  readonly ledger: string;
  /** Requests' rows: each an open hold from admission, a usage row from settlement. */
  readonly usage: string;
  /** Days before DynamoDB TTL collects a usage row; absent: kept. */
  readonly usageRetentionDays?: number;
}

const DAY_S = 86_400;
/** Windows are kept this long past their end, for the CLI's ledger view. */
const WINDOW_RETENTION_S = 400 * DAY_S;
const MAX_ATTEMPTS = 30;
/** Attempts of a read the store cancelled for a conflict or left unprocessed (about 3 s of pauses). */
const READ_ATTEMPTS = 20;
/** How often one process re-reads a workspace's slice 0 (slice count) and tidies the slice it settled on. */
const MAINTAIN_INTERVAL_MS = 30_000;
/**
 * Admissions per workspace over which one process judges the conflict rate for growing the slice
 * count. Small, because a deployed process (one Lambda instance) sees a fraction of a hot
 * workspace's traffic, and a workspace on too few slices pays in retries until one judges.
 */
const GROWTH_WINDOW = 50;

/** A cancelled transaction, with per-item reasons (and, asked for, the item each was refused on). */
type Cancelled = Error & { CancellationReasons?: { Code?: string; Item?: Record<string, AttributeValue> | Item }[] };

function isCancelled(err: unknown): err is Cancelled {
  return err instanceof Error && err.name === 'TransactionCanceledException';
}

function isConditionFailure(err: unknown): boolean {
  return err instanceof Error && err.name === 'ConditionalCheckFailedException';
}

/** A single-item write refused because an ongoing transaction holds its item (DynamoDB's conflict for plain writes). */
function isWriteConflict(err: unknown): boolean {
  return err instanceof Error && err.name === 'TransactionConflictException';
}

/** True when every reason is a conflict or none (the transaction may simply be run again). */
function onlyConflicts(err: Cancelled): boolean {
  const reasons = err.CancellationReasons ?? [];
  return reasons.length > 0 && reasons.every((r) => r.Code === undefined || r.Code === 'None' || r.Code === 'TransactionConflict');
}

function failed(err: Cancelled, index: number): boolean {
  return err.CancellationReasons?.[index]?.Code === 'ConditionalCheckFailed';
}

/** The item a reason returned (ALL_OLD), as plain values whichever client sent the call. */
function reasonItem(err: Cancelled, index: number): Item | undefined {
  const raw = err.CancellationReasons?.[index]?.Item;
  if (raw === undefined) return undefined;
  const values = Object.values(raw);
  const isAv = values.length > 0 && values.every((v) => v !== null && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length === 1);
  return isAv ? unmarshall(raw as Record<string, AttributeValue>) : (raw as Item);
}

function pause(attempt: number): Promise<void> {
  const ms = Math.min(200, 4 * 2 ** Math.min(attempt, 6)) * (0.5 + Math.random());
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function num(v: unknown): number {
  return typeof v === 'number' ? v : 0;
}

const ttlAfter = (end: number | undefined): number | undefined => (end === undefined ? undefined : Math.floor(end / 1000) + WINDOW_RETENTION_S);

/** An Update item for a transaction. */
function update(table: string, key: Record<string, unknown>, built: BuiltUpdate): TransactItem {
  return { Update: { TableName: table, Key: key, ...built, ...(built.ConditionExpression !== undefined ? { ReturnValuesOnConditionCheckFailure: 'ALL_OLD' as const } : {}) } };
}

/** A window a request occupies beyond its slice's month share: the key's window or the member's month. */
interface WindowSpec {
  readonly sk: string;
  readonly kind: 'key' | 'member';
  /** The limit it is checked under; undefined: counted only (a hold's window whose limit has since gone). */
  readonly limitMicros: number | undefined;
  /** Its limit is being armed and this process has not seen the base written: counted, unchecked, and only until then. */
  readonly unarmed: boolean;
  readonly ttl: number | undefined;
}

/** What the ledger remembers of an armed window: the workspace and the window's sort key (which names its generation). */
const armedId = (workspaceId: string, sk: string): string => `${workspaceId}\u0000${sk}`;

/** The window item's part of an admission or extension of `micros`, on key slice `k` (a member month is one item). */
function windowWrite(w: WindowSpec, k: number, micros: number, count?: MinuteCount): BuiltUpdate {
  const check = !w.unarmed && w.limitMicros !== undefined;
  if (w.kind === 'key' && k !== 0) return keyShareDebit({ micros, limitMicros: w.unarmed ? undefined : w.limitMicros, ttl: w.ttl, check, unarmed: w.unarmed });
  return windowDebit({ micros, limitMicros: w.limitMicros, ttl: w.ttl, check, unarmed: w.unarmed, ...(count === undefined ? {} : { count }) });
}

/** The epoch minute a request's rate counts in: its start's, the instant its limits (and so where it counts) were decided at. */
const minuteOf = (epochMs: number): number => Math.floor(epochMs / 60_000);

/**
 * Where an admission's transaction put each of its parts: the request counter (absent when the
 * minute counts on a key window item of key slice 0), the row, the slice, the first window, and
 * the item carrying the minute's count when it is a key window's.
 */
interface AdmitLayout {
  readonly counter?: number;
  readonly row: number;
  readonly slice: number;
  readonly windowsFrom: number;
  readonly count?: number;
}

/** The arming marks an admission's counter write must not meet: those of the windows it does not count (BYOK counts none and is never refused by them). */
function closedFor(request: AdmitRequest): ClosedFor {
  if (request.byok) return [];
  const marks: ClosedFor[number][] = [];
  if (request.limits.keyLimitMicros === undefined) marks.push(CLOSED_FOR.key);
  if (request.memberId !== undefined && request.limits.memberLimitMicros === undefined) marks.push(CLOSED_FOR.member);
  return marks;
}

/** The month (`yyyymm`) a hold counts in, from its `MONTH#<yyyy-mm>` window; undefined for a BYOK hold. */
function holdMonth(hold: HoldRecord): number | undefined {
  const sk = hold.windows.find((w) => w.startsWith('MONTH#'));
  return sk === undefined ? undefined : monthNumberOf(sk.slice('MONTH#'.length));
}

/** An extension as an admission of `extraMicros` on the hold's behalf: what reads and moves for it are planned with. */
function extensionRequest(hold: HoldRecord, extraMicros: number, limits: AdmissionLimits, now: number): AdmitRequest {
  return {
    holdId: hold.holdId,
    workspaceId: hold.workspaceId,
    keyId: hold.keyId,
    ...(hold.memberId !== undefined ? { memberId: hold.memberId } : {}),
    family: hold.family,
    requestedModel: hold.requestedModel,
    amountMicros: extraMicros,
    inputMicros: 0,
    byok: false,
    limits,
    now,
    expiresAt: hold.expiresAt,
  };
}

/** What one process knows of a workspace's slices (learned from reads and refused writes). */
interface SliceMemo {
  active: number;
  high: number;
  readonly seen: Map<number, SliceView>;
  lastMaintained: number;
  admissions: number;
  conflicts: number;
}

/** Thrown when an admission cannot be decided after repeated conflicts (a 503, not a refusal). */
export class LedgerContentionError extends Error {
  override readonly name = 'LedgerContentionError';
}

export class DynamoLedger implements Ledger {
  private readonly memo = new Map<string, SliceMemo>();
  /** Windows being armed whose base this process has seen written (their limit is enforced from then on). */
  private readonly armed = new Set<string>();
  /**
   * Key slice 0's item of the minute's count as a request's last snapshot read it, when it is a
   * key window's (its slots' stored values condition a key rebalance), by snapshot.
   */
  private readonly homeItems = new WeakMap<AdmissionSnapshot, Item | undefined>();
  /** The client (the benchmark counts its round trips by wrapping it: `bench/round-trips.ts`). */
  private get db(): DocumentSender {
    return this.doc;
  }

  constructor(
    /** The gateway passes the lean {@link DynamoWire}; the sweeper and tests may pass the SDK's DocumentClient. */
    private readonly doc: DocumentSender,
    private readonly tables: LedgerTables,
    /** Told of each transaction conflict (a CloudWatch metric when deployed). */
    private readonly onConflict: () => void = () => undefined,
    /**
     * A stage with several regions: what transfers have moved into this region of the spend-rate
     * cap's headroom under the request's cap (`spendRateMovedMicros`), read only when an admission
     * reads its snapshot (the refusal and a rewrite under a changed cap count it), never on the
     * first write. Absent: one region, 0.
     */
    private readonly rateMoved?: (workspaceId: string, limits: AdmissionLimits) => Promise<number>,
  ) {
    // The shrinking hook (`slice-stats.ts`): reports admissions and conflicts, consolidates a cooled workspace.
    this.sliceStats = new SliceStatsRecorder(doc, tables.ledger, async (workspaceId, from, to) => {
      const done = await consolidateSlices(this.db, this.tables, workspaceId, from, to);
      if (done) this.memoOf(workspaceId).active = to;
      return done;
    });
  }

  private readonly sliceStats: SliceStatsRecorder;

  private memoOf(workspaceId: string): SliceMemo {
    let m = this.memo.get(workspaceId);
    if (m === undefined) {
      m = { active: 1, high: 1, seen: new Map(), lastMaintained: 0, admissions: 0, conflicts: 0 };
      this.memo.set(workspaceId, m);
    }
    return m;
  }

  /** Learns what slice 0 says of the slice count, and what a slice item says of its slots and month share. */
  private learn(memo: SliceMemo, slice: number, item: Item | undefined, month: number): void {
    if (item === undefined) return;
    memo.seen.set(slice, sliceView(slice, item, month));
    if (slice === 0) {
      memo.active = Math.max(1, Math.min(MAX_SLICES, num(item.sliceCount) || 1));
      memo.high = Math.max(memo.active, Math.min(MAX_SLICES, num(item.sliceHigh) || 1));
    }
  }

  /**
   * Keeps what this process knows of a slice current after its own write: a reservation it made
   * (and the month share it wrote), and aged-out slots it removed. Without this, the next
   * reservation in a slot this process had just pruned (or reused since its last read) names the
   * wrong stored state, is cancelled, and costs a second round trip before the first byte.
   * Another process's writes can still make it stale; a refusal's ALL_OLD then corrects it.
   */
  private noteSlots(memo: SliceMemo, slice: number, reserved?: { second: number; micros: number; month?: number }, pruned: readonly RateSlot[] = [], guard?: number): void {
    const seen = memo.seen.get(slice);
    if (seen === undefined) return;
    let slots = pruned.length > 0 ? slotsAfterPrune(seen.slots, pruned) : seen.slots;
    if (reserved !== undefined) slots = slotsAfterReservation(slots, reserved.second, reserved.micros);
    // After its own month debit the share is that month's: the next write adds to it.
    const month = reserved?.month !== undefined && seen.month.storedMonth !== reserved.month ? { ...seen.month, storedMonth: reserved.month } : seen.month;
    const rateGuard = guard ?? seen.rateGuard ?? (reserved !== undefined ? lapOf(reserved.second) : undefined);
    memo.seen.set(slice, { ...seen, slots, month, ...(rateGuard === undefined ? {} : { rateGuard }) });
  }

  /**
   * The windows a request occupies beyond its slice's month share: the key's window and the
   * member's month, each only while its limit is tracked (given in the limits). A window being
   * armed is counted without its limit until this process has seen the arming's base written.
   */
  private windowSpecs(request: AdmitRequest): WindowSpec[] {
    const { limits } = request;
    // A request counts in the window of its start, as its row records it (`rowStart`): the same
    // instant the gateway decided by whether a limit being armed counts it (`core/limit-arming.ts`).
    const start = rowStart(request.holdId, request.now);
    const specs: WindowSpec[] = [];
    if (limits.keyLimitMicros !== undefined) {
      const sk = windowKeys.key(request.keyId, limits.keyWindow, start, limits.keyWindowGeneration);
      const unarmed = limits.keyLimitArming === true && !this.armed.has(armedId(request.workspaceId, sk));
      specs.push({ sk, kind: 'key', limitMicros: limits.keyLimitMicros, unarmed, ttl: ttlAfter(windowEnd(limits.keyWindow, start)) });
    }
    if (request.memberId !== undefined && limits.memberLimitMicros !== undefined) {
      const sk = windowKeys.member(request.memberId, start, limits.memberMonthGeneration);
      const unarmed = limits.memberLimitArming === true && !this.armed.has(armedId(request.workspaceId, sk));
      specs.push({ sk, kind: 'member', limitMicros: limits.memberLimitMicros, unarmed, ttl: ttlAfter(windowEnd('monthly', start)) });
    }
    return specs;
  }

  /** The limits a request is refused under now: a limit still being armed does not refuse yet. */
  private enforced(request: AdmitRequest): AdmissionLimits {
    const specs = this.windowSpecs(request);
    const { limits } = request;
    const key = specs.find((w) => w.kind === 'key');
    const member = specs.find((w) => w.kind === 'member');
    if (key?.unarmed !== true && member?.unarmed !== true) return limits;
    const { keyLimitMicros, memberLimitMicros, ...rest } = limits;
    return {
      ...rest,
      ...(keyLimitMicros !== undefined && key?.unarmed !== true ? { keyLimitMicros } : {}),
      ...(memberLimitMicros !== undefined && member?.unarmed !== true ? { memberLimitMicros } : {}),
    };
  }

  /**
   * The admission's transaction on slice `slice`, items in a fixed order: the request counter
   * (unless the minute counts on key slice 0's window item), the row, the slice (with its month
   * share), the key's and member's windows that are tracked, and the key window the minute counts
   * on when it is not one of those (a removed or re-armed limit's, `keyRateWindow`).
   */
  private admitItems(request: AdmitRequest, hold: HoldRecord, slice: number, memo: SliceMemo, countMonth: number, reset = false): { items: TransactItems; layout: AdmitLayout } {
    const { limits, now } = request;
    const need = request.amountMicros;
    const k = this.keySliceFor(request, slice);
    const start = rowStart(request.holdId, now);
    const counterTtl = Math.floor(now / 1000) + 180;
    const home = limits.keyRateWindow;
    const onWindow = home !== undefined && k === 0;
    const count: MinuteCount = { minute: minuteOf(start), rate: limits.keyRatePerMinute, ...(reset ? { reset } : {}), closed: closedFor(request) };
    const items: TransactItems = [];
    if (!onWindow) {
      // Key slice 0's counter is today's item; a key slice j > 0 spends the requests lent to it.
      items.push(
        update(
          this.tables.ledger,
          { pk: keySlicePk(request.workspaceId, request.keyId, k), sk: windowKeys.rate(request.keyId, start) },
          k === 0 ? requestCount(limits.keyRatePerMinute, counterTtl, closedFor(request)) : keyCounterDebit(limits.keyRatePerMinute, counterTtl, closedFor(request)),
        ),
      );
    }
    const o = items.length;
    // The request's row, open: its hold (`request-rows.ts`).
    items.push(openRowPut(this.tables.usage, hold));
    const layout = (countAt: number | undefined): AdmitLayout => ({ ...(onWindow ? {} : { counter: 0 }), row: o, slice: o + 1, windowsFrom: o + 2, ...(countAt === undefined ? {} : { count: countAt }) });
    const countOnly = (): number => items.push(update(this.tables.ledger, { pk: keySlicePk(request.workspaceId, request.keyId, 0), sk: home ?? '' }, windowCount(count, countWindowTtl(home ?? '', now)))) - 1;
    if (request.byok) return { items, layout: layout(onWindow ? countOnly() : undefined) };
    const known = memo.seen.get(slice);
    const month: MonthDebit = { month: countMonth, limitMicros: limits.workspaceLimitMicros, check: true, ...(known !== undefined ? { known: known.month } : {}) };
    items.push(
      update(
        this.tables.ledger,
        sliceKey(request.workspaceId, slice),
        sliceDebit({ slice, known, micros: need, second: bucketOf(now), capMicros: limits.spendRateCapMicros, roomCheck: true, believedCount: memo.active, month }),
      ),
    );
    let countAt: number | undefined;
    for (const w of this.windowSpecs(request)) {
      // The minute's request, on the key window item it already writes.
      const carries = onWindow && w.kind === 'key' && w.sk === home;
      if (carries) countAt = items.length;
      items.push(update(this.tables.ledger, windowKey(request.workspaceId, slice, w.sk), windowWrite(w, k, need, carries ? count : undefined)));
    }
    if (onWindow && countAt === undefined) countAt = countOnly();
    return { items, layout: layout(countAt) };
  }

  /** The key slice a request's key items go on: its workspace slice's; a BYOK request's, by its id among the key's slices. */
  private keySliceFor(request: AdmitRequest, slice: number): number {
    return request.byok ? shardOf(request.holdId, keySliceCount(this.memoOf(request.workspaceId).active)) : keySliceOf(slice);
  }

  async admit(request: AdmitRequest): Promise<AdmitOutcome> {
    const { limits, now } = request;
    const need = request.amountMicros;
    const memo = this.memoOf(request.workspaceId);
    let slice = request.byok ? 0 : shardOf(request.holdId, memo.active);
    // The month the request counts in: its own, unless the slice's share has already started a
    // later one (a clock a moment behind another's at a month's end): then that one.
    let month = monthNumber(now);
    const windowsIn = (m: number): string[] => (request.byok ? [] : [...this.windowSpecs(request).map((w) => w.sk), `MONTH#${monthIdOf(m)}`]);
    let hold: HoldRecord = {
      holdId: request.holdId,
      workspaceId: request.workspaceId,
      keyId: request.keyId,
      ...(request.memberId !== undefined ? { memberId: request.memberId } : {}),
      family: request.family,
      requestedModel: request.requestedModel,
      amountMicros: need,
      inputMicros: request.inputMicros,
      windows: windowsIn(month),
      byok: request.byok,
      // The start its id carries: the row's sort key, so the row can be found from the id.
      createdAt: rowStart(request.holdId, now),
      expiresAt: request.expiresAt,
    };
    // The spend-rate headroom transfers moved here (regions only): read once the first write has failed, for the refusal and a rewrite under a changed cap.
    let rateMoved: number | undefined;
    const withMoved = (l: AdmissionLimits): AdmissionLimits => (rateMoved === undefined ? l : { ...l, spendRateMovedMicros: rateMoved });
    const askNow = (): AdmissionAsk => ({ needMicros: need, limits: withMoved(this.enforced(request)), byok: request.byok, hasMember: request.memberId !== undefined, now });
    let conflicted = false;
    let guardResets = 0;
    // The minute's count slot on the key window held an earlier minute's figure: the next write starts it over.
    let resetCount = false;
    const countMinute = minuteOf(rowStart(request.holdId, now));
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt += 1) {
      // A need above a limit can never fit: go straight to the snapshot, which names the refusal.
      const enforced = this.enforced(request);
      const impossible =
        !request.byok &&
        // (Under transfers between regions the capacity can exceed the share: the snapshot decides, once it has read what moved.)
        (((this.rateMoved === undefined || rateMoved !== undefined) && need > enforced.spendRateCapMicros + (rateMoved ?? 0)) ||
          (enforced.keyLimitMicros !== undefined && need > enforced.keyLimitMicros) ||
          (request.memberId !== undefined && enforced.memberLimitMicros !== undefined && need > enforced.memberLimitMicros) ||
          (enforced.workspaceLimitMicros !== undefined && need > enforced.workspaceLimitMicros));
      if (!impossible) {
        const placed = { ...hold, ...(slice !== 0 ? { slice } : {}) };
        const { items, layout } = this.admitItems(request, placed, slice, memo, month, resetCount);
        try {
          await this.db.send(new TransactWriteCommand({ TransactItems: items }));
          if (!request.byok) this.noteSlots(memo, slice, { second: bucketOf(now), micros: need, month });
          this.countAdmission(request.workspaceId, memo, conflicted);
          this.sliceStats.note(request.workspaceId, conflicted, memo.active);
          return { admitted: true, hold: placed };
        } catch (err) {
          if (!isCancelled(err)) throw err;
          if (onlyConflicts(err)) {
            conflicted = true;
            this.onConflict();
            // The slice met is busy: the retry goes to another (a BYOK request holds no slice).
            if (!request.byok) slice = sliceAfterConflict(slice, memo.active, Math.random());
            await pause(attempt);
            continue;
          }
          // The key's request count is one item's figure: at its limit, that is the answer (SPEC's first).
          // (On key slice 0 only when it has lent nothing: what it lent may still be unspent elsewhere.)
          const counted = layout.counter ?? layout.count;
          const counter = counted === undefined ? undefined : reasonItem(err, counted);
          // (On the window, what other regions moved here this minute counted as used less, as on a counter.)
          const requests = layout.counter !== undefined ? num(counter?.requests) : minuteUsed(counter, countMinute, limits.keyRatePerMinute);
          const given = layout.counter !== undefined ? num(counter?.given) : minuteGiven(counter, countMinute);
          const refused = counted !== undefined && failed(err, counted) && counter !== undefined;
          if (refused && requests >= limits.keyRatePerMinute && given === 0) {
            return { admitted: false, refusal: refusalFor({ slices: [], active: 1, keyRequests: requests }, askNow()) ?? { kind: 'rate_limit_exceeded', retryAfterSeconds: 1 } };
          }
          // A limit is being armed on a window this request does not count: it started before
          // tracking did and may no longer be admitted uncounted. Refused as a store fault (503),
          // so the client's retry, which counts the window, decides.
          const closedNow = (mark: ClosedFor[number]): boolean => (layout.counter !== undefined ? counter?.[mark] !== undefined : closesMinute(counter, mark, countMinute));
          if (refused && closedFor(request).some(closedNow)) {
            throw new LedgerContentionError('a limit is being armed on a window this admission does not count');
          }
          // The count slot came round holding an earlier minute's figure: start this minute over there.
          // (And back to adding when another writer started it over first; a refusal for anything else keeps the form it needs.)
          const onWindowCount = refused && layout.counter === undefined;
          const stale = onWindowCount && staleCount(counter, countMinute) !== undefined;
          if (stale !== resetCount && onWindowCount) {
            resetCount = stale;
            continue;
          }
          // A window being armed had its base written meanwhile: from now on its limit is enforced.
          if (!request.byok && this.learnArmed(request.workspaceId, this.windowSpecs(request), err, layout.windowsFrom)) continue;
          if (!request.byok && failed(err, layout.slice)) {
            const seenBefore = memo.seen.get(slice);
            const believed = memo.active;
            const item = reasonItem(err, layout.slice);
            this.learn(memo, slice, item, month);
            const stored = memo.seen.get(slice)?.month.storedMonth;
            if (stored !== undefined && stored > month) {
              month = stored;
              hold = { ...hold, windows: windowsIn(month) };
              this.learn(memo, slice, item, month);
              continue;
            }
            // Slice 0 said the workspace has another slice count: pick again among the real ones.
            if (slice === 0 && memo.active !== believed) {
              slice = shardOf(request.holdId, memo.active);
              continue;
            }
            const seenNow = memo.seen.get(slice);
            if (item !== undefined && seenNow !== undefined) {
              // The slice's guard lap no longer tells this second apart (a slice left alone for
              // many hours, or a clock behind it): tidy its slots, then write again.
              if (!guardAdmits(seenNow.rateGuard, bucketOf(now)) && guardResets < 3) {
                guardResets += 1;
                await this.resetGuard(request.workspaceId, seenNow, request);
                continue;
              }
              // Only the spend-rate slot, or the month the share is stored for, was not what this write assumed: write again on what came back.
              if (this.onlyStale(seenNow, seenBefore, request, attempt)) continue;
            }
          }
        }
      }
      const believed = memo.active;
      if (this.rateMoved !== undefined && !request.byok) rateMoved = await this.rateMoved(request.workspaceId, limits);
      let snapshot = await this.snapshot(request.workspaceId, memo, request, undefined, 'items', month);
      if (refusalFor(snapshot, askNow()) !== undefined) {
        // Read item by item, a sum can miss what a move carried between two reads: only a
        // consistent read of every slice decides a refusal. A workspace that never had a second
        // slice keeps each quantity on one item, and one strongly consistent item read is exact.
        if (snapshot.slices.length > 1) snapshot = await this.snapshot(request.workspaceId, memo, request, undefined, 'whole', month);
        const refusal = refusalFor(snapshot, askNow());
        if (refusal !== undefined) return { admitted: false, refusal };
      }
      if (!request.byok) {
        // The snapshot may have taught this process the workspace's real slice count: choose among those.
        if (slice >= snapshot.active || believed !== snapshot.active) slice = shardOf(request.holdId, snapshot.active);
        await this.rebalance(request.workspaceId, snapshot, planRebalance(snapshot, slice, askNow()), limits, month);
      }
      const moved = await this.rebalanceKey(request, snapshot, this.keySliceFor(request, slice));
      if (request.byok && !moved) await pause(attempt);
    }
    throw new LedgerContentionError('admission did not settle after repeated conflicts');
  }

  /**
   * Whether a cancelled write met a window whose arming's base was written since this process
   * last looked (its write only counted, and is refused from that moment): remembers it, so the
   * next attempt enforces the limit. `from` is the index of the first window item.
   */
  private learnArmed(workspaceId: string, windows: readonly WindowSpec[], err: Cancelled, from: number): boolean {
    let learned = false;
    windows.forEach((w, i) => {
      if (w.unarmed && failed(err, from + i) && isArmed(reasonItem(err, from + i))) {
        this.armed.add(armedId(workspaceId, w.sk));
        learned = true;
      }
    });
    return learned;
  }

  /** Tidies a slice's slots so its guard lap admits `request`'s second again (see `guardReset`). */
  private async resetGuard(workspaceId: string, seen: SliceView, request: AdmitRequest): Promise<void> {
    const { built, pruned } = guardReset(seen, bucketOf(request.now), request.now, request.limits.spendRateCapMicros);
    try {
      await this.db.send(new TransactWriteCommand({ TransactItems: [update(this.tables.ledger, sliceKey(workspaceId, seen.slice), built)] }));
      this.noteSlots(this.memoOf(workspaceId), seen.slice, undefined, pruned, lapOf(bucketOf(request.now)));
    } catch (err) {
      // Another writer moved the slice meanwhile: the admission's next attempt reads what it left.
      if (!isCancelled(err) && !isConditionFailure(err)) throw err;
    }
  }

  /**
   * Whether a refused slice write may have failed only over what it assumed of the slice's form,
   * while the credit is there: the spend-rate slot (as ALL_OLD shows it) is not what this process
   * wrote its condition for, or the month share is stored for another month than the write
   * assumed (a new month's share is written whole, an existing one added to). Then the write is
   * simply tried again on what came back, without a snapshot.
   */
  private onlyStale(seen: SliceView, before: SliceView | undefined, request: AdmitRequest, attempt: number): boolean {
    if (attempt > 4 || seen.availableMicros < request.amountMicros) return false;
    const k = slotOf(bucketOf(request.now));
    const now = slotAt(seen.slots, k);
    const then = before === undefined ? undefined : slotAt(before.slots, k);
    if (now?.second !== then?.second || now?.micros !== then?.micros) return true;
    const month = monthNumber(request.now);
    const rolls = (m: number | undefined): boolean => m !== undefined && m < month;
    const assumed = before?.month.storedMonth;
    const stored = seen.month.storedMonth;
    return rolls(assumed) !== rolls(stored) || (rolls(stored) && assumed !== stored);
  }

  /** Counts an admission toward the slice-growth decision; grows the count when conflicts call for it. */
  private countAdmission(workspaceId: string, memo: SliceMemo, conflicted: boolean): void {
    memo.admissions += 1;
    if (conflicted) memo.conflicts += 1;
    if (memo.admissions < GROWTH_WINDOW) return;
    const grown = grownSliceCount(memo.active, memo.conflicts, memo.admissions, MAX_SLICES);
    memo.admissions = 0;
    memo.conflicts = 0;
    if (grown > memo.active) void this.growSlices(workspaceId, memo.active, grown).catch(() => undefined);
  }

  /** Raises the slice count from `from` to `to`, unless another process changed it first. */
  private async growSlices(workspaceId: string, from: number, to: number): Promise<void> {
    if (!(await changeSliceCount(this.db, this.tables.ledger, workspaceId, from, to))) return; // another process changed it first
    const memo = this.memoOf(workspaceId);
    memo.active = to;
    memo.high = Math.max(memo.high, to);
  }

  /**
   * Every slice (with its month share, on the same item) and the windows a request occupies,
   * read either `whole` (one consistent TransactGetItems: what a refusal is decided on) or by
   * `items` (strongly consistent reads of each item: what moves are planned on, since each move
   * is conditioned on what it read). On DynamoDB a TransactGetItems is cancelled when any item it
   * reads is in an ongoing write, and a hot workspace's slices nearly always have one; item reads
   * never conflict. A key window or member month is read only while its limit is tracked.
   */
  private async snapshot(workspaceId: string, memo: SliceMemo, request?: AdmitRequest, at?: number, read: 'whole' | 'items' = 'items', countMonth?: number): Promise<AdmissionSnapshot> {
    const now = request?.now ?? at ?? Date.now();
    const month = countMonth ?? monthNumber(now);
    for (;;) {
      const high = memo.high;
      const keys: { pk: string; sk: string }[] = [];
      for (let i = 0; i < high; i += 1) keys.push(sliceKey(workspaceId, i));
      const keySlices = keySliceCount(high);
      const firstKeyAt = keys.length;
      const specs = request === undefined ? [] : this.windowSpecs(request);
      const keyWindow = specs.find((w) => w.kind === 'key');
      const memberMonth = specs.find((w) => w.kind === 'member');
      // The minute's count: key slice 0's on the key window the minute counts on, when it does; the others' on their counters.
      const start = request === undefined ? now : rowStart(request.holdId, now);
      const home = request?.limits.keyRateWindow;
      const counterAt: number[] = [];
      const windowAt: number[] = [];
      let memberAt = -1;
      if (request !== undefined) {
        for (let k = 0; k < keySlices; k += 1) {
          const pk = keySlicePk(request.workspaceId, request.keyId, k);
          const counterSk = k === 0 && home !== undefined ? home : windowKeys.rate(request.keyId, start);
          if (keyWindow !== undefined) windowAt.push(keys.push({ pk, sk: keyWindow.sk }) - 1);
          // One item is read once (a consistent read may not name it twice).
          counterAt.push(keyWindow !== undefined && counterSk === keyWindow.sk ? (windowAt[k] as number) : keys.push({ pk, sk: counterSk }) - 1);
        }
        if (memberMonth !== undefined && request.memberId !== undefined) memberAt = keys.push({ pk: memberPk(workspaceId, request.memberId), sk: memberMonth.sk }) - 1;
      }
      const got = read === 'whole' ? await this.readConsistently(keys, firstKeyAt) : await this.readItems(keys);
      this.learn(memo, 0, got[0], month);
      if (memo.high > high) continue; // slice 0 says more slices were used than we read
      const slices: SliceView[] = [];
      for (let i = 0; i < high; i += 1) {
        const view = sliceView(i, got[i], month);
        slices.push(view);
        if (got[i] !== undefined) memo.seen.set(i, view);
      }
      const keyCounters: KeyShareView[] = [];
      const keyWindows: KeyShareView[] = [];
      if (request !== undefined) {
        for (let k = 0; k < keySlices; k += 1) {
          const counted = got[counterAt[k] as number];
          keyCounters.push(k === 0 && home !== undefined ? minuteShareView(counted, minuteOf(start), request.limits.keyRatePerMinute) : keyShareView(k, counted, COUNTER_NAMES));
          if (keyWindow !== undefined) keyWindows.push(keyShareView(k, got[windowAt[k] as number], KEY_WINDOW_NAMES));
        }
        // An arming's base is written on key slice 0's window and on the member's month: from then on, enforced.
        if (keyWindow?.unarmed === true && isArmed(got[windowAt[0] as number])) this.armed.add(armedId(workspaceId, keyWindow.sk));
        if (memberMonth?.unarmed === true && memberAt >= 0 && isArmed(got[memberAt])) this.armed.add(armedId(workspaceId, memberMonth.sk));
      }
      const windowTotals = keyTotals(keyWindows);
      const snapshot: AdmissionSnapshot = {
        slices,
        active: memo.active,
        keyRequests: keyTotals(keyCounters).used,
        keyCounters,
        keyWindows,
        ...(keyWindows.some((w) => w.exists) ? { keyWindow: { settledMicros: windowTotals.settled, heldMicros: windowTotals.held, usedMicros: windowTotals.used } } : {}),
        ...(memberAt >= 0 && got[memberAt] !== undefined ? { memberMonth: windowView(got[memberAt]) } : {}),
      };
      if (home !== undefined && counterAt.length > 0) this.homeItems.set(snapshot, got[counterAt[0] as number]);
      return snapshot;
    }
  }

  /**
   * Reads `keys` consistently: in one TransactGetItems when they fit (100 items), else the
   * workspace's slices in one and the key's and member's items (from `split`) in another, so each
   * quantity is still read whole from one consistent read.
   */
  private async readConsistently(keys: { pk: string; sk: string }[], split: number): Promise<(Item | undefined)[]> {
    const read = async (part: { pk: string; sk: string }[]): Promise<(Item | undefined)[]> => {
      if (part.length === 0) return [];
      for (let attempt = 0; ; attempt += 1) {
        try {
          const out = await this.db.send(new TransactGetCommand({ TransactItems: part.map((Key) => ({ Get: { TableName: this.tables.ledger, Key } })) }));
          return (out.Responses ?? []).map((r) => r.Item as Item | undefined);
        } catch (err) {
          // Cancelled because an item is in an ongoing write: read again once it is done.
          if (!isCancelled(err) || !onlyConflicts(err)) throw err;
          if (attempt >= READ_ATTEMPTS) throw new LedgerContentionError('the consistent read of the ledger was cancelled by conflicts after repeated attempts');
          this.onConflict();
          await pause(attempt);
        }
      }
    };
    if (keys.length <= 100) return read(keys);
    const [a, b] = await Promise.all([read(keys.slice(0, split)), read(keys.slice(split))]);
    return [...a, ...b];
  }

  /**
   * Reads `keys` item by item, each strongly consistent (BatchGetItem, 100 keys a call, what it
   * leaves unprocessed asked again), in the order given. Never cancelled by a conflict.
   */
  private async readItems(keys: readonly { pk: string; sk: string }[]): Promise<(Item | undefined)[]> {
    const found = new Map<string, Item>();
    const id = (k: { pk: unknown; sk: unknown }): string => `${String(k.pk)}\u0000${String(k.sk)}`;
    const chunks: { pk: string; sk: string }[][] = [];
    for (let i = 0; i < keys.length; i += 100) chunks.push(keys.slice(i, i + 100));
    await Promise.all(
      chunks.map(async (chunk) => {
        let wanted: Record<string, unknown>[] = chunk;
        for (let attempt = 0; wanted.length > 0; attempt += 1) {
          if (attempt > 0) await pause(attempt);
          const out = await this.db.send(new BatchGetCommand({ RequestItems: { [this.tables.ledger]: { Keys: wanted, ConsistentRead: true } } }));
          for (const item of out.Responses?.[this.tables.ledger] ?? []) found.set(id(item as { pk: unknown; sk: unknown }), item as Item);
          wanted = out.UnprocessedKeys?.[this.tables.ledger]?.Keys ?? [];
          if (attempt >= READ_ATTEMPTS && wanted.length > 0) throw new LedgerContentionError('the ledger read was left unprocessed after repeated attempts');
        }
      }),
    );
    return keys.map((k) => found.get(id(k)));
  }

  /**
   * Lends the key's request headroom (and, under a key limit, its credit-limit headroom) to key
   * slice `k` from the others, in one conditional transaction; true when something was written.
   */
  private async rebalanceKey(request: AdmitRequest, snapshot: AdmissionSnapshot, k: number, what: { counter: boolean } = { counter: true }): Promise<boolean> {
    const { limits, now } = request;
    const active = keySliceCount(snapshot.active);
    const items: TransactItems = [];
    const add = (edits: KeyShareEdit[], shares: readonly KeyShareView[], names: KeyShareNames, limit: number, sk: string, ttl: number | undefined): void => {
      for (const edit of edits) {
        const seen = shares[edit.slice];
        if (seen === undefined) continue;
        const built = keyShareRebalance(edit, seen, names, limit, ttl);
        if (built !== undefined) items.push(update(this.tables.ledger, { pk: keySlicePk(request.workspaceId, request.keyId, edit.slice), sk }, built));
      }
    };
    const counters = snapshot.keyCounters ?? [];
    const start = rowStart(request.holdId, now);
    const home = limits.keyRateWindow;
    const homeItem = this.homeItems.get(snapshot);
    // Moves of the minute's count on key slice 0's window item go in a transaction of their own
    // when the key window's money moves there too (one transaction names an item once).
    const counts: TransactItems = [];
    if (what.counter) {
      const edits = planKeyRebalance(counters, k, 1, limits.keyRatePerMinute, active);
      // Key slice 0's share of the minute is on its key window item's slots when the minute counts there.
      if (home !== undefined) {
        for (const edit of edits.filter((e) => e.slice === 0)) {
          const built = minuteShareRebalance(edit, homeItem, minuteOf(start), limits.keyRatePerMinute);
          if (built !== undefined) counts.push(update(this.tables.ledger, { pk: keySlicePk(request.workspaceId, request.keyId, 0), sk: home }, built));
        }
      }
      const onCounters = home === undefined ? edits : edits.filter((e) => e.slice !== 0);
      add(onCounters, counters, COUNTER_NAMES, limits.keyRatePerMinute, windowKeys.rate(request.keyId, start), Math.floor(now / 1000) + 180);
    }
    // The key window's headroom is lent only under a limit that is enforced (a window being armed is only counted).
    const keyWindow = this.windowSpecs(request).find((w) => w.kind === 'key');
    if (!request.byok && keyWindow !== undefined && !keyWindow.unarmed && keyWindow.limitMicros !== undefined) {
      const windows = snapshot.keyWindows ?? [];
      add(planKeyRebalance(windows, k, request.amountMicros, keyWindow.limitMicros, active), windows, KEY_WINDOW_NAMES, keyWindow.limitMicros, keyWindow.sk, keyWindow.ttl);
    }
    const homeKey = (item: TransactItem): boolean => item.Update?.Key?.pk === keySlicePk(request.workspaceId, request.keyId, 0) && item.Update.Key.sk === home;
    const apart = counts.length > 0 && items.some(homeKey);
    const parts = apart ? [counts, items] : [[...counts, ...items]];
    let wrote = false;
    for (const part of parts) {
      if (part.length === 0) continue;
      try {
        await this.db.send(new TransactWriteCommand({ TransactItems: part }));
        wrote = true;
      } catch (err) {
        if (!isCancelled(err)) throw err;
        if (onlyConflicts(err)) this.onConflict();
      }
    }
    return wrote;
  }

  /** Writes a rebalance plan in one conditional transaction; false when it was cancelled (the state moved). */
  private async rebalance(workspaceId: string, snapshot: AdmissionSnapshot, plan: RebalancePlan, limits: AdmissionLimits, month: number): Promise<boolean> {
    const items: TransactItems = [];
    // The month share is on the slice item: one write per slice carries its money, rate and month moves.
    const share = limits.workspaceLimitMicros === undefined ? undefined : { id: month, limitMicros: limits.workspaceLimitMicros };
    for (const edit of plan.edits) {
      const seen = snapshot.slices[edit.slice];
      if (seen === undefined) continue;
      const s = sliceRebalance(edit, seen, limits.spendRateCapMicros, share);
      if (s !== undefined) items.push(update(this.tables.ledger, sliceKey(workspaceId, edit.slice), s));
    }
    if (items.length === 0) return true;
    try {
      await this.db.send(new TransactWriteCommand({ TransactItems: items }));
      this.notePrunes(workspaceId, plan);
      return true;
    } catch (err) {
      if (!isCancelled(err)) throw err;
      if (onlyConflicts(err)) this.onConflict();
      return false;
    }
  }

  async settle(given: HoldRecord, settlement: Settlement): Promise<boolean> {
    return this.close(given, settlement, false);
  }

  /**
   * Gives back whatever an admission whose outcome the gateway never learnt may have held (the
   * gateway answered the request with a refusal): the request's row, read consistently from its
   * key (its id carries its start), is released exactly as a settlement charging 0 would settle it
   * (slice, month share and windows given back, conditioned on the row being open with the amount
   * and windows stored, so it is idempotent and never meets a sweep or a second release twice);
   * where there is no row, a released row is put in its place, so the admission, should a copy of
   * it still land, is cancelled whole. Rejects when the store cannot be reached: the caller tries
   * again while it may.
   */
  async release(workspaceId: string, requestId: string, now: number): Promise<void> {
    const startedAt = requestIdTime(requestId);
    // Every id the gateway mints carries its start; without it the row's key is unknown.
    if (startedAt === undefined) throw new RangeError('a request id without its start cannot be released');
    const key = requestRowKey(workspaceId, requestId, startedAt);
    for (let attempt = 0; attempt < 5; attempt += 1) {
      const got = await this.db.send(new GetCommand({ TableName: this.tables.usage, Key: key, ConsistentRead: true }));
      if (got.Item === undefined) {
        try {
          await this.db.send(new UpdateCommand(releasedRowCreate(this.tables.usage, workspaceId, requestId, startedAt, now)));
          return;
        } catch (err) {
          // The admission landed between the read and the put: release its row.
          if (!isConditionFailure(err)) throw err;
          continue;
        }
      }
      if (!isOpenRow(got.Item)) return; // released, settled or swept already
      const hold = holdOfRow(got.Item);
      if (hold === undefined) throw new Error('open row lacks the attributes its release needs');
      await this.close(hold, { counts: undefined, chargeMicros: 0, stream: false, status: 0, outcome: 'swept', attempts: 0, now }, true);
      return;
    }
    throw new LedgerContentionError('the release did not settle after repeated attempts');
  }

  /** A settlement, or with `release` the same transaction charging 0 that turns the row `released` instead of into a usage row. */
  private async close(given: HoldRecord, settlement: Settlement, release: boolean): Promise<boolean> {
    let hold = given;
    const slice = hold.slice ?? 0;
    const wanted = hold.byok || settlement.byok === true ? 0 : settlement.chargeMicros;
    let available: number | undefined;
    let lastError: unknown;
    let moved = false;
    // The month the hold counted in, while its slice still holds that month's share.
    let month = hold.byok ? undefined : holdMonth(hold);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt += 1) {
      const amounts = settlementAmounts(hold.amountMicros, wanted, available);
      const items = this.settleItems(hold, settlement, amounts, month, release);
      try {
        await this.db.send(new TransactWriteCommand({ TransactItems: items }));
        // After the reply: the admissions' load report, when one is due (never awaited).
        void this.sliceStats.flush(hold.workspaceId);
        if (!hold.byok) await this.maintain(hold.workspaceId, slice, settlement.now).catch(() => undefined);
        return true;
      } catch (err) {
        lastError = err;
        if (!isCancelled(err)) {
          if (attempt >= 3) break;
          await pause(attempt);
          continue;
        }
        if (failed(err, 0)) {
          // Either already settled (idempotent: nothing to do), or the stored hold has grown
          // since this copy was taken: settle what is stored, so the right amount returns.
          // (Or a limit's arming adopted it, adding a window: settle onto that too.)
          const stored = reasonItem(err, 0) ?? (await this.db.send(new GetCommand({ TableName: this.tables.usage, Key: holdKey(hold), ConsistentRead: true }))).Item;
          if (!isOpenRow(stored)) return false;
          hold = { ...hold, amountMicros: num(stored?.amountMicros), ...(Array.isArray(stored?.windows) ? { windows: stored?.windows as string[] } : {}) };
          continue;
        }
        const sliceItem = failed(err, 1) ? reasonItem(err, 1) : undefined;
        if (month !== undefined && sliceItem !== undefined && sliceItem.mo !== month) {
          // The slice's month share has started over for a later month: this hold's month is
          // over and its figures gone with it; settle the money alone.
          month = undefined;
          continue;
        }
        if (failed(err, 1) && !hold.byok) {
          // The charge exceeds the hold by more than this slice holds. Other slices may have
          // it: move credit in once; then collect what is there and record the rest.
          if (!moved) {
            moved = true;
            const got = await this.moveCreditTo(hold.workspaceId, slice, amounts.deficitMicros, settlement.now).catch(() => false);
            if (got) continue;
          }
          const item = reasonItem(err, 1) ?? (await this.db.send(new GetCommand({ TableName: this.tables.ledger, Key: sliceKey(hold.workspaceId, slice), ConsistentRead: true }))).Item;
          available = Math.max(0, num(item?.availableMicros));
          continue;
        }
        if (onlyConflicts(err)) this.onConflict();
        await pause(attempt);
      }
    }
    // Leave the computed charge on the open row, so the sweeper settles it for what it really cost.
    if (!release) await this.db.send(new UpdateCommand(pendingChargeUpdate(this.tables.usage, hold, wanted))).catch(() => undefined);
    throw lastError instanceof Error ? lastError : new Error('settlement did not go through');
  }

  /**
   * Moves at least `micros` of credit into `slice` from the others; false when the workspace has
   * less. Settlements use it for a charge above the hold; an operator's negative adjustment, which
   * lands on slice 0, uses it when the credit sits on other slices.
   */
  async moveCreditTo(workspaceId: string, slice: number, micros: number, now: number): Promise<boolean> {
    const memo = this.memoOf(workspaceId);
    for (let attempt = 0; attempt < 5; attempt += 1) {
      const snapshot = await this.snapshot(workspaceId, memo, undefined, now);
      const others = snapshot.slices.filter((s) => s.slice !== slice).reduce((a, s) => a + s.availableMicros, 0);
      if (others <= 0 || snapshot.slices.length <= 1) return false;
      const open: AdmissionLimits = { keyWindow: 'never', spendRateCapMicros: Number.MAX_SAFE_INTEGER, keyRatePerMinute: Number.MAX_SAFE_INTEGER };
      const needed = Math.min(micros + (snapshot.slices[slice]?.availableMicros ?? 0), others + (snapshot.slices[slice]?.availableMicros ?? 0));
      const plan = planRebalance(snapshot, slice, { needMicros: needed, limits: open, byok: false, hasMember: false, now });
      // Only money moves here: the spend-rate and month headroom stay where they are.
      const moneyOnly: RebalancePlan = { target: slice, edits: plan.edits.map((e) => ({ slice: e.slice, availableDelta: e.availableDelta, prune: [], rateDelta: 0, monthDelta: 0 })) };
      if (await this.rebalanceMoney(workspaceId, snapshot, moneyOnly)) return true;
    }
    return false;
  }

  /**
   * Writes slice edits that move credit or prune slots (no headroom moves), under the cap each
   * slice was written with; `guardTo` also moves the target slice's guard lap (a tidy).
   */
  private async rebalanceMoney(workspaceId: string, snapshot: AdmissionSnapshot, plan: RebalancePlan, guardTo?: number): Promise<boolean> {
    const items: TransactItems = [];
    for (const edit of plan.edits) {
      const seen = snapshot.slices[edit.slice];
      if (seen === undefined) continue;
      const s = sliceRebalance(edit, seen, seen.rateCap ?? 0, undefined, edit.slice === plan.target ? guardTo : undefined);
      if (s !== undefined) items.push(update(this.tables.ledger, sliceKey(workspaceId, edit.slice), s));
    }
    if (items.length === 0) return false;
    try {
      await this.db.send(new TransactWriteCommand({ TransactItems: items }));
      this.notePrunes(workspaceId, plan);
      if (guardTo !== undefined) this.noteSlots(this.memoOf(workspaceId), plan.target, undefined, [], guardTo);
      return true;
    } catch (err) {
      if (!isCancelled(err)) throw err;
      return false;
    }
  }

  /** After a rebalance was written: the slots it pruned are gone from what this process knows. */
  private notePrunes(workspaceId: string, plan: RebalancePlan): void {
    const memo = this.memoOf(workspaceId);
    for (const edit of plan.edits) if (edit.prune.length > 0) this.noteSlots(memo, edit.slice, undefined, edit.prune);
  }

  /**
   * Off the first byte's path, now and then per workspace: re-reads slice 0 (the slice count),
   * removes aged-out spend-rate slots from the slice just settled on, so the next admission there
   * needs one round trip, and empties a retired slice into slice 0.
   */
  private async maintain(workspaceId: string, slice: number, now: number): Promise<void> {
    const memo = this.memoOf(workspaceId);
    const retired = slice >= memo.active;
    if (!retired && now - memo.lastMaintained < MAINTAIN_INTERVAL_MS) return;
    memo.lastMaintained = now;
    const snapshot = await this.snapshot(workspaceId, memo, undefined, now);
    if (snapshot.slices.some((s) => s.slice >= snapshot.active && (s.availableMicros > 0 || (s.rateCap !== undefined && s.rateRoom > 0)))) {
      await drainRetired(this.db, this.tables.ledger, workspaceId, snapshot);
      return;
    }
    const seen = snapshot.slices[slice];
    if (seen === undefined || seen.rateCap === undefined) return;
    const { expired } = partitionSlots(seen.slots, now);
    // The guard lap follows the clock, so the slots' seconds stay told apart (see `core/spend-rate.ts`).
    const guardTo = guardTarget(seen, bucketOf(now), expired);
    if (expired.length === 0 && guardTo === undefined) return;
    const prune: SliceEdit = { slice, availableDelta: 0, prune: expired, rateDelta: 0, monthDelta: 0 };
    await this.rebalanceMoney(workspaceId, snapshot, { target: slice, edits: [prune] }, guardTo).catch(() => false);
  }

  /**
   * The settlement's transaction: the request's row (open, it becomes the usage row), the slice
   * (its money, and its month share while the slice holds `month`'s), each tracked window the hold
   * occupies.
   */
  private settleItems(hold: HoldRecord, s: Settlement, amounts: ReturnType<typeof settlementAmounts>, month: number | undefined, release = false): TransactItems {
    const { chargeMicros, uncollectedMicros, releaseMicros, deficitMicros } = amounts;
    const slice = hold.slice ?? 0;
    const items: TransactItems = [
      // The request's row, open with this hold's amount and windows, becomes its usage row
      // (`request-rows.ts`): idempotent, a stale copy of a grown hold cannot release the wrong
      // sum, and one taken before a limit's arming adopted it cannot miss that window. A
      // release turns it `released` under the same conditions.
      release
        ? releaseRowUpdate(this.tables.usage, hold, s.now)
        : settleRowUpdate(this.tables.usage, hold, s, { chargeMicros, uncollectedMicros, ...(this.tables.usageRetentionDays !== undefined ? { retentionDays: this.tables.usageRetentionDays } : {}) }),
    ];
    if (!hold.byok) {
      items.push(update(this.tables.ledger, sliceKey(hold.workspaceId, slice), sliceSettle({ holdMicros: hold.amountMicros, chargeMicros, releaseMicros, deficitMicros, ...(month === undefined ? {} : { month }) })));
      for (const sk of hold.windows) {
        // The month share settles with the slice, above. A key window on key slice j > 0 spends headroom; key slice 0 counts use.
        if (sk.startsWith('MONTH#')) continue;
        const withRoom = sk.startsWith('KEYWIN#') && keySliceOf(slice) !== 0;
        items.push(update(this.tables.ledger, windowKey(hold.workspaceId, slice, sk), windowSettle({ holdMicros: hold.amountMicros, chargeMicros, withRoom })));
      }
    }
    return items;
  }

  async extend(given: HoldRecord, extraMicros: number, limits: AdmissionLimits, now: number): Promise<boolean> {
    return (await this.extendHold(given, extraMicros, limits, now)) === true;
  }

  /**
   * The extension `extend` makes: true when the hold grew; else, when a consistent read showed
   * the workspace cannot cover it, the refusal that read gives (which quantity is short: what a
   * region of a stage with several regions asks the others for); false when it did not grow for
   * another reason (the request settled, nothing could be moved).
   */
  async extendHold(given: HoldRecord, extraMicros: number, limits: AdmissionLimits, now: number): Promise<true | false | Refusal> {
    if (given.byok) return true;
    let hold = given;
    const slice = hold.slice ?? 0;
    const memo = this.memoOf(hold.workspaceId);
    let borrowed = 0;
    let guardResets = 0;
    // The month the hold counts in, while its slice still holds that month's share.
    let month = holdMonth(hold);
    // Conflicts have their own budget: a running stream is cut when its extension fails, and a
    // busy slice (the hold's, which cannot change) is no reason to cut it.
    let conflicts = 0;
    for (let attempt = 0; attempt < 8; attempt += 1) {
      const request = extensionRequest(hold, extraMicros, limits, now);
      const windows = this.holdWindows(hold, request);
      const items: TransactItems = [
        // The hold grows on its open row (`request-rows.ts`), as long as it has the windows this
        // copy knows: a limit's arming may have adopted it since.
        extendRowUpdate(this.tables.usage, hold, extraMicros),
        // An extension is a reservation too, so it counts toward the spend rate; it is not
        // refused by the cap, since cutting a running stream for pace would lose what it made.
        update(
          this.tables.ledger,
          sliceKey(hold.workspaceId, slice),
          sliceDebit({
            slice,
            known: memo.seen.get(slice),
            micros: extraMicros,
            second: bucketOf(now),
            capMicros: limits.spendRateCapMicros,
            roomCheck: false,
            ...(month === undefined ? {} : { month: { month, limitMicros: limits.workspaceLimitMicros, check: true } }),
          }),
        ),
        ...windows.map((w) => update(this.tables.ledger, windowKey(hold.workspaceId, slice, w.sk), windowWrite(w, keySliceOf(slice), extraMicros))),
      ];
      try {
        await this.db.send(new TransactWriteCommand({ TransactItems: items }));
        this.noteSlots(memo, slice, { second: bucketOf(now), micros: extraMicros });
        return true;
      } catch (err) {
        if (!isCancelled(err)) throw err;
        if (onlyConflicts(err)) {
          this.onConflict();
          if (conflicts >= MAX_ATTEMPTS) throw new LedgerContentionError('the hold extension did not settle after repeated conflicts');
          await pause(conflicts);
          conflicts += 1;
          attempt -= 1; // not one of the eight: only refusals and moves count there
          continue;
        }
        if (failed(err, 0)) {
          const stored = reasonItem(err, 0);
          if (!isOpenRow(stored)) return false; // the request is settled (or swept)
          // Adopted by a limit's arming: extend onto its windows as stored.
          hold = { ...hold, ...(Array.isArray(stored?.windows) ? { windows: stored?.windows as string[] } : {}) };
          continue;
        }
        if (this.learnArmed(hold.workspaceId, windows, err, 2)) continue;
        if (failed(err, 1)) {
          const item = reasonItem(err, 1);
          if (month !== undefined && item !== undefined && item.mo !== month) {
            // The month the hold counted in is over (its share started over): the extension counts in no month.
            month = undefined;
            continue;
          }
          const before = memo.seen.get(slice);
          this.learn(memo, slice, item, monthNumber(now));
          const seen = memo.seen.get(slice);
          if (seen !== undefined && !guardAdmits(seen.rateGuard, bucketOf(now)) && guardResets < 3) {
            guardResets += 1;
            await this.resetGuard(hold.workspaceId, seen, request);
            continue;
          }
          // Only the spend-rate slot was stale: write again over what came back.
          if (seen !== undefined && seen.availableMicros >= extraMicros && JSON.stringify(before?.slots) !== JSON.stringify(seen.slots)) continue;
        }
        // The hold's slice, its month share or its key slice's window share is short. Like an
        // admission, an extension is refused only when a consistent read of every slice shows
        // the whole cannot cover; otherwise headroom is borrowed from the other slices.
        if (borrowed < 3) {
          borrowed += 1;
          const borrowedNow = await this.borrowForExtension(hold, extraMicros, limits, now);
          if (borrowedNow === true) continue;
          if (borrowedNow !== false) return borrowedNow;
        }
        return false;
      }
    }
    return false;
  }

  /**
   * A hold's key window and member month as an extension writes them: under the limit given now
   * (armed or not) when the window is the one the limits name, else counted only (the hold's
   * window has ended, or its limit has gone).
   */
  private holdWindows(hold: HoldRecord, request: AdmitRequest): WindowSpec[] {
    const current = this.windowSpecs(request);
    return hold.windows
      .filter((sk) => !sk.startsWith('MONTH#'))
      .map((sk) => current.find((w) => w.sk === sk) ?? { sk, kind: sk.startsWith('KEYWIN#') ? 'key' : 'member', limitMicros: undefined, unarmed: false, ttl: undefined });
  }

  /**
   * Moves credit, month headroom and key-window headroom into a running hold's slice and key slice
   * so it can grow by `extraMicros`: true when something moved; the refusal when a consistent read
   * of every slice shows the workspace (its balance, its month, the key's or member's window)
   * cannot cover it; false when nothing could be moved. The request rate and the spend-rate cap do
   * not bound an extension.
   */
  private async borrowForExtension(hold: HoldRecord, extraMicros: number, limits: AdmissionLimits, now: number): Promise<boolean | Refusal> {
    const slice = hold.slice ?? 0;
    const request = extensionRequest(hold, extraMicros, limits, now);
    const memo = this.memoOf(hold.workspaceId);
    const enforced = (): AdmissionLimits => ({ ...this.enforced(request), keyRatePerMinute: Number.MAX_SAFE_INTEGER, spendRateCapMicros: Number.MAX_SAFE_INTEGER });
    const ask = (): AdmissionAsk => ({ needMicros: extraMicros, limits: enforced(), byok: false, hasMember: hold.memberId !== undefined, now });
    let snapshot = await this.snapshot(hold.workspaceId, memo, request);
    if (refusalFor(snapshot, ask()) !== undefined) {
      // As for an admission: refused only on a consistent read of every slice (one slice: its items).
      if (snapshot.slices.length > 1) snapshot = await this.snapshot(hold.workspaceId, memo, request, undefined, 'whole');
      const refusal = refusalFor(snapshot, ask());
      if (refusal !== undefined) return refusal;
    }
    // Money and month headroom only: the spend-rate headroom stays where it is.
    const plan = planRebalance(snapshot, slice, { ...ask(), limits });
    const edits = plan.edits.map((e) => ({ slice: e.slice, availableDelta: e.availableDelta, prune: [], rateDelta: 0, monthDelta: e.monthDelta, ...(e.monthSet !== undefined ? { monthSet: e.monthSet } : {}) }));
    const moved = edits.some((e) => e.availableDelta !== 0 || e.monthDelta !== 0 || e.monthSet !== undefined) && (await this.rebalance(hold.workspaceId, snapshot, { target: slice, edits }, limits, monthNumber(now)));
    const lent = await this.rebalanceKey(request, snapshot, keySliceOf(slice), { counter: false });
    return moved || lent;
  }

  async countRequest(workspaceId: string, keyId: string, ratePerMinute: number, now: number, rateWindow?: string): Promise<{ readonly retryAfterSeconds?: number }> {
    const sk = windowKeys.rate(keyId, now);
    const ttl = Math.floor(now / 1000) + 180;
    const minute = minuteOf(now);
    // Key slice 0's count: its counter, or the key window the minute counts on (the count alone, no money).
    const home = { pk: keyPk(workspaceId, keyId), sk: rateWindow ?? sk };
    const countHome = async (reset = false): Promise<void> => {
      const built = rateWindow === undefined ? requestCount(ratePerMinute, ttl) : windowCount({ minute, rate: ratePerMinute, ...(reset ? { reset } : {}) }, countWindowTtl(rateWindow, now));
      await this.db.send(new UpdateCommand({ TableName: this.tables.ledger, Key: home, ...built }));
    };
    try {
      await countHome();
      return {};
    } catch (err) {
      if (!isConditionFailure(err) && !isWriteConflict(err)) throw err;
    }
    // Key slice 0 is spent, but what it lent may be unspent on the key's other slices: count the
    // request there, or refuse only when a consistent read of every key slice shows the minute full.
    // (Or its count slot came round holding an earlier minute's figure: the minute starts over there.)
    const spec: KeyShareSpec = { kind: 'rate', sk, ratePerMinute, minute, ttl, ...(rateWindow !== undefined ? { rateWindow } : {}) };
    for (let attempt = 0; attempt < 8; attempt += 1) {
      const { shares, items: got } = await this.readKeyShares(workspaceId, keyId, spec);
      if (keyTotals(shares).used >= ratePerMinute) return { retryAfterSeconds: Math.max(1, Math.ceil((60_000 - (now % 60_000)) / 1000)) };
      const lent = shares.find((x) => x.slice !== 0 && x.tag === ratePerMinute && x.room >= 1);
      try {
        if (lent !== undefined) {
          await this.db.send(new UpdateCommand({ TableName: this.tables.ledger, Key: { pk: keySlicePk(workspaceId, keyId, lent.slice), sk }, ...keyCounterDebit(ratePerMinute, ttl) }));
          return {};
        }
        // Headroom lent under another rate: take it back to slice 0, then count there.
        const items = this.keyShareMoves(workspaceId, keyId, spec, shares, got, planKeyRebalance(shares, 0, 1, ratePerMinute, KEY_SLICE_READ));
        if (items.length > 0) await this.db.send(new TransactWriteCommand({ TransactItems: items }));
        await countHome(rateWindow !== undefined && staleCount(got[0], minute) !== undefined);
        return {};
      } catch (err) {
        if (!isConditionFailure(err) && !isCancelled(err) && !isWriteConflict(err)) throw err;
        await pause(attempt);
      }
    }
    throw new LedgerContentionError('the key request count did not settle after repeated conflicts');
  }

  /** Where each key slice keeps a key's share of a quantity (key slice 0's: the minute's key window item, when the minute counts there). */
  private keyShareKeys(workspaceId: string, keyId: string, spec: KeyShareSpec): { pk: string; sk: string }[] {
    const home = spec.kind === 'rate' ? (spec.rateWindow ?? spec.sk) : spec.sk;
    return Array.from({ length: KEY_SLICE_READ }, (_, k) => ({ pk: keySlicePk(workspaceId, keyId, k), sk: k === 0 ? home : spec.sk }));
  }

  /**
   * A key's shares of a quantity on every key slice, read consistently (one TransactGetItems): its
   * key window's money, or its minute of requests. Key slice 0's `used` counts what it lent the
   * others; `keyTotals` gives the key's real use.
   */
  async readKeyShares(workspaceId: string, keyId: string, spec: KeyShareSpec): Promise<{ shares: KeyShareView[]; items: (Item | undefined)[] }> {
    const items = await this.readConsistently(this.keyShareKeys(workspaceId, keyId, spec), KEY_SLICE_READ);
    const shares = items.map((item, k) =>
      spec.kind === 'window' ? keyShareView(k, item, KEY_WINDOW_NAMES) : k === 0 && spec.rateWindow !== undefined ? minuteShareView(item, spec.minute, spec.ratePerMinute) : keyShareView(k, item, COUNTER_NAMES),
    );
    return { shares, items };
  }

  /** The writes of a key rebalance's edits on the key slices read (`shares`, `items`), each conditioned as `keyShareRebalance` (or, for key slice 0's minute on a window item, `minuteShareRebalance`) says. */
  private keyShareMoves(workspaceId: string, keyId: string, spec: KeyShareSpec, shares: readonly KeyShareView[], items: readonly (Item | undefined)[], edits: readonly KeyShareEdit[]): TransactItems {
    const keys = this.keyShareKeys(workspaceId, keyId, spec);
    const limit = spec.kind === 'window' ? spec.limitMicros : spec.ratePerMinute;
    const out: TransactItems = [];
    for (const edit of edits) {
      const seen = shares[edit.slice];
      const key = keys[edit.slice];
      if (seen === undefined || key === undefined) continue;
      const built =
        spec.kind === 'rate' && edit.slice === 0 && spec.rateWindow !== undefined
          ? minuteShareRebalance(edit, items[0], spec.minute, limit)
          : keyShareRebalance(edit, seen, spec.kind === 'window' ? KEY_WINDOW_NAMES : COUNTER_NAMES, limit, spec.ttl);
      if (built !== undefined) out.push(update(this.tables.ledger, key, built));
    }
    return out;
  }

  /**
   * Takes back onto key slice 0 what it lent the key's other key slices of a quantity and they have
   * not spent, so key slice 0 holds `want` of its own room if the key's share has it (with a fair
   * share of what is left, as `planKeyRebalance` plans it): before a region gives the key's
   * headroom to another region (a give is counted on key slice 0 alone). One transaction on this
   * region's own items, each move conditioned on what was read; a cancelled one is left (an
   * admission moved the figures: the give then takes what key slice 0 has).
   */
  async reclaimKeyShares(workspaceId: string, keyId: string, spec: KeyShareSpec, want: number): Promise<void> {
    const { shares, items } = await this.readKeyShares(workspaceId, keyId, spec);
    const limit = spec.kind === 'window' ? spec.limitMicros : spec.ratePerMinute;
    const moves = this.keyShareMoves(workspaceId, keyId, spec, shares, items, planKeyRebalance(shares, 0, want, limit, KEY_SLICE_READ));
    if (moves.length === 0) return;
    try {
      await this.db.send(new TransactWriteCommand({ TransactItems: moves }));
    } catch (err) {
      if (!isConditionFailure(err) && !isCancelled(err) && !isWriteConflict(err)) throw err;
    }
  }

  /** A consistent snapshot of a workspace's slices, and what this process learns from it. */
  async readSlices(workspaceId: string, now: number = Date.now()): Promise<AdmissionSnapshot> {
    return this.snapshot(workspaceId, this.memoOf(workspaceId), undefined, now, 'whole');
  }

  /** Forgets what this process learned of a workspace's slices (an operator changed the count). */
  forget(workspaceId: string): void {
    this.memo.delete(workspaceId);
  }
}

/**
 * Sets a workspace's slice count to `to`, conditioned on it still being `from` (undefined: any).
 * `floor`, when given, records the operator's setting: automatic growth never goes below it.
 */
export async function writeSliceCount(db: DocumentSender, ledgerTable: string, workspaceId: string, from: number | undefined, to: number, floor: number | undefined): Promise<boolean> {
  if (!Number.isSafeInteger(to) || to < 1 || to > MAX_SLICES) throw new RangeError(`slice count must be 1..${MAX_SLICES}`);
  const got = await db.send(new GetCommand({ TableName: ledgerTable, Key: sliceKey(workspaceId, 0), ConsistentRead: true }));
  if (got.Item === undefined) throw new Error('workspace ledger not found');
  const current = num(got.Item.sliceCount) || 1;
  const high = Math.max(num(got.Item.sliceHigh) || 1, current, to);
  if (from !== undefined && current !== from) return false;
  const fromFloor = num(got.Item.sliceFloor) || 1;
  const target = floor === undefined ? Math.max(to, fromFloor) : to;
  try {
    await db.send(
      new UpdateCommand({
        TableName: ledgerTable,
        Key: sliceKey(workspaceId, 0),
        // sliceChangedAt: shrinking waits a while after any change (hysteresis, `core/slice-shrink.ts`).
        UpdateExpression: `SET sliceCount = :to, sliceHigh = :high, sliceChangedAt = :at${floor === undefined ? '' : ', sliceFloor = :floor'}`,
        // Pinned to what was read, so two writers cannot lose each other's change or lower `sliceHigh`.
        ConditionExpression: current === 1 && got.Item.sliceCount === undefined ? 'attribute_not_exists(sliceCount)' : 'sliceCount = :from',
        ExpressionAttributeValues: {
          ':to': target,
          ':high': high,
          ':at': Date.now(),
          ...(floor === undefined ? {} : { ':floor': floor }),
          ...(current === 1 && got.Item.sliceCount === undefined ? {} : { ':from': current }),
        },
      }),
    );
    return true;
  } catch (err) {
    if (isConditionFailure(err)) return false;
    throw err;
  }
}

/**
 * {@link writeSliceCount} from `from` to `to` as the process's own decision (growth, shrinking).
 * Slice 0 of a busy workspace is in a transaction most of the time: a plain write to it meets
 * `TransactionConflictException` (or, locally, a lock timeout), so the change is tried a few times.
 */
async function changeSliceCount(db: DocumentSender, ledgerTable: string, workspaceId: string, from: number, to: number): Promise<boolean> {
  for (let attempt = 0; ; attempt += 1) {
    try {
      return await writeSliceCount(db, ledgerTable, workspaceId, from, to, undefined);
    } catch (err) {
      if (attempt >= 8) throw err;
      await pause(attempt);
    }
  }
}

/**
 * Empties every retired slice (number >= the active count) into slice 0: its available credit,
 * its spend-rate headroom and its month share's headroom, each conditioned on what was read.
 * Holds still open on a retired slice settle there and are emptied the next time.
 */
export async function drainRetired(db: DocumentSender, ledgerTable: string, workspaceId: string, snapshot: AdmissionSnapshot): Promise<boolean> {
  const items: TransactItems = [];
  let money = 0;
  let rate = 0;
  for (const s of snapshot.slices) {
    if (s.slice < snapshot.active) continue;
    const built = sliceRebalance({ slice: s.slice, availableDelta: -s.availableMicros, prune: [], rateDelta: s.rateCap === undefined ? 0 : -s.rateRoom, monthDelta: 0 }, s, s.rateCap ?? 0);
    if (built !== undefined && s.rateCap !== undefined && s.rateRoom < 0) continue; // owes headroom: leave it until its reservations age out
    if (built === undefined) continue;
    items.push(update(ledgerTable, sliceKey(workspaceId, s.slice), built));
    money += s.availableMicros;
    if (s.rateCap !== undefined) rate += s.rateRoom;
  }
  const zero = snapshot.slices[0];
  if (items.length === 0 || zero === undefined) return true;
  const cap = snapshot.slices.find((s) => s.slice >= snapshot.active && s.rateCap !== undefined)?.rateCap ?? zero.rateCap ?? 0;
  const into = sliceRebalance({ slice: 0, availableDelta: money, prune: [], rateDelta: rate, monthDelta: 0 }, zero, cap);
  if (into !== undefined) items.push(update(ledgerTable, sliceKey(workspaceId, 0), into));
  try {
    await db.send(new TransactWriteCommand({ TransactItems: items }));
    return true;
  } catch (err) {
    if (!isCancelled(err)) throw err;
    return false; // the state moved under us; the caller reads again
  }
}

/**
 * Shrinks a workspace's slices from `from` to `to` (never below the operator's floor), unless
 * another writer changed the count first, then empties the retired slices into slice 0, each
 * move conditioned on what was read, so no unit is lost however many admissions and settlements
 * run meanwhile. A retired slice still holding a hold, or owing spend-rate headroom, is emptied
 * by the settlement that lands there (see `maintain`). True when the count was changed.
 */
export async function consolidateSlices(db: DocumentSender, tables: LedgerTables, workspaceId: string, from: number, to: number): Promise<boolean> {
  if (!(await changeSliceCount(db, tables.ledger, workspaceId, from, to))) return false;
  const reader = new DynamoLedger(db, tables);
  for (let attempt = 0; attempt < 20; attempt += 1) {
    const snapshot = await reader.readSlices(workspaceId);
    if (!snapshot.slices.some((s) => s.slice >= snapshot.active && (s.availableMicros > 0 || (s.rateCap !== undefined && s.rateRoom > 0)))) break;
    // Moved all it could: what is left owes headroom or holds, and the settlement there moves it on.
    if (await drainRetired(db, tables.ledger, workspaceId, snapshot)) break;
    await pause(attempt);
  }
  return true;
}

export { BALANCE_SK };
