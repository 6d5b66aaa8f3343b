/**
 * The lean client and the SDK's DocumentClient side by side on DynamoDB Local: the same items
 * written, the same results read back, the same errors for the same failures.
 */
import { BatchGetCommand, GetCommand, PutCommand, TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { wireClient } from '../../lambdas/adapters/dynamo-client';
import type { DynamoWire } from '../../lambdas/adapters/dynamo-wire';
import { tableName } from '../../lambdas/shared/schema';
import { testTables, type TestTables } from '../support/dynamo';

let tables: TestTables;
let wire: DynamoWire;
let ledger: string;

beforeAll(async () => {
  tables = await testTables();
  wire = wireClient({ dynamoEndpoint: tables.endpoint }, tables.doc);
  ledger = tableName(tables.prefix, 'ledger');
});

afterAll(() => {
  wire.destroy();
  tables.client.destroy();
});

const ITEM = { pk: 'WS#wire', sk: 'A', n: 12_345_678_901, s: 'héllo', list: [1, 'two', { three: true }], map: { nested: { deep: 0 } }, flag: false, nothing: null };

it('writes what the SDK reads, and reads what the SDK wrote', async () => {
  await wire.send(new TransactWriteCommand({ TransactItems: [{ Put: { TableName: ledger, Item: ITEM } }] }));
  const sdk = await tables.doc.send(new GetCommand({ TableName: ledger, Key: { pk: ITEM.pk, sk: ITEM.sk }, ConsistentRead: true }));
  expect(sdk.Item).toEqual(ITEM);
  await tables.doc.send(new PutCommand({ TableName: ledger, Item: { ...ITEM, sk: 'B' } }));
  const ours = await wire.send(new GetCommand({ TableName: ledger, Key: { pk: ITEM.pk, sk: 'B' }, ConsistentRead: true }));
  expect(ours.Item).toEqual({ ...ITEM, sk: 'B' });
});

it('answers an update, a missing item and a batch as the SDK does', async () => {
  const update = (): UpdateCommand =>
    new UpdateCommand({ TableName: ledger, Key: { pk: 'WS#wire', sk: 'C' }, UpdateExpression: 'ADD requests :one SET #m = :m', ExpressionAttributeNames: { '#m': 'm' }, ExpressionAttributeValues: { ':one': 1, ':m': { a: [1] } }, ReturnValues: 'ALL_NEW' });
  const ours = await wire.send(update());
  const sdk = await tables.doc.send(update());
  expect(ours.Attributes).toEqual({ pk: 'WS#wire', sk: 'C', requests: 1, m: { a: [1] } });
  expect(sdk.Attributes).toEqual({ ...ours.Attributes, requests: 2 });

  const missing = new GetCommand({ TableName: ledger, Key: { pk: 'WS#wire', sk: 'nope' } });
  expect((await wire.send(missing)).Item).toBeUndefined();

  const batch = (): BatchGetCommand => new BatchGetCommand({ RequestItems: { [ledger]: { Keys: [{ pk: 'WS#wire', sk: 'A' }, { pk: 'WS#wire', sk: 'C' }, { pk: 'WS#wire', sk: 'nope' }], ConsistentRead: true } } });
  const sortBySk = (items: Record<string, unknown>[] | undefined): Record<string, unknown>[] => [...(items ?? [])].sort((a, b) => String(a.sk).localeCompare(String(b.sk)));
  const oursBatch = await wire.send(batch());
  const sdkBatch = await tables.doc.send(batch());
  expect(sortBySk(oursBatch.Responses?.[ledger])).toEqual(sortBySk(sdkBatch.Responses?.[ledger]));
  expect(sortBySk(oursBatch.Responses?.[ledger]).map((i) => i.sk)).toEqual(['A', 'C']);
});

it('fails a cancelled transaction and a failed condition with the SDK error names and reasons', async () => {
  const cancelled = (): TransactWriteCommand =>
    new TransactWriteCommand({
      TransactItems: [
        { Update: { TableName: ledger, Key: { pk: 'WS#wire', sk: 'D' }, UpdateExpression: 'ADD n :one', ExpressionAttributeValues: { ':one': 1 } } },
        { ConditionCheck: { TableName: ledger, Key: { pk: 'WS#wire', sk: 'A' }, ConditionExpression: 'n < :max', ExpressionAttributeValues: { ':max': 1 }, ReturnValuesOnConditionCheckFailure: 'ALL_OLD' } },
      ],
    });
  const ours = (await wire.send(cancelled()).catch((e: unknown) => e)) as Error & { CancellationReasons?: unknown[] };
  const sdk = (await tables.doc.send(cancelled()).catch((e: unknown) => e)) as Error & { CancellationReasons?: unknown[] };
  expect(ours.name).toBe('TransactionCanceledException');
  expect(ours.name).toBe(sdk.name);
  expect(ours.message).toBe(sdk.message);
  expect(ours.CancellationReasons).toEqual(sdk.CancellationReasons);
  expect(ours.CancellationReasons?.[1]).toMatchObject({ Code: 'ConditionalCheckFailed', Item: { sk: { S: 'A' }, n: { N: String(ITEM.n) } } });
  // nothing of the cancelled transaction was applied
  expect((await wire.send(new GetCommand({ TableName: ledger, Key: { pk: 'WS#wire', sk: 'D' }, ConsistentRead: true }))).Item).toBeUndefined();

  const conditional = (): UpdateCommand =>
    new UpdateCommand({ TableName: ledger, Key: { pk: 'WS#wire', sk: 'A' }, UpdateExpression: 'SET n = :v', ConditionExpression: 'attribute_not_exists(pk)', ExpressionAttributeValues: { ':v': 1 } });
  const oursCond = (await wire.send(conditional()).catch((e: unknown) => e)) as Error;
  const sdkCond = (await tables.doc.send(conditional()).catch((e: unknown) => e)) as Error;
  expect(oursCond.name).toBe('ConditionalCheckFailedException');
  expect(oursCond.name).toBe(sdkCond.name);
});

it('applies a transaction once when the same client request token is sent twice', async () => {
  const send = (): Promise<unknown> =>
    wire.send(new TransactWriteCommand({ ClientRequestToken: 'wire-idempotency-1', TransactItems: [{ Update: { TableName: ledger, Key: { pk: 'WS#wire', sk: 'E' }, UpdateExpression: 'ADD n :one', ExpressionAttributeValues: { ':one': 1 } } }] }));
  await send();
  await send();
  const got = await wire.send(new GetCommand({ TableName: ledger, Key: { pk: 'WS#wire', sk: 'E' }, ConsistentRead: true }));
  expect(got.Item?.n).toBe(1);
});
