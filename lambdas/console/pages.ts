/**
 * The console's pages, server-rendered from what the management API reads: each function takes
 * the data and the session and returns the page's `main`. Owner-only controls are shown to
 * members disabled with a note; the server refuses them anyway (403).
 */
import { formatMoney, MICROS_PER_MINOR } from '../core/money-format';
import type { DaySeries } from '../core/usage-series';
import type { UsageRecord } from '../shared/records';
import type { InvitationView } from '../store/directory-invitations';
import type { KeyDetail } from '../store/directory-keys';
import type { WorkspaceView } from '../store/directory-workspaces';
import { apiButton, apiForm, esc, jsonBlock, ownerOnly, table } from './layout';
import type { ConsoleSession } from './ports';

const money = (micros: number | null | undefined): string => (micros === null || micros === undefined ? '—' : esc(formatMoney(micros)));
const minorMoney = (minor: number): string => money(minor * MICROS_PER_MINOR);
const moneyField = (name: string, label: string, placeholder = '20.00'): string =>
  `<label>${esc(label)} <input name="${esc(name)}" data-kind="money" inputmode="decimal" placeholder="${esc(placeholder)}" autocomplete="off"></label>`;
const stat = (label: string, value: string, testId: string): string => `<div class="stat"><dt>${esc(label)}</dt><dd data-testid="${esc(testId)}">${value}</dd></div>`;

/** The workspace: balance, this month, the pause, the spend-rate cap and the monthly limit. */
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
<h2>Pause</h2>
<p>A paused workspace refuses every request with 503 <code>paused_by_owner</code> and charges nothing; keys stay as they are.</p>
${pause}
${ownerOnly(s, 'pause or resume the workspace')}
<h2>Limits</h2>
${apiForm({ api: 'PUT /console/api/spend-cap', testId: 'spend-cap-form', submit: 'Set the cap', disabled: !owner, fields: moneyField('amountMinor', 'Spend-rate cap per 60 s', '50.00') })}
${apiForm({ api: 'PUT /console/api/monthly-limit', testId: 'monthly-limit-form', submit: 'Set the limit', disabled: !owner, fields: moneyField('amountMinor', 'Monthly limit (empty: none)', '500.00') })}
${ownerOnly(s, 'change the spend-rate cap or the monthly limit')}`;
}

function keyRow(k: KeyDetail): string[] {
  const limit = k.creditLimit === null ? 'None' : `${money(k.creditLimit.micros)} ${esc(k.creditLimit.window)}`;
  const windowCell = k.window === null ? '—' : `${money(k.window.settledMicros)} settled, ${money(k.window.heldMicros)} held`;
  const actions = [
    apiButton({ api: `POST /console/api/keys/${k.keyId}/rotate`, label: 'Rotate', testId: `rotate-${k.visible}`, confirm: 'Rotate? The key ends now and a new one replaces it.' }),
    apiButton({ api: `POST /console/api/keys/${k.keyId}/revoke`, label: 'Revoke', testId: `revoke-${k.visible}`, confirm: 'Revoke this key? Requests with it are refused from now on.' }),
  ].join(' ');
  return [`<code>${esc(k.visible)}</code>`, esc(k.name ?? ''), esc(k.state), esc(k.expiresAt?.slice(0, 10) ?? 'Never'), limit, windowCell, esc(k.lastUsedAt?.slice(0, 19).replace('T', ' ') ?? '—'), actions];
}

/** Keys: mint (shown once), list by visible part, revoke, rotate. */
export function keysPage(s: ConsoleSession, keys: readonly KeyDetail[], slotsHeld: number): string {
  return `
<p>A key is shown once, when it is made, and never again: Sluice keeps only a hash of it. A workspace holds at most five keys; outstanding invitations hold a slot each (<span data-testid="slots">${slotsHeld} of 5</span> held).</p>
${apiForm({
  api: 'POST /console/api/keys',
  testId: 'create-key',
  submit: 'Create key',
  fields: `<label>Name <input name="name" maxlength="64" placeholder="ci" autocomplete="off"></label>
<label>Expires (optional) <input name="expiresAt" type="date" data-kind="date"></label>`,
})}
${table(['Key', 'Name', 'State', 'Expires', 'Credit limit', "Window's spend", 'Last used', ''], keys.map(keyRow), 'keys')}
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

/** Usage: charts per day by model, key and member; recent requests; lookup by request id. */
export function usagePage(input: { from: string; to: string; totalMicros: number; charts: UsageCharts; recent: readonly UsageRecord[]; keyName: (id: string) => string }): string {
  return `
<p>From ${esc(input.from)} to ${esc(input.to)} (UTC): <strong data-testid="usage-total">${money(input.totalMicros)}</strong>. Daily totals come from the rollups, a few seconds behind the requests.</p>
${jsonBlock('usage-charts', input.charts)}
<div class="charts">
<figure><figcaption>Spend per day by model</figcaption><div class="chart" data-series="byModel" data-testid="chart-model"></div></figure>
<figure><figcaption>Spend per day by key</figcaption><div class="chart" data-series="byKey" data-testid="chart-key"></div></figure>
<figure><figcaption>Spend per day by member</figcaption><div class="chart" data-series="byMember" data-testid="chart-member"></div></figure>
</div>
<h2>Recent requests</h2>
${table(['Started (UTC)', 'Request id', 'Model', 'Key', 'Outcome', 'Charge'], input.recent.map((r) => requestRow(r, input.keyName)), 'recent-requests')}
<h2>Find a request</h2>
<form class="lookup" data-testid="lookup"><label>Request id <input name="requestId" pattern="req_[0-9a-f]+" required autocomplete="off"></label><button type="submit">Find</button></form>
<pre class="lookup-result" data-testid="lookup-result" hidden></pre>`;
}

/** Members: who is in, outstanding invitations, invite, monthly limits, remove. */
export function membersPage(
  s: ConsoleSession,
  members: readonly { memberId: string; role: string; email: string | null; monthlyLimitMicros: number | null }[],
  invitations: readonly InvitationView[],
): string {
  const owner = s.role === 'owner';
  const memberRows = members.map((m) => [
    esc(m.email ?? '—'),
    esc(m.role),
    m.monthlyLimitMicros === null ? 'None' : money(m.monthlyLimitMicros),
    m.role === 'owner'
      ? ''
      : `${apiForm({ api: `PUT /console/api/members/${m.memberId}/monthly-limit`, testId: `limit-${m.memberId}`, submit: 'Set limit', disabled: !owner, fields: moneyField('amountMinor', 'Monthly limit', '100.00') })}
${apiForm({ api: `DELETE /console/api/members/${m.memberId}`, testId: `remove-${m.memberId}`, submit: 'Remove', disabled: !owner, confirm: 'Remove this member?', fields: '<label><input type="checkbox" name="revokeKeys" data-kind="query"> also revoke the keys made for them</label>' })}`,
  ]);
  const inviteRows = invitations.map((i) => [
    esc(i.email),
    esc(i.role),
    esc(i.expiresAt.slice(0, 16).replace('T', ' ')),
    apiButton({ api: `DELETE /console/api/invitations/${i.invitationId}`, label: 'Cancel', testId: `cancel-${i.email}`, disabled: !owner }),
  ]);
  return `
${table(['E-mail', 'Role', 'Monthly limit', ''], memberRows, 'members')}
<h2>Invitations</h2>
<p>An outstanding invitation holds one of the workspace's five key slots until it is accepted, cancelled or lapses.</p>
${table(['E-mail', 'Role', 'Expires (UTC)', ''], inviteRows, 'invitations')}
${apiForm({ api: 'POST /console/api/invitations', testId: 'invite', submit: 'Invite', disabled: !owner, fields: '<label>E-mail <input name="email" type="email" required autocomplete="off"></label>' })}
${ownerOnly(s, 'invite, limit or remove members')}`;
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
  fields: `<label>Name <input name="identifier" required pattern="[a-z0-9][a-z0-9._-]*" autocomplete="off"></label>
<label>Models, one per line <textarea name="models" data-kind="lines" rows="3" required></textarea></label>`,
})}`;
}

/** Settings: bring-your-own provider keys (never shown) and the low-credit threshold. */
export function settingsPage(s: ConsoleSession, byok: readonly string[], lowCreditMicros: number | null): string {
  const owner = s.role === 'owner';
  const rows = byok.map((p) => [esc(p), 'set (never shown)', apiButton({ api: `DELETE /console/api/byok/${p}`, label: 'Remove', testId: `byok-remove-${p}`, disabled: !owner })]);
  return `
<h2>Your own provider keys</h2>
<p>With a key of your own for a provider, every request to that provider runs on it and the provider bills you directly. A key set here is stored in the secret store and never shown again.</p>
${table(['Provider', 'Key', ''], rows, 'byok')}
${apiForm({
  api: 'PUT /console/api/byok/{provider}',
  testId: 'byok-set',
  submit: 'Set key',
  disabled: !owner,
  fields: `<label>Provider <input name="provider" data-kind="path" required autocomplete="off"></label>
<label>API key <input name="apiKey" type="password" required autocomplete="off"></label>`,
})}
<h2>Low-credit notice</h2>
<p>When the available balance falls below this amount, Sluice sends the low-credit notice. Now: <strong data-testid="low-credit">${lowCreditMicros === null ? 'None' : money(lowCreditMicros)}</strong>.</p>
${apiForm({ api: 'PUT /console/api/low-credit', testId: 'low-credit-form', submit: 'Set threshold', disabled: !owner, fields: moneyField('amountMinor', 'Threshold (empty: none)', '10.00') })}
${ownerOnly(s, 'change provider keys or the low-credit threshold')}`;
}

/** Sign-in with a passkey. */
export function signInPage(): string {
  return `
<p>Sign in with the passkey you made when you accepted your invitation. There is no password.</p>
<button type="button" id="signin" data-testid="signin">Sign in with a passkey</button>`;
}

/** Joining through an invitation: the link's fragment holds the invitation (never sent to a server log). */
export function joinPage(): string {
  return `
<p>You were invited to a Sluice workspace. Make a passkey for this console to accept: your device keeps it, and Sluice stores only its public half.</p>
<button type="button" id="join" data-testid="join">Accept and make a passkey</button>`;
}
