/**
 * The workspace console in a real browser (issue 16's Must show): Debian's Chromium under
 * playwright-core with a virtual passkey authenticator per person. The owner, invited with the
 * CLI, joins and signs in, mints a key and copies it; a request with that key through the
 * official `openai` client succeeds and shows in the usage table and chart; a member joins and
 * cannot pause (the button is disabled and the session API answers 403); the owner pauses and the
 * next request is 503 `paused_by_owner`; a revoked key is refused; an invitation holds a key slot
 * until cancelled. Each page is photographed into docs/screenshots/.
 */
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import type { Page } from 'playwright-core';
import { aggregate } from '../../lambdas/aggregator/aggregate';
import { tableName } from '../../lambdas/shared/schema';
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

/** A person: a browser context of their own with a passkey authenticator, dialogs accepted. */
async function person(): Promise<Page> {
  const page = await browser.newPage({ clipboard: true, baseURL: consoleServer.url });
  await addVirtualAuthenticator(page);
  page.on('dialog', (d) => void d.accept());
  return page;
}

async function join(page: Page, link: string): Promise<void> {
  await page.goto(link);
  await page.getByTestId('join').click();
  await page.waitForURL(`${consoleServer.url}/console/`);
}

/** The secret panel's value after a change that shows one (a key, a link), then "Done". */
async function takeSecret(page: Page): Promise<string> {
  await page.getByTestId('secret').waitFor({ state: 'visible' });
  return (await page.getByTestId('secret-value').textContent()) ?? '';
}

async function slotsShown(page: Page): Promise<string> {
  await page.goto('/console/keys');
  return (await page.getByTestId('slots').textContent()) ?? '';
}

/** The session API as the page's own script calls it (cookie, Origin, CSRF token). */
function apiFromPage(page: Page, method: string, path: string): Promise<{ status: number; code: string | null }> {
  return page.evaluate(
    async ([m, p]) => {
      const csrf = document.querySelector<HTMLMetaElement>('meta[name="sluice-csrf"]')?.content ?? '';
      const res = await fetch(p as string, { method: m as string, headers: { 'content-type': 'application/json', 'x-sluice-csrf': csrf }, body: '{}' });
      const body = (await res.json()) as { error?: { code?: string } };
      return { status: res.status, code: body.error?.code ?? null };
    },
    [method, path],
  );
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
  let rawKey = '';
  let visible = '';
  let requestId = '';

  it('an owner invited with the CLI joins with a passkey and sees the workspace', async () => {
    const out = await cli(['member', 'invite', '--workspace', stack.workspaceId, '--email', 'owner@example.com', '--owner', '--console-url', consoleServer.url, '--json']);
    expect(out.code).toBe(0);
    const link = (JSON.parse(out.stdout) as { link: string }).link;
    expect(link).toMatch(new RegExp(`^${consoleServer.url}/console/join#ws=${stack.workspaceId}&invitation=inv_`));
    owner = await person();
    await owner.goto(link);
    await screenshot(owner, 'console-join');
    await owner.getByTestId('join').click();
    await owner.waitForURL(`${consoleServer.url}/console/`);
    await expect(owner.getByTestId('role').textContent()).resolves.toBe('owner');
    await expect(owner.getByTestId('who').textContent()).resolves.toBe('owner@example.com');
    await expect(owner.getByTestId('available').textContent()).resolves.toBe('USD 1000.00');
    await screenshot(owner, 'console-workspace');
    // The link was used: it does not work twice.
    const again = await person();
    await again.goto(link);
    await again.getByTestId('join').click();
    await again.locator('.flash').getByText(/invitation/).waitFor();
  });

  it('the owner mints a key, shown once with a copy button, and copies it', async () => {
    await owner.goto('/console/keys');
    await owner.getByTestId('create-key').locator('input[name="name"]').fill('from-console');
    await owner.getByTestId('create-key').getByRole('button', { name: 'Create key' }).click();
    const shown = await takeSecret(owner);
    await owner.getByTestId('copy').click();
    // The button says so once the clipboard write has finished (a promise in the page): wait for it.
    await owner.getByTestId('copy').filter({ hasText: /^Copied$/ }).waitFor();
    rawKey = await owner.evaluate(() => navigator.clipboard.readText());
    expect(rawKey).toBe(shown);
    expect(rawKey).toMatch(/^slc_dev_[A-Za-z0-9_-]{43}$/);
    visible = `slc_dev_…${rawKey.slice(-4)}`;
    await owner.getByRole('button', { name: 'Done' }).click();
    await owner.getByTestId('keys').getByText(visible).waitFor();
    // Never again: the page holds the visible part only.
    expect(await owner.content()).not.toContain(rawKey);
    await screenshot(owner, 'console-keys');
  });

  it('a request with that key through the openai client succeeds and appears in the usage table and chart', async () => {
    const { data, response } = await stack
      .client(rawKey)
      .chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hello from the console test' }], max_tokens: 20 })
      .withResponse();
    expect(data.choices[0]?.message.content).toBeTruthy();
    requestId = response.headers.get('x-request-id') ?? '';
    expect(requestId).toMatch(/^req_/);
    await stack.settled();
    await poller.drain();
    await owner.goto('/console/usage');
    await owner.getByTestId('recent-requests').getByText(requestId).waitFor();
    await expect(owner.getByTestId('recent-requests').textContent()).resolves.toContain(MODEL);
    const charts = JSON.parse((await owner.locator('#usage-charts').textContent()) ?? '{}') as { byModel: { series: { label: string; micros: number[] }[] } };
    const series = charts.byModel.series.find((s) => s.label === MODEL);
    expect(series?.micros.reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
    await expect(owner.getByTestId('chart-model').getAttribute('data-drawn')).resolves.toBe('1');
    await expect(owner.getByTestId('chart-model').locator('canvas').count()).resolves.toBe(1);
    await owner.getByTestId('lookup').locator('input').fill(requestId);
    await owner.getByTestId('lookup').getByRole('button', { name: 'Find' }).click();
    await owner.getByTestId('lookup-result').getByText(`requestId: ${requestId}`).waitFor();
    await screenshot(owner, 'console-usage');
  });

  it('an invitation holds a key slot until cancelled', async () => {
    const before = await slotsShown(owner);
    expect(before).toBe('2 of 5'); // the seeded key and the console's
    await owner.goto('/console/members');
    await owner.getByTestId('invite').locator('input[name="email"]').fill('later@example.com');
    await owner.getByTestId('invite').getByRole('button', { name: 'Invite' }).click();
    await takeSecret(owner);
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
    await owner.getByRole('button', { name: 'Done' }).click();
    await owner.getByTestId('invitations').getByText('member@example.com').waitFor();
    await screenshot(owner, 'console-members');
    member = await person();
    await join(member, link);
    await expect(member.getByTestId('role').textContent()).resolves.toBe('member');
    await expect(member.getByTestId('paused').textContent()).resolves.toBe('Serving');
    await expect(member.getByTestId('pause').isDisabled()).resolves.toBe(true);
    await screenshot(member, 'console-workspace-member');
    await expect(apiFromPage(member, 'POST', '/console/api/pause')).resolves.toEqual({ status: 403, code: 'forbidden' });
    // Accepting freed the invitation's slot.
    await expect(slotsShown(owner)).resolves.toBe('2 of 5');
  });

  it('the member signs out and back in with the passkey alone', async () => {
    await member.getByRole('button', { name: 'Sign out' }).click();
    await member.waitForURL(`${consoleServer.url}/console/signin`);
    await screenshot(member, 'console-signin');
    await member.getByTestId('signin').click();
    await member.waitForURL(`${consoleServer.url}/console/`);
    await expect(member.getByTestId('who').textContent()).resolves.toBe('member@example.com');
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

  it('routing profiles and settings pages', async () => {
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
    await owner.goto('/console/settings');
    await owner.getByTestId('low-credit-form').locator('input').fill('12.50');
    await owner.getByTestId('low-credit-form').getByRole('button', { name: 'Set threshold' }).click();
    await owner.getByTestId('low-credit').getByText('USD 12.50').waitFor();
    await screenshot(owner, 'console-settings');
  });

  it('the owner revokes the key: it is refused 401', async () => {
    await owner.goto('/console/keys');
    await owner.getByTestId(`revoke-${visible}`).click();
    await owner.getByTestId('keys').getByText(visible).waitFor({ state: 'detached' });
    await expectApiError(stack.client(rawKey).chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] }), 401, 'invalid_api_key');
  });
});
