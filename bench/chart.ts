/**
 * A hand-written SVG of latency distributions: one panel per measurement, each an empirical CDF
 * on a logarithmic time axis, gateway against direct (and the DynamoDB transaction as the floor
 * where it applies). No dependency: the file opens in any browser.
 */
import { quantile, sortedCopy } from './stats';

export interface Series {
  readonly label: string;
  readonly color: string;
  readonly dashed?: boolean;
  /** Samples in milliseconds. */
  readonly samples: readonly number[];
}

export interface Panel {
  readonly title: string;
  readonly series: readonly Series[];
}

const W = 460;
const H = 300;
const M = { left: 52, right: 14, top: 60, bottom: 40 };
const POINTS = 240;

function esc(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function niceTicks(lo: number, hi: number): number[] {
  const ticks: number[] = [];
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e += 1) {
    for (const m of [1, 2, 5]) {
      const v = m * 10 ** e;
      if (v >= lo && v <= hi) ticks.push(v);
    }
  }
  return ticks;
}

function fmtTick(v: number): string {
  if (v >= 1) return String(Math.round(v * 100) / 100);
  return String(Number(v.toPrecision(2)));
}

function panelSvg(panel: Panel, ox: number, oy: number): string {
  const all = panel.series.flatMap((s) => s.samples).filter((v) => v > 0 && Number.isFinite(v));
  if (all.length === 0) return '';
  const sortedAll = sortedCopy(all);
  // The lowest half percent is left off the axis (clamped to its edge), so one near-zero sample
  // (two frames in one read) does not squeeze the rest of a log axis.
  const lo = Math.max(1e-2, quantile(sortedAll, 0.005) * 0.8);
  const hi = (sortedAll[sortedAll.length - 1] as number) * 1.1;
  const lx = (v: number): number => ox + M.left + ((Math.log10(Math.max(v, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * (W - M.left - M.right);
  const ly = (q: number): number => oy + H - M.bottom - q * (H - M.top - M.bottom);
  const parts: string[] = [];
  parts.push(`<text x="${ox + W / 2}" y="${oy + 18}" text-anchor="middle" font-size="13" font-weight="bold">${esc(panel.title)}</text>`);
  parts.push(`<rect x="${ox + M.left}" y="${oy + M.top}" width="${W - M.left - M.right}" height="${H - M.top - M.bottom}" fill="none" stroke="#999"/>`);
  for (const t of niceTicks(lo, hi)) {
    const x = lx(t).toFixed(1);
    parts.push(`<line x1="${x}" y1="${oy + M.top}" x2="${x}" y2="${oy + H - M.bottom}" stroke="#eee"/>`);
    parts.push(`<text x="${x}" y="${oy + H - M.bottom + 14}" text-anchor="middle" font-size="10">${fmtTick(t)}</text>`);
  }
  for (const q of [0, 0.25, 0.5, 0.75, 0.9, 0.99, 1]) {
    const y = ly(q).toFixed(1);
    parts.push(`<line x1="${ox + M.left}" y1="${y}" x2="${ox + W - M.right}" y2="${y}" stroke="${q === 0.5 || q === 0.99 ? '#ccc' : '#f2f2f2'}"/>`);
    parts.push(`<text x="${ox + M.left - 4}" y="${(Number(y) + 3).toFixed(1)}" text-anchor="end" font-size="10">${q === 0.99 ? 'p99' : q === 0.5 ? 'p50' : q.toFixed(2)}</text>`);
  }
  parts.push(`<text x="${ox + W / 2}" y="${oy + H - 8}" text-anchor="middle" font-size="11">milliseconds (log scale)</text>`);
  panel.series.forEach((s, i) => {
    const sorted = sortedCopy(s.samples.filter((v) => Number.isFinite(v)));
    if (sorted.length === 0) return;
    const pts: string[] = [];
    for (let k = 0; k <= POINTS; k += 1) {
      const q = k / POINTS;
      pts.push(`${lx(quantile(sorted, q)).toFixed(1)},${ly(q).toFixed(1)}`);
    }
    parts.push(`<polyline fill="none" stroke="${s.color}" stroke-width="1.8"${s.dashed === true ? ' stroke-dasharray="5,3"' : ''} points="${pts.join(' ')}"/>`);
    // The legend sits between the title and the plot, two entries a row, clear of every line.
    const lx0 = ox + M.left + (i % 2) * 200;
    const ly0 = oy + 36 + Math.floor(i / 2) * 13;
    parts.push(`<line x1="${lx0}" y1="${ly0 - 4}" x2="${lx0 + 18}" y2="${ly0 - 4}" stroke="${s.color}" stroke-width="2"${s.dashed === true ? ' stroke-dasharray="5,3"' : ''}/>`);
    parts.push(`<text x="${lx0 + 22}" y="${ly0}" font-size="10">${esc(`${s.label} (n=${sorted.length})`)}</text>`);
  });
  return parts.join('\n');
}

/** The whole chart: panels in rows of two. */
export function cdfChart(title: string, panels: readonly Panel[]): string {
  const cols = 2;
  const rows = Math.ceil(panels.length / cols);
  const width = cols * W;
  const height = rows * H + 36;
  const body = panels.map((p, i) => panelSvg(p, (i % cols) * W, 36 + Math.floor(i / cols) * H)).join('\n');
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="${width / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">${esc(title)}</text>`,
    body,
    '</svg>',
    '',
  ].join('\n');
}
