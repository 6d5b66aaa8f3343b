/**
 * Usage rollups as chart series: one x value per UTC day of a range and one series per model,
 * key or member, each a list of integer micro-units (a day with nothing is 0). Pure; the page
 * draws the series and writes the axis in major units.
 */

/** One rollup row as the usage report gives it. */
export interface SeriesRow {
  readonly periodId: string;
  /** The model id, key id or member id; null groups rows with nobody behind them. */
  readonly id: string | null;
  readonly chargeMicros: number;
}

/** Series over a range of days. */
export interface DaySeries {
  /** `yyyy-mm-dd`, oldest first. */
  readonly days: readonly string[];
  /** Unix seconds of each day's UTC midnight (the chart's x axis). */
  readonly x: readonly number[];
  readonly series: readonly { readonly label: string; readonly micros: readonly number[] }[];
}

/** Every `yyyy-mm-dd` from `from` to `to`, inclusive. */
export function daysBetween(from: string, to: string): string[] {
  const out: string[] = [];
  const end = Date.parse(`${to}T00:00:00Z`);
  for (let t = Date.parse(`${from}T00:00:00Z`); t <= end && out.length < 400; t += 86_400_000) out.push(new Date(t).toISOString().slice(0, 10));
  return out;
}

/** Groups rows into one series per id, labelled by `label`, summed per day, largest total first. */
export function daySeries(from: string, to: string, rows: readonly SeriesRow[], label: (id: string | null) => string): DaySeries {
  const days = daysBetween(from, to);
  const index = new Map(days.map((d, i) => [d, i]));
  const byId = new Map<string, { label: string; micros: number[] }>();
  for (const r of rows) {
    const i = index.get(r.periodId);
    if (i === undefined) continue;
    const key = r.id ?? '';
    const s = byId.get(key) ?? { label: label(r.id), micros: days.map(() => 0) };
    s.micros[i] = (s.micros[i] ?? 0) + r.chargeMicros;
    byId.set(key, s);
  }
  const total = (m: readonly number[]): number => m.reduce((a, b) => a + b, 0);
  const series = [...byId.values()].sort((a, b) => total(b.micros) - total(a.micros) || a.label.localeCompare(b.label));
  return { days, x: days.map((d) => Date.parse(`${d}T00:00:00Z`) / 1000), series };
}
