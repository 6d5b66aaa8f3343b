/**
 * The `sluice` CLI end to end: `node bin/sluice.js … --json` as a child process against the
 * local management API over DynamoDB Local, through a `.sluice/local.json`-style state file of
 * its own (SLUICE_LOCAL_STATE) so the developer's real local stage is never touched.
 */
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { spawn } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { hashKey } from '../../lambdas/core/api-key';
import { formatMoney } from '../../lambdas/core/money-format';
import { startTestAdmin, type TestAdmin } from '../support/admin';
import { testTables, type TestTables } from '../support/dynamo';

jest.setTimeout(120_000);

const BIN = resolve(__dirname, '../../bin/sluice.js');

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

let t: TestTables;
let admin: TestAdmin;
let dir: string;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  t = await testTables();
  admin = await startTestAdmin(t);
  dir = admin.dir;
  env = admin.env;
});

afterAll(async () => {
  await admin.close();
  t.client.destroy();
});

function sluice(args: readonly string[], opts: { input?: string; env?: NodeJS.ProcessEnv } = {}): Promise<Run> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: opts.env ?? env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolvePromise({ code, stdout, stderr }));
    child.stdin.end(opts.input ?? '');
  });
}

/** Runs with `--json`, expects success, and returns the parsed stdout. */
async function ok<T = Record<string, unknown>>(args: readonly string[], input?: string): Promise<T> {
  const run = await sluice([...args, '--json'], input === undefined ? {} : { input });
  if (run.code !== 0) throw new Error(`sluice ${args.join(' ')} exited ${String(run.code)}: ${run.stderr}`);
  return JSON.parse(run.stdout) as T;
}

/** Runs with `--json`, expects exit 1, and returns the error code and the stderr line. */
async function refused(args: readonly string[]): Promise<{ code: string; stderr: string }> {
  const run = await sluice([...args, '--json']);
  expect(run.code).toBe(1);
  // One line on stderr, whatever went wrong.
  expect(run.stderr.trimEnd().split('\n')).toHaveLength(1);
  const parsed = JSON.parse(run.stdout) as { error: { code: string } };
  return { code: parsed.error.code, stderr: run.stderr };
}

describe('sluice CLI', () => {
  let workspaceId: string;
  let ownerMemberId: string;

  it('imports the catalog and creates a workspace with credit', async () => {
    const imported = await ok<{ providers: number; models: number }>(['catalog', 'import']);
    expect(imported.providers).toBeGreaterThanOrEqual(8);
    expect(imported.models).toBeGreaterThanOrEqual(30);

    ({ workspaceId, ownerMemberId } = await ok<{ workspaceId: string; ownerMemberId: string }>([
      'workspace',
      'create',
      '--name',
      'Acme Ltd',
      '--owner-email',
      'o@acme.test',
    ]));
    expect(workspaceId).toMatch(/^ws_/);
    await expect(ok(['credit', 'add', '250', '--minor-units', '-w', workspaceId])).resolves.toMatchObject({
      applied: true,
      balance: { availableMicros: 250_000_000 },
    });
    const shown = await ok<{ balance: { available: { minor: string } }; members: { memberId: string }[] }>(['workspace', 'show', '-w', workspaceId]);
    expect(shown.balance.available.minor).toBe('250.000000');
    expect(shown.members[0]?.memberId).toBe(ownerMemberId);
  });

  it('mints a key shown once, lists it by visible part only, and limits it', async () => {
    const key = await ok<{ rawKey: string; keyId: string; visible: string; warning: string }>([
      'key',
      'create',
      '-w',
      workspaceId,
      '--name',
      'ci',
      '--expires',
      '2099-12-31T00:00:00Z',
    ]);
    expect(key.rawKey).toMatch(/^slc_dev_[A-Za-z0-9_-]{43}$/);
    expect(key.warning).toMatch(/shown once/);

    const listed = await sluice(['key', 'list', '-w', workspaceId, '--json']);
    expect(listed.code).toBe(0);
    expect(listed.stdout).not.toContain(key.rawKey);
    expect(listed.stdout).not.toContain(hashKey(key.rawKey));
    const { keys } = JSON.parse(listed.stdout) as { keys: { keyId: string; visible: string; expiresAt: string }[] };
    expect(keys).toEqual([expect.objectContaining({ keyId: key.keyId, visible: key.visible, expiresAt: '2099-12-31T00:00:00.000Z' })]);

    const stored = (await t.doc.send(new ScanCommand({ TableName: `${t.prefix}keys` }))).Items ?? [];
    expect(JSON.stringify(stored)).not.toContain(key.rawKey);
    expect(stored[0]?.['keyHash']).toBe(hashKey(key.rawKey));

    // The visible part typed with three dots names the key.
    await expect(ok(['key', 'limit', '300', '--minor-units', '-w', workspaceId, '--key', key.visible.replace('…', '...'), '--window', 'weekly'])).resolves.toEqual({
      keyId: key.keyId,
      creditLimitMicros: 300_000_000,
      window: 'weekly',
    });
    await expect(ok(['key', 'limit', '--clear', '-w', workspaceId, '--key', key.keyId])).resolves.toMatchObject({ creditLimitMicros: null });
    expect((await refused(['key', 'limit', '5', '-w', workspaceId, '--key', key.keyId, '--window', 'hourly'])).code).toBe('invalid_argument');
    await expect(ok(['key', 'expiry', '--clear', '-w', workspaceId, '--key', key.keyId])).resolves.toEqual({ keyId: key.keyId, expiresAt: null });
  });

  it('prints the raw key alone on stdout and the warning on stderr in human mode', async () => {
    const run = await sluice(['key', 'create', '-w', workspaceId]);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^slc_dev_[A-Za-z0-9_-]{43}\n$/);
    expect(run.stderr).toMatch(/shown once and never again/);
  });

  it('applies the spend rate cap rules with one-line refusals', async () => {
    const zero = await refused(['workspace', 'spend-cap', '0', '--minor-units', '-w', workspaceId]);
    expect(zero.code).toBe('spend_cap_refused');
    expect(zero.stderr).toMatch(/^sluice: .*pause/);
    expect((await refused(['workspace', 'spend-cap', '99', '--minor-units', '-w', workspaceId])).code).toBe('spend_cap_refused');
    await expect(ok(['workspace', 'spend-cap', '100', '--minor-units', '-w', workspaceId])).resolves.toMatchObject({ spendRateCapMinor: 100 });
    expect((await refused(['workspace', 'spend-cap', '1000001', '--minor-units', '-w', workspaceId])).stderr).toMatch(/--force/);
    await expect(ok(['workspace', 'spend-cap', '1000001', '--minor-units', '-w', workspaceId, '--force'])).resolves.toMatchObject({ spendRateCapMinor: 1_000_001 });
    expect((await refused(['workspace', 'spend-cap', '1e3', '-w', workspaceId])).code).toBe('invalid_argument');
    expect((await refused(['workspace', 'spend-cap', '1e3', '--minor-units', '-w', workspaceId])).code).toBe('invalid_argument');
  });

  it('manages limits, pause, permitted models, profiles and the default route', async () => {
    await expect(ok(['workspace', 'limit', '--monthly', '9000', '--minor-units', '-w', workspaceId])).resolves.toEqual({ monthlyLimitMicros: 9_000_000_000 });
    await expect(ok(['workspace', 'pause', '-w', workspaceId])).resolves.toEqual({ paused: true });
    await expect(ok(['workspace', 'resume', '-w', workspaceId])).resolves.toEqual({ paused: false });
    await expect(ok(['workspace', 'permit', 'openai/gpt-4.1-mini', 'local/org/sim-nested', '-w', workspaceId])).resolves.toEqual({
      permittedModels: ['openai/gpt-4.1-mini', 'local/org/sim-nested'],
    });
    await expect(ok(['workspace', 'permit', '--clear', '-w', workspaceId])).resolves.toEqual({ permittedModels: null });
    expect((await refused(['workspace', 'permit', 'gpt-4o', '-w', workspaceId])).code).toBe('invalid_argument');

    await ok(['profile', 'create', 'fast', 'local/sim-small', 'local/sim-large', '-w', workspaceId]);
    await expect(ok(['profile', 'reorder', 'fast', 'local/sim-large', 'local/sim-small', '-w', workspaceId])).resolves.toEqual({
      identifier: 'fast',
      models: ['local/sim-large', 'local/sim-small'],
    });
    await expect(ok(['workspace', 'default-route', 'fast', '-w', workspaceId])).resolves.toEqual({ defaultProfile: 'fast' });
    expect((await refused(['profile', 'delete', 'fast', '-w', workspaceId])).code).toBe('profile_in_use');
    await expect(ok(['profile', 'list', '-w', workspaceId])).resolves.toEqual({
      profiles: [{ identifier: 'fast', slug: 'profile/fast', models: ['local/sim-large', 'local/sim-small'], isDefault: true }],
    });
    await ok(['workspace', 'default-route', '--clear', '-w', workspaceId]);
    await expect(ok(['profile', 'delete', 'fast', '-w', workspaceId])).resolves.toEqual({ identifier: 'fast' });
  });

  it('adds and removes a member, revoking their keys', async () => {
    const { memberId } = await ok<{ memberId: string }>(['member', 'add', '-w', workspaceId, '--email', 'dev@acme.test']);
    await expect(ok(['member', 'limit', '-w', workspaceId, '--member', memberId, '--monthly', '40', '--minor-units'])).resolves.toEqual({
      memberId,
      monthlyLimitMicros: 40_000_000,
    });
    const { keyId } = await ok<{ keyId: string }>(['key', 'create', '-w', workspaceId, '--member', memberId]);
    await expect(ok(['member', 'remove', '-w', workspaceId, '--member', memberId, '--revoke-keys'])).resolves.toEqual({
      memberId,
      revokedKeyIds: [keyId],
      keptKeyIds: [],
    });
    expect((await refused(['member', 'remove', '-w', workspaceId, '--member', ownerMemberId])).code).toBe('owner_not_removable');
  });

  it('stores a BYOK key read from stdin in a 0600 file, never from argv', async () => {
    const secretsFile = join(dir, 'secrets.json');
    const run = await sluice(['byok', 'set', 'openai', '-w', workspaceId, '--key-stdin', '--json'], { input: 'sk-test-from-stdin\n' });
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual({ provider: 'openai', secretName: `sluice/local/byok/${workspaceId}/openai` });
    expect(run.stdout + run.stderr).not.toContain('sk-test-from-stdin');
    // The management API keeps local BYOK keys in its secret file (beside the state file here).
    expect(statSync(secretsFile).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(secretsFile, 'utf8'))).toEqual({ [`sluice/local/byok/${workspaceId}/openai`]: 'sk-test-from-stdin' });
    // A key on the command line is not an option at all.
    expect((await refused(['byok', 'set', 'openai', '-w', workspaceId, '--key', 'sk-leak'])).code).toBe('usage');
    await expect(ok(['byok', 'remove', 'openai', '-w', workspaceId])).resolves.toMatchObject({ provider: 'openai' });
    expect(JSON.parse(readFileSync(secretsFile, 'utf8'))).toEqual({});
  });

  it('fails with one line and exit 1 on usage errors and unknown workspaces', async () => {
    expect((await refused(['key', 'list'])).stderr).toMatch(/--workspace is required/);
    expect((await refused(['key', 'list', '-w', 'ws_nope'])).code).toBe('workspace_not_found');
    expect((await refused(['key', 'create', '-w', workspaceId, '--bogus'])).code).toBe('usage');
    expect((await refused(['nothing', 'here'])).code).toBe('usage');
    expect((await refused(['credit', 'add', '-w', workspaceId])).code).toBe('invalid_argument');
    const help = await sluice(['key', 'limit', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/usage: sluice key limit/);
  });

  it('prints money in refusals as USD, never micro-units, while --json keeps exact integers', async () => {
    await ok(['credit', 'add', '12.34', '-w', workspaceId, '--reference', 'INV-USD-1']);
    const reused = await refused(['credit', 'add', '20', '-w', workspaceId, '--reference', 'INV-USD-1']);
    expect(reused.code).toBe('reference_used');
    expect(reused.stderr).toMatch(/^sluice: reference INV-USD-1 already credited USD 12\.34 on \d{4}-\d\d-\d\dT[\d:.]+Z; a reference credits once\n$/);
    const shown = await ok<{ balance: { available: { micros: number } } }>(['workspace', 'show', '-w', workspaceId]);
    const below = await refused(['credit', 'adjust', '-5000', '-w', workspaceId, '--reason', 'too much']);
    expect(below.code).toBe('below_held');
    expect(below.stderr).toMatch(/^sluice: an adjustment of USD -5000\.00 would take the balance below what is held: available USD \d+\.\d{2,8}, held USD 0\.00\n$/);
    expect(below.stderr).toContain(`available ${formatMoney(shown.balance.available.micros)}`);
    const cap = await refused(['workspace', 'spend-cap', '0.99', '-w', workspaceId]);
    expect(cap.stderr).toMatch(/at least USD 1\.00 per 60 seconds, got USD 0\.99/);
    for (const r of [reused, below, cap]) expect(r.stderr).not.toMatch(/micro|minor unit/);
    // The same refusal with --json: the code to branch on; the answers of changes keep integers.
    await expect(ok(['credit', 'add', '12.34', '-w', workspaceId, '--reference', 'INV-USD-1'])).resolves.toMatchObject({ applied: false, entry: { amountMicros: 1_234_000_000 } });
  });

  it('names the option or the input at fault, never the management API\'s body fields', async () => {
    const cases: [string[], string, RegExp][] = [
      [['credit', 'add', '0', '-w', workspaceId], '', /^sluice: the credit must be more than USD 0\.00 \(e\.g\. 20\.50, or --minor-units 2050\)\n$/],
      [['credit', 'add', '--minor-units', '0', '-w', workspaceId], '', /the credit must be more than USD 0\.00/],
      [['credit', 'adjust', '0', '-w', workspaceId, '--reason', 'x'], '', /^sluice: the adjustment cannot be USD 0\.00: give a signed amount/],
      [['workspace', 'low-credit', '-w', workspaceId, '--threshold', '0'], '', /^sluice: --threshold must be more than USD 0\.00; --clear stops the notice\n$/],
      [['byok', 'set', 'openai', '-w', workspaceId], '', /^sluice: no key was read from stdin: pipe it in \(`pass show openai \| sluice byok set openai -w ws_\w+`\) or type it at the prompt\n$/],
      [['byok', 'set', 'openai', '-w', workspaceId], '  \n', /no key was read from stdin/],
      [['provider', 'add', 'nokey', '--base-url', 'https://nokey.example/v1'], '', /no key was read from stdin/],
      [['audit', 'list', '-w', workspaceId, '--limit', '0'], '', /^sluice: --limit is a whole number from 1 to 1000; got "0"\n$/],
      [['credit', 'history', '-w', workspaceId, '--limit', '5000'], '', /--limit is a whole number from 1 to 1000/],
      [['audit', 'list', '--day', '2026-1-1'], '', /^sluice: --day is a UTC date, yyyy-mm-dd/],
      [['key', 'limit', '5', '-w', workspaceId, '--key', 'key_0', '--window', 'hourly'], '', /^sluice: --window is daily, weekly, monthly, never; got "hourly"\n$/],
      [['member', 'invite', '-w', workspaceId, '--email', 'late@acme.test', '--hours', '0'], '', /^sluice: an invitation lasts 1 to 720 hours, not 0\n$/],
    ];
    for (const [args, input, message] of cases) {
      const run = await sluice([...args, '--json'], { input });
      expect({ args, code: run.code }).toEqual({ args, code: 1 });
      expect({ args, stderr: run.stderr }).toEqual({ args, stderr: expect.stringMatching(message) });
      expect(run.stderr).not.toMatch(/amountMinor|apiKey|expiresInHours|memberId|baseUrl\b/);
    }
  });

  it('prints in --json the audit and usage fields an operator uses, not the store\'s keys', async () => {
    const trail = await ok<{ entries: Record<string, unknown>[] }>(['audit', 'list', '-w', workspaceId, '--limit', '5']);
    expect(trail.entries.length).toBeGreaterThan(0);
    for (const e of trail.entries) {
      expect(Object.keys(e).sort()).toEqual(['action', 'at', 'requestId', 'summary', 'who', 'workspaceId']);
      expect(e['at']).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    }
    const csv = await sluice(['audit', 'list', '-w', workspaceId, '--limit', '1', '--csv']);
    expect(csv.stdout.split('\n')[1]).toMatch(/^\d{4}-\d\d-\d\dT[\d:.]+Z,local,/);
  });

  it('takes every option listed under "options for every command", `usage` included', async () => {
    const usage = await sluice(['usage', '-w', workspaceId, '--minor-units', '--json']);
    expect({ code: usage.code, stderr: usage.stderr }).toEqual({ code: 0, stderr: '' });
    expect(JSON.parse(usage.stdout)).toMatchObject({ workspaceId, period: 'day' });
    const row = await sluice(['usage', 'request', 'req_none', '-w', workspaceId, '--minor-units', '--region', 'eu-west-1', '--json']);
    expect((JSON.parse(row.stdout) as { error: { code: string } }).error.code).toBe('usage_not_found');
    expect((await sluice(['usage', '-w', workspaceId, '--minor-units', '--csv'])).code).toBe(0);
  });

  it('ends quietly when the reader of its output goes away (`sluice … | head`), as Unix tools do', async () => {
    // The reader's end closed before the command writes: every write meets EPIPE.
    const run = await new Promise<Run>((done, reject) => {
      const child = spawn(process.execPath, [BIN, 'catalog', 'list', '--json'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      child.stdout.destroy();
      let stderr = '';
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      child.on('error', reject);
      child.on('close', (code) => done({ code, stdout: '', stderr }));
    });
    expect(run).toEqual({ code: 0, stdout: '', stderr: '' });
    // Through a shell pipeline too, with pipefail: head takes the first lines, sluice exits 0.
    const piped = await new Promise<Run>((done, reject) => {
      const sh = spawn('bash', ['-c', `set -o pipefail; "${process.execPath}" "${BIN}" catalog list --csv | head -n 2`], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      sh.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
      sh.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      sh.on('error', reject);
      sh.on('close', (code) => done({ code, stdout, stderr }));
    });
    expect(piped.stderr).toBe('');
    expect(piped.code).toBe(0);
    expect(piped.stdout.split('\n')[0]).toBe('model,status,input rate,output rate,currency,max output');
  });

  it('says a stage of one region has no configuration home to move, and moves nothing', async () => {
    expect(await ok(['stage', 'config-home', 'us-west-2'])).toEqual({ moved: false, reason: expect.stringContaining('nothing to move') });
    const human = await sluice(['stage', 'config-home', 'us-west-2']);
    expect([human.code, human.stdout]).toEqual([0, 'this stage runs in one region: its configuration home is where it runs, and there is nothing to move\n']);
    expect(await ok(['stage', 'config-home'])).toEqual({ regions: null, region: null, stageHome: null, configurationHome: null, acceptsChanges: true, move: null });
    // Nothing recorded, nothing audited.
    const audit = await ok<{ entries: { action: string }[] }>(['audit', 'list', '-w', 'catalog']);
    expect(audit.entries.map((e) => e.action)).not.toContain('stage.config-home');
  });

  it('says to run npm start first when the local stage has no state file', async () => {
    const run = await sluice(['workspace', 'show', '-w', 'ws_x'], { env: { ...env, SLUICE_LOCAL_STATE: join(dir, 'absent.json') } });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/run npm start first/);
  });
});
