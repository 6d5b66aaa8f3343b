/**
 * The configuration home (docs/regions.md, "Configuration"): the pure rule, the management API
 * following the recorded home (a port standing in for the replicated item), the lens keeping the
 * statement's keys, and what the CLI says when a change is sent to the wrong region.
 */
import { CONFIG_HOME_CACHE_MS, cacheFresh, checkMove, configurationHome, nextRecord, type ConfigHomeRecord } from '../../lambdas/core/config-home';
import { armingMarksLive, armingMinutes } from '../../lambdas/core/limit-arming';
import { handleAdmin, CONFIGURATION_HOME_HEADER, type AdminDeps } from '../../lambdas/admin/app';
import type { ConfigHomePort, ConfigHomeView } from '../../lambdas/store/config-home';
import { regionalPk } from '../../lambdas/store/regions-lens';
import { AdminApiError } from '../../cli/api-client';
import { elsewhereMessage } from '../../cli/main';
import { describeConfigHome } from '../../cli/commands/stage';

const REGIONS = ['us-east-1', 'us-west-2', 'eu-west-1'] as const;
const record = (region: string, generation = 1): ConfigHomeRecord => ({ region, generation, at: 1_700_000_000_000, by: 'arn:aws:iam::1:user/op', requestId: 'req_m' });

describe('the configuration home, pure', () => {
  it.each([
    ['no move recorded: the stage home', undefined, 'us-east-1'],
    ['a move recorded', record('us-west-2'), 'us-west-2'],
    ['a move back', record('us-east-1', 2), 'us-east-1'],
    ['a region the stage no longer lists: the stage home', record('ap-south-1'), 'us-east-1'],
  ])('%s', (_name, rec, home) => {
    expect(configurationHome(REGIONS, rec)).toBe(home);
  });

  it('refuses a move on one region, to an unlisted region, or asked of another region than the target', () => {
    expect(checkMove(undefined, undefined, 'us-west-2')?.code).toBe('nothing_to_move');
    expect(checkMove(['us-east-1'], 'us-east-1', 'us-east-1')?.code).toBe('nothing_to_move');
    expect(checkMove(REGIONS, 'us-west-2', 'ap-south-1')).toEqual({ code: 'invalid_argument', message: expect.stringContaining('us-east-1, us-west-2, eu-west-1') });
    expect(checkMove(REGIONS, 'us-east-1', 'us-west-2')).toEqual({ code: 'invalid_argument', message: expect.stringContaining("us-west-2's own management API") });
    expect(checkMove(REGIONS, 'us-west-2', 'us-west-2')).toBeUndefined();
    // Moving to the region that is already the home writes a new generation (settles a split).
    expect(checkMove(REGIONS, 'us-east-1', 'us-east-1')).toBeUndefined();
  });

  it('counts generations from the record read', () => {
    expect(nextRecord(undefined, { region: 'us-west-2', at: 5, by: 'op', requestId: 'r1' })).toEqual({ region: 'us-west-2', generation: 1, at: 5, by: 'op', requestId: 'r1' });
    expect(nextRecord(record('us-west-2', 4), { region: 'us-east-1', at: 6, by: 'op', requestId: 'r2' }).generation).toBe(5);
  });

  it('keeps a read for the cache time, no longer, and never one from the future', () => {
    expect(CONFIG_HOME_CACHE_MS).toBe(5_000);
    expect(cacheFresh(undefined, 0)).toBe(false);
    expect(cacheFresh({ value: 1, readAt: 1000 }, 1000)).toBe(true);
    expect(cacheFresh({ value: 1, readAt: 1000 }, 5999)).toBe(true);
    expect(cacheFresh({ value: 1, readAt: 1000 }, 6000)).toBe(false);
    expect(cacheFresh({ value: 1, readAt: 1000 }, 999)).toBe(false);
  });

  it("says an arming's marks can still refuse until a minute after the last marked minute", () => {
    const trackFrom = Date.UTC(2026, 10, 27, 5, 0, 30);
    const last = Math.max(...armingMinutes(trackFrom));
    expect(armingMarksLive(trackFrom, trackFrom)).toBe(true);
    expect(armingMarksLive(trackFrom, (last + 2) * 60_000 - 1)).toBe(true);
    expect(armingMarksLive(trackFrom, (last + 2) * 60_000)).toBe(false);
  });
});

/** A port standing in for the replicated item, counting reads. */
class FakeHome implements ConfigHomePort {
  reads = 0;
  moves: string[] = [];
  constructor(private rec: ConfigHomeRecord | undefined) {}
  private view(): ConfigHomeView {
    return { home: configurationHome(REGIONS, this.rec), record: this.rec };
  }
  current(): Promise<ConfigHomeView> {
    this.reads += 1;
    return Promise.resolve(this.view());
  }
  read(): Promise<ConfigHomeView> {
    return this.current();
  }
  move(input: { region: string; by: string; requestId: string }): Promise<{ before: ConfigHomeView; after: ConfigHomeView }> {
    const before = this.view();
    this.rec = nextRecord(this.rec, { ...input, at: 7 });
    this.moves.push(input.region);
    return Promise.resolve({ before, after: this.view() });
  }
}

describe('the management API follows the recorded home', () => {
  const sent: string[] = [];
  const doc = { send: async (command: { constructor: { name: string } }) => (sent.push(command.constructor.name), { Items: [] }) };
  const deps = (region: string | undefined, home: FakeHome | undefined): AdminDeps => ({
    ctx: { doc: doc as never, tablePrefix: 'x-', stage: 'prod', ...(region === undefined ? {} : { regions: { regions: REGIONS, region, weights: [1, 1, 1], transferWaitMs: 0 } }) },
    balance: undefined as never,
    ...(home === undefined ? {} : { configHome: home }),
  });
  const call = (d: AdminDeps, method: string, path: string, body?: unknown) =>
    handleAdmin({ method, path: `/admin/v1${path}`, query: {}, body: body === undefined ? undefined : JSON.stringify(body), principal: 'arn:op', requestId: 'req_1' }, d);

  beforeEach(() => {
    sent.length = 0;
  });

  it('refuses a change where the record names another region, naming it in the envelope and a header, before the store', async () => {
    const home = new FakeHome(record('us-west-2'));
    const res = await call(deps('us-east-1', home), 'POST', '/workspaces/ws_1/pause');
    expect(res.status).toBe(409);
    expect(res.headers[CONFIGURATION_HOME_HEADER]).toBe('us-west-2');
    expect(JSON.parse(res.body)).toEqual({ error: { message: expect.stringContaining('configuration home, us-west-2'), type: 'invalid_request_error', param: null, code: 'configuration_home_elsewhere', request_id: 'req_1' } });
    expect(sent).toEqual([]);
    expect(home.reads).toBe(1);
  });

  it('accepts a change in a region the home was moved to, and reads nothing for a GET', async () => {
    const home = new FakeHome(record('us-west-2'));
    const res = await call(deps('us-west-2', home), 'POST', '/workspaces', { name: 'a' });
    expect(res.status).toBe(201);
    expect(sent.length).toBeGreaterThan(0);
    await call(deps('eu-west-1', home), 'GET', '/workspaces');
    expect(home.reads).toBe(1);
  });

  it('takes the move in its target region although it is not the home, audited, and says where the home was', async () => {
    const home = new FakeHome(undefined);
    const res = await call(deps('us-west-2', home), 'PUT', '/stage/config-home', { region: 'us-west-2' });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toMatchObject({ configurationHome: 'us-west-2', previous: 'us-east-1', region: 'us-west-2', stageHome: 'us-east-1', acceptsChanges: true, move: { region: 'us-west-2', generation: 1, by: 'arn:op' } });
    expect(home.moves).toEqual(['us-west-2']);
    // The audit row (one PutCommand on the audit table) is the only store write here: the port wrote the move.
    expect(sent).toEqual(['PutCommand']);
  });

  it('refuses a move asked of another region, to an unlisted one, or on a stage of one region', async () => {
    const home = new FakeHome(undefined);
    const other = await call(deps('us-east-1', home), 'PUT', '/stage/config-home', { region: 'us-west-2' });
    expect([other.status, JSON.parse(other.body).error.code]).toEqual([400, 'invalid_argument']);
    const unlisted = await call(deps('us-west-2', home), 'PUT', '/stage/config-home', { region: 'mars-1' });
    expect([unlisted.status, JSON.parse(unlisted.body).error.code]).toEqual([400, 'invalid_argument']);
    const one = await call(deps(undefined, undefined), 'PUT', '/stage/config-home', { region: 'us-west-2' });
    expect([one.status, JSON.parse(one.body).error.code]).toEqual([409, 'nothing_to_move']);
    expect(home.moves).toEqual([]);
    expect(sent).toEqual([]);
    const shown = await call(deps(undefined, undefined), 'GET', '/stage/config-home');
    expect(JSON.parse(shown.body)).toEqual({ regions: null, region: null, stageHome: null, configurationHome: null, acceptsChanges: true, move: null });
  });

  it('refuses with 500, not a guess, when the recorded home cannot be read', async () => {
    const broken: ConfigHomePort = { current: () => Promise.reject(new Error('down')), read: () => Promise.reject(new Error('down')), move: () => Promise.reject(new Error('down')) };
    const faults: Record<string, string>[] = [];
    const d = { ...deps('us-west-2', undefined), configHome: broken, logFault: (f: Readonly<Record<string, string>>) => faults.push({ ...f }) };
    const res = await call(d, 'POST', '/workspaces', { name: 'a' });
    expect(res.status).toBe(500);
    expect(faults).toEqual([{ kind: 'config_home_unread', error: 'Error', requestId: 'req_1' }]);
    expect(sent).toEqual([]);
  });
});

describe("the management API's statement lines keep the workspace's key in any region", () => {
  it.each([
    ['STATEMENT#2026-11-27T05:00:00.000Z#req_1', 'WS#ws_1'],
    ['CREDITREF#INV-1', 'WS#ws_1'],
    ['CREDIT#INV-1', 'WS#ws_1'],
    ['BALANCE', 'WS#ws_1@us-west-2'],
  ])('%s', (sk, pk) => {
    expect(regionalPk('WS#ws_1', sk, '@us-west-2')).toBe(pk);
  });
});

describe('the CLI on a change sent to the wrong region', () => {
  it('names the home and the commands to run', () => {
    const err = new AdminApiError('configuration_home_elsewhere', 'this management API (us-east-1) only reads', 409, 'req_1', 'us-west-2');
    const said = elsewhereMessage(err);
    expect(said).toContain('the configuration home is us-west-2');
    expect(said).toContain("--endpoint <us-west-2's AdminUrl>");
    expect(said).toContain('sluice stage config-home <region>');
    // Without the header (an older API), the API's own message.
    expect(elsewhereMessage(new AdminApiError('configuration_home_elsewhere', 'as sent', 409, null))).toBe('as sent');
  });

  it('describes the home as the region asked reads it', () => {
    expect(describeConfigHome({ regions: null, region: null, stageHome: null, configurationHome: null, acceptsChanges: true, move: null })).toEqual([
      'this stage runs in one region: its configuration home is where it runs, and there is nothing to move',
    ]);
    const lines = describeConfigHome({ regions: ['us-east-1', 'us-west-2'], region: 'us-east-1', stageHome: 'us-east-1', configurationHome: 'us-west-2', acceptsChanges: false, move: { region: 'us-west-2', generation: 1, at: '2026-11-27T05:00:00.000Z', by: 'op', requestId: 'r' } });
    expect(lines[0]).toBe("configuration home: us-west-2 (moved by op at 2026-11-27T05:00:00.000Z, move 1; the stage's home region is us-east-1)");
    expect(lines[1]).toBe("this management API (us-east-1) only reads: changes go to us-west-2's AdminUrl");
  });
});
