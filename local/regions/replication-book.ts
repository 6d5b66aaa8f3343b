/**
 * The local replicator's decisions, pure: what each region holds, which writes are due where, and
 * which stream records are the replicator's own writes coming back. No DynamoDB, no clock of its
 * own (every call is given `now`), no file: the shell (`replicator.ts`) reads the streams, makes
 * the writes and saves `toJSON()`.
 *
 * It plays DynamoDB global tables' multi-Region eventual consistency for each item:
 *
 * - **Write times.** Every version of an item carries a write time and the region that wrote it.
 *   Global tables keep the time as a private attribute of each item; DynamoDB Local's stream
 *   records carry `ApproximateCreationDateTime` truncated to the minute (measured), so the time
 *   of a local write is the moment the replicator first reads it from its region's stream, made
 *   strictly increasing. Its precision is therefore the stream's polling interval.
 * - **Last writer wins.** A write due in a region is applied only when it is later, by (time,
 *   region name), than the version that region holds; otherwise it is dropped, as global tables
 *   drop a replicated write older than the item's own timestamp. Several writes to one item due
 *   in one region are folded into the latest (global tables "may combine multiple changes ... into
 *   a single replicated write").
 * - **Replicated writes appear in the receiving region's stream**, as they do in every replica's
 *   stream, and carry nothing that marks them as replicated (version 2019.11.21 adds no `aws:rep:*`
 *   attributes). So that none is copied back, the book expects, per region and item, the records
 *   its own writes will produce, in order: a record matching the head of that list is consumed
 *   silently. Whether a write produces a record at all is known from the old image DynamoDB returns
 *   (`ALL_OLD`): writing an item over an equal one produces none.
 * - **A local write that raced a replicated one.** When the old image a write returns is not the
 *   version the book believed the region held, a local write landed there after the last poll:
 *   it is later than the replicated write (which is at least the lag old), so it wins. The book
 *   restores it in that region at once, copies it to the others, and expects its record, the
 *   replicated write's record and the restore's record, in that order. An item the book knows
 *   nothing of in that region (never read there, or forgotten after idling) is taken for older:
 *   an unread local write to it would have to land between a pass's read and its write.
 *
 * After a restart from saved state, records read again from the saved checkpoints may be the
 * echoes of writes made after the state was saved; until a region's stream has been read to its
 * end once, a record equal to a version some region holds, or to a write due somewhere, is taken
 * for one (`replaying`).
 */
import { fingerprint, type JsonImage } from './images';

/** How long after a write its stream record may still come, when a full read of the stream has not met it, milliseconds. */
export const LATE_RECORD_MS = 5_000;

/** One version of an item: what it holds (fingerprint), when and where it was written. */
export interface Version {
  readonly fp: string;
  readonly ts: number;
  readonly origin: string;
}

/** Whether version `a` wins over version `b` under last writer wins: later, then the larger region name. */
export function wins(a: Version, b: Version): boolean {
  if (a.ts !== b.ts) return a.ts > b.ts;
  return a.origin > b.origin;
}

/** A write waiting to be made in one region. */
interface Pending {
  /** The item to put, or null for a delete. */
  readonly image: JsonImage | null;
  readonly version: Version;
  /** Due at once, whatever the lag (a restore after a race), rather than at `version.ts + lag`. */
  readonly immediate: boolean;
  /**
   * The time of the oldest write folded into this one (absent: the version's own): the write is
   * due a lag after it, so an item written more often than once a lag still reaches the other
   * regions about a lag behind, as global tables combine changes without holding an item back
   * while it keeps changing.
   */
  readonly since?: number;
}

/** A record the book expects in a region's stream, produced by its own write (or found by it). */
interface Expectation {
  readonly fp: string;
  /** When it was added: a full read of the stream started after this must have met it. */
  readonly at: number;
}

interface Entry {
  readonly table: string;
  readonly keys: JsonImage;
  /** Region → the version it is believed to hold. */
  held: Record<string, Version>;
  /** Region → the write due there. */
  pending: Record<string, Pending>;
  /** Region → records expected in its stream, in order. */
  expect: Record<string, Expectation[]>;
  /** Last time anything happened to the item (ms). */
  touched: number;
}

/** A write the shell should make now. */
export interface Plan {
  readonly table: string;
  readonly keys: JsonImage;
  readonly target: string;
  /** The item to put, or null for a delete. */
  readonly image: JsonImage | null;
  readonly version: Version;
  /** What the book believed the target held when planning (undefined: it knows nothing). */
  readonly expected?: string;
}

/** What a stream record turned out to be. */
export type Observation =
  /** A write made in that region: copied to every other region after the lag. */
  | 'local'
  /** The replicator's own write (or a local write it had already found), consumed. */
  | 'echo'
  /** An older local write already overtaken by the version the book knows; nothing to do. */
  | 'superseded'
  /** Read again after a restart and equal to a known version; nothing to do. */
  | 'replayed';

/** Counters for logs and tests. */
export interface BookStats {
  local: number;
  echoes: number;
  superseded: number;
  replayed: number;
  applied: number;
  /** Writes that found the item already equal: no record in the stream. */
  unchanged: number;
  /** Writes dropped because the target held a later version. */
  dropped: number;
  /** Local writes found by a replicated write's old image, and restored. */
  races: number;
  /** Expected records that never came (dropped after full reads of the stream). */
  expired: number;
  /** Records of the replicator's own writes that came after their expectation was dropped, known by the version the region holds. */
  late: number;
}

/** The book as saved to disk. */
export interface BookState {
  readonly version: 1;
  readonly lastTs: number;
  readonly entries: readonly Entry[];
}

/** The book of every item the replicator is carrying between regions. */
export class ReplicationBook {
  private readonly entries = new Map<string, Entry>();
  private lastTs = 0;
  /** `<region>\u0000<table>` pairs read again after a restart, until their stream is read to its end. */
  private readonly replaying = new Set<string>();
  /** Ids of entries with a write due somewhere (so `due` need not walk every item). */
  private readonly withPending = new Set<string>();
  /** Region and table pair → ids of entries expecting a record in that stream. */
  private readonly expecting = new Map<string, Set<string>>();
  readonly stats: BookStats = { local: 0, echoes: 0, superseded: 0, replayed: 0, applied: 0, unchanged: 0, dropped: 0, races: 0, expired: 0, late: 0 };

  constructor(
    readonly regions: readonly string[],
    state?: BookState,
  ) {
    if (new Set(regions).size !== regions.length || regions.length < 2) {
      throw new Error(`a replication book needs two or more distinct regions, got ${JSON.stringify(regions)}`);
    }
    if (state === undefined) return;
    this.lastTs = state.lastTs;
    for (const saved of state.entries) {
      const id = entryId(saved.table, saved.keys);
      this.entries.set(id, { ...saved, held: { ...saved.held }, pending: { ...saved.pending }, expect: { ...saved.expect } });
      this.reindex(id);
    }
  }

  /** Treats every stream of `tables` in every region as read again from a saved checkpoint. */
  startReplay(tables: readonly string[]): void {
    for (const region of this.regions) for (const table of tables) this.replaying.add(pairId(region, table));
  }

  /** Records a stream record of `region`: `image` is the item after the write, null when deleted. */
  observe(region: string, table: string, keys: JsonImage, image: JsonImage | null, now: number): Observation {
    this.known(region);
    const fp = fingerprint(image);
    const entry = this.entry(table, keys, now);
    const queue = entry.expect[region];
    if (queue !== undefined && queue.length > 0) {
      const at = queue.findIndex((e) => e.fp === fp);
      if (at >= 0) {
        // Its own write (a record expected before it that never came is dropped with it: the stream is in order).
        queue.splice(0, at + 1);
        if (queue.length === 0) {
          delete entry.expect[region];
          this.expecting.get(pairId(region, table))?.delete(entryId(table, keys));
        }
        this.stats.echoes += 1;
        return 'echo';
      }
      // Every record before an expected one is older than what the book already knows there.
      this.stats.superseded += 1;
      return 'superseded';
    }
    const held = entry.held[region];
    if (held !== undefined && held.origin !== region && held.fp === fp) {
      // The record of the replicator's own write, later than its expectation lasted: a local write
      // equal to what the item holds makes no record, and any other local write's record would have
      // made the item the region's own. Copied back, it would overwrite later writes elsewhere.
      this.stats.echoes += 1;
      this.stats.late += 1;
      return 'echo';
    }
    if (this.replaying.has(pairId(region, table)) && this.isKnown(entry, fp)) {
      this.stats.replayed += 1;
      return 'replayed';
    }
    const version: Version = { fp, ts: this.nextTs(now), origin: region };
    entry.held[region] = version;
    for (const other of this.regions) {
      if (other !== region) this.enqueue(entry, other, { image, version, immediate: false });
    }
    this.stats.local += 1;
    return 'local';
  }

  /**
   * The writes due now: a replicated write once `lagMs` after its version's time, a restore at
   * once. Writes the target's version beats are dropped here. `available` says which regions can
   * take writes now.
   */
  due(now: number, lagMs: number, available: (region: string) => boolean = () => true): Plan[] {
    const plans: Plan[] = [];
    for (const id of [...this.withPending]) {
      const entry = this.entries.get(id);
      if (entry === undefined) {
        this.withPending.delete(id);
        continue;
      }
      for (const [target, pending] of Object.entries(entry.pending)) {
        if (!pending.immediate && (pending.since ?? pending.version.ts) + lagMs > now) continue;
        const held = entry.held[target];
        if (held !== undefined && !wins(pending.version, held)) {
          delete entry.pending[target];
          this.stats.dropped += 1;
          continue;
        }
        if (!available(target)) continue;
        plans.push({ table: entry.table, keys: entry.keys, target, image: pending.image, version: pending.version, expected: held?.fp });
      }
      if (Object.keys(entry.pending).length === 0) this.withPending.delete(id);
    }
    return plans;
  }

  /** Records a write the shell made: `old` is the item it replaced (`ALL_OLD`), undefined when there was none. */
  applied(plan: Plan, old: JsonImage | undefined, now: number): void {
    const entry = this.entry(plan.table, plan.keys, now);
    const pending = entry.pending[plan.target];
    if (pending !== undefined && pending.version.ts === plan.version.ts && pending.version.origin === plan.version.origin) {
      delete entry.pending[plan.target];
      if (Object.keys(entry.pending).length === 0) this.withPending.delete(entryId(plan.table, plan.keys));
    }
    const before = fingerprint(old);
    entry.held[plan.target] = plan.version;
    if (before === plan.version.fp) {
      // An item written over an equal one: DynamoDB writes no stream record.
      this.stats.unchanged += 1;
      return;
    }
    this.stats.applied += 1;
    if (plan.expected === undefined || before === plan.expected) {
      this.expectRecord(entry, plan.target, plan.version.fp, now);
      return;
    }
    // A local write the book had not read yet: its record comes first, then this write's. It is
    // the later writer, so it goes back in its region at once and on to the others after the lag.
    this.stats.races += 1;
    this.expectRecord(entry, plan.target, before, now);
    this.expectRecord(entry, plan.target, plan.version.fp, now);
    const image = old ?? null;
    const version: Version = { fp: before, ts: this.nextTs(now), origin: plan.target };
    entry.pending[plan.target] = { image, version, immediate: true };
    this.withPending.add(entryId(plan.table, plan.keys));
    for (const other of this.regions) {
      if (other !== plan.target) this.enqueue(entry, other, { image, version, immediate: false });
    }
  }

  /**
   * Records that `region`'s stream of `table` was read to its end by a pass that started at
   * `startedAt`: a restart's replay of that stream is over, and expectations older than that by
   * {@link LATE_RECORD_MS} will never be met and are dropped. (Not older than the pass alone: a
   * DynamoDB Local on a busy machine shows a write in its stream a moment after the write returns,
   * and an echo taken for a local write would be copied back over later writes.)
   */
  drained(region: string, table: string, startedAt: number): void {
    this.replaying.delete(pairId(region, table));
    const ids = this.expecting.get(pairId(region, table));
    if (ids === undefined) return;
    for (const id of [...ids]) {
      const entry = this.entries.get(id);
      const queue = entry?.expect[region];
      if (entry === undefined || queue === undefined) {
        ids.delete(id);
        continue;
      }
      const kept = queue.filter((e) => e.at >= startedAt - LATE_RECORD_MS);
      this.stats.expired += queue.length - kept.length;
      if (kept.length > 0) {
        entry.expect[region] = kept;
      } else {
        delete entry.expect[region];
        ids.delete(id);
      }
    }
  }

  /**
   * Forgets what `region` holds (its database was replaced, or its stream is a new one): every
   * write due there will be made, whatever the version the book believed it held.
   */
  forgetRegion(region: string): void {
    this.known(region);
    for (const entry of this.entries.values()) {
      delete entry.held[region];
      delete entry.expect[region];
    }
    for (const [pair, ids] of this.expecting) if (pair.startsWith(`${region}\u0000`)) ids.clear();
  }

  /**
   * Forgets items nothing has happened to for `idleMs` and that have no write due and no record
   * expected. Safe for last writer wins: every later version gets a later time than any forgotten.
   */
  prune(now: number, idleMs: number): number {
    let removed = 0;
    for (const [id, entry] of this.entries) {
      if (now - entry.touched < idleMs) continue;
      if (Object.keys(entry.pending).length > 0 || Object.keys(entry.expect).length > 0) continue;
      this.entries.delete(id);
      removed += 1;
    }
    return removed;
  }

  /** Writes due anywhere (not yet made), and records still expected. */
  outstanding(): { pending: number; expected: number } {
    let pending = 0;
    let expected = 0;
    for (const entry of this.entries.values()) {
      pending += Object.keys(entry.pending).length;
      for (const queue of Object.values(entry.expect)) expected += queue.length;
    }
    return { pending, expected };
  }

  /** The number of items the book carries. */
  get size(): number {
    return this.entries.size;
  }

  /** The version `region` is believed to hold of an item, if the book knows it. */
  heldBy(region: string, table: string, keys: JsonImage): Version | undefined {
    return this.entries.get(entryId(table, keys))?.held[region];
  }

  toJSON(): BookState {
    return { version: 1, lastTs: this.lastTs, entries: [...this.entries.values()] };
  }

  private entry(table: string, keys: JsonImage, now: number): Entry {
    const id = entryId(table, keys);
    let entry = this.entries.get(id);
    if (entry === undefined) {
      entry = { table, keys, held: {}, pending: {}, expect: {}, touched: now };
      this.entries.set(id, entry);
    }
    entry.touched = now;
    return entry;
  }

  private enqueue(entry: Entry, target: string, write: Pending): void {
    const current = entry.pending[target];
    if (current === undefined) entry.pending[target] = write;
    else if (wins(write.version, current.version)) entry.pending[target] = { ...write, since: Math.min(current.since ?? current.version.ts, write.since ?? write.version.ts) };
    this.withPending.add(entryId(entry.table, entry.keys));
  }

  private expectRecord(entry: Entry, region: string, fp: string, now: number): void {
    (entry.expect[region] ??= []).push({ fp, at: now });
    const pair = pairId(region, entry.table);
    let ids = this.expecting.get(pair);
    if (ids === undefined) {
      ids = new Set();
      this.expecting.set(pair, ids);
    }
    ids.add(entryId(entry.table, entry.keys));
  }

  private reindex(id: string): void {
    const entry = this.entries.get(id);
    if (entry === undefined) return;
    if (Object.keys(entry.pending).length > 0) this.withPending.add(id);
    for (const region of Object.keys(entry.expect)) {
      const pair = pairId(region, entry.table);
      let ids = this.expecting.get(pair);
      if (ids === undefined) {
        ids = new Set();
        this.expecting.set(pair, ids);
      }
      ids.add(id);
    }
  }

  private isKnown(entry: Entry, fp: string): boolean {
    return (
      Object.values(entry.held).some((v) => v.fp === fp) || Object.values(entry.pending).some((p) => p.version.fp === fp)
    );
  }

  private nextTs(now: number): number {
    this.lastTs = Math.max(now, this.lastTs + 1);
    return this.lastTs;
  }

  private known(region: string): void {
    if (!this.regions.includes(region)) throw new Error(`unknown region ${JSON.stringify(region)}`);
  }
}

function entryId(table: string, keys: JsonImage): string {
  return `${table}\u0000${fingerprint(keys)}`;
}

function pairId(region: string, table: string): string {
  return `${region}\u0000${table}`;
}
