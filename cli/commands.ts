/**
 * The `sluice` commands: each one parses its own options, makes one or two calls to the
 * management API, and returns both a JSON value (for `--json`) and lines for a person (and rows
 * for `--csv` where it prints a table). No command prints by itself, and none touches a table.
 *
 * Amounts are read in major units with the currency (`20.50`, `$20`, `USD 20.50`), or in whole
 * minor units with `--minor-units`; they are shown as `USD 20.50`. `--json` keeps the API's
 * exact integers (minor units in, micro-units out).
 */
import type { ParseArgsConfig } from 'node:util';
import { AmountFormatError, formatMoney, MICROS_PER_MINOR, parseAmount } from '../lambdas/core/money-format';
import { ValidationError } from '../lambdas/store/directory-errors';
import { parseInstant } from '../lambdas/store/directory-validate';
import type { AuditEntryView } from '../lambdas/admin/views';
import { apiPath, type AdminApi } from './api-client';
import { INVITATION_COMMANDS } from './commands/invitations';
import { SLICES_COMMAND } from './commands/slices';

/** Parsed option values, as `util.parseArgs` returns them. */
export type Values = Readonly<Record<string, string | boolean | (string | boolean)[] | undefined>>;

/** What a command hands back: the JSON for scripts, the lines for a person, the rows for `--csv`. */
export interface Outcome {
  readonly json: unknown;
  readonly human: readonly string[];
  /** Lines for stderr in human mode (warnings that must not mix with piped output). */
  readonly notes?: readonly string[];
  /** The table, for `--csv`: a header and its rows. */
  readonly table?: { readonly header: readonly string[]; readonly rows: readonly (readonly (string | number | boolean | null)[])[] };
}

/** What a command may use besides its arguments. */
export interface CommandIo {
  /** Reads a secret without it passing through argv (stdin, or a hidden prompt on a terminal). */
  readSecret(prompt: string): Promise<string>;
}

/** One `sluice <group> <action>` command. */
export interface Command {
  readonly group: string;
  readonly action: string;
  readonly summary: string;
  /** Usage line after `sluice <group> <action>`. */
  readonly usage: string;
  readonly options: NonNullable<ParseArgsConfig['options']>;
  /** Fewest and most positional arguments. */
  readonly positionals: readonly [number, number];
  /** Runs the command against a stage's management API. */
  run(api: AdminApi, values: Values, positionals: readonly string[], io: CommandIo): Promise<Outcome>;
}

const WORKSPACE = { workspace: { type: 'string', short: 'w' } } as const;

/** A string option's value, undefined when absent. */
export function str(values: Values, name: string): string | undefined {
  const v = values[name];
  return typeof v === 'string' ? v : undefined;
}

/** A string option that must be given. */
export function need(values: Values, name: string): string {
  const v = str(values, name);
  if (v === undefined || v === '') throw new ValidationError(`--${name} is required`);
  return v;
}

/** Whether a boolean option was given. */
export function flag(values: Values, name: string): boolean {
  return values[name] === true;
}

function workspaceOf(values: Values): string {
  return need(values, 'workspace');
}

/** Exactly one of a value and `--clear`; returns null for `--clear`. */
function valueOrClear(value: string | undefined, values: Values, what: string): string | null {
  const clear = flag(values, 'clear');
  if (clear && value !== undefined) throw new ValidationError(`give either ${what} or --clear, not both`);
  if (!clear && value === undefined) throw new ValidationError(`give ${what}, or --clear`);
  return clear ? null : (value as string);
}

/** An amount argument in minor units: major units with the currency, or minor with `--minor-units`. */
function amount(values: Values, raw: string, what: string, opts: { signed?: boolean } = {}): number {
  try {
    return parseAmount(raw, { minorUnits: flag(values, 'minor-units'), ...opts });
  } catch (err) {
    if (err instanceof AmountFormatError) throw new ValidationError(`${what}: ${err.message}`);
    throw err;
  }
}

/** The amount given as `--amount` or as the one positional, not both. */
function amountArg(values: Values, positional: string | undefined, what: string, opts: { signed?: boolean } = {}): number {
  const option = str(values, 'amount');
  if (option !== undefined && positional !== undefined) throw new ValidationError(`give the ${what} once: as an argument or as --amount`);
  const raw = option ?? positional;
  if (raw === undefined) throw new ValidationError(`give the ${what} (e.g. 20.50, or --minor-units 2050)`);
  return amount(values, raw, what, opts);
}

/** An amount that must be above zero; the refusal names the option or argument (`what`). */
function positive(minor: number, what: string, hint = ' (e.g. 20.50, or --minor-units 2050)'): number {
  if (minor <= 0) throw new ValidationError(`${what} must be more than ${formatMoney(0)}${hint}`);
  return minor;
}

/** An adjustment: a signed amount, never zero. */
function nonZero(minor: number): number {
  if (minor === 0) throw new ValidationError(`the adjustment cannot be ${formatMoney(0)}: give a signed amount, e.g. -5.00 or 12.50`);
  return minor;
}

/**
 * A secret read from stdin or the prompt, trimmed; refused when nothing came, naming the input
 * (not the API's field) and how to give it.
 */
export function secretGiven(raw: string, example: string): string {
  const secret = raw.trim();
  if (secret === '') throw new ValidationError(`no key was read from stdin: pipe it in (\`${example}\`) or type it at the prompt`);
  return secret;
}

/** `--limit`: how many entries, 1 to 1000 (what the management API serves in one answer). */
function limitOption(values: Values): string | undefined {
  const raw = str(values, 'limit');
  if (raw !== undefined && (!/^\d{1,4}$/.test(raw) || Number(raw) < 1 || Number(raw) > 1000)) throw new ValidationError(`--limit is a whole number from 1 to 1000; got ${JSON.stringify(raw)}`);
  return raw;
}

/** The windows a key credit limit counts over. */
const KEY_WINDOWS: readonly string[] = ['daily', 'weekly', 'monthly', 'never'];

const money = (micros: number | null | undefined): string => (micros === null || micros === undefined ? 'none' : formatMoney(micros));
const minorMoney = (minor: number): string => formatMoney(minor * MICROS_PER_MINOR);
const iso = (ms: number): string => new Date(ms).toISOString();

/** A key named by `--key`: the key id (`key_…`) or its visible part. */
function keyPath(values: Values, ...rest: string[]): string {
  return apiPath('workspaces', workspaceOf(values), 'keys', need(values, 'key'), ...rest);
}

function lines(header: readonly string[], rows: readonly (readonly (string | number | boolean | null)[])[]): string[] {
  const text = rows.map((r) => r.map((c) => (c === null ? '-' : String(c))));
  const widths = header.map((h, i) => Math.max(h.length, ...text.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string => cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ').trimEnd();
  return [line(header), ...text.map(line)];
}

/** An outcome that prints a table (human), the same rows for `--csv`, and `json` for scripts. */
export function tabular(json: unknown, header: readonly string[], rows: readonly (readonly (string | number | boolean | null)[])[], empty: string): Outcome {
  return { json, human: rows.length === 0 ? [empty] : lines(header, rows), table: { header, rows } };
}

/** What `workspace show` reads from the management API (the fields it prints). */
export interface WorkspaceView {
  workspaceId: string;
  name: string;
  createdAt: string;
  paused: boolean;
  spendRateCapMinor: number;
  monthlyLimit: { micros: number } | null;
  lowCreditThreshold: { micros: number } | null;
  permittedModels: string[] | null;
  defaultProfile: string | null;
  byokProviders: string[];
  keySlots: number;
  balance: { available: { micros: number }; held: { micros: number }; spent: { micros: number }; credited: { micros: number } };
  month: { id: string; settled: { micros: number }; held: { micros: number } };
  /** Each region's part, in a stage with several regions. */
  regions?: { region: string; available: { micros: number }; held: { micros: number } }[] | null;
  /** Credit between regions (in `balance.available`), in a stage with several regions. */
  inTransit?: { micros: number } | null;
  members: { memberId: string; role: string; email: string | null; monthlyLimit: { micros: number } | null }[];
  profiles: { identifier: string; models: string[] }[];
}

/** `workspace show`'s lines for people: money in major units with its currency. */
export function describeWorkspace(v: WorkspaceView): string[] {
  return [
    `workspace        ${v.workspaceId}  ${v.name}`,
    `created          ${v.createdAt}`,
    `serving          ${v.paused ? 'PAUSED by owner' : 'yes'}`,
    '',
    `available        ${money(v.balance.available.micros)}`,
    `held             ${money(v.balance.held.micros)}`,
    `spent            ${money(v.balance.spent.micros)}`,
    `credited         ${money(v.balance.credited.micros)}`,
    `month ${v.month.id}    settled ${money(v.month.settled.micros)}, held ${money(v.month.held.micros)}`,
    // A stage with several regions: each region's part (a region that is down strands its part until it returns).
    ...(v.regions ?? []).map((r) => `  in ${r.region.padEnd(14)} available ${money(r.available.micros)}, held ${money(r.held.micros)}`),
    // Credit on its way between regions (a top-up's spread, a transfer): in `available`, in no region's part.
    ...((v.inTransit?.micros ?? 0) !== 0 ? [`  in transit       ${money(v.inTransit?.micros)} (between regions; in available)`] : []),
    '',
    `spend rate cap   ${minorMoney(v.spendRateCapMinor)} per 60 s`,
    `monthly limit    ${money(v.monthlyLimit?.micros)}`,
    `low-credit at    ${money(v.lowCreditThreshold?.micros)}`,
    `permitted models ${v.permittedModels === null ? 'all (unrestricted)' : v.permittedModels.join(' ')}`,
    `default route    ${v.defaultProfile === null ? 'none (sluice/auto is refused)' : `profile/${v.defaultProfile}`}`,
    `own keys (BYOK)  ${v.byokProviders.length === 0 ? 'none' : v.byokProviders.join(' ')}`,
    `key slots        ${v.keySlots} of 5 held`,
    '',
    'members:',
    ...v.members.map((m) => `  ${m.memberId}  ${m.role.padEnd(6)}  ${m.email ?? '-'}  limit ${money(m.monthlyLimit?.micros)}`),
    'profiles:',
    ...(v.profiles.length === 0 ? ['  none'] : v.profiles.map((p) => `  profile/${p.identifier}: ${p.models.join(' > ')}`)),
  ];
}

interface KeyView {
  keyId: string;
  visible: string;
  name: string | null;
  memberId: string | null;
  createdAt: string;
  expiresAt: string | null;
  revokedAt: string | null;
  /** How and by whom an ended key ended (`--all`): null while live, and for keys ended before they were recorded. */
  endedHow?: string | null;
  endedBy?: string | null;
  state: string;
  creditLimit: { micros: number; window: string } | null;
}

/** How a key ended, for `key list --all`: `rotated 2026-… by admin`; a key past its expiry ends by itself. */
const endedText = (k: KeyView): string => {
  if (k.revokedAt !== null) return `${k.endedHow ?? 'ended'} ${k.revokedAt}${k.endedBy ? ` by ${k.endedBy}` : ''}`;
  return k.state === 'expired' && k.expiresAt !== null ? `expired ${k.expiresAt}` : '-';
};

const limitText = (k: KeyView): string => (k.creditLimit === null ? 'no limit' : `limit ${money(k.creditLimit.micros)} ${k.creditLimit.window}`);

interface StatementEntry {
  kind: string;
  at: number;
  amountMicros: number;
  reference: string | null;
  reason: string | null;
  who: string;
  requestId: string;
}

interface BalanceView {
  availableMicros: number;
  heldMicros: number;
}

/** Every command, in help order. */
export const COMMANDS: readonly Command[] = [
  {
    group: 'workspace',
    action: 'create',
    summary: 'create a workspace with its owner and an empty balance',
    usage: '--name <text> [--owner-email <email>]',
    options: { name: { type: 'string' }, 'owner-email': { type: 'string' } },
    positionals: [0, 0],
    async run(api, v) {
      const email = str(v, 'owner-email');
      const out = await api.call<{ workspaceId: string; ownerMemberId: string }>({
        method: 'POST',
        path: '/workspaces',
        body: { name: need(v, 'name'), ...(email === undefined ? {} : { ownerEmail: email }) },
      });
      return { json: out, human: [`created workspace ${out.workspaceId} (owner member ${out.ownerMemberId})`] };
    },
  },
  {
    group: 'workspace',
    action: 'list',
    summary: 'every workspace: name, balance, paused',
    usage: '[--csv]',
    options: {},
    positionals: [0, 0],
    async run(api) {
      const out = await api.call<{ workspaces: { workspaceId: string; name: string; paused: boolean; availableMicros: number | null; heldMicros: number | null }[] }>({
        method: 'GET',
        path: '/workspaces',
      });
      return tabular(
        out,
        ['workspace', 'name', 'available', 'held', 'paused'],
        out.workspaces.map((w) => [w.workspaceId, w.name, money(w.availableMicros), money(w.heldMicros), w.paused ? 'PAUSED' : 'no']),
        'no workspaces',
      );
    },
  },
  {
    group: 'workspace',
    action: 'show',
    summary: 'settings and ledger: available, held, spent, credited',
    usage: '--workspace <id>',
    options: WORKSPACE,
    positionals: [0, 0],
    async run(api, v) {
      const view = await api.call<WorkspaceView>({ method: 'GET', path: apiPath('workspaces', workspaceOf(v)) });
      return { json: view, human: describeWorkspace(view) };
    },
  },
  {
    group: 'workspace',
    action: 'pause',
    summary: 'refuse every request with 503 paused_by_owner (keys are kept)',
    usage: '--workspace <id>',
    options: WORKSPACE,
    positionals: [0, 0],
    async run(api, v) {
      const out = await api.call({ method: 'POST', path: apiPath('workspaces', workspaceOf(v), 'pause') });
      return { json: out, human: ['workspace paused: new requests are refused 503 paused_by_owner; running ones finish'] };
    },
  },
  {
    group: 'workspace',
    action: 'resume',
    summary: 'lift the pause',
    usage: '--workspace <id>',
    options: WORKSPACE,
    positionals: [0, 0],
    async run(api, v) {
      const out = await api.call({ method: 'POST', path: apiPath('workspaces', workspaceOf(v), 'resume') });
      return { json: out, human: ['workspace serving again'] };
    },
  },
  {
    group: 'workspace',
    action: 'limit',
    summary: 'set or clear the workspace monthly spend limit (UTC calendar month)',
    usage: '--workspace <id> (--monthly <amount> | --clear)',
    options: { ...WORKSPACE, monthly: { type: 'string' }, clear: { type: 'boolean' } },
    positionals: [0, 0],
    async run(api, v) {
      const raw = valueOrClear(str(v, 'monthly'), v, '--monthly <amount>');
      const out = await api.call<{ monthlyLimitMicros: number | null }>({
        method: 'PUT',
        path: apiPath('workspaces', workspaceOf(v), 'monthly-limit'),
        body: { amountMinor: raw === null ? null : amount(v, raw, '--monthly') },
      });
      return { json: out, human: [`workspace monthly limit: ${money(out.monthlyLimitMicros)}`] };
    },
  },
  {
    group: 'workspace',
    action: 'spend-cap',
    summary: 'set the spend rate cap per rolling 60 s (at least USD 1.00; above USD 10000.00 needs --force)',
    usage: '<amount> --workspace <id> [--force]',
    options: { ...WORKSPACE, force: { type: 'boolean' } },
    positionals: [1, 1],
    async run(api, v, p) {
      const out = await api.call<{ spendRateCapMinor: number; previousMinor: number }>({
        method: 'PUT',
        path: apiPath('workspaces', workspaceOf(v), 'spend-cap'),
        body: { amountMinor: amount(v, p[0] ?? '', 'spend rate cap'), force: flag(v, 'force') },
      });
      return { json: out, human: [`spend rate cap: ${minorMoney(out.spendRateCapMinor)} per 60 s (was ${minorMoney(out.previousMinor)})`] };
    },
  },
  {
    group: 'workspace',
    action: 'permit',
    summary: 'restrict to these provider/model ids (replaces the set), add or remove some, or --clear for all',
    usage: '<provider/model>... | add <provider/model>... | remove <provider/model>... | --clear   --workspace <id>',
    options: { ...WORKSPACE, clear: { type: 'boolean' } },
    positionals: [0, 1000],
    async run(api, v, p) {
      const path = apiPath('workspaces', workspaceOf(v), 'permitted');
      const describe = (set: readonly string[] | null): string => (set === null ? 'permitted models: all (unrestricted)' : `permitted models: ${set.join(' ')}`);
      if (p[0] === 'add' || p[0] === 'remove') {
        if (flag(v, 'clear')) throw new ValidationError(`--clear does not go with ${p[0]}`);
        const models = p.slice(1);
        if (models.length === 0) throw new ValidationError(`name the provider/model ids to ${p[0]}`);
        const out = await api.call<{ permittedModels: string[]; added: string[]; removed: string[] }>({ method: 'POST', path: `${path}/${p[0]}`, body: { models } });
        const changed = p[0] === 'add' ? out.added : out.removed;
        return { json: out, human: [`${p[0] === 'add' ? 'added' : 'removed'}: ${changed.length === 0 ? 'nothing (already so)' : changed.join(' ')}`, describe(out.permittedModels)] };
      }
      const cleared = valueOrClear(p.length === 0 ? undefined : p.join(' '), v, 'model ids') === null;
      const out = await api.call<{ permittedModels: string[] | null }>({ method: 'PUT', path, body: { models: cleared ? null : [...p] } });
      return { json: out, human: [describe(out.permittedModels)] };
    },
  },
  {
    group: 'workspace',
    action: 'default-route',
    summary: 'make a routing profile the default route (sluice/auto), or --clear',
    usage: '<identifier> --workspace <id> | --clear --workspace <id>',
    options: { ...WORKSPACE, clear: { type: 'boolean' } },
    positionals: [0, 1],
    async run(api, v, p) {
      const identifier = valueOrClear(p[0], v, 'a profile identifier');
      const out = await api.call<{ defaultProfile: string | null }>({ method: 'PUT', path: apiPath('workspaces', workspaceOf(v), 'default-route'), body: { identifier } });
      return {
        json: out,
        human: [out.defaultProfile === null ? 'default route cleared: sluice/auto is refused 404' : `sluice/auto now routes through profile/${out.defaultProfile}`],
      };
    },
  },
  {
    group: 'workspace',
    action: 'low-credit',
    summary: 'set or clear the available balance below which the low-credit notice fires',
    usage: '--workspace <id> (--threshold <amount> | --clear)',
    options: { ...WORKSPACE, threshold: { type: 'string' }, clear: { type: 'boolean' } },
    positionals: [0, 0],
    async run(api, v) {
      const raw = valueOrClear(str(v, 'threshold'), v, '--threshold <amount>');
      const out = await api.call<{ lowCreditThresholdMicros: number | null }>({
        method: 'PUT',
        path: apiPath('workspaces', workspaceOf(v), 'low-credit'),
        body: { amountMinor: raw === null ? null : positive(amount(v, raw, '--threshold'), '--threshold', '; --clear stops the notice') },
      });
      return { json: out, human: [`low-credit notice below: ${money(out.lowCreditThresholdMicros)}`] };
    },
  },
  SLICES_COMMAND,
  {
    group: 'member',
    action: 'add',
    summary: 'add a member',
    usage: '--workspace <id> [--email <email>]',
    options: { ...WORKSPACE, email: { type: 'string' } },
    positionals: [0, 0],
    async run(api, v) {
      const email = str(v, 'email');
      const out = await api.call<{ memberId: string }>({ method: 'POST', path: apiPath('workspaces', workspaceOf(v), 'members'), body: email === undefined ? {} : { email } });
      return { json: out, human: [`added member ${out.memberId}`] };
    },
  },
  {
    group: 'member',
    action: 'list',
    summary: "the workspace's members, owner first",
    usage: '--workspace <id> [--csv]',
    options: WORKSPACE,
    positionals: [0, 0],
    async run(api, v) {
      const out = await api.call<{ members: { memberId: string; role: string; email: string | null; monthlyLimitMicros: number | null }[] }>({
        method: 'GET',
        path: apiPath('workspaces', workspaceOf(v), 'members'),
      });
      return tabular(out, ['member', 'role', 'email', 'monthly limit'], out.members.map((m) => [m.memberId, m.role, m.email, money(m.monthlyLimitMicros)]), 'no members');
    },
  },
  {
    group: 'member',
    action: 'limit',
    summary: "set or clear a member's monthly spend limit",
    usage: '--workspace <id> --member <id> (--monthly <amount> | --clear)',
    options: { ...WORKSPACE, member: { type: 'string' }, monthly: { type: 'string' }, clear: { type: 'boolean' } },
    positionals: [0, 0],
    async run(api, v) {
      const raw = valueOrClear(str(v, 'monthly'), v, '--monthly <amount>');
      const out = await api.call<{ memberId: string; monthlyLimitMicros: number | null }>({
        method: 'PUT',
        path: apiPath('workspaces', workspaceOf(v), 'members', need(v, 'member'), 'monthly-limit'),
        body: { amountMinor: raw === null ? null : amount(v, raw, '--monthly') },
      });
      return { json: out, human: [`member ${out.memberId} monthly limit: ${money(out.monthlyLimitMicros)}`] };
    },
  },
  {
    group: 'member',
    action: 'remove',
    summary: 'remove a member; --revoke-keys also ends the keys minted for them',
    usage: '--workspace <id> --member <id> [--revoke-keys]',
    options: { ...WORKSPACE, member: { type: 'string' }, 'revoke-keys': { type: 'boolean' } },
    positionals: [0, 0],
    async run(api, v) {
      const out = await api.call<{ memberId: string; revokedKeyIds: string[]; keptKeyIds: string[] }>({
        method: 'DELETE',
        path: apiPath('workspaces', workspaceOf(v), 'members', need(v, 'member')),
        query: { revokeKeys: flag(v, 'revoke-keys') ? 'true' : undefined },
      });
      const human = [`removed member ${out.memberId}`];
      if (out.revokedKeyIds.length > 0) human.push(`ended keys (slots freed): ${out.revokedKeyIds.join(' ')}`);
      if (out.keptKeyIds.length > 0) human.push(`keys kept, now the workspace's: ${out.keptKeyIds.join(' ')}`);
      return { json: out, human };
    },
  },
  {
    group: 'key',
    action: 'create',
    summary: 'mint an API key; it is printed once and cannot be shown again',
    usage: '--workspace <id> [--member <id>] [--name <text>] [--expires <ISO instant>]',
    options: { ...WORKSPACE, member: { type: 'string' }, name: { type: 'string' }, expires: { type: 'string' } },
    positionals: [0, 0],
    async run(api, v) {
      const member = str(v, 'member');
      const name = str(v, 'name');
      const expires = str(v, 'expires');
      const out = await api.call<{ rawKey: string; keyId: string; visible: string }>({
        method: 'POST',
        path: apiPath('workspaces', workspaceOf(v), 'keys'),
        body: {
          ...(member === undefined ? {} : { memberId: member }),
          ...(name === undefined ? {} : { name }),
          ...(expires === undefined ? {} : { expiresAt: iso(parseInstant(expires, '--expires')) }),
        },
      });
      const warning = 'This key is shown once and never again: Sluice stores only its hash. Store it now.';
      return {
        json: { ...out, warning },
        // The key alone on stdout, so `sluice key create … > file` captures exactly the key.
        human: [out.rawKey],
        notes: [`created key ${out.keyId} (${out.visible})`, warning],
      };
    },
  },
  {
    group: 'key',
    action: 'list',
    summary: "list the workspace's keys by visible part (--all includes ended keys)",
    usage: '--workspace <id> [--all] [--csv]',
    options: { ...WORKSPACE, all: { type: 'boolean' } },
    positionals: [0, 0],
    async run(api, v) {
      const out = await api.call<{ keys: KeyView[] }>({
        method: 'GET',
        path: apiPath('workspaces', workspaceOf(v), 'keys'),
        query: { all: flag(v, 'all') ? 'true' : undefined },
      });
      const all = flag(v, 'all');
      return tabular(
        out,
        ['key', 'visible', 'state', 'name', 'member', 'expires', 'limit', ...(all ? ['ended'] : [])],
        out.keys.map((k) => [k.keyId, k.visible, k.state, k.name, k.memberId, k.expiresAt ?? 'never', limitText(k), ...(all ? [endedText(k)] : [])]),
        'no keys',
      );
    },
  },
  {
    group: 'key',
    action: 'show',
    summary: "one key: visible part, state, expiry, credit limit with the window's settled and held, last use",
    usage: '--workspace <id> --key <keyId|visible>',
    options: { ...WORKSPACE, key: { type: 'string' } },
    positionals: [0, 0],
    async run(api, v) {
      const k = await api.call<KeyView & { window: { id: string; settledMicros: number; heldMicros: number } | null; lastUsedAt: string | null }>({
        method: 'GET',
        path: keyPath(v),
      });
      return {
        json: k,
        human: [
          `key        ${k.keyId}  ${k.visible}  ${k.state}${k.revokedAt === null ? '' : ` (ended ${k.revokedAt})`}`,
          `name       ${k.name ?? '-'}`,
          `member     ${k.memberId ?? '-'}`,
          `created    ${k.createdAt}`,
          `expires    ${k.expiresAt ?? 'never'}`,
          `limit      ${k.creditLimit === null ? 'none' : `${money(k.creditLimit.micros)} per ${k.creditLimit.window} window`}`,
          ...(k.window === null ? [] : [`window     ${k.window.id}: settled ${money(k.window.settledMicros)}, held ${money(k.window.heldMicros)}`]),
          `last use   ${k.lastUsedAt ?? 'none in the last 90 days'}`,
        ],
      };
    },
  },
  {
    group: 'key',
    action: 'expiry',
    summary: "set a key's expiry (an expired key is never renewed), or --clear",
    usage: '<ISO instant> --workspace <id> --key <keyId|visible> | --clear --workspace <id> --key <keyId|visible>',
    options: { ...WORKSPACE, key: { type: 'string' }, clear: { type: 'boolean' } },
    positionals: [0, 1],
    async run(api, v, p) {
      const raw = valueOrClear(p[0], v, 'an ISO instant');
      const out = await api.call<{ keyId: string; expiresAt: string | null }>({
        method: 'PUT',
        path: keyPath(v, 'expiry'),
        body: { expiresAt: raw === null ? null : iso(parseInstant(raw, 'expiry')) },
      });
      return { json: out, human: [`key ${out.keyId} expires ${out.expiresAt ?? 'never'}`] };
    },
  },
  {
    group: 'key',
    action: 'limit',
    summary: "set a key's credit limit and window (default monthly), or --clear",
    usage: '<amount> --workspace <id> --key <keyId|visible> [--window monthly|weekly|daily|never] | --clear ...',
    options: { ...WORKSPACE, key: { type: 'string' }, window: { type: 'string' }, clear: { type: 'boolean' } },
    positionals: [0, 1],
    async run(api, v, p) {
      const raw = valueOrClear(p[0], v, 'a limit');
      if (raw === null && str(v, 'window') !== undefined) throw new ValidationError('--window goes with a limit, not with --clear');
      const window = str(v, 'window');
      if (window !== undefined && !KEY_WINDOWS.includes(window)) throw new ValidationError(`--window is ${KEY_WINDOWS.join(', ')}; got ${JSON.stringify(window)}`);
      const out = await api.call<{ keyId: string; creditLimitMicros: number | null; window: string | null }>({
        method: 'PUT',
        path: keyPath(v, 'limit'),
        body: { amountMinor: raw === null ? null : amount(v, raw, 'limit'), window: str(v, 'window') ?? 'monthly' },
      });
      return {
        json: out,
        human: [
          out.creditLimitMicros === null
            ? `key ${out.keyId}: no credit limit`
            : `key ${out.keyId}: credit limit ${money(out.creditLimitMicros)}, ${out.window === 'never' ? 'never resets' : `per ${out.window} window (UTC)`}`,
        ],
      };
    },
  },
  {
    group: 'key',
    action: 'revoke',
    summary: 'end a key now (an expired one too): it is refused 401 and its slot frees',
    usage: '--workspace <id> --key <keyId|visible>',
    options: { ...WORKSPACE, key: { type: 'string' } },
    positionals: [0, 0],
    async run(api, v) {
      const out = await api.call<{ keyId: string; visible: string; revokedAt: string }>({ method: 'POST', path: keyPath(v, 'revoke') });
      return {
        json: out,
        human: [`ended key ${out.keyId} (${out.visible}) at ${out.revokedAt}; its slot is free. Gateways drop it from their caches within SLUICE_CACHE_TTL_MS (5 s by default).`],
      };
    },
  },
  {
    group: 'key',
    action: 'rotate',
    summary: 'mint a replacement and end the old key in one transaction; the new key is printed once (an expired key is never renewed: revoke it instead)',
    usage: '--workspace <id> --key <keyId|visible> [--expires <ISO instant> | --no-expiry]',
    options: { ...WORKSPACE, key: { type: 'string' }, expires: { type: 'string' }, 'no-expiry': { type: 'boolean' } },
    positionals: [0, 0],
    async run(api, v) {
      const expires = str(v, 'expires');
      if (expires !== undefined && flag(v, 'no-expiry')) throw new ValidationError('give --expires or --no-expiry, not both');
      const out = await api.call<{ rawKey: string; keyId: string; visible: string; replacedVisible: string; expiresAt: string | null }>({
        method: 'POST',
        path: keyPath(v, 'rotate'),
        body: flag(v, 'no-expiry') ? { expiresAt: null } : expires === undefined ? {} : { expiresAt: iso(parseInstant(expires, '--expires')) },
      });
      const warning = 'This key is shown once and never again: Sluice stores only its hash. Store it now.';
      return {
        json: { ...out, warning },
        human: [out.rawKey],
        notes: [`key ${out.keyId}: ${out.replacedVisible} ended, replaced by ${out.visible} (expires ${out.expiresAt ?? 'never'})`, warning],
      };
    },
  },
  {
    group: 'credit',
    action: 'add',
    summary: 'add prepaid credit at face value (the fee is taken at purchase); --reference makes it idempotent',
    usage: '<amount> --workspace <id> [--reference <id>]   (or --amount <amount>; --minor-units for minor units)',
    options: { ...WORKSPACE, amount: { type: 'string' }, reference: { type: 'string' } },
    positionals: [0, 1],
    async run(api, v, p) {
      const reference = str(v, 'reference');
      const out = await api.call<{ applied: boolean; entry: StatementEntry; balance: BalanceView }>({
        method: 'POST',
        path: apiPath('workspaces', workspaceOf(v), 'credit'),
        body: { amountMinor: positive(amountArg(v, p[0], 'credit'), 'the credit'), ...(reference === undefined ? {} : { reference }) },
      });
      const human = out.applied
        ? [`credited ${money(out.entry.amountMicros)}${reference === undefined ? '' : ` (reference ${reference})`}; available ${money(out.balance.availableMicros)}`]
        : [`reference ${reference ?? ''} was already credited ${money(out.entry.amountMicros)} at ${iso(out.entry.at)} by ${out.entry.who}; nothing added. Available ${money(out.balance.availableMicros)}`];
      return { json: out, human };
    },
  },
  {
    group: 'credit',
    action: 'adjust',
    summary: 'correct the balance by a signed amount with a reason (never below zero or below what is held)',
    usage: '<amount, e.g. -5.00> --workspace <id> --reason <text>',
    options: { ...WORKSPACE, amount: { type: 'string' }, reason: { type: 'string' } },
    positionals: [0, 1],
    async run(api, v, p) {
      const out = await api.call<{ entry: StatementEntry; balance: BalanceView }>({
        method: 'POST',
        path: apiPath('workspaces', workspaceOf(v), 'credit', 'adjust'),
        body: { amountMinor: nonZero(amountArg(v, p[0], 'adjustment', { signed: true })), reason: need(v, 'reason') },
      });
      return { json: out, human: [`adjusted by ${money(out.entry.amountMicros)} (${out.entry.reason ?? ''}); available ${money(out.balance.availableMicros)}`] };
    },
  },
  {
    group: 'credit',
    action: 'history',
    summary: "the workspace's statement: top-ups and adjustments with who, when, reference or reason",
    usage: '--workspace <id> [--limit <n>] [--csv]',
    options: { ...WORKSPACE, limit: { type: 'string' } },
    positionals: [0, 0],
    async run(api, v) {
      const out = await api.call<{ entries: StatementEntry[] }>({
        method: 'GET',
        path: apiPath('workspaces', workspaceOf(v), 'credit', 'history'),
        query: { limit: limitOption(v) },
      });
      return tabular(
        out,
        ['when', 'kind', 'amount', 'reference', 'reason', 'who', 'request'],
        out.entries.map((e) => [iso(e.at), e.kind, money(e.amountMicros), e.reference, e.reason, e.who, e.requestId]),
        'no top-ups or adjustments',
      );
    },
  },
  {
    group: 'profile',
    action: 'create',
    summary: 'create a routing profile: catalogued provider/model ids in the order they are tried',
    usage: '<identifier> <provider/model>... --workspace <id>',
    options: WORKSPACE,
    positionals: [2, 1000],
    async run(api, v, p) {
      const [identifier = '', ...models] = p;
      const out = await api.call<{ slug: string; models: string[] }>({ method: 'POST', path: apiPath('workspaces', workspaceOf(v), 'profiles'), body: { identifier, models } });
      return { json: out, human: [`created ${out.slug}: ${out.models.join(' > ')}`] };
    },
  },
  {
    group: 'profile',
    action: 'reorder',
    summary: "give a profile's models in their new order (the same models)",
    usage: '<identifier> <provider/model>... --workspace <id>',
    options: WORKSPACE,
    positionals: [2, 1000],
    async run(api, v, p) {
      const [identifier = '', ...models] = p;
      const out = await api.call<{ identifier: string; models: string[] }>({ method: 'PUT', path: apiPath('workspaces', workspaceOf(v), 'profiles', identifier), body: { models } });
      return { json: out, human: [`profile/${out.identifier}: ${out.models.join(' > ')}`] };
    },
  },
  {
    group: 'profile',
    action: 'delete',
    summary: 'delete a routing profile (not the default route)',
    usage: '<identifier> --workspace <id>',
    options: WORKSPACE,
    positionals: [1, 1],
    async run(api, v, p) {
      const out = await api.call<{ identifier: string }>({ method: 'DELETE', path: apiPath('workspaces', workspaceOf(v), 'profiles', p[0] ?? '') });
      return { json: out, human: [`deleted profile/${out.identifier}`] };
    },
  },
  {
    group: 'profile',
    action: 'list',
    summary: "list the workspace's routing profiles",
    usage: '--workspace <id> [--csv]',
    options: WORKSPACE,
    positionals: [0, 0],
    async run(api, v) {
      const out = await api.call<{ profiles: { slug: string; models: string[]; isDefault: boolean }[] }>({ method: 'GET', path: apiPath('workspaces', workspaceOf(v), 'profiles') });
      const result = tabular(out, ['profile', 'default', 'models'], out.profiles.map((p) => [p.slug, p.isDefault, p.models.join(' > ')]), 'no profiles');
      return {
        ...result,
        human: out.profiles.length === 0 ? ['no profiles'] : out.profiles.map((p) => `${p.slug}${p.isDefault ? ' (default, sluice/auto)' : ''}: ${p.models.join(' > ')}`),
      };
    },
  },
  {
    group: 'byok',
    action: 'set',
    summary: "store the workspace's own key for a provider (read from stdin, never from argv)",
    usage: '<provider> --workspace <id> [--key-stdin]   (e.g. `pass show openai | sluice byok set openai -w ws_…`)',
    options: { ...WORKSPACE, 'key-stdin': { type: 'boolean' } },
    positionals: [1, 1],
    async run(api, v, p, io) {
      const provider = p[0] ?? '';
      const workspaceId = workspaceOf(v);
      const apiKey = secretGiven(await io.readSecret(`${provider} key for ${workspaceId} (input hidden): `), `pass show ${provider} | sluice byok set ${provider} -w ${workspaceId}`);
      const out = await api.call<{ provider: string; secretName: string }>({ method: 'PUT', path: apiPath('workspaces', workspaceId, 'byok', provider), body: { apiKey } });
      return { json: out, human: [`workspace ${workspaceId} now runs every ${out.provider} request on its own key (secret ${out.secretName})`] };
    },
  },
  {
    group: 'byok',
    action: 'remove',
    summary: "remove the workspace's own key for a provider",
    usage: '<provider> --workspace <id>',
    options: WORKSPACE,
    positionals: [1, 1],
    async run(api, v, p) {
      const out = await api.call<{ provider: string; secretName: string }>({ method: 'DELETE', path: apiPath('workspaces', workspaceOf(v), 'byok', p[0] ?? '') });
      return { json: out, human: [`removed the workspace's own ${out.provider} key (secret ${out.secretName} deleted)`] };
    },
  },
  {
    group: 'byok',
    action: 'list',
    summary: 'the providers the workspace brings its own key for (never the keys)',
    usage: '--workspace <id> [--csv]',
    options: WORKSPACE,
    positionals: [0, 0],
    async run(api, v) {
      const out = await api.call<{ providers: string[] }>({ method: 'GET', path: apiPath('workspaces', workspaceOf(v), 'byok') });
      return tabular(out, ['provider'], out.providers.map((p) => [p]), 'no own keys');
    },
  },
  {
    group: 'audit',
    action: 'list',
    summary: 'the audit trail, newest first: a workspace\'s (or "catalog"), or everything of one UTC day',
    usage: '[--workspace <id>|catalog] [--day yyyy-mm-dd] [--limit <n>] [--csv]',
    options: { ...WORKSPACE, day: { type: 'string' }, limit: { type: 'string' } },
    positionals: [0, 0],
    async run(api, v) {
      const day = str(v, 'day');
      if (day !== undefined && !/^\d{4}-\d{2}-\d{2}$/.test(day)) throw new ValidationError(`--day is a UTC date, yyyy-mm-dd; got ${JSON.stringify(day)}`);
      const out = await api.call<{ entries: AuditEntryView[] }>({
        method: 'GET',
        path: '/audit',
        query: { workspace: str(v, 'workspace'), day, limit: limitOption(v) },
      });
      return tabular(
        out,
        ['when', 'who', 'action', 'workspace', 'request', 'summary'],
        out.entries.map((e) => [e.at, e.who, e.action, e.workspaceId, e.requestId, JSON.stringify(e.summary)]),
        'no changes recorded',
      );
    },
  },
  ...INVITATION_COMMANDS,
];
