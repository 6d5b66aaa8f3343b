/**
 * The store's functions for everyone outside the request path: top-ups, the workspace-wide
 * balance, the slice count an operator sees and sets, and reading usage rows.
 */
import { GetCommand, QueryCommand, TransactWriteCommand, UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { DocumentSender } from '../adapters/dynamo-wire';
import type { UsageRecord } from '../shared/records';
import { monthId } from '../core/windows';
import { MAX_SLICES, allUsagePks, sliceKey } from './keys';
import { DynamoLedger, drainRetired, writeSliceCount, type LedgerTables } from './ledger';
import { isSettledRow, readRequestRow } from './request-rows';

/** Thrown when a top-up names a workspace whose ledger does not exist. */
export class LedgerNotFoundError extends Error {
  override readonly name = 'LedgerNotFoundError';
}

/** A workspace's money summed over its slices, and its current month. */
export interface BalanceSummary {
  readonly availableMicros: number;
  readonly heldMicros: number;
  readonly spentMicros: number;
  readonly creditedMicros: number;
  /** Slices admissions use now, and the operator's setting (automatic growth stays at or above it). */
  readonly slices: number;
  readonly sliceFloor: number;
  /** The current UTC month's settled and held amounts, over every slice. */
  readonly month: { readonly id: string; readonly settledMicros: number; readonly heldMicros: number };
}

function isConditionFailure(err: unknown): boolean {
  return err instanceof Error && (err.name === 'ConditionalCheckFailedException' || err.name === 'TransactionCanceledException');
}

/**
 * Adds credit to a workspace: it lands on slice 0, `available` and `credited` growing together so
 * `credited = available + held + spent` keeps holding. With a `reference` (the payment's id), a
 * second call with the same reference adds nothing and returns false: a marker item
 * `CREDIT#<reference>` is created in the same transaction, and only once.
 */
export async function creditWorkspace(
  db: DocumentSender,
  ledgerTable: string,
  input: { readonly workspaceId: string; readonly micros: number; readonly reference?: string; readonly now?: number },
): Promise<boolean> {
  const { workspaceId, micros } = input;
  if (!Number.isSafeInteger(micros) || micros <= 0) throw new RangeError('a credit is a positive whole number of micro-units');
  const key = sliceKey(workspaceId, 0);
  const credit = {
    TableName: ledgerTable,
    Key: key,
    UpdateExpression: 'ADD availableMicros :m, creditedMicros :m',
    // The slice exists only for a created workspace. The ceiling keeps every ledger figure an
    // exact JavaScript integer when read back.
    ConditionExpression: 'attribute_exists(pk) AND creditedMicros <= :ceiling',
    ExpressionAttributeValues: { ':m': micros, ':ceiling': Number.MAX_SAFE_INTEGER - micros },
  };
  try {
    if (input.reference === undefined) {
      await db.send(new UpdateCommand(credit));
      return true;
    }
    await db.send(
      new TransactWriteCommand({
        TransactItems: [
          {
            Put: {
              TableName: ledgerTable,
              Item: { pk: key.pk, sk: `CREDIT#${input.reference}`, micros, at: input.now ?? Date.now() },
              ConditionExpression: 'attribute_not_exists(pk)',
              ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
            },
          },
          { Update: { ...credit, ReturnValuesOnConditionCheckFailure: 'ALL_OLD' } },
        ],
      }),
    );
    return true;
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
    const reasons = (err as { CancellationReasons?: { Code?: string }[] }).CancellationReasons;
    if (reasons?.[0]?.Code === 'ConditionalCheckFailed') return false; // this reference was credited before
    throw new LedgerNotFoundError(`no ledger for workspace ${workspaceId}, or the credit is beyond exact counting`);
  }
}

/** The workspace-wide balance, summed over every slice from one consistent snapshot. */
export async function readBalance(db: DocumentSender, tables: LedgerTables, workspaceId: string, now: number = Date.now()): Promise<BalanceSummary> {
  const ledger = new DynamoLedger(db, tables);
  const snapshot = await ledger.readSlices(workspaceId, now);
  const sum = (f: (s: (typeof snapshot.slices)[number]) => number): number => snapshot.slices.reduce((a, s) => a + f(s), 0);
  const zero = await db.send(new GetCommand({ TableName: tables.ledger, Key: sliceKey(workspaceId, 0), ConsistentRead: true }));
  const floor = typeof zero.Item?.sliceFloor === 'number' ? zero.Item.sliceFloor : 1;
  return {
    availableMicros: sum((s) => s.availableMicros),
    heldMicros: sum((s) => s.heldMicros),
    spentMicros: sum((s) => s.spentMicros),
    creditedMicros: sum((s) => s.creditedMicros),
    slices: snapshot.active,
    sliceFloor: floor,
    month: { id: monthId(now), settledMicros: sum((s) => s.month.settledMicros), heldMicros: sum((s) => s.month.heldMicros) },
  };
}

/**
 * Sets how many slices a workspace's ledger uses (1..32), as an operator: the count, and the floor
 * automatic growth keeps to. Lowering it retires the upper slices: their credit and headroom move
 * to slice 0 at once, conditioned on what was read (no unit is lost under load); holds still open
 * on them settle there and are moved on afterwards.
 */
export async function setLedgerSlices(db: DocumentSender, tables: LedgerTables, workspaceId: string, count: number): Promise<void> {
  if (!Number.isSafeInteger(count) || count < 1 || count > MAX_SLICES) throw new RangeError(`a workspace has 1 to ${MAX_SLICES} ledger slices`);
  for (let attempt = 0; attempt < 20; attempt += 1) {
    if (await writeSliceCount(db, tables.ledger, workspaceId, undefined, count, count)) break;
  }
  const ledger = new DynamoLedger(db, tables);
  for (let attempt = 0; attempt < 20; attempt += 1) {
    const snapshot = await ledger.readSlices(workspaceId);
    const retired = snapshot.slices.filter((s) => s.slice >= snapshot.active && (s.availableMicros > 0 || (s.rateCap !== undefined && s.rateRoom > 0)));
    if (retired.length === 0) return;
    await drainRetired(db, tables.ledger, workspaceId, snapshot);
  }
}

/**
 * One request's usage row, by its workspace and id (the id carries the request's start, so the
 * row's key is known: one strongly consistent read, no index); undefined while the request is
 * still running (its row is an open hold) or when there is none.
 */
export async function usageRowByRequest(doc: DocumentSender, usageTable: string, workspaceId: string, requestId: string): Promise<UsageRecord | undefined> {
  const row = await readRequestRow(doc, usageTable, workspaceId, requestId);
  return isSettledRow(row) ? (row as unknown as UsageRecord) : undefined;
}

/**
 * A workspace's usage rows with `startedAt` ISO time in [from, to) (whole range when omitted),
 * oldest first: every shard is read and the rows merged by time. Settled requests only: the row of
 * a request still running is its open hold, not yet a usage row.
 */
export async function usageRows(
  doc: DynamoDBDocumentClient,
  usageTable: string,
  workspaceId: string,
  range: { readonly from?: string; readonly to?: string } = {},
): Promise<UsageRecord[]> {
  const rows: UsageRecord[] = [];
  await Promise.all(
    allUsagePks(workspaceId).map(async (pk) => {
      let start: Record<string, unknown> | undefined;
      do {
        const out = await doc.send(
          new QueryCommand({
            TableName: usageTable,
            // ISO times start with a digit: '0' sorts before every row, '~' after.
            KeyConditionExpression: 'pk = :pk AND sk BETWEEN :from AND :to',
            ExpressionAttributeValues: { ':pk': pk, ':from': range.from ?? '0', ':to': range.to ?? '~' },
            ConsistentRead: true,
            ExclusiveStartKey: start,
          }),
        );
        rows.push(...((out.Items ?? []).filter((item) => isSettledRow(item)) as UsageRecord[]));
        start = out.LastEvaluatedKey;
      } while (start !== undefined);
    }),
  );
  return rows.sort((a, b) => (a.sk < b.sk ? -1 : a.sk > b.sk ? 1 : 0));
}
