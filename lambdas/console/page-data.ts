/**
 * Reads what each page shows through the management API (as the signed-in member) and renders
 * it in the console's frame.
 */
import type { UsageReport } from '../admin/usage-report';
import { daySeries } from '../core/usage-series';
import type { UsageRecord } from '../shared/records';
import { recentUsageRows } from '../store/console-usage';
import type { InvitationView } from '../store/directory-invitations';
import type { KeyDetail, KeyView } from '../store/directory-keys';
import type { WorkspaceView } from '../store/directory-workspaces';
import type { ConsoleRequest } from './http';
import { pageFrame } from './layout';
import { keysPage, membersPage, routingPage, settingsPage, usagePage, workspacePage } from './pages';
import type { ConsoleDeps, ConsoleSession } from './ports';
import { readWorkspace } from './session-api';

/** Each page's path under `/console/` and its title. */
export const PAGE_TITLES: Readonly<Record<string, string>> = {
  '': 'Workspace',
  keys: 'Keys',
  usage: 'Usage',
  members: 'Members',
  routing: 'Routing profiles',
  settings: 'Settings',
};

/** Days the usage page covers, today included. */
const USAGE_DAYS = 30;

type Member = { memberId: string; role: 'owner' | 'member'; email: string | null; monthlyLimitMicros: number | null };

async function main(deps: ConsoleDeps, s: ConsoleSession, page: string, requestId: string, w: WorkspaceView): Promise<string> {
  const read = <T>(rest: string[], query: Record<string, string> = {}): Promise<T> => readWorkspace<T>(deps, s, rest, requestId, query);
  switch (page) {
    case '':
      return workspacePage(s, w, deps.keyRatePerMinute);
    case 'keys': {
      const { keys } = await read<{ keys: KeyView[] }>(['keys']);
      const details = await Promise.all(keys.map((k) => read<KeyDetail>(['keys', k.keyId])));
      return keysPage(s, details, w.keySlots);
    }
    case 'usage': {
      const now = (deps.now ?? deps.admin.ctx.now ?? Date.now)();
      const to = new Date(now).toISOString().slice(0, 10);
      const from = new Date(now - (USAGE_DAYS - 1) * 86_400_000).toISOString().slice(0, 10);
      const [report, keys, members, recent] = await Promise.all([
        read<UsageReport>(['usage'], { period: 'day', from, to }),
        read<{ keys: KeyView[] }>(['keys'], { all: 'true' }),
        read<{ members: Member[] }>(['members']),
        recentUsageRows(deps.admin.ctx, { workspaceId: s.workspaceId, limit: 25 }),
      ]);
      const visible = new Map(keys.keys.map((k) => [k.keyId, k.name === null ? k.visible : `${k.visible} (${k.name})`]));
      const email = new Map(members.members.map((m) => [m.memberId, m.email ?? m.memberId]));
      const keyName = (id: string | null): string => (id === null ? 'unknown' : (visible.get(id) ?? id));
      const charts = {
        byModel: daySeries(from, to, report.byModel.map((r) => ({ periodId: r.periodId, id: r.id ?? null, chargeMicros: r.chargeMicros })), (id) => id ?? 'unknown'),
        byKey: daySeries(from, to, report.byKey.map((r) => ({ periodId: r.periodId, id: r.id ?? null, chargeMicros: r.chargeMicros })), keyName),
        byMember: daySeries(from, to, report.byMember.map((r) => ({ periodId: r.periodId, id: r.memberId, chargeMicros: r.chargeMicros })), (id) => (id === null ? 'nobody (key kept after removal)' : (email.get(id) ?? id))),
      };
      return usagePage({ from, to, totalMicros: report.total.chargeMicros, charts, recent: recent as UsageRecord[], keyName: (id) => keyName(id) });
    }
    case 'members': {
      const [{ members }, { invitations }] = await Promise.all([read<{ members: Member[] }>(['members']), read<{ invitations: InvitationView[] }>(['invitations'])]);
      return membersPage(s, members, invitations);
    }
    case 'routing': {
      const { profiles } = await read<{ profiles: { identifier: string; slug: string; models: string[]; isDefault: boolean }[] }>(['profiles']);
      return routingPage(profiles);
    }
    case 'settings': {
      const { providers } = await read<{ providers: string[] }>(['byok']);
      return settingsPage(s, providers, w.lowCreditThreshold?.micros ?? null);
    }
    default:
      throw new Error(`no page ${page}`);
  }
}

/** The whole HTML of one signed-in page. */
export async function renderPage(deps: ConsoleDeps, session: ConsoleSession, page: string, req: ConsoleRequest): Promise<string> {
  const w = await readWorkspace<WorkspaceView>(deps, session, [], req.requestId);
  const body = await main(deps, session, page, req.requestId, w);
  return pageFrame({ title: PAGE_TITLES[page] ?? 'Console', path: req.path, session, workspaceName: w.name, main: body });
}
