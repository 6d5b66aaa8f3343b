import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CreateTableCommand,
  DescribeTableCommand,
  DescribeTimeToLiveCommand,
  ListTablesCommand,
  type DynamoDBClient,
} from '@aws-sdk/client-dynamodb';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { isAlive, startDynamoLocal } from '../../local/dynamo-local';
import { ensureTables, makeDynamoClient } from '../../local/tables';
import { ALL_TABLES, tableName } from '../../lambdas/shared/schema';
import { type TestTables, testTables } from '../support/dynamo';
import { TEST_ENDPOINT_ENV } from '../support/global-setup';
import { expectLoopbackOnly } from '../support/loopback-only';

describe('ensureTables against DynamoDB Local', () => {
  let t: TestTables;
  beforeAll(async () => {
    t = await testTables();
  });
  afterAll(() => t.client.destroy());

  it.each(ALL_TABLES.map((s) => [s.name, s] as const))('creates %s as the schema describes it', async (_name, schema) => {
    const { Table } = await t.client.send(new DescribeTableCommand({ TableName: tableName(t.prefix, schema.name) }));
    expect(Table?.TableStatus).toBe('ACTIVE');
    expect(Table?.BillingModeSummary?.BillingMode).toBe('PAY_PER_REQUEST');

    const expectedKeys = [{ AttributeName: schema.partitionKey.name, KeyType: 'HASH' }];
    if (schema.sortKey) expectedKeys.push({ AttributeName: schema.sortKey.name, KeyType: 'RANGE' });
    expect(Table?.KeySchema).toEqual(expectedKeys);

    const indexes = (Table?.GlobalSecondaryIndexes ?? []).map((gsi) => ({
      name: gsi.IndexName,
      keys: gsi.KeySchema?.map((k) => `${k.AttributeName}:${k.KeyType}`),
      projection: gsi.Projection?.ProjectionType,
      status: gsi.IndexStatus,
    }));
    expect(indexes).toEqual(
      schema.indexes.map((index) => ({
        name: index.indexName,
        keys: [`${index.partitionKey.name}:HASH`, ...(index.sortKey ? [`${index.sortKey.name}:RANGE`] : [])],
        projection: index.projection ?? 'ALL',
        status: 'ACTIVE',
      })),
    );
    const types = Object.fromEntries((Table?.AttributeDefinitions ?? []).map((a) => [a.AttributeName, a.AttributeType]));
    for (const key of [schema.partitionKey, ...(schema.sortKey ? [schema.sortKey] : [])]) {
      expect(types[key.name]).toBe(key.type);
    }
    for (const index of schema.indexes) {
      for (const key of [index.partitionKey, ...(index.sortKey ? [index.sortKey] : [])]) expect(types[key.name]).toBe(key.type);
    }

    if (schema.stream) {
      expect(Table?.StreamSpecification).toEqual({ StreamEnabled: true, StreamViewType: 'NEW_IMAGE' });
      expect(Table?.LatestStreamArn).toEqual(expect.stringContaining(tableName(t.prefix, schema.name)));
    } else {
      expect(Table?.StreamSpecification?.StreamEnabled ?? false).toBe(false);
    }

    const { TimeToLiveDescription: ttl } = await t.client.send(
      new DescribeTimeToLiveCommand({ TableName: tableName(t.prefix, schema.name) }),
    );
    if (schema.ttlAttribute === undefined) {
      expect(ttl?.TimeToLiveStatus ?? 'DISABLED').toBe('DISABLED');
    } else {
      expect(ttl).toEqual({ TimeToLiveStatus: 'ENABLED', AttributeName: schema.ttlAttribute });
    }
  });

  it('is idempotent and leaves existing items alone', async () => {
    const keys = tableName(t.prefix, 'keys');
    await t.doc.send(new PutCommand({ TableName: keys, Item: { keyHash: 'h1', keyId: 'k1', workspaceId: 'w1' } }));
    await ensureTables(t.client, t.prefix);
    const { Item } = await t.doc.send(new GetCommand({ TableName: keys, Key: { keyHash: 'h1' } }));
    expect(Item).toEqual({ keyHash: 'h1', keyId: 'k1', workspaceId: 'w1' });
  });

  it('gives every call its own prefix', async () => {
    const other = await testTables();
    try {
      expect(other.prefix).not.toBe(t.prefix);
      // ListTables answers at most 100 names a page, and the run's other files have tables here too.
      const TableNames: string[] = [];
      let start: string | undefined;
      do {
        const page = await other.client.send(new ListTablesCommand({ ExclusiveStartTableName: start }));
        TableNames.push(...(page.TableNames ?? []));
        start = page.LastEvaluatedTableName;
      } while (start !== undefined);
      for (const schema of ALL_TABLES) {
        expect(TableNames).toContain(tableName(other.prefix, schema.name));
        expect(TableNames).toContain(tableName(t.prefix, schema.name));
      }
    } finally {
      other.client.destroy();
    }
  });
});

/** PIDs of DynamoDB Local processes started with `-port <port>` (read from /proc, Linux). */
function dynamoLocalPidsOnPort(port: number): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
        return args.some((a) => a.includes('DynamoDBLocal.jar')) && args[args.indexOf('-port') + 1] === String(port);
      } catch {
        return false; // exited while we looked
      }
    })
    .map(Number);
}

describe("the tests' own DynamoDB Local (jest's global setup)", () => {
  it('listens on 127.0.0.1 only: the machine\'s other addresses are refused', async () => {
    const endpoint = process.env[TEST_ENDPOINT_ENV];
    expect(endpoint).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    await expectLoopbackOnly(Number(new URL(endpoint ?? '').port));
  });
});

describe('startDynamoLocal', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sluice-ddb-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('keeps data in dataDir across a restart, and stop() ends the process', async () => {
    // Java's start-up, like jest's global setup allows it: a loaded 2-core machine can take over 30 s.
    const first = await startDynamoLocal({ dataDir: dir, readyTimeoutMs: 60_000 });
    let client: DynamoDBClient = makeDynamoClient(first.endpoint);
    try {
      await ensureTables(client, 'persist-');
      await client.send(
        new CreateTableCommand({
          TableName: 'persist-extra',
          BillingMode: 'PAY_PER_REQUEST',
          AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
          KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
        }),
      );
    } finally {
      client.destroy();
      await first.stop();
    }
    expect(isAlive(first.pid)).toBe(false);

    const second = await startDynamoLocal({ dataDir: dir, readyTimeoutMs: 60_000 });
    client = makeDynamoClient(second.endpoint);
    try {
      const { TableNames = [] } = await client.send(new ListTablesCommand({}));
      expect(TableNames).toEqual(expect.arrayContaining(['persist-extra', 'persist-usage', 'persist-ledger']));
      // Reconciling existing tables is a no-op when they match the schema.
      await ensureTables(client, 'persist-');
    } finally {
      client.destroy();
      await second.stop();
    }
    expect(isAlive(second.pid)).toBe(false);
  }, 120_000);

  it('fails with the process output when the port is taken, and leaves no process behind', async () => {
    const blocker = createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => blocker.listen({ port: 0, host: '0.0.0.0' }, resolve));
    const address = blocker.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    try {
      await expect(startDynamoLocal({ port: address.port, readyTimeoutMs: 60_000 })).rejects.toThrow(
        new RegExp(`exited during start-up[\\s\\S]*${address.port}[\\s\\S]*DynamoDB Local output[\\s\\S]*Failed to bind`),
      );
    } finally {
      await new Promise<void>((resolve) => blocker.close(() => resolve()));
    }
    expect(dynamoLocalPidsOnPort(address.port)).toEqual([]);
  }, 90_000);

  it('listens on 127.0.0.1 only and keeps its files the user\'s alone, also in a folder an older version left open', async () => {
    // As an earlier version left it: the folder and the database readable by everyone.
    const data = join(dir, 'open');
    await mkdir(data, { mode: 0o755 });
    await chmod(data, 0o755);
    await writeFile(join(data, 'shared-local-instance.db'), '', { mode: 0o644 });
    await chmod(join(data, 'shared-local-instance.db'), 0o644);
    const db = await startDynamoLocal({ dataDir: data, readyTimeoutMs: 60_000 });
    const client = makeDynamoClient(db.endpoint);
    try {
      expect(db.endpoint).toBe(`http://127.0.0.1:${db.port}`);
      // The launcher compiled once (the global setup's start compiled it), run as a class: Java is
      // not compiling the source again at every start.
      const args = readFileSync(`/proc/${db.pid}/cmdline`, 'utf8').split('\0');
      expect(args).toContain('LoopbackDynamoDBLocal');
      expect(args.some((a) => a.endsWith('.java'))).toBe(false);
      await expectLoopbackOnly(db.port);
      // Tables written, so DynamoDB Local has created (or rewritten) its files under its own umask.
      await ensureTables(client, 'modes-');
      expect(statSync(data).mode & 0o777).toBe(0o700);
      const files = readdirSync(data);
      expect(files).toContain('shared-local-instance.db');
      for (const name of files) expect({ name, mode: statSync(join(data, name)).mode & 0o777 }).toEqual({ name, mode: 0o600 });
    } finally {
      client.destroy();
      await db.stop();
    }
  }, 120_000);

  it("keeps Java's temporary files in a folder of its own, removed when it exits, killed or stopped", async () => {
    for (const end of ['stop', 'kill'] as const) {
      const db = await startDynamoLocal({ readyTimeoutMs: 60_000 });
      try {
        expect(readFileSync(`/proc/${db.pid}/cmdline`, 'utf8').split('\0')).toContain(`-Djava.io.tmpdir=${db.tmpDir}`);
        expect(statSync(db.tmpDir).mode & 0o777).toBe(0o700);
        // DynamoDB Local copies its SQLite library there on start; a Java ended by a signal never deletes it.
        expect(readdirSync(db.tmpDir).some((f) => f.endsWith('libsqlite4java.so'))).toBe(true);
        if (end === 'kill') {
          process.kill(db.pid, 'SIGKILL');
          await db.exited;
        }
      } finally {
        await db.stop();
      }
      expect({ end, left: existsSync(db.tmpDir) }).toEqual({ end, left: false });
    }
  }, 120_000);

  it('refuses a relative dataDir', async () => {
    await expect(startDynamoLocal({ dataDir: 'relative/dir' })).rejects.toThrow('dataDir must be absolute');
  });
});
