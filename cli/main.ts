/**
 * `sluice`: the operator CLI. `sluice <group> <action> [arguments] [--stage local|dev|stg|prod]
 * [--json]`. Exit code 0 on success; 1 with one line on stderr on any failure (and, with
 * `--json`, `{"error":{"code","message"}}` on stdout so scripts need not parse stderr).
 */
import { parseArgs } from 'node:util';
import type { CommandIo, Outcome } from './commands';
import { COMMANDS as BASE_COMMANDS } from './commands';
import { CATALOG_COMMANDS } from './commands/catalog';
import { STAGE_COMMANDS } from './commands/stage';
import { runUsage } from './commands/usage';
import { CatalogValidationError } from '../lambdas/catalog/errors';
import { AdminError } from '../lambdas/store/directory-errors';
import { AdminApiError } from './api-client';
import { ADMIN_URL_ENV, LOCAL_STATE_ENV } from './paths';
import { resolveTarget } from './target';

/** The streams and environment `run` uses; injectable so tests need no child process. */
export interface MainIo {
  readonly stdout: { write(text: string): unknown };
  readonly stderr: { write(text: string): unknown };
  readonly stdin: NodeJS.ReadableStream & { isTTY?: boolean; setRawMode?: (mode: boolean) => unknown };
  readonly env: NodeJS.ProcessEnv;
}

/** Every `sluice <group> <action>` command; `usage` parses its own arguments. */
const COMMANDS = [...BASE_COMMANDS, ...CATALOG_COMMANDS, ...STAGE_COMMANDS];

const GLOBAL_OPTIONS = {
  stage: { type: 'string', default: 'local' },
  region: { type: 'string' },
  endpoint: { type: 'string' },
  json: { type: 'boolean' },
  csv: { type: 'boolean' },
  'minor-units': { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

const GLOBAL_HELP = [
  'options for every command:',
  '  --stage local|dev|stg|prod   target (default local: the management API npm start serves, found through',
  `                               .sluice/local.json; ${LOCAL_STATE_ENV} overrides the path). Deployed stages`,
  '                               call the stage\'s management URL signed with the default AWS credentials',
  `  --endpoint <url>             a deployed stage's management URL (the AdminUrl output; or ${ADMIN_URL_ENV})`,
  '  --region <aws region>        for deployed stages, when the URL and the environment name none',
  '  --json                       machine-readable output on stdout (exact integers: minor and micro-units)',
  '  --csv                        commands that print a table print it as CSV',
  '  --minor-units                amounts are whole minor units (2050) instead of USD 20.50',
  '  -h, --help                   this help',
];

function groups(): string[] {
  return [...new Set(COMMANDS.map((c) => c.group))];
}

function topHelp(): string[] {
  const lines = ['usage: sluice <group> <action> [arguments] [options]', '', 'commands:'];
  for (const c of COMMANDS) lines.push(`  ${`${c.group} ${c.action}`.padEnd(24)} ${c.summary}`);
  lines.push(`  ${'usage'.padEnd(24)} a workspace's totals per UTC day or month, by key, model and member (sluice usage --help)`);
  lines.push(`  ${'usage request'.padEnd(24)} the usage row of one request (sluice usage request <request id> -w <id>)`);
  return [...lines, '', ...GLOBAL_HELP, '', 'sluice <group> <action> --help shows one command.'];
}

function groupHelp(group: string): string[] {
  const lines = [`usage: sluice ${group} <action> ...`, ''];
  for (const c of COMMANDS.filter((x) => x.group === group)) lines.push(`  sluice ${c.group} ${c.action} ${c.usage}`, `      ${c.summary}`);
  return lines;
}

/** An argument that is a negative amount, not an option: `-5`, `-20.50`, `-$5`, `-USD 5`. */
const NEGATIVE_AMOUNT = /^-(\$|USD\s*)?\d/i;
const NEGATIVE_MARK = '\u0000';

/** Reads a secret from stdin: hidden typing on a terminal, or everything piped in. */
function secretReader(io: MainIo): CommandIo {
  return {
    async readSecret(prompt: string): Promise<string> {
      const stdin = io.stdin;
      if (stdin.isTTY === true && stdin.setRawMode !== undefined) {
        io.stderr.write(prompt);
        const setRaw = stdin.setRawMode.bind(stdin);
        return await new Promise<string>((resolve, reject) => {
          let typed = '';
          const onData = (chunk: Buffer | string): void => {
            for (const ch of chunk.toString()) {
              if (ch === '\r' || ch === '\n' || ch === '\u0004') return finish(() => resolve(typed));
              if (ch === '\u0003') return finish(() => reject(new AdminError('cancelled', 'cancelled')));
              if (ch === '\u007f' || ch === '\b') typed = typed.slice(0, -1);
              else typed += ch;
            }
          };
          const finish = (settle: () => void): void => {
            stdin.removeListener('data', onData);
            setRaw(false);
            stdin.pause();
            io.stderr.write('\n');
            settle();
          };
          setRaw(true);
          stdin.resume();
          stdin.on('data', onData);
        });
      }
      const chunks: Buffer[] = [];
      for await (const chunk of stdin) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
      return Buffer.concat(chunks).toString('utf8');
    },
  };
}

function fail(io: MainIo, json: boolean, code: string, message: string): number {
  // One line, whatever the message held.
  const line = message.replace(/\s*\n\s*/g, ' ');
  io.stderr.write(`sluice: ${line}\n`);
  if (json) io.stdout.write(`${JSON.stringify({ error: { code, message: line } })}\n`);
  return 1;
}

/** One CSV field: quoted when it holds a comma, a quote or a line break (RFC 4180). */
function csvField(value: string | number | boolean | null): string {
  const text = value === null ? '' : String(value);
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

function print(io: MainIo, mode: 'json' | 'csv' | 'human', outcome: Outcome): void {
  if (mode === 'json') {
    io.stdout.write(`${JSON.stringify(outcome.json, null, 2)}\n`);
    return;
  }
  if (mode === 'csv' && outcome.table !== undefined) {
    for (const row of [outcome.table.header, ...outcome.table.rows]) io.stdout.write(`${row.map(csvField).join(',')}\n`);
    return;
  }
  for (const line of outcome.notes ?? []) io.stderr.write(`${line}\n`);
  for (const line of outcome.human) io.stdout.write(`${line}\n`);
}

/** Runs one CLI invocation and resolves to its exit code. */
export async function run(argv: readonly string[], io: MainIo = { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin, env: process.env }): Promise<number> {
  const json = argv.includes('--json');
  const [group, action, ...rest] = argv;
  if (group === undefined || group === '--help' || group === '-h' || group === 'help') {
    io.stdout.write(`${topHelp().join('\n')}\n`);
    return group === undefined ? 1 : 0;
  }
  // `usage` is one level deep and parses its own options (cli/commands/usage.ts).
  if (group === 'usage') return runUsage(argv.slice(1), io);
  if (!groups().includes(group)) return fail(io, json, 'usage', `unknown command group ${JSON.stringify(group)}; see sluice --help`);
  if (action === undefined || action === '--help' || action === '-h') {
    io.stdout.write(`${groupHelp(group).join('\n')}\n`);
    return action === undefined ? 1 : 0;
  }
  const command = COMMANDS.find((c) => c.group === group && c.action === action);
  if (command === undefined) return fail(io, json, 'usage', `unknown command ${group} ${action}; see sluice ${group} --help`);

  let parsed: ReturnType<typeof parseArgs>;
  try {
    // A negative amount (`credit adjust -5`) would read as an option: carried through marked.
    const args = rest.map((a) => (NEGATIVE_AMOUNT.test(a) ? `${NEGATIVE_MARK}${a}` : a));
    parsed = parseArgs({ args, options: { ...GLOBAL_OPTIONS, ...command.options }, allowPositionals: true, strict: true });
  } catch (err) {
    return fail(io, json, 'usage', `${err instanceof Error ? err.message : String(err)}; see sluice ${group} ${action} --help`);
  }
  const unmark = (v: string): string => (v.startsWith(NEGATIVE_MARK) ? v.slice(NEGATIVE_MARK.length) : v);
  const positionals = parsed.positionals.map(unmark);
  const values = Object.fromEntries(Object.entries(parsed.values).map(([k, v]) => [k, typeof v === 'string' ? unmark(v) : v]));
  if (values['help'] === true) {
    io.stdout.write(`usage: sluice ${group} ${action} ${command.usage}\n\n  ${command.summary}\n\n${GLOBAL_HELP.join('\n')}\n`);
    return 0;
  }
  const [min, max] = command.positionals;
  if (positionals.length < min || positionals.length > max) {
    return fail(io, json, 'usage', `usage: sluice ${group} ${action} ${command.usage}`);
  }

  if (json && values['csv'] === true) return fail(io, json, 'usage', 'give --json or --csv, not both');
  try {
    const target = resolveTarget({
      stage: String(values['stage']),
      ...(typeof values['region'] === 'string' ? { region: values['region'] } : {}),
      ...(typeof values['endpoint'] === 'string' ? { endpoint: values['endpoint'] } : {}),
      env: io.env,
    });
    const outcome = await command.run(target.api, values, positionals, secretReader(io));
    print(io, json ? 'json' : values['csv'] === true ? 'csv' : 'human', outcome);
    return 0;
  } catch (err) {
    return failWith(io, json, err);
  }
}

/** Prints a failure of any kind as one line (and the JSON error with `--json`); exit code 1. */
export function failWith(io: MainIo, json: boolean, err: unknown): number {
  if (err instanceof AdminApiError && err.code === 'configuration_home_elsewhere') return fail(io, json, err.code, elsewhereMessage(err));
  if (err instanceof AdminApiError || err instanceof AdminError || err instanceof CatalogValidationError) return fail(io, json, err.code, err.message);
  const e = err instanceof Error ? err : new Error(String(err));
  return fail(io, json, 'failed', e.name !== 'Error' ? `${e.name}: ${e.message}` : e.message);
}

/**
 * A change sent to a region that is not the configuration home: said plainly, naming the home (the
 * management API's header) and what to run. The CLI knows one management URL, not every region's,
 * so it does not send the change again elsewhere itself.
 */
export function elsewhereMessage(err: AdminApiError): string {
  const home = err.configurationHome;
  if (home === undefined) return err.message;
  return (
    `not changed: this region's management API only reads; the configuration home is ${home}. ` +
    `Run the command again with --endpoint <${home}'s AdminUrl> (or ${ADMIN_URL_ENV}); if ${home} is lost, move the configuration home first: ` +
    `sluice stage config-home <region> --endpoint <that region's AdminUrl>`
  );
}

/**
 * A reader that stops early (`sluice catalog list --json | head`) closes the pipe, and every
 * later write fails with EPIPE, which Node raises as an uncaught error with a stack trace. Unix
 * tools end quietly instead: so does `sluice`. The rest of its output is dropped and the command
 * finishes what it was doing (a change is not cut in half), exiting with its own code.
 */
export function quietOnClosedPipe(streams: readonly NodeJS.WriteStream[] = [process.stdout, process.stderr]): void {
  for (const stream of streams) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      // Writes after the first EPIPE find the stream destroyed: the same closed pipe.
      if (err.code === 'EPIPE' || err.code === 'ERR_STREAM_DESTROYED') return;
      throw err;
    });
  }
}

if (require.main === module) {
  quietOnClosedPipe();
  void run(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
  });
}
