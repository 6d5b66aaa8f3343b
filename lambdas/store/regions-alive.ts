/**
 * Whether another region is running, as this region's replica can tell (docs/regions.md, "A
 * top-up's spread"): each region's sweeper marks its region alive on every run (once a minute),
 * on an item only that region writes (`REGION#<region>` / `ALIVE`, in the ledger table), and the
 * mark replicates like any write. A region whose mark, as read here, is fresher than
 * {@link ALIVE_FRESH_MS} counts as running: its DynamoDB took a write and its scheduled functions
 * ran a few minutes ago at most, and its writes reach this region. A region never marked (a
 * stage deployed before the mark, a region still starting), marked long ago (lost, or its
 * replication to here stopped) or marked in the future by more than a clock's skew does not.
 */
import { BatchGetCommand, PutCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { DocumentSender } from '../adapters/dynamo-wire';
import { peersOf, type RegionSetup } from './regions';

/** How old a region's mark may be, as read here, for the region to count as running: three sweeper runs and the replication lag. */
export const ALIVE_FRESH_MS = 180_000;

/** How far ahead of this clock a mark may be (another region's clock, skewed) and still count. */
const SKEW_MS = 30_000;

/** The item a region's sweeper marks it alive on. */
export function aliveKey(region: string): { pk: string; sk: string } {
  return { pk: `REGION#${region}`, sk: 'ALIVE' };
}

/** Marks `region` alive at `now` (its own item: only that region's sweeper writes it). */
export async function markAlive(doc: DynamoDBDocumentClient, ledgerTable: string, region: string, now: number): Promise<void> {
  await doc.send(new PutCommand({ TableName: ledgerTable, Item: { ...aliveKey(region), at: now, region } }));
}

/** Whether a mark read at `now` says its region is running. */
export function freshMark(at: unknown, now: number): boolean {
  return typeof at === 'number' && Number.isSafeInteger(at) && at <= now + SKEW_MS && now - at <= ALIVE_FRESH_MS;
}

/** The other regions of the stage (as `setup.region` sees them) whose marks, read in this replica, say they are running. */
export async function livePeers(doc: DocumentSender, ledgerTable: string, setup: RegionSetup, now: number): Promise<string[]> {
  const peers = peersOf(setup);
  if (peers.length === 0) return [];
  // Eventually consistent is enough: the mark is minutes fresh or it is not.
  const out = await doc.send(new BatchGetCommand({ RequestItems: { [ledgerTable]: { Keys: peers.map(aliveKey) } } }));
  const marks = new Map((out.Responses?.[ledgerTable] ?? []).map((i) => [i['region'], i['at']]));
  return peers.filter((p) => freshMark(marks.get(p), now));
}
