/**
 * `sluice usage`: a workspace's daily or monthly totals (requests, tokens, spend), overall, by
 * key, by model and by member, from the management API's report of the aggregator's rollups;
 * and `sluice usage request <id>`, the usage row of one request. Spend is printed in the ledger's
 * currency and major units (`USD 0.065`), computed on integers (the rollups count micro-units).
 *
 * `sluice usage --workspace <id> [--period day|month] [--from <id>] [--to <id>] [--json|--csv]
 * [--stage …] [--region …] [--endpoint …]`. Days are `yyyy-mm-dd`, months `yyyy-mm`, both UTC and
 * inclusive. Rollups trail the requests by the stream's lag (seconds, normally).
 */
import { parseArgs } from 'node:util';
import type { RollupPeriod } from '../../lambdas/aggregator/aggregate';
import type { UsageReport } from '../../lambdas/admin/usage-report';
import { dayId, monthId } from '../../lambdas/core/windows';
import { formatMoney } from '../../lambdas/core/money-format';
import type { UsageRowView } from '../../lambdas/admin/views';
import { ValidationError } from '../../lambdas/store/directory-errors';
import { apiPath } from '../api-client';
import type { Outcome } from '../commands';
import { failWith, type MainIo } from '../main';
import { resolveTarget } from '../target';

const OPTIONS = {
  workspace: { type: 'string', short: 'w' },
  period: { type: 'string', default: 'day' },
  from: { type: 'string' },
  to: { type: 'string' },
  since: { type: 'string' },
  // Every global option (`sluice --help`), accepted here as by every command, so the same argv
  // reaches both functions below. `--minor-units` changes how amounts are read, and usage reads none.
  stage: { type: 'string', default: 'local' },
  region: { type: 'string' },
  endpoint: { type: 'string' },
  json: { type: 'boolean' },
  csv: { type: 'boolean' },
  'minor-units': { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** The command's help text. */
export const USAGE_HELP = [
  'usage: sluice usage --workspace <id> [--period day|month] [--from <date>] [--to <date>] [--json|--csv]',
  '       sluice usage request <request id> --workspace <id> [--since <ISO instant>] [--json]',
  '',
  "  a workspace's totals per UTC day or month: requests, tokens and spend, overall, by key, by model",
  '  and by member; or the usage row of one request (looked for since --since, default 31 days ago)',
  '  --period day|month   default day',
  '  --from, --to         yyyy-mm-dd (day) or yyyy-mm (month), inclusive; default the last 7 days',
  '                       or the last 3 months, up to today (UTC)',
  '  --stage, --region, --endpoint, --minor-units   as for every sluice command (default --stage local;',
  '                       usage reads no amount, so --minor-units changes nothing here)',
  '  spend is in the ledger currency and major units (USD 0.065); --json also gives chargeMicros, exact',
].join('\n');

type Parsed = ReturnType<typeof parse>;

/** The parsed options; a parse error becomes a ValidationError (exit code and `--json` error like every command's). */
function parse(argv: readonly string[]) {
  try {
    return parseArgs({ args: [...argv], options: OPTIONS, allowPositionals: true, strict: true });
  } catch (err) {
    throw new ValidationError(`${err instanceof Error ? err.message : String(err)}; see sluice usage --help`);
  }
}

/** `n` periods before the period containing `epochMs`. */
function periodBefore(period: RollupPeriod, epochMs: number, n: number): string {
  const d = new Date(epochMs);
  return period === 'day'
    ? dayId(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() - n))
    : monthId(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() - n, 1));
}

/** The report's query from the command line: the period and the range, defaults filled in at `now`. */
export function usageQuery(argv: readonly string[], now: number): { workspaceId: string; period: RollupPeriod; from: string; to: string } {
  const v = parse(argv).values;
  const workspaceId = v.workspace;
  if (workspaceId === undefined || workspaceId === '') throw new ValidationError('--workspace is required');
  const period = v.period;
  if (period !== 'day' && period !== 'month') throw new ValidationError(`--period must be day or month, got ${JSON.stringify(period)}`);
  const to = v.to ?? periodBefore(period, now, 0);
  const from = v.from ?? (v.to === undefined ? periodBefore(period, now, period === 'day' ? 6 : 2) : to);
  return { workspaceId, period, from, to };
}

/** Lines of a right-aligned table (the first column left-aligned). */
function table(header: readonly string[], rows: readonly (readonly string[])[]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    `  ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join('  ')}`.trimEnd();
  return [line(header), ...rows.map(line)];
}

const COLUMNS = ['requests', 'input', 'cached', 'output', 'reasoning', 'spend'];

type Cells = Pick<UsageReport['total'], 'requests' | 'inputTokens' | 'cachedInputTokens' | 'outputTokens' | 'reasoningTokens' | 'spend'>;

function cells(t: Cells): string[] {
  return [t.requests, t.inputTokens, t.cachedInputTokens, t.outputTokens, t.reasoningTokens].map(String).concat(t.spend);
}

/** What `sluice usage` prints for a report: lines for a person, and one CSV table of every row. */
export function renderUsage(report: UsageReport): Outcome {
  const { workspaceId, period, from, to, total, totals, byKey, byModel, byMember } = report;
  const human = [`usage of ${workspaceId} by ${period}, ${from} to ${to} (UTC)`];
  if (totals.length === 0) {
    human.push('no requests in that range');
  } else {
    human.push('', 'totals', ...table([period, ...COLUMNS], [...totals.map((r) => [r.periodId, ...cells(r)]), ['all', ...cells(total)]]));
    human.push('', 'by key', ...table([period, 'key', ...COLUMNS], byKey.map((r) => [r.periodId, r.id ?? '', ...cells(r)])));
    human.push('', 'by model', ...table([period, 'model', ...COLUMNS], byModel.map((r) => [r.periodId, r.id ?? '', ...cells(r)])));
    human.push('', 'by member', ...table([period, 'member', ...COLUMNS], byMember.map((r) => [r.periodId, r.memberId ?? '(none)', ...cells(r)])));
  }
  const header = ['scope', period, 'id', 'requests', 'input', 'cached', 'output', 'reasoning', 'charge_micros'];
  const row = (scope: string, periodId: string, id: string | null, t: Cells & { chargeMicros: number }): (string | number | null)[] => [
    scope, periodId, id, t.requests, t.inputTokens, t.cachedInputTokens, t.outputTokens, t.reasoningTokens, t.chargeMicros,
  ];
  const rows = [
    ...totals.map((r) => row('all', r.periodId, null, r)),
    ...byKey.map((r) => row('key', r.periodId, r.id ?? null, r)),
    ...byModel.map((r) => row('model', r.periodId, r.id ?? null, r)),
    ...byMember.map((r) => row('member', r.periodId, r.memberId, r)),
  ];
  return { json: report, human, table: { header, rows } };
}

function renderRow(row: UsageRowView): Outcome {
  return {
    json: row,
    human: [
      `request    ${row.requestId}  (${row.family}${row.stream ? ', streamed' : ''})`,
      `started    ${row.startedAt}  took ${row.durationMs} ms${row.firstByteMs === null ? '' : `, first byte ${row.firstByteMs} ms`}`,
      `key        ${row.keyId}${row.memberId === null ? '' : `  member ${row.memberId}`}`,
      `model      ${row.requestedModel}${row.servedBy === null ? '' : ` served by ${row.servedBy}`}${row.byok ? ' (own key)' : ''}`,
      `status     ${row.status} ${row.outcome}  attempts ${row.attempts}`,
      `tokens     input ${row.inputTokens} (cached ${row.cachedInputTokens}), output ${row.outputTokens} (reasoning ${row.reasoningTokens})${row.estimated ? ', counted by Sluice (the provider sent none)' : ''}`,
      `charge     ${formatMoney(row.chargeMicros)} (held ${formatMoney(row.holdMicros)})${row.uncollectedMicros > 0 ? `, ${formatMoney(row.uncollectedMicros)} of it uncollected` : ''}`,
    ],
  };
}

/**
 * `sluice usage …` end to end: resolves the stage, calls the API, prints, and resolves to the
 * exit code, with the same conventions as the other commands.
 */
export async function runUsage(argv: readonly string[], io: MainIo): Promise<number> {
  const json = argv.includes('--json');
  if (argv.includes('--help') || argv.includes('-h')) {
    io.stdout.write(`${USAGE_HELP}\n`);
    return 0;
  }
  try {
    const parsed: Parsed = parse(argv);
    const v = parsed.values;
    const target = resolveTarget({
      stage: v.stage,
      ...(v.region === undefined ? {} : { region: v.region }),
      ...(v.endpoint === undefined ? {} : { endpoint: v.endpoint }),
      env: io.env,
    });
    let outcome: Outcome;
    if (parsed.positionals[0] === 'request') {
      const requestId = parsed.positionals[1];
      if (requestId === undefined || parsed.positionals.length !== 2) throw new ValidationError('usage: sluice usage request <request id> --workspace <id>');
      if (v.workspace === undefined || v.workspace === '') throw new ValidationError('--workspace is required');
      const row = await target.api.call<UsageRowView>({
        method: 'GET',
        path: apiPath('workspaces', v.workspace, 'requests', requestId),
        query: { since: v.since },
      });
      outcome = renderRow(row);
    } else {
      if (parsed.positionals.length > 0) throw new ValidationError(`unexpected ${JSON.stringify(parsed.positionals[0])}; see sluice usage --help`);
      const q = usageQuery(argv, Date.now());
      const report = await target.api.call<UsageReport>({
        method: 'GET',
        path: apiPath('workspaces', q.workspaceId, 'usage'),
        query: { period: q.period, from: q.from, to: q.to },
      });
      outcome = renderUsage(report);
    }
    if (json) io.stdout.write(`${JSON.stringify(outcome.json, null, 2)}\n`);
    else if (v.csv === true && outcome.table !== undefined) {
      for (const r of [outcome.table.header, ...outcome.table.rows]) io.stdout.write(`${r.map((c) => (c === null ? '' : String(c))).join(',')}\n`);
    } else for (const line of outcome.human) io.stdout.write(`${line}\n`);
    return 0;
  } catch (err) {
    return failWith(io, json, err);
  }
}
