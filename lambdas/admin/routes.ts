/**
 * The management API's routes: each names its method, its path under `/admin/v1`, the audit
 * action of the change it makes (none for reads), and the use case it calls. Amounts travel as
 * exact integers: minor units in (`amountMinor`), micro-units out (`…Micros`).
 */
import type { RollupPeriod } from '../aggregator/aggregate';
import type { WindowCadence } from '../shared/records';
import type { AuditSummary } from '../store/audit';
import { AUDIT_GLOBAL, listAudit } from '../store/audit';
import { listByokProviders, removeByokKey, setByokKey } from '../store/directory-byok';
import { UsageNotFoundError, ValidationError } from '../store/directory-errors';
import type { KeyRef } from '../store/directory-keys';
import { WINDOW_CADENCES, createKey, listKeys, revokeKey, rotateKey, setKeyCreditLimit, setKeyExpiry, showKey } from '../store/directory-keys';
import { addMember, listMembers, removeMember, setMemberMonthlyLimit } from '../store/directory-members';
import { cancelInvitation, createInvitation, lapseInvitations, listInvitations } from '../store/directory-invitations';
import { KeySlotsFullError } from '../store/directory-errors';
import { createProfile, deleteProfile, listProfiles, reorderProfile } from '../store/directory-profiles';
import { setSlices, showSlices } from '../store/directory-slices';
import { findUsageRow } from '../store/directory-usage';
import { MICROS_PER_MINOR, parseInstant } from '../store/directory-validate';
import {
  changePermittedModels,
  createWorkspace,
  listWorkspaces,
  setDefaultProfile,
  setLowCreditThreshold,
  setPaused,
  setPermittedModels,
  setSpendRateCap,
  setWorkspaceMonthlyLimit,
  showWorkspace,
} from '../store/directory-workspaces';
import type { Route, RouteCall, RouteResult } from './ports';
import { usageReport } from './usage-report';
import { auditEntryView, usageRowView } from './views';
import { formatMoney } from '../core/money-format';
import { CATALOG_ROUTES } from './catalog-routes';
import { checkMove, type ConfigHomeRecord } from '../core/config-home';
import { ConfigHomeMoveError } from '../store/directory-errors';
import type { ConfigHomeView } from '../store/config-home';
import { homeRegion } from '../store/regions';

export type { Route, RouteResult } from './ports';

// ---- body and query fields -------------------------------------------------------------------

function str(call: RouteCall, name: string): string | undefined {
  const v = call.body[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw new ValidationError(`${name} must be a string`);
  return v;
}

function need(call: RouteCall, name: string): string {
  const v = str(call, name);
  if (v === undefined || v === '') throw new ValidationError(`${name} is required`);
  return v;
}

/** An integer field that may be null (to clear a setting); undefined when absent. */
function intOrNull(call: RouteCall, name: string): number | null | undefined {
  const v = call.body[name];
  if (v === undefined) return undefined;
  if (v === null) return null;
  if (typeof v !== 'number' || !Number.isSafeInteger(v)) throw new ValidationError(`${name} must be a whole number or null`);
  return v;
}

function needIntOrNull(call: RouteCall, name: string): number | null {
  const v = intOrNull(call, name);
  if (v === undefined) throw new ValidationError(`${name} is required (null clears it)`);
  return v;
}

function strings(call: RouteCall, name: string): string[] {
  const v = call.body[name];
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) throw new ValidationError(`${name} must be an array of strings`);
  return v as string[];
}

function instantOrNull(call: RouteCall, name: string): number | null | undefined {
  const v = call.body[name];
  if (v === undefined) return undefined;
  if (v === null) return null;
  if (typeof v !== 'string') throw new ValidationError(`${name} must be an ISO 8601 instant or null`);
  return parseInstant(v, name);
}

function flagQuery(call: RouteCall, name: string): boolean {
  return call.query[name] === 'true' || call.query[name] === '1';
}

function limitQuery(call: RouteCall, fallback: number): number {
  const raw = call.query['limit'];
  if (raw === undefined) return fallback;
  if (!/^\d{1,4}$/.test(raw) || Number(raw) < 1 || Number(raw) > 1000) throw new ValidationError('limit must be 1 to 1000');
  return Number(raw);
}

/**
 * Minor units from a body as micro-units. `what` names the amount as a person calls it ("a
 * credit"), since the CLI prints the message: never the body's field name, and money as `USD 0.00`.
 */
function micros(minor: number, what: string, opts: { allowZero?: boolean; signed?: boolean } = {}): number {
  const m = minor * MICROS_PER_MINOR;
  if (!Number.isSafeInteger(minor) || !Number.isSafeInteger(m)) throw new ValidationError(`${what} is too large to count exactly`);
  if (opts.signed !== true && minor < (opts.allowZero === true ? 0 : 1)) {
    throw new ValidationError(`${what} must be ${opts.allowZero === true ? 'at least' : 'more than'} ${formatMoney(0)}, got ${formatMoney(m)}`);
  }
  return m;
}

const ws = (call: RouteCall): string => call.params['ws'] ?? '';

/** A key named in the path: `key_…` is a key id, anything else its visible part. */
function keyRef(call: RouteCall): KeyRef {
  const key = call.params['key'] ?? '';
  return /^key_[0-9a-f]+$/.test(key) ? { workspaceId: ws(call), keyId: key } : { workspaceId: ws(call), visible: key };
}

/** A change to one workspace: its body, audited under that workspace with `summary`. */
function change(call: RouteCall, body: unknown, summary: AuditSummary, status = 200): RouteResult {
  return { body, status, workspaceId: ws(call), summary };
}

/** What `GET /stage/config-home` answers (and the move, with `previous`): null fields for a stage with one region. */
function configHomeBody(regions: readonly string[] | undefined, own: string | undefined, view: ConfigHomeView | undefined): Record<string, unknown> {
  const move = (r: ConfigHomeRecord | undefined): Record<string, unknown> | null =>
    r === undefined ? null : { region: r.region, generation: r.generation, at: new Date(r.at).toISOString(), by: r.by, requestId: r.requestId };
  return {
    regions: regions ?? null,
    region: own ?? null,
    stageHome: regions?.[0] ?? null,
    configurationHome: view?.home ?? null,
    acceptsChanges: view === undefined || view.home === own,
    move: move(view?.record),
  };
}

// ---- routes --------------------------------------------------------------------------------

/** Every route of the management API. */
export const ROUTES: readonly Route[] = [
  // Workspaces
  {
    method: 'GET',
    pattern: ['workspaces'],
    async run({ deps }) {
      const list = await listWorkspaces(deps.ctx);
      const withBalance = await Promise.all(
        list.map(async (w) => {
          const b = await deps.balance.read(w.workspaceId).catch(() => undefined);
          return { ...w, availableMicros: b?.availableMicros ?? null, heldMicros: b?.heldMicros ?? null };
        }),
      );
      return { body: { workspaces: withBalance } };
    },
  },
  {
    method: 'POST',
    pattern: ['workspaces'],
    action: 'workspace.create',
    async run(call) {
      const email = str(call, 'ownerEmail');
      const out = await createWorkspace(call.deps.ctx, { name: need(call, 'name'), ...(email === undefined ? {} : { ownerEmail: email }) });
      return { body: out, status: 201, workspaceId: out.workspaceId, summary: { ownerMemberId: out.ownerMemberId } };
    },
  },
  {
    method: 'GET',
    pattern: ['workspaces', ':ws'],
    async run(call) {
      return { body: await showWorkspace(call.deps.ctx, { workspaceId: ws(call) }) };
    },
  },
  {
    method: 'POST',
    pattern: ['workspaces', ':ws', 'pause'],
    action: 'workspace.pause',
    async run(call) {
      return change(call, await setPaused(call.deps.ctx, { workspaceId: ws(call), paused: true }), { paused: true });
    },
  },
  {
    method: 'POST',
    pattern: ['workspaces', ':ws', 'resume'],
    action: 'workspace.resume',
    async run(call) {
      return change(call, await setPaused(call.deps.ctx, { workspaceId: ws(call), paused: false }), { paused: false });
    },
  },
  {
    method: 'PUT',
    pattern: ['workspaces', ':ws', 'monthly-limit'],
    action: 'workspace.limit',
    async run(call) {
      const out = await setWorkspaceMonthlyLimit(call.deps.ctx, { workspaceId: ws(call), limitMinor: needIntOrNull(call, 'amountMinor') });
      return change(call, out, { monthlyLimitMicros: out.monthlyLimitMicros });
    },
  },
  {
    method: 'PUT',
    pattern: ['workspaces', ':ws', 'spend-cap'],
    action: 'workspace.spend-cap',
    async run(call) {
      const cap = intOrNull(call, 'amountMinor');
      if (cap === undefined || cap === null) throw new ValidationError('amountMinor is required');
      const out = await setSpendRateCap(call.deps.ctx, { workspaceId: ws(call), capMinor: cap, force: call.body['force'] === true });
      return change(call, out, { spendRateCapMinor: out.spendRateCapMinor, previousMinor: out.previousMinor, forced: call.body['force'] === true });
    },
  },
  {
    method: 'GET',
    pattern: ['workspaces', ':ws', 'slices'],
    async run(call) {
      // `down`: regions the operator knows are lost; their share shows as stranded.
      const down = call.query['down']?.split(',').filter((r) => r !== '');
      return { body: await showSlices(call.deps.ctx, { workspaceId: ws(call), ...(down === undefined ? {} : { down }) }) };
    },
  },
  {
    method: 'PUT',
    pattern: ['workspaces', ':ws', 'slices'],
    action: 'workspace.slices',
    async run(call) {
      const count = intOrNull(call, 'count');
      if (count === undefined || count === null) throw new ValidationError('count is required');
      const out = await setSlices(call.deps.ctx, { workspaceId: ws(call), count });
      return change(call, out, { slices: out.slices, floor: out.floor, previous: out.previous });
    },
  },
  {
    method: 'PUT',
    pattern: ['workspaces', ':ws', 'low-credit'],
    action: 'workspace.low-credit',
    async run(call) {
      const minor = needIntOrNull(call, 'amountMinor');
      const out = await setLowCreditThreshold(call.deps.ctx, { workspaceId: ws(call), thresholdMicros: minor === null ? null : micros(minor, 'a low-credit threshold') });
      return change(call, out, { lowCreditThresholdMicros: out.lowCreditThresholdMicros });
    },
  },
  {
    method: 'PUT',
    pattern: ['workspaces', ':ws', 'permitted'],
    action: 'workspace.permit',
    async run(call) {
      const models = call.body['models'] === null ? null : strings(call, 'models');
      const out = await setPermittedModels(call.deps.ctx, { workspaceId: ws(call), models });
      return change(call, out, { permittedModels: out.permittedModels === null ? null : [...out.permittedModels] });
    },
  },
  {
    method: 'POST',
    pattern: ['workspaces', ':ws', 'permitted', 'add'],
    action: 'workspace.permit.add',
    async run(call) {
      const out = await changePermittedModels(call.deps.ctx, { workspaceId: ws(call), add: strings(call, 'models') });
      return change(call, out, { added: [...out.added] });
    },
  },
  {
    method: 'POST',
    pattern: ['workspaces', ':ws', 'permitted', 'remove'],
    action: 'workspace.permit.remove',
    async run(call) {
      const out = await changePermittedModels(call.deps.ctx, { workspaceId: ws(call), remove: strings(call, 'models') });
      return change(call, out, { removed: [...out.removed] });
    },
  },
  {
    method: 'PUT',
    pattern: ['workspaces', ':ws', 'default-route'],
    action: 'workspace.default-route',
    async run(call) {
      const identifier = call.body['identifier'] === null ? null : need(call, 'identifier');
      const out = await setDefaultProfile(call.deps.ctx, { workspaceId: ws(call), identifier });
      return change(call, out, { defaultProfile: out.defaultProfile });
    },
  },
  // Members
  {
    method: 'GET',
    pattern: ['workspaces', ':ws', 'members'],
    async run(call) {
      return { body: { members: await listMembers(call.deps.ctx, { workspaceId: ws(call) }) } };
    },
  },
  {
    method: 'POST',
    pattern: ['workspaces', ':ws', 'members'],
    action: 'member.add',
    async run(call) {
      const email = str(call, 'email');
      const out = await addMember(call.deps.ctx, { workspaceId: ws(call), ...(email === undefined ? {} : { email }) });
      return change(call, out, { memberId: out.memberId }, 201);
    },
  },
  {
    method: 'PUT',
    pattern: ['workspaces', ':ws', 'members', ':member', 'monthly-limit'],
    action: 'member.limit',
    async run(call) {
      const out = await setMemberMonthlyLimit(call.deps.ctx, {
        workspaceId: ws(call),
        memberId: call.params['member'] ?? '',
        limitMinor: needIntOrNull(call, 'amountMinor'),
      });
      return change(call, out, { memberId: out.memberId, monthlyLimitMicros: out.monthlyLimitMicros });
    },
  },
  {
    method: 'DELETE',
    pattern: ['workspaces', ':ws', 'members', ':member'],
    action: 'member.remove',
    async run(call) {
      const out = await removeMember(call.deps.ctx, { workspaceId: ws(call), memberId: call.params['member'] ?? '', revokeKeys: flagQuery(call, 'revokeKeys'), by: call.principal });
      return change(call, out, { memberId: out.memberId, revokedKeyIds: out.revokedKeyIds, keptKeyIds: out.keptKeyIds });
    },
  },
  // Invitations (each holds a key slot while outstanding)
  {
    method: 'GET',
    pattern: ['workspaces', ':ws', 'invitations'],
    async run(call) {
      return { body: { invitations: await listInvitations(call.deps.ctx, { workspaceId: ws(call) }) } };
    },
  },
  {
    method: 'POST',
    pattern: ['workspaces', ':ws', 'invitations'],
    action: 'member.invite',
    async run(call) {
      const role = str(call, 'role');
      if (role !== undefined && role !== 'member' && role !== 'owner') throw new ValidationError('role must be member or owner');
      const hours = intOrNull(call, 'expiresInHours');
      // `memberId` (or an e-mail a member already has, or the owner role) names an existing
      // member: the invitation adds a passkey to them and holds no key slot.
      const memberId = str(call, 'memberId');
      const email = str(call, 'email');
      if (memberId === undefined && (email === undefined || email === '')) throw new ValidationError('email is required');
      const out = await createInvitation(call.deps.ctx, {
        workspaceId: ws(call),
        ...(email === undefined ? {} : { email }),
        ...(role === undefined ? {} : { role }),
        ...(memberId === undefined ? {} : { memberId }),
        ...(hours === undefined || hours === null ? {} : { expiresInHours: hours }),
        invitedBy: call.principal,
      });
      // The token is in the answer only (it makes the link): never in the audit, a log or a table.
      const link = `/console/join#ws=${encodeURIComponent(ws(call))}&invitation=${encodeURIComponent(out.token)}`;
      const { invitation } = out;
      return change(call, { ...out, link }, { invitationId: invitation.invitationId, role: invitation.role, memberId: invitation.memberId, kind: invitation.kind }, 201);
    },
  },
  {
    method: 'DELETE',
    pattern: ['workspaces', ':ws', 'invitations', ':invitation'],
    action: 'member.invite.cancel',
    async run(call) {
      const out = await cancelInvitation(call.deps.ctx, { workspaceId: ws(call), invitationId: call.params['invitation'] ?? '' });
      return change(call, out, { invitationId: out.invitationId });
    },
  },
  // Keys
  {
    method: 'GET',
    pattern: ['workspaces', ':ws', 'keys'],
    async run(call) {
      return { body: { keys: await listKeys(call.deps.ctx, { workspaceId: ws(call), includeEnded: flagQuery(call, 'all') }) } };
    },
  },
  {
    method: 'POST',
    pattern: ['workspaces', ':ws', 'keys'],
    action: 'key.create',
    async run(call) {
      const memberId = str(call, 'memberId');
      const name = str(call, 'name');
      const expiresAt = instantOrNull(call, 'expiresAt');
      const mint = (): ReturnType<typeof createKey> =>
        createKey(call.deps.ctx, {
          workspaceId: ws(call),
          ...(memberId === undefined ? {} : { memberId }),
          ...(name === undefined ? {} : { name }),
          ...(expiresAt === undefined || expiresAt === null ? {} : { expiresAt }),
        });
      // A lapsed invitation frees its slot lazily: when every slot looks held, end those first.
      const out = await mint().catch(async (err: unknown) => {
        if (err instanceof KeySlotsFullError && (await lapseInvitations(call.deps.ctx, ws(call))) > 0) return mint();
        throw err;
      });
      // The raw key is in the answer only: never in the audit, a log or a table.
      return change(call, out, { keyId: out.keyId, visible: out.visible, memberId: memberId ?? null }, 201);
    },
  },
  {
    method: 'GET',
    pattern: ['workspaces', ':ws', 'keys', ':key'],
    async run(call) {
      return { body: await showKey(call.deps.ctx, keyRef(call)) };
    },
  },
  {
    method: 'PUT',
    pattern: ['workspaces', ':ws', 'keys', ':key', 'expiry'],
    action: 'key.expiry',
    async run(call) {
      const expiresAt = instantOrNull(call, 'expiresAt');
      if (expiresAt === undefined) throw new ValidationError('expiresAt is required (null clears it)');
      const out = await setKeyExpiry(call.deps.ctx, { ...keyRef(call), expiresAt });
      return change(call, out, { keyId: out.keyId, expiresAt: out.expiresAt });
    },
  },
  {
    method: 'PUT',
    pattern: ['workspaces', ':ws', 'keys', ':key', 'limit'],
    action: 'key.limit',
    async run(call) {
      const window = str(call, 'window') ?? 'monthly';
      if (!(WINDOW_CADENCES as readonly string[]).includes(window)) throw new ValidationError(`window must be one of ${WINDOW_CADENCES.join(', ')}`);
      const out = await setKeyCreditLimit(call.deps.ctx, { ...keyRef(call), limitMinor: needIntOrNull(call, 'amountMinor'), window: window as WindowCadence });
      return change(call, out, { keyId: out.keyId, creditLimitMicros: out.creditLimitMicros, window: out.window });
    },
  },
  {
    method: 'POST',
    pattern: ['workspaces', ':ws', 'keys', ':key', 'revoke'],
    action: 'key.revoke',
    async run(call) {
      const out = await revokeKey(call.deps.ctx, { ...keyRef(call), by: call.principal });
      return change(call, out, { keyId: out.keyId, visible: out.visible, wasExpired: out.wasExpired });
    },
  },
  {
    method: 'POST',
    pattern: ['workspaces', ':ws', 'keys', ':key', 'rotate'],
    action: 'key.rotate',
    async run(call) {
      const expiresAt = instantOrNull(call, 'expiresAt');
      const out = await rotateKey(call.deps.ctx, { ...keyRef(call), ...(expiresAt === undefined ? {} : { expiresAt }), by: call.principal });
      return change(call, out, { keyId: out.keyId, visible: out.visible, replacedVisible: out.replacedVisible });
    },
  },
  // Credit
  {
    method: 'POST',
    pattern: ['workspaces', ':ws', 'credit'],
    action: 'credit.add',
    async run(call) {
      const minor = intOrNull(call, 'amountMinor');
      if (minor === undefined || minor === null) throw new ValidationError('amountMinor is required');
      const reference = str(call, 'reference');
      const out = await call.deps.balance.credit({
        workspaceId: ws(call),
        micros: micros(minor, 'a credit'),
        ...(reference === undefined ? {} : { reference }),
        who: call.principal,
        requestId: call.requestId,
      });
      return {
        ...change(call, out, { amountMicros: out.entry.amountMicros, reference: reference ?? null }, out.applied ? 201 : 200),
        changed: out.applied,
      };
    },
  },
  {
    method: 'POST',
    pattern: ['workspaces', ':ws', 'credit', 'adjust'],
    action: 'credit.adjust',
    async run(call) {
      const minor = intOrNull(call, 'amountMinor');
      if (minor === undefined || minor === null) throw new ValidationError('amountMinor is required');
      if (minor === 0) throw new ValidationError(`an adjustment cannot be ${formatMoney(0)}: it changes the balance by a signed amount`);
      const reason = need(call, 'reason');
      const out = await call.deps.balance.adjust({
        workspaceId: ws(call),
        deltaMicros: micros(minor, 'an adjustment', { signed: true }),
        reason,
        who: call.principal,
        requestId: call.requestId,
      });
      return change(call, out, { amountMicros: out.entry.amountMicros, reason: out.entry.reason });
    },
  },
  {
    method: 'GET',
    pattern: ['workspaces', ':ws', 'credit', 'history'],
    async run(call) {
      return { body: { entries: await call.deps.balance.statement(ws(call), limitQuery(call, 100)) } };
    },
  },
  // Routing profiles
  {
    method: 'GET',
    pattern: ['workspaces', ':ws', 'profiles'],
    async run(call) {
      return { body: { profiles: await listProfiles(call.deps.ctx, { workspaceId: ws(call) }) } };
    },
  },
  {
    method: 'POST',
    pattern: ['workspaces', ':ws', 'profiles'],
    action: 'profile.create',
    async run(call) {
      const out = await createProfile(call.deps.ctx, { workspaceId: ws(call), identifier: need(call, 'identifier'), models: strings(call, 'models') });
      return change(call, out, { identifier: out.identifier, models: out.models }, 201);
    },
  },
  {
    method: 'PUT',
    pattern: ['workspaces', ':ws', 'profiles', ':profile'],
    action: 'profile.reorder',
    async run(call) {
      const out = await reorderProfile(call.deps.ctx, { workspaceId: ws(call), identifier: call.params['profile'] ?? '', models: strings(call, 'models') });
      return change(call, out, { identifier: out.identifier, models: out.models });
    },
  },
  {
    method: 'DELETE',
    pattern: ['workspaces', ':ws', 'profiles', ':profile'],
    action: 'profile.delete',
    async run(call) {
      const out = await deleteProfile(call.deps.ctx, { workspaceId: ws(call), identifier: call.params['profile'] ?? '' });
      return change(call, out, { identifier: out.identifier });
    },
  },
  // Bring your own key
  {
    method: 'GET',
    pattern: ['workspaces', ':ws', 'byok'],
    async run(call) {
      return { body: await listByokProviders(call.deps.ctx, { workspaceId: ws(call) }) };
    },
  },
  {
    method: 'PUT',
    pattern: ['workspaces', ':ws', 'byok', ':provider'],
    action: 'byok.set',
    async run(call) {
      // The key is in the body only: the summary names the provider and the secret, never the value.
      const out = await setByokKey(call.deps.ctx, { workspaceId: ws(call), provider: call.params['provider'] ?? '', apiKey: need(call, 'apiKey') });
      return change(call, out, { provider: out.provider, secretName: out.secretName });
    },
  },
  {
    method: 'DELETE',
    pattern: ['workspaces', ':ws', 'byok', ':provider'],
    action: 'byok.remove',
    async run(call) {
      const out = await removeByokKey(call.deps.ctx, { workspaceId: ws(call), provider: call.params['provider'] ?? '' });
      return change(call, out, { provider: out.provider, secretName: out.secretName });
    },
  },
  // Usage
  {
    method: 'GET',
    pattern: ['workspaces', ':ws', 'usage'],
    async run(call) {
      const period = (call.query['period'] ?? 'day') as RollupPeriod;
      const from = call.query['from'];
      const to = call.query['to'];
      if (from === undefined || to === undefined) throw new ValidationError('from and to are required');
      return { body: await usageReport(call.deps.ctx, { workspaceId: ws(call), period, from, to }) };
    },
  },
  {
    method: 'GET',
    pattern: ['workspaces', ':ws', 'requests', ':request'],
    async run(call) {
      const now = (call.deps.ctx.now ?? Date.now)();
      const since = call.query['since'] === undefined ? now - 31 * 86_400_000 : parseInstant(call.query['since'], 'since');
      const requestId = call.params['request'] ?? '';
      const row = await findUsageRow(call.deps.ctx, { workspaceId: ws(call), requestId, sinceMs: since, untilMs: now });
      if (row === undefined) throw new UsageNotFoundError(requestId);
      return { body: usageRowView(row) };
    },
  },
  // Catalog: providers and models (their own file)
  ...CATALOG_ROUTES,
  // The configuration home (a stage with several regions; docs/regions.md, "Configuration")
  {
    method: 'GET',
    pattern: ['stage', 'config-home'],
    async run(call) {
      const regions = call.deps.ctx.regions;
      const port = call.deps.configHome;
      if (regions === undefined) return { body: configHomeBody(undefined, undefined, undefined) };
      const view: ConfigHomeView = port === undefined ? { home: homeRegion(regions), record: undefined } : await port.read();
      return { body: configHomeBody(regions.regions, regions.region, view) };
    },
  },
  {
    method: 'PUT',
    pattern: ['stage', 'config-home'],
    action: 'stage.config-home',
    // Its target records it while the old home may be lost: accepted outside the configuration home.
    anyRegion: true,
    async run(call) {
      const region = need(call, 'region');
      const regions = call.deps.ctx.regions;
      const refused = checkMove(regions?.regions, regions?.region, region);
      if (refused !== undefined) throw new ConfigHomeMoveError(refused.code, refused.message);
      const port = call.deps.configHome;
      if (regions === undefined || port === undefined) throw new Error('the management API was built without its configuration home store');
      const { before, after } = await port.move({ region, by: call.principal, requestId: call.requestId });
      return {
        body: { ...configHomeBody(regions.regions, regions.region, after), previous: before.home },
        workspaceId: null,
        summary: { region, previous: before.home, generation: after.record?.generation ?? 0 },
      };
    },
  },
  // Audit
  {
    method: 'GET',
    pattern: ['audit'],
    async run(call) {
      const workspace = call.query['workspace'];
      const day = call.query['day'] ?? new Date((call.deps.ctx.now ?? Date.now)()).toISOString().slice(0, 10);
      if (workspace === undefined && !/^\d{4}-\d{2}-\d{2}$/.test(day)) throw new ValidationError('day must be yyyy-mm-dd');
      const entries = await listAudit(call.deps.ctx, {
        ...(workspace === undefined ? { day } : { workspaceId: workspace === 'catalog' ? AUDIT_GLOBAL : workspace }),
        limit: limitQuery(call, 50),
      });
      return { body: { entries: entries.map(auditEntryView) } };
    },
  },
];

