/**
 * A process's memory as the kernel counts it, read from outside (`/proc/<pid>/status`), so that
 * measuring a capped gateway's memory costs it no CPU: `VmRSS` now and `VmHWM`, the peak since
 * the peak was last reset (writing `5` to `/proc/<pid>/clear_refs`, Linux 4.0 and later).
 */
import { readFileSync, writeFileSync } from 'node:fs';

/** Resident memory now and at its peak, bytes. */
export interface ProcMemory {
  readonly rssBytes: number;
  readonly peakRssBytes: number;
}

/** Reads `VmRSS` and `VmHWM` (kB) from a `/proc/<pid>/status` text; undefined when either is missing. */
export function parseProcStatus(text: string): ProcMemory | undefined {
  const kb = (name: string): number | undefined => {
    const m = new RegExp(`^${name}:\\s+(\\d+)\\s+kB$`, 'm').exec(text);
    return m === null ? undefined : Number(m[1]) * 1024;
  };
  const rssBytes = kb('VmRSS');
  const peakRssBytes = kb('VmHWM');
  return rssBytes === undefined || peakRssBytes === undefined ? undefined : { rssBytes, peakRssBytes };
}

/** The process's memory, or undefined off Linux or once it has gone. */
export function procMemory(pid: number): ProcMemory | undefined {
  try {
    return parseProcStatus(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return undefined;
  }
}

/** Starts a new peak (`VmHWM` back to the current RSS); false where the kernel does not allow it. */
export function resetPeakRss(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}
