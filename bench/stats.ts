/**
 * Small statistics for the benchmark: percentiles over recorded samples, and a summary shape that
 * the table, the JSON and the chart share.
 */

/** A distribution's summary, in the samples' own unit. */
export interface Summary {
  readonly n: number;
  readonly mean: number;
  readonly min: number;
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly max: number;
}

/** The value at quantile `q` (0..1) of ascending `sorted`, by linear interpolation. */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  const a = sorted[lo] as number;
  const b = sorted[hi] as number;
  return a + (b - a) * (pos - lo);
}

export function sortedCopy(samples: readonly number[]): number[] {
  return [...samples].sort((a, b) => a - b);
}

export function summarize(samples: readonly number[]): Summary {
  const s = sortedCopy(samples);
  const sum = s.reduce((acc, v) => acc + v, 0);
  return {
    n: s.length,
    mean: s.length === 0 ? Number.NaN : sum / s.length,
    min: s[0] ?? Number.NaN,
    p50: quantile(s, 0.5),
    p90: quantile(s, 0.9),
    p99: quantile(s, 0.99),
    max: s[s.length - 1] ?? Number.NaN,
  };
}

/** Counts of each distinct value, ascending by value (for round trips per request). */
export function histogram(values: readonly number[]): { value: number; count: number }[] {
  const counts = new Map<number, number>();
  for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
  return [...counts.entries()].sort((a, b) => a[0] - b[0]).map(([value, count]) => ({ value, count }));
}

/** Rounds for display and JSON: 3 significant decimals below 10, fewer above. */
export function round(v: number): number {
  if (!Number.isFinite(v)) return v;
  const abs = Math.abs(v);
  const digits = abs >= 100 ? 1 : abs >= 10 ? 2 : 3;
  const f = 10 ** digits;
  return Math.round(v * f) / f;
}
