/**
 * The operator's use cases against DynamoDB Local: workspaces, credit, keys (hash only, five
 * slots even under concurrent mints), members, limits, profiles and the catalog import.
 */
import { GetCommand, ScanCommand } from '@aws-sdk/lib-dynamodb';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { hashKey } from '../../lambdas/core/api-key';
import type { KeyRecord, WorkspaceRecord } from '../../lambdas/shared/records';
import { ALL_TABLES, tableName } from '../../lambdas/shared/schema';
import type { AdminContext } from '../../local/ops';
import {
  addCredit,
  addMember,
  CatalogValidationError,
  createKey,
  createProfile,
  createWorkspace,
  deleteProfile,
  importCatalog,
  KeyExpiredError,
  KeyNotFoundError,
  KeySlotsFullError,
  listKeys,
  listProfiles,
  loadCatalogFiles,
  MemberNotFoundError,
  OwnerRemovalError,
  ProfileExistsError,
  ProfileInUseError,
  ProfileNotFoundError,
  readCatalog,
  removeMember,
  reorderProfile,
  revokeKey,
  rotateKey,
  setDefaultProfile,
  setKeyCreditLimit,
  setKeyExpiry,
  setMemberMonthlyLimit,
  setPaused,
  setPermittedModels,
  setSpendRateCap,
  setWorkspaceMonthlyLimit,
  showWorkspace,
  SpendCapError,
  ValidationError,
  WorkspaceNotFoundError,
} from '../../local/ops';
import { testTables, type TestTables } from '../support/dynamo';
import { scratchDirs } from '../support/scratch';

const scratch = scratchDirs();

let t: TestTables;
let ctx: AdminContext;

beforeAll(async () => {
  t = await testTables();
  ctx = { doc: t.doc, tablePrefix: t.prefix, stage: 'local' };
  // Permitted sets and profiles accept catalogued ids only.
  await importCatalog(ctx);
});

afterAll(() => t.client.destroy());

async function scanTable(name: string): Promise<Record<string, unknown>[]> {
  const out = await t.doc.send(new ScanCommand({ TableName: name, ConsistentRead: true }));
  return out.Items ?? [];
}

/** Everything in every Sluice table under this prefix, as one string. */
async function everything(): Promise<string> {
  const all = await Promise.all(ALL_TABLES.map((s) => scanTable(tableName(t.prefix, s.name))));
  return JSON.stringify(all);
}

async function meta(workspaceId: string): Promise<WorkspaceRecord> {
  const out = await t.doc.send(new GetCommand({ TableName: `${t.prefix}workspaces`, Key: { pk: workspaceId, sk: 'META' }, ConsistentRead: true }));
  return out.Item as WorkspaceRecord;
}

async function keyRecord(keyId: string, workspaceId: string): Promise<KeyRecord> {
  const items = (await scanTable(`${t.prefix}keys`)) as unknown as KeyRecord[];
  const found = items.find((k) => k.keyId === keyId && k.workspaceId === workspaceId);
  if (found === undefined) throw new Error(`no key ${keyId}`);
  return found;
}

describe('workspace, credit and key', () => {
  it('creates a workspace with its owner and a zero balance, credits it, and mints a key stored only as a hash', async () => {
    const { workspaceId, ownerMemberId } = await createWorkspace(ctx, { name: 'Acme', ownerEmail: 'owner@acme.test' });
    const fresh = await showWorkspace(ctx, { workspaceId });
    expect(fresh).toMatchObject({ name: 'Acme', paused: false, keySlots: 0, spendRateCapMinor: 5000, permittedModels: null });
    expect(fresh.members).toEqual([{ memberId: ownerMemberId, role: 'owner', email: 'owner@acme.test', monthlyLimit: null }]);
    expect(fresh.balance.available).toEqual({ micros: 0, minor: '0.000000' });

    await expect(addCredit(ctx, { workspaceId, minor: 1234 })).resolves.toEqual({ availableMicros: 1_234_000_000 });
    await expect(addCredit(ctx, { workspaceId, minor: 1 })).resolves.toEqual({ availableMicros: 1_235_000_000 });
    const credited = await showWorkspace(ctx, { workspaceId });
    expect(credited.balance.available.minor).toBe('1235.000000');
    expect(credited.balance.credited.micros).toBe(1_235_000_000);

    const key = await createKey(ctx, { workspaceId, name: 'ci', memberId: ownerMemberId });
    expect(key.rawKey).toMatch(/^slc_dev_[A-Za-z0-9_-]{43}$/);
    expect(key.visible).toBe(`slc_dev_…${key.rawKey.slice(-4)}`);

    const stored = await keyRecord(key.keyId, workspaceId);
    expect(stored.keyHash).toBe(hashKey(key.rawKey));
    expect(stored).toMatchObject({ visible: key.visible, name: 'ci', memberId: ownerMemberId });
    // Neither the raw key nor its 39 hidden characters appear anywhere in any table.
    const dump = await everything();
    expect(dump).not.toContain(key.rawKey);
    expect(dump).not.toContain(key.rawKey.slice('slc_dev_'.length, -4));

    const listed = await listKeys(ctx, { workspaceId });
    expect(listed).toHaveLength(1);
    expect(JSON.stringify(listed)).not.toContain(stored.keyHash);
    expect(listed[0]).toMatchObject({ keyId: key.keyId, visible: key.visible, state: 'live', creditLimit: null });
    expect((await meta(workspaceId)).keySlots).toBe(1);
  });

  it('mints the prefix of the stage', async () => {
    const { workspaceId } = await createWorkspace(ctx, { name: 'Prod' });
    const prod = await createKey({ ...ctx, stage: 'prod' }, { workspaceId });
    const stg = await createKey({ ...ctx, stage: 'stg' }, { workspaceId });
    expect(prod.rawKey.startsWith('slc_live_')).toBe(true);
    expect(stg.rawKey.startsWith('slc_stg_')).toBe(true);
  });

  it.each([0, -5, 1.5, Number.MAX_SAFE_INTEGER])('refuses a credit of %p', async (minor) => {
    const { workspaceId } = await createWorkspace(ctx, { name: 'Credit' });
    await expect(addCredit(ctx, { workspaceId, minor })).rejects.toBeInstanceOf(ValidationError);
  });

  it('refuses credit and keys for a workspace that does not exist, creating nothing', async () => {
    await expect(addCredit(ctx, { workspaceId: 'ws_missing', minor: 5 })).rejects.toBeInstanceOf(WorkspaceNotFoundError);
    await expect(createKey(ctx, { workspaceId: 'ws_missing' })).rejects.toBeInstanceOf(WorkspaceNotFoundError);
    await expect(setPaused(ctx, { workspaceId: 'ws_missing', paused: true })).rejects.toBeInstanceOf(WorkspaceNotFoundError);
    expect(await everything()).not.toContain('ws_missing');
  });

  it('refuses a key for a member who does not exist, and gives the slot back', async () => {
    const { workspaceId } = await createWorkspace(ctx, { name: 'Ghost' });
    await expect(createKey(ctx, { workspaceId, memberId: 'mem_ghost' })).rejects.toBeInstanceOf(MemberNotFoundError);
    expect((await meta(workspaceId)).keySlots).toBe(0);
  });
});

describe('five key slots', () => {
  it('refuses the sixth key', async () => {
    const { workspaceId } = await createWorkspace(ctx, { name: 'Slots' });
    for (let i = 0; i < 5; i++) await createKey(ctx, { workspaceId, name: `k${i}` });
    await expect(createKey(ctx, { workspaceId })).rejects.toBeInstanceOf(KeySlotsFullError);
    expect((await meta(workspaceId)).keySlots).toBe(5);
    expect(await listKeys(ctx, { workspaceId })).toHaveLength(5);
  });

  it('never holds more than five under concurrent mints', async () => {
    const { workspaceId } = await createWorkspace(ctx, { name: 'Race' });
    const results = await Promise.allSettled(Array.from({ length: 12 }, (_, i) => createKey(ctx, { workspaceId, name: `race${i}` })));
    const minted = results.filter((r) => r.status === 'fulfilled');
    const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(minted).toHaveLength(5);
    expect(refused).toHaveLength(7);
    for (const r of refused) expect(r.reason).toBeInstanceOf(KeySlotsFullError);
    expect((await meta(workspaceId)).keySlots).toBe(5);
    const keys = ((await scanTable(`${t.prefix}keys`)) as unknown as KeyRecord[]).filter((k) => k.workspaceId === workspaceId);
    expect(keys).toHaveLength(5);
  });
});

describe('removing a member', () => {
  async function setup(): Promise<{ workspaceId: string; memberId: string; memberKeys: string[]; otherKey: string }> {
    const { workspaceId } = await createWorkspace(ctx, { name: 'Team' });
    const { memberId } = await addMember(ctx, { workspaceId, email: 'dev@team.test' });
    const a = await createKey(ctx, { workspaceId, memberId, name: 'a' });
    // An expired key still holds its slot, and revoking frees it too.
    const b = await createKey({ ...ctx, now: () => Date.now() - 60_000 }, { workspaceId, memberId, name: 'b', expiresAt: Date.now() - 1 });
    const other = await createKey(ctx, { workspaceId, name: 'shared' });
    return { workspaceId, memberId, memberKeys: [a.keyId, b.keyId].sort(), otherKey: other.keyId };
  }

  it('with revoking: ends their keys and frees their slots in the same motion', async () => {
    const s = await setup();
    expect((await meta(s.workspaceId)).keySlots).toBe(3);
    const out = await removeMember(ctx, { workspaceId: s.workspaceId, memberId: s.memberId, revokeKeys: true });
    expect(out.revokedKeyIds.sort()).toEqual(s.memberKeys);
    expect(out.keptKeyIds).toEqual([]);
    expect((await meta(s.workspaceId)).keySlots).toBe(1);
    for (const id of s.memberKeys) expect((await keyRecord(id, s.workspaceId)).revokedAt).toEqual(expect.any(Number));
    expect((await keyRecord(s.otherKey, s.workspaceId)).revokedAt).toBeUndefined();
    expect((await listKeys(ctx, { workspaceId: s.workspaceId })).map((k) => k.keyId)).toEqual([s.otherKey]);
    expect((await listKeys(ctx, { workspaceId: s.workspaceId, includeEnded: true })).filter((k) => k.state === 'ended')).toHaveLength(2);
    expect((await showWorkspace(ctx, { workspaceId: s.workspaceId })).members.map((m) => m.role)).toEqual(['owner']);
    // The freed slots are usable at once.
    for (let i = 0; i < 4; i++) await createKey(ctx, { workspaceId: s.workspaceId });
    await expect(createKey(ctx, { workspaceId: s.workspaceId })).rejects.toBeInstanceOf(KeySlotsFullError);
  });

  it('without revoking: their keys stay live, become the workspace\'s, and keep their slots', async () => {
    const s = await setup();
    const out = await removeMember(ctx, { workspaceId: s.workspaceId, memberId: s.memberId, revokeKeys: false });
    expect(out.keptKeyIds.sort()).toEqual(s.memberKeys);
    expect(out.revokedKeyIds).toEqual([]);
    expect((await meta(s.workspaceId)).keySlots).toBe(3);
    for (const id of s.memberKeys) {
      const k = await keyRecord(id, s.workspaceId);
      expect(k.revokedAt).toBeUndefined();
      expect(k.memberId).toBeUndefined();
    }
    await expect(removeMember(ctx, { workspaceId: s.workspaceId, memberId: s.memberId, revokeKeys: true })).rejects.toBeInstanceOf(
      MemberNotFoundError,
    );
  });

  it('refuses to remove the owner', async () => {
    const { workspaceId, ownerMemberId } = await createWorkspace(ctx, { name: 'Owner' });
    await expect(removeMember(ctx, { workspaceId, memberId: ownerMemberId, revokeKeys: true })).rejects.toBeInstanceOf(OwnerRemovalError);
  });

  it('sets and clears a member monthly limit in micro-units', async () => {
    const { workspaceId } = await createWorkspace(ctx, { name: 'Limits' });
    const { memberId } = await addMember(ctx, { workspaceId });
    await expect(setMemberMonthlyLimit(ctx, { workspaceId, memberId, limitMinor: 250 })).resolves.toEqual({ memberId, monthlyLimitMicros: 250_000_000 });
    expect((await showWorkspace(ctx, { workspaceId })).members.find((m) => m.memberId === memberId)?.monthlyLimit?.minor).toBe('250.000000');
    await setMemberMonthlyLimit(ctx, { workspaceId, memberId, limitMinor: null });
    expect((await showWorkspace(ctx, { workspaceId })).members.find((m) => m.memberId === memberId)?.monthlyLimit).toBeNull();
    await expect(setMemberMonthlyLimit(ctx, { workspaceId, memberId: 'mem_nobody', limitMinor: 5 })).rejects.toBeInstanceOf(MemberNotFoundError);
    await expect(addMember(ctx, { workspaceId, email: 'not-an-email' })).rejects.toBeInstanceOf(ValidationError);
  });
});

describe('spend rate cap', () => {
  let workspaceId: string;
  beforeAll(async () => {
    ({ workspaceId } = await createWorkspace(ctx, { name: 'Cap' }));
  });

  it('refuses 0 and says pausing is the way to stop', async () => {
    const attempt = setSpendRateCap(ctx, { workspaceId, capMinor: 0 });
    await expect(attempt).rejects.toBeInstanceOf(SpendCapError);
    await expect(setSpendRateCap(ctx, { workspaceId, capMinor: 0 })).rejects.toThrow(/pause/);
  });

  it('refuses 99 and accepts the minimum of 100', async () => {
    await expect(setSpendRateCap(ctx, { workspaceId, capMinor: 99 })).rejects.toThrow(/at least USD 1\.00 per 60 seconds, got USD 0\.99$/);
    await expect(setSpendRateCap(ctx, { workspaceId, capMinor: 100 })).resolves.toEqual({ spendRateCapMinor: 100, previousMinor: 5000 });
    expect((await meta(workspaceId)).spendRateCapMinor).toBe(100);
  });

  it('accepts the ceiling itself, refuses above it without force, and takes it with force', async () => {
    await expect(setSpendRateCap(ctx, { workspaceId, capMinor: 1_000_000 })).resolves.toMatchObject({ spendRateCapMinor: 1_000_000 });
    await expect(setSpendRateCap(ctx, { workspaceId, capMinor: 1_000_001 })).rejects.toThrow(/--force/);
    expect((await meta(workspaceId)).spendRateCapMinor).toBe(1_000_000);
    await expect(setSpendRateCap(ctx, { workspaceId, capMinor: 5_000_000, force: true })).resolves.toMatchObject({ spendRateCapMinor: 5_000_000 });
  });

  it('always lowers, even to a figure still above the ceiling, but never raises above it without force', async () => {
    await setSpendRateCap(ctx, { workspaceId, capMinor: 5_000_000, force: true });
    await expect(setSpendRateCap(ctx, { workspaceId, capMinor: 2_000_000 })).resolves.toEqual({ spendRateCapMinor: 2_000_000, previousMinor: 5_000_000 });
    await expect(setSpendRateCap(ctx, { workspaceId, capMinor: 3_000_000 })).rejects.toBeInstanceOf(SpendCapError);
    expect((await meta(workspaceId)).spendRateCapMinor).toBe(2_000_000);
    await expect(setSpendRateCap(ctx, { workspaceId, capMinor: 500 })).resolves.toMatchObject({ spendRateCapMinor: 500 });
  });

  it('refuses a fractional cap and an unknown workspace', async () => {
    await expect(setSpendRateCap(ctx, { workspaceId, capMinor: 150.5 })).rejects.toBeInstanceOf(ValidationError);
    await expect(setSpendRateCap(ctx, { workspaceId: 'ws_nowhere', capMinor: 100 })).rejects.toBeInstanceOf(WorkspaceNotFoundError);
    await expect(setSpendRateCap(ctx, { workspaceId: 'ws_nowhere', capMinor: 2_000_000 })).rejects.toBeInstanceOf(WorkspaceNotFoundError);
  });
});

describe('workspace settings', () => {
  it('pauses and resumes, sets and clears the monthly limit and the permitted set', async () => {
    const { workspaceId } = await createWorkspace(ctx, { name: 'Settings' });
    await setPaused(ctx, { workspaceId, paused: true });
    expect((await showWorkspace(ctx, { workspaceId })).paused).toBe(true);
    await setPaused(ctx, { workspaceId, paused: false });
    expect((await meta(workspaceId)).paused).toBe(false);

    await setWorkspaceMonthlyLimit(ctx, { workspaceId, limitMinor: 10_000 });
    expect((await meta(workspaceId)).monthlyLimitMicros).toBe(10_000_000_000);
    await setWorkspaceMonthlyLimit(ctx, { workspaceId, limitMinor: null });
    expect((await meta(workspaceId)).monthlyLimitMicros).toBeUndefined();

    await setPermittedModels(ctx, { workspaceId, models: ['openai/gpt-4.1-mini', 'groq/openai/gpt-oss-120b', 'openai/gpt-4.1-mini'] });
    expect((await meta(workspaceId)).permittedModels).toEqual(['openai/gpt-4.1-mini', 'groq/openai/gpt-oss-120b']);
    await expect(setPermittedModels(ctx, { workspaceId, models: ['gpt-4.1'] })).rejects.toThrow(/pinned/);
    await expect(setPermittedModels(ctx, { workspaceId, models: ['sluice/auto'] })).rejects.toBeInstanceOf(ValidationError);
    await expect(setPermittedModels(ctx, { workspaceId, models: [] })).rejects.toThrow(/pause/);
    await setPermittedModels(ctx, { workspaceId, models: null });
    expect((await showWorkspace(ctx, { workspaceId })).permittedModels).toBeNull();
  });
});

describe('key expiry and credit limit', () => {
  let workspaceId: string;
  let keyId: string;
  let visible: string;
  beforeAll(async () => {
    ({ workspaceId } = await createWorkspace(ctx, { name: 'KeyLimits' }));
    ({ keyId, visible } = await createKey(ctx, { workspaceId }));
  });

  it.each(['daily', 'weekly', 'monthly', 'never'] as const)('stores a %s window with the limit in micro-units', async (window) => {
    await expect(setKeyCreditLimit(ctx, { workspaceId, keyId, limitMinor: 500, window })).resolves.toEqual({
      keyId,
      creditLimitMicros: 500_000_000,
      window,
    });
    const k = await keyRecord(keyId, workspaceId);
    expect(k.creditLimitMicros).toBe(500_000_000);
    expect(k.creditWindow).toBe(window);
    expect((await listKeys(ctx, { workspaceId }))[0]?.creditLimit).toEqual({ micros: 500_000_000, minor: '500.000000', window });
  });

  it('defaults to a monthly window, names the key by its visible part (typed with ...), and clears', async () => {
    await setKeyCreditLimit(ctx, { workspaceId, visible: visible.replace('…', '...'), limitMinor: 7 });
    expect(await keyRecord(keyId, workspaceId)).toMatchObject({ creditLimitMicros: 7_000_000, creditWindow: 'monthly' });
    await setKeyCreditLimit(ctx, { workspaceId, visible, limitMinor: null });
    const k = await keyRecord(keyId, workspaceId);
    expect(k.creditLimitMicros).toBeUndefined();
    expect(k.creditWindow).toBeUndefined();
  });

  it('refuses an unknown window, a negative limit and an unknown key', async () => {
    await expect(setKeyCreditLimit(ctx, { workspaceId, keyId, limitMinor: 5, window: 'hourly' as never })).rejects.toBeInstanceOf(ValidationError);
    await expect(setKeyCreditLimit(ctx, { workspaceId, keyId, limitMinor: -1 })).rejects.toBeInstanceOf(ValidationError);
    await expect(setKeyCreditLimit(ctx, { workspaceId, keyId: 'key_00', limitMinor: 5 })).rejects.toBeInstanceOf(KeyNotFoundError);
    const other = await createWorkspace(ctx, { name: 'Other' });
    await expect(setKeyCreditLimit(ctx, { workspaceId: other.workspaceId, keyId, limitMinor: 5 })).rejects.toBeInstanceOf(KeyNotFoundError);
  });

  it('sets and clears an expiry in the future, refuses one in the past, and never renews an expired key', async () => {
    const at = Date.parse('2099-01-01T00:00:00Z');
    await expect(setKeyExpiry(ctx, { workspaceId, keyId, expiresAt: at })).resolves.toEqual({ keyId, expiresAt: '2099-01-01T00:00:00.000Z' });
    expect((await keyRecord(keyId, workspaceId)).expiresAt).toBe(at);
    await setKeyExpiry(ctx, { workspaceId, keyId, expiresAt: null });
    expect((await keyRecord(keyId, workspaceId)).expiresAt).toBeUndefined();
    await expect(setKeyExpiry(ctx, { workspaceId, keyId, expiresAt: Date.now() - 1000 })).rejects.toBeInstanceOf(ValidationError);

    const soon = Date.now() + 60_000;
    const short = await createKey(ctx, { workspaceId, expiresAt: soon });
    const later: AdminContext = { ...ctx, now: () => soon + 1 };
    await expect(setKeyExpiry(later, { workspaceId, keyId: short.keyId, expiresAt: soon + 3_600_000 })).rejects.toBeInstanceOf(KeyExpiredError);
    expect((await listKeys(later, { workspaceId })).find((k) => k.keyId === short.keyId)?.state).toBe('expired');
  });

  it('never rotates an expired key (a replacement would renew it): it can be revoked, and nothing else changes', async () => {
    const soon = Date.now() + 60_000;
    const short = await createKey(ctx, { workspaceId, name: 'short', expiresAt: soon });
    await setKeyCreditLimit(ctx, { workspaceId, keyId: short.keyId, limitMinor: 500 });
    const later: AdminContext = { ...ctx, now: () => soon + 1 };
    const keys = async (): Promise<string[]> => (await scanTable(`${t.prefix}keys`)).map((k) => JSON.stringify(k)).sort();
    const before = await keys();
    for (const expiresAt of [undefined, null, soon + 3_600_000]) {
      const attempt = rotateKey(later, { workspaceId, keyId: short.keyId, ...(expiresAt === undefined ? {} : { expiresAt }) });
      await expect(attempt).rejects.toBeInstanceOf(KeyExpiredError);
      await expect(attempt).rejects.toThrow(/can be revoked .* but not rotated/);
    }
    // No replacement was minted and the expired key was not ended.
    expect(await keys()).toEqual(before);
    expect((await listKeys(later, { workspaceId })).find((k) => k.keyId === short.keyId)?.state).toBe('expired');
    await expect(revokeKey(later, { workspaceId, keyId: short.keyId })).resolves.toMatchObject({ keyId: short.keyId, wasExpired: true });
    // A key still live rotates, and its replacement keeps the expiry still ahead.
    const live = await createKey(ctx, { workspaceId, expiresAt: soon });
    await expect(rotateKey(ctx, { workspaceId, keyId: live.keyId })).resolves.toMatchObject({ keyId: live.keyId, expiresAt: new Date(soon).toISOString() });
  });
});

describe('routing profiles', () => {
  let workspaceId: string;
  beforeAll(async () => {
    ({ workspaceId } = await createWorkspace(ctx, { name: 'Profiles' }));
  });

  it.each<[string, string, string[]]>([
    ['an upper-case identifier', 'Fast', ['openai/gpt-4.1-mini']],
    ['a slash in the identifier', 'a/b', ['openai/gpt-4.1-mini']],
    ['an empty identifier', '', ['openai/gpt-4.1-mini']],
    ['a bare model id', 'fast', ['gpt-4.1-mini']],
    ['a profile inside a profile', 'fast', ['profile/other']],
    ['sluice/auto', 'fast', ['sluice/auto']],
    ['a character SPEC refuses', 'fast', ['openai/gpt 4']],
    ['a model twice', 'fast', ['openai/gpt-4.1-mini', 'openai/gpt-4.1-mini']],
    ['no models', 'fast', []],
  ])('refuses %s', async (_what, identifier, models) => {
    await expect(createProfile(ctx, { workspaceId, identifier, models })).rejects.toBeInstanceOf(ValidationError);
  });

  it('creates, reorders, defaults and deletes a profile', async () => {
    const models = ['openai/gpt-4.1-mini', 'groq/openai/gpt-oss-120b', 'anthropic/claude-3-5-haiku-20241022'];
    await expect(createProfile(ctx, { workspaceId, identifier: 'fast.v1', models })).resolves.toEqual({
      identifier: 'fast.v1',
      slug: 'profile/fast.v1',
      models,
    });
    await expect(createProfile(ctx, { workspaceId, identifier: 'fast.v1', models })).rejects.toBeInstanceOf(ProfileExistsError);

    const reordered = [models[2], models[0], models[1]] as string[];
    await expect(reorderProfile(ctx, { workspaceId, identifier: 'fast.v1', models: reordered })).resolves.toEqual({ identifier: 'fast.v1', models: reordered });
    await expect(reorderProfile(ctx, { workspaceId, identifier: 'fast.v1', models: models.slice(0, 2) })).rejects.toThrow(/exactly the profile's models/);
    await expect(reorderProfile(ctx, { workspaceId, identifier: 'nope', models })).rejects.toBeInstanceOf(ProfileNotFoundError);

    await expect(setDefaultProfile(ctx, { workspaceId, identifier: 'missing' })).rejects.toBeInstanceOf(ProfileNotFoundError);
    await setDefaultProfile(ctx, { workspaceId, identifier: 'fast.v1' });
    expect(await listProfiles(ctx, { workspaceId })).toEqual([{ identifier: 'fast.v1', slug: 'profile/fast.v1', models: reordered, isDefault: true }]);
    await expect(deleteProfile(ctx, { workspaceId, identifier: 'fast.v1' })).rejects.toBeInstanceOf(ProfileInUseError);

    await setDefaultProfile(ctx, { workspaceId, identifier: null });
    await deleteProfile(ctx, { workspaceId, identifier: 'fast.v1' });
    expect(await listProfiles(ctx, { workspaceId })).toEqual([]);
    await expect(deleteProfile(ctx, { workspaceId, identifier: 'fast.v1' })).rejects.toBeInstanceOf(ProfileNotFoundError);
  });

  it('refuses a profile for a workspace that does not exist', async () => {
    await expect(createProfile(ctx, { workspaceId: 'ws_void', identifier: 'x', models: ['openai/gpt-4o'] })).rejects.toBeInstanceOf(
      WorkspaceNotFoundError,
    );
  });
});

describe('catalog import', () => {
  // Its own tables: the import prunes, and other tests must not see a half catalog.
  let c: TestTables;
  let cctx: AdminContext;
  beforeAll(async () => {
    c = await testTables();
    cctx = { doc: c.doc, tablePrefix: c.prefix, stage: 'local' };
  });
  afterAll(() => c.client.destroy());

  async function catalogItems(): Promise<Record<string, unknown>[]> {
    const out = await c.doc.send(new ScanCommand({ TableName: `${c.prefix}catalog`, ConsistentRead: true }));
    return (out.Items ?? []).sort((a, b) => String(a['pk']).localeCompare(String(b['pk'])));
  }

  it('imports the shipped files, reads back what was written, and is idempotent', async () => {
    const files = loadCatalogFiles();
    await expect(importCatalog(cctx)).resolves.toEqual({
      providers: files.providers.length,
      models: files.models.length,
      unlisted: { providers: [], models: [] },
      pruned: false,
      removedProviders: 0,
      removedModels: 0,
    });
    const first = await catalogItems();
    expect(first.find((i) => i['pk'] === 'MODEL#groq/openai/gpt-oss-120b')).toMatchObject({ kind: 'model', data: { providerModelId: 'openai/gpt-oss-120b' } });
    const read = await readCatalog(cctx);
    expect(read.models).toEqual([...files.models].sort((a, b) => a.id.localeCompare(b.id)));
    expect(read.providers).toEqual([...files.providers].sort((a, b) => a.name.localeCompare(b.name)));

    await importCatalog(cctx);
    expect(await catalogItems()).toEqual(first);
  });

  it('keeps what the files no longer list, naming it; prunes it only when asked', async () => {
    await importCatalog(cctx);
    const dir = scratch('sluice-catalog-');
    const providers = loadCatalogFiles().providers.filter((p) => p.name !== 'xai');
    const models = loadCatalogFiles().models.filter((m) => m.provider !== 'xai' && m.id !== 'openai/gpt-4o');
    writeFileSync(join(dir, 'providers.json'), JSON.stringify(providers));
    writeFileSync(join(dir, 'catalog.json'), JSON.stringify(models));
    const files = { providersFile: join(dir, 'providers.json'), catalogFile: join(dir, 'catalog.json') };
    const before = await catalogItems();
    const kept = await importCatalog(cctx, files);
    const xaiModels = loadCatalogFiles().models.filter((m) => m.provider === 'xai').map((m) => m.id);
    expect(kept).toMatchObject({ pruned: false, removedProviders: 0, removedModels: 0 });
    expect(kept.unlisted).toEqual({ providers: ['xai'], models: ['openai/gpt-4o', ...xaiModels].sort() });
    expect(await catalogItems()).toEqual(before);

    const out = await importCatalog(cctx, files, { prune: true });
    expect(out.unlisted).toEqual(kept.unlisted);
    expect(out.pruned).toBe(true);
    expect(out.removedProviders).toBe(1);
    expect(out.removedModels).toBe(loadCatalogFiles().models.filter((m) => m.provider === 'xai').length + 1);
    const pks = (await catalogItems()).map((i) => i['pk']);
    expect(pks).not.toContain('PROVIDER#xai');
    expect(pks).not.toContain('MODEL#openai/gpt-4o');
    expect(pks).toContain('MODEL#openai/gpt-4o-mini');
    expect(pks).toHaveLength(providers.length + models.length);
  });

  it('writes nothing when any entry is invalid, and names the entry', async () => {
    await importCatalog(cctx);
    const before = await catalogItems();
    const dir = scratch('sluice-catalog-');
    const models = loadCatalogFiles().models.map((m) => (m.id === 'openai/gpt-4.1' ? { ...m, inputRateThousandths: 1.5 } : m));
    writeFileSync(join(dir, 'catalog.json'), JSON.stringify(models.slice(0, 5)));
    const attempt = importCatalog(cctx, { catalogFile: join(dir, 'catalog.json') });
    await expect(attempt).rejects.toBeInstanceOf(CatalogValidationError);
    await expect(importCatalog(cctx, { catalogFile: join(dir, 'catalog.json') })).rejects.toThrow(
      /catalog\.json entry 3 \(openai\/gpt-4\.1\): inputRateThousandths/,
    );
    await expect(importCatalog(cctx, { catalogFile: resolve(dir, 'missing.json') })).rejects.toThrow(/cannot read/);
    expect(await catalogItems()).toEqual(before);
  });
});
