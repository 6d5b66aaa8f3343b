/**
 * API keys: minting (shown once), listing (visible part only), expiry and credit limits.
 * A key is stored only as the SHA-256 of the raw string plus its visible part.
 */
import { QueryCommand, TransactGetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { KEY_SLICES } from '../core/key-slices';
import { ARMING_MARGIN_MS, armingMarksLive, needsArming, trackFromFor } from '../core/limit-arming';
import { minuteCeil, windowId, windowKeys } from '../core/windows';
import { hashKey, mintKey, prefixForStage, visiblePart } from '../core/api-key';
import type { KeyEndedHow, KeyRecord, WindowCadence, WindowRecord } from '../shared/records';
import { KEYS_BY_WORKSPACE } from '../shared/schema';
import type { AdminContext, TransactItem } from './directory-context';
import { META, conditional, failedAt, memberSk, newId, nowOf, table, transact } from './directory-context';
import { lastUseOfKey } from './directory-usage';
import { DEFAULT_CACHE_TTL_MS, armWindow, reopenCounters } from './limit-arming';
import { requireHomeRegionItems, runsElsewhere } from './config-home';
import { windowKey } from './keys';
import {
  AmbiguousKeyError,
  KeyExpiredError,
  KeyNotFoundError,
  KeySlotsFullError,
  MemberNotFoundError,
  ValidationError,
  WorkspaceNotFoundError,
} from './directory-errors';
import { checkLabel, formatMicros, minorToMicros } from './directory-validate';
import { checkWorkspaceId, getWorkspace } from './directory-common';

/** SPEC: a workspace holds at most five live keys (expired ones still hold their slot). */
export const MAX_KEY_SLOTS = 5;

/** Cadences a key credit limit may count over. */
export const WINDOW_CADENCES: readonly WindowCadence[] = ['daily', 'weekly', 'monthly', 'never'];

/** Names one key of a workspace: by key id, or by its visible part (`slc_dev_…AbCd`). */
export interface KeyRef {
  readonly workspaceId: string;
  readonly keyId?: string;
  readonly visible?: string;
}

/** A key as the operator sees it: never the hash, never the raw key. */
export interface KeyView {
  readonly keyId: string;
  readonly visible: string;
  readonly name: string | null;
  readonly memberId: string | null;
  readonly createdAt: string;
  readonly expiresAt: string | null;
  readonly revokedAt: string | null;
  /** Who ended it (a management principal: `console:<ws>/<member>`, an IAM ARN, `local`); null while live or when not kept. */
  readonly endedBy: string | null;
  /** How it ended; null while live or expired, or on keys ended before it was kept. */
  readonly endedHow: KeyEndedHow | null;
  /** `ended` keys are revoked; `expired` ones still hold their slot. */
  readonly state: 'live' | 'expired' | 'ended';
  readonly creditLimit: { readonly micros: number; readonly minor: string; readonly window: WindowCadence } | null;
}

/**
 * The transaction item that takes one of the workspace's five key slots (refused when five are
 * held): minting and an invitation of someone new take theirs from the same counter, so together
 * they never hold more than five.
 */
export function takeKeySlotItem(ctx: AdminContext, workspaceId: string): TransactItem {
  return {
    Update: {
      TableName: table(ctx, 'workspaces'),
      Key: { pk: workspaceId, sk: META },
      UpdateExpression: 'SET keySlots = if_not_exists(keySlots, :zero) + :one',
      ConditionExpression: 'attribute_exists(pk) AND (attribute_not_exists(keySlots) OR keySlots < :max)',
      ExpressionAttributeValues: { ':zero': 0, ':one': 1, ':max': MAX_KEY_SLOTS },
    },
  };
}

/**
 * Mints a key. One transaction takes a slot (`keySlots < 5`, then +1) and writes the key record
 * under `attribute_not_exists`; concurrent mints therefore never exceed five. The raw key is in
 * the result only: it is not stored and cannot be recovered.
 */
export async function createKey(
  ctx: AdminContext,
  input: { workspaceId: string; memberId?: string; name?: string; expiresAt?: number },
): Promise<{ rawKey: string; keyId: string; visible: string }> {
  checkWorkspaceId(input.workspaceId);
  const name = input.name === undefined ? undefined : checkLabel(input.name, 'key name', 64);
  const now = nowOf(ctx);
  if (input.expiresAt !== undefined && (!Number.isSafeInteger(input.expiresAt) || input.expiresAt <= now)) {
    throw new ValidationError('a key expiry must be an instant in the future');
  }
  const rawKey = mintKey(prefixForStage(ctx.stage));
  const record: KeyRecord = {
    keyHash: hashKey(rawKey),
    keyId: newId('key'),
    workspaceId: input.workspaceId,
    visible: visiblePart(rawKey),
    createdAt: now,
    ...(input.memberId === undefined ? {} : { memberId: input.memberId }),
    ...(name === undefined ? {} : { name }),
    ...(input.expiresAt === undefined ? {} : { expiresAt: input.expiresAt }),
  };
  await transact(
    ctx,
    [
      takeKeySlotItem(ctx, input.workspaceId),
      { Put: { TableName: table(ctx, 'keys'), Item: record, ConditionExpression: 'attribute_not_exists(keyHash)' } },
      ...(input.memberId === undefined
        ? []
        : [
            {
              // The member must exist when the key is minted for them, or their monthly limit
              // would silently count against nobody.
              ConditionCheck: {
                TableName: table(ctx, 'workspaces'),
                Key: { pk: input.workspaceId, sk: memberSk(input.memberId) },
                ConditionExpression: 'attribute_exists(pk)',
              },
            },
          ]),
    ],
    async (reasons) => {
      if (failedAt(reasons, 0)) {
        return (await getWorkspace(ctx, input.workspaceId)) === undefined
          ? new WorkspaceNotFoundError(input.workspaceId)
          : new KeySlotsFullError(input.workspaceId);
      }
      if (failedAt(reasons, 2)) return new MemberNotFoundError(input.workspaceId, input.memberId ?? '');
      return undefined;
    },
  );
  return { rawKey, keyId: record.keyId, visible: record.visible };
}

/** Every key record of a workspace, through the `byWorkspace` index (hashes included: internal). */
export async function queryKeyRecords(ctx: AdminContext, workspaceId: string): Promise<KeyRecord[]> {
  const keys: KeyRecord[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const out = await ctx.doc.send(
      new QueryCommand({
        TableName: table(ctx, 'keys'),
        IndexName: KEYS_BY_WORKSPACE,
        KeyConditionExpression: 'workspaceId = :ws',
        ExpressionAttributeValues: { ':ws': workspaceId },
        ExclusiveStartKey: start,
      }),
    );
    keys.push(...((out.Items ?? []) as KeyRecord[]));
    start = out.LastEvaluatedKey;
  } while (start !== undefined);
  return keys;
}

function keyState(k: KeyRecord, now: number): KeyView['state'] {
  if (k.revokedAt !== undefined) return 'ended';
  if (k.expiresAt !== undefined && k.expiresAt <= now) return 'expired';
  return 'live';
}

function iso(ms: number | undefined): string | null {
  return ms === undefined ? null : new Date(ms).toISOString();
}

function toView(k: KeyRecord, now: number): KeyView {
  return {
    keyId: k.keyId,
    visible: k.visible,
    name: k.name ?? null,
    memberId: k.memberId ?? null,
    createdAt: new Date(k.createdAt).toISOString(),
    expiresAt: iso(k.expiresAt),
    revokedAt: iso(k.revokedAt),
    endedBy: k.revokedAt === undefined ? null : (k.endedBy ?? null),
    endedHow: k.revokedAt === undefined ? null : (k.endedHow ?? null),
    state: keyState(k, now),
    creditLimit:
      k.creditLimitMicros === undefined
        ? null
        : { micros: k.creditLimitMicros, minor: formatMicros(k.creditLimitMicros), window: k.creditWindow ?? 'monthly' },
  };
}

/**
 * Lists a workspace's keys by their visible part, oldest first. Ended keys are left out unless
 * asked for. The index is eventually consistent, so a key minted a moment ago may lag.
 */
export async function listKeys(ctx: AdminContext, input: { workspaceId: string; includeEnded?: boolean }): Promise<KeyView[]> {
  checkWorkspaceId(input.workspaceId);
  if ((await getWorkspace(ctx, input.workspaceId)) === undefined) throw new WorkspaceNotFoundError(input.workspaceId);
  const now = nowOf(ctx);
  return (await queryKeyRecords(ctx, input.workspaceId))
    .filter((k) => input.includeEnded === true || k.revokedAt === undefined)
    .sort((a, b) => a.createdAt - b.createdAt || a.keyId.localeCompare(b.keyId))
    .map((k) => toView(k, now));
}

/** Accepts the visible part with `...` for the `…` an operator cannot easily type. */
function normaliseVisible(visible: string): string {
  return visible.replace('...', '…');
}

/**
 * Finds the one key a reference names: a live or expired one, or with `includeEnded` the
 * newest record of that id (a rotated key shares its id with the key it replaced).
 */
export async function resolveKey(ctx: AdminContext, ref: KeyRef, opts: { includeEnded?: boolean } = {}): Promise<KeyRecord> {
  checkWorkspaceId(ref.workspaceId);
  if ((ref.keyId === undefined) === (ref.visible === undefined)) {
    throw new ValidationError('name the key by exactly one of its key id or its visible part');
  }
  const all = await queryKeyRecords(ctx, ref.workspaceId);
  const open = all.filter((k) => k.revokedAt === undefined);
  const pick = (matches: KeyRecord[], label: string): KeyRecord => {
    if (matches.length === 1) return matches[0] as KeyRecord;
    if (matches.length > 1) throw new AmbiguousKeyError(label, matches.map((k) => k.keyId));
    throw new KeyNotFoundError(ref.workspaceId, label);
  };
  if (ref.keyId !== undefined) {
    const live = open.filter((k) => k.keyId === ref.keyId);
    if (live.length > 0 || opts.includeEnded !== true) return pick(live, ref.keyId);
    const ended = all.filter((k) => k.keyId === ref.keyId).sort((a, b) => b.createdAt - a.createdAt);
    return pick(ended.slice(0, 1), ref.keyId);
  }
  const visible = normaliseVisible(ref.visible ?? '');
  const live = open.filter((k) => k.visible === visible);
  if (live.length > 0 || opts.includeEnded !== true) return pick(live, visible);
  return pick(all.filter((k) => k.visible === visible), visible);
}

/**
 * Sets or removes a key's expiry. An expired key is never renewed (SPEC), and an expiry in the
 * past is refused: that would be a revocation, which SPEC does not offer today.
 */
export async function setKeyExpiry(
  ctx: AdminContext,
  input: KeyRef & { expiresAt: number | null },
): Promise<{ keyId: string; expiresAt: string | null }> {
  const now = nowOf(ctx);
  if (input.expiresAt !== null && (!Number.isSafeInteger(input.expiresAt) || input.expiresAt <= now)) {
    throw new ValidationError('a key expiry must be an instant in the future');
  }
  const key = await resolveKey(ctx, input);
  if (key.expiresAt !== undefined && key.expiresAt <= now) throw new KeyExpiredError(key.keyId, key.expiresAt);
  await conditional(
    () =>
      ctx.doc.send(
        new UpdateCommand({
          TableName: table(ctx, 'keys'),
          Key: { keyHash: key.keyHash },
          UpdateExpression: input.expiresAt === null ? 'REMOVE expiresAt' : 'SET expiresAt = :e',
          // Re-checked here because the key may have expired or ended since it was read.
          ConditionExpression:
            'attribute_exists(keyHash) AND workspaceId = :ws AND attribute_not_exists(revokedAt) AND ' +
            '(attribute_not_exists(expiresAt) OR expiresAt > :now)',
          ExpressionAttributeValues: {
            ':ws': input.workspaceId,
            ':now': now,
            ...(input.expiresAt === null ? {} : { ':e': input.expiresAt }),
          },
        }),
      ),
    () => new KeyNotFoundError(input.workspaceId, key.keyId),
  );
  return { keyId: key.keyId, expiresAt: iso(input.expiresAt ?? undefined) };
}

/**
 * Sets a key's credit limit (minor units, counted over `window`, default monthly) or removes it
 * (null). The gateway counts settled plus held in the current window against it.
 *
 * A key window is written only while a limit is set (`lambdas/core/limit-arming.ts`). A limit set
 * where none was, or over another window, is armed before this returns: the record says when
 * every gateway starts counting the window (the cache lifetime and a margin from now), and at
 * that moment what the window held before is added to it (`limit-arming.ts` in the store).
 * Changing the figure of a limit already armed takes effect within the cache lifetime, as before.
 * Removing it stops the counting; setting one again later arms anew.
 */
export async function setKeyCreditLimit(
  ctx: AdminContext,
  input: KeyRef & { limitMinor: number | null; window?: WindowCadence },
): Promise<{ keyId: string; creditLimitMicros: number | null; window: WindowCadence | null }> {
  const window = input.window ?? 'monthly';
  if (!WINDOW_CADENCES.includes(window)) throw new ValidationError(`window must be one of ${WINDOW_CADENCES.join(', ')}`);
  const micros = input.limitMinor === null ? null : minorToMicros(input.limitMinor, 'key credit limit', { allowZero: true });
  const key = await resolveKey(ctx, input);
  const arm = micros !== null && needsArming({ limitMicros: key.creditLimitMicros, cadence: key.creditWindow }, window);
  // An arming that did not finish (a call that stopped part way) is finished by setting the limit again.
  const resume = micros !== null && !arm && key.creditTrackFrom !== undefined && key.creditArmedFrom !== key.creditTrackFrom;
  const trackFrom = arm ? trackFromFor(nowOf(ctx), ctx.cacheTtlMs ?? DEFAULT_CACHE_TTL_MS) : key.creditTrackFrom;
  // Removed, or armed anew over another window: the earlier arming's marks come off (outside the
  // home region only while they can still refuse: after that, taking them off changes nothing).
  const reopen = (micros === null || arm) && key.creditTrackFrom !== undefined && (!runsElsewhere(ctx) || armingMarksLive(key.creditTrackFrom, nowOf(ctx)));
  // Arming writes the home region's key window (and taking marks off, its counters): refused before anything is written while the configuration home is elsewhere.
  if (arm || resume || reopen) requireHomeRegionItems(ctx, arm || resume ? 'a key credit limit set on a window not tracked yet (it is armed)' : 'removing a key credit limit armed moments ago');
  // A tracked limit removed or re-armed leaves its window counting the key's requests until every
  // gateway has the new record (`keyRateWindow`): the minute's count must stay on one item.
  const counting = (micros === null || arm) && key.creditLimitMicros !== undefined ? countWindowsAfter(key, nowOf(ctx), ctx.cacheTtlMs ?? DEFAULT_CACHE_TTL_MS) : undefined;
  await conditional(
    () =>
      ctx.doc.send(
        new UpdateCommand({
          TableName: table(ctx, 'keys'),
          Key: { keyHash: key.keyHash },
          UpdateExpression:
            (micros === null
              ? `${counting === undefined ? '' : 'SET creditCountWindows = :c '}REMOVE creditLimitMicros, creditWindow, creditTrackFrom, creditArmedFrom`
              : arm
                ? `SET creditLimitMicros = :l, creditWindow = :w, creditTrackFrom = :t${counting === undefined ? '' : ', creditCountWindows = :c'} REMOVE creditArmedFrom`
                : 'SET creditLimitMicros = :l, creditWindow = :w'),
          ConditionExpression: 'attribute_exists(keyHash) AND workspaceId = :ws AND attribute_not_exists(revokedAt)',
          ExpressionAttributeValues: {
            ':ws': input.workspaceId,
            ...(micros === null ? {} : { ':l': micros, ':w': window }),
            ...(arm ? { ':t': trackFrom } : {}),
            ...(counting === undefined ? {} : { ':c': counting }),
          },
        }),
      ),
    () => new KeyNotFoundError(input.workspaceId, key.keyId),
  );
  if ((arm || resume) && trackFrom !== undefined) {
    await armWindow(ctx, { kind: 'key', workspaceId: input.workspaceId, keyId: key.keyId, keyHash: key.keyHash, cadence: window, generation: trackFrom });
  }
  // Removed (or armed anew over another window): the earlier arming's marks must not refuse requests that count nothing now.
  if (reopen && key.creditTrackFrom !== undefined) {
    await reopenCounters(ctx, { kind: 'key', workspaceId: input.workspaceId, keyId: key.keyId, keyHash: key.keyHash, cadence: key.creditWindow ?? 'monthly', generation: key.creditTrackFrom });
  }
  return { keyId: key.keyId, creditLimitMicros: micros, window: micros === null ? null : window };
}

/**
 * The record's `creditCountWindows` after the tracked limit of `key` is removed or re-armed at
 * `now`: its window first, until the first minute after every gateway's cache has the change,
 * then the earlier ones still in use (an entry is kept a few minutes past its end, for requests
 * started before it and still landing).
 */
function countWindowsAfter(key: KeyRecord, now: number, cacheTtlMs: number): NonNullable<KeyRecord['creditCountWindows']> {
  const until = minuteCeil(now + cacheTtlMs + ARMING_MARGIN_MS);
  const mine = { cadence: key.creditWindow ?? 'monthly', ...(key.creditTrackFrom === undefined ? {} : { generation: key.creditTrackFrom }), until };
  return [mine, ...(key.creditCountWindows ?? []).filter((w) => w.until > now - 5 * 60_000)];
}

/**
 * The transaction item that ends a live key of this workspace: revocation and rotation both end a
 * key this way, and a key already ended (or another workspace's) fails the condition. The key
 * keeps when, how and by whom it ended, for the console's list of ended keys.
 */
function endKey(ctx: AdminContext, keyHash: string, workspaceId: string, now: number, end: { how: KeyEndedHow; by?: string; unexpired?: boolean }) {
  return {
    Update: {
      TableName: table(ctx, 'keys'),
      Key: { keyHash },
      UpdateExpression: `SET revokedAt = :now, endedHow = :how${end.by === undefined ? '' : ', endedBy = :by'}`,
      // `unexpired`: a rotation must not replace a key that expired since it was read (SPEC: never renewed).
      ConditionExpression:
        'attribute_exists(keyHash) AND workspaceId = :ws AND attribute_not_exists(revokedAt)' +
        (end.unexpired === true ? ' AND (attribute_not_exists(expiresAt) OR expiresAt > :now)' : ''),
      ExpressionAttributeValues: { ':now': now, ':ws': workspaceId, ':how': end.how, ...(end.by === undefined ? {} : { ':by': end.by }) },
    },
  };
}

/**
 * Ends a key (SPEC: a deliberate revoke by somebody with access): it is refused 401
 * `invalid_api_key` once the gateway's key cache lets go of it, and its slot frees. An expired
 * key can be revoked too, which is how its slot comes back. One transaction: the key's end and
 * the slot's release cannot come apart.
 */
export async function revokeKey(
  ctx: AdminContext,
  ref: KeyRef & { by?: string },
): Promise<{ keyId: string; visible: string; revokedAt: string; wasExpired: boolean }> {
  const key = await resolveKey(ctx, ref);
  const now = nowOf(ctx);
  await transact(
    ctx,
    [
      endKey(ctx, key.keyHash, ref.workspaceId, now, { how: 'revoked', ...(ref.by === undefined ? {} : { by: ref.by }) }),
      {
        Update: {
          TableName: table(ctx, 'workspaces'),
          Key: { pk: ref.workspaceId, sk: META },
          UpdateExpression: 'SET keySlots = keySlots - :one',
          // Each ended key gives back exactly the slot it took, so slots never go negative.
          ConditionExpression: 'attribute_exists(pk) AND keySlots >= :one',
          ExpressionAttributeValues: { ':one': 1 },
        },
      },
    ],
    (reasons) => (failedAt(reasons, 0) ? new KeyNotFoundError(ref.workspaceId, key.keyId) : undefined),
  );
  return {
    keyId: key.keyId,
    visible: key.visible,
    revokedAt: new Date(now).toISOString(),
    wasExpired: key.expiresAt !== undefined && key.expiresAt <= now,
  };
}

/**
 * Mints a replacement and ends the key it replaces in one transaction (SPEC: the replacement
 * ends the key it replaces in the same motion), so there is never a moment with both or
 * neither. The replacement keeps the key's id, name, member and credit limit: its limit window,
 * its usage and its slot carry on; only the secret changes. It keeps the old expiry (always still
 * ahead, see below), unless `expiresAt` gives another (null: none). The raw key is returned once.
 *
 * An expired key is refused (`KeyExpiredError`), here and again in the transaction's condition:
 * SPEC never renews an expired key, and a live replacement with its id and limit would be one.
 * It can be revoked, which frees its slot, and a new key created.
 */
export async function rotateKey(
  ctx: AdminContext,
  input: KeyRef & { expiresAt?: number | null; by?: string },
): Promise<{ rawKey: string; keyId: string; visible: string; replacedVisible: string; expiresAt: string | null }> {
  const now = nowOf(ctx);
  if (input.expiresAt !== undefined && input.expiresAt !== null && (!Number.isSafeInteger(input.expiresAt) || input.expiresAt <= now)) {
    throw new ValidationError('a key expiry must be an instant in the future');
  }
  const old = await resolveKey(ctx, input);
  if (old.expiresAt !== undefined && old.expiresAt <= now) throw new KeyExpiredError(old.keyId, old.expiresAt, 'rotate');
  const expiresAt = input.expiresAt === undefined ? old.expiresAt : (input.expiresAt ?? undefined);
  const rawKey = mintKey(prefixForStage(ctx.stage));
  const record: KeyRecord = {
    keyHash: hashKey(rawKey),
    keyId: old.keyId,
    workspaceId: old.workspaceId,
    visible: visiblePart(rawKey),
    createdAt: now,
    ...(old.memberId === undefined ? {} : { memberId: old.memberId }),
    ...(old.name === undefined ? {} : { name: old.name }),
    ...(expiresAt === undefined ? {} : { expiresAt }),
    ...(old.creditLimitMicros === undefined ? {} : { creditLimitMicros: old.creditLimitMicros, creditWindow: old.creditWindow ?? 'monthly' }),
    // The same key id keeps its window items: an arming's generation carries over with it.
    ...(old.creditTrackFrom === undefined ? {} : { creditTrackFrom: old.creditTrackFrom }),
    ...(old.creditArmedFrom === undefined ? {} : { creditArmedFrom: old.creditArmedFrom }),
    ...(old.creditCountWindows === undefined ? {} : { creditCountWindows: old.creditCountWindows }),
  };
  await transact(
    ctx,
    [
      endKey(ctx, old.keyHash, input.workspaceId, now, { how: 'rotated', unexpired: true, ...(input.by === undefined ? {} : { by: input.by }) }),
      { Put: { TableName: table(ctx, 'keys'), Item: record, ConditionExpression: 'attribute_not_exists(keyHash)' } },
    ],
    (reasons) => (failedAt(reasons, 0) ? new KeyNotFoundError(input.workspaceId, old.keyId) : undefined),
  );
  return { rawKey, keyId: record.keyId, visible: record.visible, replacedVisible: old.visible, expiresAt: iso(expiresAt) };
}

/** One key in detail: what `key list` shows, plus its current limit window and its last use. */
export interface KeyDetail extends KeyView {
  /** The credit limit's current window: its id and what is settled and held in it. */
  readonly window: { readonly id: string; readonly settledMicros: number; readonly heldMicros: number } | null;
  /** Start of the newest settled request of the key found in the last 90 days; null when none. */
  readonly lastUsedAt: string | null;
}

/** How far back `showKey` looks for the key's last use. */
export const LAST_USE_LOOKBACK_MS = 90 * 86_400_000;

/** A key with its limit window's settled and held amounts and its last use. */
export async function showKey(ctx: AdminContext, ref: KeyRef): Promise<KeyDetail> {
  const key = await resolveKey(ctx, ref, { includeEnded: true });
  const now = nowOf(ctx);
  const cadence = key.creditWindow ?? 'monthly';
  const [windowOut, lastUsed] = await Promise.all([
    key.creditLimitMicros === undefined
      ? Promise.resolve(undefined)
      : ctx.doc
          // The key's window lives under the key's own partition, split over its key slices (the
          // store's layout): settled and held are their sums, read consistently in one call.
          .send(
            new TransactGetCommand({
              TransactItems: Array.from({ length: KEY_SLICES }, (_, k) => ({
                Get: { TableName: table(ctx, 'ledger'), Key: windowKey(key.workspaceId, k, windowKeys.key(key.keyId, cadence, now, key.creditTrackFrom)) },
              })),
            }),
          )
          .then((o) => {
            const items = (o.Responses ?? []).map((r) => r.Item as WindowRecord | undefined).filter((i): i is WindowRecord => i !== undefined);
            if (items.length === 0) return undefined;
            return { settledMicros: items.reduce((a, i) => a + (i.settledMicros ?? 0), 0), heldMicros: items.reduce((a, i) => a + (i.heldMicros ?? 0), 0) };
          }),
    lastUseOfKey(ctx, { workspaceId: key.workspaceId, keyId: key.keyId, sinceMs: now - LAST_USE_LOOKBACK_MS, untilMs: now }),
  ]);
  return {
    ...toView(key, now),
    window:
      key.creditLimitMicros === undefined
        ? null
        : { id: windowId(cadence, now), settledMicros: windowOut?.settledMicros ?? 0, heldMicros: windowOut?.heldMicros ?? 0 },
    lastUsedAt: iso(lastUsed),
  };
}
