/**
 * The usage aggregator's use case: adds each new usage row to its workspace's daily and monthly
 * totals (overall, by key, by model), exactly once.
 *
 * Stream delivery is at least once (a retried batch, a bisected one, a replay from TRIM_HORIZON),
 * so every row is added in one transaction together with a marker item `SEEN#<requestId>` that
 * may only be created once: a redelivered row fails the marker's condition, the whole
 * transaction is cancelled, and nothing is added twice. Records of a shard are handled in order;
 * at the first one that fails for any other reason the batch stops and that record is reported,
 * so the event source mapping retries from it (`ReportBatchItemFailures`).
 *
 * Rollup items (rollups table, pk/sk):
 * - `WS#<workspaceId>#DAY#<yyyy-mm-dd>` and `WS#<workspaceId>#MONTH#<yyyy-mm>` (UTC, from the
 *   row's `startedAt`), each with sk `ALL`, `KEY#<keyId>` and `MODEL#<servedBy or requestedModel>`;
 *   numeric attributes added: `requests`, `inputTokens`, `cachedInputTokens`, `outputTokens`,
 *   `reasoningTokens`, `chargeMicros`, `uncollectedMicros`, `byokRequests`, `outcome_<outcome>`.
 * - `SEEN#<requestId>` / `SEEN`, with `ttl` 35 days on: far beyond the stream's 24 h retention,
 *   so no redelivery can outlive its marker.
 */
import { TransactWriteCommand, type DynamoDBDocumentClient, type TransactWriteCommandInput } from '@aws-sdk/lib-dynamodb';
import type { AttributeValue as SdkAttributeValue } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { DynamoDBBatchResponse, DynamoDBRecord, DynamoDBStreamEvent } from 'aws-lambda';
import { dayId, monthId } from '../core/windows';
import type { Outcome } from '../shared/records';

/** What {@link aggregate} runs on. */
export interface AggregateDeps {
  readonly doc: DynamoDBDocumentClient;
  /** Full name of the rollups table. */
  readonly rollupsTable: string;
  /** Epoch ms, for the markers' expiry. @default Date.now */
  readonly clock?: () => number;
  /** Where error lines go. @default a line on stderr */
  readonly writeLine?: (line: string) => void;
}

/** The period a rollup item totals. */
export type RollupPeriod = 'day' | 'month';

/** Every outcome a usage row may carry; each has its own `outcome_<name>` counter. */
export const OUTCOMES: readonly Outcome[] = ['ok', 'provider_error', 'upstream_fault', 'client_disconnected', 'balance_exhausted', 'timeout', 'swept'];

/** Partition key of a workspace's totals for one day (`yyyy-mm-dd`) or month (`yyyy-mm`). */
export function rollupPk(workspaceId: string, period: RollupPeriod, periodId: string): string {
  return `WS#${workspaceId}#${period === 'day' ? 'DAY' : 'MONTH'}#${periodId}`;
}

/** Sort keys of the totals items within a period. */
export const ROLLUP_SK = {
  all: 'ALL',
  key: (keyId: string): string => `KEY#${keyId}`,
  model: (model: string): string => `MODEL#${model}`,
} as const;

const DAY_S = 86_400;
/** How long a de-duplication marker is kept; see the module comment. */
const MARKER_RETENTION_S = 35 * DAY_S;
const MAX_CONFLICT_RETRIES = 8;

/** The fields of a usage row the totals need, checked. */
interface UsageFacts {
  readonly workspaceId: string;
  readonly requestId: string;
  readonly keyId: string;
  readonly model: string;
  readonly outcome: Outcome;
  readonly byok: boolean;
  readonly startedAt: number;
  readonly inputTokens: number;
  readonly cachedInputTokens: number;
  readonly outputTokens: number;
  readonly reasoningTokens: number;
  readonly chargeMicros: number;
  readonly uncollectedMicros: number;
}

/** A stream record that cannot be rolled up as it is; retrying will not help, but skipping would lose spend. */
export class MalformedUsageRecordError extends Error {
  override readonly name = 'MalformedUsageRecordError';
}

type TransactItems = NonNullable<TransactWriteCommandInput['TransactItems']>;

function isCount(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

/** Reads the usage row of an INSERT record; throws {@link MalformedUsageRecordError} on a row it cannot trust. */
function usageFacts(record: DynamoDBRecord): UsageFacts {
  const image = record.dynamodb?.NewImage;
  if (image === undefined) throw new MalformedUsageRecordError('INSERT record without a NewImage (the stream must be NEW_IMAGE)');
  // Lambda's attribute-value type spells binary as base64 strings; usage rows hold no binary.
  const row = unmarshall(image as Record<string, SdkAttributeValue>);
  const { workspaceId, requestId, keyId, servedBy, requestedModel, outcome, byok, startedAt } = row;
  const counts = ['inputTokens', 'cachedInputTokens', 'outputTokens', 'reasoningTokens', 'chargeMicros'] as const;
  const bad = (what: string): MalformedUsageRecordError => new MalformedUsageRecordError(`usage row ${String(requestId)}: ${what}`);
  if (typeof workspaceId !== 'string' || typeof requestId !== 'string' || typeof keyId !== 'string') throw bad('missing ids');
  if (typeof outcome !== 'string' || !(OUTCOMES as readonly string[]).includes(outcome)) throw bad(`unknown outcome ${String(outcome)}`);
  if (!isCount(startedAt)) throw bad('bad startedAt');
  const model = typeof servedBy === 'string' && servedBy !== '' ? servedBy : requestedModel;
  if (typeof model !== 'string') throw bad('no model');
  for (const name of counts) if (!isCount(row[name])) throw bad(`bad ${name}`);
  const uncollected = row.uncollectedMicros;
  return {
    workspaceId,
    requestId,
    keyId,
    model,
    outcome: outcome as Outcome,
    byok: byok === true,
    startedAt,
    inputTokens: row.inputTokens as number,
    cachedInputTokens: row.cachedInputTokens as number,
    outputTokens: row.outputTokens as number,
    reasoningTokens: row.reasoningTokens as number,
    chargeMicros: row.chargeMicros as number,
    uncollectedMicros: isCount(uncollected) ? uncollected : 0,
  };
}

/** The transaction adding one usage row: the marker first (its index is checked on cancellation), then six totals. */
function rowItems(deps: AggregateDeps, u: UsageFacts, now: number): TransactItems {
  const table = deps.rollupsTable;
  const values = {
    ':one': 1,
    ':byok': u.byok ? 1 : 0,
    ':in': u.inputTokens,
    ':cached': u.cachedInputTokens,
    ':out': u.outputTokens,
    ':reasoning': u.reasoningTokens,
    ':charge': u.chargeMicros,
    ':uncollected': u.uncollectedMicros,
    ':ws': u.workspaceId,
  };
  const add =
    'ADD requests :one, byokRequests :byok, inputTokens :in, cachedInputTokens :cached, outputTokens :out, ' +
    'reasoningTokens :reasoning, chargeMicros :charge, uncollectedMicros :uncollected, #outcome :one';
  const items: TransactItems = [
    {
      Put: {
        TableName: table,
        Item: { pk: `SEEN#${u.requestId}`, sk: 'SEEN', ttl: Math.floor(now / 1000) + MARKER_RETENTION_S },
        // Created once per request: a redelivered row cancels here and adds nothing.
        ConditionExpression: 'attribute_not_exists(pk)',
      },
    },
  ];
  const periods: [RollupPeriod, string][] = [
    ['day', dayId(u.startedAt)],
    ['month', monthId(u.startedAt)],
  ];
  for (const [period, periodId] of periods) {
    for (const sk of [ROLLUP_SK.all, ROLLUP_SK.key(u.keyId), ROLLUP_SK.model(u.model)]) {
      items.push({
        Update: {
          TableName: table,
          Key: { pk: rollupPk(u.workspaceId, period, periodId), sk },
          // The plain attributes let the CLI read an item without parsing its keys.
          UpdateExpression: `${add} SET workspaceId = :ws, #period = :period, periodId = :periodId`,
          ExpressionAttributeNames: { '#outcome': `outcome_${u.outcome}`, '#period': 'period' },
          ExpressionAttributeValues: { ...values, ':period': period, ':periodId': periodId },
        },
      });
    }
  }
  return items;
}

type CancelledError = Error & { CancellationReasons?: { Code?: string }[] };

function isCancelled(err: unknown): err is CancelledError {
  return err instanceof Error && err.name === 'TransactionCanceledException';
}

function pause(attempt: number): Promise<void> {
  const ms = Math.min(500, 10 * 2 ** attempt) * (0.5 + Math.random());
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Adds one usage row; resolves to false when it had been added before. */
async function addRow(deps: AggregateDeps, u: UsageFacts): Promise<boolean> {
  const items = rowItems(deps, u, (deps.clock ?? Date.now)());
  for (let attempt = 0; ; attempt += 1) {
    try {
      await deps.doc.send(new TransactWriteCommand({ TransactItems: items }));
      return true;
    } catch (err) {
      if (!isCancelled(err)) throw err;
      const reasons = err.CancellationReasons ?? [];
      if (reasons[0]?.Code === 'ConditionalCheckFailed') return false; // already counted
      // Batches of other shards add to the same totals at the same moment: a conflict says
      // nothing about the data, so run it again.
      const conflictOnly = reasons.some((r) => r.Code === 'TransactionConflict') && reasons.every((r) => r.Code === undefined || r.Code === 'None' || r.Code === 'TransactionConflict');
      if (!conflictOnly || attempt >= MAX_CONFLICT_RETRIES) throw err;
      await pause(attempt);
    }
  }
}

/**
 * Rolls up a batch of usage stream records, in order. Records other than INSERT are ignored
 * (usage rows are never changed). On the first failure the batch stops and the record's
 * `SequenceNumber` is reported, so the mapping retries from it and no later record runs ahead
 * of an earlier one.
 */
export async function aggregate(deps: AggregateDeps, event: DynamoDBStreamEvent): Promise<DynamoDBBatchResponse> {
  const write = deps.writeLine ?? ((line: string) => void process.stderr.write(`${line}\n`));
  for (const record of event.Records) {
    if (record.eventName !== 'INSERT') continue;
    const sequence = record.dynamodb?.SequenceNumber ?? record.eventID ?? '';
    try {
      await addRow(deps, usageFacts(record));
    } catch (err) {
      write(
        JSON.stringify({
          level: 'error',
          event: 'rollup_failed',
          sequenceNumber: sequence,
          error: err instanceof Error ? `${err.name}: ${err.message}` : String(err),
        }),
      );
      return { batchItemFailures: [{ itemIdentifier: sequence }] };
    }
  }
  return { batchItemFailures: [] };
}
