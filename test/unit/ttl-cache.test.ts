import { TtlCache } from '../../lambdas/adapters/ttl-cache';

/** A loader that counts its calls and resolves each with the next version. */
function versions(): { load: () => Promise<number>; calls: () => number } {
  let n = 0;
  return { load: async () => ++n, calls: () => n };
}

const flush = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('TtlCache', () => {
  it('serves a hit without loading, and loads again once the entry expired', async () => {
    let now = 0;
    const cache = new TtlCache<number>(1000, () => now);
    const v = versions();
    expect(await cache.get('k', v.load)).toBe(1);
    now = 400;
    expect(await cache.get('k', v.load)).toBe(1);
    expect(v.calls()).toBe(1);
    now = 5000;
    expect(await cache.get('k', v.load)).toBe(2);
    expect(v.calls()).toBe(2);
  });

  it('shares one load between concurrent misses', async () => {
    const cache = new TtlCache<number>(1000, () => 0);
    const v = versions();
    const [a, b] = await Promise.all([cache.get('k', v.load), cache.get('k', v.load)]);
    expect([a, b, v.calls()]).toEqual([1, 1, 1]);
  });

  it('refreshes ahead in the second half of an entry\'s life, serving the old value meanwhile', async () => {
    let now = 0;
    const cache = new TtlCache<number>(1000, () => now);
    const v = versions();
    await cache.get('k', v.load);
    now = 600;
    expect(await cache.get('k', v.load)).toBe(1); // served from the cache, reload started
    expect(v.calls()).toBe(2);
    await flush();
    now = 700;
    expect(await cache.get('k', v.load)).toBe(2); // the reload's value
    expect(v.calls()).toBe(2); // fresh again: no third load
    now = 1500; // past the first entry's expiry, within the reloaded one's (began at 600)
    expect(await cache.get('k', v.load)).toBe(2);
    expect(v.calls()).toBe(3); // its second half: the next reload has begun
  });

  it('never serves a value longer than the time to live after its load began', async () => {
    let now = 0;
    const cache = new TtlCache<number>(1000, () => now);
    let release: (n: number) => void = () => undefined;
    let calls = 0;
    const slow = (): Promise<number> => {
      calls += 1;
      if (calls === 1) return Promise.resolve(1);
      return new Promise<number>((r) => { release = r; });
    };
    await cache.get('k', slow);
    now = 900; // reload begins at 900 and is slow
    expect(await cache.get('k', slow)).toBe(1);
    now = 2000; // the reload finishes late
    release(2);
    await flush();
    now = 1950;
    // The reloaded value began loading at 900: it expires at 1900, so 1950 loads anew.
    expect(await cache.get('k', async () => 3)).toBe(3);
  });

  it('keeps the old entry when a reload fails, and does not cache a failed first load', async () => {
    let now = 0;
    const cache = new TtlCache<number>(1000, () => now);
    await cache.get('k', async () => 1);
    now = 700;
    expect(await cache.get('k', () => Promise.reject(new Error('down')))).toBe(1);
    await flush();
    now = 800;
    expect(await cache.get('k', async () => 9)).toBe(1); // reload failed; old value within its life
    await expect(cache.get('other', () => Promise.reject(new Error('down')))).rejects.toThrow('down');
    await flush();
    expect(await cache.get('other', async () => 5)).toBe(5);
  });
});
