/**
 * The cost model's measured inputs (bench.json `costInputs`), taken on the running stack after the
 * timed phases: the bytes the gateway logs per request (its stdout), the bytes of a reply on each
 * side (client and provider) against its tokens, one run of the real sweeper and of the real
 * low-credit notifier (their log lines, their time, the sweeper's queries), the real aggregator
 * over batches of the usage rows the run wrote (its time per batch, its log), and the stored sizes
 * of a usage row and of the aggregator's record of a counted row (its share of a group) as DynamoDB counts them.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import type { DynamoDBRecord, DynamoDBStreamEvent } from 'aws-lambda';
import { documentClient } from '../../lambdas/adapters/dynamo-client';
import { DynamoLedger } from '../../lambdas/adapters/dynamo-ledger';
import { aggregate } from '../../lambdas/aggregator/aggregate';
import { checkLowCredit } from '../../lambdas/notifier/check';
import { tableName } from '../../lambdas/shared/schema';
import { availableCredit, DynamoNoticeStore } from '../../lambdas/store/notices';
import { sweep } from '../../lambdas/sweeper/sweep';
import type { CostInputs } from '../cost-inputs';
import { benchTables } from '../floor';
import { post, postStream, type StreamTiming, type Target } from '../load';
import type { TripReport } from '../report';
import { countRoundTrips, type TripLog } from '../round-trips';
import { log, type Stack } from '../stack';
import { itemSize, type WireItem } from '../store-map-model';
import { expectOk, TABLE_PREFIX } from './requests';

const LOG_REQUESTS = 40;
const WIRE_STREAMS = 5;
/** Rows per aggregator batch timed: a quiet stream's batch and a full one (lib/aggregator.ts: 100). */
const AGGREGATOR_BATCHES: readonly number[] = [10, 100];
/** HTTP request headers (method, path, host, authorization, content type and length), stated: bodies are measured. */
const REQUEST_HEADER_BYTES = 400;

function wire(item: Record<string, unknown>): WireItem {
  return marshall(item, { removeUndefinedValues: true }) as unknown as WireItem;
}

/** A line through (frames, bytes) of two kinds of reply: bytes per frame (one token each) and the rest. */
function perToken(short: StreamTiming[], long: StreamTiming[]): { fixed: number; perToken: number } {
  const mean = (xs: StreamTiming[], f: (t: StreamTiming) => number): number => xs.reduce((s, t) => s + f(t), 0) / Math.max(1, xs.length);
  const [fs, bs, fl, bl] = [mean(short, (t) => t.frames), mean(short, (t) => t.bytes), mean(long, (t) => t.frames), mean(long, (t) => t.bytes)];
  const slope = fl === fs ? 0 : (bl - bs) / (fl - fs);
  return { fixed: Math.max(0, bs - slope * fs), perToken: slope };
}

async function streams(t: Target, body: Buffer, key: Record<string, string>, n: number): Promise<StreamTiming[]> {
  const out: StreamTiming[] = [];
  for (let i = 0; i < n; i += 1) {
    const r = await postStream(t, body, key);
    expectOk(r, `${t.name} stream`);
    out.push(r);
  }
  return out;
}

/** Measures what the cost model needs; `trips` is the non-streamed latency phase's round-trip report. */
export async function costMeasures(stack: Stack, trips: TripReport): Promise<CostInputs> {
  const { gw, gwT, directT } = stack;
  const { short, shortStream, paced, firstKey, directKey } = stack.requests;
  log(`cost inputs: log bytes over ${2 * LOG_REQUESTS} requests, reply bytes, one sweep, one notifier run, aggregator batches of ${AGGREGATOR_BATCHES.join(' and ')} rows`);

  // The gateway's log: every byte it wrote to stdout (its EMF lines) per request served.
  const s0 = await gw.idle();
  const b0 = gw.logBytes;
  for (let i = 0; i < LOG_REQUESTS; i += 1) {
    expectOk(await post(gwT, short.gateway, firstKey), 'gateway');
    expectOk(await postStream(gwT, shortStream.gateway, firstKey), 'gateway stream');
  }
  const s1 = await gw.idle();
  // The lines are written before each invocation ends; give the pipe a moment to deliver them.
  await new Promise((r) => setTimeout(r, 200));
  const gatewayLogBytesPerRequest = (gw.logBytes - b0) / Math.max(1, s1.served - s0.served);

  // Reply bytes against tokens, on each side: two tokens and a hundred.
  const client = perToken(await streams(gwT, shortStream.gateway, firstKey, WIRE_STREAMS), await streams(gwT, paced.gateway, firstKey, WIRE_STREAMS));
  const provider = perToken(await streams(directT, shortStream.direct, directKey, WIRE_STREAMS), await streams(directT, paced.direct, directKey, WIRE_STREAMS));
  await gw.idle();

  // The real sweeper and notifier, once each, on a client that counts its calls.
  const doc = documentClient(stack.config);
  const calls: TripLog = { keep: true, calls: [] };
  countRoundTrips([doc], TABLE_PREFIX, calls);
  const lines: string[] = [];
  const t0 = performance.now();
  await sweep({ doc, usageTable: tableName(TABLE_PREFIX, 'usage'), ledger: new DynamoLedger(doc, benchTables()), stage: 'bench', writeLine: (l) => lines.push(l) }, Date.now());
  const sweeperMs = performance.now() - t0;
  const sweeperBytes = lines.reduce((s, l) => s + Buffer.byteLength(l) + 1, 0);
  const queriesPerRun = calls.calls.filter((c) => c.op === 'Query').length;
  lines.length = 0;
  const t1 = performance.now();
  await checkLowCredit(
    {
      store: new DynamoNoticeStore(doc, tableName(TABLE_PREFIX, 'workspaces')),
      readBalance: availableCredit(doc, benchTables()),
      publisher: { publish: async () => undefined },
      newId: () => `lc_${randomUUID()}`,
      stage: 'bench',
      writeLine: (l) => lines.push(l),
    },
    Date.now(),
  );
  const notifierMs = performance.now() - t1;
  const notifierBytes = lines.reduce((s, l) => s + Buffer.byteLength(l) + 1, 0);

  // The real aggregator over the run's own usage rows, as stream records, in disjoint batches.
  const need = AGGREGATOR_BATCHES.reduce((s, n) => s + n, 0);
  const rows: Record<string, unknown>[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const page = await doc.send(new ScanCommand({ TableName: tableName(TABLE_PREFIX, 'usage'), Limit: need - rows.length, ExclusiveStartKey: start }));
    rows.push(...(page.Items ?? []));
    start = page.LastEvaluatedKey;
  } while (start !== undefined && rows.length < need);
  const usageRowBytes = rows.length === 0 ? 0 : rows.reduce((s, r) => s + itemSize(wire(r)), 0) / rows.length;
  const record = (row: Record<string, unknown>, i: number): DynamoDBRecord => ({
    eventID: `bench-${i}`,
    eventName: 'INSERT',
    dynamodb: { NewImage: marshall(row, { removeUndefinedValues: true }) as Record<string, AttributeValue> as NonNullable<DynamoDBRecord['dynamodb']>['NewImage'], SequenceNumber: String(1_000_000 + i) },
  });
  const points: { rows: number; ms: number }[] = [];
  lines.length = 0;
  let offset = 0;
  for (const n of AGGREGATOR_BATCHES) {
    const batch = rows.slice(offset, offset + n);
    offset += n;
    if (batch.length < n) break;
    const event: DynamoDBStreamEvent = { Records: batch.map((r, i) => record(r, offset + i)) };
    const t = performance.now();
    const out = await aggregate({ doc, rollupsTable: tableName(TABLE_PREFIX, 'rollups'), writeLine: (l) => lines.push(l) }, event);
    if (out.batchItemFailures.length > 0) throw new Error(`the aggregator failed ${out.batchItemFailures.length} of ${n} records`);
    points.push({ rows: n, ms: performance.now() - t });
  }
  const aggregatorLogBytes = lines.reduce((s, l) => s + Buffer.byteLength(l) + 1, 0) / Math.max(1, points.length);
  // The aggregator's record of counted rows: groups of ids (`lambdas/store/rollups.ts`), so a row's
  // share is its group's size over the ids it holds.
  const markers = await doc.send(new ScanCommand({ TableName: tableName(TABLE_PREFIX, 'rollups'), FilterExpression: 'begins_with(pk, :seen)', ExpressionAttributeValues: { ':seen': 'SEEN#' } }));
  const groups = markers.Items ?? [];
  const marker = groups[0];
  const countedIds = groups.reduce((n, g) => n + (g.ids instanceof Set ? g.ids.size : 1), 0);
  const markerBytes = countedIds === 0 ? 0 : groups.reduce((n, g) => n + itemSize(wire(g)), 0) / countedIds;
  doc.destroy();
  const lookups = trips.lookupsBeforeFirstByte.map((h) => h.value);

  return {
    gatewayLogBytesPerRequest,
    sweeper: { logBytesPerRun: sweeperBytes, msPerRun: sweeperMs, queriesPerRun },
    notifier: { logBytesPerRun: notifierBytes, msPerRun: notifierMs },
    aggregator: { points, logBytesPerBatch: aggregatorLogBytes },
    storage: {
      usageRowBytes,
      markerBytes,
      markerDays: typeof marker?.ttl === 'number' ? Math.round((marker.ttl - Date.now() / 1000) / 86_400) : 0,
    },
    wire: {
      clientFixedBytes: client.fixed,
      clientBytesPerToken: client.perToken,
      providerFixedBytes: provider.fixed,
      providerBytesPerToken: provider.perToken,
      requestFixedBytes: short.direct.length + REQUEST_HEADER_BYTES,
    },
    // The directory reads a cache refresh makes: the most any request made before its first byte.
    lookupsPerRefresh: lookups.length === 0 ? 0 : Math.max(...lookups),
  };
}
