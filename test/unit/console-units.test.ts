/**
 * The console's pure parts, by tables: who may make which change, the usage chart series, money
 * typed in major units, the console's settings, the session cookie, and which management route a
 * session API call reaches.
 */
import { CONSOLE_ACTIONS, decideConsoleAction, type ConsoleRole } from '../../lambdas/core/console-roles';
import { daySeries, daysBetween } from '../../lambdas/core/usage-series';
import { minorFromMajor } from '../../lambdas/console/client/money';
import { CONSOLE_ENV, loadConsoleConfig } from '../../lambdas/console/env';
import { SESSION_COOKIE, clearedSessionCookie, cookieValue, sessionCookie } from '../../lambdas/console/http';
import { esc, jsonBlock } from '../../lambdas/console/layout';
import { notYetCounted } from '../../lambdas/console/page-data';
import { principalName, workspacePage } from '../../lambdas/console/pages';
import type { WorkspaceView } from '../../lambdas/store/directory-workspaces';
import { forbiddenReason } from '../../lambdas/console/session-api';
import type { ConsoleSession } from '../../lambdas/console/ports';
import { ROUTES } from '../../lambdas/admin/routes';

describe('decideConsoleAction', () => {
  it.each<[ConsoleRole, string, boolean]>([
    ['owner', 'workspace.pause', true],
    ['member', 'workspace.pause', false],
    ['member', 'workspace.resume', false],
    ['member', 'workspace.spend-cap', false],
    ['member', 'workspace.limit', false],
    ['member', 'workspace.low-credit', false],
    ['member', 'byok.set', false],
    ['member', 'member.invite', false],
    ['member', 'key.create', true],
    ['member', 'key.revoke', true],
    ['member', 'key.rotate', true],
    ['member', 'profile.create', true],
    ['owner', 'credit.add', false],
    ['owner', 'member.add', false],
    ['owner', 'catalog.import', false],
    ['owner', 'no.such.action', false],
  ])('%s %s → %s', (role, action, allowed) => {
    expect(decideConsoleAction(role, action).allowed).toBe(allowed);
  });

  it('names the owner in a member’s refusal', () => {
    const d = decideConsoleAction('member', 'workspace.pause');
    expect(d).toEqual({ allowed: false, reason: "Only the workspace's owner can pause the workspace; you are a member of this workspace." });
  });

  it('every workspace change of the management API is in the role table (a new one must be decided)', () => {
    const workspaceActions = ROUTES.filter((r) => r.action !== undefined && r.pattern[0] === 'workspaces' && r.pattern.length > 1).map((r) => r.action as string);
    expect(workspaceActions.filter((a) => !(a in CONSOLE_ACTIONS))).toEqual([]);
  });
});

describe('forbiddenReason (the route a call reaches)', () => {
  const member: ConsoleSession = { sessionId: 's', workspaceId: 'ws_1', memberId: 'mem_1', role: 'member', email: null, csrf: 'c' };
  it.each<[string, string[], boolean]>([
    ['POST', ['pause'], true],
    ['GET', [], false],
    ['GET', ['keys'], false],
    ['POST', ['keys'], false],
    ['DELETE', ['members', 'mem_2'], true],
    ['PUT', ['keys', 'key_1', 'limit'], true],
    ['GET', ['no-such-route'], false],
  ])('%s %j forbidden for a member: %s', (method, rest, forbidden) => {
    expect(forbiddenReason(member, { method, rest }) !== undefined).toBe(forbidden);
  });
});

describe('daySeries', () => {
  it('lists every day of the range, inclusive', () => {
    expect(daysBetween('2026-02-27', '2026-03-02')).toEqual(['2026-02-27', '2026-02-28', '2026-03-01', '2026-03-02']);
  });

  it.each([
    ['no rows', [], []],
    ['one model, one day', [{ periodId: '2026-01-02', id: 'a/x', chargeMicros: 5 }], [{ label: 'a/x', micros: [0, 5, 0] }]],
    [
      'two models, largest first, days summed',
      [
        { periodId: '2026-01-01', id: 'a/x', chargeMicros: 1 },
        { periodId: '2026-01-03', id: 'b/y', chargeMicros: 7 },
        { periodId: '2026-01-03', id: 'b/y', chargeMicros: 2 },
      ],
      [
        { label: 'b/y', micros: [0, 0, 9] },
        { label: 'a/x', micros: [1, 0, 0] },
      ],
    ],
    ['rows outside the range are left out', [{ periodId: '2025-12-31', id: 'a/x', chargeMicros: 3 }], []],
    ['nobody behind a row gets its own label', [{ periodId: '2026-01-01', id: null, chargeMicros: 4 }], [{ label: 'nobody', micros: [4, 0, 0] }]],
  ])('%s', (_name, rows, expected) => {
    const s = daySeries('2026-01-01', '2026-01-03', rows, (id) => id ?? 'nobody');
    expect(s.series).toEqual(expected);
    expect(s.x).toEqual([1767225600, 1767312000, 1767398400]);
  });
});

describe('minorFromMajor (the page script)', () => {
  it.each([
    ['20', 2000],
    ['20.5', 2050],
    ['20.50', 2050],
    ['$1', 100],
    ['0.01', 1],
    [' 12.34 ', 1234],
  ])('%j → %d minor units', (text, minor) => {
    expect(minorFromMajor(text)).toBe(minor);
  });
  it.each(['', '-1', '1.234', 'abc', '1,00'])('%j is refused', (text) => {
    expect(() => minorFromMajor(text)).toThrow(/not an amount/);
  });
});

describe('loadConsoleConfig', () => {
  it.each([
    ['https://console.example.com', { origin: 'https://console.example.com', rpId: 'console.example.com' }],
    ['http://localhost:8790', { origin: 'http://localhost:8790', rpId: 'localhost' }],
  ])('%s', (origin, expected) => {
    expect(loadConsoleConfig({ [CONSOLE_ENV.origin]: origin })).toMatchObject({ ...expected, rpName: 'Sluice', sessionMs: 720 * 60_000 });
  });
  it.each([undefined, '', 'http://console.example.com', 'http://127.0.0.1:8790', 'https://x.example/console', 'not a url'])('refuses origin %j', (origin) => {
    expect(() => loadConsoleConfig(origin === undefined ? {} : { [CONSOLE_ENV.origin]: origin })).toThrow(CONSOLE_ENV.origin);
  });
});

describe('the session cookie', () => {
  it('is HttpOnly, Secure, SameSite=Strict, host-only with an expiry', () => {
    expect(sessionCookie('abc', Date.UTC(2026, 0, 2))).toBe(`${SESSION_COOKIE}=abc; Path=/; HttpOnly; Secure; SameSite=Strict; Expires=Fri, 02 Jan 2026 00:00:00 GMT`);
    expect(clearedSessionCookie()).toMatch(/^__Host-sluice_session=; .*Expires=Thu, 01 Jan 1970/);
  });
  it.each([
    [{ cookies: ['a=1', `${SESSION_COOKIE}=xyz`] as string[], headers: {} }, 'xyz'],
    [{ cookies: [] as string[], headers: { cookie: `a=1; ${SESSION_COOKIE}=q-1_` } }, 'q-1_'],
    [{ cookies: [] as string[], headers: {} }, undefined],
  ])('is read from a Function URL event or a Cookie header', (req, value) => {
    expect(cookieValue({ method: 'GET', path: '/', query: {}, body: undefined, requestId: 'r', ...req }, SESSION_COOKIE)).toBe(value);
  });
});

describe('escaping', () => {
  it('escapes markup in text and closes no script block', () => {
    expect(esc(`<img src=x onerror="a">'`)).toBe('&lt;img src=x onerror=&quot;a&quot;&gt;&#39;');
    expect(jsonBlock('d', { s: '</script><script>x()</script>' })).not.toContain('</script><script>');
  });
});

describe('eventToConsoleRequest (the Function URL event)', () => {
  it('keeps the method, raw path, query, lower-cased headers, cookies and a base64 body', async () => {
    const { eventToConsoleRequest } = await import('../../lambdas/console/handler');
    const req = eventToConsoleRequest(
      {
        version: '2.0',
        routeKey: '$default',
        rawPath: '/console/api/pause',
        rawQueryString: 'a=1',
        cookies: [`${SESSION_COOKIE}=abc`],
        headers: { Origin: 'https://console.example.com', 'X-Sluice-Csrf': 't' },
        queryStringParameters: { a: '1' },
        requestContext: { http: { method: 'POST', path: '/console/api/pause', protocol: 'HTTP/1.1', sourceIp: '1.2.3.4', userAgent: 'x' } } as never,
        body: Buffer.from('{"x":1}').toString('base64'),
        isBase64Encoded: true,
      },
      'req_1',
    );
    expect(req).toEqual({
      method: 'POST',
      path: '/console/api/pause',
      query: { a: '1' },
      headers: { origin: 'https://console.example.com', 'x-sluice-csrf': 't' },
      cookies: [`${SESSION_COOKIE}=abc`],
      body: '{"x":1}',
      requestId: 'req_1',
    });
  });
});

describe('notYetCounted (what the recent requests show that the daily totals do not hold yet)', () => {
  const day = '2026-03-02';
  const at = (iso: string, chargeMicros: number): { startedAt: number; chargeMicros: number } => ({ startedAt: Date.parse(iso), chargeMicros });
  it.each<[string, { startedAt: number; chargeMicros: number }[], { requests: number; chargeMicros: number } | undefined, { requests: number; chargeMicros: number }]>([
    ['nothing at all', [], undefined, { requests: 0, chargeMicros: 0 }],
    ['a request, no rollup for today yet', [at('2026-03-02T10:00:00Z', 560)], undefined, { requests: 1, chargeMicros: 560 }],
    ['a request the rollup already holds', [at('2026-03-02T10:00:00Z', 560)], { requests: 1, chargeMicros: 560 }, { requests: 0, chargeMicros: 0 }],
    ['two of three counted', [at('2026-03-02T10:00:02Z', 7), at('2026-03-02T10:00:01Z', 5), at('2026-03-02T10:00:00Z', 3)], { requests: 2, chargeMicros: 8 }, { requests: 1, chargeMicros: 7 }],
    ['yesterday’s requests are not today’s', [at('2026-03-01T23:59:59Z', 9)], undefined, { requests: 0, chargeMicros: 0 }],
    // The recent list may not reach back over the whole day: never below zero.
    ['a rollup holding more than the recent list', [at('2026-03-02T10:00:00Z', 5)], { requests: 40, chargeMicros: 900 }, { requests: 0, chargeMicros: 0 }],
  ])('%s', (_name, recent, today, expected) => {
    expect(notYetCounted(recent, today, day)).toEqual(expected);
  });
});

describe('principalName (who ended a key, for the people of the workspace)', () => {
  const emails: Record<string, string> = { mem_aa: 'owner@example.com' };
  it.each<[string | null, string]>([
    ['console:ws_1/mem_aa', 'owner@example.com'],
    ['console:ws_1/mem_bb', 'a former member (mem_bb)'],
    ['console:ws_2/mem_aa', 'someone outside this workspace'],
    ['local', 'an operator (sluice CLI)'],
    // An operator's IAM identity is not the workspace's business.
    ['arn:aws:iam::123456789012:user/ops', 'an operator (sluice CLI)'],
    [null, 'not recorded'],
  ])('%j → %s', (principal, name) => {
    expect(principalName(principal, 'ws_1', (id) => emails[id])).toBe(name);
  });
});

describe("workspacePage's parts by region (a stage with several regions)", () => {
  const m = (micros: number): { micros: number; major: string; currency: 'USD' } => ({ micros, major: '', currency: 'USD' });
  const session = { sessionId: 's', workspaceId: 'ws_1', memberId: 'mem_aa', role: 'member', email: null, csrf: 'c' } as const;
  const view = (regions: WorkspaceView['regions']): WorkspaceView =>
    ({
      workspaceId: 'ws_1',
      name: 'Acme',
      createdAt: '2026-11-01T00:00:00.000Z',
      paused: false,
      spendRateCapMinor: 5000,
      monthlyLimit: null,
      permittedModels: null,
      defaultProfile: null,
      byokProviders: [],
      keySlots: 1,
      lowCreditThreshold: null,
      balance: { available: m(15_000_000_000), held: m(250_000_000), spent: m(0), credited: m(15_250_000_000) },
      month: { id: '2026-11', settled: m(0), held: m(250_000_000) },
      regions,
      inTransit: regions === null ? null : m(0),
      members: [],
      profiles: [],
    }) as unknown as WorkspaceView;

  it("shows each region's available and held, in people's precision, with what a region down means", () => {
    const html = workspacePage(session, view([
      { region: 'us-east-1', available: m(10_000_000_000), held: m(250_000_000) },
      { region: 'us-west-2', available: m(5_000_000_000), held: m(0) },
    ] as unknown as WorkspaceView['regions']), 60);
    const rows = [...html.matchAll(/<tr><td>([^<]+)<\/td><td>([^<]+)<\/td><td>([^<]+)<\/td><\/tr>/g)].map((r) => r.slice(1));
    expect(html).toContain('data-testid="by-region"');
    expect(rows).toEqual([
      ['us-east-1', 'USD 100.00', 'USD 2.50'],
      ['us-west-2', 'USD 50.00', 'USD 0.00'],
    ]);
    expect(html).toContain('stranded, not lost');
  });

  it('adds what is in transit between the regions (a top-up\'s spread) as a row of its own, only while there is some', () => {
    const parts = [
      { region: 'us-east-1', available: m(10_000_000_000), held: m(0) },
      { region: 'us-west-2', available: m(0), held: m(0) },
    ] as unknown as WorkspaceView['regions'];
    const rowsOf = (html: string): string[][] => [...html.matchAll(/<tr><td>([^<]+)<\/td><td>([^<]+)<\/td><td>([^<]+)<\/td><\/tr>/g)].map((r) => r.slice(1));
    const moving = workspacePage(session, { ...view(parts), inTransit: m(5_000_000_000) } as unknown as WorkspaceView, 60);
    expect(rowsOf(moving)).toEqual([
      ['us-east-1', 'USD 100.00', 'USD 0.00'],
      ['us-west-2', 'USD 0.00', 'USD 0.00'],
      ['In transit between regions', 'USD 50.00', 'USD 0.00'],
    ]);
    const still = workspacePage(session, { ...view(parts), inTransit: m(0) } as unknown as WorkspaceView, 60);
    expect(rowsOf(still).map((r) => r[0])).toEqual(['us-east-1', 'us-west-2']);
  });

  it('shows nothing of regions in a stage with one region', () => {
    const html = workspacePage(session, view(null), 60);
    expect(html).not.toContain('by-region');
    expect(html).not.toContain('By region');
  });
});
