/**
 * `sluice workspace slices`: how many ledger slices a workspace's balance, month and spend-rate
 * headroom are split over, the operator's floor, and the recent conflict rate every gateway
 * process reported; `--set <n>` sets the count and the floor (audited, like every change).
 * Lowering it consolidates the retired slices into slice 0 at once, without losing a unit.
 */
import { formatMoney } from '../../lambdas/core/money-format';
import type { SlicesView } from '../../lambdas/store/directory-slices';
import { ValidationError } from '../../lambdas/store/directory-errors';
import { apiPath } from '../api-client';
import type { Command, Values } from '../commands';

function workspaceOf(values: Values): string {
  const v = values.workspace;
  if (typeof v !== 'string' || v === '') throw new ValidationError('--workspace is required');
  return v;
}

/** The count `--set` names: a whole number (the API checks the range). */
function countOf(raw: string): number {
  if (!/^\d{1,3}$/.test(raw)) throw new ValidationError(`--set takes a whole number of slices, got ${JSON.stringify(raw)}`);
  return Number(raw);
}

const pct = (rate: number | null): string => (rate === null ? 'no admissions' : `${(Math.round(rate * 1000) / 10).toString()}%`);

/** The lines a person reads. */
export function describeSlices(view: SlicesView & { readonly previous?: number }): string[] {
  const r = view.recent;
  const lines = [
    `ledger slices: ${view.slices}${view.previous !== undefined && view.previous !== view.slices ? ` (was ${view.previous})` : ''}; floor ${view.floor} (automatic changes keep to it); highest ever ${view.high}; most ${view.maxSlices}`,
    `last changed: ${view.changedAt ?? 'never recorded'}`,
    r.minutes === 0
      ? 'recent load: nothing reported yet'
      : `recent load (${r.minutes} min): ${r.admissions} admissions (${(Math.round(r.admissionsPerSecond * 10) / 10).toString()}/s), ${r.conflicts} met a conflict (${pct(r.conflictRate)}); grows above ${pct(view.automatic.growsAboveConflictRate)}`,
  ];
  if (view.automatic.wouldShrinkTo !== null) lines.push(`automatic shrinking: would go to ${view.automatic.wouldShrinkTo} at the next report`);
  if (view.regions !== undefined) {
    const m = (micros: number): string => formatMoney(micros);
    for (const r of view.regions.regions) {
      lines.push(
        `region ${r.region}${r.down ? ' (down: stranded)' : ''}: credited ${m(r.creditedMicros)}, available ${m(r.availableMicros)}, held ${m(r.heldMicros)}, spent ${m(r.spentMicros)}; sent ${m(r.sentMicros)}, received ${m(r.receivedMicros)}`,
      );
    }
    lines.push(`in transit between regions: ${m(view.regions.inTransitMicros)}; stranded in regions down: ${m(view.regions.strandedMicros)}`);
  }
  return lines;
}

/** The command, listed in `COMMANDS` beside the other workspace commands. */
export const SLICES_COMMAND: Command = {
  group: 'workspace',
  action: 'slices',
  summary: "show the ledger's slice count, floor and recent conflict rate; --set <n> sets count and floor (1..48)",
  usage: '--workspace <id> [--set <n>] [--down <region,...>]',
  options: { workspace: { type: 'string', short: 'w' }, set: { type: 'string' }, down: { type: 'string' } },
  positionals: [0, 0],
  async run(api, v) {
    const path = apiPath('workspaces', workspaceOf(v), 'slices');
    const raw = v.set;
    if (typeof raw === 'string') {
      const out = await api.call<SlicesView & { previous: number }>({ method: 'PUT', path, body: { count: countOf(raw) } });
      return { json: out, human: describeSlices(out) };
    }
    const out = await api.call<SlicesView>({ method: 'GET', path, ...(typeof v.down === 'string' && v.down !== '' ? { query: { down: v.down } } : {}) });
    return { json: out, human: describeSlices(out) };
  },
};
