/**
 * `bench-results/bench.json`, read and merged into: the parts of the bench that run after the
 * main one (the CPU share, the cost model) add their own members and keep the rest of the file.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from './bundle';

export const RESULTS_DIR = path.join(REPO_ROOT, 'bench-results');

/** The last bench.json, parsed; an empty object when there is none or it does not parse. */
export function readBenchJson(dir = RESULTS_DIR): Record<string, unknown> {
  const file = path.join(dir, 'bench.json');
  if (!existsSync(file)) return {};
  try {
    const parsed: unknown = JSON.parse(readFileSync(file, 'utf8'));
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** Writes `fields` over the members of bench.json they name, keeping the others; returns the file. */
export function mergeBenchJson(fields: Readonly<Record<string, unknown>>, dir = RESULTS_DIR): string {
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, 'bench.json');
  // Floats to four decimals: enough for a hundredth of a cent per million, and for milliseconds.
  const round = (_k: string, v: unknown): unknown => (typeof v === 'number' && !Number.isInteger(v) ? Math.round(v * 10_000) / 10_000 : v);
  writeFileSync(file, `${JSON.stringify({ ...readBenchJson(dir), ...fields }, round, 2)}\n`);
  return file;
}
