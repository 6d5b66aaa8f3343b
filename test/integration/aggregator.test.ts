/**
 * The usage aggregator against DynamoDB Local: usage rows written by the real ledger's
 * settlement, read back from the usage table's real stream by the local stream poller, rolled up
 * by the Lambda handler, then delivered again (nothing may change), and a failure in the middle
 * of a batch (reported by sequence number, later records left for the retry).
 */
import { GetCommand, PutCommand, QueryCommand, ScanCommand, TransactWriteCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import type { DynamoDBBatchResponse, DynamoDBRecord, DynamoDBStreamEvent } from 'aws-lambda';
import { DynamoLedger } from '../../lambdas/adapters/dynamo-ledger';
import { aggregate, type AggregateDeps } from '../../lambdas/aggregator/aggregate';
import { periodIds, readUsage, type UsageRow } from '../../lambdas/aggregator/read';
import type { Settlement } from '../../lambdas/gateway/ports';
import type { TokenCounts } from '../../lambdas/shared/records';
import { tableName } from '../../lambdas/shared/schema';
import { ROLLUP_SHARDS, compactId, seenGroupPk } from '../../lambdas/store/rollups';
import { usagePk } from '../../lambdas/store/keys';
import { USAGE_STREAM_FILTERS } from '../../lambdas/aggregator/mapping';
import { startStreamPoller, type StreamBatchHandler } from '../../local/stream-poller';
import { testTables, type TestTables } from '../support/dynamo';
import { renderUsage, usageQuery } from '../../cli/commands/usage';
import { usageReport } from '../../lambdas/admin/usage-report';
import type { AdminContext } from '../../lambdas/store/directory-context';
import { ValidationError, WorkspaceNotFoundError } from '../../lambdas/store/directory-errors';
import { TEST_YEAR, testDate } from '../support/clock';

/** The tests' year (in the future: DynamoDB Local's TTL sweep runs on the real clock; see support/clock). */
const Y = TEST_YEAR;

const CREDIT = 1_000_000_000;
const WS = 'ws_agg';
const DAY1 = testDate(10, 21, 23, 59); // 21 November, a minute before midnight UTC
const DAY2 = testDate(10, 22, 0, 1); // 22 November

let db: TestTables;
let ledger: DynamoLedger;
let deps: AggregateDeps;
let t: (name: 'ledger' | 'usage' | 'rollups') => string;
let lambdaHandler: (event: DynamoDBStreamEvent) => Promise<DynamoDBBatchResponse>;

beforeAll(async () => {
  db = await testTables();
  t = (name) => tableName(db.prefix, name);
  ledger = new DynamoLedger(db.doc, { ledger: t('ledger'), usage: t('usage') });
  deps = { doc: db.doc, rollupsTable: t('rollups') };
  await db.doc.send(
    new PutCommand({
      TableName: t('ledger'),
      Item: { pk: `WS#${WS}`, sk: 'BALANCE', availableMicros: CREDIT, heldMicros: 0, spentMicros: 0, creditedMicros: CREDIT, rateBuckets: {} },
    }),
  );
  // The Lambda module builds its adapters at import, from the environment, as at a cold start.
  const vars = { SLUICE_STAGE: 'local', SLUICE_TABLE_PREFIX: db.prefix, SLUICE_DYNAMODB_ENDPOINT: db.endpoint };
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  Object.assign(process.env, vars);
  try {
    lambdaHandler = (await import('../../lambdas/aggregator/handler')).handler;
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
});

afterAll(() => db.client.destroy());

interface RequestSpec {
  readonly id: string;
  readonly keyId: string;
  readonly at: number;
  readonly servedBy?: string;
  readonly counts?: TokenCounts;
  readonly chargeMicros: number;
  readonly outcome: Settlement['outcome'];
}

/** One request through the real ledger: admitted, then settled, which writes its usage row. */
async function request(spec: RequestSpec): Promise<void> {
  const out = await ledger.admit({
    holdId: spec.id,
    workspaceId: WS,
    keyId: spec.keyId,
    family: 'chat_completions',
    requestedModel: 'local/echo',
    amountMicros: 5_000_000,
    inputMicros: 1,
    byok: false,
    limits: { keyWindow: 'monthly', spendRateCapMicros: 1e15, keyRatePerMinute: 1e6 },
    now: spec.at,
    expiresAt: spec.at + 600_000,
  });
  if (!out.admitted) throw new Error(`refused: ${out.refusal.kind}`);
  await ledger.settle(out.hold, {
    counts: spec.counts,
    chargeMicros: spec.chargeMicros,
    ...(spec.servedBy === undefined ? {} : { servedBy: spec.servedBy, provider: spec.servedBy.split('/')[0] }),
    stream: false,
    status: spec.outcome === 'ok' ? 200 : 502,
    outcome: spec.outcome,
    attempts: 1,
    now: spec.at + 1_000,
  });
}

const counts = (inputTokens: number, cachedInputTokens: number, outputTokens: number, reasoningTokens: number): TokenCounts => ({
  inputTokens,
  cachedInputTokens,
  outputTokens,
  reasoningTokens,
});

/**
 * Reads the whole usage stream from its start through `handler`, with the deployed mapping's
 * filter (each request's settlement; its open row's INSERT is passed over); returns every event
 * delivered and every response.
 */
async function drainStream(handler: StreamBatchHandler, filtered = true): Promise<{ events: DynamoDBStreamEvent[]; responses: (DynamoDBBatchResponse | void)[] }> {
  const events: DynamoDBStreamEvent[] = [];
  const responses: (DynamoDBBatchResponse | void)[] = [];
  const poller = await startStreamPoller({
    endpoint: db.endpoint,
    tableName: t('usage'),
    autoStart: false,
    ...(filtered ? { filters: USAGE_STREAM_FILTERS } : {}),
    log: () => undefined,
    handler: async (event) => {
      events.push(event);
      const response = await handler(event);
      responses.push(response);
      return response;
    },
  });
  try {
    await poller.drain();
  } finally {
    await poller.stop();
  }
  return { events, responses };
}

async function rows(period: 'day' | 'month', from: string, to: string): Promise<UsageRow[]> {
  return readUsage(db.doc, db.prefix, { workspaceId: WS, period, from, to });
}

function find(all: readonly UsageRow[], periodId: string, scope: UsageRow['scope'], id?: string): UsageRow | undefined {
  return all.find((r) => r.periodId === periodId && r.scope === scope && r.id === id);
}

function requestIdOf(record: DynamoDBRecord): string | undefined {
  return record.dynamodb?.NewImage?.requestId?.S;
}

/** Whether the aggregator has recorded `requestId` as counted (in its group's set of counted rows). */
async function marker(requestId: string): Promise<boolean> {
  const out = await db.doc.send(new ScanCommand({ TableName: t('rollups'), FilterExpression: 'begins_with(pk, :seen)', ExpressionAttributeValues: { ':seen': 'SEEN#' }, ConsistentRead: true }));
  return (out.Items ?? []).some((item) => item.ids instanceof Set && item.ids.has(compactId(requestId)));
}

/** A client whose transactions that record `requestId` as counted fail (as in an outage) while `failing()` says so. */
function outageFor(doc: DynamoDBDocumentClient, requestId: string, failing: () => boolean): DynamoDBDocumentClient {
  const send = async (command: unknown): Promise<unknown> => {
    const records = (i: NonNullable<TransactWriteCommand['input']['TransactItems']>[number]): boolean =>
      String(i.Update?.Key?.pk ?? '').startsWith('SEEN#') && Object.values(i.Update?.ExpressionAttributeValues ?? {}).includes(compactId(requestId));
    if (command instanceof TransactWriteCommand && (command.input.TransactItems ?? []).some(records) && failing()) {
      throw Object.assign(new Error('Service unavailable'), { name: 'ServiceUnavailable', $fault: 'server' });
    }
    return doc.send(command as TransactWriteCommand);
  };
  return { send } as unknown as DynamoDBDocumentClient;
}

describe('aggregator', () => {
  it('rolls up the usage stream into daily and monthly totals, by key and by model, exactly once', async () => {
    await request({ id: 'r1', keyId: 'key_a', at: DAY1, servedBy: 'openai/gpt-x', counts: counts(100, 20, 50, 10), chargeMicros: 1_000_000, outcome: 'ok' });
    await request({ id: 'r2', keyId: 'key_b', at: DAY2, servedBy: 'openai/gpt-x', counts: counts(200, 0, 80, 0), chargeMicros: 2_500_000, outcome: 'ok' });
    await request({ id: 'r3', keyId: 'key_a', at: DAY2 + 60_000, counts: undefined, chargeMicros: 0, outcome: 'provider_error' });
    await request({ id: 'r4', keyId: 'key_a', at: DAY2 + 3_600_000, servedBy: 'anthropic/claude-x', counts: counts(300, 100, 40, 40), chargeMicros: 3_000_001, outcome: 'client_disconnected' });

    const first = await drainStream(lambdaHandler);
    expect(first.events.flatMap((e) => e.Records.map(requestIdOf))).toEqual(['r1', 'r2', 'r3', 'r4']);
    for (const r of first.responses) expect(r).toEqual({ batchItemFailures: [] });

    const days = await rows('day', `${Y}-11-21`, `${Y}-11-22`);
    expect(find(days, `${Y}-11-21`, 'all')).toEqual({
      period: 'day',
      periodId: `${Y}-11-21`,
      scope: 'all',
      requests: 1,
      byokRequests: 0,
      inputTokens: 100,
      cachedInputTokens: 20,
      outputTokens: 50,
      reasoningTokens: 10,
      chargeMicros: 1_000_000,
      uncollectedMicros: 0,
      outcomes: { ok: 1 },
    });
    expect(find(days, `${Y}-11-22`, 'all')).toMatchObject({
      requests: 3,
      inputTokens: 500,
      cachedInputTokens: 100,
      outputTokens: 120,
      reasoningTokens: 40,
      chargeMicros: 5_500_001,
      outcomes: { ok: 1, provider_error: 1, client_disconnected: 1 },
    });
    expect(find(days, `${Y}-11-22`, 'key', 'key_a')).toMatchObject({ requests: 2, inputTokens: 300, chargeMicros: 3_000_001 });
    expect(find(days, `${Y}-11-22`, 'key', 'key_b')).toMatchObject({ requests: 1, inputTokens: 200, chargeMicros: 2_500_000 });
    expect(find(days, `${Y}-11-22`, 'model', 'openai/gpt-x')).toMatchObject({ requests: 1, chargeMicros: 2_500_000 });
    // Nothing served: filed under the model the request named.
    expect(find(days, `${Y}-11-22`, 'model', 'local/echo')).toMatchObject({ requests: 1, chargeMicros: 0, outcomes: { provider_error: 1 } });
    expect(find(days, `${Y}-11-22`, 'model', 'anthropic/claude-x')).toMatchObject({ requests: 1, chargeMicros: 3_000_001 });
    // Day 1: ALL, key_a, gpt-x; day 2: ALL, key_a, key_b, gpt-x, local/echo, claude-x.
    expect(days).toHaveLength(3 + 6);
    const months = await rows('month', `${Y}-11`, `${Y}-11`);
    expect(find(months, `${Y}-11`, 'all')).toMatchObject({ requests: 4, inputTokens: 600, cachedInputTokens: 120, outputTokens: 170, reasoningTokens: 50, chargeMicros: 6_500_001 });
    expect(find(months, `${Y}-11`, 'key', 'key_a')).toMatchObject({ requests: 3, chargeMicros: 4_000_001 });
    expect(find(months, `${Y}-11`, 'model', 'openai/gpt-x')).toMatchObject({ requests: 2, inputTokens: 300, chargeMicros: 3_500_000 });

    // Delivered again, as a retried batch would be: nothing changes.
    for (const event of first.events) expect(await aggregate(deps, event)).toEqual({ batchItemFailures: [] });
    // Replayed from the stream's start, as after a mapping is recreated: nothing changes.
    const replay = await drainStream((event) => aggregate(deps, event));
    expect(replay.events.flatMap((e) => e.Records.map(requestIdOf))).toEqual(['r1', 'r2', 'r3', 'r4']);
    // Delivered twice at the same moment (overlapping invocations): counted once.
    const all: DynamoDBStreamEvent = { Records: first.events.flatMap((e) => e.Records) };
    expect(await Promise.all([aggregate(deps, all), aggregate(deps, all)])).toEqual([{ batchItemFailures: [] }, { batchItemFailures: [] }]);

    expect(await rows('day', `${Y}-11-21`, `${Y}-11-22`)).toEqual(days);
    expect(await rows('month', `${Y}-11`, `${Y}-11`)).toEqual(months);
  });

  it('counts a request at its settlement only: handed every record of the stream, its open row among them, nothing changes', async () => {
    const days = await rows('day', `${Y}-11-21`, `${Y}-11-22`);
    const months = await rows('month', `${Y}-11`, `${Y}-11`);
    // Unfiltered, as a mapping without the filter (or a replay tool) would hand them over.
    const all = await drainStream((event) => aggregate(deps, event), false);
    const records = all.events.flatMap((e) => e.Records);
    // Each request's row is on the stream twice: put open at admission, then settled.
    expect(records.filter((r) => requestIdOf(r) === 'r1').map((r) => [r.eventName, r.dynamodb?.NewImage?.state?.S])).toEqual([
      ['INSERT', 'open'],
      ['MODIFY', 'settled'],
    ]);
    for (const r of all.responses) expect(r).toEqual({ batchItemFailures: [] });
    expect(await rows('day', `${Y}-11-21`, `${Y}-11-22`)).toEqual(days);
    expect(await rows('month', `${Y}-11`, `${Y}-11`)).toEqual(months);
  });

  it('reports the first record that fails by its sequence number and leaves the later ones for the retry', async () => {
    const at = testDate(11, 3, 12); // December: totals of their own
    await request({ id: 'f1', keyId: 'key_f', at, servedBy: 'openai/gpt-x', counts: counts(10, 0, 5, 0), chargeMicros: 100, outcome: 'ok' });
    await request({ id: 'f2', keyId: 'key_f', at: at + 1_000, servedBy: 'openai/gpt-x', counts: counts(20, 0, 5, 0), chargeMicros: 200, outcome: 'ok' });
    await request({ id: 'f3', keyId: 'key_f', at: at + 2_000, servedBy: 'openai/gpt-x', counts: counts(30, 0, 5, 0), chargeMicros: 300, outcome: 'ok' });

    // An outage of the rollups table that strikes f2's write and ends once the failure has been
    // reported: the writes that record f2 as counted fail the way a real outage would.
    let outage = true;
    let faults = 0;
    const faulty: AggregateDeps = {
      doc: outageFor(db.doc, 'f2', () => {
        if (!outage) return false;
        faults += 1;
        return true;
      }),
      rollupsTable: t('rollups'),
      writeLine: () => undefined,
    };
    const delivered = await drainStream(async (event) => {
      const response = await aggregate(faulty, event);
      if (response.batchItemFailures.length > 0) outage = false;
      return response;
    });
    const records = delivered.events.flatMap((e) => e.Records);
    const f2 = records.find((r) => requestIdOf(r) === 'f2');
    expect(f2?.dynamodb?.SequenceNumber).toBeDefined();
    const failed = delivered.responses.find((r) => r !== undefined && r.batchItemFailures.length > 0);
    expect(failed).toEqual({ batchItemFailures: [{ itemIdentifier: f2?.dynamodb?.SequenceNumber }] });
    // The poller retried from f2 (as the deployed mapping does), and this time it went through.
    expect(records.map(requestIdOf)).toEqual(['r1', 'r2', 'r3', 'r4', 'f1', 'f2', 'f3', 'f2', 'f3']);
    expect(faults).toBeGreaterThan(0);
    expect(await marker('f1')).toBe(true);

    const dec = await rows('day', `${Y}-12-03`, `${Y}-12-03`);
    expect(find(dec, `${Y}-12-03`, 'all')).toMatchObject({ requests: 3, inputTokens: 60, chargeMicros: 600 });
  });

  it('stops at the failed record: later records of the batch are not rolled up', async () => {
    const at = Date.UTC(Y + 1, 0, 5, 12);
    await request({ id: 'g1', keyId: 'key_g', at, counts: counts(1, 0, 1, 0), chargeMicros: 10, outcome: 'ok' });
    await request({ id: 'g2', keyId: 'key_g', at: at + 1_000, counts: counts(2, 0, 1, 0), chargeMicros: 20, outcome: 'ok' });
    const { events } = await drainStream(async () => ({ batchItemFailures: [] })); // read only
    const records = events.flatMap((e) => e.Records).filter((r) => ['g1', 'g2'].includes(requestIdOf(r) ?? ''));
    const g1 = records[0] as DynamoDBRecord;
    const g2 = records[1] as DynamoDBRecord;
    // A settlement whose row cannot be read (it says settled and carries nothing else).
    const broken: DynamoDBRecord = { ...g1, dynamodb: { ...g1.dynamodb, SequenceNumber: '1', NewImage: { requestId: { S: 'junk' }, state: { S: 'settled' } } } };
    const errors: string[] = [];
    const out = await aggregate({ ...deps, writeLine: (line) => errors.push(line) }, { Records: [broken, g1, g2] });
    expect(out).toEqual({ batchItemFailures: [{ itemIdentifier: '1' }] });
    expect(errors).toHaveLength(1);
    expect(JSON.parse(errors[0] ?? '{}')).toMatchObject({ event: 'rollup_failed', sequenceNumber: '1' });
    expect(await marker('g1')).toBe(false);
    expect(await marker('g2')).toBe(false);
    expect(await rows('day', `${Y + 1}-01-05`, `${Y + 1}-01-05`)).toEqual([]);

    // A record that is not a request's settlement (its open row's INSERT, a REMOVE) is skipped, not failed.
    const opened: DynamoDBRecord = { ...g1, eventName: 'INSERT', dynamodb: { ...g1.dynamodb, NewImage: { ...g1.dynamodb?.NewImage, state: { S: 'open' } } } };
    expect(await aggregate(deps, { Records: [opened, { ...g1, eventName: 'REMOVE' }, g2] })).toEqual({ batchItemFailures: [] });
    expect(await marker('g1')).toBe(false);
    expect(find(await rows('day', `${Y + 1}-01-05`, `${Y + 1}-01-05`), `${Y + 1}-01-05`, 'all')).toMatchObject({ requests: 1, chargeMicros: 20 });
  });
});

describe('batched rollups', () => {
  const BW = 'ws_batch';
  let seq = 1_000_000;

  /** A usage stream record as Lambda delivers it: the settlement of a row of workspace `ws`. */
  function usageRecord(ws: string, requestId: string, keyId: string, at: number, chargeMicros: number, outcome = 'ok'): DynamoDBRecord {
    seq += 1;
    const row = {
      pk: usagePk(ws, requestId),
      state: 'settled',
      workspaceId: ws,
      sk: `${new Date(at).toISOString()}#${requestId}`,
      requestId,
      keyId,
      requestedModel: 'local/echo',
      servedBy: 'openai/gpt-x',
      outcome,
      byok: false,
      startedAt: at,
      inputTokens: 10,
      cachedInputTokens: 1,
      outputTokens: 5,
      reasoningTokens: 0,
      chargeMicros,
    };
    return { eventName: 'MODIFY', dynamodb: { SequenceNumber: String(seq).padStart(21, '0'), NewImage: marshall(row) as NonNullable<DynamoDBRecord['dynamodb']>['NewImage'] } };
  }

  /** A client that records every transaction sent (and whether it went through). */
  function recording(): { doc: DynamoDBDocumentClient; sent: { items: NonNullable<TransactWriteCommand['input']['TransactItems']>; ok: boolean }[] } {
    const sent: { items: NonNullable<TransactWriteCommand['input']['TransactItems']>; ok: boolean }[] = [];
    const send = async (command: unknown): Promise<unknown> => {
      if (!(command instanceof TransactWriteCommand)) return db.doc.send(command as GetCommand);
      const entry = { items: command.input.TransactItems ?? [], ok: false };
      sent.push(entry);
      const out = await db.doc.send(command);
      entry.ok = true;
      return out;
    };
    return { doc: { send } as unknown as DynamoDBDocumentClient, sent };
  }

  const updatesOf = (items: NonNullable<TransactWriteCommand['input']['TransactItems']>, pk: string, sk: string): number =>
    items.filter((i) => i.Update?.Key?.pk === pk && i.Update.Key.sk === sk).length;

  async function total(ws: string, day: string): Promise<UsageRow | undefined> {
    return find(await readUsage(db.doc, db.prefix, { workspaceId: ws, period: 'day', from: day, to: day }), day, 'all');
  }

  it('a batch of N rows for one workspace and day writes the day item once, and a redelivery changes nothing', async () => {
    const at = Date.UTC(Y + 1, 1, 10, 9);
    const n = 40;
    const event: DynamoDBStreamEvent = {
      Records: Array.from({ length: n }, (_, i) => usageRecord(BW, `b1_${i}`, `key_${i % 5}`, at + i, 1_000 + i, i % 7 === 0 ? 'provider_error' : 'ok')),
    };
    const rec = recording();
    expect(await aggregate({ ...deps, doc: rec.doc }, event)).toEqual({ batchItemFailures: [] });
    expect(rec.sent).toHaveLength(1);
    const items = rec.sent[0]?.items ?? [];
    // The rows' groups of counted rows (one per usage partition and 20 s), then day and month, each overall, five keys and one model.
    const groups = new Set(Array.from({ length: n }, (_, i) => seenGroupPk(usagePk(BW, `b1_${i}`), at + i)));
    expect(items).toHaveLength(groups.size + 2 * (1 + 5 + 1));
    expect(updatesOf(items, `WS#${BW}#DAY#${Y + 1}-02-10`, 'ALL')).toBe(1);
    expect(updatesOf(items, `WS#${BW}#MONTH#${Y + 1}-02`, 'ALL')).toBe(1);
    const charge = Array.from({ length: n }, (_, i) => 1_000 + i).reduce((a, b) => a + b, 0);
    const errors = Array.from({ length: n }, (_, i) => i).filter((i) => i % 7 === 0).length;
    const expected = { requests: n, inputTokens: 10 * n, cachedInputTokens: n, outputTokens: 5 * n, chargeMicros: charge, outcomes: { ok: n - errors, provider_error: errors } };
    expect(await total(BW, `${Y + 1}-02-10`)).toMatchObject(expected);
    const byKey = (await readUsage(db.doc, db.prefix, { workspaceId: BW, period: 'day', from: `${Y + 1}-02-10`, to: `${Y + 1}-02-10` })).filter((r) => r.scope === 'key');
    expect(byKey.map((r) => r.requests)).toEqual([8, 8, 8, 8, 8]);

    // The same batch again, and again cut differently (as a bisected or replayed batch would be).
    const again = recording();
    expect(await aggregate({ ...deps, doc: again.doc }, event)).toEqual({ batchItemFailures: [] });
    expect(again.sent.every((s) => !s.ok)).toBe(true);
    expect(await aggregate(deps, { Records: event.Records.slice(5, 30) })).toEqual({ batchItemFailures: [] });
    expect(await aggregate(deps, { Records: [...event.Records.slice(30), ...event.Records.slice(0, 5)] })).toEqual({ batchItemFailures: [] });
    expect(await total(BW, `${Y + 1}-02-10`)).toMatchObject(expected);
  });

  it('a partially failed batch retried from the failed record is exact, whatever the retry batch holds', async () => {
    const at = Date.UTC(Y + 1, 1, 11, 9);
    const records = Array.from({ length: 12 }, (_, i) => usageRecord(BW, `b2_${i}`, 'key_p', at + i, 100 * (i + 1)));
    // Rows 0..4 were counted by an earlier delivery; row 7's writes fail until the failure is reported.
    expect(await aggregate(deps, { Records: records.slice(0, 5) })).toEqual({ batchItemFailures: [] });
    let outage = true;
    const faulty: AggregateDeps = { ...deps, doc: outageFor(db.doc, 'b2_7', () => outage), writeLine: () => undefined };
    const first = await aggregate(faulty, { Records: records.slice(0, 10) });
    expect(first).toEqual({ batchItemFailures: [{ itemIdentifier: records[7]?.dynamodb?.SequenceNumber }] });
    outage = false;
    // Rows before the failed one are in; the failed one and later ones are not.
    expect(await marker('b2_6')).toBe(true);
    expect(await marker('b2_7')).toBe(false);
    expect(await marker('b2_8')).toBe(false);
    expect(await total(BW, `${Y + 1}-02-11`)).toMatchObject({ requests: 7, chargeMicros: 100 * (1 + 2 + 3 + 4 + 5 + 6 + 7) });
    // The retry starts at the failed record and runs on past the first batch's end.
    expect(await aggregate(deps, { Records: records.slice(7) })).toEqual({ batchItemFailures: [] });
    expect(await total(BW, `${Y + 1}-02-11`)).toMatchObject({ requests: 12, chargeMicros: 100 * ((12 * 13) / 2) });
  });

  it('many workspaces\' rows interleaved: each workspace\'s totals written once a batch; a failure reports the earliest row not counted, and the retry from it is exact', async () => {
    const at = Date.UTC(Y + 1, 1, 15, 9);
    const day = `${Y + 1}-02-15`;
    const wsOf = (w: number): string => `ws_mix_${w}`;
    // Stream order: every workspace's first row, then every workspace's second, and so on.
    const records = Array.from({ length: 4 }, (_, j) => Array.from({ length: 10 }, (_, w) => usageRecord(wsOf(w), `mx${w}_${j}`, 'key_x', at + j, 10 + w))).flat();
    const rec = recording();
    expect(await aggregate({ ...deps, doc: rec.doc }, { Records: records })).toEqual({ batchItemFailures: [] });
    for (let w = 0; w < 10; w += 1) {
      expect(rec.sent.reduce((n, x) => n + updatesOf(x.items, `WS#${wsOf(w)}#DAY#${day}`, 'ALL'), 0)).toBe(1);
      expect(await total(wsOf(w), day)).toMatchObject({ requests: 4, chargeMicros: 4 * (10 + w) });
    }

    // Again under an outage that strikes one row: the earliest record not counted is reported.
    const later = Date.UTC(Y + 1, 1, 16, 9);
    const day2 = `${Y + 1}-02-16`;
    const again = Array.from({ length: 4 }, (_, j) => Array.from({ length: 10 }, (_, w) => usageRecord(wsOf(w), `my${w}_${j}`, 'key_x', later + j, 10 + w))).flat();
    let outage = true;
    const faulty: AggregateDeps = { ...deps, doc: outageFor(db.doc, 'my5_1', () => outage), writeLine: () => undefined };
    const first = await aggregate(faulty, { Records: again });
    outage = false;
    const counted = await Promise.all(again.map((r) => marker(requestIdOf(r) as string)));
    const earliest = again[counted.indexOf(false)];
    expect(earliest).toBeDefined();
    expect(first).toEqual({ batchItemFailures: [{ itemIdentifier: earliest?.dynamodb?.SequenceNumber }] });
    expect(await marker('my5_1')).toBe(false);
    // Every record before the reported one is counted.
    for (const c of counted.slice(0, counted.indexOf(false))) expect(c).toBe(true);
    // The mapping redelivers from the reported record on: everything counted once.
    expect(await aggregate(deps, { Records: again.slice(again.indexOf(earliest as DynamoDBRecord)) })).toEqual({ batchItemFailures: [] });
    for (let w = 0; w < 10; w += 1) expect(await total(wsOf(w), day2)).toMatchObject({ requests: 4, chargeMicros: 4 * (10 + w) });
  });

  it('a batch too large for one transaction is written in runs of at most 100 items, exactly once', async () => {
    const at = Date.UTC(Y + 1, 1, 12, 9);
    // Every row its own workspace: seven items per row, so 14 rows per transaction.
    const records = Array.from({ length: 40 }, (_, i) => usageRecord(`ws_many_${i}`, `b3_${i}`, 'key_m', at, 7));
    const rec = recording();
    // Half of them were counted before, spread through the batch.
    expect(await aggregate(deps, { Records: records.filter((_, i) => i % 2 === 0) })).toEqual({ batchItemFailures: [] });
    expect(await aggregate({ ...deps, doc: rec.doc }, { Records: records })).toEqual({ batchItemFailures: [] });
    expect(rec.sent.length).toBeGreaterThan(1);
    for (const s of rec.sent) expect(s.items.length).toBeLessThanOrEqual(100);
    for (let i = 0; i < 40; i += 1) expect(await total(`ws_many_${i}`, `${Y + 1}-02-12`)).toMatchObject({ requests: 1, chargeMicros: 7 });
  });

  it('a hot workspace\'s batch goes to one rollup shard, marked first; reports sum every shard, exactly once under redelivery', async () => {
    const at = Date.UTC(2027, 1, 13, 9);
    const day = '2027-02-13';
    const HW = 'ws_hot';
    // Batches as a backlog delivers them: 100 rows each, the hot workspace's rows beside a quiet one's.
    const batches = Array.from({ length: 6 }, (_, b) => ({
      Records: Array.from({ length: 100 }, (_, i) =>
        i % 10 === 9 ? usageRecord('ws_quiet_beside', `q${b}_${i}`, 'key_q', at, 3) : usageRecord(HW, `h${b}_${i}`, `key_${i % 5}`, at + i, 10 + (i % 3)),
      ),
    }));
    const recs = batches.map(() => recording());
    for (const [b, batch] of batches.entries()) expect(await aggregate({ ...deps, doc: (recs[b] as ReturnType<typeof recording>).doc }, batch)).toEqual({ batchItemFailures: [] });
    const hotRows = batches.flatMap((b) => b.Records).filter((r) => r.dynamodb?.NewImage?.workspaceId?.S === HW);
    const charge = hotRows.reduce((a, r) => a + Number(r.dynamodb?.NewImage?.chargeMicros?.N), 0);
    const expected = { requests: hotRows.length, chargeMicros: charge, outputTokens: 5 * hotRows.length };
    // Each batch wrote the hot workspace's day to exactly one shard (its 14 items, no more); the quiet one stays on shard 0.
    const shardsUsed = new Set<string>();
    for (const r of recs) {
      const pks = new Set(r.sent.flatMap((s) => s.items.map((i) => String(i.Update?.Key?.pk ?? ''))).filter((pk) => pk.startsWith(`WS#${HW}#DAY#${day}`)));
      expect(pks.size).toBe(1);
      shardsUsed.add([...pks][0] as string);
      for (const s of r.sent) for (const i of s.items) if (String(i.Update?.Key?.pk ?? '').startsWith('WS#ws_quiet_beside#')) expect(String(i.Update?.Key?.pk)).not.toMatch(/#R\d+$/);
    }
    expect(shardsUsed.size).toBeGreaterThan(1);
    const mark = await db.doc.send(new GetCommand({ TableName: t('rollups'), Key: { pk: `WS#${HW}#DAY#${day}`, sk: 'SHARDS' }, ConsistentRead: true }));
    expect(mark.Item?.shardCount).toBe(ROLLUP_SHARDS);
    expect(await total(HW, day)).toMatchObject(expected);
    expect(await total('ws_quiet_beside', day)).toMatchObject({ requests: 60, chargeMicros: 180 });
    const month = find(await readUsage(db.doc, db.prefix, { workspaceId: HW, period: 'month', from: '2027-02', to: '2027-02' }), '2027-02', 'all');
    expect(month).toMatchObject(expected);
    const byKey = (await readUsage(db.doc, db.prefix, { workspaceId: HW, period: 'day', from: day, to: day })).filter((r) => r.scope === 'key');
    expect(byKey.map((r) => r.id)).toEqual(['key_0', 'key_1', 'key_2', 'key_3', 'key_4']);
    expect(byKey.reduce((a, r) => a + r.requests, 0)).toBe(hotRows.length);

    // Redelivered whole, then cut differently (some cuts too small to spread): nothing changes.
    for (const batch of batches) expect(await aggregate(deps, batch)).toEqual({ batchItemFailures: [] });
    const all = batches.flatMap((b) => b.Records);
    for (let i = 0; i < all.length; i += 37) expect(await aggregate(deps, { Records: all.slice(i, i + 37) })).toEqual({ batchItemFailures: [] });
    expect(await aggregate(deps, { Records: [...all.slice(250), ...all.slice(0, 250)] })).toEqual({ batchItemFailures: [] });
    expect(await total(HW, day)).toMatchObject(expected);
    expect(await total('ws_quiet_beside', day)).toMatchObject({ requests: 60, chargeMicros: 180 });
  });

  it('a quiet workspace\'s period stays one partition and is read with one Query', async () => {
    const at = Date.UTC(2027, 1, 14, 9);
    const QW = 'ws_one_query';
    expect(await aggregate(deps, { Records: Array.from({ length: 20 }, (_, i) => usageRecord(QW, `oq_${i}`, 'key_o', at, 5)) })).toEqual({ batchItemFailures: [] });
    let queries = 0;
    const counting = {
      send: (command: unknown) => {
        if (command instanceof QueryCommand) queries += 1;
        return db.doc.send(command as QueryCommand);
      },
    } as unknown as DynamoDBDocumentClient;
    expect(find(await readUsage(counting, db.prefix, { workspaceId: QW, period: 'day', from: '2027-02-14', to: '2027-02-14' }), '2027-02-14', 'all')).toMatchObject({ requests: 20, chargeMicros: 100 });
    expect(queries).toBe(1);
  });
});

/** The report the management API builds, rendered as `sluice usage` prints it. */
async function usageCommand(argv: readonly string[], ctx: AdminContext): Promise<ReturnType<typeof renderUsage>> {
  return renderUsage(await usageReport(ctx, usageQuery(argv, (ctx.now ?? Date.now)())));
}

describe('sluice usage', () => {
  // Runs after the aggregator tests above, whose rollups it reads.
  it('prints per-day totals, by key and by model, with spend in the currency and major units', async () => {
    await db.doc.send(
      new PutCommand({ TableName: tableName(db.prefix, 'workspaces'), Item: { pk: WS, sk: 'META', workspaceId: WS, name: 'agg', createdAt: 0, paused: false } }),
    );
    const ctx = { doc: db.doc, tablePrefix: db.prefix, stage: 'local', now: () => DAY2 };
    const out = await usageCommand(['-w', WS, '--from', `${Y}-11-21`], ctx);
    const text = out.human.join('\n');
    expect(out.human[0]).toBe(`usage of ${WS} by day, ${Y}-11-21 to ${Y}-11-22 (UTC)`);
    expect(text).toMatch(new RegExp(`^ {2}${Y}-11-22 +3 +500 +100 +120 +40 +USD 0\\.05500001$`, 'm'));
    expect(text).toMatch(/^ {2}all +4 +600 +120 +170 +50 +USD 0\.06500001$/m);
    expect(text).toMatch(new RegExp(`^ {2}${Y}-11-22 +key_a +2 .* USD 0\\.03000001$`, 'm'));
    expect(text).toMatch(new RegExp(`^ {2}${Y}-11-22 +local\\/echo +1 .* USD 0\\.00$`, 'm'));
    const json = out.json as { total: { chargeMicros: number; spend: string }; byModel: { id: string }[] };
    expect(json.total).toMatchObject({ requests: 4, chargeMicros: 6_500_001, spend: 'USD 0.06500001' });
    expect(json.byModel.map((r) => r.id)).toEqual(['openai/gpt-x', 'anthropic/claude-x', 'local/echo', 'openai/gpt-x']);

    const months = await usageCommand(['-w', WS, '--period', 'month', '--from', `${Y}-11`, '--to', `${Y + 1}-01`, '--json'], ctx);
    expect((months.json as { totals: { periodId: string; requests: number }[] }).totals.map((r) => [r.periodId, r.requests])).toEqual([
      [`${Y}-11`, 4],
      [`${Y}-12`, 3],
      [`${Y + 1}-01`, 1],
    ]);
    await expect(usageCommand(['-w', WS, '--from', '2026-11-31'], ctx)).rejects.toThrow(ValidationError);
    await expect(usageCommand(['-w', 'ws_nobody'], ctx)).rejects.toThrow(WorkspaceNotFoundError);
  });
});

describe('periodIds', () => {
  it.each([
    ['day', '2026-02-27', '2026-03-01', ['2026-02-27', '2026-02-28', '2026-03-01']],
    ['day', '2028-02-28', '2028-03-01', ['2028-02-28', '2028-02-29', '2028-03-01']],
    ['month', '2026-11', '2027-02', ['2026-11', '2026-12', '2027-01', '2027-02']],
  ] as const)('%s from %s to %s', (period, from, to, expected) => {
    expect(periodIds(period, from, to)).toEqual(expected);
  });

  it.each([
    ['day', '2026-02-30', '2026-03-01'],
    ['day', '2026-03-02', '2026-03-01'],
    ['day', '2026-11', '2026-11-02'],
    ['month', '2026-13', '2027-01'],
    ['day', '2020-01-01', '2026-01-01'],
  ] as const)('refuses %s from %s to %s', (period, from, to) => {
    expect(() => periodIds(period, from, to)).toThrow(RangeError);
  });
});
