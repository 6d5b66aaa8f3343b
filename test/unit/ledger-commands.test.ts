/**
 * The DynamoDB ledger's command inputs, asserted with aws-sdk-client-mock: what admission and
 * settlement ask DynamoDB to do, conditions included. Behaviour against a real DynamoDB (Local)
 * belongs to the integration tests.
 */
import { DynamoDBClient, TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import {
  BatchGetCommand,
  DynamoDBDocumentClient,
  GetCommand,
  TransactWriteCommand,
  UpdateCommand,
  type TransactWriteCommandInput,
} from '@aws-sdk/lib-dynamodb';
import { mockClient } from 'aws-sdk-client-mock';
import { DynamoLedger } from '../../lambdas/adapters/dynamo-ledger';
import type { AdmissionLimits, AdmitRequest, Settlement } from '../../lambdas/gateway/ports';
import type { HoldRecord } from '../../lambdas/shared/records';

const ddb = mockClient(DynamoDBDocumentClient);
const doc = DynamoDBDocumentClient.from(new DynamoDBClient({ region: 'us-east-1', credentials: { accessKeyId: 'x', secretAccessKey: 'y' } }));
const TABLES = { ledger: 'L', holds: 'H', usage: 'U' } as const;

const NOW = Date.UTC(2026, 10, 22, 12, 34, 56, 789);
const SECOND = String(Math.floor(NOW / 1000));
const RATE_SK = `RATE#k1#${Math.floor(NOW / 60_000)}`;
const PK = 'WS#ws1';
const CAP = 5000 * 1_000_000;
const NEED = 2_000_000;

const LIMITS: AdmissionLimits = {
  keyLimitMicros: 10_000_000,
  keyWindow: 'monthly',
  memberLimitMicros: 50_000_000,
  workspaceLimitMicros: 100_000_000,
  spendRateCapMicros: CAP,
  keyRatePerMinute: 60,
};

const request = (over: Partial<AdmitRequest> = {}): AdmitRequest => ({
  holdId: 'req_1',
  workspaceId: 'ws1',
  keyId: 'k1',
  memberId: 'm1',
  family: 'chat_completions',
  requestedModel: 'openai/gpt-4.1',
  amountMicros: NEED,
  inputMicros: 500_000,
  byok: false,
  limits: LIMITS,
  now: NOW,
  expiresAt: NOW + 600_000,
  ...over,
});

const cancelled = (...codes: string[]): TransactionCanceledException =>
  new TransactionCanceledException({ message: 'Transaction cancelled', $metadata: {}, CancellationReasons: codes.map((Code) => ({ Code })) });

type Items = NonNullable<TransactWriteCommandInput['TransactItems']>;
const transactions = (): Items[] => ddb.commandCalls(TransactWriteCommand).map((c) => c.args[0].input.TransactItems ?? []);

beforeEach(() => {
  ddb.reset();
});

describe('admit: the transaction', () => {
  test('rate counter, hold, balance and every limit window, each conditional', async () => {
    ddb.on(TransactWriteCommand).resolves({});
    const outcome = await new DynamoLedger(doc, TABLES).admit(request());

    const all = transactions();
    expect(all).toHaveLength(1);
    const items = all[0] as Items;
    expect(items).toHaveLength(6);

    // The key's request counter for this minute.
    expect(items[0]).toEqual({
      Update: {
        TableName: 'L',
        Key: { pk: PK, sk: RATE_SK },
        UpdateExpression: 'ADD requests :one SET #ttl = :ttl',
        ConditionExpression: 'attribute_not_exists(requests) OR requests < :limit',
        ExpressionAttributeNames: { '#ttl': 'ttl' },
        ExpressionAttributeValues: { ':one': 1, ':limit': 60, ':ttl': Math.floor(NOW / 1000) + 180 },
      },
    });

    // The hold, only if no hold of that id exists.
    const windows = ['KEYWIN#k1#M2026-11', 'MEMBERMONTH#m1#2026-11', 'MONTH#2026-11'];
    const hold: HoldRecord = {
      holdId: 'req_1',
      workspaceId: 'ws1',
      keyId: 'k1',
      memberId: 'm1',
      family: 'chat_completions',
      requestedModel: 'openai/gpt-4.1',
      amountMicros: NEED,
      inputMicros: 500_000,
      windows,
      byok: false,
      createdAt: NOW,
      expiresAt: NOW + 600_000,
      open: '1',
      ttl: Math.floor((NOW + 600_000) / 1000) + 7 * 86_400,
    };
    expect(items[1]).toEqual({ Put: { TableName: 'H', Item: hold, ConditionExpression: 'attribute_not_exists(holdId)' } });
    expect(outcome).toEqual({ admitted: true, hold });

    // The balance covers the need, and the spend rate leaves room for it.
    const balance = items[2]?.Update;
    expect(balance?.TableName).toBe('L');
    expect(balance?.Key).toEqual({ pk: PK, sk: 'BALANCE' });
    expect(balance?.ConditionExpression).toBe('availableMicros >= :need AND (attribute_not_exists(rateTotal) OR rateTotal <= :rateMax)');
    expect(balance?.ExpressionAttributeValues).toEqual({ ':need': NEED, ':zero': 0, ':rateMax': CAP - NEED });
    expect(balance?.ExpressionAttributeNames).toEqual({ '#sec': SECOND });
    expect(balance?.UpdateExpression).toContain('availableMicros = availableMicros - :need');
    expect(balance?.UpdateExpression).toContain('heldMicros = heldMicros + :need');
    expect(balance?.UpdateExpression).toContain('rateBuckets.#sec = if_not_exists(rateBuckets.#sec, :zero) + :need');

    // Each window: used + need <= limit, as used <= limit - need.
    const limits = [LIMITS.keyLimitMicros, LIMITS.memberLimitMicros, LIMITS.workspaceLimitMicros] as number[];
    windows.forEach((sk, i) => {
      const w = items[3 + i]?.Update;
      expect(w?.Key).toEqual({ pk: PK, sk });
      expect(w?.TableName).toBe('L');
      expect(w?.ConditionExpression).toBe('attribute_not_exists(usedMicros) OR usedMicros <= :max');
      expect(w?.ExpressionAttributeValues?.[':max']).toBe((limits[i] as number) - NEED);
      expect(w?.ExpressionAttributeValues?.[':amount']).toBe(NEED);
      expect(w?.UpdateExpression).toContain('ADD heldMicros :amount, usedMicros :amount');
      // Windows are kept 400 days past their end (December 1st for a November window).
      expect(w?.ExpressionAttributeValues?.[':ttl']).toBe(Date.UTC(2026, 11, 1) / 1000 + 400 * 86_400);
    });
  });

  test('windows without a limit are counted but carry no condition', async () => {
    ddb.on(TransactWriteCommand).resolves({});
    await new DynamoLedger(doc, TABLES).admit(
      request({ memberId: undefined, limits: { keyWindow: 'never', spendRateCapMicros: CAP, keyRatePerMinute: 60 } }),
    );
    const items = transactions()[0] as Items;
    expect(items).toHaveLength(5); // rate, hold, balance, key window, workspace month
    const key = items[3]?.Update;
    expect(key?.Key).toEqual({ pk: PK, sk: 'KEYWIN#k1#ALL' });
    expect(key?.ConditionExpression).toBeUndefined();
    expect(key?.ExpressionAttributeValues).not.toHaveProperty(':max');
    // A window that never ends has no expiry.
    expect(key?.ExpressionAttributeValues).not.toHaveProperty(':ttl');
    expect(key?.UpdateExpression).not.toContain('#ttl');
    const ws = items[4]?.Update;
    expect(ws?.Key).toEqual({ pk: PK, sk: 'MONTH#2026-11' });
    expect(ws?.ConditionExpression).toBeUndefined();
  });

  test('only the limits that are set carry a condition', async () => {
    ddb.on(TransactWriteCommand).resolves({});
    await new DynamoLedger(doc, TABLES).admit(request({ limits: { ...LIMITS, keyLimitMicros: undefined, workspaceLimitMicros: undefined } }));
    const items = transactions()[0] as Items;
    const conditions = items.slice(3).map((i) => [i.Update?.Key?.sk, i.Update?.ExpressionAttributeValues?.[':max']]);
    expect(conditions).toEqual([
      ['KEYWIN#k1#M2026-11', undefined],
      ['MEMBERMONTH#m1#2026-11', 50_000_000 - NEED],
      ['MONTH#2026-11', undefined],
    ]);
  });

  test('BYOK: rate counter and hold only; no balance, no window', async () => {
    ddb.on(TransactWriteCommand).resolves({});
    const outcome = await new DynamoLedger(doc, TABLES).admit(request({ byok: true }));
    const items = transactions()[0] as Items;
    expect(items).toHaveLength(2);
    expect(items[0]?.Update?.Key).toEqual({ pk: PK, sk: RATE_SK });
    expect(items[1]?.Put?.TableName).toBe('H');
    expect(items[1]?.Put?.Item).toMatchObject({ byok: true, windows: [] });
    expect(outcome).toMatchObject({ admitted: true, hold: { byok: true, windows: [] } });
  });

  test('a transaction conflict is retried', async () => {
    ddb.on(TransactWriteCommand).rejectsOnce(cancelled('None', 'TransactionConflict', 'None', 'None', 'None', 'None')).resolves({});
    const outcome = await new DynamoLedger(doc, TABLES).admit(request());
    expect(outcome.admitted).toBe(true);
    expect(transactions()).toHaveLength(2);
    expect(ddb.commandCalls(BatchGetCommand)).toHaveLength(0);
  });

  test('a balance item without the bucket map gets one, then admission is retried', async () => {
    ddb.on(TransactWriteCommand).rejectsOnce(cancelled('None', 'None', 'ValidationError', 'None', 'None', 'None')).resolves({});
    ddb.on(UpdateCommand).resolves({});
    const outcome = await new DynamoLedger(doc, TABLES).admit(request());
    expect(outcome.admitted).toBe(true);
    const init = ddb.commandCalls(UpdateCommand);
    expect(init).toHaveLength(1);
    expect(init[0]?.args[0].input).toEqual({
      TableName: 'L',
      Key: { pk: PK, sk: 'BALANCE' },
      UpdateExpression: 'SET rateBuckets = if_not_exists(rateBuckets, :empty)',
      ConditionExpression: 'attribute_exists(pk)',
      ExpressionAttributeValues: { ':empty': {} },
    });
    expect(transactions()).toHaveLength(2);
  });
});

describe('admit: refusals', () => {
  const balanceItem = (available: number, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
    pk: PK,
    sk: 'BALANCE',
    availableMicros: available,
    heldMicros: 0,
    rateBuckets: {},
    ...extra,
  });

  test('need above the spend rate cap: refused from a consistent read, without a transaction', async () => {
    ddb.on(BatchGetCommand).resolves({ Responses: { L: [balanceItem(10 * CAP)] } });
    const need = CAP + 1;
    const outcome = await new DynamoLedger(doc, TABLES).admit(request({ amountMicros: need, limits: { keyWindow: 'monthly', spendRateCapMicros: CAP, keyRatePerMinute: 60 } }));
    expect(transactions()).toHaveLength(0);
    expect(outcome).toEqual({ admitted: false, refusal: { kind: 'spend_rate_exceeded', retryAfterSeconds: 1, capMicros: CAP } });
    const read = ddb.commandCalls(BatchGetCommand)[0]?.args[0].input;
    expect(read?.RequestItems?.L?.ConsistentRead).toBe(true);
    expect(read?.RequestItems?.L?.Keys).toEqual([
      { pk: PK, sk: RATE_SK },
      { pk: PK, sk: 'BALANCE' },
      { pk: PK, sk: 'KEYWIN#k1#M2026-11' },
      { pk: PK, sk: 'MEMBERMONTH#m1#2026-11' },
      { pk: PK, sk: 'MONTH#2026-11' },
    ]);
  });

  test('need above the cap and above the balance: the 402 wins (SPEC Errors rule 2)', async () => {
    ddb.on(BatchGetCommand).resolves({ Responses: { L: [balanceItem(100)] } });
    const outcome = await new DynamoLedger(doc, TABLES).admit(request({ amountMicros: CAP + 1 }));
    expect(transactions()).toHaveLength(0);
    expect(outcome).toEqual({ admitted: false, refusal: { kind: 'insufficient_credit', availableMicros: 100 } });
  });

  test('need above the key limit: key_limit_exceeded without a transaction', async () => {
    ddb.on(BatchGetCommand).resolves({
      Responses: { L: [balanceItem(10 * CAP), { pk: PK, sk: 'KEYWIN#k1#M2026-11', settledMicros: 3, heldMicros: 4, usedMicros: 7 }] },
    });
    const outcome = await new DynamoLedger(doc, TABLES).admit(request({ amountMicros: LIMITS.keyLimitMicros as number + 1 }));
    expect(transactions()).toHaveLength(0);
    expect(outcome).toEqual({
      admitted: false,
      refusal: { kind: 'key_limit_exceeded', settledMicros: 3, heldMicros: 4, limitMicros: LIMITS.keyLimitMicros },
    });
  });

  test.each<[string, Record<string, unknown>[], unknown]>([
    ['request rate', [{ pk: PK, sk: RATE_SK, requests: 60 }, balanceItem(0)], { kind: 'rate_limit_exceeded', retryAfterSeconds: 4 }],
    ['balance', [balanceItem(NEED - 1)], { kind: 'insufficient_credit', availableMicros: NEED - 1 }],
    ['no balance item', [], { kind: 'insufficient_credit', availableMicros: 0 }],
    [
      'member month',
      [balanceItem(NEED), { pk: PK, sk: 'MEMBERMONTH#m1#2026-11', usedMicros: 50_000_000 - NEED + 1 }],
      { kind: 'member_limit_exceeded', usedMicros: 50_000_000 - NEED + 1, limitMicros: 50_000_000 },
    ],
    [
      'workspace month',
      [balanceItem(NEED), { pk: PK, sk: 'MONTH#2026-11', usedMicros: 100_000_000 }],
      { kind: 'workspace_limit_exceeded', usedMicros: 100_000_000, limitMicros: 100_000_000 },
    ],
    [
      'spend rate (a live bucket)',
      [balanceItem(CAP, { rateBuckets: { [SECOND]: CAP - NEED + 1 } })],
      { kind: 'spend_rate_exceeded', retryAfterSeconds: 61, capMicros: CAP },
    ],
  ])('a cancelled admission is diagnosed: %s', async (_l, found, refusal) => {
    ddb.on(TransactWriteCommand).rejects(cancelled('ConditionalCheckFailed', 'None', 'ConditionalCheckFailed', 'None', 'None', 'None'));
    ddb.on(BatchGetCommand).resolves({ Responses: { L: found } });
    const outcome = await new DynamoLedger(doc, TABLES).admit(request());
    expect(outcome).toEqual({ admitted: false, refusal });
    expect(transactions()).toHaveLength(1);
  });
});

describe('settle', () => {
  const hold: HoldRecord = {
    holdId: 'req_1',
    workspaceId: 'ws1',
    keyId: 'k1',
    memberId: 'm1',
    family: 'chat_completions',
    requestedModel: 'profile/fast',
    amountMicros: NEED,
    inputMicros: 500_000,
    windows: ['KEYWIN#k1#M2026-11', 'MEMBERMONTH#m1#2026-11', 'MONTH#2026-11'],
    byok: false,
    createdAt: NOW,
    expiresAt: NOW + 600_000,
    open: '1',
    ttl: 1,
  };
  const settlement = (charge: number, over: Partial<Settlement> = {}): Settlement => ({
    counts: { inputTokens: 100, cachedInputTokens: 10, outputTokens: 50, reasoningTokens: 5 },
    chargeMicros: charge,
    servedBy: 'openai/gpt-4.1',
    provider: 'openai',
    stream: false,
    status: 200,
    outcome: 'ok',
    attempts: 1,
    now: NOW + 1234,
    ...over,
  });

  test('deletes the hold if it exists, returns the rest, and moves every window by charge - hold', async () => {
    ddb.on(TransactWriteCommand).resolves({});
    ddb.on(GetCommand).resolves({ Item: { rateBuckets: {} } });
    const charge = 1_500_000;
    await expect(new DynamoLedger(doc, TABLES).settle(hold, settlement(charge))).resolves.toBe(true);
    const all = transactions();
    expect(all).toHaveLength(1);
    const items = all[0] as Items;
    expect(items).toHaveLength(6);
    // Conditional on the hold still existing (idempotence) and on its amount (a stale copy of a
    // grown hold cannot release the wrong sum).
    expect(items[0]).toEqual({
      Delete: {
        TableName: 'H',
        Key: { holdId: 'req_1' },
        ConditionExpression: 'attribute_exists(holdId) AND amountMicros = :amount',
        ExpressionAttributeValues: { ':amount': NEED },
      },
    });
    expect(items[1]).toEqual({
      Update: {
        TableName: 'L',
        Key: { pk: PK, sk: 'BALANCE' },
        UpdateExpression: 'SET availableMicros = availableMicros + :release, heldMicros = heldMicros - :hold, spentMicros = spentMicros + :charge',
        ConditionExpression: 'availableMicros >= :deficit',
        ExpressionAttributeValues: { ':release': NEED - charge, ':hold': NEED, ':charge': charge, ':deficit': 0 },
      },
    });
    hold.windows.forEach((sk, i) => {
      expect(items[2 + i]).toEqual({
        Update: {
          TableName: 'L',
          Key: { pk: PK, sk },
          UpdateExpression: 'ADD heldMicros :negHold, settledMicros :charge, usedMicros :delta',
          ExpressionAttributeValues: { ':negHold': -NEED, ':charge': charge, ':delta': charge - NEED },
        },
      });
    });
    const usage = items[5]?.Put;
    expect(usage?.TableName).toBe('U');
    expect(usage?.ConditionExpression).toBeUndefined();
    expect(usage?.Item).toMatchObject({
      workspaceId: 'ws1',
      sk: `${new Date(NOW).toISOString()}#req_1`,
      requestId: 'req_1',
      keyId: 'k1',
      memberId: 'm1',
      family: 'chat_completions',
      requestedModel: 'profile/fast',
      servedBy: 'openai/gpt-4.1',
      inputTokens: 100,
      cachedInputTokens: 10,
      outputTokens: 50,
      reasoningTokens: 5,
      chargeMicros: charge,
      holdMicros: NEED,
      durationMs: 1234,
      byok: false,
    });
    expect(usage?.Item).not.toHaveProperty('uncollectedMicros');
  });

  test('a charge above the hold may take only what the balance has (deficit condition)', async () => {
    ddb.on(TransactWriteCommand).resolves({});
    ddb.on(GetCommand).resolves({ Item: {} });
    await new DynamoLedger(doc, TABLES).settle(hold, settlement(NEED + 700));
    const balance = (transactions()[0] as Items)[1]?.Update;
    expect(balance?.ExpressionAttributeValues).toEqual({ ':release': -700, ':hold': NEED, ':charge': NEED + 700, ':deficit': 700 });
  });

  test('when the balance cannot cover the excess, what is there is collected and the rest recorded as uncollected', async () => {
    ddb.on(TransactWriteCommand).rejectsOnce(cancelled('None', 'ConditionalCheckFailed', 'None', 'None', 'None', 'None')).resolves({});
    ddb.on(GetCommand).resolves({ Item: { availableMicros: 300 } });
    await new DynamoLedger(doc, TABLES).settle(hold, settlement(NEED + 1000));
    const all = transactions();
    expect(all).toHaveLength(2);
    const second = all[1] as Items;
    expect(second[1]?.Update?.ExpressionAttributeValues).toEqual({ ':release': -300, ':hold': NEED, ':charge': NEED + 300, ':deficit': 300 });
    expect(second[2]?.Update?.ExpressionAttributeValues?.[':delta']).toBe(300);
    expect(second[5]?.Put?.Item).toMatchObject({ chargeMicros: NEED + 300, uncollectedMicros: 700 });
  });

  test('already settled (the hold Delete failed its condition and the hold is gone): resolves false, one transaction', async () => {
    ddb.on(TransactWriteCommand).rejects(cancelled('ConditionalCheckFailed', 'None', 'None', 'None', 'None', 'None'));
    ddb.on(GetCommand).resolves({});
    await expect(new DynamoLedger(doc, TABLES).settle(hold, settlement(1))).resolves.toBe(false);
    expect(transactions()).toHaveLength(1);
    const reads = ddb.commandCalls(GetCommand).map((c) => c.args[0].input);
    expect(reads).toEqual([{ TableName: 'H', Key: { holdId: 'req_1' }, ConsistentRead: true }]);
  });

  test('the stored hold has grown since this copy: settled again at the stored amount', async () => {
    const grown = NEED + 500;
    const charge = 1_000_000;
    ddb.on(TransactWriteCommand).rejectsOnce(cancelled('ConditionalCheckFailed', 'None', 'None', 'None', 'None', 'None')).resolves({});
    ddb.on(GetCommand, { TableName: 'H' }).resolves({ Item: { ...hold, amountMicros: grown } });
    ddb.on(GetCommand, { TableName: 'L' }).resolves({ Item: { rateBuckets: {} } });
    await expect(new DynamoLedger(doc, TABLES).settle(hold, settlement(charge))).resolves.toBe(true);
    const all = transactions();
    expect(all).toHaveLength(2);
    const second = all[1] as Items;
    expect(second[0]?.Delete?.ExpressionAttributeValues).toEqual({ ':amount': grown });
    expect(second[1]?.Update?.ExpressionAttributeValues).toEqual({ ':release': grown - charge, ':hold': grown, ':charge': charge, ':deficit': 0 });
    for (const w of second.slice(2, 5)) {
      expect(w.Update?.ExpressionAttributeValues).toEqual({ ':negHold': -grown, ':charge': charge, ':delta': charge - grown });
    }
    expect(second[5]?.Put?.Item).toMatchObject({ holdMicros: grown, chargeMicros: charge });
  });

  test('BYOK: the hold is deleted and a usage row written; no balance, no windows, no charge', async () => {
    ddb.on(TransactWriteCommand).resolves({});
    await new DynamoLedger(doc, TABLES).settle({ ...hold, byok: true, windows: [] }, settlement(999));
    const items = transactions()[0] as Items;
    expect(items.map((i) => Object.keys(i)[0])).toEqual(['Delete', 'Put']);
    expect(items[1]?.Put?.Item).toMatchObject({ byok: true, chargeMicros: 0 });
    expect(ddb.commandCalls(GetCommand)).toHaveLength(0);
  });

  test('a conflict is retried until it goes through', async () => {
    ddb.on(TransactWriteCommand).rejectsOnce(cancelled('None', 'TransactionConflict', 'None', 'None', 'None', 'None')).resolves({});
    ddb.on(GetCommand).resolves({ Item: {} });
    await new DynamoLedger(doc, TABLES).settle(hold, settlement(1));
    expect(transactions()).toHaveLength(2);
  });
});
