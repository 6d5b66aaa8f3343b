/**
 * The benchmark counts store round trips by wrapping a client's `send` (`bench/round-trips.ts`):
 * each call is attributed by the tables its command names, ledger or lookups.
 */
import { BatchGetCommand, GetCommand, TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { countRoundTrips, tablesOf } from '../../bench/round-trips';

describe('tablesOf', () => {
  it.each([
    ['a single-item command', new GetCommand({ TableName: 'p-keys', Key: { keyHash: 'h' } }).input, ['p-keys']],
    ['a transaction', new TransactWriteCommand({ TransactItems: [{ Put: { TableName: 'p-holds', Item: {} } }, { Update: { TableName: 'p-ledger', Key: {}, UpdateExpression: 'SET a = :a' } }] }).input, ['p-holds', 'p-ledger']],
    ['a batch read', new BatchGetCommand({ RequestItems: { 'p-ledger': { Keys: [] }, 'p-workspaces': { Keys: [] } } }).input, ['p-ledger', 'p-workspaces']],
  ])('%s', (_name, input, tables) => {
    expect([...tablesOf(input)].sort()).toEqual(tables);
  });
});

describe('countRoundTrips', () => {
  it('counts each send once, as the ledger or as a lookup, and still sends it', async () => {
    const sent: unknown[] = [];
    const client = { send: async (command: { input?: unknown }) => void sent.push(command) };
    const counts = countRoundTrips([client], 'p-');
    await client.send(new UpdateCommand({ TableName: 'p-ledger', Key: {}, UpdateExpression: 'SET a = :a' }));
    await client.send(new TransactWriteCommand({ TransactItems: [{ Put: { TableName: 'p-usage', Item: {} } }] }));
    await client.send(new GetCommand({ TableName: 'p-catalog', Key: { pk: 'x' } }));
    expect(counts).toEqual({ ledger: 2, lookups: 1 });
    expect(sent).toHaveLength(3);
  });
});
