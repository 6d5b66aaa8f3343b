/**
 * The console's pages, server-rendered from what the management API reads: each function takes
 * the data and the session and returns the page's `main`. Owner-only controls are shown to
 * members disabled with a note; the server refuses them anyway (403).
 */
import { formatMoney, formatMoneyRounded, MICROS_PER_MINOR } from '../core/money-format';
import type { DaySeries } from '../core/usage-series';
import type { UsageRecord } from '../shared/records';
import type { InvitationView } from '../store/directory-invitations';
import type { KeyDetail, KeyView } from '../store/directory-keys';
import type { WorkspaceView } from '../store/directory-workspaces';
import { apiButton, apiForm, esc, jsonBlock, ownerOnly, table } from './layout';
import type { ConsoleSession } from './ports';

/**
 * An amount in people's precision (cents; more places only below a cent), with the exact figure
 * one hover (the title) or one click (the page script swaps the two) away when they differ.
 */
const money = (micros: number | null | undefined): string => {
  if (micros === null || micros === undefined) return '—';
  const shown = formatMoneyRounded(micros);
  const exact = formatMoney(micros);
  if (shown === exact) return esc(shown);
  return `<span class="money" tabindex="0" role="button" title="Exactly ${esc(exact)} (click to show)" data-exact="${esc(exact)}" data-shown="${esc(shown)}">${esc(shown)}</span>`;
};
const minorMoney = (minor: number): string => money(minor * MICROS_PER_MINOR);
const moneyField = (name: string, label: string, placeholder = '20.00'): string =>
  `<label>${esc(label)} <input name="${esc(name)}" data-kind="money" inputmode="decimal" placeholder="${esc(placeholder)}" autocomplete="off"></label>`;
const stat = (label: string, value: string, testId: string): string => `<div class="stat"><dt>${esc(label)}</dt><dd data-testid="${esc(testId)}">${value}</dd></div>`;

/**
 * In a stage with several regions, each region's part of the balance: requests are served in each
 * region from its own part (moved between regions as needed), and the part of a region that is
 * down stays there, stranded, until it returns. Nothing in a stage with one region.
 */
function byRegion(w: WorkspaceView): string {
  if (w.regions === null || w.regions.length < 2) return '';
  return `<h2>By region</h2>
<p>Each region serves from its own part of the balance, and credit moves between regions as their traffic needs it. If a region goes down, its part stays there (stranded, not lost) until the region returns; the other regions keep serving from their own parts.</p>
${table(
  ['Region', 'Available', 'Held now'],
  [
    ...w.regions.map((r) => [esc(r.region), money(r.available.micros), money(r.held.micros)]),
    // Credit on its way between regions (a top-up's spread, a transfer) is in the workspace's available, in no region's.
    ...(w.inTransit !== null && w.inTransit.micros !== 0 ? [['In transit between regions', money(w.inTransit.micros), money(0)]] : []),
  ],
  'by-region',
)}`;
}

/** The workspace: balance, this month, the pause, the spend-rate cap and the monthly limit (and, across regions, each region's part). */
export function workspacePage(s: ConsoleSession, w: WorkspaceView, keyRatePerMinute: number): string {
  const owner = s.role === 'owner';
  const pause = w.paused
    ? apiButton({ api: 'POST /console/api/resume', label: 'Resume serving', testId: 'resume', disabled: !owner })
    : apiButton({ api: 'POST /console/api/pause', label: 'Pause the workspace', testId: 'pause', disabled: !owner, confirm: 'Pause? Every request on this workspace’s keys will be refused until you resume.' });
  return `
<dl class="stats">
${stat('Available', money(w.balance.available.micros), 'available')}
${stat('Held now', money(w.balance.held.micros), 'held')}
${stat(`Spent this month (${w.month.id})`, money(w.month.settled.micros), 'spent-month')}
${stat('Serving', w.paused ? '<strong class="paused">Paused by the owner</strong>' : 'Serving', 'paused')}
${stat('Spend-rate cap', `${minorMoney(w.spendRateCapMinor)} per 60 s`, 'spend-cap')}
${stat('Monthly limit', w.monthlyLimit === null ? 'None' : money(w.monthlyLimit.micros), 'monthly-limit')}
${stat('Key slots held', `${w.keySlots} of 5`, 'key-slots')}
${stat('Requests per key', `${keyRatePerMinute} a minute (set by Sluice)`, 'key-rate')}
</dl>
${byRegion(w)}<h2>Pause</h2>
<p>A paused workspace refuses every request with 503 <code>paused_by_owner</code> and charges nothing; keys stay as they are.</p>
${pause}
${ownerOnly(s, 'pause or resume the workspace')}
<h2>Limits</h2>
${apiForm({ api: 'PUT /console/api/spend-cap', testId: 'spend-cap-form', submit: 'Set the cap', disabled: !owner, fields: moneyField('amountMinor', 'Spend-rate cap per 60 s', '50.00') })}
${apiForm({ api: 'PUT /console/api/monthly-limit', testId: 'monthly-limit-form', submit: 'Set the limit', disabled: !owner, fields: moneyField('amountMinor', 'Monthly limit (empty: none)', '500.00') })}
${ownerOnly(s, 'change the spend-rate cap or the monthly limit')}`;
}

const when = (iso: string | null): string => (iso === null ? '—' : `<time class="nowrap" datetime="${esc(iso)}">${esc(iso.slice(0, 16).replace('T', ' '))}</time>`);

/**
 * Who a management principal is, for the people of the workspace: a member by e-mail, or the
 * operator (whose IAM identity is not the workspace's business).
 */
export function principalName(principal: string | null, workspaceId: string, emailOf: (memberId: string) => string | undefined): string {
  if (principal === null) return 'not recorded';
  const m = /^console:([^/]+)\/(mem_[0-9a-f]+)$/.exec(principal);
  if (m === null) return 'an operator (sluice CLI)';
  if (m[1] !== workspaceId) return 'someone outside this workspace';
  return emailOf(m[2] as string) ?? `a former member (${m[2] as string})`;
}

function keyRow(k: KeyDetail): string[] {
  const limit = k.creditLimit === null ? 'None' : `${money(k.creditLimit.micros)} ${esc(k.creditLimit.window)}`;
  const windowCell = k.window === null ? '—' : `${money(k.window.settledMicros)} settled, ${money(k.window.heldMicros)} held`;
  const actions = [
    apiButton({ api: `POST /console/api/keys/${k.keyId}/rotate`, label: 'Rotate', testId: `rotate-${k.visible}`, confirm: 'Rotate? The key ends now and a new one replaces it.' }),
    apiButton({ api: `POST /console/api/keys/${k.keyId}/revoke`, label: 'Revoke', testId: `revoke-${k.visible}`, confirm: 'Revoke this key? Requests with it are refused from now on.' }),
  ].join(' ');
  return [`<code>${esc(k.visible)}</code>`, esc(k.name ?? ''), esc(k.expiresAt?.slice(0, 10) ?? 'Never'), limit, windowCell, esc(k.lastUsedAt?.slice(0, 19).replace('T', ' ') ?? '—'), actions];
}

/** An ended key: how and when it ended, by whom; an expired one can still be revoked (SPEC: never renewed). */
function endedRow(k: KeyView, all: readonly KeyView[], by: (principal: string | null) => string): { at: string; cells: string[] } {
  if (k.state === 'expired') {
    const revoke = apiButton({ api: `POST /console/api/keys/${k.keyId}/revoke`, label: 'Revoke', testId: `revoke-${k.visible}`, confirm: 'Revoke this expired key? Its key slot frees.' });
    return { at: k.expiresAt ?? '', cells: [`<code>${esc(k.visible)}</code>`, esc(k.name ?? ''), 'Expired: holds its key slot until revoked; never renewed', when(k.expiresAt), 'its expiry date', revoke] };
  }
  const replacement = all.find((r) => r.keyId === k.keyId && r.createdAt === k.revokedAt && r.visible !== k.visible);
  const how =
    k.endedHow === 'rotated'
      ? `Rotated${replacement === undefined ? '' : `: replaced by <code>${esc(replacement.visible)}</code>`}`
      : k.endedHow === 'member-removed'
        ? 'Revoked when its member was removed'
        : k.endedHow === 'revoked'
          ? 'Revoked'
          : 'Ended';
  return { at: k.revokedAt ?? '', cells: [`<code>${esc(k.visible)}</code>`, esc(k.name ?? ''), how, when(k.revokedAt), esc(by(k.endedBy)), ''] };
}

/** Keys: mint (shown once), the keys in use (revoke, rotate), and the keys that ended, with when and by whom. */
export function keysPage(
  s: ConsoleSession,
  input: { live: readonly KeyDetail[]; all: readonly KeyView[]; slotsHeld: number; emailOf: (memberId: string) => string | undefined },
): string {
  const by = (principal: string | null): string => principalName(principal, s.workspaceId, input.emailOf);
  const ended = input.all
    .filter((k) => k.state !== 'live')
    .map((k) => endedRow(k, input.all, by))
    .sort((a, b) => (a.at < b.at ? 1 : a.at > b.at ? -1 : 0))
    .map((r) => r.cells);
  return `
<p>A key is shown once, when it is made, and never again: Sluice keeps only a hash of it. A workspace holds at most five keys; outstanding invitations of new members hold a slot each (<span data-testid="slots" data-refresh>${input.slotsHeld} of 5</span> held).</p>
${apiForm({
  api: 'POST /console/api/keys',
  testId: 'create-key',
  submit: 'Create key',
  fields: `<label>Name <input name="name" maxlength="64" placeholder="ci" autocomplete="off"></label>
<label>Expires (optional) <input name="expiresAt" type="date" data-kind="date"></label>`,
})}
${table(['Key', 'Name', 'Expires', 'Credit limit', "Window's spend", 'Last used', ''], input.live.map(keyRow), 'keys')}
<h2>Ended keys</h2>
<p>A revoked or rotated key is refused like one never issued. An expired key is refused with <code>key_expired</code>, keeps its slot until it is revoked, and is never renewed: make a new key instead.</p>
${table(['Key', 'Name', 'How it ended', 'When (UTC)', 'By', ''], ended, 'ended-keys')}
<p class="note">Signed in as ${esc(s.email ?? s.memberId)}: keys you create count against your own monthly limit.</p>`;
}

/** The usage data the page's charts draw. */
export interface UsageCharts {
  readonly byModel: DaySeries;
  readonly byKey: DaySeries;
  readonly byMember: DaySeries;
}

function requestRow(r: UsageRecord, keyName: (id: string) => string): string[] {
  return [
    esc(new Date(r.startedAt).toISOString().slice(0, 19).replace('T', ' ')),
    `<code>${esc(r.requestId)}</code>`,
    esc(r.servedBy ?? r.requestedModel),
    esc(keyName(r.keyId)),
    `${esc(r.outcome)} (${esc(r.status)})`,
    money(r.chargeMicros),
  ];
}

/**
 * What the recent requests show that the daily totals do not hold yet: today's rows among the
 * recent ones beyond today's rollup, a lower bound (the totals count a request up to a minute
 * after it ends; the recent requests are read as they are written).
 */
export interface NotYetCounted {
  readonly requests: number;
  readonly chargeMicros: number;
}

const plural = (n: number, one: string, many: string): string => `${n} ${n === 1 ? one : many}`;

/** Usage: totals, charts per day by model, key and member; recent requests; lookup by request id. */
export function usagePage(input: {
  from: string;
  to: string;
  totalMicros: number;
  totalRequests: number;
  notYetCounted: NotYetCounted;
  charts: UsageCharts;
  recent: readonly UsageRecord[];
  keyName: (id: string) => string;
}): string {
  const lag = input.notYetCounted.requests > 0
    ? `<p class="pending" data-testid="usage-pending">Not in these totals yet: at least ${plural(input.notYetCounted.requests, 'request', 'requests')} (${money(input.notYetCounted.chargeMicros)}) listed under Recent requests below. Reload in a minute to see ${input.notYetCounted.requests === 1 ? 'it' : 'them'} counted.</p>`
    : '';
  // An empty chart says so in words instead of drawing an axis of zeros.
  const figure = (series: keyof UsageCharts, caption: string, testId: string): string =>
    input.charts[series].series.length === 0
      ? `<figure><figcaption>${esc(caption)} (USD)</figcaption><p class="note chart-empty" data-testid="${testId}" data-empty>No spend counted in these days yet.</p></figure>`
      : `<figure><figcaption>${esc(caption)} (USD)</figcaption><div class="chart" data-series="${series}" data-testid="${testId}"></div></figure>`;
  return `
<p>From ${esc(input.from)} to ${esc(input.to)} (UTC): <strong data-testid="usage-total">${money(input.totalMicros)}</strong> in ${plural(input.totalRequests, 'request', 'requests')}.</p>
<p class="note" data-testid="usage-lag">The totals and charts count each request up to a minute after it ends (they are added up per day in the background, in batches); Recent requests below lists each request as soon as it ends.</p>
${lag}
${jsonBlock('usage-charts', input.charts)}
<div class="charts">
${figure('byModel', 'Spend per day by model', 'chart-model')}
${figure('byKey', 'Spend per day by key', 'chart-key')}
${figure('byMember', 'Spend per day by member', 'chart-member')}
</div>
<h2>Recent requests</h2>
${table(['Started (UTC)', 'Request id', 'Model', 'Key', 'Outcome', 'Charge'], input.recent.map((r) => requestRow(r, input.keyName)), 'recent-requests')}
<h2>Find a request</h2>
<form class="lookup" data-testid="lookup"><label>Request id <input name="requestId" pattern="req_[0-9a-f]+" required autocomplete="off"></label><button type="submit">Find</button></form>
<pre class="lookup-result" data-testid="lookup-result" hidden></pre>`;
}

/**
 * Members: who is in, their monthly limits, a new passkey for someone who lost theirs, removal;
 * outstanding invitations; invite. Each control has its own cell; a member sees them all
 * disabled (inputs too), with a note.
 */
export function membersPage(
  s: ConsoleSession,
  members: readonly { memberId: string; role: string; email: string | null; monthlyLimitMicros: number | null }[],
  invitations: readonly InvitationView[],
): string {
  const owner = s.role === 'owner';
  const memberRows = members.map((m) => {
    const who = m.email ?? m.memberId;
    const passkey = apiButton({
      api: 'POST /console/api/invitations',
      label: 'New passkey link',
      testId: `passkey-${m.memberId}`,
      disabled: !owner,
      body: { memberId: m.memberId },
      confirm: `Make a link that adds a passkey to ${who}? Their keys, limits and role stay as they are.`,
    });
    if (m.role === 'owner') return [esc(m.email ?? '—'), esc(m.role), m.monthlyLimitMicros === null ? 'None' : money(m.monthlyLimitMicros), '', passkey, ''];
    return [
      esc(m.email ?? '—'),
      esc(m.role),
      m.monthlyLimitMicros === null ? 'None' : money(m.monthlyLimitMicros),
      apiForm({ api: `PUT /console/api/members/${m.memberId}/monthly-limit`, testId: `limit-${m.memberId}`, submit: 'Set limit', disabled: !owner, fields: moneyField('amountMinor', 'Monthly limit (empty: none)', '100.00') }),
      passkey,
      apiForm({
        api: `DELETE /console/api/members/${m.memberId}`,
        testId: `remove-${m.memberId}`,
        submit: 'Remove',
        disabled: !owner,
        confirm: `Remove ${who} from the workspace?`,
        fields: '<label class="check"><input type="checkbox" name="revokeKeys" data-kind="query"> <span>also revoke the keys made for them</span></label>',
      }),
    ];
  });
  const inviteRows = invitations.map((i) => [
    esc(i.email),
    i.kind === 'passkey' ? `A new passkey for this ${esc(i.role)} (no key slot)` : `Joins as ${esc(i.role)} (holds a key slot)`,
    esc(i.expiresAt.slice(0, 16).replace('T', ' ')),
    apiButton({ api: `DELETE /console/api/invitations/${i.invitationId}`, label: 'Cancel', testId: `cancel-${i.email}`, disabled: !owner }),
  ]);
  return `
${table(['E-mail', 'Role', 'Monthly limit', 'Set the monthly limit', 'Lost passkey', 'Remove'], memberRows, 'members')}
<p class="note">Lost a passkey, or want one on another device? <strong>New passkey link</strong> makes a link that adds a passkey to that member: send it to them. Their keys, limits and role stay as they are, and the link holds no key slot. An owner who lost theirs asks the Sluice operator for one (<code>sluice member invite --owner</code>).</p>
<h2>Invitations</h2>
<p>An invitation for someone new holds one of the workspace's five key slots until it is accepted, cancelled or lapses. A passkey link for an existing member holds none.</p>
${table(['E-mail', 'For', 'Expires (UTC)', ''], inviteRows, 'invitations')}
${apiForm({ api: 'POST /console/api/invitations', testId: 'invite', submit: 'Invite', disabled: !owner, fields: '<label>E-mail <input name="email" type="email" required autocomplete="off"></label>' })}
${ownerOnly(s, 'invite, limit or remove members, or make passkey links')}`;
}

/** Routing profiles: create, reorder, make default, delete. */
export function routingPage(profiles: readonly { identifier: string; slug: string; models: readonly string[]; isDefault: boolean }[]): string {
  const rows = profiles.map((p) => [
    `<code>${esc(p.slug)}</code>${p.isDefault ? ' <strong>(default: sluice/auto)</strong>' : ''}`,
    apiForm({
      api: `PUT /console/api/profiles/${p.identifier}`,
      testId: `reorder-${p.identifier}`,
      submit: 'Save order',
      fields: `<textarea name="models" data-kind="lines" rows="${Math.max(2, p.models.length)}" aria-label="Models of ${esc(p.identifier)}, one per line, in order">${esc(p.models.join('\n'))}</textarea>`,
    }),
    [
      p.isDefault ? '' : apiButton({ api: 'PUT /console/api/default-route', label: 'Make default', testId: `default-${p.identifier}`, body: { identifier: p.identifier } }),
      apiButton({ api: `DELETE /console/api/profiles/${p.identifier}`, label: 'Delete', testId: `delete-${p.identifier}`, confirm: 'Delete this profile?' }),
    ].join(' '),
  ]);
  return `
<p>A profile is an ordered list of <code>provider/model</code> lines, tried in your order; call it as <code>profile/&lt;name&gt;</code>, or the default one as <code>sluice/auto</code>.</p>
${table(['Profile', 'Models, in order', ''], rows, 'profiles')}
<h2>New profile</h2>
${apiForm({
  api: 'POST /console/api/profiles',
  testId: 'create-profile',
  submit: 'Create profile',
  fields: `<label>Name <input name="identifier" required pattern="[a-z0-9][a-z0-9._\\-]*" autocomplete="off"></label>
<label>Models, one per line <textarea name="models" data-kind="lines" rows="3" required></textarea></label>`,
})}`;
}

/** A catalogued provider a workspace may bring its own key for. */
export interface ByokProvider {
  readonly name: string;
  readonly displayName: string;
}

/** Settings: bring-your-own provider keys (never shown) and the low-credit threshold. */
export function settingsPage(s: ConsoleSession, byok: readonly string[], providers: readonly ByokProvider[], lowCreditMicros: number | null): string {
  const owner = s.role === 'owner';
  const display = new Map(providers.map((p) => [p.name, p.displayName]));
  const rows = byok.map((p) => [
    `${esc(display.get(p) ?? p)} <code>${esc(p)}</code>`,
    'set (never shown)',
    apiButton({ api: `DELETE /console/api/byok/${p}`, label: 'Remove', testId: `byok-remove-${p}`, disabled: !owner }),
  ]);
  const options = providers.map((p) => `<option value="${esc(p.name)}">${esc(p.displayName)} (${esc(p.name)})${byok.includes(p.name) ? ' · set' : ''}</option>`).join('');
  return `
<h2>Your own provider keys</h2>
<p>With a key of your own for a provider, every request to that provider runs on it and the provider bills you directly. A key set here is stored in the secret store and never shown again.</p>
${table(['Provider', 'Key', ''], rows, 'byok')}
${apiForm({
  api: 'PUT /console/api/byok/{provider}',
  testId: 'byok-set',
  submit: 'Set key',
  disabled: !owner,
  fields: `<label>Provider <select name="provider" data-kind="path" required><option value="">Choose a provider…</option>${options}</select></label>
<label>API key <input name="apiKey" type="password" required autocomplete="off"></label>`,
})}
<h2>Low-credit notice</h2>
<p>When the available balance falls below this amount, Sluice sends the low-credit notice. Now: <strong data-testid="low-credit">${lowCreditMicros === null ? 'None' : money(lowCreditMicros)}</strong>.</p>
${apiForm({ api: 'PUT /console/api/low-credit', testId: 'low-credit-form', submit: 'Set threshold', disabled: !owner, fields: moneyField('amountMinor', 'Threshold (empty: none)', '10.00') })}
${ownerOnly(s, 'change provider keys or the low-credit threshold')}`;
}

/** Sign-in with a passkey, and what to do without one. */
export function signInPage(): string {
  return `
<p>Sign in with the passkey you made when you accepted your invitation. There is no password.</p>
<button type="button" id="signin" data-testid="signin">Sign in with a passkey</button>
<h2>Lost your passkey?</h2>
<div data-testid="lost-passkey">
<p>Nobody can recover a passkey, and there is no password to reset. Ask your workspace's owner for a new passkey link: they make one on the Members page (<strong>New passkey link</strong>), and opening it on your device adds a passkey to your membership. Your keys, limits and role stay as they are.</p>
<p>If you are the owner, ask your Sluice operator: they send you a new link with <code>sluice member invite --owner</code>.</p>
</div>`;
}

/** Joining through an invitation: the link's fragment holds the invitation (never sent to a server log). */
export function joinPage(): string {
  return `
<p>You were invited to a Sluice workspace, or sent a link to add a passkey to your membership. Make a passkey for this console to accept: your device keeps it, and Sluice stores only its public half.</p>
<button type="button" id="join" data-testid="join">Accept and make a passkey</button>`;
}
