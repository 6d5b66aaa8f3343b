/**
 * The local replicator between two DynamoDB Local instances of its own (two "regions"), each
 * with a data folder so that one can be killed with SIGKILL and come back: writes copied after
 * the lag, last writer wins, replicated writes in the receiving region's stream and never copied
 * back, deletes and TTL deletes, a region's database killed and restarted, the replicator killed
 * and restarted on its saved state.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import {
  CreateTableCommand,
  DeleteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  UpdateItemCommand,
  UpdateTimeToLiveCommand,
} from '@aws-sdk/client-dynamodb';
import type { DynamoDBRecord } from 'aws-lambda';
import { type DynamoLocal, startDynamoLocal } from '../../local/dynamo-local';
import { startReplicator, type Replicator } from '../../local/regions/replicator';
import { startStreamPoller } from '../../local/stream-poller';
import { makeDynamoClient } from '../../local/tables';

// Two DynamoDB Locals of its own, started (and one restarted) on a shared two-core machine that
// can be very busy: a JVM has been measured taking 15 s to answer at a load average of 28.
jest.setTimeout(300_000);

const REPO = resolve(__dirname, '..', '..');

interface Region {
  readonly name: string;
  db: DynamoLocal;
  client: DynamoDBClient;
  readonly dataDir: string;
}

let home: string;
let east: Region;
let west: Region;
const running: Replicator[] = [];
const children: ChildProcess[] = [];

async function startRegion(name: string, dataDir: string, port?: number): Promise<Region> {
  // Instances of this file's alone, for half a minute: C1 only starts them on half the CPU (as the two-region fixture's).
  const db = await startDynamoLocal({ dataDir, port, readyTimeoutMs: 240_000, jit: 'quick' });
  return { name, db, client: makeDynamoClient(db.endpoint), dataDir };
}

beforeAll(async () => {
  home = await mkdtemp(join(tmpdir(), 'sluice-replicator-'));
  [east, west] = await Promise.all([startRegion('east', join(home, 'east')), startRegion('west', join(home, 'west'))]);
}, 300_000);

afterEach(async () => {
  await Promise.all(running.splice(0).map((r) => r.stop()));
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
});

afterAll(async () => {
  for (const region of [east, west]) {
    region?.client.destroy();
    await region?.db.stop();
  }
  await rm(home, { recursive: true, force: true });
});

function regions(): { name: string; endpoint: string }[] {
  return [east, west].map((r) => ({ name: r.name, endpoint: r.db.endpoint }));
}

/** A fresh table in both regions (its own stream, unless asked without), TTL on `ttl` where asked. */
async function table(options: { ttlIn?: readonly Region[]; stream?: false } = {}): Promise<string> {
  const name = `rep-${randomBytes(4).toString('hex')}`;
  for (const region of [east, west]) {
    await region.client.send(
      new CreateTableCommand({
        TableName: name,
        BillingMode: 'PAY_PER_REQUEST',
        AttributeDefinitions: [
          { AttributeName: 'pk', AttributeType: 'S' },
          { AttributeName: 'sk', AttributeType: 'S' },
        ],
        KeySchema: [
          { AttributeName: 'pk', KeyType: 'HASH' },
          { AttributeName: 'sk', KeyType: 'RANGE' },
        ],
        StreamSpecification: options.stream === false ? undefined : { StreamEnabled: true, StreamViewType: 'NEW_IMAGE' },
      }),
    );
    if (options.ttlIn?.includes(region)) {
      await region.client.send(
        new UpdateTimeToLiveCommand({ TableName: name, TimeToLiveSpecification: { Enabled: true, AttributeName: 'ttl' } }),
      );
    }
  }
  return name;
}

const key = (pk: string) => ({ pk: { S: pk }, sk: { S: 'item' } });

async function put(region: Region, name: string, pk: string, v: string, extra: Record<string, { N: string }> = {}): Promise<void> {
  await region.client.send(new PutItemCommand({ TableName: name, Item: { ...key(pk), v: { S: v }, ...extra } }));
}

async function value(region: Region, name: string, pk: string): Promise<string | undefined> {
  const { Item } = await region.client.send(new GetItemCommand({ TableName: name, Key: key(pk), ConsistentRead: true }));
  return Item?.v?.S;
}

/** Every record of a table's stream in a region, from its start. */
async function records(region: Region, name: string): Promise<DynamoDBRecord[]> {
  const out: DynamoDBRecord[] = [];
  const poller = await startStreamPoller({
    endpoint: region.db.endpoint,
    tableName: name,
    autoStart: false,
    batchSize: 1000,
    handler: async (event) => {
      out.push(...event.Records);
    },
  });
  try {
    await poller.drain();
  } finally {
    await poller.stop();
  }
  return out;
}

/** What a stream says happened, one line per record: `<pk> <v or -deleted->`. */
async function history(region: Region, name: string): Promise<string[]> {
  return (await records(region, name)).map((r) => {
    const pk = r.dynamodb?.Keys?.pk?.S ?? '?';
    const v = r.dynamodb?.NewImage?.v?.S;
    return `${pk} ${v ?? '-deleted-'}`;
  });
}

async function eventually(check: () => Promise<boolean>, what: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('the local replicator, driven pass by pass on a clock of its own', () => {
  let now: number;
  const clock = () => now;

  async function replicator(name: string, lagMs: number): Promise<Replicator> {
    now = 1_000_000;
    const r = await startReplicator({ regions: regions(), tables: [name], lagMs, pollIntervalMs: 0, idlePollMs: 0, autoStart: false, clock, log: () => undefined });
    running.push(r);
    return r;
  }

  it('copies a put, an update and a delete to the other region after the lag, and no sooner', async () => {
    const name = await table();
    const r = await replicator(name, 1_000);

    await put(east, name, 'a', 'one');
    await r.pass();
    expect(await value(west, name, 'a')).toBeUndefined();
    now += 999;
    await r.pass();
    expect(await value(west, name, 'a')).toBeUndefined();
    now += 1;
    await r.pass();
    expect(await value(west, name, 'a')).toBe('one');

    await east.client.send(
      new UpdateItemCommand({ TableName: name, Key: key('a'), UpdateExpression: 'SET v = :v', ExpressionAttributeValues: { ':v': { S: 'two' } } }),
    );
    await r.pass();
    expect(await value(west, name, 'a')).toBe('one');
    now += 1_000;
    await r.pass();
    expect(await value(west, name, 'a')).toBe('two');

    await east.client.send(new DeleteItemCommand({ TableName: name, Key: key('a') }));
    await r.pass();
    expect(await value(west, name, 'a')).toBe('two');
    now += 1_000;
    await r.pass();
    expect(await value(west, name, 'a')).toBeUndefined();

    // Nothing more happens however long it runs: no write is copied back.
    for (let i = 0; i < 5; i += 1) {
      now += 1_000;
      await r.pass();
    }
    // The replicated writes are in the receiving region's stream, as global tables put them in every replica's.
    expect(await history(west, name)).toEqual(['a one', 'a two', 'a -deleted-']);
    expect(await history(east, name)).toEqual(['a one', 'a two', 'a -deleted-']);
    const west1 = (await records(west, name))[0];
    expect(west1?.eventName).toBe('INSERT');
    expect(west1?.dynamodb?.NewImage).toEqual({ pk: { S: 'a' }, sk: { S: 'item' }, v: { S: 'one' } });
    expect(r.stats()).toMatchObject({ local: 3, echoes: 3, applied: 3, pending: 0, expected: 0 });
  });

  it('settles two writes to one item in both regions to the later one, in both', async () => {
    const name = await table();
    const r = await replicator(name, 1_000);

    // East first, west 100 ms later: west's wins everywhere.
    await put(east, name, 'k1', 'east-early');
    await r.pass();
    now += 100;
    await put(west, name, 'k1', 'west-late');
    await r.pass();
    // West later first, east 100 ms after: east's wins everywhere.
    now += 100;
    await put(west, name, 'k2', 'west-early');
    await r.pass();
    now += 100;
    await put(east, name, 'k2', 'east-late');
    await r.pass();

    now += 2_000;
    await r.pass();
    await r.pass();
    for (const region of [east, west]) {
      expect(await value(region, name, 'k1')).toBe('west-late');
      expect(await value(region, name, 'k2')).toBe('east-late');
    }
    // The earlier write was dropped, not written and overwritten: each region's stream has its own
    // write and the winner, once each.
    expect(await history(east, name)).toEqual(['k1 east-early', 'k2 east-late', 'k1 west-late']);
    expect(await history(west, name)).toEqual(['k1 west-late', 'k2 west-early', 'k2 east-late']);
    expect(r.stats()).toMatchObject({ dropped: 2, applied: 2 });
  });
});

describe('the local replicator, running', () => {
  it('refuses a table that streams no new images: there would be nothing to copy from', async () => {
    const name = await table({ stream: false });
    await expect(startReplicator({ regions: regions(), tables: [name], log: () => undefined })).rejects.toThrow(
      `table ${name} in region east must stream new images to be replicated (it streams none)`,
    );
  });

  it('copies a TTL delete to the other region', async () => {
    // TTL only in east, so the delete west sees can only be east's, copied.
    const name = await table({ ttlIn: [east] });
    const r = await startReplicator({ regions: regions(), tables: [name], lagMs: 100, pollIntervalMs: 20, log: () => undefined });
    running.push(r);
    await put(east, name, 'old', 'live');
    await eventually(async () => (await value(west, name, 'old')) === 'live', 'the item copied west');
    // Expired an hour ago: east's TTL sweep deletes it (nobody else deletes anything here).
    await east.client.send(
      new UpdateItemCommand({
        TableName: name,
        Key: key('old'),
        UpdateExpression: 'SET #ttl = :t',
        ExpressionAttributeNames: { '#ttl': 'ttl' },
        ExpressionAttributeValues: { ':t': { N: String(Math.floor(Date.now() / 1000) - 3_600) } },
      }),
    );
    await eventually(async () => (await value(east, name, 'old')) === undefined, "east's TTL delete");
    await eventually(async () => (await value(west, name, 'old')) === undefined, 'the delete copied west');
    await r.settle();
    const westHistory = await history(west, name);
    expect(westHistory[0]).toBe('old live');
    expect(westHistory[westHistory.length - 1]).toBe('old -deleted-');
  });

  it("catches a region up after its DynamoDB Local was killed with SIGKILL and started again", async () => {
    const name = await table();
    const r = await startReplicator({ regions: regions(), tables: [name], lagMs: 100, pollIntervalMs: 20, retryDownMs: 200, log: () => undefined });
    running.push(r);
    await put(east, name, 'x0', 'east');
    await put(west, name, 'x1', 'west');
    await r.settle();

    const port = west.db.port;
    process.kill(west.db.pid, 'SIGKILL');
    await west.db.exited;
    west.client.destroy();
    await put(east, name, 'x2', 'while-west-was-down');
    await east.client.send(
      new UpdateItemCommand({ TableName: name, Key: key('x0'), UpdateExpression: 'SET v = :v', ExpressionAttributeValues: { ':v': { S: 'east-again' } } }),
    );
    await east.client.send(new DeleteItemCommand({ TableName: name, Key: key('x1') }));
    await eventually(async () => r.stats().down.includes('west'), 'the replicator to see west down');

    west = await startRegion('west', west.dataDir, port);
    await r.settle({ timeoutMs: 60_000 });

    for (const region of [east, west]) {
      expect(await value(region, name, 'x0')).toBe('east-again');
      expect(await value(region, name, 'x1')).toBeUndefined();
      expect(await value(region, name, 'x2')).toBe('while-west-was-down');
    }
    // West's stream survived the kill; each write is in each stream once. (The three writes copied
    // after the restart are made together, so their order in west's stream is not fixed.)
    const westHistory = await history(west, name);
    expect(westHistory.slice(0, 2)).toEqual(['x1 west', 'x0 east']);
    expect(westHistory.slice(2).sort()).toEqual(['x0 east-again', 'x1 -deleted-', 'x2 while-west-was-down']);
    expect(await history(east, name)).toEqual(['x0 east', 'x1 west', 'x2 while-west-was-down', 'x0 east-again', 'x1 -deleted-']);
  });

  it('marks a region whose database hangs (SIGSTOP) down, and catches it up when it answers again', async () => {
    const name = await table();
    const r = await startReplicator({ regions: regions(), tables: [name], lagMs: 100, pollIntervalMs: 20, retryDownMs: 200, readTimeoutMs: 1_000, log: () => undefined });
    running.push(r);
    process.kill(west.db.pid, 'SIGSTOP');
    try {
      await put(east, name, 'h1', 'while-west-hung');
      await eventually(async () => r.stats().down.includes('west'), 'the replicator to see west hang');
      // East's writes keep being read while west is down.
      await put(east, name, 'h2', 'also');
      await eventually(async () => r.stats().local === 2, "both of east's writes read");
    } finally {
      process.kill(west.db.pid, 'SIGCONT');
    }
    await r.settle({ timeoutMs: 120_000 });
    expect(await value(west, name, 'h1')).toBe('while-west-hung');
    expect(await value(west, name, 'h2')).toBe('also');
    expect((await history(west, name)).sort()).toEqual(['h1 while-west-hung', 'h2 also']);
  });

  it('resumes from its saved state after the replicator itself was killed with SIGKILL', async () => {
    const name = await table();
    const stateFile = join(home, `state-${name}`, 'replicator.json');
    const config = join(home, `${name}.json`);
    await writeFile(
      config,
      JSON.stringify({ regions: regions(), tables: [name], lagMs: 100, pollIntervalMs: 20, idlePollMs: 50, stateFile, persistEveryMs: 50 }),
    );
    const launch = async (): Promise<ChildProcess> => {
      const child = spawn(process.execPath, ['--import', 'tsx', 'local/regions/replicator-main.ts', config], {
        cwd: REPO,
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
      });
      children.push(child);
      let stderr = '';
      child.stderr?.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      await new Promise<void>((ready, fail) => {
        child.stdout?.on('data', (chunk: Buffer) => {
          if (chunk.toString().includes('[replicator] ready')) ready();
        });
        child.once('exit', (code) => fail(new Error(`replicator exited (${code}): ${stderr}`)));
      });
      return child;
    };

    let child = await launch();
    await put(east, name, 'y1', 'east');
    await eventually(async () => (await value(west, name, 'y1')) === 'east', 'y1 copied west');
    // Let it save what it knows, then kill it mid-flight.
    await new Promise((resolve) => setTimeout(resolve, 300));
    child.kill('SIGKILL');
    await new Promise((resolve) => child.once('exit', resolve));
    expect((await stat(stateFile)).mode & 0o777).toBe(0o600);

    await put(east, name, 'y2', 'east-while-replicator-was-down');
    await west.client.send(
      new UpdateItemCommand({ TableName: name, Key: key('y1'), UpdateExpression: 'SET v = :v', ExpressionAttributeValues: { ':v': { S: 'west' } } }),
    );
    child = await launch();
    await eventually(async () => (await value(east, name, 'y1')) === 'west', 'y1 copied back east');
    await eventually(async () => (await value(west, name, 'y2')) === 'east-while-replicator-was-down', 'y2 copied west');
    // Give it time to copy anything it wrongly would (an echo), then stop it cleanly.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    child.kill('SIGTERM');
    await new Promise((resolve) => child.once('exit', resolve));

    expect(await history(east, name)).toEqual(['y1 east', 'y2 east-while-replicator-was-down', 'y1 west']);
    expect(await history(west, name)).toEqual(['y1 east', 'y1 west', 'y2 east-while-replicator-was-down']);
  });
});
