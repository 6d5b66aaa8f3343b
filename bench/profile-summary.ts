/**
 * Reads a V8 CPU profile of the benchmark's gateway process (`--profile`) and says where the time
 * went, by source module and by function. The gateway runs from an esbuild bundle that is not
 * minified, where each module's code follows a `// path/to/module.ts` comment: a sample's line
 * in the bundle is mapped back to its module by the nearest such comment above it.
 *
 * V8 samples on a wall-clock timer, so a thread waiting to be scheduled inside a system call
 * (a loopback write that wakes the reader) is charged to that call; on a busy machine those
 * native frames are inflated, the JavaScript proportions much less so.
 */
import { readFileSync } from 'node:fs';

interface CallFrame {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber: number;
}

interface ProfileNode {
  readonly id: number;
  readonly callFrame: CallFrame;
}

interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

/** Self time of one place, microseconds. */
export interface Entry {
  readonly name: string;
  readonly us: number;
  readonly share: number;
}

export interface ProfileSummary {
  readonly sampledUs: number;
  readonly idleUs: number;
  readonly byModule: readonly Entry[];
  readonly byFunction: readonly Entry[];
}

function moduleStarts(bundleText: string): { line: number; module: string }[] {
  const starts: { line: number; module: string }[] = [];
  bundleText.split('\n').forEach((text, line) => {
    const m = /^\/\/ ((?:[\w@.-]+\/)*[\w@.-]+\.(?:ts|js|cjs|mjs|json))$/.exec(text);
    if (m !== null) starts.push({ line, module: m[1] as string });
  });
  return starts;
}

function moduleAt(starts: readonly { line: number; module: string }[], line: number): string {
  let lo = 0;
  let hi = starts.length - 1;
  let found = '(bundle prelude)';
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const s = starts[mid] as { line: number; module: string };
    if (s.line <= line) {
      found = s.module;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found;
}

function placeOf(frame: CallFrame, bundleName: string, starts: readonly { line: number; module: string }[]): string {
  const url = frame.url;
  if (url === '') return frame.functionName === '' ? '(native)' : `(${frame.functionName.replace(/^\(|\)$/g, '')})`;
  if (url.endsWith(bundleName)) return moduleAt(starts, frame.lineNumber);
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg !== null) return pkg[1] as string;
  if (url.startsWith('node:')) return url;
  return url;
}

/** Summarises `profilePath`, whose code ran from `bundlePath`. */
export function summarizeProfile(profilePath: string, bundlePath: string, top = 15): ProfileSummary {
  const profile = JSON.parse(readFileSync(profilePath, 'utf8')) as CpuProfile;
  const starts = moduleStarts(readFileSync(bundlePath, 'utf8'));
  const bundleName = bundlePath.split('/').pop() ?? bundlePath;
  const byId = new Map<number, ProfileNode>(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  profile.samples.forEach((id, i) => selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
  let sampledUs = 0;
  let idleUs = 0;
  const modules = new Map<string, number>();
  const functions = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const node = byId.get(id);
    if (node === undefined) continue;
    sampledUs += us;
    if (node.callFrame.functionName === '(idle)') {
      idleUs += us;
      continue;
    }
    const place = placeOf(node.callFrame, bundleName, starts);
    modules.set(place, (modules.get(place) ?? 0) + us);
    const fn = `${node.callFrame.functionName || '(anonymous)'} [${place}]`;
    functions.set(fn, (functions.get(fn) ?? 0) + us);
  }
  const busy = Math.max(1, sampledUs - idleUs);
  const rank = (m: Map<string, number>): Entry[] =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, us]) => ({ name, us, share: us / busy }));
  return { sampledUs, idleUs, byModule: rank(modules), byFunction: rank(functions) };
}

/** Two small tables: where the busy (non-idle) time went. */
export function renderProfile(s: ProfileSummary): string {
  const line = (e: Entry): string => `  ${(e.us / 1000).toFixed(0).padStart(7)} ms ${(e.share * 100).toFixed(1).padStart(5)}%  ${e.name}`;
  return [
    `gateway CPU profile: ${((s.sampledUs - s.idleUs) / 1000).toFixed(0)} ms busy of ${(s.sampledUs / 1000).toFixed(0)} ms sampled`,
    'self time by module:',
    ...s.byModule.map(line),
    'self time by function:',
    ...s.byFunction.map(line),
  ].join('\n');
}
