/**
 * The ledger of one region of a stage with several (docs/regions.md). It admits exactly as the
 * one-region ledger does, in one transaction, on the region's own items only (the ledger runs
 * through the region's {@link RegionLens}), under the region's share of every limit:
 *
 * - each limit `L` (the key's credit limit, the member's and the workspace's month, the spend-rate
 *   cap, the key's request rate) is `regionShare(L)` here, derived with no write;
 * - a key limit's and a member month limit's share grow by what other regions have transferred to
 *   this region under them (`core/transfers.ts`): what this region received is counted as used
 *   less, and what it gave as used, on its key window (key slice 0) or its member month; the
 *   workspace month's likewise on its slice 0 month share (room and used, `mr` and `mu`);
 * - credit is what this region's slices hold: a top-up lands in the slices of the region whose
 *   management API wrote it; transfers move it.
 *
 * A request the region's share cannot cover is refused only when the other regions' figures (as
 * replicated here: read to decide whether to ask, never spent) could not cover it either and each
 * of them last answered this region with nothing left (`othersSaidNone`); what a region counted
 * lost holds is stranded, not used up, so a shortfall only it could cover is a 503 to retry;
 * otherwise the region asks urgently for the shortfall (one write to its own transfer item, which
 * reaches the others by replication and their transfer agents), waits a bounded time, crediting
 * what arrives itself, and admits or refuses. No cross-region call is ever made.
 */
import type { DocumentSender } from '../adapters/dynamo-wire';
import { peerCounters, quantityId, type PeerCounters, type Quantity } from '../core/transfers';
import { monthId, windowEnd, windowKeys } from '../core/windows';
import type { AdmissionLimits, AdmitOutcome, AdmitRequest, Ledger, Refusal, Settlement } from '../gateway/ports';
import type { HoldRecord } from '../shared/records';
import { DynamoLedger, type LedgerTables } from './ledger';
import { peerMarks, staleMark } from './regions-alive';
import { RegionTransfers } from './regions-transfers';
import { peersOf, regionShare, regionTag, type RegionSetup } from './regions';
import { rowStart } from './request-rows';

/** How long concurrent shortfalls of one quantity are gathered into one ask, milliseconds. */
const GATHER_MS = 20;
/** Pause between reads of the other regions' answers while waiting, milliseconds. */
const POLL_MS = 40;
/** After this long without an answer to an ask, a region is treated as lost by this process (its share stranded) until it answers: the default. */
const SILENT_MS = 30_000;
/** How long a process keeps the other regions' alive marks it read before reading them again (only on a shortfall), milliseconds. */
const MARKS_TTL_MS = 10_000;
/** A refusal for money that is in another region and has not arrived: `503 balance_unavailable`, retry in a second. */
const IN_TRANSIT: Refusal = { kind: 'in_transit', retryAfterSeconds: 1 };
/** A minute's request-rate transfer items are kept this long past the minute (a counter is kept 3 minutes). */
const RATE_RETENTION_S = 600;
/** Windows are kept this long past their end (as the ledger keeps key windows). */
const RETENTION_S = 400 * 86_400;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** What a region's limits are derived from: a request, or a running hold's extension. */
type LimitSubject = Pick<AdmitRequest, 'holdId' | 'keyId' | 'workspaceId' | 'now' | 'byok' | 'limits'>;

/** Shortfalls of one quantity gathered into one ask. */
interface AskBatch {
  micros: number;
  sent: boolean;
  done?: Promise<AskEnd>;
}

/** How an ask ended: answered in full; with less while a giver still had some (it could not gather it in time); with less and nothing left anywhere asked; or not answered by the deadline. */
type AskEnd = 'full' | 'partial' | 'short' | 'unanswered';

/** What a region is short of: a quantity, how much, and how long its transfer item is kept. */
type Short = { readonly q: Quantity; readonly micros: number; readonly ttl: number | undefined };

/** Why nothing was asked (`askFor`): the others' figures and answers say none could help, or only regions counted lost could. */
type Unasked = 'none' | 'stranded';

/**
 * Another region as this replica shows it: what it could give by its replicated figures, and its
 * counters towards this region and what this region asked of it; or, counted lost by this process,
 * only its figures (what its share holds, stranded there: never asked for, never spent here).
 */
interface PeerView {
  readonly spare: number;
  readonly said?: PeerCounters;
  readonly asked?: number;
  readonly lost?: boolean;
}

/**
 * Whether the others' figures may refuse a request at once: together they could not cover
 * `micros`, and every other region is counted lost by this process (no answers in its view) or has
 * answered every ask of this region's under the quantity, the last with nothing left. Replicated
 * figures alone are not enough: a transaction replicates item by item (a give's slice debit can
 * arrive before the transfer item that sends it here, a move between slices its source before its
 * target) and a top-up may not have arrived, so a zero read there is no evidence until the region
 * itself has said so; until then the region is asked, and its answer (from its own figures)
 * decides. What a region frees after saying so shows in its figures within the replication lag, and
 * is asked for again.
 */
function othersSaidNone(views: Readonly<Record<string, PeerView>>, micros: number): boolean {
  const live = Object.values(views).filter((v) => v.lost !== true);
  if (live.reduce((a, v) => a + v.spare, 0) >= micros) return false;
  return live.every(({ said, asked }) => said === undefined || (said.answered > 0 && said.answered >= (asked ?? 0) && said.left === 0));
}

/** What each other region could give now, from its view (a region counted lost: nothing). */
function sparesOf(views: Readonly<Record<string, PeerView>>): Record<string, number> {
  return Object.fromEntries(Object.entries(views).map(([peer, v]) => [peer, v.lost === true ? 0 : v.spare]));
}

/** What every other region holds spare by its figures here, a region counted lost included (its share is stranded, not gone). */
function spareEverywhere(views: Readonly<Record<string, PeerView>>): number {
  return Object.values(views).reduce((a, v) => a + v.spare, 0);
}

/**
 * The refusals that say the workspace's money or a limit is used up (a 402): given only when it
 * is, never while a region counted lost holds what would cover it. The rate limits' 429 already
 * tells a client to retry, and their share in a lost region is documented as stranded (the key
 * or the workspace runs at the live regions' part of its rate until it returns).
 */
const USED_UP: ReadonlySet<Refusal['kind']> = new Set(['insufficient_credit', 'key_limit_exceeded', 'member_limit_exceeded', 'workspace_limit_exceeded']);

/** The request-rate quantity of a key's minute starting `start` under the whole rate (the tag both regions count its moves under), counted on `rateWindow` when given; kept a few minutes. */
function rateQuantityOf(keyId: string, start: number, ratePerMinute: number, rateWindow: string | undefined): { q: Quantity; ttl: number | undefined } {
  const place = rateWindow === undefined ? {} : { rateWindow };
  return { q: { kind: 'rate', keyId, windowSk: windowKeys.rate(keyId, start), ratePerMinute, ...place }, ttl: Math.floor(start / 60_000) * 60 + 60 + RATE_RETENTION_S };
}

/** The region's ledger: the port the gateway, the sweeper and the transfer agent use in a stage with several regions. */
export class RegionalLedger implements Ledger {
  /** The one-region ledger on this region's own items. */
  readonly inner: DynamoLedger;
  readonly transfers: RegionTransfers;
  private readonly batches = new Map<string, AskBatch>();
  /** Peers whose answer to an ask of this process's did not come within a wait, and since when (cleared by their next answer). */
  private readonly silent = new Map<string, number>();
  /** The other regions' alive marks as this process last read them, and when (`regions-alive.ts`). */
  private marks: { readonly readAt: number; readonly of: ReadonlyMap<string, unknown> } = { readAt: Number.NEGATIVE_INFINITY, of: new Map() };
  private readonly readMarks: () => Promise<Map<string, unknown>>;

  constructor(
    /** This region's database (its replica of every table), unlensed. */
    raw: DocumentSender,
    tables: LedgerTables,
    readonly setup: RegionSetup,
    onConflict?: () => void,
    /** How long a region may leave an ask unanswered before this process counts it lost. @default 30 s */
    private readonly silentMs: number = SILENT_MS,
  ) {
    this.transfers = new RegionTransfers(raw, tables, setup, onConflict);
    this.inner = this.transfers.ledger;
    this.readMarks = () => peerMarks(raw, tables.ledger, setup);
  }

  private share(total: number): number {
    return regionShare(this.setup, total);
  }

  /** The member-month-limit quantity a request counts in, with its month's expiry; undefined without a member or its limit (or for BYOK, which counts in no window). */
  private memberQuantity(request: LimitSubject & Pick<AdmitRequest, 'memberId'>): { q: Quantity; ttl: number | undefined } | undefined {
    const { limits } = request;
    if (request.memberId === undefined || limits.memberLimitMicros === undefined || request.byok) return undefined;
    const start = rowStart(request.holdId, request.now);
    const windowSk = windowKeys.member(request.memberId, start, limits.memberMonthGeneration);
    const end = windowEnd('monthly', start);
    return { q: { kind: 'member', memberId: request.memberId, windowSk, limitMicros: limits.memberLimitMicros }, ttl: end === undefined ? undefined : Math.floor(end / 1000) + RETENTION_S };
  }

  /** The workspace-month-limit quantity a request counts in (its month: the one the ledger debits), with the month's expiry; undefined without the limit, or for BYOK. */
  private monthQuantity(request: LimitSubject): { q: Quantity; ttl: number | undefined } | undefined {
    const { limits } = request;
    if (limits.workspaceLimitMicros === undefined || request.byok) return undefined;
    const end = windowEnd('monthly', request.now);
    return { q: { kind: 'month', month: monthId(request.now), limitMicros: limits.workspaceLimitMicros }, ttl: end === undefined ? undefined : Math.floor(end / 1000) + RETENTION_S };
  }

  /** The key-limit quantity a request counts in, with its window's expiry; undefined without a key limit. */
  private keyQuantity(request: LimitSubject): { q: Quantity; ttl: number | undefined } | undefined {
    const { limits } = request;
    if (limits.keyLimitMicros === undefined || request.byok) return undefined;
    const start = rowStart(request.holdId, request.now);
    const windowSk = windowKeys.key(request.keyId, limits.keyWindow, start, limits.keyWindowGeneration);
    const end = windowEnd(limits.keyWindow, start);
    return { q: { kind: 'key', keyId: request.keyId, windowSk, limitMicros: limits.keyLimitMicros }, ttl: end === undefined ? undefined : Math.floor(end / 1000) + RETENTION_S };
  }

  /**
   * The request-rate quantity a request counts in (its key, its minute, the rate), with a few
   * minutes' expiry; when its minute counts on a key window's item (`keyRateWindow`: a key whose
   * credit limit is tracked), that window is where the moves go (its count and bound slots).
   */
  private rateQuantity(request: LimitSubject): { q: Quantity; ttl: number | undefined } {
    return rateQuantityOf(request.keyId, rowStart(request.holdId, request.now), request.limits.keyRatePerMinute, request.limits.keyRateWindow);
  }

  private batchId(workspaceId: string, q: Quantity): string {
    return `${workspaceId}\u0000${quantityId(q)}`;
  }

  /**
   * This region's share of every limit. A limit set on a window nobody tracked is armed by the
   * management API in the home region (`store/limit-arming.ts`: the window's base, what was charged
   * before tracking began, and its `armed` mark go on the home region's items, which no other
   * region writes), and the home region counts without refusing until the mark, as one region
   * does. Another region cannot see the mark before it replicates, and counting without refusing
   * until then would let it admit past its share; it enforces its share from the start instead,
   * against its own count since tracking began (the base sits on the home region's share), so the
   * sum stays within the limit but for what the home region counted before its mark.
   * A key limit's share is fixed: headroom moved here lowers
   * the region's key window's `used`, and headroom it gave raises it, so the limit the ledger
   * checks (and tags its key slices' lending with) never changes under a transfer.
   */
  limitsFor(request: LimitSubject): AdmissionLimits {
    const l = request.limits;
    // Outside the home region a limit being armed is enforced at once on the region's share (below).
    const away = regionTag(this.setup) !== '';
    return {
      ...l,
      ...(away && l.keyLimitArming === true ? { keyLimitArming: false } : {}),
      ...(away && l.memberLimitArming === true ? { memberLimitArming: false } : {}),
      keyRatePerMinute: this.share(l.keyRatePerMinute),
      spendRateCapMicros: this.share(l.spendRateCapMicros),
      spendRateCapStageMicros: l.spendRateCapMicros,
      ...(l.keyLimitMicros !== undefined ? { keyLimitMicros: this.share(l.keyLimitMicros) } : {}),
      ...(l.memberLimitMicros !== undefined ? { memberLimitMicros: this.share(l.memberLimitMicros) } : {}),
      ...(l.workspaceLimitMicros !== undefined ? { workspaceLimitMicros: this.share(l.workspaceLimitMicros) } : {}),
    };
  }

  /**
   * Admits in this region; when its share is short and the others' figures say they could cover
   * it, asks and waits (the module comment). A wait that ends with an ask unanswered refuses
   * `in_transit` (`503 balance_unavailable`, retry): the workspace can cover the request, the money
   * has not arrived; so does, at once, a shortfall that only a region counted lost could cover (its
   * share is stranded there, not used up); one answered with less than asked refuses with the
   * limit's own 402.
   */
  async admit(request: AdmitRequest): Promise<AdmitOutcome> {
    const attempt = (): Promise<AdmitOutcome> => this.inner.admit({ ...request, limits: this.limitsFor(request) });
    const shortOf = (o: AdmitOutcome): Short | undefined => (o.admitted ? undefined : this.shortOf(request, o.refusal));
    const first = await attempt();
    // Without a transfer wait a stage refuses on its own share, as it always did (nothing widened).
    if (first.admitted || this.setup.transferWaitMs === 0) return first;
    const { last, end } = await this.withAsks(request.workspaceId, first, shortOf, attempt);
    if (last.admitted) return last;
    const refused = (refusal: Refusal): AdmitOutcome => ({ admitted: false, refusal });
    // Reading the others' figures or asking failed (a store fault): whether they could cover it is
    // unknown, so not a 402 but a retry (nothing was admitted).
    if (end === 'fault') return refused(IN_TRANSIT);
    // When what a region counted lost holds would cover it, the workspace is not out of money or
    // limit: it is out of reach until that region answers again (or a top-up lands here), so a
    // 503 to retry, at once (the lost region is not asked, nothing waits), never a 402.
    if (end === 'stranded' && USED_UP.has(last.refusal.kind)) return refused(IN_TRANSIT);
    // Not answered, or answered and what came went to this region's other requests (or a giver
    // still had some) until the wait ran out: the money is there but not here.
    if (end === 'unanswered' || ((end === 'full' || end === 'partial') && shortOf(last) !== undefined)) return refused(IN_TRANSIT);
    // Nothing another region could move, none of them could cover it, or one answered with less
    // and nothing left: the limit's own refusal, with workspace-wide figures.
    return refused(await this.widen(request, last.refusal));
  }

  /**
   * Tries an operation on this region's share (`first` is its first try) and, while `shortOf`
   * says what a failed try is short of, asks the other regions for it (`askFor`) and tries again
   * (`retry`), until one succeeds, nothing more can come (nothing another region could move; the
   * others could not cover it; one answered with less and nothing left; an ask went unanswered),
   * or the transfer wait runs out. Resolves to the last try and how the last ask ended (`fault`:
   * a store fault while asking; none when nothing was asked). Shared by an admission, a stream's
   * extension and the door's count, so each asks and gives up the same way.
   */
  private async withAsks<T>(workspaceId: string, first: T, shortOf: (t: T) => Short | undefined, retry: () => Promise<T>): Promise<{ last: T; end?: AskEnd | Unasked | 'fault' }> {
    let last = first;
    let short = shortOf(last);
    if (short === undefined || this.setup.transferWaitMs === 0) return { last };
    const deadline = Date.now() + this.setup.transferWaitMs;
    for (;;) {
      let end: AskEnd | Unasked;
      try {
        end = await this.askFor(workspaceId, short, deadline);
      } catch {
        return { last, end: 'fault' };
      }
      if (end === 'none' || end === 'stranded') return { last, end };
      last = await retry();
      short = shortOf(last);
      if (short === undefined || end === 'short' || end === 'unanswered' || Date.now() >= deadline) return { last, end };
    }
  }

  /**
   * Asks the other regions for what this region is `short` of, and waits for their answers up to
   * `deadline`; or asks nothing when their figures say it is no use: `none`, refused at once (the
   * others could not cover it, and each last answered this region with nothing left, or is
   * counted lost), or `stranded`, the same but what the regions counted lost hold (as last
   * replicated) would cover it. Rejects on a store fault.
   */
  private async askFor(workspaceId: string, short: Short, deadline: number): Promise<AskEnd | Unasked> {
    const views = await this.peerViews(workspaceId, short.q);
    if (othersSaidNone(views, short.micros)) return spareEverywhere(views) >= short.micros ? 'stranded' : 'none';
    return this.obtain(workspaceId, short.q, short.micros, short.ttl, sparesOf(views), deadline);
  }

  /** What a refusal says this region is short of, when another region could move it here. */
  private shortOf(request: LimitSubject & Pick<AdmitRequest, 'amountMicros' | 'memberId'>, refusal: Refusal): Short | undefined {
    if (refusal.kind === 'rate_limit_exceeded') {
      // One request of the key's minute (an answer brings more when this region is below its
      // part of what both have spare, so the key's next requests here do not ask again).
      return { ...this.rateQuantity(request), micros: 1 };
    }
    if (refusal.kind === 'insufficient_credit') return { q: { kind: 'credit' }, micros: Math.max(1, request.amountMicros - refusal.availableMicros), ttl: undefined };
    if (refusal.kind === 'key_limit_exceeded') {
      // The request's whole amount: what the key's window has counted here includes what was
      // given and received, which the refusal's settled and held do not show. An answer brings
      // more than the ask anyway when this region is below its part of what is spare.
      const key = this.keyQuantity(request);
      return key === undefined ? undefined : { ...key, micros: Math.max(1, request.amountMicros) };
    }
    if (refusal.kind === 'member_limit_exceeded') {
      // Likewise the whole amount: the member's month here counts what was given and received.
      const member = this.memberQuantity(request);
      return member === undefined ? undefined : { ...member, micros: Math.max(1, request.amountMicros) };
    }
    if (refusal.kind === 'spend_rate_exceeded' && !request.byok) {
      // The request's whole amount, under the whole cap (the tag both regions count the cap's
      // transfers under): this region's headroom counts what it gave and received.
      return { q: { kind: 'spend', capMicros: request.limits.spendRateCapMicros }, micros: Math.max(1, request.amountMicros), ttl: undefined };
    }
    if (refusal.kind === 'workspace_limit_exceeded') {
      // Likewise: the month's used here counts what was given and received.
      const month = this.monthQuantity(request);
      return month === undefined ? undefined : { ...month, micros: Math.max(1, request.amountMicros) };
    }
    return undefined;
  }

  /**
   * What the other regions hold spare of a quantity in all, by their figures as replicated here
   * (possibly stale), a region counted lost included (its share is stranded there, not gone): the
   * workspace-wide figure a refusal shows. What may be asked of them is `sparesOf` their views.
   */
  private async peerSpare(workspaceId: string, q: Quantity): Promise<number> {
    return spareEverywhere(await this.peerViews(workspaceId, q));
  }

  /**
   * Each other region as this replica shows it (`peerSpare`'s figures), with its answers to this
   * region; a region counted lost by this process shows its figures only (`lost`): by its old
   * alive mark until a fresh one arrives, by its silence until it has answered everything this
   * region asked of it under `q` (then it is heard from again).
   */
  private async peerViews(workspaceId: string, q: Quantity): Promise<Record<string, PeerView>> {
    await this.refreshMarks();
    const out: Record<string, PeerView> = {};
    await Promise.all(
      peersOf(this.setup).map(async (peer) => {
        const view = await this.transfers.peerView(workspaceId, q, peer);
        if (this.lost(peer)) {
          // Lost by its mark until a fresh one arrives; by silence until it has answered.
          if (staleMark(this.marks.of, peer, Date.now()) || view.said.answered < view.asked) {
            out[peer] = { spare: view.spare, lost: true };
            return;
          }
          this.silent.delete(peer);
        }
        out[peer] = view;
      }),
    );
    return out;
  }

  /**
   * Whether this process counts `peer` as lost: its alive mark, as this replica last showed it, is
   * too old (its sweeper has not run, or its writes have not reached here, for minutes: every
   * process of this region judges alike, a new one included) until a fresh mark arrives, or it
   * left an ask of this process's unanswered for `silentMs` until it has answered everything asked
   * of it under the quantity in question (`peerViews`).
   */
  private lost(peer: string): boolean {
    const since = this.silent.get(peer);
    if (since !== undefined && Date.now() - since >= this.silentMs) return true;
    return staleMark(this.marks.of, peer, Date.now());
  }

  /** Reads the other regions' alive marks again when this process's are older than {@link MARKS_TTL_MS} (a shortfall's path only); a failed read keeps what it had. */
  private async refreshMarks(): Promise<void> {
    const now = Date.now();
    if (now - this.marks.readAt < MARKS_TTL_MS) return;
    try {
      this.marks = { readAt: now, of: await this.readMarks() };
    } catch {
      // No new evidence: the silence rule still decides.
    }
  }

  /**
   * Gets `micros` of a quantity moved here: concurrent shortfalls of one quantity in this process
   * are gathered for a moment into one ask (so 100 waiting requests send one write, not 100), which
   * asks the other regions richest first, then waits until each answered (crediting what arrived)
   * or the deadline.
   */
  private obtain(workspaceId: string, q: Quantity, micros: number, ttl: number | undefined, spare: Record<string, number>, deadline: number): Promise<AskEnd> {
    const id = this.batchId(workspaceId, q);
    const open = this.batches.get(id);
    if (open !== undefined && !open.sent && open.done !== undefined) {
      open.micros += micros;
      return open.done;
    }
    const batch: AskBatch = { micros, sent: false };
    this.batches.set(id, batch);
    batch.done = (async () => {
      await sleep(GATHER_MS);
      batch.sent = true;
      if (this.batches.get(id) === batch) this.batches.delete(id);
      return this.askAndWait(workspaceId, q, batch.micros, ttl, spare, deadline);
    })();
    return batch.done;
  }

  private async askAndWait(workspaceId: string, q: Quantity, micros: number, ttl: number | undefined, spare: Record<string, number>, deadline: number): Promise<AskEnd> {
    const targets = new Map<string, number>();
    /** What each asked region had sent here before the ask: what it sends from then on answers it (or another process's ask answered with it). */
    const before = new Map<string, number>();
    let left = micros;
    const askOf = async (peer: string, x: number): Promise<void> => {
      if (!before.has(peer)) before.set(peer, peerCounters(await this.transfers.readPeer(workspaceId, q, peer), this.setup.region).sent);
      targets.set(peer, await this.transfers.ask(workspaceId, q, peer, x, ttl));
    };
    const order = Object.entries(spare).sort((a, b) => b[1] - a[1]);
    for (const [peer, has] of order) {
      if (left <= 0 || has <= 0) continue;
      const x = Math.min(left, has);
      await askOf(peer, x);
      left -= x;
    }
    // More than their figures show: asked of the richest region not counted lost (its figures may be
    // behind what it holds: `othersSaidNone`), whose answer says what it has.
    const next = order.find(([peer]) => !this.lost(peer));
    if (left > 0 && next !== undefined) await askOf(next[0], left);
    let sent = 0;
    /** Whether every region that answered had nothing left once it answered. */
    let exhausted = true;
    while (targets.size > 0) {
      for (const [peer, target] of [...targets]) {
        const theirs = await this.transfers.readPeer(workspaceId, q, peer);
        const c = peerCounters(theirs, this.setup.region);
        // Credited here before the admission tries again (once: the agent may have done it first).
        if (c.sent > 0) await this.transfers.receive(workspaceId, q, peer);
        if (c.answered >= target) {
          targets.delete(peer);
          this.silent.delete(peer);
          sent += c.sent - (before.get(peer) ?? 0);
          if (c.left > 0) exhausted = false;
        }
      }
      if (targets.size === 0) break;
      // Not answered yet: waited for (their replicated figures are no evidence, `othersSaidNone`).
      if (Date.now() >= deadline) {
        for (const peer of targets.keys()) if (!this.silent.has(peer)) this.silent.set(peer, Date.now());
        return 'unanswered';
      }
      await sleep(POLL_MS);
    }
    if (sent >= micros) return 'full';
    return exhausted ? 'short' : 'partial';
  }

  /**
   * A refusal with workspace-wide figures: this region's, plus the others' as replicated here
   * (credit: every region's available; a key limit: the whole limit, every region's settled and
   * held on its key slice 0; a member's month: the whole limit, every region's settled and held on
   * its member month, which is the member's use without what was moved; the workspace's month:
   * the whole limit, every region's settled and held on its month shares).
   */
  private async widen(request: AdmitRequest, refusal: Refusal): Promise<Refusal> {
    const l = request.limits;
    try {
      if (refusal.kind === 'insufficient_credit') {
        return { ...refusal, availableMicros: refusal.availableMicros + (await this.peerSpare(request.workspaceId, { kind: 'credit' })) };
      }
      if (refusal.kind === 'key_limit_exceeded' && l.keyLimitMicros !== undefined) {
        const key = this.keyQuantity(request);
        let settled = refusal.settledMicros;
        let held = refusal.heldMicros;
        if (key !== undefined && key.q.kind === 'key') {
          for (const peer of peersOf(this.setup)) {
            // Every key slice's: what key slice 0 lent the others is settled and held there.
            const w = await this.transfers.keyTotalsOf(request.workspaceId, key.q, peer);
            settled += w.settled;
            held += w.held;
          }
        }
        return { ...refusal, settledMicros: settled, heldMicros: held, limitMicros: l.keyLimitMicros };
      }
      const member = refusal.kind === 'member_limit_exceeded' ? this.memberQuantity(request)?.q : undefined;
      if (refusal.kind === 'member_limit_exceeded' && l.memberLimitMicros !== undefined && member?.kind === 'member') {
        return { ...refusal, usedMicros: await this.usedEverywhere((region) => this.transfers.windowOf(request.workspaceId, member, region)), limitMicros: l.memberLimitMicros };
      }
      const month = refusal.kind === 'workspace_limit_exceeded' ? this.monthQuantity(request)?.q : undefined;
      if (refusal.kind === 'workspace_limit_exceeded' && l.workspaceLimitMicros !== undefined && month?.kind === 'month') {
        return { ...refusal, usedMicros: await this.usedEverywhere((region) => this.transfers.monthOf(request.workspaceId, month, region)), limitMicros: l.workspaceLimitMicros };
      }
    } catch {
      // The others' figures are only for the message: the refusal stands without them.
    }
    if (refusal.kind === 'member_limit_exceeded' && l.memberLimitMicros !== undefined) return { ...refusal, limitMicros: l.memberLimitMicros };
    if (refusal.kind === 'workspace_limit_exceeded' && l.workspaceLimitMicros !== undefined) return { ...refusal, limitMicros: l.workspaceLimitMicros };
    if (refusal.kind === 'spend_rate_exceeded') return { ...refusal, capMicros: l.spendRateCapMicros };
    return refusal;
  }

  /** Settled plus held summed over every region, each region's read with `read` (its own use: transfers never touch these figures). */
  private async usedEverywhere(read: (region: string) => Promise<{ settled: number; held: number }>): Promise<number> {
    let used = 0;
    for (const region of this.setup.regions) {
      const u = await read(region);
      used += u.settled + u.held;
    }
    return used;
  }

  settle(hold: HoldRecord, settlement: Settlement): Promise<boolean> {
    return this.inner.settle(hold, settlement);
  }

  /** An admission of this region's that failed without an answer, given back on this region's items (the request never went elsewhere). */
  release(workspaceId: string, requestId: string, now: number): Promise<void> {
    return this.inner.release(workspaceId, requestId, now);
  }

  /**
   * Grows a running stream's hold on this region's share, as one region does; when a consistent
   * read shows the share cannot cover it, asks the other regions for what is short (the quantity
   * the refusal names) exactly as an admission asks (`admit`), and tries again when it arrives.
   * The stream waits meanwhile (its provider's body is paused), at most the transfer wait; it is
   * cut (`balance_exhausted`) only when the others have nothing to give, when only a region counted
   * lost has, when the ask is not answered in time, or on a store fault while asking.
   */
  async extend(hold: HoldRecord, extraMicros: number, limits: AdmissionLimits, now: number): Promise<boolean> {
    const subject: LimitSubject = { holdId: hold.holdId, keyId: hold.keyId, workspaceId: hold.workspaceId, now, byok: false, limits };
    // What an admission of the extra would ask for (its key window and member month: the hold's, by its start).
    const asked = { ...subject, amountMicros: extraMicros, ...(hold.memberId !== undefined ? { memberId: hold.memberId } : {}) };
    const attempt = (): Promise<boolean | Refusal> => this.inner.extendHold(hold, extraMicros, this.limitsFor(subject), now);
    const { last } = await this.withAsks(hold.workspaceId, await attempt(), (g) => (g === true || g === false ? undefined : this.shortOf(asked, g)), attempt);
    return last === true;
  }

  /**
   * The door's count of a key's minute (a `GET`, or a request refused before admission) under
   * this region's share of the rate, plus what was received; past it, one request of the minute is
   * asked of the other regions exactly as an admission asks (`admit`), and counted when it
   * arrives. The 429 stands when the others have none to give, when only a region counted lost
   * has (a rate's share there is stranded), when the ask is not answered within the wait, and on a
   * store fault while asking: early, never late.
   */
  async countRequest(workspaceId: string, keyId: string, ratePerMinute: number, now: number, rateWindow?: string): Promise<{ readonly retryAfterSeconds?: number }> {
    const count = (): Promise<{ readonly retryAfterSeconds?: number }> => this.inner.countRequest(workspaceId, keyId, this.share(ratePerMinute), now, rateWindow);
    const short: Short = { ...rateQuantityOf(keyId, now, ratePerMinute, rateWindow), micros: 1 };
    return (await this.withAsks(workspaceId, await count(), (c) => (c.retryAfterSeconds === undefined ? undefined : short), count)).last;
  }
}
