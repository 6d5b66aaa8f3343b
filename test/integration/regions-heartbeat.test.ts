/**
 * The wardens' heartbeat following the configuration home (issue 23; docs/regions.md,
 * "Configuration"): one warden round's reads and write (`lambdas/warden/heartbeat.ts`) in each of
 * two regions, two DynamoDB Locals joined by the local replicator with every table replicated. The
 * home region "lost" is replication from and to it held back: the move is made in the other
 * region, which then writes the heartbeat, while the cut-off old home still believes it is the
 * home; once replication resumes the old home follows the moved home, and neither region's
 * heartbeat item was ever written by the other.
 */
import { isDeepStrictEqual } from 'node:util';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { DynamoConfigHome } from '../../lambdas/store/config-home';
import type { AdminContext } from '../../lambdas/store/directory-context';
import { asRegion, type RegionSetup } from '../../lambdas/store/regions';
import { heartbeatKey } from '../../lambdas/warden/handler-constants';
import { HEARTBEAT_STALE_MS, ownState } from '../../lambdas/warden/health';
import { heartbeatRound, type HeartbeatRoundResult } from '../../lambdas/warden/heartbeat';
import { HOME, WEST, startTwoRegions, type TwoRegions, type TwoRegionsRegion } from '../support/two-regions';

jest.setTimeout(300_000);

const SETUP: RegionSetup = { regions: [HOME, WEST], region: HOME, weights: [1, 1], transferWaitMs: 0 };
type Region = TwoRegionsRegion<{ name: string }>;
let fx: TwoRegions<{ name: string }>;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function ctxOf(r: Region): AdminContext {
  return { doc: r.doc, tablePrefix: fx.prefix, stage: 'local', regions: asRegion(SETUP, r.name) };
}

/** One warden round in `r`, its clock `aheadMs` ahead of the machine's. */
function round(r: Region, aheadMs = 0, configHomes: Pick<DynamoConfigHome, 'read'> = new DynamoConfigHome(ctxOf(r), asRegion(SETUP, r.name), 0)): Promise<HeartbeatRoundResult> {
  return heartbeatRound({ doc: r.doc, own: r.name, setup: asRegion(SETUP, r.name), configHomes, table: fx.t('workspaces'), now: () => Date.now() + aheadMs });
}

/** `writer`'s heartbeat item as `r`'s replica holds it. */
async function beatIn(r: Region, writer: string): Promise<Record<string, unknown> | undefined> {
  const got = await r.doc.send(new GetCommand({ TableName: fx.t('workspaces'), Key: heartbeatKey(writer, HOME), ConsistentRead: true }));
  return got.Item;
}

async function until(what: string, ok: () => Promise<boolean>): Promise<void> {
  for (const end = Date.now() + 60_000; !(await ok()); await sleep(100)) if (Date.now() > end) throw new Error(`${what} never happened`);
}

beforeAll(async () => {
  fx = await startTwoRegions({ tag: 'hb', setup: SETUP, lagMs: 100, everyTable: true, extra: (name) => ({ name }) });
});

afterAll(async () => {
  await fx?.stop();
});

describe('the heartbeat follows the configuration home', () => {
  it('is written by the home region until the move, then by the moved home; the old home follows once the move reaches it', async () => {
    const { east, west } = fx;

    // No move: the home region writes today's item, naming itself; the other reads it in its replica.
    expect(await round(east)).toEqual({ home: HOME, ageMs: 0 });
    expect(await beatIn(east, HOME)).toMatchObject({ pk: 'STAGE', sk: 'HEARTBEAT', region: HOME });
    await until('the home heartbeat reaching the west', async () => (await beatIn(west, HOME)) !== undefined);
    const westBefore = await round(west);
    expect(westBefore.home).toBe(HOME);
    expect(westBefore.ageMs).toBeGreaterThanOrEqual(0);
    expect(westBefore.ageMs).toBeLessThan(HEARTBEAT_STALE_MS);
    expect(await beatIn(west, WEST)).toBeUndefined();

    // The home region is lost; the configuration home is moved to the west, in the west.
    fx.replicator.setLag(3_600_000);
    await new DynamoConfigHome(ctxOf(west), asRegion(SETUP, WEST)).move({ region: WEST, by: 'test', requestId: 'req_hb' });
    // A minute on its clock after the move it is still the home, writing: never stale.
    expect(await round(west, 60_000)).toEqual({ home: WEST, ageMs: 0 });
    expect(await round(west)).toEqual({ home: WEST, ageMs: 0 });
    expect(await beatIn(west, WEST)).toMatchObject({ pk: 'STAGE', sk: `HEARTBEAT@${WEST}`, region: WEST });

    // The cut-off old home has not heard of the move: it still writes as the home (its own item), and is never stale.
    const eastCutOff = await round(east);
    expect(eastCutOff).toEqual({ home: HOME, ageMs: 0 });
    expect(ownState({ probed: 'up', isHome: true, homeUp: true, heartbeatAgeMs: eastCutOff.ageMs })).toBe('up');
    expect(await beatIn(east, WEST)).toBeUndefined();

    // Replication resumes: the old home receives the move and reads the moved home's item.
    const westBeat = await beatIn(west, WEST);
    fx.replicator.setLag(100);
    await until('the move and the west heartbeat reaching the east', async () => (await beatIn(east, WEST)) !== undefined && (await round(east)).home === WEST);
    const eastCaughtUp = await round(east);
    expect(eastCaughtUp.home).toBe(WEST);
    expect(eastCaughtUp.ageMs).toBeLessThan(HEARTBEAT_STALE_MS);
    expect(ownState({ probed: 'up', isHome: false, homeUp: true, heartbeatAgeMs: eastCaughtUp.ageMs })).toBe('up');
    // Its rounds now write nothing: the item it wrote as the home stays as it was last written, and the moved home's is the west's alone.
    const eastOwn = await beatIn(east, HOME);
    await round(east);
    expect(await beatIn(east, HOME)).toEqual(eastOwn);
    await until('the old home\'s last heartbeat reaching the west', async () => isDeepStrictEqual(await beatIn(west, HOME), eastOwn));
    expect(await beatIn(west, WEST)).toEqual(westBeat);
    expect(await beatIn(east, WEST)).toEqual(westBeat);
    // Without a newer heartbeat of the moved home for more than 30 s, the old home is stale (while it finds the west up).
    const eastLater = await round(east, HEARTBEAT_STALE_MS + 5_000);
    expect(eastLater.ageMs).toBeGreaterThan(HEARTBEAT_STALE_MS);
    expect(ownState({ probed: 'up', isHome: false, homeUp: true, heartbeatAgeMs: eastLater.ageMs })).toBe('stale');
    expect(ownState({ probed: 'up', isHome: false, homeUp: false, heartbeatAgeMs: eastLater.ageMs })).toBe('up');
  });

  it('writes nothing and claims nothing in a round whose read of the configuration home fails', async () => {
    const { west } = fx;
    const before = await beatIn(west, WEST);
    const failing = { read: (): Promise<never> => Promise.reject(Object.assign(new Error('unavailable'), { name: 'InternalServerError' })) };
    expect(await round(west, 10_000, failing)).toEqual({ home: undefined, ageMs: undefined });
    expect(await beatIn(west, WEST)).toEqual(before);
  });
});
