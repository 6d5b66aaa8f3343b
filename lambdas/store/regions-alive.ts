/**
 * Whether another region is running, as this region's replica can tell (docs/regions.md, "A
 * top-up's spread"): each region's sweeper marks its region alive on every run (once a minute),
 * on an item only that region writes (`REGION#<region>` / `ALIVE`, in the ledger table), and the
 * mark replicates like any write. A region whose mark, as read here, is fresher than
 * {@link ALIVE_FRESH_MS} counts as running: its DynamoDB took a write and its scheduled functions
 * ran a few minutes ago at most, and its writes reach this region. A region never marked (a
 * stage deployed before the mark, a region still starting), marked long ago (lost, or its
 * replication to here stopped) or marked in the future by more than a clock's skew does not.
 * The configuration home reads the marks to spread a top-up; a region's ledger reads them to count
 * a region lost at once (`regions-ledger.ts`), every process alike.
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

/** The marks of the other regions of the stage (as `setup.region` sees them), read in this replica: each region's `at`, absent when it has none. */
export async function peerMarks(doc: DocumentSender, ledgerTable: string, setup: RegionSetup): Promise<Map<string, unknown>> {
  const peers = peersOf(setup);
  if (peers.length === 0) return new Map();
  // Eventually consistent is enough: the mark is minutes fresh or it is not.
  const out = await doc.send(new BatchGetCommand({ RequestItems: { [ledgerTable]: { Keys: peers.map(aliveKey) } } }));
  return new Map((out.Responses?.[ledgerTable] ?? []).filter((i) => peers.includes(String(i['region']))).map((i) => [String(i['region']), i['at']]));
}

/** The other regions of the stage whose marks, read in this replica, say they are running. */
export async function livePeers(doc: DocumentSender, ledgerTable: string, setup: RegionSetup, now: number): Promise<string[]> {
  const marks = await peerMarks(doc, ledgerTable, setup);
  return peersOf(setup).filter((p) => freshMark(marks.get(p), now));
}

/**
 * Whether a mark says its region stopped: there is one, and it is too old (or unreadable). No
 * mark is no evidence either way (a stage upgraded, a region whose sweeper has not run yet).
 */
export function staleMark(marks: ReadonlyMap<string, unknown>, region: string, now: number): boolean {
  return marks.has(region) && !freshMark(marks.get(region), now);
}
