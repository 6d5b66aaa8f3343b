/**
 * The benchmark counts store round trips by wrapping a client's `send` (`bench/round-trips.ts`):
 * each call is attributed by the tables its command names, ledger or lookups.
 */
import { BatchGetCommand, GetCommand, TransactGetCommand, TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { callName, countRoundTrips, ledgerCallsBetween, operationOf, outcomeOf, tablesOf, type TripLog } from '../../bench/round-trips';

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

describe('naming each call, so an extra round trip says what it was', () => {
  it.each([
    [new TransactWriteCommand({ TransactItems: [] }), 'TransactWriteItems'],
    [new TransactGetCommand({ TransactItems: [] }), 'TransactGetItems'],
    [new GetCommand({ TableName: 'p-ledger', Key: {} }), 'GetItem'],
    [new UpdateCommand({ TableName: 'p-ledger', Key: {}, UpdateExpression: 'SET a = :a' }), 'UpdateItem'],
    [new BatchGetCommand({ RequestItems: {} }), 'BatchGetItem'],
  ])('%# operation name', (command, name) => {
    expect(operationOf(command)).toBe(name);
  });

  const admission = new TransactWriteCommand({
    TransactItems: [
      { Update: { TableName: 'p-ledger', Key: { pk: 'KEY#ws#k', sk: 'RATE#k#2026' }, UpdateExpression: 'ADD n :one' } },
      { Put: { TableName: 'p-holds', Item: { holdId: 'h' } } },
      { Update: { TableName: 'p-ledger', Key: { pk: 'WS#ws_secret', sk: 'BALANCE' }, UpdateExpression: 'ADD n :one' } },
    ],
  }).input;
  const cancelled = (codes: string[]): Error => Object.assign(new Error('cancelled'), { name: 'TransactionCanceledException', CancellationReasons: codes.map((Code) => ({ Code })) });
  it.each([
    ['a refused slice', cancelled(['None', 'None', 'ConditionalCheckFailed']), 'TransactionCanceled[BALANCE:ConditionalCheckFailed]'],
    ['a refused counter and a conflict on the hold', cancelled(['ConditionalCheckFailed', 'TransactionConflict', 'None']), 'TransactionCanceled[RATE:ConditionalCheckFailed,holds:TransactionConflict]'],
    ['another error', Object.assign(new Error('x'), { name: 'ProvisionedThroughputExceededException' }), 'ProvisionedThroughputExceededException'],
  ])('outcome: %s', (_name, err, outcome) => {
    expect(outcomeOf(err, admission)).toBe(outcome);
    expect(outcomeOf(err, admission)).not.toContain('ws_secret');
  });

  it('logs calls only while kept, in order, with how each ended', async () => {
    let fail = false;
    const client = {
      send: async (_command: unknown): Promise<void> => {
        if (fail) throw cancelled(['None', 'None', 'ConditionalCheckFailed']);
      },
    };
    const log: TripLog = { keep: false, calls: [] };
    const counts = countRoundTrips([client], 'p-', log);
    await client.send(new GetCommand({ TableName: 'p-keys', Key: {} }));
    log.keep = true;
    fail = true;
    await expect(client.send(new TransactWriteCommand(admission))).rejects.toThrow('cancelled');
    fail = false;
    await client.send(new TransactWriteCommand(admission));
    await client.send(new GetCommand({ TableName: 'p-catalog', Key: {} }));
    expect(counts).toEqual({ ledger: 2, lookups: 2 });
    expect(log.calls.map(callName)).toEqual(['TransactWriteItems→TransactionCanceled[BALANCE:ConditionalCheckFailed]', 'TransactWriteItems', 'GetItem']);
    expect(ledgerCallsBetween(log, 1, 4)).toEqual(['TransactWriteItems→TransactionCanceled[BALANCE:ConditionalCheckFailed]', 'TransactWriteItems']);
    expect(ledgerCallsBetween(log, 2, 3)).toEqual(['TransactWriteItems']);
  });
});
