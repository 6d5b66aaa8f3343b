/**
 * Creates Sluice's tables in DynamoDB Local from the same schema module the CDK constructs use,
 * so local mode and tests run against the keys, indexes and stream that are deployed.
 */
import {
  type AttributeDefinition,
  CreateTableCommand,
  type CreateTableCommandInput,
  DescribeTableCommand,
  DescribeTimeToLiveCommand,
  DynamoDBClient,
  type KeySchemaElement,
  ListTablesCommand,
  ResourceInUseException,
  type TableDescription,
  UpdateTableCommand,
  UpdateTimeToLiveCommand,
} from '@aws-sdk/client-dynamodb';
import { ALL_TABLES, type IndexSchema, type KeyAttribute, type TableSchema, tableName } from '../lambdas/shared/schema';

/**
 * A DynamoDB client for DynamoDB Local. The credentials are placeholders (DynamoDB Local checks
 * only that some are present, and `-sharedDb` ignores them), and they keep the SDK from
 * searching the machine for real ones.
 */
export function makeDynamoClient(endpoint: string): DynamoDBClient {
  return new DynamoDBClient({
    endpoint,
    region: 'local',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    // A retry covers a loaded JVM's occasional slow answer; more would only hide a dead process.
    // Hundreds of concurrent transactions (the race tests) queue for the JVM's accept loop on a
    // loaded two-core machine, so connecting is given ten seconds.
    maxAttempts: 3,
    requestHandler: { connectionTimeout: 10_000, requestTimeout: 30_000, throwOnRequestTimeout: true },
  });
}

/** A table exists with keys other than the schema's, which no update can change. */
export class TableSchemaDriftError extends Error {
  override readonly name = 'TableSchemaDriftError';
}

const ACTIVE_TIMEOUT_MS = 30_000;

/** Options for {@link ensureTables}. */
export interface EnsureTablesOptions {
  /**
   * Give every table a NEW_IMAGE stream, as a global table's replicas all have one: the local
   * replicator (`npm run start:regions`) copies writes by reading them. @default the schema's
   */
  readonly streamEveryTable?: boolean;
}

/**
 * Creates every table of `ALL_TABLES` named `<prefix><name>` that does not exist yet, and waits
 * until all are ACTIVE. Existing tables are brought up to the schema where DynamoDB allows it
 * (a missing index or stream is added); a table whose keys differ is an error, since keys cannot
 * change in place.
 *
 * @throws TableSchemaDriftError when an existing table's key schema differs from the schema's.
 */
export async function ensureTables(client: DynamoDBClient, prefix: string, options: EnsureTablesOptions = {}): Promise<void> {
  const existing = await listTables(client);
  await Promise.all(
    ALL_TABLES.map(async (declared) => {
      // Global tables stream every replica (their replication reads the streams).
      const schema = options.streamEveryTable === true ? { ...declared, stream: true } : declared;
      const name = tableName(prefix, schema.name);
      if (existing.has(name)) {
        await reconcile(client, schema, name);
      } else {
        try {
          await client.send(new CreateTableCommand(createTableInput(schema, name)));
        } catch (err) {
          // Another process (a second test worker, a concurrent `npm start`) created it first.
          if (!(err instanceof ResourceInUseException)) throw err;
        }
      }
      await waitActive(client, name);
      if (schema.ttlAttribute !== undefined) await enableTtl(client, name, schema.ttlAttribute);
    }),
  );
}

/** The CreateTable input for one schema entry (PAY_PER_REQUEST, each index with the schema's projection). */
export function createTableInput(schema: TableSchema, name: string): CreateTableCommandInput {
  return {
    TableName: name,
    BillingMode: 'PAY_PER_REQUEST',
    AttributeDefinitions: attributeDefinitions(schema),
    KeySchema: keySchema(schema.partitionKey, schema.sortKey),
    GlobalSecondaryIndexes:
      schema.indexes.length === 0
        ? undefined
        : schema.indexes.map((index) => ({
            IndexName: index.indexName,
            KeySchema: keySchema(index.partitionKey, index.sortKey),
            Projection: { ProjectionType: index.projection ?? 'ALL' },
          })),
    StreamSpecification: schema.stream ? { StreamEnabled: true, StreamViewType: 'NEW_IMAGE' } : undefined,
  };
}

async function listTables(client: DynamoDBClient): Promise<Set<string>> {
  const names = new Set<string>();
  let start: string | undefined;
  do {
    const page = await client.send(new ListTablesCommand({ ExclusiveStartTableName: start }));
    for (const name of page.TableNames ?? []) names.add(name);
    start = page.LastEvaluatedTableName;
  } while (start !== undefined);
  return names;
}

function keySchema(partition: KeyAttribute, sort?: KeyAttribute): KeySchemaElement[] {
  const keys: KeySchemaElement[] = [{ AttributeName: partition.name, KeyType: 'HASH' }];
  if (sort !== undefined) keys.push({ AttributeName: sort.name, KeyType: 'RANGE' });
  return keys;
}

function indexAttributes(index: IndexSchema): KeyAttribute[] {
  return index.sortKey === undefined ? [index.partitionKey] : [index.partitionKey, index.sortKey];
}

function attributeDefinitions(schema: TableSchema, indexes: readonly IndexSchema[] = schema.indexes): AttributeDefinition[] {
  const all = [schema.partitionKey, ...(schema.sortKey ? [schema.sortKey] : []), ...indexes.flatMap(indexAttributes)];
  const byName = new Map<string, AttributeDefinition>();
  for (const attr of all) byName.set(attr.name, { AttributeName: attr.name, AttributeType: attr.type });
  return [...byName.values()];
}

function sameKeys(actual: readonly KeySchemaElement[] | undefined, expected: readonly KeySchemaElement[]): boolean {
  if (actual === undefined || actual.length !== expected.length) return false;
  return expected.every((key) =>
    actual.some((a) => a.AttributeName === key.AttributeName && a.KeyType === key.KeyType),
  );
}

/**
 * Brings a table made by an older version of the schema (a persistent `.dynamodb/` folder) up to
 * date: indexes and the stream can be added in place, an index the schema no longer has removed;
 * keys cannot change. (A table the schema no longer has, such as the holds table requests' rows
 * replaced, is left alone: nothing reads it.)
 */
async function reconcile(client: DynamoDBClient, schema: TableSchema, name: string): Promise<void> {
  let table = await describe(client, name);
  if (!sameKeys(table.KeySchema, keySchema(schema.partitionKey, schema.sortKey))) {
    throw new TableSchemaDriftError(
      `table ${name} exists with a different key schema; delete the local data folder (.dynamodb/) to recreate it`,
    );
  }
  for (const gsi of table.GlobalSecondaryIndexes ?? []) {
    if (schema.indexes.some((index) => index.indexName === gsi.IndexName)) continue;
    await client.send(new UpdateTableCommand({ TableName: name, GlobalSecondaryIndexUpdates: [{ Delete: { IndexName: gsi.IndexName } }] }));
    table = await waitActive(client, name);
  }
  for (const index of schema.indexes) {
    const present = table.GlobalSecondaryIndexes?.find((gsi) => gsi.IndexName === index.indexName);
    if (present !== undefined) {
      if (!sameKeys(present.KeySchema, keySchema(index.partitionKey, index.sortKey)) || present.Projection?.ProjectionType !== (index.projection ?? 'ALL')) {
        throw new TableSchemaDriftError(
          `index ${index.indexName} of ${name} has different keys or projection; delete the local data folder (.dynamodb/) to recreate it`,
        );
      }
      continue;
    }
    // DynamoDB creates one index per UpdateTable call.
    await client.send(
      new UpdateTableCommand({
        TableName: name,
        AttributeDefinitions: attributeDefinitions(schema, [index]),
        GlobalSecondaryIndexUpdates: [
          {
            Create: {
              IndexName: index.indexName,
              KeySchema: keySchema(index.partitionKey, index.sortKey),
              Projection: { ProjectionType: index.projection ?? 'ALL' },
            },
          },
        ],
      }),
    );
    table = await waitActive(client, name);
  }
  const streaming = table.StreamSpecification?.StreamEnabled === true;
  if (schema.stream && (!streaming || table.StreamSpecification?.StreamViewType !== 'NEW_IMAGE')) {
    if (streaming) {
      throw new TableSchemaDriftError(
        `table ${name} streams ${table.StreamSpecification?.StreamViewType}, not NEW_IMAGE; delete the local data folder (.dynamodb/)`,
      );
    }
    await client.send(
      new UpdateTableCommand({ TableName: name, StreamSpecification: { StreamEnabled: true, StreamViewType: 'NEW_IMAGE' } }),
    );
  }
}

async function describe(client: DynamoDBClient, name: string): Promise<TableDescription> {
  const { Table } = await client.send(new DescribeTableCommand({ TableName: name }));
  if (Table === undefined) throw new Error(`DescribeTable returned no table for ${name}`);
  return Table;
}

async function waitActive(client: DynamoDBClient, name: string): Promise<TableDescription> {
  const deadline = Date.now() + ACTIVE_TIMEOUT_MS;
  for (;;) {
    const table = await describe(client, name);
    const indexesActive = (table.GlobalSecondaryIndexes ?? []).every((gsi) => gsi.IndexStatus === 'ACTIVE');
    if (table.TableStatus === 'ACTIVE' && indexesActive) return table;
    if (Date.now() > deadline) throw new Error(`table ${name} is not ACTIVE after ${ACTIVE_TIMEOUT_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function enableTtl(client: DynamoDBClient, name: string, attribute: string): Promise<void> {
  const { TimeToLiveDescription: ttl } = await client.send(new DescribeTimeToLiveCommand({ TableName: name }));
  if (ttl?.TimeToLiveStatus === 'ENABLED' || ttl?.TimeToLiveStatus === 'ENABLING') {
    if (ttl.AttributeName === attribute) return;
  }
  await client.send(
    new UpdateTimeToLiveCommand({ TableName: name, TimeToLiveSpecification: { Enabled: true, AttributeName: attribute } }),
  );
}
