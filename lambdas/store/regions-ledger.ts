/**
 * The ledger of one region of a stage with several (docs/regions.md). It admits exactly as the
 * one-region ledger does, in one transaction, on the region's own items only (the ledger runs
 * through the region's {@link RegionLens}), under the region's share of every limit:
 *
 * - each limit `L` (the key's credit limit, the member's and the workspace's month, the spend-rate
 *   cap, the key's request rate) is `regionShare(L)` here, derived with no write;
 * - a key limit's share grows by what other regions have transferred to this region under it
 *   (`core/transfers.ts`), and what this region gave is counted as used on its key window;
 * - credit is what this region's slices hold: a top-up lands in the slices of the region whose
 *   management API wrote it; transfers move it.
 *
 * A request the region's share cannot cover is refused only when the other regions' figures (as
 * replicated here: read to decide whether to ask, never spent) could not cover it either;
 * otherwise the region asks urgently for the shortfall (one write to its own transfer item, which
 * reaches the others by replication and their transfer agents), waits a bounded time, crediting
 * what arrives itself, and admits or refuses. No cross-region call is ever made.
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import type { DocumentSender } from '../adapters/dynamo-wire';
import { peerCounters, quantityId, type Quantity } from '../core/transfers';
import { windowEnd, windowKeys } from '../core/windows';
import type { AdmissionLimits, AdmitOutcome, AdmitRequest, Ledger, Refusal, Settlement } from '../gateway/ports';
import type { HoldRecord } from '../shared/records';
import { keyPk } from './keys';
import { DynamoLedger, type LedgerTables } from './ledger';
import { RegionLens } from './regions-lens';
import { RegionTransfers } from './regions-transfers';
import { peersOf, regionShare, regionTag, type RegionSetup } from './regions';
import { rowStart } from './request-rows';

/** How long concurrent shortfalls of one quantity are gathered into one ask, milliseconds. */
const GATHER_MS = 20;
/** Pause between reads of the other regions' answers while waiting, milliseconds. */
const POLL_MS = 40;
/** Windows are kept this long past their end (as the ledger keeps key windows). */
const RETENTION_S = 400 * 86_400;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** What a region's limits are derived from: a request, or a running hold's extension. */
type LimitSubject = Pick<AdmitRequest, 'holdId' | 'keyId' | 'workspaceId' | 'now' | 'byok' | 'limits'>;

/** Shortfalls of one quantity gathered into one ask. */
interface AskBatch {
  micros: number;
  sent: boolean;
  done?: Promise<void>;
}

/** The region's ledger: the port the gateway, the sweeper and the transfer agent use in a stage with several regions. */
export class RegionalLedger implements Ledger {
  /** The one-region ledger on this region's own items. */
  readonly inner: DynamoLedger;
  readonly transfers: RegionTransfers;
  /** What this process knows of each key quantity's received total (it only grows: a stale figure is smaller, so safe). */
  private readonly received = new Map<string, number>();
  private readonly batches = new Map<string, AskBatch>();
  private readonly peerLedgers = new Map<string, DynamoLedger>();

  constructor(
    /** This region's database (its replica of every table), unlensed. */
    private readonly raw: DocumentSender,
    private readonly tables: LedgerTables,
    readonly setup: RegionSetup,
    onConflict?: () => void,
  ) {
    this.transfers = new RegionTransfers(raw, tables, setup, onConflict);
    this.inner = this.transfers.ledger;
  }

  private share(total: number): number {
    return regionShare(this.setup, total);
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

  private receivedId(workspaceId: string, q: Quantity): string {
    return `${workspaceId}\u0000${quantityId(q)}`;
  }

  /** This region's share of every limit, its key-limit share grown by what it has received (as this process knows it). */
  limitsFor(request: LimitSubject): AdmissionLimits {
    const l = request.limits;
    const key = this.keyQuantity(request);
    const got = key === undefined ? 0 : (this.received.get(this.receivedId(request.workspaceId, key.q)) ?? 0);
    return {
      ...l,
      keyRatePerMinute: this.share(l.keyRatePerMinute),
      spendRateCapMicros: this.share(l.spendRateCapMicros),
      ...(l.keyLimitMicros !== undefined ? { keyLimitMicros: this.share(l.keyLimitMicros) + got } : {}),
      ...(l.memberLimitMicros !== undefined ? { memberLimitMicros: this.share(l.memberLimitMicros) } : {}),
      ...(l.workspaceLimitMicros !== undefined ? { workspaceLimitMicros: this.share(l.workspaceLimitMicros) } : {}),
    };
  }

  /** Reads this region's received total of a key quantity; true when it grew. */
  private async refreshReceived(workspaceId: string, q: Quantity): Promise<boolean> {
    const id = this.receivedId(workspaceId, q);
    const mine = await this.transfers.readOwn(workspaceId, q);
    const total = peersOf(this.setup).reduce((a, p) => a + peerCounters(mine, p).recv, 0);
    const before = this.received.get(id) ?? 0;
    if (total > before) this.received.set(id, total);
    return total > before;
  }

  async admit(request: AdmitRequest): Promise<AdmitOutcome> {
    let outcome = await this.inner.admit({ ...request, limits: this.limitsFor(request) });
    if (outcome.admitted || this.setup.transferWaitMs === 0) return outcome;
    const deadline = Date.now() + this.setup.transferWaitMs;
    for (;;) {
      const refusal: Refusal = outcome.refusal;
      const short = this.shortOf(request, refusal);
      if (short === undefined) return { admitted: false, refusal: await this.widen(request, refusal) };
      // Another process of this region may have credited a transfer already: try with it first.
      if (short.q.kind === 'key' && (await this.refreshReceived(request.workspaceId, short.q))) {
        outcome = await this.inner.admit({ ...request, limits: this.limitsFor(request) });
        if (outcome.admitted) return outcome;
        continue;
      }
      if (Date.now() >= deadline) return { admitted: false, refusal: await this.widen(request, refusal) };
      try {
        const spare = await this.peerSpare(request.workspaceId, short.q);
        // Refused at once when the others' figures could not cover it either (they are only read, never spent).
        if (Object.values(spare).reduce((a, b) => a + b, 0) < short.micros) return { admitted: false, refusal: await this.widen(request, refusal) };
        await this.obtain(request.workspaceId, short.q, short.micros, short.ttl, spare, deadline);
      } catch {
        // Asking failed (the store refused a read or the ask): the region's own refusal stands, early and safe.
        return { admitted: false, refusal };
      }
      if (short.q.kind === 'key') await this.refreshReceived(request.workspaceId, short.q);
      outcome = await this.inner.admit({ ...request, limits: this.limitsFor(request) });
      if (outcome.admitted) return outcome;
    }
  }

  /** What a refusal says this region is short of, when another region could move it here. */
  private shortOf(request: AdmitRequest, refusal: Refusal): { q: Quantity; micros: number; ttl: number | undefined } | undefined {
    if (refusal.kind === 'insufficient_credit') return { q: { kind: 'credit' }, micros: Math.max(1, request.amountMicros - refusal.availableMicros), ttl: undefined };
    if (refusal.kind === 'key_limit_exceeded') {
      const key = this.keyQuantity(request);
      if (key === undefined) return undefined;
      const used = refusal.settledMicros + refusal.heldMicros;
      const capacity = this.limitsFor(request).keyLimitMicros ?? 0;
      return { ...key, micros: Math.max(1, Math.min(request.amountMicros, used + request.amountMicros - capacity)) };
    }
    return undefined;
  }

  /** A read-only view of another region's ledger items, as replicated in this region. */
  private peerLedger(peer: string): DynamoLedger {
    let l = this.peerLedgers.get(peer);
    if (l === undefined) {
      l = new DynamoLedger(new RegionLens(this.raw, { ledger: this.tables.ledger, usage: this.tables.usage, region: peer, tag: regionTag(this.setup, peer) }), this.tables);
      this.peerLedgers.set(peer, l);
    }
    return l;
  }

  /** A key window's figures on another region's key slice 0, and its capacity, as replicated here. */
  private async peerKeyWindow(workspaceId: string, q: Extract<Quantity, { kind: 'key' }>, peer: string): Promise<{ settled: number; held: number; used: number; capacity: number }> {
    const key = { pk: `${keyPk(workspaceId, q.keyId)}${regionTag(this.setup, peer)}`, sk: q.windowSk };
    const [got, theirs] = await Promise.all([
      this.raw.send(new GetCommand({ TableName: this.tables.ledger, Key: key, ConsistentRead: true })),
      this.transfers.readPeer(workspaceId, q, peer),
    ]);
    const n = (v: unknown): number => (typeof v === 'number' ? v : 0);
    const received = this.setup.regions.filter((r) => r !== peer).reduce((a, r) => a + peerCounters(theirs, r).recv, 0);
    return { settled: n(got.Item?.settledMicros), held: n(got.Item?.heldMicros), used: n(got.Item?.usedMicros), capacity: regionShare(this.setup, q.limitMicros, peer) + received };
  }

  /** What each other region could give of a quantity, by its figures as replicated here (possibly stale). */
  private async peerSpare(workspaceId: string, q: Quantity): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    await Promise.all(
      peersOf(this.setup).map(async (peer) => {
        if (q.kind === 'credit') {
          const snapshot = await this.peerLedger(peer).readSlices(workspaceId);
          out[peer] = snapshot.slices.reduce((a, s) => a + Math.max(0, s.availableMicros), 0);
        } else {
          const w = await this.peerKeyWindow(workspaceId, q, peer);
          out[peer] = Math.max(0, w.capacity - w.used);
        }
      }),
    );
    return out;
  }

  /**
   * Gets `micros` of a quantity moved here: concurrent shortfalls of one quantity in this process
   * are gathered for a moment into one ask (so 100 waiting requests send one write, not 100), which
   * asks the other regions richest first, then waits until each answered (crediting what arrived)
   * or the deadline.
   */
  private obtain(workspaceId: string, q: Quantity, micros: number, ttl: number | undefined, spare: Record<string, number>, deadline: number): Promise<void> {
    const id = this.receivedId(workspaceId, q);
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
      await this.askAndWait(workspaceId, q, batch.micros, ttl, spare, deadline);
    })();
    return batch.done;
  }

  private async askAndWait(workspaceId: string, q: Quantity, micros: number, ttl: number | undefined, spare: Record<string, number>, deadline: number): Promise<void> {
    const targets = new Map<string, number>();
    let left = micros;
    for (const [peer, has] of Object.entries(spare).sort((a, b) => b[1] - a[1])) {
      if (left <= 0 || has <= 0) continue;
      const x = Math.min(left, has);
      targets.set(peer, await this.transfers.ask(workspaceId, q, peer, x, ttl));
      left -= x;
    }
    while (targets.size > 0) {
      for (const [peer, target] of [...targets]) {
        const theirs = await this.transfers.readPeer(workspaceId, q, peer);
        const c = peerCounters(theirs, this.setup.region);
        if (c.sent > 0) await this.transfers.receive(workspaceId, q, peer);
        if (c.answered >= target) targets.delete(peer);
      }
      if (targets.size === 0 || Date.now() >= deadline) return;
      await sleep(POLL_MS);
    }
  }

  /**
   * A refusal with workspace-wide figures: this region's, plus the others' as replicated here
   * (credit: every region's available; a key limit: the whole limit, every region's settled and
   * held on its key slice 0; a month limit: the whole limit).
   */
  private async widen(request: AdmitRequest, refusal: Refusal): Promise<Refusal> {
    const l = request.limits;
    try {
      if (refusal.kind === 'insufficient_credit') {
        const spare = await this.peerSpare(request.workspaceId, { kind: 'credit' });
        return { ...refusal, availableMicros: refusal.availableMicros + Object.values(spare).reduce((a, b) => a + b, 0) };
      }
      if (refusal.kind === 'key_limit_exceeded' && l.keyLimitMicros !== undefined) {
        const key = this.keyQuantity(request);
        let settled = refusal.settledMicros;
        let held = refusal.heldMicros;
        if (key !== undefined && key.q.kind === 'key') {
          for (const peer of peersOf(this.setup)) {
            const w = await this.peerKeyWindow(request.workspaceId, key.q, peer);
            settled += w.settled;
            held += w.held;
          }
        }
        return { ...refusal, settledMicros: settled, heldMicros: held, limitMicros: l.keyLimitMicros };
      }
    } catch {
      // The others' figures are only for the message: the refusal stands without them.
    }
    if (refusal.kind === 'member_limit_exceeded' && l.memberLimitMicros !== undefined) return { ...refusal, limitMicros: l.memberLimitMicros };
    if (refusal.kind === 'workspace_limit_exceeded' && l.workspaceLimitMicros !== undefined) return { ...refusal, limitMicros: l.workspaceLimitMicros };
    if (refusal.kind === 'spend_rate_exceeded') return { ...refusal, capMicros: l.spendRateCapMicros };
    return refusal;
  }

  settle(hold: HoldRecord, settlement: Settlement): Promise<boolean> {
    return this.inner.settle(hold, settlement);
  }

  /** An admission of this region's that failed without an answer, given back on this region's items (the request never went elsewhere). */
  release(workspaceId: string, requestId: string, now: number): Promise<void> {
    return this.inner.release(workspaceId, requestId, now);
  }

  extend(hold: HoldRecord, extraMicros: number, limits: AdmissionLimits, now: number): Promise<boolean> {
    return this.inner.extend(hold, extraMicros, this.limitsFor({ holdId: hold.holdId, keyId: hold.keyId, workspaceId: hold.workspaceId, now, byok: false, limits }), now);
  }

  countRequest(workspaceId: string, keyId: string, ratePerMinute: number, now: number, rateWindow?: string): Promise<{ readonly retryAfterSeconds?: number }> {
    return this.inner.countRequest(workspaceId, keyId, this.share(ratePerMinute), now, rateWindow);
  }
}
