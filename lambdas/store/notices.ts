/**
 * The low-credit notifier's items. Thresholds are the `lowCreditThresholdMicros` attribute of a
 * workspace's `META` item; a recorded crossing is an item of its own beside it, sk
 * {@link LOW_CREDIT_SK}, so that a rewrite of `META` by the management API cannot lose it.
 */
import { DeleteCommand, PutCommand, ScanCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { DocumentSender } from '../adapters/dynamo-wire';
import type { BalanceReader, LowCreditNotice, NoticeStore, WatchedWorkspace } from '../notifier/ports';
import { readBalanceEverywhere } from './regions-balance';
import type { RegionSetup } from './regions';
import type { LedgerTables } from './ledger';

/** Sort key of the recorded crossing in the workspaces table (pk is the workspace id). */
export const LOW_CREDIT_SK = 'NOTICE#LOW_CREDIT';

function isConditionFailure(err: unknown): boolean {
  return err instanceof Error && err.name === 'ConditionalCheckFailedException';
}

/** {@link NoticeStore} on the workspaces table. */
export class DynamoNoticeStore implements NoticeStore {
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly workspacesTable: string,
  ) {}

  /**
   * One filtered scan of the workspaces table a run. It is small (settings, members, profiles)
   * and read once per schedule tick, off the request path; if it grows, a sparse index on the
   * threshold replaces the scan without changing the port.
   */
  async *watched(): AsyncIterable<WatchedWorkspace> {
    const found = new Map<string, { thresholdMicros?: unknown; crossingId?: string }>();
    let start: Record<string, unknown> | undefined;
    do {
      const page = await this.doc.send(
        new ScanCommand({
          TableName: this.workspacesTable,
          FilterExpression: '(sk = :meta AND attribute_exists(lowCreditThresholdMicros)) OR sk = :notice',
          ProjectionExpression: 'pk, sk, lowCreditThresholdMicros, crossingId',
          ExpressionAttributeValues: { ':meta': 'META', ':notice': LOW_CREDIT_SK },
          ExclusiveStartKey: start,
        }),
      );
      for (const item of page.Items ?? []) {
        if (typeof item.pk !== 'string') continue;
        const entry = found.get(item.pk) ?? {};
        if (item.sk === 'META') entry.thresholdMicros = item.lowCreditThresholdMicros;
        else if (typeof item.crossingId === 'string') entry.crossingId = item.crossingId;
        found.set(item.pk, entry);
      }
      start = page.LastEvaluatedKey;
    } while (start !== undefined);
    for (const [workspaceId, entry] of found) yield { workspaceId, ...entry };
  }

  async record(notice: LowCreditNotice): Promise<boolean> {
    try {
      await this.doc.send(
        new PutCommand({
          TableName: this.workspacesTable,
          Item: {
            pk: notice.workspaceId,
            sk: LOW_CREDIT_SK,
            crossingId: notice.crossingId,
            thresholdMicros: notice.thresholdMicros,
            availableMicros: notice.availableMicros,
            notifiedAt: notice.at,
          },
          // One record per crossing: a second check that saw the same crossing loses here.
          ConditionExpression: 'attribute_not_exists(pk)',
        }),
      );
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      throw err;
    }
  }

  async clear(workspaceId: string, crossingId: string): Promise<void> {
    try {
      await this.doc.send(
        new DeleteCommand({
          TableName: this.workspacesTable,
          Key: { pk: workspaceId, sk: LOW_CREDIT_SK },
          // Only the crossing this run saw: a newer one recorded meanwhile stays.
          ConditionExpression: 'crossingId = :c',
          ExpressionAttributeValues: { ':c': crossingId },
        }),
      );
    } catch (err) {
      if (!isConditionFailure(err)) throw err;
    }
  }
}

/**
 * The workspace's available credit: the store's workspace-wide balance, summed over every escrow
 * slice from one consistent snapshot, so a split workspace is judged on its whole balance.
 */
export function availableCredit(db: DocumentSender, tables: LedgerTables, regions?: RegionSetup): BalanceReader {
  // With several regions, the whole is every region's slices (`regions-balance.ts`).
  return async (workspaceId) => (await readBalanceEverywhere(db, tables, regions, workspaceId)).availableMicros;
}
