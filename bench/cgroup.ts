/**
 * Lambda's CPU share, emulated: a CPU cgroup of the bench's own (`sluice-bench-<pid>`), holding
 * the gateway process and nothing else, capped by CFS bandwidth control at the share Lambda gives
 * a memory size (`memory ÷ 1,769` of one vCPU). cgroup v1 (`cpu.cfs_period_us`,
 * `cpu.cfs_quota_us`, burst off) and v2 (`cpu.max`, `cpu.max.burst`) are both handled; where
 * neither is writable, `detectCpuCgroup` says why and the bench skips the part.
 *
 * The group is removed at the end, on failure and on a signal: its process is moved back to the
 * group it came from, then the directory is removed (a cgroup with a process in it cannot be).
 * Every file operation goes through `CgroupFs`, so the logic is tested on a fake.
 */
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** The file operations a cgroup needs; the real one is `nodeCgroupFs`. */
export interface CgroupFs {
  exists(p: string): boolean;
  read(p: string): string;
  write(p: string, text: string): void;
  mkdir(p: string): void;
  rmdir(p: string): void;
}

export const nodeCgroupFs: CgroupFs = {
  exists: (p) => existsSync(p),
  read: (p) => readFileSync(p, 'utf8'),
  write: (p, text) => writeFileSync(p, text),
  mkdir: (p) => mkdirSync(p),
  rmdir: (p) => rmdirSync(p),
};

export type CgroupVersion = 'v1' | 'v2';

/** Where CPU caps can be set, or why not. */
export type CpuCgroupSupport = { readonly ok: true; readonly version: CgroupVersion; readonly dir: string } | { readonly ok: false; readonly reason: string };

/** Thrown when a cgroup operation fails (creating, writing a limit, moving a process). */
export class CgroupError extends Error {
  override readonly name = 'CgroupError';
}

/** The kernel's bounds on a CFS period and quota, microseconds. */
export const MIN_QUOTA_US = 1_000;
export const MIN_PERIOD_US = 1_000;
export const MAX_PERIOD_US = 1_000_000;

/**
 * The quota giving `memoryMb` Lambda's share of one vCPU over `periodUs`: `period × memory ÷
 * 1,769`, rounded to the microsecond, at least the kernel's 1 ms. Above 1,769 MB it exceeds the
 * period: more than one CPU's worth, spread over the CPUs the group may use.
 */
export function quotaFor(memoryMb: number, periodUs: number, mbPerVcpu = 1_769): number {
  if (!Number.isInteger(periodUs) || periodUs < MIN_PERIOD_US || periodUs > MAX_PERIOD_US) throw new CgroupError(`a CFS period must be an integer from ${MIN_PERIOD_US} to ${MAX_PERIOD_US} µs, got ${periodUs}`);
  if (!(memoryMb > 0)) throw new CgroupError(`memory must be positive, got ${memoryMb}`);
  return Math.max(MIN_QUOTA_US, Math.round((periodUs * memoryMb) / mbPerVcpu));
}

/** Throttling so far: periods that ran, periods that ran out of quota, and time spent waiting. */
export interface CpuStat {
  readonly periods: number;
  readonly throttledPeriods: number;
  readonly throttledUs: number;
}

/** Reads `cpu.stat` (v1 reports throttled time in nanoseconds, v2 in microseconds). */
export function parseCpuStat(text: string, version: CgroupVersion): CpuStat {
  const fields = new Map<string, number>();
  for (const line of text.split('\n')) {
    const [k, v] = line.trim().split(/\s+/);
    if (k !== undefined && v !== undefined && /^\d+$/.test(v)) fields.set(k, Number(v));
  }
  const throttledUs = version === 'v1' ? (fields.get('throttled_time') ?? 0) / 1_000 : (fields.get('throttled_usec') ?? 0);
  return { periods: fields.get('nr_periods') ?? 0, throttledPeriods: fields.get('nr_throttled') ?? 0, throttledUs };
}

/** The difference of two stats. */
export function statDelta(a: CpuStat, b: CpuStat): CpuStat {
  return { periods: b.periods - a.periods, throttledPeriods: b.throttledPeriods - a.throttledPeriods, throttledUs: b.throttledUs - a.throttledUs };
}

/** The path of a process's group in a hierarchy, from `/proc/<pid>/cgroup` (`"/"` when not found). */
export function groupOf(procCgroup: string, version: CgroupVersion): string {
  for (const line of procCgroup.split('\n')) {
    const [, controllers, p] = /^\d+:([^:]*):(.*)$/.exec(line.trim()) ?? [];
    if (p === undefined) continue;
    if (version === 'v2' ? controllers === '' : (controllers ?? '').split(',').includes('cpu')) return p === '' ? '/' : p;
  }
  return '/';
}

/**
 * Where a CPU cgroup of the bench's own can be made: the v1 `cpu` hierarchy, else a v2 unified
 * one with the `cpu` controller (enabled for children of the root if it is not yet). Writability
 * is proved by making and removing a probe group.
 */
export function detectCpuCgroup(fs: CgroupFs = nodeCgroupFs, root = '/sys/fs/cgroup', probe = `sluice-bench-probe-${process.pid}`): CpuCgroupSupport {
  const tryProbe = (dir: string, version: CgroupVersion): CpuCgroupSupport => {
    const p = path.join(dir, probe);
    try {
      fs.mkdir(p);
    } catch (err) {
      return { ok: false, reason: `cannot create a cgroup under ${dir} (${err instanceof Error ? err.message : String(err)}); the bench needs root and a writable cgroup file system` };
    }
    try {
      fs.rmdir(p);
    } catch {
      // Left for the next run's cleanup; it holds no process.
    }
    return { ok: true, version, dir };
  };
  const v1 = path.join(root, 'cpu');
  if (fs.exists(path.join(v1, 'cpu.cfs_quota_us'))) return tryProbe(v1, 'v1');
  const controllers = path.join(root, 'cgroup.controllers');
  if (fs.exists(controllers)) {
    if (!fs.read(controllers).split(/\s+/).includes('cpu')) return { ok: false, reason: `the cgroup v2 hierarchy at ${root} offers no cpu controller` };
    const subtree = path.join(root, 'cgroup.subtree_control');
    try {
      if (!fs.read(subtree).split(/\s+/).includes('cpu')) fs.write(subtree, '+cpu');
    } catch (err) {
      return { ok: false, reason: `cannot enable the cpu controller in ${subtree} (${err instanceof Error ? err.message : String(err)})` };
    }
    return tryProbe(root, 'v2');
  }
  return { ok: false, reason: `no cgroup cpu controller found under ${root} (neither cgroup v1 cpu/ nor a v2 cgroup.controllers)` };
}

/** A cgroup holding one process, its CPU capped. */
export class CpuCap {
  private readonly moved = new Map<number, string>();
  private removed = false;

  private constructor(
    private readonly fs: CgroupFs,
    readonly version: CgroupVersion,
    /** The hierarchy's mount point (v1 `.../cpu`, v2 the unified root). */
    private readonly hierarchy: string,
    readonly dir: string,
  ) {}

  /** Makes the group `name` under the hierarchy `support` found. */
  static create(support: Extract<CpuCgroupSupport, { ok: true }>, name = `sluice-bench-${process.pid}`, fs: CgroupFs = nodeCgroupFs): CpuCap {
    const dir = path.join(support.dir, name);
    try {
      fs.mkdir(dir);
    } catch (err) {
      throw new CgroupError(`cannot create ${dir}: ${err instanceof Error ? err.message : String(err)}`);
    }
    return new CpuCap(fs, support.version, support.dir, dir);
  }

  private write(file: string, text: string): void {
    try {
      this.fs.write(path.join(this.dir, file), text);
    } catch (err) {
      throw new CgroupError(`cannot write ${JSON.stringify(text)} to ${path.join(this.dir, file)}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  /** Caps the group at `quotaUs` of CPU per `periodUs`, with no burst carried over from idle periods. */
  limit(quotaUs: number, periodUs: number): void {
    if (this.version === 'v1') {
      // The quota first as unlimited, so that no intermediate period/quota pair is refused.
      this.write('cpu.cfs_quota_us', '-1');
      this.write('cpu.cfs_period_us', String(periodUs));
      this.write('cpu.cfs_quota_us', String(quotaUs));
      if (this.fs.exists(path.join(this.dir, 'cpu.cfs_burst_us'))) this.write('cpu.cfs_burst_us', '0');
    } else {
      this.write('cpu.max', `${quotaUs} ${periodUs}`);
      if (this.fs.exists(path.join(this.dir, 'cpu.max.burst'))) this.write('cpu.max.burst', '0');
    }
  }

  /** Lifts the cap (the group keeps its process). */
  unlimit(): void {
    if (this.version === 'v1') this.write('cpu.cfs_quota_us', '-1');
    else this.write('cpu.max', 'max');
  }

  /** Moves process `pid` (all its threads) into the group, remembering where it was. */
  add(pid: number, procCgroup: string): void {
    this.moved.set(pid, groupOf(procCgroup, this.version));
    this.write('cgroup.procs', String(pid));
  }

  /** Throttling so far. */
  stat(): CpuStat {
    return parseCpuStat(this.fs.read(path.join(this.dir, 'cpu.stat')), this.version);
  }

  /** Whether the group is gone. */
  get isRemoved(): boolean {
    return this.removed;
  }

  /**
   * Moves every process it took back where it came from (those still alive: `alive(pid)`), then
   * removes the group; returns what it could not do. One attempt, synchronous (an exit handler
   * can call it); idempotent; never throws.
   */
  remove(alive: (pid: number) => boolean = processAlive): string[] {
    if (this.removed) return [];
    const problems: string[] = [];
    for (const [pid, from] of this.moved) {
      if (!alive(pid)) continue;
      try {
        this.fs.write(path.join(this.hierarchy, from, 'cgroup.procs'), String(pid));
      } catch (err) {
        problems.push(`moving ${pid} back to ${from}: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
    try {
      this.fs.rmdir(this.dir);
      this.removed = true;
    } catch (err) {
      problems.push(`removing ${this.dir}: ${err instanceof Error ? err.message : String(err)}`);
    }
    return problems;
  }
}

/**
 * `cap.remove()` until the group is gone, `attempts` times `delayMs` apart: a process that is
 * exiting (a Ctrl-C reaches the gateway too) is not moved out, and holds the group until it has
 * exited. Returns what was still not done at the end (nothing when the group is gone).
 */
export async function releaseCap(cap: Pick<CpuCap, 'remove' | 'isRemoved'>, attempts = 50, delayMs = 100, alive: (pid: number) => boolean = processAlive): Promise<string[]> {
  let problems: string[] = [];
  for (let i = 0; i < attempts; i += 1) {
    problems = cap.remove(alive);
    if (cap.isRemoved) return [];
    await new Promise((r) => setTimeout(r, delayMs));
  }
  return problems;
}

/** Whether a process exists (signal 0 checks without sending). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
