/**
 * Lambda's CPU share emulated with a cgroup (`bench/cgroup.ts`): the quota for a memory size, the
 * files written for cgroup v1 and v2, the process moved in and back out, the group removed; on an
 * in-memory file system that behaves as a cgroup one does (a group with a process in it cannot be
 * removed). And the memory read from `/proc/<pid>/status` (`bench/proc-status.ts`).
 */
import path from 'node:path';
import { CgroupError, CpuCap, detectCpuCgroup, groupOf, parseCpuStat, quotaFor, releaseCap, statDelta, type CgroupFs } from '../../bench/cgroup';
import { parseProcStatus, procMemory } from '../../bench/proc-status';

/** A cgroup file system in memory: directories, files, and the processes each group holds. */
class FakeCgroupFs implements CgroupFs {
  readonly dirs = new Set<string>();
  readonly files = new Map<string, string>();
  readonly writes: [string, string][] = [];
  readonly procs = new Map<string, Set<string>>();
  failMkdir = false;

  constructor(dirs: readonly string[], files: Readonly<Record<string, string>>) {
    for (const d of dirs) this.dirs.add(d);
    for (const [f, t] of Object.entries(files)) this.files.set(f, t);
  }

  exists(p: string): boolean {
    return this.dirs.has(p) || this.files.has(p);
  }

  read(p: string): string {
    const t = this.files.get(p);
    if (t === undefined) throw new Error(`ENOENT ${p}`);
    return t;
  }

  write(p: string, text: string): void {
    const dir = path.dirname(p);
    if (!this.dirs.has(dir)) throw new Error(`ENOENT ${p}`);
    this.writes.push([p, text]);
    if (path.basename(p) === 'cgroup.procs') {
      for (const set of this.procs.values()) set.delete(text);
      if (!this.procs.has(dir)) this.procs.set(dir, new Set());
      this.procs.get(dir)?.add(text);
      return;
    }
    this.files.set(p, text);
  }

  mkdir(p: string): void {
    if (this.failMkdir) throw new Error('EACCES');
    if (this.dirs.has(p)) throw new Error(`EEXIST ${p}`);
    this.dirs.add(p);
    this.files.set(path.join(p, 'cpu.stat'), 'nr_periods 0\nnr_throttled 0\nthrottled_time 0\n');
  }

  rmdir(p: string): void {
    if ((this.procs.get(p)?.size ?? 0) > 0) throw new Error(`EBUSY ${p}`);
    if (!this.dirs.delete(p)) throw new Error(`ENOENT ${p}`);
  }
}

const V1 = (): FakeCgroupFs => new FakeCgroupFs(['/cg', '/cg/cpu'], { '/cg/cpu/cpu.cfs_quota_us': '-1', '/cg/cpu/cpu.cfs_period_us': '100000' });
const V2 = (subtree = ''): FakeCgroupFs => new FakeCgroupFs(['/cg'], { '/cg/cgroup.controllers': 'cpuset cpu io memory pids', '/cg/cgroup.subtree_control': subtree });

describe('quotaFor', () => {
  it.each([
    [128, 20_000, 1_447],
    [256, 20_000, 2_894],
    [512, 20_000, 5_789],
    [1_024, 20_000, 11_577],
    [1_769, 20_000, 20_000],
    [3_538, 20_000, 40_000],
    [128, 100_000, 7_236],
    // 128 MB of a 10 ms period is 0.72 ms: the kernel's least quota, 1 ms, is the floor.
    [128, 10_000, 1_000],
  ])('%i MB over a %i µs period is %i µs', (mb, period, quota) => {
    expect(quotaFor(mb, period)).toBe(quota);
  });

  it.each([[999], [1_000_001], [1.5]])('refuses a period of %p µs', (period) => {
    expect(() => quotaFor(128, period)).toThrow(CgroupError);
  });
});

describe('parseCpuStat', () => {
  it('reads cgroup v1 (throttled time in ns) and v2 (in µs)', () => {
    expect(parseCpuStat('nr_periods 120\nnr_throttled 80\nthrottled_time 1500000000\nnr_bursts 0\n', 'v1')).toEqual({ periods: 120, throttledPeriods: 80, throttledUs: 1_500_000 });
    expect(parseCpuStat('usage_usec 5\nuser_usec 3\nsystem_usec 2\nnr_periods 7\nnr_throttled 2\nthrottled_usec 300\n', 'v2')).toEqual({ periods: 7, throttledPeriods: 2, throttledUs: 300 });
    expect(statDelta({ periods: 1, throttledPeriods: 1, throttledUs: 10 }, { periods: 5, throttledPeriods: 3, throttledUs: 70 })).toEqual({ periods: 4, throttledPeriods: 2, throttledUs: 60 });
  });
});

describe('groupOf', () => {
  const text = '9:name=systemd:/\n4:memory:/x\n2:cpuacct:/\n1:cpu,cpuacct:/user/42\n0::/unified/a\n';
  it('finds the cpu group in v1 and the unified one in v2', () => {
    expect(groupOf(text, 'v1')).toBe('/user/42');
    expect(groupOf(text, 'v2')).toBe('/unified/a');
    expect(groupOf('', 'v1')).toBe('/');
  });
});

describe('detectCpuCgroup', () => {
  it('finds the v1 cpu hierarchy and proves it writable, leaving no probe', () => {
    const fs = V1();
    expect(detectCpuCgroup(fs, '/cg', 'probe')).toEqual({ ok: true, version: 'v1', dir: '/cg/cpu' });
    expect(fs.dirs.has('/cg/cpu/probe')).toBe(false);
  });

  it('finds v2 and enables the cpu controller for the root\'s children when it is off', () => {
    const fs = V2('memory pids');
    expect(detectCpuCgroup(fs, '/cg', 'probe')).toEqual({ ok: true, version: 'v2', dir: '/cg' });
    expect(fs.writes).toContainEqual(['/cg/cgroup.subtree_control', '+cpu']);
    const on = V2('cpu memory');
    detectCpuCgroup(on, '/cg', 'probe');
    expect(on.writes).toEqual([]);
  });

  it('says why when it cannot', () => {
    const denied = V1();
    denied.failMkdir = true;
    const r = detectCpuCgroup(denied, '/cg', 'probe');
    expect(r.ok).toBe(false);
    expect(r.ok ? '' : r.reason).toMatch(/cannot create a cgroup under \/cg\/cpu.*EACCES/);
    const none = detectCpuCgroup(new FakeCgroupFs(['/cg'], {}), '/cg', 'probe');
    expect(none.ok ? '' : none.reason).toMatch(/no cgroup cpu controller/);
    const noCpu = new FakeCgroupFs(['/cg'], { '/cg/cgroup.controllers': 'memory pids' });
    const r2 = detectCpuCgroup(noCpu, '/cg', 'probe');
    expect(r2.ok ? '' : r2.reason).toMatch(/no cpu controller/);
  });
});

describe('CpuCap', () => {
  it('v1: sets the period and the quota with burst off, moves the process in, and out again before removing the group', () => {
    const fs = V1();
    fs.procs.set('/cg/cpu', new Set(['4242']));
    const cap = CpuCap.create({ ok: true, version: 'v1', dir: '/cg/cpu' }, 'bench-1', fs);
    fs.files.set('/cg/cpu/bench-1/cpu.cfs_burst_us', '0');
    cap.limit(1_447, 20_000);
    expect(fs.writes.map(([p, t]) => `${path.basename(p)}=${t}`)).toEqual(['cpu.cfs_quota_us=-1', 'cpu.cfs_period_us=20000', 'cpu.cfs_quota_us=1447', 'cpu.cfs_burst_us=0']);
    cap.add(4242, '1:cpu:/\n');
    expect(fs.procs.get('/cg/cpu/bench-1')).toEqual(new Set(['4242']));
    expect(fs.procs.get('/cg/cpu')?.has('4242')).toBe(false);
    // A group holding a process cannot be removed: the process goes back first.
    expect(cap.remove(() => true)).toEqual([]);
    expect(fs.dirs.has('/cg/cpu/bench-1')).toBe(false);
    expect(fs.procs.get('/cg/cpu')?.has('4242')).toBe(true);
    expect(cap.remove(() => true)).toEqual([]);
  });

  it('v2: writes cpu.max, and "max" to lift the cap', () => {
    const fs = V2('cpu');
    const cap = CpuCap.create({ ok: true, version: 'v2', dir: '/cg' }, 'bench-2', fs);
    cap.limit(2_894, 20_000);
    cap.unlimit();
    expect(fs.writes.map(([p, t]) => `${path.basename(p)}=${t}`)).toEqual(['cpu.max=2894 20000', 'cpu.max=max']);
  });

  it('removes the group of a process that has exited without moving it', () => {
    const fs = V1();
    const cap = CpuCap.create({ ok: true, version: 'v1', dir: '/cg/cpu' }, 'bench-3', fs);
    cap.add(7, '1:cpu:/\n');
    fs.procs.get('/cg/cpu/bench-3')?.clear();
    const writesBefore = fs.writes.length;
    expect(cap.remove(() => false)).toEqual([]);
    expect(fs.writes.length).toBe(writesBefore);
    expect(fs.dirs.has('/cg/cpu/bench-3')).toBe(false);
  });

  it('reports, not throws, what it could not undo', () => {
    const fs = V1();
    const cap = CpuCap.create({ ok: true, version: 'v1', dir: '/cg/cpu' }, 'bench-4', fs);
    cap.add(9, '1:cpu:/gone\n');
    const problems = cap.remove(() => true);
    expect(problems).toHaveLength(2);
    expect(problems[0]).toMatch(/moving 9 back to \/gone/);
    expect(problems[1]).toMatch(/EBUSY/);
  });

  it('keeps trying while an exiting process still holds the group, then gives up saying why', async () => {
    const fs = V1();
    const cap = CpuCap.create({ ok: true, version: 'v1', dir: '/cg/cpu' }, 'bench-6', fs);
    cap.add(11, '1:cpu:/\n');
    // The process is exiting: it is not moved out (the write is ignored), and it leaves the group on its own later.
    let tries = 0;
    const exiting = { remove: () => (++tries < 3 ? ['removing: EBUSY'] : cap.remove(() => false)), get isRemoved() { return cap.isRemoved; } };
    fs.procs.get('/cg/cpu/bench-6')?.clear();
    expect(await releaseCap(exiting, 10, 1)).toEqual([]);
    expect(tries).toBe(3);
    const stuck = { remove: () => ['removing: EBUSY'], isRemoved: false };
    expect(await releaseCap(stuck, 3, 1)).toEqual(['removing: EBUSY']);
  });

  it('reads its throttling', () => {
    const fs = V1();
    const cap = CpuCap.create({ ok: true, version: 'v1', dir: '/cg/cpu' }, 'bench-5', fs);
    fs.files.set('/cg/cpu/bench-5/cpu.stat', 'nr_periods 10\nnr_throttled 4\nthrottled_time 2000000\n');
    expect(cap.stat()).toEqual({ periods: 10, throttledPeriods: 4, throttledUs: 2_000 });
  });

  it('fails with the path when the group cannot be made or written', () => {
    const fs = V1();
    fs.failMkdir = true;
    expect(() => CpuCap.create({ ok: true, version: 'v1', dir: '/cg/cpu' }, 'x', fs)).toThrow(/cannot create \/cg\/cpu\/x/);
  });
});

describe('proc status', () => {
  it('reads the resident memory and its peak', () => {
    expect(parseProcStatus('Name:\tnode\nVmHWM:\t  150000 kB\nVmRSS:\t  120000 kB\n')).toEqual({ rssBytes: 120_000 * 1024, peakRssBytes: 150_000 * 1024 });
    expect(parseProcStatus('Name:\tnode\n')).toBeUndefined();
  });

  it('reads this process', () => {
    const m = procMemory(process.pid);
    if (process.platform === 'linux') {
      expect(m?.rssBytes).toBeGreaterThan(0);
      expect(m?.peakRssBytes).toBeGreaterThanOrEqual(m?.rssBytes ?? 0);
    } else expect(m).toBeUndefined();
  });
});
