/**
 * One V8 setting for a process that serves requests: no allocation-site pretenuring.
 *
 * V8 watches where objects are created; when a scavenge (the young generation's collection)
 * finds most objects from one place still alive, it decides that place makes long-lived objects
 * and allocates them in the old generation from then on, for good. A request's objects are all
 * alive while the request runs, so a scavenge that lands mid-request convinces V8 about places
 * whose objects die a millisecond later: the gateway's process had some 340 such decisions after
 * a few thousand requests. Those objects then die in the old generation, which fills about twice
 * as fast, and every full collection (mark-compact) costs marking on every thread and throws away
 * the optimized code of short-lived closures, which are compiled again (measured in
 * bench/cpu-breakdown.ts: docs/gateway.md, "Pretenuring").
 *
 * Node refuses this V8 flag in NODE_OPTIONS, so the process sets it on itself before it serves
 * anything: `setFlagsFromString` is how Node documents setting V8 flags at run time.
 */
import { setFlagsFromString } from 'node:v8';

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
