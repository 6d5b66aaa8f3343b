/**
 * The configuration home moved while the home region is lost (issue 23; docs/regions.md,
 * "Configuration" and "A region lost"): two DynamoDB Locals joined by the local replicator, every
 * table replicated as a deployed stage's are, and each region's own management API (the loopback
 * server `npm start` runs, over that region's DynamoDB Local) driven by the `sluice` CLI in this
 * process. "Losing" the home region is replication from and to it held back (the replicator's lag
 * set to an hour) and its management API not used: the other region has to serve alone.
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { DynamoDirectory } from '../../lambdas/adapters/dynamo-directory';
import { MICROS_PER_MINOR } from '../../lambdas/core/money-format';
import { authenticate } from '../../lambdas/gateway/authenticate';
import type { GatewayDeps, RequestContext } from '../../lambdas/gateway/ports';
import type { AdminDeps } from '../../lambdas/admin/app';
import { DynamoBalancePort } from '../../lambdas/store/balance-port';
import { CONFIG_HOME_KEY, DynamoConfigHome } from '../../lambdas/store/config-home';
import type { AdminContext } from '../../lambdas/store/directory-context';
import { readRegionalBalance } from '../../lambdas/store/regions-balance';
import { asRegion, type RegionSetup } from '../../lambdas/store/regions';
import { RegionalLedger } from '../../lambdas/store/regions-ledger';
import { requestsTagged, settlement } from '../support/ledger-fixtures';
import { ensureAdminToken, serveAdmin, type AdminServer } from '../../local/admin-server';
import { run } from '../../cli/main';
import { HOME, WEST, startTwoRegions, type TwoRegions, type TwoRegionsRegion } from '../support/two-regions';
import { scratchDirs } from '../support/scratch';

const scratch = scratchDirs();

jest.setTimeout(300_000);

const SETUP: RegionSetup = { regions: [HOME, WEST], region: HOME, weights: [1, 1], transferWaitMs: 0 };
const MINOR = MICROS_PER_MINOR;
const request = requestsTagged('ch');

type Region = TwoRegionsRegion<{ name: string }>;

let fx: TwoRegions<{ name: string }>;
/** Added to every management API's clock: moves it past the configuration home's 5 s cache without waiting. */
let skew = 0;
const servers = new Map<string, { server: AdminServer; deps: AdminDeps }>();
let stateDir: string;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function depsOf(r: Region): AdminDeps {
  const setup = asRegion(SETUP, r.name);
  const ctx: AdminContext = { doc: r.doc, tablePrefix: fx.prefix, stage: 'local', regions: setup, now: () => Date.now() + skew };
  return { ctx, balance: new DynamoBalancePort(ctx), configHome: new DynamoConfigHome(ctx, setup) };
}

const urlOf = (r: Region): string => servers.get(r.name)?.server.url ?? '';

/** `sluice … --json` in this process, against `r`'s management API. */
async function sluice(r: Region, args: readonly string[]): Promise<{ code: number; json: Record<string, unknown>; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const stdin = new PassThrough();
  stdin.end();
  const code = await run([...args, '--endpoint', urlOf(r), '--json'], {
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: (t: string) => (stderr += t) },
    stdin,
    env: { ...process.env, SLUICE_LOCAL_STATE: join(stateDir, 'local.json'), SLUICE_ADMIN_URL: '' },
  });
  return { code, json: JSON.parse(stdout === '' ? '{}' : stdout) as Record<string, unknown>, stderr };
}

async function expectOk(r: Region, args: readonly string[]): Promise<Record<string, unknown>> {
  const out = await sluice(r, args);
  if (out.code !== 0) throw new Error(`sluice ${args.join(' ')} in ${r.name} exited ${out.code}: ${out.stderr}`);
  return out.json;
}

async function expectRefused(r: Region, args: readonly string[], code: string): Promise<string> {
  const out = await sluice(r, args);
  expect([args.join(' '), r.name, out.code, (out.json.error as { code?: string } | undefined)?.code]).toEqual([args.join(' '), r.name, 1, code]);
  expect(out.stderr.trimEnd().split('\n')).toHaveLength(1);
  return out.stderr;
}

/** Waits until `r`'s replica of the workspaces table names `region` as the configuration home. */
async function homeReplicatedTo(r: Region, region: string): Promise<void> {
  for (const until = Date.now() + 60_000; Date.now() < until; await sleep(100)) {
    const got = await r.doc.send(new GetCommand({ TableName: fx.t('workspaces'), Key: CONFIG_HOME_KEY, ConsistentRead: true }));
    if (got.Item?.region === region) return;
  }
  throw new Error(`the move to ${region} never reached ${r.name}`);
}

/** The gateway's own check of a key (`authenticate`), in `r`, reading its replica with no cache. */
async function gatewayAccepts(r: Region, rawKey: string): Promise<boolean> {
  const dir = new DynamoDirectory(r.wire, { keys: fx.t('keys'), workspaces: fx.t('workspaces') }, 0);
  const ctx = { deps: { keys: dir, workspaces: dir, clock: Date.now } as unknown as GatewayDeps, requestId: 'req_t', traceId: 't', startedAt: Date.now(), sink: undefined as never } satisfies RequestContext;
  try {
    await authenticate(ctx, `Bearer ${rawKey}`);
    return true;
  } catch (err) {
    expect((err as { code?: string }).code).toBe('invalid_api_key');
    return false;
  }
}

beforeAll(async () => {
  fx = await startTwoRegions({ tag: 'ch', setup: SETUP, lagMs: 100, everyTable: true, extra: (name) => ({ name }) });
  stateDir = scratch('sluice-config-home-');
  const { token } = await ensureAdminToken(join(stateDir, 'admin-token'));
  for (const r of [fx.east, fx.west]) {
    const deps = depsOf(r);
    servers.set(r.name, { server: await serveAdmin({ deps, token, port: 0 }), deps });
  }
  // The CLI's local stage file names the home's management API; --endpoint picks a region's.
  writeFileSync(join(stateDir, 'local.json'), JSON.stringify({ adminUrl: urlOf(fx.east), adminTokenFile: join(stateDir, 'admin-token') }));
});

afterAll(async () => {
  for (const { server } of servers.values()) await server.close();
  await fx?.stop();
});

describe('the configuration home moved while the home region is lost', () => {
  it('the other region refuses changes, takes the move, then revokes, tops up in its own slices; the old home follows after replication', async () => {
    const { east, west } = fx;
    // Before the loss: a workspace, a key and a top-up, made in the home, replicated.
    const created = await expectOk(east, ['workspace', 'create', '--name', 'Acme']);
    const ws = String(created.workspaceId);
    const key = await expectOk(east, ['key', 'create', '-w', ws, '--name', 'svc']);
    const rawKey = String(key.rawKey);
    await expectOk(east, ['credit', 'add', '--minor-units', '1000', '-w', ws, '--reference', 'INV-1']);
    await fx.caughtUp();
    for (let until = Date.now() + 60_000; !(await gatewayAccepts(west, rawKey)); await sleep(100)) if (Date.now() > until) throw new Error('the key never reached the west');

    // The home region is lost: nothing replicates from or to it, and its API is not used.
    fx.replicator.setLag(3_600_000);

    // The west refuses a change, naming the home and what to run.
    const said = await expectRefused(west, ['key', 'revoke', '-w', ws, '--key', String(key.keyId)], 'configuration_home_elsewhere');
    expect(said).toContain('the configuration home is us-east-1');
    expect(said).toContain('sluice stage config-home <region>');
    // A move is recorded by its target only, and only to one of the stage's regions.
    expect(await expectRefused(east, ['stage', 'config-home', WEST], 'invalid_argument')).toContain(`recorded by ${WEST}'s own management API`);
    expect(await expectRefused(west, ['stage', 'config-home', 'eu-west-1'], 'invalid_argument')).toContain("not one of the stage's regions");

    // The move, sent to the west's own management API.
    const moved = await expectOk(west, ['stage', 'config-home', WEST]);
    expect(moved).toMatchObject({ moved: true, configurationHome: WEST, previous: HOME, region: WEST, acceptsChanges: true, move: { region: WEST, generation: 1, by: 'local' } });

    // Changes are accepted there now: the leaked key revoked, a top-up.
    await expectOk(west, ['key', 'revoke', '-w', ws, '--key', String(key.keyId)]);
    const topUp = await expectOk(west, ['credit', 'add', '--minor-units', '500', '-w', ws, '--reference', 'INV-2']);
    expect(topUp).toMatchObject({ applied: true });
    // The same reference again changes nothing (its marker is the configuration home's, under the workspace's key).
    expect(await expectOk(west, ['credit', 'add', '--minor-units', '500', '-w', ws, '--reference', 'INV-2'])).toMatchObject({ applied: false });
    // The west's gateway refuses the revoked key at once; the lost home has not heard.
    expect(await gatewayAccepts(west, rawKey)).toBe(false);
    expect(await gatewayAccepts(east, rawKey)).toBe(true);

    // The top-up landed in the west's own slices; the home region's slice 0 was not written by the west.
    const westView = await readRegionalBalance(west.doc, fx.tables(), SETUP, ws);
    expect(westView.regions.map((r) => [r.region, r.creditedMicros, r.availableMicros])).toEqual([
      [HOME, 1000 * MINOR, 1000 * MINOR],
      [WEST, 500 * MINOR, 500 * MINOR],
    ]);
    // Spendable there at once, from the west's own slices alone (a ledger that never asks the lost home).
    const ledger = new RegionalLedger(west.raw, fx.tables(), { ...asRegion(SETUP, WEST), transferWaitMs: 0 });
    const admitted = await ledger.admit(request(ws, 400 * MINOR));
    if (!admitted.admitted) throw new Error(`the west refused what its own slices hold: ${admitted.refusal.kind}`);
    expect(await ledger.settle(admitted.hold, settlement(300 * MINOR))).toBe(true);
    const homeSlice = await west.doc.send(new GetCommand({ TableName: fx.t('ledger'), Key: { pk: `WS#${ws}`, sk: 'BALANCE' }, ConsistentRead: true }));
    const eastSlice = await east.doc.send(new GetCommand({ TableName: fx.t('ledger'), Key: { pk: `WS#${ws}`, sk: 'BALANCE' }, ConsistentRead: true }));
    expect(homeSlice.Item).toEqual(eastSlice.Item);
    // What an operator (`workspace show`) and the console read: each region's part, the lost home's stranded there.
    const shown = await expectOk(west, ['workspace', 'show', '-w', ws]);
    expect((shown.regions as { region: string; available: { micros: number }; held: { micros: number } }[]).map((r) => [r.region, r.available.micros, r.held.micros])).toEqual([
      [HOME, 1000 * MINOR, 0],
      [WEST, 200 * MINOR, 0],
    ]);
    expect(shown.balance).toMatchObject({ available: { micros: 1200 * MINOR } });
    // The statement lists both top-ups, read in the west.
    const history = await expectOk(west, ['credit', 'history', '-w', ws]);
    expect((history.entries as { reference: string }[]).map((e) => e.reference).sort()).toEqual(['INV-1', 'INV-2']);

    // Changes that write the home region's items are refused, not written from the west.
    const key2 = await expectOk(west, ['key', 'create', '-w', ws, '--name', 'replacement']);
    expect(await expectRefused(west, ['key', 'limit', '300', '--minor-units', '-w', ws, '--key', String(key2.keyId)], 'home_region_required')).toContain('only us-east-1 writes');
    const member = await expectOk(west, ['member', 'add', '-w', ws]);
    expect(await expectRefused(west, ['member', 'limit', '-w', ws, '--member', String(member.memberId), '--minor-units', '--monthly', '300'], 'home_region_required')).toContain('only us-east-1 writes');
    // A limit refused is not half made: the key's record has none.
    expect(await expectOk(west, ['key', 'show', '-w', ws, '--key', String(key2.keyId)])).toMatchObject({ creditLimit: null, window: null });
    expect(await expectRefused(west, ['workspace', 'slices', '-w', ws, '--set', '2'], 'home_region_required')).toContain('sluice stage config-home us-east-1');

    // The move is audited in the stage's trail: who, what, no secret.
    const audit = await expectOk(west, ['audit', 'list', '-w', 'catalog']);
    expect((audit.entries as { action: string; who: string; summary: unknown }[]).find((e) => e.action === 'stage.config-home')).toMatchObject({
      who: 'local',
      summary: { region: WEST, previous: HOME, generation: 1 },
    });

    // Until the move reaches it, the old home still believes it is the home (the window the docs bound).
    expect(await expectOk(east, ['stage', 'config-home'])).toMatchObject({ configurationHome: HOME, acceptsChanges: true });

    // The home region returns: replication catches up both ways.
    fx.replicator.setLag(100);
    await homeReplicatedTo(east, WEST);
    await fx.caughtUp();
    skew += 6_000; // past the old home's 5 s cache
    const eastSays = await expectRefused(east, ['workspace', 'pause', '-w', ws], 'configuration_home_elsewhere');
    expect(eastSays).toContain('the configuration home is us-west-2');
    expect(await expectOk(east, ['stage', 'config-home'])).toMatchObject({ configurationHome: WEST, acceptsChanges: false, move: { region: WEST, generation: 1 } });
    // The revocation reached the old home's gateway.
    for (let until = Date.now() + 60_000; await gatewayAccepts(east, rawKey); await sleep(100)) if (Date.now() > until) throw new Error('the revocation never reached the east');
    // Every credit once, summed over regions, equal in both replicas.
    await fx.expectInvariant(ws, 1500 * MINOR);

    // Moved back deliberately once the home is healthy: the home accepts changes again, its top-up in its own slices.
    expect(await expectOk(east, ['stage', 'config-home', HOME])).toMatchObject({ configurationHome: HOME, previous: WEST, move: { generation: 2 } });
    await expectOk(east, ['credit', 'add', '--minor-units', '250', '-w', ws]);
    await homeReplicatedTo(west, HOME);
    skew += 6_000;
    expect(await expectRefused(west, ['workspace', 'pause', '-w', ws], 'configuration_home_elsewhere')).toContain('the configuration home is us-east-1');
    await fx.expectInvariant(ws, 1750 * MINOR);
    const after = await readRegionalBalance(east.doc, fx.tables(), SETUP, ws);
    expect(after.regions.map((r) => [r.region, r.creditedMicros])).toEqual([
      [HOME, 1250 * MINOR],
      [WEST, 500 * MINOR],
    ]);
  });
});
