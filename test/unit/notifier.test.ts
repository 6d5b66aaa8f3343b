/**
 * The low-credit notifier without DynamoDB: the publishers' command inputs (aws-sdk-client-mock),
 * the channels' order, and the check's bookkeeping with in-memory ports (a failed publish clears
 * the crossing so it is retried; a crossing another run recorded is not published twice).
 */
import { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import { PublishCommand, SNSClient } from '@aws-sdk/client-sns';
import { mockClient } from 'aws-sdk-client-mock';
import { checkLowCredit, type CheckDeps } from '../../lambdas/notifier/check';
import type { LowCreditNotice, NoticePublisher, NoticeStore, WatchedWorkspace } from '../../lambdas/notifier/ports';
import { EventBridgePublisher, NoticeChannels, NoticeNotDeliveredError, SnsPublisher } from '../../lambdas/notifier/publishers';

const AT = Date.UTC(2026, 10, 23, 12, 0, 0);
const NOTICE: LowCreditNotice = { crossingId: 'lc_1', workspaceId: 'ws_a', thresholdMicros: 5_000_000, availableMicros: 1_250_000, at: AT, stage: 'prod' };
const DETAIL = { crossingId: 'lc_1', workspaceId: 'ws_a', stage: 'prod', thresholdMicros: 5_000_000, availableMicros: 1_250_000, at: '2026-11-23T12:00:00.000Z' };

describe('EventBridgePublisher', () => {
  const eb = mockClient(EventBridgeClient);
  beforeEach(() => eb.reset());

  it('puts one event on the bus, source sluice, detail-type Low credit, metadata only', async () => {
    eb.on(PutEventsCommand).resolves({ FailedEntryCount: 0, Entries: [{ EventId: 'e1' }] });
    await new EventBridgePublisher(new EventBridgeClient({ region: 'us-east-1' }), 'default').publish(NOTICE);
    const calls = eb.commandCalls(PutEventsCommand);
    expect(calls).toHaveLength(1);
    const entries = calls[0]?.args[0].input.Entries ?? [];
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({ EventBusName: 'default', Source: 'sluice', DetailType: 'Low credit', Time: new Date(AT) });
    expect(JSON.parse(entries[0]?.Detail ?? '')).toEqual(DETAIL);
  });

  it('rejects when the bus refused the entry (PutEvents answers 200 anyway)', async () => {
    eb.on(PutEventsCommand).resolves({ FailedEntryCount: 1, Entries: [{ ErrorCode: 'InternalFailure' }] });
    await expect(new EventBridgePublisher(new EventBridgeClient({ region: 'us-east-1' })).publish(NOTICE)).rejects.toThrow(NoticeNotDeliveredError);
  });
});

describe('SnsPublisher', () => {
  const topic = mockClient(SNSClient);
  beforeEach(() => topic.reset());

  it('publishes to the topic with a readable subject and the detail as JSON', async () => {
    topic.on(PublishCommand).resolves({ MessageId: 'm1' });
    await new SnsPublisher(new SNSClient({ region: 'us-east-1' }), 'arn:aws:sns:us-east-1:123456789012:Sluice-prod-alarms').publish(NOTICE);
    const input = topic.commandCalls(PublishCommand)[0]?.args[0].input;
    expect(input).toMatchObject({
      TopicArn: 'arn:aws:sns:us-east-1:123456789012:Sluice-prod-alarms',
      Subject: 'Sluice prod: low credit for workspace ws_a',
      MessageAttributes: { event: { DataType: 'String', StringValue: 'low_credit' }, workspaceId: { DataType: 'String', StringValue: 'ws_a' } },
    });
    expect((input?.Subject ?? '').length).toBeLessThanOrEqual(100);
    const lines = (input?.Message ?? '').split('\n');
    expect(lines[0]).toContain('1.250000 minor units available');
    expect(JSON.parse(lines[lines.length - 1] ?? '')).toEqual(DETAIL);
  });
});

describe('NoticeChannels', () => {
  const recorder = (fail = false): NoticePublisher & { sent: LowCreditNotice[] } => {
    const sent: LowCreditNotice[] = [];
    return {
      sent,
      publish: async (n) => {
        if (fail) throw new Error('down');
        sent.push(n);
      },
    };
  };

  it('does not tell the others when the primary fails, so a retry publishes each once', async () => {
    const sns = recorder();
    await expect(new NoticeChannels(recorder(true), [sns], () => undefined).publish(NOTICE)).rejects.toThrow('down');
    expect(sns.sent).toHaveLength(0);
  });

  it('reports a secondary failure without failing the notice', async () => {
    const primary = recorder();
    const failures: unknown[] = [];
    await new NoticeChannels(primary, [recorder(true)], (e) => failures.push(e)).publish(NOTICE);
    expect(primary.sent).toHaveLength(1);
    expect(failures).toHaveLength(1);
  });
});

/** A NoticeStore in memory with DynamoDB's conditional semantics. */
class MemoryStore implements NoticeStore {
  readonly thresholds = new Map<string, unknown>();
  readonly crossings = new Map<string, string>();
  async *watched(): AsyncIterable<WatchedWorkspace> {
    const ids = new Set([...this.thresholds.keys(), ...this.crossings.keys()]);
    for (const workspaceId of ids) yield { workspaceId, thresholdMicros: this.thresholds.get(workspaceId), crossingId: this.crossings.get(workspaceId) };
  }
  async record(n: LowCreditNotice): Promise<boolean> {
    if (this.crossings.has(n.workspaceId)) return false;
    this.crossings.set(n.workspaceId, n.crossingId);
    return true;
  }
  async clear(workspaceId: string, crossingId: string): Promise<void> {
    if (this.crossings.get(workspaceId) === crossingId) this.crossings.delete(workspaceId);
  }
}

function harness(balances: Record<string, number>): { deps: CheckDeps; store: MemoryStore; sent: LowCreditNotice[]; lines: string[]; failNext: { on: boolean } } {
  const store = new MemoryStore();
  const sent: LowCreditNotice[] = [];
  const lines: string[] = [];
  const failNext = { on: false };
  let n = 0;
  const deps: CheckDeps = {
    store,
    readBalance: async (id) => balances[id],
    publisher: {
      publish: async (notice) => {
        if (failNext.on) {
          failNext.on = false;
          throw new Error('bus down');
        }
        sent.push(notice);
      },
    },
    newId: () => `lc_${(n += 1)}`,
    stage: 'test',
    writeLine: (l) => lines.push(l),
  };
  return { deps, store, sent, lines, failNext };
}

describe('checkLowCredit', () => {
  it('notifies once for a crossing however often it runs, then re-arms above the threshold', async () => {
    const balances: Record<string, number> = { ws_a: 900 };
    const h = harness(balances);
    h.store.thresholds.set('ws_a', 1_000);
    for (let i = 0; i < 5; i += 1) await checkLowCredit(h.deps, AT + i);
    expect(h.sent.map((s) => s.crossingId)).toEqual(['lc_1']);
    expect(h.sent[0]).toMatchObject({ workspaceId: 'ws_a', thresholdMicros: 1_000, availableMicros: 900, at: AT, stage: 'test' });
    balances.ws_a = 5_000;
    expect(await checkLowCredit(h.deps, AT + 10)).toMatchObject({ rearmed: 1, notified: 0 });
    expect(h.store.crossings.size).toBe(0);
    balances.ws_a = 10;
    await checkLowCredit(h.deps, AT + 20);
    expect(h.sent).toHaveLength(2);
  });

  it('clears the crossing when the publish fails, so the next run sends it', async () => {
    const h = harness({ ws_a: 0 });
    h.store.thresholds.set('ws_a', 1_000);
    h.failNext.on = true;
    expect(await checkLowCredit(h.deps, AT)).toMatchObject({ notified: 0, failed: 1 });
    expect(h.store.crossings.size).toBe(0);
    expect(h.lines.some((l) => l.includes('low_credit_check_failed') && l.includes('ws_a'))).toBe(true);
    expect(await checkLowCredit(h.deps, AT + 1)).toMatchObject({ notified: 1, failed: 0 });
    expect(h.sent).toHaveLength(1);
  });

  it('does not publish a crossing another run recorded first', async () => {
    const h = harness({ ws_a: 0 });
    h.store.thresholds.set('ws_a', 1_000);
    // Another run recorded the crossing between this run's scan and its write.
    const record = h.store.record.bind(h.store);
    h.store.record = async (n) => {
      await record({ ...n, crossingId: 'lc_other' });
      return record(n);
    };
    expect(await checkLowCredit(h.deps, AT)).toMatchObject({ notified: 0, failed: 0 });
    expect(h.sent).toHaveLength(0);
  });

  it('counts a workspace without a balance item as having nothing available', async () => {
    const h = harness({});
    h.store.thresholds.set('ws_new', 1);
    await checkLowCredit(h.deps, AT);
    expect(h.sent).toHaveLength(1);
  });

  it('writes one EMF line with the notices and failures of the run', async () => {
    const h = harness({ ws_a: 0, ws_b: 10_000 });
    h.store.thresholds.set('ws_a', 1_000);
    h.store.thresholds.set('ws_b', 1_000);
    await checkLowCredit(h.deps, AT);
    const emf = h.lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.event === 'low_credit_check');
    expect(emf).toMatchObject({ Stage: 'test', checked: 2, LowCreditNotices: 1, LowCreditCheckFailures: 0 });
    expect(JSON.stringify(emf)).toContain('"Namespace":"Sluice"');
  });
});
