/**
 * The warden of one region (docs/regions.md, "The front door"): run every minute, it probes every
 * region's gateway (`GET /v1/models` with the probe key) every 5 s until the minute is nearly
 * over, and writes each region's state to the front door's KeyValueStore when it changes, with
 * the ETag it read. The CloudFront Function reads the store on every request. Its own region's
 * state also says `stale` while replication from the configuration home lags (`ownState`): each
 * round every warden reads the configuration home in its own replica (`DynamoConfigHome`, the
 * management API's store), and the home's warden writes its heartbeat item while the others read
 * the home's item and its age there (`heartbeatPlan`, `heartbeatAge`).
 *
 * The probe key and the configuration are replicated secrets read in this region, so a warden
 * keeps working when the home region (or us-east-1, where the front door's stack lives) does not.
 * The KeyValueStore's API is signed with SigV4A, which `@aws-sdk/signature-v4a` provides (bundled).
 */
import '@aws-sdk/signature-v4a';
import { CloudFrontKeyValueStoreClient, DescribeKeyValueStoreCommand, GetKeyCommand, PutKeyCommand } from '@aws-sdk/client-cloudfront-keyvaluestore';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { ENV } from '../shared/config';
import { emfLine, EMF_NAMESPACE } from '../shared/emf';
import { REGION_ENV } from '../shared/region-env';
import { tableName } from '../shared/schema';
import { DynamoConfigHome } from '../store/config-home';
import { regionSetupFromEnv, type RegionSetup } from '../store/regions';
import { WARDEN_ENV } from './env';
import { REGIONS_KEY } from './handler-constants';
import { afterProbe, mergeStates, ownEntryToWrite, ownState, parseStates, parseWardenConfig, probeOk, type RegionHealth, type RegionState, type WardenConfig } from './health';
import { heartbeatRound } from './heartbeat';

const PROBE_EVERY_MS = 5_000;
const PROBE_TIMEOUT_MS = 3_000;
/** Stop probing this long before Lambda's timeout, so a last write still fits. */
const RESERVE_MS = 8_000;

// Kept across warm invocations, so a streak that spans two runs still counts.
const health = new Map<string, RegionHealth>();
const secrets = new SecretsManagerClient({});
const kvs = new CloudFrontKeyValueStoreClient({});
const doc = DynamoDBDocumentClient.from(new DynamoDBClient({}));
/** What the store holds for this warden's own region, as it last read or wrote it. */
let published: RegionState | undefined;
/** The configuration home as this warden last read it (its probes' view of it is `homeUp`; a change is logged). */
let configHome: string | undefined;

async function secret(name: string): Promise<string> {
  const out = await secrets.send(new GetSecretValueCommand({ SecretId: name }));
  if (out.SecretString === undefined || out.SecretString === '') throw new Error(`secret ${name} has no value yet`);
  return out.SecretString;
}

async function probe(url: string, key: string): Promise<number | undefined> {
  try {
    const res = await fetch(new URL('v1/models', url), { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return undefined;
  }
}

async function readStore(config: WardenConfig): Promise<{ etag: string; states: Record<string, RegionState> }> {
  const described = await kvs.send(new DescribeKeyValueStoreCommand({ KvsARN: config.kvsArn }));
  let value: string | undefined;
  try {
    value = (await kvs.send(new GetKeyCommand({ KvsARN: config.kvsArn, Key: REGIONS_KEY }))).Value;
  } catch (err) {
    if ((err as { name?: string }).name !== 'ResourceNotFoundException') throw err;
  }
  return { etag: described.ETag ?? '', states: parseStates(value) };
}

async function writeStore(config: WardenConfig, changed: Record<string, RegionState>, own: string): Promise<void> {
  // Two wardens racing: the one whose ETag is stale reads again and merges its changes in.
  for (let attempt = 1; ; attempt += 1) {
    const { etag, states } = await readStore(config);
    try {
      await kvs.send(new PutKeyCommand({ KvsARN: config.kvsArn, Key: REGIONS_KEY, Value: mergeStates(states, changed, own), IfMatch: etag }));
      return;
    } catch (err) {
      const name = (err as { name?: string }).name;
      if (attempt >= 3 || (name !== 'ConflictException' && name !== 'ValidationException')) throw err;
    }
  }
}

/** One scheduled run: probe every region every 5 s until the minute is nearly over. */
export async function handler(_event: unknown, context: { getRemainingTimeInMillis(): number }): Promise<void> {
  const stage = process.env['SLUICE_STAGE'] ?? 'unknown';
  const own = process.env[REGION_ENV.region] ?? 'unknown';
  const config = parseWardenConfig(await secret(process.env[WARDEN_ENV.configSecret] ?? ''));
  const key = await secret(process.env[WARDEN_ENV.probeKeySecret] ?? '');
  const stageHome = process.env[REGION_ENV.homeRegion] || own;
  const tablePrefix = process.env[ENV.tablePrefix] ?? '';
  // Every function of a multi-region stage has its regions (the CDK sets them); without them, one region, its own home.
  const setup: RegionSetup = regionSetupFromEnv(process.env) ?? { regions: [stageHome], region: own, weights: [1], transferWaitMs: 0 };
  // Read every round (the cache is a round long): a move is followed within a round of reaching this replica.
  const configHomes = new DynamoConfigHome({ doc, tablePrefix, stage }, setup, 0);
  const heartbeatTable = tableName(tablePrefix, 'workspaces');
  const initial = await readStore(config);
  for (const region of Object.keys(config.gateways)) {
    if (!health.has(region)) health.set(region, { state: initial.states[region] === 'down' ? 'down' : 'up', streak: 0 });
  }
  // Another warden may have changed this region's entry since this one last wrote it.
  published = initial.states[own];
  while (context.getRemainingTimeInMillis() > RESERVE_MS + PROBE_EVERY_MS) {
    const started = Date.now();
    const [results, beat] = await Promise.all([
      Promise.all(Object.entries(config.gateways).map(async ([region, url]) => [region, await probe(url, key)] as const)),
      heartbeatRound({ doc, own, setup, configHomes, table: heartbeatTable, now: Date.now }),
    ]);
    const heartbeatAgeMs = beat.ageMs;
    if (beat.home !== undefined && beat.home !== configHome) {
      if (configHome !== undefined) console.log(JSON.stringify({ event: 'config_home_seen', warden: own, home: beat.home, previous: configHome }));
      configHome = beat.home;
    }
    const home = configHome ?? stageHome;
    const changed: Record<string, RegionState> = {};
    let ownFlipped = false;
    for (const [region, status] of results) {
      const before = health.get(region) ?? { state: 'up', streak: 0 };
      const after = afterProbe(before, probeOk(status));
      health.set(region, after);
      if (after.state === before.state) continue;
      if (region === own) ownFlipped = true;
      else changed[region] = after.state;
    }
    // Its own region: by its probes, and stale while replication from the configuration home (as its replica names it) lags.
    const mine = ownState({ probed: health.get(own)?.state ?? 'up', isHome: own === home, homeUp: health.get(home)?.state !== 'down', heartbeatAgeMs });
    const write = ownEntryToWrite(mine, published, ownFlipped);
    if (write !== undefined) changed[own] = write;
    if (Object.keys(changed).length > 0) {
      await writeStore(config, changed, own);
      if (changed[own] !== undefined) published = changed[own];
      console.log(JSON.stringify({ event: 'region_state_changed', warden: own, changed, configHome: home, ...(heartbeatAgeMs === undefined ? {} : { heartbeatAgeMs }) }));
    }
    // One metric line per round: each region's health as this warden sees it (1 up, 0 down).
    for (const [region] of results) {
      console.log(
        emfLine(Date.now(), [{ Namespace: EMF_NAMESPACE, Dimensions: [['Stage', 'ProbedRegion']], Metrics: [{ Name: 'RegionUp', Unit: 'Count' }] }], {
          Stage: stage,
          ProbedRegion: region,
          Warden: own,
          RegionUp: health.get(region)?.state === 'up' ? 1 : 0,
        }),
      );
    }
    if (heartbeatAgeMs !== undefined && own !== home) {
      console.log(emfLine(Date.now(), [{ Namespace: EMF_NAMESPACE, Dimensions: [['Stage', 'Region']], Metrics: [{ Name: 'HomeHeartbeatAge', Unit: 'Milliseconds' }] }], { Stage: stage, Region: own, ConfigHome: home, HomeHeartbeatAge: heartbeatAgeMs }));
    }
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, PROBE_EVERY_MS - (Date.now() - started))));
  }
}
