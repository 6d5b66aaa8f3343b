/**
 * V8 and a process that serves requests: no allocation-site pretenuring, and the young generation
 * collected between requests.
 *
 * **Pretenuring.** V8 watches where objects are created; when a scavenge (the young generation's
 * collection) finds most objects from one place still alive, it decides that place makes
 * long-lived objects and allocates them in the old generation from then on, for good. A request's
 * objects are all alive while the request runs, so a scavenge that lands mid-request convinces V8
 * about places whose objects die a millisecond later: the gateway's process had some 340 such
 * decisions after a few thousand requests. Those objects then die in the old generation, which fills about twice
 * as fast, and every full collection (mark-compact) costs marking on every thread and throws away
 * the optimized code of short-lived closures, which are compiled again (measured in
 * bench/cpu-breakdown.ts: docs/gateway.md, "Pretenuring").
 *
 * Node refuses this V8 flag in NODE_OPTIONS, so the process sets it on itself before it serves
 * anything: `setFlagsFromString` is how Node documents setting V8 flags at run time.
 *
 * **Between requests:** {@link collectBetweenRequests}.
 */
import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

let tuned = false;

/** Turns off allocation-site pretenuring for this process; once is enough, more is harmless. */
export function tuneV8ForRequests(): void {
  if (tuned) return;
  setFlagsFromString('--no-allocation-site-pretenuring');
  tuned = true;
}

/** Whether this process has turned pretenuring off (for tests). */
export function v8Tuned(): boolean {
  return tuned;
}

/**
 * How full the young generation may be when the process goes idle before it is collected there:
 * half, so that the next request (about 200 KB; a long stream a few hundred) never fills it, nor
 * reaches the 80% at which V8 schedules a scavenge of its own.
 */
export const IDLE_SCAVENGE_FILL = 0.5;

/** V8's `gc()`, with the collection's kind (`--expose-gc`). */
type Collect = (options: { readonly type: 'minor' | 'major' }) => void;

let collect: Collect | undefined;

/**
 * Collects the young generation (a scavenge) when it is at least {@link IDLE_SCAVENGE_FILL} full;
 * for a process with no request in flight. Returns whether it collected.
 *
 * V8 scavenges when the young generation fills, or a little before, from a task the event loop
 * runs while a request awaits its store or its provider: either way in the middle of a request,
 * which waits for it, and under a small CPU share (Lambda's 256 MB: 2.9 ms of CPU in each 20 ms)
 * the pause can push the request past its period's quota, a whole period later. Between
 * invocations nothing waits on the process and the requests' objects are dead, so the same
 * collection copies only the process's own caches and delays no one: on-demand Lambda bills it
 * to the invocation that ends with it, after its reply and settlement. Measured in
 * bench/cpu-breakdown.ts on Node 22 (docs/gateway.md, "Between requests"): every scavenge in the
 * measured batches moved out of the requests, about as much collecting in all.
 *
 * `gc` comes from V8's `--expose-gc`, set at run time like the flag above and fetched from a fresh
 * context, so the running context's global gains nothing (contexts created afterwards carry it).
 * Lambda's Node.js bootstrap already starts `node` with `--expose-gc` (docs/cost.md, "The heap");
 * local mode and the tests get it here.
 */
export function collectBetweenRequests(): boolean {
  const young = youngGeneration();
  // No young generation found (a V8 that names it otherwise): never collect, rather than always.
  if (young.capacityBytes === 0 || young.usedBytes < IDLE_SCAVENGE_FILL * young.capacityBytes) return false;
  collect ??= gcFunction();
  if (collect === NO_GC) return false;
  collect({ type: 'minor' });
  return true;
}

/** What {@link gcFunction} gives when V8's `gc()` cannot be had: the gateway goes on without it. */
const NO_GC: Collect = () => undefined;

/** The young generation's use and its current capacity (what it holds before V8 must collect it), bytes. */
export function youngGeneration(): { readonly usedBytes: number; readonly capacityBytes: number } {
  for (const space of getHeapSpaceStatistics()) {
    if (space.space_name === 'new_space') return { usedBytes: space.space_used_size, capacityBytes: space.space_used_size + space.space_available_size };
  }
  return { usedBytes: 0, capacityBytes: 0 };
}

function gcFunction(): Collect {
  try {
    setFlagsFromString('--expose-gc');
    const fetched: unknown = runInNewContext('gc');
    return typeof fetched === 'function' ? (fetched as Collect) : NO_GC;
  } catch {
    // A Node that no longer exposes it this way: V8 collects as it always did, mid-request.
    return NO_GC;
  }
}
