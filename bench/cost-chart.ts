/**
 * A hand-written SVG of the cost model: one horizontal bar per scenario, stacked by component
 * (Lambda, DynamoDB, logs, other), USD per million requests, with the goals drawn as lines. No
 * dependency: the file opens in any browser, like `chart.ts`'s latency CDFs.
 */
import type { Component } from './cost-model';

/** One bar: its label and its USD per million by component. */
export interface CostBar {
  readonly label: string;
  readonly parts: Readonly<Record<Component, number>>;
}

/** A goal line: a label and its USD per million. */
export interface GoalLine {
  readonly label: string;
  readonly usd: number;
}

const COLORS: Readonly<Record<Component, string>> = { lambda: '#ff7f0e', dynamodb: '#1f77b4', logs: '#2ca02c', other: '#9467bd' };
const ORDER: readonly Component[] = ['lambda', 'dynamodb', 'logs', 'other'];
const ROW = 26;
const LEFT = 330;
const RIGHT = 90;
const WIDTH = 1000;

function esc(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** A tick step that gives about six ticks up to `max`. */
export function tickStep(max: number): number {
  const raw = max / 6;
  const mag = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
}

/** The chart, `bars` top to bottom. */
export function costChart(title: string, subtitle: string, bars: readonly CostBar[], goals: readonly GoalLine[]): string {
  const totals = bars.map((b) => ORDER.reduce((s, c) => s + b.parts[c], 0));
  const max = Math.max(1, ...totals, ...goals.map((g) => g.usd)) * 1.08;
  const top = 76;
  const height = top + bars.length * ROW + 46;
  const x = (usd: number): number => LEFT + (usd / max) * (WIDTH - LEFT - RIGHT);
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="sans-serif">`);
  out.push(`<rect width="${WIDTH}" height="${height}" fill="white"/>`);
  out.push(`<text x="${WIDTH / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">${esc(title)}</text>`);
  out.push(`<text x="${WIDTH / 2}" y="40" text-anchor="middle" font-size="11">${esc(subtitle)}</text>`);
  ORDER.forEach((c, i) => {
    const lx = LEFT + i * 130;
    out.push(`<rect x="${lx}" y="50" width="14" height="10" fill="${COLORS[c]}"/><text x="${lx + 18}" y="59" font-size="11">${c === 'dynamodb' ? 'DynamoDB' : c === 'lambda' ? 'Lambda' : c}</text>`);
  });
  const step = tickStep(max);
  for (let v = 0; v <= max; v += step) {
    const tx = x(v).toFixed(1);
    out.push(`<line x1="${tx}" y1="${top - 4}" x2="${tx}" y2="${top + bars.length * ROW}" stroke="#eee"/>`);
    out.push(`<text x="${tx}" y="${top + bars.length * ROW + 14}" text-anchor="middle" font-size="10">$${Number(v.toPrecision(6))}</text>`);
  }
  out.push(`<text x="${(LEFT + WIDTH - RIGHT) / 2}" y="${height - 10}" text-anchor="middle" font-size="11">USD per million requests</text>`);
  bars.forEach((b, i) => {
    const y = top + i * ROW;
    out.push(`<text x="${LEFT - 8}" y="${y + 16}" text-anchor="end" font-size="11">${esc(b.label)}</text>`);
    let acc = 0;
    for (const c of ORDER) {
      const w = x(acc + b.parts[c]) - x(acc);
      if (w > 0) out.push(`<rect x="${x(acc).toFixed(1)}" y="${y + 4}" width="${w.toFixed(1)}" height="${ROW - 8}" fill="${COLORS[c]}"/>`);
      acc += b.parts[c];
    }
    out.push(`<text x="${(x(acc) + 4).toFixed(1)}" y="${y + 16}" font-size="11">$${(totals[i] as number).toFixed(2)}</text>`);
  });
  for (const g of goals) {
    const gx = x(g.usd).toFixed(1);
    out.push(`<line x1="${gx}" y1="${top - 6}" x2="${gx}" y2="${top + bars.length * ROW}" stroke="#d62728" stroke-width="1.5" stroke-dasharray="5,3"/>`);
    out.push(`<text x="${gx}" y="${top - 9}" text-anchor="middle" font-size="10" fill="#d62728">${esc(g.label)}</text>`);
  }
  out.push('</svg>', '');
  return out.join('\n');
}
