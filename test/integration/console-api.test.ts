/**
 * The console's session API on DynamoDB Local: roles enforced on the server whatever the page
 * shows (a member's pause is 403, the owner's is one audited operation under the member's name),
 * the Origin and CSRF checks on every change, sessions, invitations of new members holding a key
 * slot until cancelled or lapsed while passkey invitations of existing members hold none, and
 * ended keys keeping how and by whom.
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { join } from 'node:path';
import type { AdminDeps } from '../../lambdas/admin/ports';
import type { ConsoleDeps } from '../../lambdas/console/ports';
import { listAudit } from '../../lambdas/store/audit';
import { DynamoBalancePort } from '../../lambdas/store/balance-port';
import type { AdminContext } from '../../lambdas/store/directory-context';
import { acceptInvitation, passkeySk, type NewPasskey } from '../../lambdas/store/directory-invitations';
import { LocalFileSecretStore } from '../../lambdas/store/directory-secrets';
import { tableName } from '../../lambdas/shared/schema';
import { addMember, createKey, createWorkspace } from '../../local/ops';
import { callConsole, consoleDeps, signInAs, type TestSession } from '../support/console';
import { testTables, type TestTables } from '../support/dynamo';
import { scratchDirs } from '../support/scratch';

const scratch = scratchDirs();

jest.setTimeout(60_000);

let tables: TestTables;
let clock = Date.now();
let deps: ConsoleDeps;
let ctx: AdminContext;
let ws: string;
let ownerId: string;
let memberId: string;
let owner: TestSession;
let member: TestSession;

async function slots(): Promise<number> {
  const out = await tables.doc.send(new GetCommand({ TableName: tableName(tables.prefix, 'workspaces'), Key: { pk: ws, sk: 'META' }, ConsistentRead: true }));
  return Number(out.Item?.keySlots ?? 0);
}

async function paused(): Promise<boolean> {
  const out = await tables.doc.send(new GetCommand({ TableName: tableName(tables.prefix, 'workspaces'), Key: { pk: ws, sk: 'META' }, ConsistentRead: true }));
  return out.Item?.paused === true;
}

beforeAll(async () => {
  tables = await testTables();
  ctx = {
    doc: tables.doc,
    tablePrefix: tables.prefix,
    stage: 'local',
    now: () => clock,
    secrets: new LocalFileSecretStore(join(scratch('sluice-console-'), 'secrets.json')),
  };
  const admin: AdminDeps = { ctx, balance: new DynamoBalancePort(ctx) };
  deps = consoleDeps(admin);
  const created = await createWorkspace(ctx, { name: 'console', ownerEmail: 'owner@example.com' });
  ws = created.workspaceId;
  ownerId = created.ownerMemberId;
  memberId = (await addMember(ctx, { workspaceId: ws, email: 'member@example.com' })).memberId;
  await createKey(ctx, { workspaceId: ws, name: 'first' });
  owner = await signInAs(deps, ws, ownerId);
  member = await signInAs(deps, ws, memberId);
});

afterAll(() => {
  tables.client.destroy();
});

describe('roles, enforced by the session API', () => {
  it.each([
    ['POST', '/console/api/pause', undefined],
    ['POST', '/console/api/resume', undefined],
    ['PUT', '/console/api/spend-cap', { amountMinor: 2000 }],
    ['PUT', '/console/api/monthly-limit', { amountMinor: 50_000 }],
    ['PUT', '/console/api/low-credit', { amountMinor: 1000 }],
    ['PUT', '/console/api/byok/openai', { apiKey: 'sk-not-a-real-key' }],
    ['POST', '/console/api/invitations', { email: 'x@example.com' }],
  ])('a member may not %s %s: 403 forbidden, nothing changes', async (method, path, body) => {
    const before = await paused();
    const out = await callConsole(deps, member, method, path, body);
    expect(out.status).toBe(403);
    expect(out.body).toEqual({ error: { message: expect.stringMatching(/owner/), type: 'permission_error', param: null, code: 'forbidden', request_id: expect.stringMatching(/^req_/) } });
    expect(await paused()).toBe(before);
  });

  it('a member reads whether the workspace is paused', async () => {
    const out = await callConsole(deps, member, 'GET', '/console/api');
    expect(out.status).toBe(200);
    expect(out.body).toMatchObject({ workspaceId: ws, paused: false });
  });

  it("the owner's pause is the management operation, audited once under the owner's console identity", async () => {
    const out = await callConsole(deps, owner, 'POST', '/console/api/pause');
    expect(out.status).toBe(200);
    expect(await paused()).toBe(true);
    const audit = (await listAudit(ctx, { workspaceId: ws, limit: 50 })).filter((e) => e.action === 'workspace.pause');
    expect(audit).toHaveLength(1);
    expect(audit[0]?.who).toBe(`console:${ws}/${ownerId}`);
    const resumed = await callConsole(deps, owner, 'POST', '/console/api/resume');
    expect(resumed.status).toBe(200);
    expect(await paused()).toBe(false);
  });

  it('the spend-rate cap refuses 0 from the owner too (SPEC: pausing is the way to stop)', async () => {
    const out = await callConsole(deps, owner, 'PUT', '/console/api/spend-cap', { amountMinor: 0 });
    expect(out.status).toBe(400);
  });

  it('buying credit is not the console’s, even for the owner', async () => {
    const out = await callConsole(deps, owner, 'POST', '/console/api/credit', { amountMinor: 100 });
    expect(out.status).toBe(403);
  });

  it('a member mints a key for themselves: shown once in the answer, never in a listing', async () => {
    const out = await callConsole(deps, member, 'POST', '/console/api/keys', { name: 'mine', memberId: ownerId });
    expect(out.status).toBe(201);
    const raw = out.body['rawKey'] as string;
    expect(raw).toMatch(/^slc_dev_[A-Za-z0-9_-]{43}$/);
    const list = await callConsole(deps, member, 'GET', '/console/api/keys');
    const mine = (list.body['keys'] as { keyId: string; memberId: string; visible: string }[]).find((k) => k.keyId === out.body['keyId']);
    expect(mine?.memberId).toBe(memberId); // not the owner the body named
    expect(JSON.stringify(list.body)).not.toContain(raw);
    const revoked = await callConsole(deps, member, 'POST', `/console/api/keys/${String(out.body['keyId'])}/revoke`);
    expect(revoked.status).toBe(200);
  });
});

describe('an expired key in the console', () => {
  it('is refused a rotation with the management API\'s 409 key_expired (never renewed), and can be revoked', async () => {
    const minted = await callConsole(deps, owner, 'POST', '/console/api/keys', { name: 'short', expiresAt: new Date(clock + 60_000).toISOString() });
    expect(minted.status).toBe(201);
    const keyId = String(minted.body['keyId']);
    const was = clock;
    clock += 120_000;
    try {
      const rotated = await callConsole(deps, owner, 'POST', `/console/api/keys/${keyId}/rotate`);
      expect(rotated.status).toBe(409);
      expect(rotated.body).toEqual({
        error: { message: expect.stringMatching(/can be revoked .* but not rotated; create a new key$/), type: 'invalid_request_error', param: null, code: 'key_expired', request_id: expect.stringMatching(/^req_/) },
      });
      expect(rotated.body).not.toHaveProperty('rawKey');
      const list = await callConsole(deps, owner, 'GET', '/console/api/keys');
      expect((list.body['keys'] as { keyId: string; state: string }[]).filter((k) => k.keyId === keyId).map((k) => k.state)).toEqual(['expired']);
      expect((await callConsole(deps, owner, 'POST', `/console/api/keys/${keyId}/revoke`)).status).toBe(200);
    } finally {
      clock = was;
    }
  });
});

describe('sessions, Origin and CSRF', () => {
  it.each([
    ['no Origin', { origin: null }],
    ['another Origin', { origin: 'https://evil.example' }],
    ['no CSRF token', { csrf: null }],
    ['a wrong CSRF token', { csrf: 'x'.repeat(43) }],
  ])('a change with %s is refused 403 and changes nothing', async (_label, opts) => {
    const out = await callConsole(deps, owner, 'POST', '/console/api/pause', undefined, opts);
    expect(out.status).toBe(403);
    expect((out.body['error'] as { code: string }).code).toBe('csrf_refused');
    expect(await paused()).toBe(false);
  });

  it('no session answers 401; a page redirects to sign-in', async () => {
    expect((await callConsole(deps, undefined, 'GET', '/console/api/me')).status).toBe(401);
    const page = await callConsole(deps, undefined, 'GET', '/console/keys');
    expect(page.status).toBe(303);
    expect(page.res.headers['location']).toBe('/console/signin');
  });

  it('a removed member’s session ends at once', async () => {
    const gone = (await addMember(ctx, { workspaceId: ws, email: 'gone@example.com' })).memberId;
    const s = await signInAs(deps, ws, gone);
    expect((await callConsole(deps, s, 'GET', '/console/api/me')).status).toBe(200);
    expect((await callConsole(deps, owner, 'DELETE', `/console/api/members/${gone}`)).status).toBe(200);
    expect((await callConsole(deps, s, 'GET', '/console/api/me')).status).toBe(401);
  });

  it('sign-out deletes the session and clears the cookie', async () => {
    const s = await signInAs(deps, ws, memberId);
    const out = await callConsole(deps, s, 'POST', '/console/api/signout');
    expect(out.status).toBe(200);
    expect(out.res.cookies?.[0]).toMatch(/^__Host-sluice_session=; Path=\/; HttpOnly; Secure; SameSite=Strict; Expires=Thu, 01 Jan 1970/);
    expect((await callConsole(deps, s, 'GET', '/console/api/me')).status).toBe(401);
  });

  it('pages render for a member with owner-only controls disabled', async () => {
    const page = await callConsole(deps, member, 'GET', '/console/');
    expect(page.status).toBe(200);
    expect(page.res.body).toMatch(/data-testid="pause" disabled/);
    expect(page.res.headers['content-security-policy']).toContain("script-src 'self'");
  });
});

describe('invitations hold a key slot', () => {
  it('until cancelled: five slots held refuse a mint, a cancel frees one', async () => {
    const start = await slots();
    const invited: string[] = [];
    for (let i = start; i < 5; i++) {
      const out = await callConsole(deps, owner, 'POST', '/console/api/invitations', { email: `inv${i}@example.com` });
      expect(out.status).toBe(201);
      expect(out.body['link']).toMatch(new RegExp(`^/console/join#ws=${ws}&invitation=inv_[0-9a-f]{20}\\.`));
      invited.push((out.body['invitation'] as { invitationId: string }).invitationId);
    }
    expect(await slots()).toBe(5);
    const refused = await callConsole(deps, member, 'POST', '/console/api/keys', { name: 'sixth' });
    expect(refused.status).toBe(409);
    expect((refused.body['error'] as { code: string }).code).toBe('key_slots_full');
    expect((await callConsole(deps, owner, 'DELETE', `/console/api/invitations/${invited[0]}`)).status).toBe(200);
    expect(await slots()).toBe(4);
    const minted = await callConsole(deps, member, 'POST', '/console/api/keys', { name: 'fits' });
    expect(minted.status).toBe(201);
    expect(await slots()).toBe(5);
    await callConsole(deps, member, 'POST', `/console/api/keys/${String(minted.body['keyId'])}/revoke`);
    for (const id of invited.slice(1)) expect((await callConsole(deps, owner, 'DELETE', `/console/api/invitations/${id}`)).status).toBe(200);
    expect(await slots()).toBe(start);
  });

  it('until lapsed: a mint that finds every slot held ends lapsed invitations first', async () => {
    const start = await slots();
    for (let i = start; i < 5; i++) {
      expect((await callConsole(deps, owner, 'POST', '/console/api/invitations', { email: `lapse${i}@example.com`, expiresInHours: 1 })).status).toBe(201);
    }
    expect(await slots()).toBe(5);
    clock += 2 * 3_600_000; // past the invitations' hour, within the sessions' twelve
    const minted = await callConsole(deps, member, 'POST', '/console/api/keys', { name: 'after-lapse' });
    expect(minted.status).toBe(201);
    expect(await slots()).toBe(start + 1);
    const list = await callConsole(deps, owner, 'GET', '/console/api/invitations');
    expect(list.body['invitations']).toEqual([]);
  });
});

describe('sign-in and joining refuse what is not a passkey answer', () => {
  it.each([
    ['/console/api/signin/verify', { response: { id: 'x', response: { clientDataJSON: Buffer.from('{"challenge":"AAAAAAAAAAAAAAAAAAAAAA"}').toString('base64url') } } }, 401],
    ['/console/api/signin/verify', {}, 400],
    ['/console/api/join/options', { workspaceId: 'ws_00000000000000000000', invitation: 'inv_00000000000000000000.x' }, 404],
  ])('%s %j → %d, no session', async (path, body, status) => {
    const out = await callConsole(deps, undefined, 'POST', path, body);
    expect(out.status).toBe(status);
    expect(out.res.cookies).toBeUndefined();
  });

  it('sign-in options need the console’s Origin', async () => {
    expect((await callConsole(deps, undefined, 'POST', '/console/api/signin/options', {}, { origin: 'https://evil.example' })).status).toBe(403);
    const ok = await callConsole(deps, undefined, 'POST', '/console/api/signin/options', {});
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ rpId: 'localhost', userVerification: 'required', challenge: expect.any(String) });
  });
});

describe('a passkey invitation for an existing member holds no key slot (issue 22 item 20)', () => {
  const passkey = (id: string): NewPasskey => ({ credentialId: id, publicKey: 'pk', counter: 0, transports: ['internal'] });

  async function passkeyItem(credentialId: string): Promise<Record<string, unknown> | undefined> {
    const out = await tables.doc.send(new GetCommand({ TableName: tableName(tables.prefix, 'workspaces'), Key: { pk: ws, sk: passkeySk(credentialId) }, ConsistentRead: true }));
    return out.Item;
  }

  it('named by member id or by a member’s e-mail: a passkey invitation, no slot taken; accepting adds a passkey to that very member', async () => {
    const start = await slots();
    const byId = await callConsole(deps, owner, 'POST', '/console/api/invitations', { memberId });
    expect(byId.status).toBe(201);
    expect(byId.body['invitation']).toMatchObject({ kind: 'passkey', holdsKeySlot: false, memberId, email: 'member@example.com', role: 'member' });
    const byEmail = await callConsole(deps, owner, 'POST', '/console/api/invitations', { email: 'MEMBER@example.com' });
    expect(byEmail.status).toBe(201);
    expect(byEmail.body['invitation']).toMatchObject({ kind: 'passkey', holdsKeySlot: false, memberId });
    expect(await slots()).toBe(start);
    const joined = await acceptInvitation(ctx, { workspaceId: ws, token: String(byId.body['token']), passkey: passkey('cred-new-device') });
    expect(joined).toEqual({ memberId, role: 'member', email: 'member@example.com', kind: 'passkey' });
    expect(await passkeyItem('cred-new-device')).toMatchObject({ memberId });
    expect(await slots()).toBe(start);
    // Cancelling one gives back no slot it never took.
    const other = (byEmail.body['invitation'] as { invitationId: string }).invitationId;
    const cancelled = await callConsole(deps, owner, 'DELETE', `/console/api/invitations/${other}`);
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toEqual({ invitationId: other, freedKeySlot: false });
    expect(await slots()).toBe(start);
    const members = await callConsole(deps, owner, 'GET', '/console/api/members');
    expect((members.body['members'] as { memberId: string }[]).map((m) => m.memberId).sort()).toEqual([memberId, ownerId].sort());
  });

  it('is made even when every slot is held, and lapses without touching the slots', async () => {
    const start = await slots();
    const joins: string[] = [];
    for (let i = start; i < 5; i++) {
      const out = await callConsole(deps, owner, 'POST', '/console/api/invitations', { email: `full${i}@example.com` });
      expect(out.body['invitation']).toMatchObject({ kind: 'join', holdsKeySlot: true });
      joins.push((out.body['invitation'] as { invitationId: string }).invitationId);
    }
    expect(await slots()).toBe(5);
    const out = await callConsole(deps, owner, 'POST', '/console/api/invitations', { memberId: ownerId, expiresInHours: 1 });
    expect(out.status).toBe(201);
    expect(out.body['invitation']).toMatchObject({ kind: 'passkey', role: 'owner', holdsKeySlot: false });
    expect(await slots()).toBe(5);
    for (const id of joins) expect((await callConsole(deps, owner, 'DELETE', `/console/api/invitations/${id}`)).status).toBe(200);
    expect(await slots()).toBe(start);
    clock += 2 * 3_600_000; // the passkey invitation's hour passes
    expect((await callConsole(deps, owner, 'GET', '/console/api/invitations')).body['invitations']).toEqual([]);
    expect(await slots()).toBe(start);
  });

  it('is the owner’s to make, names a member who exists, and changes no role', async () => {
    const before = await slots();
    const forbidden = await callConsole(deps, member, 'POST', '/console/api/invitations', { memberId });
    expect(forbidden.status).toBe(403);
    expect((forbidden.body['error'] as { code: string }).code).toBe('forbidden');
    const nobody = await callConsole(deps, owner, 'POST', '/console/api/invitations', { memberId: 'mem_00000000000000000000' });
    expect(nobody.status).toBe(404);
    expect((nobody.body['error'] as { code: string }).code).toBe('member_not_found');
    const promote = await callConsole(deps, owner, 'POST', '/console/api/invitations', { memberId, role: 'owner' });
    expect(promote.status).toBe(400);
    expect(await slots()).toBe(before);
  });

  it('cannot be accepted once its member was removed', async () => {
    const gone = (await addMember(ctx, { workspaceId: ws, email: 'leaving@example.com' })).memberId;
    const out = await callConsole(deps, owner, 'POST', '/console/api/invitations', { memberId: gone });
    expect(out.status).toBe(201);
    expect((await callConsole(deps, owner, 'DELETE', `/console/api/members/${gone}`)).status).toBe(200);
    const before = await slots();
    await expect(acceptInvitation(ctx, { workspaceId: ws, token: String(out.body['token']), passkey: passkey('cred-gone') })).rejects.toThrow();
    expect(await passkeyItem('cred-gone')).toBeUndefined();
    expect(await slots()).toBe(before);
  });
});

describe('an ended key keeps how and by whom (issue 22 item 16)', () => {
  type Listed = { keyId: string; visible: string; state: string; endedHow: string | null; endedBy: string | null; revokedAt: string | null };
  const listAll = async (): Promise<Listed[]> => (await callConsole(deps, owner, 'GET', '/console/api/keys', undefined, { query: { all: 'true' } })).body['keys'] as Listed[];

  it('revoked by a member, rotated by the owner, revoked with its member’s removal', async () => {
    const revoked = await callConsole(deps, member, 'POST', '/console/api/keys', { name: 'to-revoke' });
    expect((await callConsole(deps, member, 'POST', `/console/api/keys/${String(revoked.body['keyId'])}/revoke`)).status).toBe(200);
    const rotated = await callConsole(deps, owner, 'POST', '/console/api/keys', { name: 'to-rotate' });
    expect((await callConsole(deps, owner, 'POST', `/console/api/keys/${String(rotated.body['keyId'])}/rotate`)).status).toBe(200);
    const leaver = (await addMember(ctx, { workspaceId: ws, email: 'leaver@example.com' })).memberId;
    const theirs = await createKey(ctx, { workspaceId: ws, memberId: leaver, name: 'theirs' });
    expect((await callConsole(deps, owner, 'DELETE', `/console/api/members/${leaver}`, undefined, { query: { revokeKeys: 'true' } })).status).toBe(200);
    const all = await listAll();
    const find = (visible: unknown): Listed | undefined => all.find((k) => k.visible === visible);
    expect(find(revoked.body['visible'])).toMatchObject({ state: 'ended', endedHow: 'revoked', endedBy: `console:${ws}/${memberId}`, revokedAt: expect.any(String) });
    expect(find(rotated.body['visible'])).toMatchObject({ state: 'ended', endedHow: 'rotated', endedBy: `console:${ws}/${ownerId}` });
    expect(find(theirs.visible)).toMatchObject({ state: 'ended', endedHow: 'member-removed', endedBy: `console:${ws}/${ownerId}` });
    // A live key has ended in no way and by nobody.
    expect(all.filter((k) => k.state === 'live').every((k) => k.endedHow === null && k.endedBy === null)).toBe(true);
  });
});
