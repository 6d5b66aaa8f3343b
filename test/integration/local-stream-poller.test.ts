import { PutCommand } from '@aws-sdk/lib-dynamodb';
import type { DynamoDBBatchResponse, DynamoDBRecord, DynamoDBStreamEvent } from 'aws-lambda';
import { type StreamPoller, startStreamPoller } from '../../local/stream-poller';
import { tableName } from '../../lambdas/shared/schema';
import { usagePk } from '../../lambdas/store/keys';
import { type TestTables, testTables } from '../support/dynamo';

function usageRow(workspaceId: string, requestId: string, chargeMicros: number): Record<string, unknown> {
  return {
    pk: usagePk(workspaceId, requestId),
    workspaceId,
    sk: `2026-11-22T04:00:00.000Z#${requestId}`,
    requestId,
    keyId: 'k1',
    family: 'chat_completions',
    requestedModel: 'local/echo',
    stream: false,
    byok: false,
    status: 200,
    outcome: 'ok',
    inputTokens: 3,
    cachedInputTokens: 0,
    outputTokens: 5,
    reasoningTokens: 0,
    chargeMicros,
    holdMicros: 1000,
    attempts: 1,
    startedAt: 1_795_000_000_000,
    durationMs: 12,
  };
}

describe('stream poller against DynamoDB Local', () => {
  let t: TestTables;
  let poller: StreamPoller | undefined;
  beforeEach(async () => {
    // Fresh tables per test: each stream starts empty.
    t = await testTables();
  });
  afterEach(async () => {
    await poller?.stop();
    poller = undefined;
    t.client.destroy();
  });

  const put = (row: Record<string, unknown>): Promise<unknown> =>
    t.doc.send(new PutCommand({ TableName: tableName(t.prefix, 'usage'), Item: row }));

  it('delivers inserted usage rows in the Lambda event shape', async () => {
    const batches: DynamoDBStreamEvent[] = [];
    poller = await startStreamPoller({
      endpoint: t.endpoint,
      tableName: tableName(t.prefix, 'usage'),
      autoStart: false,
      handler: async (event) => {
        batches.push(event);
      },
    });
    await put(usageRow('w1', 'r1', 11));
    await put(usageRow('w1', 'r2', 22));
    await put(usageRow('w2', 'r3', 33));

    expect(await poller.drain()).toBe(3);
    const records = batches.flatMap((b) => b.Records);
    expect(records.map((r) => r.dynamodb?.NewImage?.requestId?.S)).toEqual(['r1', 'r2', 'r3']);
    const first = records[0] as DynamoDBRecord;
    expect(first).toMatchObject({
      eventName: 'INSERT',
      eventSource: 'aws:dynamodb',
      eventSourceARN: poller.streamArn,
      dynamodb: {
        Keys: { pk: { S: usagePk('w1', 'r1') }, sk: { S: '2026-11-22T04:00:00.000Z#r1' } },
        StreamViewType: 'NEW_IMAGE',
      },
    });
    expect(first.eventID).toEqual(expect.any(String));
    expect(first.dynamodb?.NewImage?.chargeMicros).toEqual({ N: '11' });
    expect(first.dynamodb?.NewImage?.stream).toEqual({ BOOL: false });
    expect(first.dynamodb?.SequenceNumber).toMatch(/^\d+$/);
    expect(typeof first.dynamodb?.ApproximateCreationDateTime).toBe('number');

    // Nothing is delivered twice once handled.
    expect(await poller.drain()).toBe(0);
  });

  it('retries from the first reported batch item failure, keeping what came before', async () => {
    const deliveries: string[] = [];
    let failOnce = true;
    poller = await startStreamPoller({
      endpoint: t.endpoint,
      tableName: tableName(t.prefix, 'usage'),
      autoStart: false,
      handler: async (event): Promise<DynamoDBBatchResponse> => {
        const failures: { itemIdentifier: string }[] = [];
        for (const record of event.Records) {
          const id = record.dynamodb?.NewImage?.requestId?.S ?? '?';
          deliveries.push(id);
          if (id === 'r2' && failOnce) {
            failOnce = false;
            failures.push({ itemIdentifier: record.dynamodb?.SequenceNumber ?? '' });
          }
        }
        return { batchItemFailures: failures };
      },
    });
    await put(usageRow('w1', 'r1', 1));
    await put(usageRow('w1', 'r2', 2));
    await put(usageRow('w1', 'r3', 3));

    await poller.drain();
    // r1 is checkpointed; the retry starts at r2 and includes what followed it in the batch.
    expect(deliveries).toEqual(['r1', 'r2', 'r3', 'r2', 'r3']);
  });

  it('retries the whole batch when the handler throws, and gives up after maxRetries', async () => {
    let calls = 0;
    const logged: string[] = [];
    poller = await startStreamPoller({
      endpoint: t.endpoint,
      tableName: tableName(t.prefix, 'usage'),
      autoStart: false,
      maxRetries: 2,
      log: (m) => logged.push(m),
      handler: async () => {
        calls += 1;
        throw new Error('aggregator down');
      },
    });
    await put(usageRow('w1', 'r1', 1));
    await poller.drain();
    expect(calls).toBe(3); // the first attempt and two retries
    expect(logged.some((m) => m.includes('giving up 1 stream record'))).toBe(true);
    expect(await poller.drain()).toBe(0);
  });

  it('polls in the background until stopped', async () => {
    const seen: string[] = [];
    let arrived: () => void = () => undefined;
    const delivered = new Promise<void>((resolve) => {
      arrived = resolve;
    });
    poller = await startStreamPoller({
      endpoint: t.endpoint,
      tableName: tableName(t.prefix, 'usage'),
      intervalMs: 20,
      handler: async (event) => {
        for (const r of event.Records) seen.push(r.dynamodb?.NewImage?.requestId?.S ?? '?');
        if (seen.includes('bg1')) arrived();
      },
    });
    await put(usageRow('w9', 'bg1', 1));
    await delivered;
    await poller.stop();
    const count = seen.length;
    await put(usageRow('w9', 'bg2', 1));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(seen).toHaveLength(count);
    expect(seen).toEqual(['bg1']);
  });

  it('resumes after the checkpoints an earlier poller returned, and skips nothing after them', async () => {
    const seen: string[] = [];
    const handler = async (event: DynamoDBStreamEvent): Promise<void> => {
      for (const r of event.Records) seen.push(r.dynamodb?.NewImage?.requestId?.S ?? '?');
    };
    const first = await startStreamPoller({ endpoint: t.endpoint, tableName: tableName(t.prefix, 'usage'), autoStart: false, handler });
    await put(usageRow('w1', 'c1', 1));
    await put(usageRow('w1', 'c2', 1));
    await first.drain();
    const checkpoints = first.checkpoints();
    await first.stop();
    expect(Object.values(checkpoints)).toHaveLength(1);

    await put(usageRow('w1', 'c3', 1));
    poller = await startStreamPoller({
      endpoint: t.endpoint,
      tableName: tableName(t.prefix, 'usage'),
      autoStart: false,
      resumeAfter: checkpoints,
      discoverEveryMs: 60_000,
      handler,
    });
    await poller.drain();
    expect(seen).toEqual(['c1', 'c2', 'c3']);
    expect(poller.checkpoints()).not.toEqual(checkpoints);
  });

  it('refuses a table without a stream', async () => {
    await expect(
      startStreamPoller({ endpoint: t.endpoint, tableName: tableName(t.prefix, 'keys'), handler: async () => undefined }),
    ).rejects.toThrow('has no stream');
  });
});
