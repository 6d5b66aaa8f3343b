/**
 * The workspace console in a real browser (issues 16 and 22): Debian's Chromium under
 * playwright-core with a virtual passkey authenticator per person (per device). The owner,
 * invited with the CLI, joins and signs in, mints a key (listed at once, while the one-time panel
 * shows it) and copies it; a request with that key through the official `openai` client shows in
 * the usage page, first as not counted yet, then in the totals and charts; balances read in cents
 * with the exact figure a click away; a member joins and cannot pause or manage members (the
 * controls are disabled and the session API answers 403); the sign-in page says what to do
 * about a lost passkey, and an owner's passkey link adds one to a member without a key slot;
 * settings offer the catalogued providers; rotated, revoked and expired keys are listed with
 * when and by whom. The whole walk leaves no error in the browser's console and no failed
 * request but the refusals it provokes on purpose. Each page is photographed for docs/.
 */
import { spawn } from 'node:child_process';
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { resolve } from 'node:path';
import type { Page } from 'playwright-core';
import { aggregate } from '../../lambdas/aggregator/aggregate';
import { hashKey } from '../../lambdas/core/api-key';
import { formatMoney, formatMoneyRounded } from '../../lambdas/core/money-format';
import { tableName } from '../../lambdas/shared/schema';
import { listAudit } from '../../lambdas/store/audit';
import { createKey } from '../../lambdas/store/directory-keys';
import { showWorkspace } from '../../lambdas/store/directory-workspaces';
import type { ConsoleServer } from '../../local/console-server';
import { startStreamPoller, type StreamPoller } from '../../local/stream-poller';
import { startTestAdmin, type TestAdmin } from '../support/admin';
import { addVirtualAuthenticator, closeAllBrowsers, launchBrowser, screenshot, type BrowserHarness } from '../support/browser';
import { serveTestConsole } from '../support/console';
import { expectApiError } from '../support/e2e';
import { startStack, type TestStack } from '../support/stack';

jest.setTimeout(240_000);

const BIN = resolve(__dirname, '../../bin/sluice.js');
const MODEL = 'local/sim-small';

let stack: TestStack;
let admin: TestAdmin;
let consoleServer: ConsoleServer;
let poller: StreamPoller;
let browser: BrowserHarness;

/**
 * What went wrong in the browser during the walk, from every person's pages: errors in the
 * browser's console, uncaught page errors, requests that failed, and answers of 400 or more.
 * The walk provokes a few refusals on purpose (a used link, a member's forbidden change); each
 * is declared where it is provoked, and whatever else turns up fails the last test.
 */
const problems: string[] = [];
const provoked: RegExp[] = [];

function pathOf(url: string): string {
  try {
    return new URL(url).pathname;
  } catch {
    return url;
  }
}

function watch(page: Page): void {
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console: ${m.text()} @ ${pathOf(m.location().url)}`);
  });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('requestfailed', (r) => {
    const why = r.failure()?.errorText ?? '';
    // Chromium cancels a static asset still loading (the tab's icon) when the walk moves to the next
    // page: ERR_ABORTED is the browser's own cancellation, not an answer from the console. A server
    // fault on an asset still shows here (a reset or empty reply) or below as its status.
    if (why === 'net::ERR_ABORTED' && r.method() === 'GET' && pathOf(r.url()).startsWith('/console/assets/')) return;
    problems.push(`request failed: ${r.method()} ${pathOf(r.url())} ${why}`);
  });
  page.on('response', (r) => {
    if (r.status() >= 400) problems.push(`${r.request().method()} ${pathOf(r.url())} → ${r.status()}`);
  });
}

/** Declares a refusal the walk provokes on purpose: its answer and the console line Chromium logs for it. */
function provoke(method: string, path: string, status: number): void {
  const p = path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  provoked.push(new RegExp(`^${method} ${p} → ${status}$`), new RegExp(`^console: Failed to load resource: the server responded with a status of ${status} .* @ ${p}$`));
}

function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: admin.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    child.on('close', (code) => done({ code, stdout, stderr }));
  });
}

/** A person on a device: a browser context of their own with a passkey authenticator, dialogs accepted. */
async function person(): Promise<Page> {
  const page = await browser.newPage({ clipboard: true, baseURL: consoleServer.url });
  watch(page);
  await addVirtualAuthenticator(page);
  page.on('dialog', (d) => void d.accept());
  return page;
}

async function join(page: Page, link: string): Promise<void> {
  await page.goto(link);
  await page.getByTestId('join').click();
  await page.waitForURL(`${consoleServer.url}/console/`);
}

/** The secret panel's value after a change that shows one (a key, a link). */
async function takeSecret(page: Page): Promise<string> {
  await page.getByTestId('secret').waitFor({ state: 'visible' });
  return (await page.getByTestId('secret-value').textContent()) ?? '';
}

async function slotsShown(page: Page): Promise<string> {
  await page.goto('/console/keys');
  return (await page.getByTestId('slots').textContent()) ?? '';
}

async function slotsHeld(): Promise<number> {
  return (await showWorkspace(admin.ctx, { workspaceId: stack.workspaceId })).keySlots;
}

const visibleOf = (rawKey: string): string => `slc_dev_…${rawKey.slice(-4)}`;

/** The session API as the page's own script calls it (cookie, Origin, CSRF token). */
function apiFromPage(page: Page, method: string, path: string, body: unknown = {}): Promise<{ status: number; code: string | null }> {
  return page.evaluate(
    async ([m, p, b]) => {
      const csrf = document.querySelector<HTMLMetaElement>('meta[name="sluice-csrf"]')?.content ?? '';
      const res = await fetch(p as string, { method: m as string, headers: { 'content-type': 'application/json', 'x-sluice-csrf': csrf }, body: JSON.stringify(b) });
      const parsed = (await res.json()) as { error?: { code?: string } };
      return { status: res.status, code: parsed.error?.code ?? null };
    },
    [method, path, body] as const,
  );
}

/** The cells of the table row whose first cell reads `first`. */
async function rowCells(page: Page, tableTestId: string, first: string): Promise<string[]> {
  const exactly = new RegExp(`^${first.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`);
  const row = page.getByTestId(tableTestId).locator('tbody tr').filter({ has: page.locator('td:first-child', { hasText: exactly }) });
  await row.waitFor();
  return row.locator('td').allTextContents();
}

beforeAll(async () => {
  stack = await startStack({ creditMinor: 100_000 });
  admin = await startTestAdmin(stack.tables);
  consoleServer = await serveTestConsole(admin.deps);
  poller = await startStreamPoller({
    endpoint: stack.tables.endpoint,
    tableName: tableName(stack.tables.prefix, 'usage'),
    autoStart: false,
    log: () => undefined,
    handler: (event) => aggregate({ doc: stack.tables.doc, rollupsTable: tableName(stack.tables.prefix, 'rollups') }, event),
  });
  browser = await launchBrowser();
});

afterAll(async () => {
  await closeAllBrowsers();
  await poller?.stop();
  await consoleServer?.close();
  await admin?.close();
  await stack?.close();
});

describe('the console in Chromium', () => {
  let owner: Page;
  let member: Page;
  let memberId = '';
  let rawKey = '';
  let visible = '';
  let requestId = '';

  it('an owner invited with the CLI joins with a passkey and sees the workspace; the owner’s invitation holds no key slot', async () => {
    const slotsBefore = await slotsHeld();
    const out = await cli(['member', 'invite', '--workspace', stack.workspaceId, '--email', 'owner@example.com', '--owner', '--console-url', consoleServer.url, '--json']);
    expect(out.code).toBe(0);
    const answer = JSON.parse(out.stdout) as { link: string; invitation: { kind: string; holdsKeySlot: boolean } };
    expect(answer.link).toMatch(new RegExp(`^${consoleServer.url}/console/join#ws=${stack.workspaceId}&invitation=inv_`));
    // It adds a passkey to the existing owner: nobody new comes in, so no key slot is held.
    expect(answer.invitation).toMatchObject({ kind: 'passkey', holdsKeySlot: false });
    expect(await slotsHeld()).toBe(slotsBefore);
    owner = await person();
    await owner.goto(answer.link);
    await screenshot(owner, 'console-join');
    await owner.getByTestId('join').click();
    await owner.waitForURL(`${consoleServer.url}/console/`);
    await expect(owner.getByTestId('role').textContent()).resolves.toBe('owner');
    await expect(owner.getByTestId('who').textContent()).resolves.toBe('owner@example.com');
    await expect(owner.getByTestId('available').textContent()).resolves.toBe('USD 1000.00');
    await screenshot(owner, 'console-workspace');
    // The link was used: it does not work twice.
    const again = await person();
    provoke('POST', '/console/api/join/options', 404);
    await again.goto(answer.link);
    await again.getByTestId('join').click();
    await again.locator('.flash').getByText(/invitation/).waitFor();
  });

  it('declares an icon and answers /favicon.ico, so the browser never meets a 404 for it (item 13)', async () => {
    const declared = await owner.locator('link[rel="icon"]').getAttribute('href');
    expect(declared).toBe('/console/assets/icon.svg');
    for (const path of [declared as string, '/favicon.ico']) {
      const res = await owner.request.get(path);
      expect(res.status()).toBe(200);
      expect(res.headers()['content-type']).toBe('image/svg+xml');
      expect(await res.text()).toMatch(/^<svg [^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"/);
    }
  });

  it('the owner mints a key: it is in the table while the one-time panel shows it, the name field is cleared, and it copies (item 17)', async () => {
    await owner.goto('/console/keys');
    const name = owner.getByTestId('create-key').locator('input[name="name"]');
    await name.fill('from-console');
    await owner.getByTestId('create-key').getByRole('button', { name: 'Create key' }).click();
    const shown = await takeSecret(owner);
    expect(shown).toMatch(/^slc_dev_[A-Za-z0-9_-]{43}$/);
    visible = visibleOf(shown);
    // While the panel still shows it: the key's row is in the table, and the form is ready for the next.
    await owner.getByTestId('keys').locator('tr', { hasText: visible }).getByText('from-console').waitFor();
    await expect(owner.getByTestId('secret').isVisible()).resolves.toBe(true);
    await expect(name.inputValue()).resolves.toBe('');
    await expect(owner.getByTestId('slots').textContent()).resolves.toBe('2 of 5');
    await screenshot(owner, 'console-keys-minted', undefined, { mask: [owner.getByTestId('secret-value')] });
    await owner.getByTestId('copy').click();
    // The button says so once the clipboard write has finished (a promise in the page): wait for it.
    await owner.getByTestId('copy').filter({ hasText: /^Copied$/ }).waitFor();
    rawKey = await owner.evaluate(() => navigator.clipboard.readText());
    expect(rawKey).toBe(shown);
    await owner.getByRole('button', { name: 'Done' }).click();
    await owner.getByTestId('secret').waitFor({ state: 'hidden' });
    // Never again: the page holds the visible part only.
    await expect(owner.getByTestId('secret-value').textContent()).resolves.toBe('');
    expect(await owner.content()).not.toContain(rawKey);
    await owner.reload();
    await owner.getByTestId('keys').getByText(visible).waitFor();
    expect(await owner.content()).not.toContain(rawKey);
    await screenshot(owner, 'console-keys');
  });

  it('right after a request the usage page says the totals lag and shows what they do not hold yet; then the charts carry the currency (item 14)', async () => {
    const { data, response } = await stack
      .client(rawKey)
      .chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hello from the console test' }], max_tokens: 20 })
      .withResponse();
    expect(data.choices[0]?.message.content).toBeTruthy();
    requestId = response.headers.get('x-request-id') ?? '';
    expect(requestId).toMatch(/^req_/);
    await stack.settled();
    const row = (await stack.usageRows()).find((r) => r.requestId === requestId);
    expect(row?.chargeMicros).toBeGreaterThan(0);
    const charge = row?.chargeMicros ?? 0;

    // The aggregator has not run: the request is listed, the totals do not hold it yet, and the page says so.
    await owner.goto('/console/usage');
    await owner.getByTestId('recent-requests').getByText(requestId).waitFor();
    await expect(owner.getByTestId('usage-total').textContent()).resolves.toBe('USD 0.00');
    await expect(owner.getByTestId('usage-lag').textContent()).resolves.toMatch(/count each request up to a minute after it ends/);
    await expect(owner.getByTestId('usage-pending').textContent()).resolves.toContain(`at least 1 request (${formatMoneyRounded(charge)})`);
    // Empty charts say so in words: no axis of repeated zeros.
    for (const chart of ['chart-model', 'chart-key', 'chart-member']) {
      await expect(owner.getByTestId(chart).textContent()).resolves.toBe('No spend counted in these days yet.');
    }
    await expect(owner.locator('canvas').count()).resolves.toBe(0);
    expect(await owner.locator('main').textContent()).not.toContain('0.000000');
    await screenshot(owner, 'console-usage-lag');

    // Once aggregated, the totals hold it and the charts draw it.
    await poller.drain();
    await owner.reload();
    await expect(owner.getByTestId('usage-total').textContent()).resolves.toBe(formatMoneyRounded(charge));
    await expect(owner.getByTestId('usage-pending').count()).resolves.toBe(0);
    await expect(owner.getByTestId('recent-requests').textContent()).resolves.toContain(MODEL);
    const charts = JSON.parse((await owner.locator('#usage-charts').textContent()) ?? '{}') as { byModel: { series: { label: string; micros: number[] }[] } };
    const series = charts.byModel.series.find((s) => s.label === MODEL);
    expect(series?.micros.reduce((a, b) => a + b, 0)).toBe(charge);
    const chart = owner.getByTestId('chart-model');
    await expect(chart.getAttribute('data-drawn')).resolves.toBe('1');
    await expect(chart.locator('canvas').count()).resolves.toBe(1);
    await expect(owner.locator('figcaption').first().textContent()).resolves.toBe('Spend per day by model (USD)');
    // The axis's labels (drawn on the canvas; the page script keeps them on the element): all different.
    const ticks = ((await chart.getAttribute('data-y-ticks')) ?? '').split(' ');
    expect(ticks.length).toBeGreaterThan(1);
    expect(new Set(ticks).size).toBe(ticks.length);
    expect(ticks[0]).toMatch(/^0\.0+$/);
    // The legend names the range and the series' total instead of "Time: --".
    const legend = (await chart.locator('.u-legend').textContent()) ?? '';
    expect(legend).toContain('last 30 days');
    expect(legend).toContain(`${MODEL}${formatMoneyRounded(charge)}`);
    expect(legend).not.toContain('--');
    expect(legend).not.toContain('Time');
    await owner.getByTestId('lookup').locator('input').fill(requestId);
    await owner.getByTestId('lookup').getByRole('button', { name: 'Find' }).click();
    await owner.getByTestId('lookup-result').getByText(`requestId: ${requestId}`).waitFor();
    await expect(owner.getByTestId('lookup-result').textContent()).resolves.toContain(`charge: ${formatMoney(charge)} (exact)`);
    await screenshot(owner, 'console-usage');
  });

  it('balances read in cents, with the exact figure a hover or a click away (item 15)', async () => {
    const balance = await stack.balance();
    const exact = formatMoney(balance.availableMicros);
    const shown = formatMoneyRounded(balance.availableMicros);
    expect(shown).toMatch(/^USD \d+\.\d\d$/);
    expect(exact).not.toBe(shown); // the request took a fraction of a cent
    await owner.goto('/console/');
    const available = owner.getByTestId('available').locator('.money');
    await expect(available.textContent()).resolves.toBe(shown);
    await expect(available.getAttribute('title')).resolves.toContain(exact);
    await available.click();
    await expect(available.textContent()).resolves.toBe(exact);
    await available.click();
    await expect(available.textContent()).resolves.toBe(shown);
    // Below a cent, more places (two significant digits), exact here.
    await expect(owner.getByTestId('spent-month').textContent()).resolves.toBe(formatMoneyRounded(balance.spentMicros));
  });

  it('an invitation of someone new holds a key slot until cancelled', async () => {
    const before = await slotsShown(owner);
    expect(before).toBe('2 of 5'); // the seeded key and the console's
    await owner.goto('/console/members');
    await owner.getByTestId('invite').locator('input[name="email"]').fill('later@example.com');
    await owner.getByTestId('invite').getByRole('button', { name: 'Invite' }).click();
    await takeSecret(owner);
    await expect(rowCells(owner, 'invitations', 'later@example.com')).resolves.toContain('Joins as member (holds a key slot)');
    await expect(owner.getByTestId('invite').locator('input[name="email"]').inputValue()).resolves.toBe('');
    await expect(slotsShown(owner)).resolves.toBe('3 of 5');
    await owner.goto('/console/members');
    await owner.getByTestId('cancel-later@example.com').click();
    await owner.getByTestId('invitations').getByText('None yet.').waitFor();
    await expect(slotsShown(owner)).resolves.toBe('2 of 5');
  });

  it('a member joins through an invitation from the console and cannot pause (disabled, and 403)', async () => {
    await owner.goto('/console/members');
    await owner.getByTestId('invite').locator('input[name="email"]').fill('member@example.com');
    await owner.getByTestId('invite').getByRole('button', { name: 'Invite' }).click();
    const link = await takeSecret(owner);
    await owner.getByTestId('invitations').getByText('member@example.com').waitFor();
    await owner.getByRole('button', { name: 'Done' }).click();
    member = await person();
    await join(member, link);
    await expect(member.getByTestId('role').textContent()).resolves.toBe('member');
    await expect(member.getByTestId('paused').textContent()).resolves.toBe('Serving');
    await expect(member.getByTestId('pause').isDisabled()).resolves.toBe(true);
    await screenshot(member, 'console-workspace-member');
    provoke('POST', '/console/api/pause', 403);
    await expect(apiFromPage(member, 'POST', '/console/api/pause')).resolves.toEqual({ status: 403, code: 'forbidden' });
    // Accepting freed the invitation's slot.
    await expect(slotsShown(owner)).resolves.toBe('2 of 5');
  });

  it('the members page puts each control in its own cell, the checkbox beside its label, and a member sees every input disabled (item 18)', async () => {
    await owner.goto('/console/members');
    const row = owner.getByTestId('members').locator('tbody tr').filter({ hasText: 'member@example.com' });
    const passkeyButton = row.locator('button[data-testid^="passkey-"]');
    memberId = ((await passkeyButton.getAttribute('data-testid')) ?? '').replace('passkey-', '');
    expect(memberId).toMatch(/^mem_[0-9a-f]+$/);
    const cells = row.locator('td');
    await expect(cells.count()).resolves.toBe(6);
    // The limit form, the passkey link and the remove form: one cell each.
    await expect(cells.nth(3).getByTestId(`limit-${memberId}`).count()).resolves.toBe(1);
    await expect(cells.nth(4).getByTestId(`passkey-${memberId}`).count()).resolves.toBe(1);
    await expect(cells.nth(5).getByTestId(`remove-${memberId}`).count()).resolves.toBe(1);
    await expect(cells.nth(3).getByTestId(`remove-${memberId}`).count()).resolves.toBe(0);
    // The checkbox sits on its label's line, not above it.
    const box = await cells.nth(5).locator('input[type="checkbox"]').boundingBox();
    const label = await cells.nth(5).getByText('also revoke the keys made for them').boundingBox();
    expect(box).not.toBeNull();
    expect(label).not.toBeNull();
    const middle = (box?.y ?? 0) + (box?.height ?? 0) / 2;
    expect(middle).toBeGreaterThan(label?.y ?? 0);
    expect(middle).toBeLessThan((label?.y ?? 0) + (label?.height ?? 0));
    expect(box?.x ?? 0).toBeLessThan(label?.x ?? 0);
    // The owner's controls are live.
    await expect(owner.locator('main form.api input, main form.api button').evaluateAll((els) => els.every((e) => !e.matches(':disabled')))).resolves.toBe(true);
    await screenshot(owner, 'console-members');

    // A member sees the same page with every input and button of these controls disabled, and a note.
    await member.goto('/console/members');
    const controls = member.locator('main form.api input, main form.api button, main [data-testid^="passkey-"], main [data-testid^="cancel-"]');
    expect(await controls.count()).toBeGreaterThan(4);
    // `:disabled`: a control is disabled by its own attribute or by its disabled fieldset.
    await expect(controls.evaluateAll((els) => els.filter((e) => !e.matches(':disabled')).map((e) => e.outerHTML))).resolves.toEqual([]);
    await member.getByTestId('owner-only').waitFor();
    await screenshot(member, 'console-members-member');
    // Whatever the page shows, the server decides: a member's invitation is refused.
    provoke('POST', '/console/api/invitations', 403);
    await expect(apiFromPage(member, 'POST', '/console/api/invitations', { email: 'x@example.com' })).resolves.toEqual({ status: 403, code: 'forbidden' });
  });

  it('the member signs out; the sign-in page says what to do about a lost passkey; they sign back in with the passkey alone (item 20)', async () => {
    await member.getByRole('button', { name: 'Sign out' }).click();
    await member.waitForURL(`${consoleServer.url}/console/signin`);
    const lost = (await member.getByTestId('lost-passkey').textContent()) ?? '';
    expect(lost).toMatch(/Ask your workspace's owner for a new passkey link/);
    expect(lost).toMatch(/If you are the owner, ask your Sluice operator/);
    expect(lost).toContain('sluice member invite --owner');
    await screenshot(member, 'console-signin');
    await member.getByTestId('signin').click();
    await member.waitForURL(`${consoleServer.url}/console/`);
    await expect(member.getByTestId('who').textContent()).resolves.toBe('member@example.com');
  });

  it('an owner’s passkey link adds a passkey to the member on a new device, holding no key slot (item 20)', async () => {
    const before = await slotsShown(owner);
    await owner.goto('/console/members');
    await owner.getByTestId(`passkey-${memberId}`).click();
    const link = await takeSecret(owner);
    await expect(owner.locator('.secret-note').textContent()).resolves.toContain('adds a passkey to their membership');
    await expect(rowCells(owner, 'invitations', 'member@example.com')).resolves.toContain('A new passkey for this member (no key slot)');
    await screenshot(owner, 'console-members-passkey-link', undefined, { mask: [owner.getByTestId('secret-value')] });
    await expect(slotsShown(owner)).resolves.toBe(before);
    // The member lost their device: a new one (a new authenticator, no passkey) opens the link.
    const newDevice = await person();
    await join(newDevice, link);
    await expect(newDevice.getByTestId('who').textContent()).resolves.toBe('member@example.com');
    await expect(newDevice.getByTestId('role').textContent()).resolves.toBe('member');
    // Still one member, the same one: nothing new came in, and no slot was held or freed.
    await newDevice.goto('/console/members');
    await expect(newDevice.getByTestId('members').locator('tbody tr').count()).resolves.toBe(2);
    await expect(newDevice.getByTestId(`passkey-${memberId}`).count()).resolves.toBe(1);
    await expect(slotsShown(owner)).resolves.toBe(before);
    const audit = await listAudit(admin.ctx, { workspaceId: stack.workspaceId, limit: 50 });
    // The member joined once and added a passkey once, each audited as what it was.
    expect(audit.filter((e) => e.summary['memberId'] === memberId && e.action.startsWith('member.')).map((e) => e.action).sort()).toEqual(['member.invite', 'member.invite', 'member.join', 'member.passkey']);
  });

  it('the owner pauses: the next request is 503 paused_by_owner; resuming serves again', async () => {
    await owner.goto('/console/');
    await owner.getByTestId('pause').click();
    await owner.getByTestId('resume').waitFor();
    await expect(owner.getByTestId('paused').textContent()).resolves.toBe('Paused by the owner');
    await expectApiError(stack.client(rawKey).chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] }), 503, 'paused_by_owner');
    await owner.getByTestId('resume').click();
    await owner.getByTestId('pause').waitFor();
    const ok = await stack.client(rawKey).chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 });
    expect(ok.choices).toHaveLength(1);
    await stack.settled();
  });

  it('routing profiles', async () => {
    await owner.goto('/console/routing');
    await owner.getByTestId('create-profile').locator('input[name="identifier"]').fill('fast');
    await owner.getByTestId('create-profile').locator('textarea').fill(MODEL);
    await owner.getByTestId('create-profile').getByRole('button', { name: 'Create profile' }).click();
    await owner.getByTestId('profiles').getByText('profile/fast').waitFor();
    await owner.getByTestId('default-fast').click();
    await owner.getByTestId('profiles').getByText('(default: sluice/auto)').waitFor();
    await screenshot(owner, 'console-routing');
    const auto = await stack.client(rawKey).chat.completions.create({ model: 'sluice/auto', messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 });
    expect(auto.choices).toHaveLength(1);
    await stack.settled();
  });

  it('settings offer the catalogued providers for a key of one’s own, not free text (item 19)', async () => {
    await owner.goto('/console/settings');
    const provider = owner.getByTestId('byok-set').locator('select[name="provider"]');
    const offered = await provider.locator('option').evaluateAll((els) => els.map((e) => (e as HTMLOptionElement).value).filter((v) => v !== ''));
    // The catalog's providers that take a key; the local simulator takes none, so it is not offered.
    expect(offered).toEqual(expect.arrayContaining(['openai', 'anthropic', 'mistral']));
    expect(offered).not.toContain('local');
    await expect(owner.getByTestId('byok-set').locator('input[name="provider"]').count()).resolves.toBe(0);
    await provider.selectOption('openai');
    await owner.getByTestId('byok-set').locator('input[name="apiKey"]').fill('sk-test-console-byok');
    await owner.getByTestId('byok-set').getByRole('button', { name: 'Set key' }).click();
    await owner.getByTestId('byok-remove-openai').waitFor();
    await expect(rowCells(owner, 'byok', 'OpenAI openai')).resolves.toEqual(['OpenAI openai', 'set (never shown)', 'Remove']);
    expect(await owner.content()).not.toContain('sk-test-console-byok');
    await owner.getByTestId('low-credit-form').locator('input').fill('12.50');
    await owner.getByTestId('low-credit-form').getByRole('button', { name: 'Set threshold' }).click();
    await owner.getByTestId('low-credit').getByText('USD 12.50').waitFor();
    await screenshot(owner, 'console-settings');
    // A member sees the same choice, disabled.
    await member.goto('/console/settings');
    await expect(member.getByTestId('byok-set').locator('select[name="provider"]').isDisabled()).resolves.toBe(true);
  });

  it('ended keys stay listed: rotated, revoked and expired, with when and by whom (item 16)', async () => {
    const seeded = visibleOf(stack.rawKey);
    // The owner rotates the seeded key: its replacement is shown once; the old one is listed as rotated.
    await owner.goto('/console/keys');
    await owner.getByTestId(`rotate-${seeded}`).click();
    const replacement = visibleOf(await takeSecret(owner));
    // The page reads its tables again while the secret shows; reload only once that read has
    // brought the replacement's row, or the reload cancels it (a failed request in the walk).
    await owner.getByTestId('keys').getByText(replacement).waitFor();
    await owner.reload();
    await owner.getByTestId('keys').getByText(replacement).waitFor();
    const rotated = await rowCells(owner, 'ended-keys', seeded);
    expect(rotated[2]).toBe(`Rotated: replaced by ${replacement}`);
    expect(rotated[3]).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d$/);
    expect(rotated[4]).toBe('owner@example.com');
    // The member revokes the replacement: a key belongs to the workspace, and the list says who.
    await member.goto('/console/keys');
    await member.getByTestId(`revoke-${replacement}`).click();
    await member.getByTestId('keys').getByText(replacement).waitFor({ state: 'detached' });
    await expect(rowCells(member, 'ended-keys', replacement)).resolves.toEqual([replacement, '', 'Revoked', expect.stringMatching(/^\d{4}-/), 'member@example.com', '']);
    // A key past its expiry: listed as expired, never offered for rotation (SPEC: never renewed), revocable to free its slot.
    const shortLived = await createKey(admin.ctx, { workspaceId: stack.workspaceId, name: 'short-lived', expiresAt: Date.now() + 1500 });
    const lapsed = await createKey(admin.ctx, { workspaceId: stack.workspaceId, name: 'nightly', expiresAt: Date.now() + 1500 });
    await new Promise((done) => setTimeout(done, 1700));
    await owner.goto('/console/keys');
    const expired = await rowCells(owner, 'ended-keys', shortLived.visible);
    expect(expired[2]).toMatch(/^Expired: holds its key slot until revoked/);
    await expect(owner.getByTestId(`rotate-${shortLived.visible}`).count()).resolves.toBe(0);
    await expect(owner.getByTestId('keys').getByText(shortLived.visible).count()).resolves.toBe(0);
    await expect(owner.getByTestId('ended-keys').getByTestId(`revoke-${shortLived.visible}`).count()).resolves.toBe(1);
    // An operator revokes it with the CLI: the list names an operator, not an IAM identity.
    const out = await cli(['key', 'revoke', '--workspace', stack.workspaceId, '--key', shortLived.keyId]);
    expect(out.code).toBe(0);
    await owner.reload();
    await expect(rowCells(owner, 'ended-keys', shortLived.visible)).resolves.toEqual([shortLived.visible, 'short-lived', 'Revoked', expect.stringMatching(/^\d{4}-/), 'an operator (sluice CLI)', '']);
    await expect(rowCells(owner, 'ended-keys', lapsed.visible)).resolves.toEqual([
      lapsed.visible,
      'nightly',
      'Expired: holds its key slot until revoked; never renewed',
      expect.stringMatching(/^\d{4}-/),
      'its expiry date',
      'Revoke',
    ]);
    // A key that expires while the page is open still shows Rotate: the management API refuses it
    // (SPEC: never renewed), nothing is minted, and the page says why.
    const racing = await createKey(admin.ctx, { workspaceId: stack.workspaceId, name: 'racing', expiresAt: Date.now() + 86_400_000 });
    await owner.reload();
    const rotate = owner.getByTestId(`rotate-${racing.visible}`);
    await rotate.waitFor();
    await stack.tables.doc.send(
      new UpdateCommand({
        TableName: tableName(stack.tables.prefix, 'keys'),
        Key: { keyHash: hashKey(racing.rawKey) },
        UpdateExpression: 'SET expiresAt = :past',
        ExpressionAttributeValues: { ':past': Date.now() - 1000 },
      }),
    );
    provoke('POST', `/console/api/keys/${racing.keyId}/rotate`, 409);
    await rotate.click();
    await owner.locator('.flash').getByText(/can be revoked .* but not rotated; create a new key/).waitFor();
    await expect(owner.getByTestId('secret').isVisible()).resolves.toBe(false);
    await owner.reload();
    expect((await rowCells(owner, 'ended-keys', racing.visible))[2]).toMatch(/^Expired/);
    await screenshot(owner, 'console-keys-ended');
  });

  it('the owner revokes the key: it is refused 401 and listed as revoked by the owner', async () => {
    await owner.goto('/console/keys');
    await owner.getByTestId(`revoke-${visible}`).click();
    await owner.getByTestId('keys').getByText(visible).waitFor({ state: 'detached' });
    await expect(rowCells(owner, 'ended-keys', visible)).resolves.toEqual([visible, 'from-console', 'Revoked', expect.stringMatching(/^\d{4}-/), 'owner@example.com', '']);
    await expectApiError(stack.client(rawKey).chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] }), 401, 'invalid_api_key');
  });

  it('the whole walk left no error in the browser’s console and no failed request but the refusals it provoked (item 13)', () => {
    expect(problems.filter((p) => !provoked.some((re) => re.test(p)))).toEqual([]);
    // Each provoked refusal was seen, so the filter above hides nothing it should not.
    expect(provoked.filter((re) => !problems.some((p) => re.test(p)))).toEqual([]);
  });
});
