/**
 * How often the process's main thread has gone to sleep and been woken: its voluntary context
 * switches, from `/proc/self/status` (the main thread's own line, not the worker threads'). On a
 * virtual machine every wake-up costs CPU of its own, whatever the process then does (70–170 us
 * on the 2-vCPU Firecracker VM this was written on), so wake-ups per chunk say how much of a
 * per-chunk CPU figure is the machine's rather than the code's.
 */
import { readFileSync } from 'node:fs';

/** Cumulative voluntary context switches of the main thread; -1 where `/proc` is not there. */
export function mainThreadWakeups(): number {
  try {
    const m = /^voluntary_ctxt_switches:\s*(\d+)$/m.exec(readFileSync('/proc/self/status', 'latin1'));
    return m === null ? -1 : Number(m[1]);
  } catch {
    return -1;
  }
}
