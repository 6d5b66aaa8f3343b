/**
 * The warden of one region (docs/regions.md, "The front door"): run every minute, it probes every
 * region's gateway (`GET /v1/models` with the probe key) every 5 s until the minute is nearly
 * over, and writes each region's state to the front door's KeyValueStore when it changes, with
 * the ETag it read. The CloudFront Function reads the store on every request.
 *
 * The probe key and the configuration are replicated secrets read in this region, so a warden
 * keeps working when the home region (or us-east-1, where the front door's stack lives) does not.
 * The KeyValueStore's API is signed with SigV4A, which `@aws-sdk/signature-v4a` provides (bundled).
 */
import '@aws-sdk/signature-v4a';
import { CloudFrontKeyValueStoreClient, DescribeKeyValueStoreCommand, GetKeyCommand, PutKeyCommand } from '@aws-sdk/client-cloudfront-keyvaluestore';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { emfLine, EMF_NAMESPACE } from '../shared/emf';
import { REGION_ENV } from '../shared/region-env';
import { WARDEN_ENV } from './env';
import { REGIONS_KEY } from './handler-constants';
import { afterProbe, mergeStates, parseStates, parseWardenConfig, probeOk, type RegionHealth, type RegionState, type WardenConfig } from './health';

const PROBE_EVERY_MS = 5_000;
const PROBE_TIMEOUT_MS = 3_000;
/** Stop probing this long before Lambda's timeout, so a last write still fits. */
const RESERVE_MS = 8_000;

// Kept across warm invocations, so a streak that spans two runs still counts.
const health = new Map<string, RegionHealth>();
const secrets = new SecretsManagerClient({});
const kvs = new CloudFrontKeyValueStoreClient({});

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

async function writeStore(config: WardenConfig, changed: Record<string, RegionState>): Promise<void> {
  // Two wardens racing: the one whose ETag is stale reads again and merges its changes in.
  for (let attempt = 1; ; attempt += 1) {
    const { etag, states } = await readStore(config);
    try {
      await kvs.send(new PutKeyCommand({ KvsARN: config.kvsArn, Key: REGIONS_KEY, Value: mergeStates(states, changed), IfMatch: etag }));
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
  const initial = await readStore(config);
  for (const region of Object.keys(config.gateways)) {
    if (!health.has(region)) health.set(region, { state: initial.states[region] === 'down' ? 'down' : 'up', streak: 0 });
  }
  while (context.getRemainingTimeInMillis() > RESERVE_MS + PROBE_EVERY_MS) {
    const started = Date.now();
    const results = await Promise.all(Object.entries(config.gateways).map(async ([region, url]) => [region, await probe(url, key)] as const));
    const changed: Record<string, RegionState> = {};
    for (const [region, status] of results) {
      const before = health.get(region) ?? { state: 'up', streak: 0 };
      const after = afterProbe(before, probeOk(status));
      health.set(region, after);
      if (after.state !== before.state) changed[region] = after.state;
    }
    if (Object.keys(changed).length > 0) {
      await writeStore(config, changed);
      console.log(JSON.stringify({ event: 'region_state_changed', warden: own, changed }));
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
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, PROBE_EVERY_MS - (Date.now() - started))));
  }
}
