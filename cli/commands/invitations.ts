/**
 * `sluice member invite | invitations | uninvite`: invitations to a workspace's console. An
 * outstanding invitation of someone new holds one of the workspace's five key slots until it is
 * accepted, cancelled or lapses; one for an existing member (a passkey link) holds none. `invite` prints the link once (the management API stores only its hash):
 * the console's address comes from `--console-url`, `SLUICE_CONSOLE_URL`, or, for the local
 * stage, the `consoleUrl` that `npm start` writes to its state file.
 */
import { existsSync, readFileSync } from 'node:fs';
import { ValidationError } from '../../lambdas/store/directory-errors';
import { apiPath } from '../api-client';
import type { Command, Values } from '../commands';
import { DEFAULT_LOCAL_STATE_FILE, LOCAL_STATE_ENV } from '../paths';

/** Environment variable holding a deployed stage's console address (the stack's console URL). */
export const CONSOLE_URL_ENV = 'SLUICE_CONSOLE_URL';

const WORKSPACE = { workspace: { type: 'string', short: 'w' } } as const;

function str(values: Values, name: string): string | undefined {
  const v = values[name];
  return typeof v === 'string' && v !== '' ? v : undefined;
}

function need(values: Values, name: string): string {
  const v = str(values, name);
  if (v === undefined) throw new ValidationError(`--${name} is required`);
  return v;
}

/** The console's address for the printed link, or undefined when nothing says it. */
export function consoleUrlOf(values: Values, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const given = str(values, 'console-url') ?? env[CONSOLE_URL_ENV];
  if (given !== undefined && given !== '') return given.replace(/\/+$/, '');
  const stateFile = env[LOCAL_STATE_ENV] || DEFAULT_LOCAL_STATE_FILE;
  if (!existsSync(stateFile)) return undefined;
  try {
    const state = JSON.parse(readFileSync(stateFile, 'utf8')) as { consoleUrl?: unknown };
    return typeof state.consoleUrl === 'string' ? state.consoleUrl : undefined;
  } catch {
    return undefined;
  }
}

interface InvitationView {
  invitationId: string;
  email: string;
  role: string;
  memberId: string;
  expiresAt: string;
  kind: 'join' | 'passkey';
  holdsKeySlot: boolean;
}

/** The invitation commands, added to the `member` group. */
export const INVITATION_COMMANDS: readonly Command[] = [
  {
    group: 'member',
    action: 'invite',
    summary: "invite someone to the workspace's console (holds a key slot until accepted); an existing member's e-mail, or --owner, makes a link that adds a passkey to them (no slot)",
    usage: '--workspace <id> --email <email> [--owner] [--hours <n>] [--console-url <url>]',
    options: { ...WORKSPACE, email: { type: 'string' }, owner: { type: 'boolean' }, hours: { type: 'string' }, 'console-url': { type: 'string' } },
    positionals: [0, 0],
    async run(api, v) {
      const hours = str(v, 'hours');
      if (hours !== undefined && !/^\d{1,4}$/.test(hours)) throw new ValidationError('--hours must be a whole number of hours');
      const out = await api.call<{ invitation: InvitationView; token: string; link: string }>({
        method: 'POST',
        path: apiPath('workspaces', need(v, 'workspace'), 'invitations'),
        body: { email: need(v, 'email'), role: v['owner'] === true ? 'owner' : 'member', ...(hours === undefined ? {} : { expiresInHours: Number(hours) }) },
      });
      const base = consoleUrlOf(v);
      const link = `${base ?? '<console URL>'}${out.link}`;
      const human = [
        out.invitation.kind === 'passkey'
          ? `a passkey link for ${out.invitation.email}, the workspace's existing ${out.invitation.role} (invitation ${out.invitation.invitationId}, until ${out.invitation.expiresAt}); it adds a passkey to them and holds no key slot`
          : `invited ${out.invitation.email} as ${out.invitation.role} (invitation ${out.invitation.invitationId}, until ${out.invitation.expiresAt}); it holds a key slot until accepted`,
        `link (shown this once): ${link}`,
      ];
      return {
        json: { invitation: out.invitation, link },
        human,
        ...(base === undefined ? { notes: [`no console address known: pass --console-url or set ${CONSOLE_URL_ENV}`] } : {}),
      };
    },
  },
  {
    group: 'member',
    action: 'invitations',
    summary: "outstanding invitations (a new member's holds a key slot); lapsed ones are ended and free theirs",
    usage: '--workspace <id>',
    options: { ...WORKSPACE },
    positionals: [0, 0],
    async run(api, v) {
      const out = await api.call<{ invitations: InvitationView[] }>({ method: 'GET', path: apiPath('workspaces', need(v, 'workspace'), 'invitations') });
      const rows = out.invitations.map((i) => [i.invitationId, i.email, i.role, i.expiresAt] as const);
      return {
        json: out,
        human: rows.length === 0 ? ['no outstanding invitations'] : rows.map((r) => r.join('  ')),
        table: { header: ['invitation', 'email', 'role', 'expires'], rows },
      };
    },
  },
  {
    group: 'member',
    action: 'uninvite',
    summary: "cancel an outstanding invitation; a new member's frees its key slot",
    usage: '--workspace <id> --invitation <id>',
    options: { ...WORKSPACE, invitation: { type: 'string' } },
    positionals: [0, 0],
    async run(api, v) {
      const out = await api.call<{ invitationId: string; freedKeySlot: boolean }>({ method: 'DELETE', path: apiPath('workspaces', need(v, 'workspace'), 'invitations', need(v, 'invitation')) });
      return { json: out, human: [`cancelled invitation ${out.invitationId}${out.freedKeySlot ? '; its key slot is free' : ' (a passkey link: it held no key slot)'}`] };
    },
  },
];
