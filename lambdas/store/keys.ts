/**
 * The ledger's key layout, spelled once. Every other module (the ledger, the sweeper, the CLI's
 * views, tests) derives a key from here, so the layout cannot drift.
 *
 * ledger table (pk, sk):
 * - `WS#<ws>` / `BALANCE`: slice 0 of the workspace (money, spend-rate headroom, the slice count).
 * - `WS#<ws>#S<i>` / `BALANCE`: slice i > 0; every slice on its own partition key value.
 * - Slice i's share of the workspace month is on its slice item (`MONTH#<yyyy-mm>` in a request's
 *   windows names it); it had its own item, `WSM#<ws>#<i>` / `MONTH#<yyyy-mm>`, before.
 * - `KEY#<ws>#<keyId>` / `KEYWIN#<keyId>#<windowId>[~<generation>]` and `RATE#<keyId>#<minute>`: the
 *   key's own items (key slice 0); `KEY#<ws>#<keyId>#S<j>`: the same items on key slice j > 0 (see
 *   core/key-slices.ts). The window is written only while the key's limit is tracked.
 * - `MEMBER#<ws>#<memberId>` / `MEMBERMONTH#<memberId>#<yyyy-mm>[~<generation>]`: a member's month,
 *   written only while the member's limit is tracked.
 * - `<window's home pk>` / `ADOPTED#<window sk>#<requestId>`: a request a limit's arming adopted
 *   (`limit-arming.ts`).
 * usage table: a request's row, `pk` = `<ws>#U<n>`, sk `<iso start>#<requestId>`; while it is open
 * it carries `expiryShard` (`X<n>`), which puts it in the sweeper's sparse index.
 */
import { keySliceOf } from '../core/key-slices';
import { sha1Word } from '../core/sha1';

/** The sort key of a slice's money item. */
export const BALANCE_SK = 'BALANCE';
/**
 * Most slices one workspace may have. A snapshot of every slice (its month share is on its item)
 * and the key's and member's items (up to 17) fits one TransactGetItems (100 items) with room to
 * spare; 48 is what the store map's figures called for (see docs/store.md).
 */
export const MAX_SLICES = 48;
/**
 * Shards of the open requests' expiry index. Every admission puts one index entry and its
 * settlement deletes it, 2 write units per request on one shard; 256 shards keep each under
 * 1,000 units/s up to 128,000 requests/s for the whole service.
 */
export const EXPIRY_SHARDS = 256;
/** Shards of one workspace's usage rows: 32 × 500 requests/s (2 units each, in a transaction). */
export const USAGE_SHARDS = 32;

/** A small, stable hash of a string, for picking shards (not for security). */
export function shardOf(id: string, shards: number): number {
  // SHA-1's first word, computed here: OpenSSL's call costs more than the hash (see sha1.ts).
  return sha1Word(id) % shards;
}

/** Partition key of one slice of a workspace's ledger; slice 0 keeps the historical key. */
export function slicePk(workspaceId: string, slice: number): string {
  return slice === 0 ? `WS#${workspaceId}` : `WS#${workspaceId}#S${slice}`;
}

/** The key of one slice's money item. */
export function sliceKey(workspaceId: string, slice: number): { pk: string; sk: string } {
  return { pk: slicePk(workspaceId, slice), sk: BALANCE_SK };
}

/**
 * Partition key slice `slice`'s month share had before it moved onto the slice item. Nothing
 * writes it now; the bench's store map still names the family (its owner drops it with its next
 * change).
 */
export function monthPk(workspaceId: string, slice: number): string {
  return `WSM#${workspaceId}#${slice}`;
}

/** Partition key of a key's own items (the workspace is part of it: a key id is only unique within its workspace's records). */
export function keyPk(workspaceId: string, keyId: string): string {
  return `KEY#${workspaceId}#${keyId}`;
}

/** Partition key of key slice `keySlice` of a key's items; key slice 0 keeps the historical key. */
export function keySlicePk(workspaceId: string, keyId: string, keySlice: number): string {
  return keySlice === 0 ? keyPk(workspaceId, keyId) : `${keyPk(workspaceId, keyId)}#S${keySlice}`;
}

/** Partition key of a member's items. */
export function memberPk(workspaceId: string, memberId: string): string {
  return `MEMBER#${workspaceId}#${memberId}`;
}

/**
 * The ledger key of a window a hold occupies, from the sort key the hold records: key windows
 * live under the key (on the key slice of the hold's slice), member months under the member, the
 * workspace month on the hold's slice item itself.
 */
export function windowKey(workspaceId: string, slice: number, sk: string): { pk: string; sk: string } {
  if (sk.startsWith('KEYWIN#') || sk.startsWith('RATE#')) {
    const keyId = sk.slice(sk.indexOf('#') + 1, sk.lastIndexOf('#'));
    return { pk: keySlicePk(workspaceId, keyId, keySliceOf(slice)), sk };
  }
  if (sk.startsWith('MEMBERMONTH#')) {
    const memberId = sk.slice('MEMBERMONTH#'.length, sk.lastIndexOf('#'));
    return { pk: memberPk(workspaceId, memberId), sk };
  }
  return sliceKey(workspaceId, slice);
}

/** The expiry index shard of an open request's row. */
export function expiryShard(holdId: string): string {
  return `X${shardOf(holdId, EXPIRY_SHARDS)}`;
}

/** Every expiry index shard, for the sweeper. */
export function allExpiryShards(): string[] {
  return Array.from({ length: EXPIRY_SHARDS }, (_, i) => `X${i}`);
}

/** Partition key of a request's row. */
export function usagePk(workspaceId: string, requestId: string): string {
  return `${workspaceId}#U${shardOf(requestId, USAGE_SHARDS)}`;
}

/** The last whole second `isoMillis` spelled: `2026-11-27T17:18:10.`, and that second's start. */
let isoSecond = { start: Number.NaN, prefix: '' };

/** Sort key of a request's row: when it started (ISO, so rows sort by time) and its id. */
export function usageSk(startedAt: number, requestId: string): string {
  return `${isoMillis(startedAt)}#${requestId}`;
}

/**
 * `new Date(at).toISOString()`, its seconds spelled once per second: an admission and its
 * settlement both name the request's row, and requests of the same second share the prefix.
 */
export function isoMillis(at: number): string {
  // A fraction of a millisecond (toISOString drops it), NaN or an infinity (it throws): spelled whole.
  if (!Number.isInteger(at)) return new Date(at).toISOString();
  const millis = at - Math.floor(at / 1000) * 1000;
  const start = at - millis;
  if (start !== isoSecond.start) {
    const iso = new Date(start).toISOString();
    // Only the four-digit years share the layout `YYYY-MM-DDTHH:MM:SS.mmmZ`; the rest are spelled whole.
    if (iso.length !== 24) return new Date(at).toISOString();
    isoSecond = { start, prefix: iso.slice(0, 20) };
  }
  return `${isoSecond.prefix}${millis < 10 ? '00' : millis < 100 ? '0' : ''}${millis}Z`;
}

/** The key of a request's row. */
export function requestRowKey(workspaceId: string, requestId: string, startedAt: number): { pk: string; sk: string } {
  return { pk: usagePk(workspaceId, requestId), sk: usageSk(startedAt, requestId) };
}

/** Every usage partition of a workspace, for reading its rows by time. */
export function allUsagePks(workspaceId: string): string[] {
  return Array.from({ length: USAGE_SHARDS }, (_, i) => `${workspaceId}#U${i}`);
}
