/**
 * Reads what each page shows through the management API (as the signed-in member) and renders
 * it in the console's frame.
 */
import type { UsageReport } from '../admin/usage-report';
import { daySeries } from '../core/usage-series';
import type { UsageRecord } from '../shared/records';
import { recentUsageRows } from '../store/console-usage';
import { readCatalog } from '../store/directory-catalog';
import type { InvitationView } from '../store/directory-invitations';
import type { KeyDetail, KeyView } from '../store/directory-keys';
import type { WorkspaceView } from '../store/directory-workspaces';
import type { ConsoleRequest } from './http';
import { pageFrame } from './layout';
import { keysPage, membersPage, routingPage, settingsPage, usagePage, workspacePage, type NotYetCounted } from './pages';
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

/**
 * What today's recent requests hold beyond today's rollup: at least that much is not counted in
 * the totals yet (the aggregator adds a request up to a minute after it ends: its stream's batching window). A lower bound, and
 * never below zero: the recent list may not reach back over the whole day.
 */
export function notYetCounted(recent: readonly Pick<UsageRecord, 'startedAt' | 'chargeMicros'>[], today: { requests: number; chargeMicros: number } | undefined, day: string): NotYetCounted {
  const rows = recent.filter((r) => new Date(r.startedAt).toISOString().slice(0, 10) === day);
  const requests = rows.length - (today?.requests ?? 0);
  if (requests <= 0) return { requests: 0, chargeMicros: 0 };
  const charge = rows.reduce((a, r) => a + r.chargeMicros, 0) - (today?.chargeMicros ?? 0);
  return { requests, chargeMicros: Math.max(0, charge) };
}

type Member = { memberId: string; role: 'owner' | 'member'; email: string | null; monthlyLimitMicros: number | null };

async function main(deps: ConsoleDeps, s: ConsoleSession, page: string, requestId: string, w: WorkspaceView): Promise<string> {
  const read = <T>(rest: string[], query: Record<string, string> = {}): Promise<T> => readWorkspace<T>(deps, s, rest, requestId, query);
  switch (page) {
    case '':
      return workspacePage(s, w, deps.keyRatePerMinute);
    case 'keys': {
      const [{ keys }, { members }] = await Promise.all([read<{ keys: KeyView[] }>(['keys'], { all: 'true' }), read<{ members: Member[] }>(['members'])]);
      const live = await Promise.all(keys.filter((k) => k.state === 'live').map((k) => read<KeyDetail>(['keys', k.keyId])));
      const email = new Map(members.map((m) => [m.memberId, m.email ?? m.memberId]));
      return keysPage(s, { live, all: keys, slotsHeld: w.keySlots, emailOf: (id) => email.get(id) });
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
      return usagePage({
        from,
        to,
        totalMicros: report.total.chargeMicros,
        totalRequests: report.total.requests,
        notYetCounted: notYetCounted(recent, report.totals.find((t) => t.periodId === to), to),
        charts,
        recent,
        keyName: (id) => keyName(id),
      });
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
      const [{ providers }, catalog] = await Promise.all([read<{ providers: string[] }>(['byok']), readCatalog(deps.admin.ctx)]);
      // Only a provider the service reaches with a key of its own can take the workspace's own.
      const offered = catalog.providers.filter((p) => p.keySource !== 'none').map((p) => ({ name: p.name, displayName: p.displayName }));
      return settingsPage(s, providers, offered, w.lowCreditThreshold?.micros ?? null);
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
