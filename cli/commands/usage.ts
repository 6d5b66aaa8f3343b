/**
 * `sluice usage`: a workspace's daily or monthly totals (requests, tokens, spend), overall, by
 * key and by model, read from the aggregator's rollups. Spend is printed in minor units with six
 * decimals, computed on integers (the rollups count micro-units).
 *
 * `sluice usage --workspace <id> [--period day|month] [--from <id>] [--to <id>] [--json]
 * [--stage …] [--region …]`. Days are `yyyy-mm-dd`, months `yyyy-mm`, both UTC and inclusive.
 * Rollups trail the requests by the stream's lag (seconds, normally).
 */
import { parseArgs } from 'node:util';
import { dayId, monthId } from '../../lambdas/core/windows';
import { readUsage, type UsageRow } from '../../lambdas/aggregator/read';
import type { RollupPeriod } from '../../lambdas/aggregator/aggregate';
import type { Outcome } from '../commands';
import { nowOf, type AdminContext } from '../context';
import { AdminError, ValidationError } from '../errors';
import { requireWorkspace } from '../ops/common';
import { resolveTarget } from '../target';
import { formatMicros } from '../validate';

const OPTIONS = {
  workspace: { type: 'string', short: 'w' },
  period: { type: 'string', default: 'day' },
  from: { type: 'string' },
  to: { type: 'string' },
  // The global options, accepted here so the same argv reaches both functions below.
  stage: { type: 'string', default: 'local' },
  region: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** The command's help text. */
export const USAGE_HELP = [
  'usage: sluice usage --workspace <id> [--period day|month] [--from <date>] [--to <date>] [--json]',
  '',
  "  a workspace's totals per UTC day or month: requests, tokens and spend, overall, by key and by model",
  '  --period day|month   default day',
  '  --from, --to         yyyy-mm-dd (day) or yyyy-mm (month), inclusive; default the last 7 days',
  '                       or the last 3 months, up to today (UTC)',
  '  --stage, --region    as for every sluice command (default --stage local)',
  '  spend is in minor units with six decimals (micro-units exact)',
].join('\n');

/** Totals of some rows, spend both as integer micro-units and as minor units with six decimals. */
interface Totals {
  readonly requests: number;
  readonly inputTokens: number;
  readonly cachedInputTokens: number;
  readonly outputTokens: number;
  readonly reasoningTokens: number;
  readonly chargeMicros: number;
  readonly spend: string;
}

type ReportRow = UsageRow & { readonly spend: string };

/** The parsed options; a parse error becomes a ValidationError (exit code and `--json` error like every command's). */
function parse(argv: readonly string[]) {
  try {
    return parseArgs({ args: [...argv], options: OPTIONS, allowPositionals: false, strict: true }).values;
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

function sum(rows: readonly UsageRow[]): Totals {
  const t = { requests: 0, inputTokens: 0, cachedInputTokens: 0, outputTokens: 0, reasoningTokens: 0, chargeMicros: 0 };
  for (const r of rows) {
    t.requests += r.requests;
    t.inputTokens += r.inputTokens;
    t.cachedInputTokens += r.cachedInputTokens;
    t.outputTokens += r.outputTokens;
    t.reasoningTokens += r.reasoningTokens;
    t.chargeMicros += r.chargeMicros;
  }
  return { ...t, spend: formatMicros(t.chargeMicros) };
}

/** Lines of a right-aligned table (the first column left-aligned). */
function table(header: readonly string[], rows: readonly (readonly string[])[]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    `  ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join('  ')}`.trimEnd();
  return [line(header), ...rows.map(line)];
}

const COLUMNS = ['requests', 'input', 'cached', 'output', 'reasoning', 'spend'];

function cells(t: Pick<Totals, 'requests' | 'inputTokens' | 'cachedInputTokens' | 'outputTokens' | 'reasoningTokens' | 'spend'>): string[] {
  return [t.requests, t.inputTokens, t.cachedInputTokens, t.outputTokens, t.reasoningTokens].map(String).concat(t.spend);
}

/**
 * Runs `sluice usage` against an already resolved stage and returns what to print: the JSON for
 * `--json` and the lines for a person. `argv` is everything after `usage`.
 *
 * @throws ValidationError on bad options; WorkspaceNotFoundError for an unknown workspace.
 */
export async function usageCommand(argv: readonly string[], ctx: AdminContext): Promise<Outcome> {
  const v = parse(argv);
  const workspaceId = v.workspace;
  if (workspaceId === undefined || workspaceId === '') throw new ValidationError('--workspace is required');
  const period = v.period;
  if (period !== 'day' && period !== 'month') throw new ValidationError(`--period must be day or month, got ${JSON.stringify(period)}`);
  const now = nowOf(ctx);
  const to = v.to ?? periodBefore(period, now, 0);
  const from = v.from ?? (v.to === undefined ? periodBefore(period, now, period === 'day' ? 6 : 2) : to);
  await requireWorkspace(ctx, workspaceId);

  let rows: UsageRow[];
  try {
    rows = await readUsage(ctx.doc, ctx.tablePrefix, { workspaceId, period, from, to });
  } catch (err) {
    if (err instanceof RangeError) throw new ValidationError(`--from/--to: ${err.message}`);
    throw err;
  }
  const withSpend = (r: UsageRow): ReportRow => ({ ...r, spend: formatMicros(r.chargeMicros) });
  const totals = rows.filter((r) => r.scope === 'all').map(withSpend);
  const byKey = rows.filter((r) => r.scope === 'key').map(withSpend);
  const byModel = rows.filter((r) => r.scope === 'model').map(withSpend);
  const total = sum(totals);

  const human = [`usage of ${workspaceId} by ${period}, ${from} to ${to} (UTC); spend in minor units`];
  if (totals.length === 0) {
    human.push('no requests in that range');
  } else {
    human.push('', 'totals', ...table([period, ...COLUMNS], [...totals.map((r) => [r.periodId, ...cells(r)]), ['all', ...cells(total)]]));
    human.push('', 'by key', ...table([period, 'key', ...COLUMNS], byKey.map((r) => [r.periodId, r.id ?? '', ...cells(r)])));
    human.push('', 'by model', ...table([period, 'model', ...COLUMNS], byModel.map((r) => [r.periodId, r.id ?? '', ...cells(r)])));
  }
  return { json: { workspaceId, period, from, to, total, totals, byKey, byModel }, human };
}

/** The streams and environment {@link runUsage} uses (`cli/main.ts`'s `MainIo` fits). */
export interface UsageIo {
  readonly stdout: { write(text: string): unknown };
  readonly stderr: { write(text: string): unknown };
  readonly env: NodeJS.ProcessEnv;
}

/**
 * `sluice usage …` end to end: resolves the stage, runs {@link usageCommand}, prints, and
 * resolves to the exit code, with the same conventions as the other commands (one line on
 * stderr on failure; with `--json`, `{"error":{"code","message"}}` on stdout).
 */
export async function runUsage(argv: readonly string[], io: UsageIo): Promise<number> {
  const json = argv.includes('--json');
  if (argv.includes('--help') || argv.includes('-h')) {
    io.stdout.write(`${USAGE_HELP}\n`);
    return 0;
  }
  let close = (): void => undefined;
  try {
    const v = parse(argv);
    const target = resolveTarget({ stage: v.stage, ...(v.region === undefined ? {} : { region: v.region }), env: io.env });
    close = target.close;
    const outcome = await usageCommand(argv, target.ctx);
    if (json) io.stdout.write(`${JSON.stringify(outcome.json, null, 2)}\n`);
    else for (const line of outcome.human) io.stdout.write(`${line}\n`);
    return 0;
  } catch (err) {
    const code = err instanceof AdminError ? err.code : 'failed';
    const e = err instanceof Error ? err : new Error(String(err));
    const message = (err instanceof AdminError || e.name === 'Error' ? e.message : `${e.name}: ${e.message}`).replace(/\s*\n\s*/g, ' ');
    io.stderr.write(`sluice: ${message}\n`);
    if (json) io.stdout.write(`${JSON.stringify({ error: { code, message } })}\n`);
    return 1;
  } finally {
    close();
  }
}
