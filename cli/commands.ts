/**
 * The `sluice` commands: each one parses its own options, calls one admin operation, and returns
 * both a JSON value (for `--json`) and lines for a person. No command prints by itself.
 */
import type { ParseArgsConfig } from 'node:util';
import type { WindowCadence } from '../lambdas/shared/records';
import type { AdminContext } from './context';
import { ValidationError } from './errors';
import {
  addCredit,
  addMember,
  createKey,
  createProfile,
  createWorkspace,
  deleteProfile,
  importCatalog,
  listKeys,
  listProfiles,
  removeByokKey,
  removeMember,
  reorderProfile,
  setByokKey,
  setDefaultProfile,
  setKeyCreditLimit,
  setKeyExpiry,
  setMemberMonthlyLimit,
  setPaused,
  setPermittedModels,
  setSpendRateCap,
  setWorkspaceMonthlyLimit,
  showWorkspace,
  WINDOW_CADENCES,
} from './ops';
import type { KeyRef, KeyView, WorkspaceView } from './ops';
import { formatMicros, parseInstant, parseWholeNumber } from './validate';

/** Parsed option values, as `util.parseArgs` returns them. */
export type Values = Readonly<Record<string, string | boolean | (string | boolean)[] | undefined>>;

/** What a command hands back: the JSON for scripts, the lines for a person. */
export interface Outcome {
  readonly json: unknown;
  readonly human: readonly string[];
  /** Lines for stderr in human mode (warnings that must not mix with piped output). */
  readonly notes?: readonly string[];
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
  /** Runs the command against a stage. */
  run(ctx: AdminContext, values: Values, positionals: readonly string[], io: CommandIo): Promise<Outcome>;
}

const WORKSPACE = { workspace: { type: 'string', short: 'w' } } as const;

function str(values: Values, name: string): string | undefined {
  const v = values[name];
  return typeof v === 'string' ? v : undefined;
}

function need(values: Values, name: string): string {
  const v = str(values, name);
  if (v === undefined || v === '') throw new ValidationError(`--${name} is required`);
  return v;
}

function flag(values: Values, name: string): boolean {
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

function keyRef(values: Values): KeyRef {
  const workspaceId = workspaceOf(values);
  const key = need(values, 'key');
  // Key ids are minted as `key_<hex>`; anything else is taken for the visible part.
  return /^key_[0-9a-f]+$/.test(key) ? { workspaceId, keyId: key } : { workspaceId, visible: key };
}

function money(micros: number | null): string {
  return micros === null ? 'none' : `${formatMicros(micros)} minor units`;
}

function describeWorkspace(v: WorkspaceView): string[] {
  const lines = [
    `workspace        ${v.workspaceId}  ${v.name}`,
    `created          ${v.createdAt}`,
    `serving          ${v.paused ? 'PAUSED by owner' : 'yes'}`,
    '',
    `available        ${v.balance.available.minor}`,
    `held             ${v.balance.held.minor}`,
    `spent            ${v.balance.spent.minor}`,
    `credited         ${v.balance.credited.minor}`,
    `month ${v.month.id}    settled ${v.month.settled.minor}, held ${v.month.held.minor}`,
    '',
    `spend rate cap   ${v.spendRateCapMinor} minor units per 60 s`,
    `monthly limit    ${v.monthlyLimit === null ? 'none' : `${v.monthlyLimit.minor} minor units`}`,
    `permitted models ${v.permittedModels === null ? 'all (unrestricted)' : v.permittedModels.join(' ')}`,
    `default route    ${v.defaultProfile === null ? 'none (sluice/auto is refused)' : `profile/${v.defaultProfile}`}`,
    `own keys (BYOK)  ${v.byokProviders.length === 0 ? 'none' : v.byokProviders.join(' ')}`,
    `key slots        ${v.keySlots} of 5 held`,
    '',
    'members:',
    ...v.members.map(
      (m) => `  ${m.memberId}  ${m.role.padEnd(6)}  ${m.email ?? '-'}  limit ${m.monthlyLimit === null ? 'none' : m.monthlyLimit.minor}`,
    ),
    'profiles:',
    ...(v.profiles.length === 0 ? ['  none'] : v.profiles.map((p) => `  profile/${p.identifier}: ${p.models.join(' > ')}`)),
    '(amounts in minor units, six decimals = micro-units)',
  ];
  return lines;
}

function describeKey(k: KeyView): string {
  const limit = k.creditLimit === null ? 'no limit' : `limit ${k.creditLimit.minor} ${k.creditLimit.window}`;
  return [
    k.keyId,
    k.visible,
    k.state,
    k.name ?? '-',
    k.memberId ?? '-',
    `expires ${k.expiresAt ?? 'never'}`,
    limit,
  ].join('  ');
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
    async run(ctx, v) {
      const email = str(v, 'owner-email');
      const out = await createWorkspace(ctx, { name: need(v, 'name'), ...(email === undefined ? {} : { ownerEmail: email }) });
      return { json: out, human: [`created workspace ${out.workspaceId} (owner member ${out.ownerMemberId})`] };
    },
  },
  {
    group: 'workspace',
    action: 'show',
    summary: 'settings and ledger: available, held, spent, credited',
    usage: '--workspace <id>',
    options: WORKSPACE,
    positionals: [0, 0],
    async run(ctx, v) {
      const view = await showWorkspace(ctx, { workspaceId: workspaceOf(v) });
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
    async run(ctx, v) {
      const out = await setPaused(ctx, { workspaceId: workspaceOf(v), paused: true });
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
    async run(ctx, v) {
      const out = await setPaused(ctx, { workspaceId: workspaceOf(v), paused: false });
      return { json: out, human: ['workspace serving again'] };
    },
  },
  {
    group: 'workspace',
    action: 'limit',
    summary: 'set or clear the workspace monthly spend limit (UTC calendar month)',
    usage: '--workspace <id> (--monthly <minor> | --clear)',
    options: { ...WORKSPACE, monthly: { type: 'string' }, clear: { type: 'boolean' } },
    positionals: [0, 0],
    async run(ctx, v) {
      const raw = valueOrClear(str(v, 'monthly'), v, '--monthly <minor>');
      const limitMinor = raw === null ? null : parseWholeNumber(raw, '--monthly');
      const out = await setWorkspaceMonthlyLimit(ctx, { workspaceId: workspaceOf(v), limitMinor });
      return { json: out, human: [`workspace monthly limit: ${money(out.monthlyLimitMicros)}`] };
    },
  },
  {
    group: 'workspace',
    action: 'spend-cap',
    summary: 'set the spend rate cap, minor units per rolling 60 s (min 100; above 1000000 needs --force)',
    usage: '<minor> --workspace <id> [--force]',
    options: { ...WORKSPACE, force: { type: 'boolean' } },
    positionals: [1, 1],
    async run(ctx, v, p) {
      const capMinor = parseWholeNumber(p[0] ?? '', 'spend rate cap');
      const out = await setSpendRateCap(ctx, { workspaceId: workspaceOf(v), capMinor, force: flag(v, 'force') });
      return { json: out, human: [`spend rate cap: ${out.spendRateCapMinor} minor units per 60 s (was ${out.previousMinor})`] };
    },
  },
  {
    group: 'workspace',
    action: 'permit',
    summary: 'restrict the workspace to these provider/model ids, or --clear for all',
    usage: '<provider/model>... --workspace <id> | --clear --workspace <id>',
    options: { ...WORKSPACE, clear: { type: 'boolean' } },
    positionals: [0, 1000],
    async run(ctx, v, p) {
      const cleared = valueOrClear(p.length === 0 ? undefined : p.join(' '), v, 'model ids') === null;
      const models = cleared ? null : [...p];
      const out = await setPermittedModels(ctx, { workspaceId: workspaceOf(v), models });
      return {
        json: out,
        human: [out.permittedModels === null ? 'permitted models: all (unrestricted)' : `permitted models: ${out.permittedModels.join(' ')}`],
      };
    },
  },
  {
    group: 'workspace',
    action: 'default-route',
    summary: 'make a routing profile the default route (sluice/auto), or --clear',
    usage: '<identifier> --workspace <id> | --clear --workspace <id>',
    options: { ...WORKSPACE, clear: { type: 'boolean' } },
    positionals: [0, 1],
    async run(ctx, v, p) {
      const identifier = valueOrClear(p[0], v, 'a profile identifier');
      const out = await setDefaultProfile(ctx, { workspaceId: workspaceOf(v), identifier });
      return {
        json: out,
        human: [out.defaultProfile === null ? 'default route cleared: sluice/auto is refused 404' : `sluice/auto now routes through profile/${out.defaultProfile}`],
      };
    },
  },
  {
    group: 'member',
    action: 'add',
    summary: 'add a member',
    usage: '--workspace <id> [--email <email>]',
    options: { ...WORKSPACE, email: { type: 'string' } },
    positionals: [0, 0],
    async run(ctx, v) {
      const email = str(v, 'email');
      const out = await addMember(ctx, { workspaceId: workspaceOf(v), ...(email === undefined ? {} : { email }) });
      return { json: out, human: [`added member ${out.memberId}`] };
    },
  },
  {
    group: 'member',
    action: 'limit',
    summary: "set or clear a member's monthly spend limit",
    usage: '--workspace <id> --member <id> (--monthly <minor> | --clear)',
    options: { ...WORKSPACE, member: { type: 'string' }, monthly: { type: 'string' }, clear: { type: 'boolean' } },
    positionals: [0, 0],
    async run(ctx, v) {
      const raw = valueOrClear(str(v, 'monthly'), v, '--monthly <minor>');
      const out = await setMemberMonthlyLimit(ctx, {
        workspaceId: workspaceOf(v),
        memberId: need(v, 'member'),
        limitMinor: raw === null ? null : parseWholeNumber(raw, '--monthly'),
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
    async run(ctx, v) {
      const out = await removeMember(ctx, { workspaceId: workspaceOf(v), memberId: need(v, 'member'), revokeKeys: flag(v, 'revoke-keys') });
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
    async run(ctx, v) {
      const member = str(v, 'member');
      const name = str(v, 'name');
      const expires = str(v, 'expires');
      const out = await createKey(ctx, {
        workspaceId: workspaceOf(v),
        ...(member === undefined ? {} : { memberId: member }),
        ...(name === undefined ? {} : { name }),
        ...(expires === undefined ? {} : { expiresAt: parseInstant(expires, '--expires') }),
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
    usage: '--workspace <id> [--all]',
    options: { ...WORKSPACE, all: { type: 'boolean' } },
    positionals: [0, 0],
    async run(ctx, v) {
      const keys = await listKeys(ctx, { workspaceId: workspaceOf(v), includeEnded: flag(v, 'all') });
      return { json: { keys }, human: keys.length === 0 ? ['no keys'] : keys.map(describeKey) };
    },
  },
  {
    group: 'key',
    action: 'expiry',
    summary: "set a key's expiry (an expired key is never renewed), or --clear",
    usage: '<ISO instant> --workspace <id> --key <keyId|visible> | --clear --workspace <id> --key <keyId|visible>',
    options: { ...WORKSPACE, key: { type: 'string' }, clear: { type: 'boolean' } },
    positionals: [0, 1],
    async run(ctx, v, p) {
      const raw = valueOrClear(p[0], v, 'an ISO instant');
      const out = await setKeyExpiry(ctx, { ...keyRef(v), expiresAt: raw === null ? null : parseInstant(raw, 'expiry') });
      return { json: out, human: [`key ${out.keyId} expires ${out.expiresAt ?? 'never'}`] };
    },
  },
  {
    group: 'key',
    action: 'limit',
    summary: "set a key's credit limit and window (default monthly), or --clear",
    usage: '<minor> --workspace <id> --key <keyId|visible> [--window monthly|weekly|daily|never] | --clear ...',
    options: { ...WORKSPACE, key: { type: 'string' }, window: { type: 'string' }, clear: { type: 'boolean' } },
    positionals: [0, 1],
    async run(ctx, v, p) {
      const raw = valueOrClear(p[0], v, 'a limit in minor units');
      const window = str(v, 'window') ?? 'monthly';
      if (!(WINDOW_CADENCES as readonly string[]).includes(window)) {
        throw new ValidationError(`--window must be one of ${WINDOW_CADENCES.join(', ')}`);
      }
      if (raw === null && str(v, 'window') !== undefined) throw new ValidationError('--window goes with a limit, not with --clear');
      const out = await setKeyCreditLimit(ctx, {
        ...keyRef(v),
        limitMinor: raw === null ? null : parseWholeNumber(raw, 'limit'),
        window: window as WindowCadence,
      });
      return {
        json: out,
        human: [
          out.creditLimitMicros === null
            ? `key ${out.keyId}: no credit limit`
            : `key ${out.keyId}: credit limit ${formatMicros(out.creditLimitMicros)} minor units, ${out.window === 'never' ? 'never resets' : `per ${out.window} window (UTC)`}`,
        ],
      };
    },
  },
  {
    group: 'credit',
    action: 'add',
    summary: 'add prepaid credit, in minor units (the fee is taken at purchase, not here)',
    usage: '<minor> --workspace <id>',
    options: WORKSPACE,
    positionals: [1, 1],
    async run(ctx, v, p) {
      const out = await addCredit(ctx, { workspaceId: workspaceOf(v), minor: parseWholeNumber(p[0] ?? '', 'credit') });
      return { json: out, human: [`available: ${formatMicros(out.availableMicros)} minor units`] };
    },
  },
  {
    group: 'catalog',
    action: 'import',
    summary: 'validate and import the provider and model files (prunes what they no longer list)',
    usage: '[--providers <file>] [--catalog <file>]',
    options: { providers: { type: 'string' }, catalog: { type: 'string' } },
    positionals: [0, 0],
    async run(ctx, v) {
      const providersFile = str(v, 'providers');
      const catalogFile = str(v, 'catalog');
      const out = await importCatalog(ctx, {
        ...(providersFile === undefined ? {} : { providersFile }),
        ...(catalogFile === undefined ? {} : { catalogFile }),
      });
      return {
        json: out,
        human: [
          `imported ${out.providers} providers and ${out.models} models` +
            (out.removedModels + out.removedProviders > 0 ? `; removed ${out.removedModels} models and ${out.removedProviders} providers` : ''),
        ],
      };
    },
  },
  {
    group: 'profile',
    action: 'create',
    summary: 'create a routing profile: provider/model ids in the order they are tried',
    usage: '<identifier> <provider/model>... --workspace <id>',
    options: WORKSPACE,
    positionals: [2, 1000],
    async run(ctx, v, p) {
      const [identifier = '', ...models] = p;
      const out = await createProfile(ctx, { workspaceId: workspaceOf(v), identifier, models });
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
    async run(ctx, v, p) {
      const [identifier = '', ...models] = p;
      const out = await reorderProfile(ctx, { workspaceId: workspaceOf(v), identifier, models });
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
    async run(ctx, v, p) {
      const out = await deleteProfile(ctx, { workspaceId: workspaceOf(v), identifier: p[0] ?? '' });
      return { json: out, human: [`deleted profile/${out.identifier}`] };
    },
  },
  {
    group: 'profile',
    action: 'list',
    summary: "list the workspace's routing profiles",
    usage: '--workspace <id>',
    options: WORKSPACE,
    positionals: [0, 0],
    async run(ctx, v) {
      const profiles = await listProfiles(ctx, { workspaceId: workspaceOf(v) });
      return {
        json: { profiles },
        human:
          profiles.length === 0
            ? ['no profiles']
            : profiles.map((p) => `${p.slug}${p.isDefault ? ' (default, sluice/auto)' : ''}: ${p.models.join(' > ')}`),
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
    async run(ctx, v, p, io) {
      const provider = p[0] ?? '';
      const workspaceId = workspaceOf(v);
      const apiKey = await io.readSecret(`${provider} key for ${workspaceId} (input hidden): `);
      const out = await setByokKey(ctx, { workspaceId, provider, apiKey });
      return {
        json: out,
        human: [`workspace ${workspaceId} now runs every ${out.provider} request on its own key (secret ${out.secretName})`],
      };
    },
  },
  {
    group: 'byok',
    action: 'remove',
    summary: "remove the workspace's own key for a provider",
    usage: '<provider> --workspace <id>',
    options: WORKSPACE,
    positionals: [1, 1],
    async run(ctx, v, p) {
      const out = await removeByokKey(ctx, { workspaceId: workspaceOf(v), provider: p[0] ?? '' });
      return { json: out, human: [`removed the workspace's own ${out.provider} key (secret ${out.secretName} deleted)`] };
    },
  },
];
