/**
 * A small in-memory cache with a time to live, for reads that may be a few seconds stale (keys,
 * workspaces, the catalog). Concurrent misses for one key share one load.
 *
 * Refresh ahead: a hit in the second half of its life starts one reload in the background and is
 * served as it is, so a key or workspace in steady use is never reloaded on a request's path
 * (the request would otherwise pay a second store round trip before its first byte). The bound
 * on staleness is unchanged: a value is served for at most `ttlMs` after its load began, because
 * a reloaded entry expires `ttlMs` after its own load began, not after it finished.
 */
export class TtlCache<V> {
  private readonly entries = new Map<string, Entry<V>>();

  constructor(
    private readonly ttlMs: number,
    private readonly clock: () => number = Date.now,
    private readonly maxEntries = 10_000,
  ) {}

  /** The cached value, or the loader's result (a failed load is not cached). */
  get(key: string, load: () => Promise<V>): Promise<V> {
    const now = this.clock();
    const hit = this.entries.get(key);
    if (hit !== undefined && hit.expires > now) {
      if (hit.settled && !hit.refreshing && hit.expires - now < this.ttlMs / 2) this.refresh(key, hit, load, now);
      return hit.value;
    }
    if (this.entries.size >= this.maxEntries) this.entries.clear();
    const value = load();
    const entry: Entry<V> = { value, expires: now + this.ttlMs, settled: false, refreshing: false };
    this.entries.set(key, entry);
    value.then(
      () => { entry.settled = true; },
      () => { if (this.entries.get(key) === entry) this.entries.delete(key); },
    );
    return value;
  }

  clear(): void {
    this.entries.clear();
  }

  /** Reloads in the background; a failure keeps the old entry until it expires. */
  private refresh(key: string, hit: Entry<V>, load: () => Promise<V>, startedAt: number): void {
    hit.refreshing = true;
    let next: Promise<V>;
    try {
      next = load();
    } catch {
      hit.refreshing = false;
      return;
    }
    next.then(
      (value) => {
        hit.refreshing = false;
        if (this.entries.get(key) !== hit) return;
        this.entries.set(key, {
          value: Promise.resolve(value),
          expires: startedAt + this.ttlMs,
          settled: true,
          refreshing: false,
        });
      },
      () => { hit.refreshing = false; },
    );
  }
}

interface Entry<V> {
  value: Promise<V>;
  /** When the value stops being served: `ttlMs` after its load began. */
  expires: number;
  /** The load has resolved (only a settled entry is refreshed ahead). */
  settled: boolean;
  /** A background reload is under way. */
  refreshing: boolean;
}
