/**
 * The transfer agent's use case (docs/regions.md, "How an ask reaches the giver"): fed by its
 * region's ledger stream, it takes the transfer items other regions wrote (replicated writes
 * appear in every region's stream) and, for each, credits what that region sent here and answers
 * what it asked of this region. Every write is a transaction on this region's own items
 * (`store/regions-transfers.ts`), conditioned on the counters it read, so a record delivered twice,
 * or the agent racing a waiting admission that credits the same transfer, applies it once.
 */
import type { DynamoDBBatchResponse, DynamoDBRecord, DynamoDBStreamEvent } from 'aws-lambda';
import { quantityOf, type Quantity } from '../core/transfers';
import type { RegionTransfers } from '../store/regions-transfers';

/** Whose transfer item a stream record shows, when it is another region's. */
export interface TransferNotice {
  readonly workspaceId: string;
  readonly quantity: Quantity;
  readonly peer: string;
}

/** The transfer item a record shows, when another region wrote it; undefined for anything else. */
export function noticeOf(record: DynamoDBRecord, region: string): TransferNotice | undefined {
  const image = record.dynamodb?.NewImage;
  const pk = image?.pk?.S;
  const sk = image?.sk?.S;
  const peer = image?.region?.S;
  const workspaceId = image?.ws?.S;
  if (pk === undefined || !pk.startsWith('XFER#') || sk === undefined || peer === undefined || peer === region || workspaceId === undefined) return undefined;
  const quantity = quantityOf(sk, image?.keyId?.S, image?.memberId?.S, image?.rateWindow?.S);
  return quantity === undefined ? undefined : { workspaceId, quantity, peer };
}

/**
 * Handles one batch: each distinct (workspace, quantity, region) once, in stream order. On a
 * failure the batch stops and that record's sequence number is reported, so the mapping delivers
 * it (and what follows) again; what was done before it is idempotent anyway.
 */
export async function handleTransferRecords(transfers: RegionTransfers, event: DynamoDBStreamEvent): Promise<DynamoDBBatchResponse> {
  const done = new Set<string>();
  for (const record of event.Records) {
    const notice = noticeOf(record, transfers.setup.region);
    if (notice === undefined) continue;
    const id = `${notice.workspaceId}\u0000${notice.peer}\u0000${record.dynamodb?.NewImage?.sk?.S ?? ''}`;
    if (done.has(id)) continue;
    try {
      await transfers.reconcile(notice.workspaceId, notice.quantity, [notice.peer]);
      done.add(id);
    } catch (err) {
      const sequence = record.dynamodb?.SequenceNumber ?? record.eventID ?? '';
      process.stderr.write(`${JSON.stringify({ level: 'error', event: 'transfer_failed', sequenceNumber: sequence, error: err instanceof Error ? `${err.name}: ${err.message}` : String(err) })}\n`);
      return { batchItemFailures: [{ itemIdentifier: sequence }] };
    }
  }
  return { batchItemFailures: [] };
}
