/**
 * The console's page frame and HTML helpers: every value written into a page goes through
 * `esc`, so nothing a person typed (a key name, an e-mail) can become markup.
 */
import { CONSOLE_ICON_PATH } from './icon';
import type { ConsoleSession } from './ports';

/** Escapes text for HTML text and attribute values. */
export function esc(value: unknown): string {
  return String(value ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string);
}

/** JSON for a `<script type="application/json">` block: `<` escaped so it cannot close the tag. */
export function jsonBlock(id: string, value: unknown): string {
  return `<script type="application/json" id="${esc(id)}">${JSON.stringify(value).replace(/</g, '\\u003c')}</script>`;
}

/** The console's pages, in the order of its navigation. */
export const NAV = [
  { path: '/console/', name: 'Workspace' },
  { path: '/console/keys', name: 'Keys' },
  { path: '/console/usage', name: 'Usage' },
  { path: '/console/members', name: 'Members' },
  { path: '/console/routing', name: 'Routing' },
  { path: '/console/settings', name: 'Settings' },
] as const;

/** A whole page: head, the signed-in bar and navigation (when signed in), then `main`. */
export function pageFrame(input: { title: string; path: string; session?: ConsoleSession; workspaceName?: string; main: string }): string {
  const s = input.session;
  const nav =
    s === undefined
      ? ''
      : `<nav aria-label="Console">${NAV.map((n) => `<a href="${n.path}"${n.path === input.path ? ' aria-current="page"' : ''}>${n.name}</a>`).join('')}</nav>`;
  const bar =
    s === undefined
      ? ''
      : `<div class="who"><span>${esc(input.workspaceName ?? s.workspaceId)}</span> · <span data-testid="who">${esc(s.email ?? s.memberId)}</span> · <span class="role" data-testid="role">${esc(s.role)}</span>
         <button type="button" class="link" data-api="POST /console/api/signout" data-then="/console/signin">Sign out</button></div>`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
${s === undefined ? '' : `<meta name="sluice-csrf" content="${esc(s.csrf)}">`}
<title>${esc(input.title)} · Sluice console</title>
<link rel="icon" href="${CONSOLE_ICON_PATH}" type="image/svg+xml">
<link rel="stylesheet" href="/console/assets/console.css">
<script src="/console/assets/console.js" defer></script>
</head>
<body>
<header><a class="brand" href="/console/">Sluice</a>${bar}</header>
${nav}
<main>
<h1>${esc(input.title)}</h1>
<p class="flash" role="alert" hidden></p>
<section class="secret" data-testid="secret" hidden>
  <p class="secret-note"></p>
  <code class="secret-value" data-testid="secret-value"></code>
  <button type="button" class="copy" data-testid="copy">Copy</button>
  <button type="button" class="done">Done</button>
</section>
${input.main}
</main>
</body>
</html>`;
}

/** A table from rows of already-escaped cells. */
export function table(headers: readonly string[], rows: readonly (readonly string[])[], testId: string): string {
  const head = headers.map((h) => `<th scope="col">${esc(h)}</th>`).join('');
  const body = rows.length === 0 ? `<tr><td colspan="${headers.length}" class="empty">None yet.</td></tr>` : rows.map((r) => `<tr>${r.map((c) => `<td>${c}</td>`).join('')}</tr>`).join('');
  return `<table data-testid="${esc(testId)}" data-refresh><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table>`;
}

/**
 * A form the page script sends as JSON to the session API: `api` is `METHOD /console/api/…`.
 * Inputs name the body's fields; `data-kind` says how to read them (money in major units →
 * `amountMinor`, lines → an array, date → an ISO instant).
 */
export function apiForm(input: { api: string; fields: string; submit: string; disabled?: boolean; testId: string; confirm?: string }): string {
  // A disabled fieldset disables every control in it, inputs with their button: nothing looks
  // editable that cannot be sent.
  const dis = input.disabled === true ? ' disabled' : '';
  return `<form class="api" data-api="${esc(input.api)}" data-testid="${esc(input.testId)}"${input.confirm === undefined ? '' : ` data-confirm="${esc(input.confirm)}"`}><fieldset${dis}>
${input.fields}<button type="submit">${esc(input.submit)}</button></fieldset></form>`;
}

/** A button that sends one change. */
export function apiButton(input: { api: string; label: string; testId: string; disabled?: boolean; confirm?: string; body?: unknown }): string {
  return `<button type="button" data-api="${esc(input.api)}" data-testid="${esc(input.testId)}"${input.disabled === true ? ' disabled' : ''}${input.confirm === undefined ? '' : ` data-confirm="${esc(input.confirm)}"`}${input.body === undefined ? '' : ` data-body="${esc(JSON.stringify(input.body))}"`}>${esc(input.label)}</button>`;
}

/** A note beside an owner-only control a member sees disabled. */
export function ownerOnly(session: ConsoleSession, what: string): string {
  return session.role === 'owner' ? '' : `<p class="note" data-testid="owner-only">Only the workspace's owner can ${esc(what)}.</p>`;
}
