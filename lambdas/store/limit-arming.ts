/**
 * Arming a key's credit limit or a member's monthly limit that was set on a window nobody
 * tracked (the rule is in `lambdas/core/limit-arming.ts`; this is its store side). Called by the
 * management API when it sets such a limit, after the record says when tracking starts:
 *
 * 1. wait until `trackFrom`, when every gateway counts the window;
 * 2. mark the request counters of the key (or of each of the member's keys) for the minutes
 *    around `trackFrom`, so an admission that started earlier and counts nothing cannot land
 *    after this point (`CLOSED_FOR`);
 * 3. adopt every open request of the window from before `trackFrom` (its row, open, is its hold):
 *    the window is added to the row's windows (conditioned on its amount, so an extension meanwhile
 *    is not missed) and the hold's amount goes on the window, in one transaction with a marker
 *    naming the request;
 * 4. add what the other requests of the window before `trackFrom` were charged (their usage rows,
 *    BYOK excluded, adopted ones excluded by their markers) to the window, and mark it armed, in
 *    one transaction that happens once;
 * 5. record `armedFrom`, so gateways enforce the limit from the start once they read it.
 *
 * Every step can run again (a retried call resumes where one stopped): a hold is adopted once, the
 * base is added once. Nothing here is on a request's path.
 */
import { GetCommand, QueryCommand, TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { KEY_SLICES, keySliceOf } from '../core/key-slices';
import { armingMinutes } from '../core/limit-arming';
import { keyRateWindow, windowEnd, windowKeys, windowStart } from '../core/windows';
import type { KeyRecord, UsageRecord, WindowCadence } from '../shared/records';
import { usageRows } from './balance';
import type { AdminContext } from './directory-context';
import { memberSk, nowOf, table } from './directory-context';
import { CLOSED_FOR, closeCountWindow, closeCounter, countWindowTtl, isArmed, keyShareDebit, reopenCounter, windowDebit } from './items';
import { allUsagePks, keySlicePk, memberPk } from './keys';
import type { BuiltUpdate } from './expr';

/** What the gateways' cache holds a key or member record for, when the context does not say (`SLUICE_CACHE_TTL_MS`'s default). */
export const DEFAULT_CACHE_TTL_MS = 5_000;

/** Days an adoption marker is kept: far beyond any arming's few seconds. */
const MARKER_DAYS = 35;
/** Windows are kept this long past their end (as the ledger keeps them). */
const WINDOW_RETENTION_S = 400 * 86_400;

/** The window an arming is for: a key's credit-limit window or a member's month, from `generation` (its `trackFrom`). */
export type ArmingTarget =
  | { readonly kind: 'key'; readonly workspaceId: string; readonly keyId: string; readonly keyHash: string; readonly cadence: WindowCadence; readonly generation: number }
  | { readonly kind: 'member'; readonly workspaceId: string; readonly memberId: string; readonly generation: number };

const cadenceOf = (t: ArmingTarget): WindowCadence => (t.kind === 'key' ? t.cadence : 'monthly');

/** The window's sort key in the arming's generation. */
function windowSk(t: ArmingTarget): string {
  return t.kind === 'key' ? windowKeys.key(t.keyId, t.cadence, t.generation, t.generation) : windowKeys.member(t.memberId, t.generation, t.generation);
}

/** Where the window's whole figure is kept (key slice 0, or the member's month), and the base with it. */
function homePk(t: ArmingTarget): string {
  return t.kind === 'key' ? keySlicePk(t.workspaceId, t.keyId, 0) : memberPk(t.workspaceId, t.memberId);
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function isCancelled(err: unknown): err is Error & { CancellationReasons?: { Code?: string; Item?: Record<string, unknown> }[] } {
  return err instanceof Error && err.name === 'TransactionCanceledException';
}

/**
 * Arms the window `target`: returns once the base is written (or was already). Waits until the
 * target's generation first. The caller has written the record with that `trackFrom`.
 */
export async function armWindow(ctx: AdminContext, target: ArmingTarget): Promise<void> {
  const wait = target.generation - nowOf(ctx);
  if (wait > 0) await sleep(wait);
  const from = windowStart(cadenceOf(target), target.generation);
  // A window that begins at `trackFrom` or later was counted from its start: nothing to add.
  if (from < target.generation) {
    const ledger = table(ctx, 'ledger');
    const sk = windowSk(target);
    const home = await ctx.doc.send(new GetCommand({ TableName: ledger, Key: { pk: homePk(target), sk }, ConsistentRead: true }));
    if (!isArmed(home.Item)) {
      await closeCounters(ctx, target);
      await adoptOpenHolds(ctx, target, from, sk);
      await writeBase(ctx, target, from, sk);
    }
  }
  await recordArmed(ctx, target);
}

/**
 * Step 2: marks the counters of the minutes around `trackFrom` on every key slice of every key
 * concerned, and the key window items those minutes count on instead, where they do
 * (`keyRateWindow`: a key limit's window counts its key's requests): there the mark names the
 * last minute it closes.
 */
async function closeCounters(ctx: AdminContext, target: ArmingTarget): Promise<void> {
  const mark = target.kind === 'key' ? CLOSED_FOR.key : CLOSED_FOR.member;
  const last = Math.max(...armingMinutes(target.generation));
  await eachCounter(
    ctx,
    target,
    (minute) => closeCounter(mark, target.generation, (minute + 1) * 60 + 180),
    (sk) => closeCountWindow(mark, last, countWindowTtl(sk, nowOf(ctx))),
  );
}

/**
 * Takes an arming's marks off the counters again, when its limit is removed: the requests of
 * those minutes count no window any more and must not be refused for it. (A counter already
 * collected by its ttl is left alone.)
 */
export async function reopenCounters(ctx: AdminContext, target: ArmingTarget): Promise<void> {
  const mark = target.kind === 'key' ? CLOSED_FOR.key : CLOSED_FOR.member;
  await eachCounter(ctx, target, () => reopenCounter(mark), () => reopenCounter(mark));
}

/**
 * Writes `build(minute)` to the request counter of every minute an arming marks, on every key
 * slice of every key concerned, and `onWindow(sk)` to key slice 0's item of each key window such
 * a minute counts on by the key's record, read consistently (key slices j > 0 count on counters).
 */
async function eachCounter(ctx: AdminContext, target: ArmingTarget, build: (minute: number) => BuiltUpdate, onWindow: (sk: string) => BuiltUpdate): Promise<void> {
  const ledger = table(ctx, 'ledger');
  const keys = target.kind === 'key' ? [{ keyId: target.keyId, keyHash: target.keyHash }] : await memberKeys(ctx, target.workspaceId, target.memberId);
  const writes: Promise<unknown>[] = [];
  const send = (key: { pk: string; sk: string }, built: BuiltUpdate): void => {
    writes.push(
      retry(() => ctx.doc.send(new UpdateCommand({ TableName: ledger, Key: key, ...built }))).catch((err: unknown) => {
        if (!(err instanceof Error && err.name === 'ConditionalCheckFailedException')) throw err;
      }),
    );
  };
  for (const { keyId, keyHash } of keys) {
    const record = (await ctx.doc.send(new GetCommand({ TableName: table(ctx, 'keys'), Key: { keyHash }, ConsistentRead: true }))).Item as KeyRecord | undefined;
    const windows = new Set<string>();
    for (const minute of armingMinutes(target.generation)) {
      const built = build(minute);
      for (let k = 0; k < KEY_SLICES; k += 1) send({ pk: keySlicePk(target.workspaceId, keyId, k), sk: windowKeys.rate(keyId, minute * 60_000) }, built);
      const sk = record === undefined ? undefined : keyRateWindow(keyId, record, minute * 60_000);
      if (sk !== undefined) windows.add(sk);
    }
    for (const sk of windows) send({ pk: keySlicePk(target.workspaceId, keyId, 0), sk }, onWindow(sk));
  }
  await Promise.all(writes);
}

/** Every key (live or not: one may still have a request in flight) minted for the member. */
async function memberKeys(ctx: AdminContext, workspaceId: string, memberId: string): Promise<{ keyId: string; keyHash: string }[]> {
  // Read here rather than through directory-keys, which imports this module.
  const ids = new Map<string, { keyId: string; keyHash: string }>();
  let start: Record<string, unknown> | undefined;
  do {
    const out = await ctx.doc.send(
      new QueryCommand({ TableName: table(ctx, 'keys'), IndexName: 'byWorkspace', KeyConditionExpression: 'workspaceId = :ws', ExpressionAttributeValues: { ':ws': workspaceId }, ExclusiveStartKey: start }),
    );
    for (const k of (out.Items ?? []) as KeyRecord[]) if (k.memberId === memberId) ids.set(k.keyHash, { keyId: k.keyId, keyHash: k.keyHash });
    start = out.LastEvaluatedKey;
  } while (start !== undefined);
  return [...ids.values()];
}

/**
 * The open requests of the window that started before `trackFrom` (BYOK ones count against no
 * limit): their rows, open, in the workspace's usage partitions by start.
 */
async function openRows(ctx: AdminContext, target: ArmingTarget, from: number): Promise<Record<string, unknown>[]> {
  const who = target.kind === 'key' ? { attr: 'keyId', id: target.keyId } : { attr: 'memberId', id: target.memberId };
  const out: Record<string, unknown>[] = [];
  await Promise.all(
    allUsagePks(target.workspaceId).map(async (pk) => {
      let start: Record<string, unknown> | undefined;
      do {
        const page = await ctx.doc.send(
          new QueryCommand({
            TableName: table(ctx, 'usage'),
            // A row's sort key starts with its start (ISO): the window's start up to `trackFrom`, exclusive.
            KeyConditionExpression: 'pk = :pk AND sk BETWEEN :from AND :to',
            FilterExpression: '#state = :open AND #who = :id AND byok = :no',
            ExpressionAttributeNames: { '#state': 'state', '#who': who.attr },
            ExpressionAttributeValues: { ':pk': pk, ':from': new Date(from).toISOString(), ':to': new Date(target.generation).toISOString(), ':open': 'open', ':id': who.id, ':no': false },
            ConsistentRead: true,
            ExclusiveStartKey: start,
          }),
        );
        // In a stage with several regions, only the arming region's own rows: another region's row
        // is that region's alone to write (docs/regions.md, "A limit armed while regions serve").
        out.push(...(page.Items ?? []).filter((row) => ctx.regions === undefined || row.region === undefined || row.region === ctx.regions.region));
        start = page.LastEvaluatedKey;
      } while (start !== undefined);
    }),
  );
  return out;
}

/** Step 3: adopts every open request not yet adopted; one settled meanwhile is left to its usage row. */
async function adoptOpenHolds(ctx: AdminContext, target: ArmingTarget, from: number, sk: string): Promise<void> {
  const ledger = table(ctx, 'ledger');
  const cadence = cadenceOf(target);
  const ttl = Math.floor((windowEnd(cadence, target.generation) ?? 0) / 1000) + WINDOW_RETENTION_S;
  for (const found of await openRows(ctx, target, from)) {
    const rowKey = { pk: String(found.pk), sk: String(found.sk) };
    let hold: Record<string, unknown> | undefined = found;
    for (let attempt = 0; hold !== undefined && hold.state === 'open' && attempt < 10; attempt += 1) {
      const windows = Array.isArray(hold.windows) ? (hold.windows as string[]) : [];
      if (windows.includes(sk)) break; // adopted before (an earlier run)
      const amount = Number(hold.amountMicros);
      const slice = typeof hold.slice === 'number' ? hold.slice : 0;
      const k = keySliceOf(slice);
      const windowPk = target.kind === 'key' ? keySlicePk(target.workspaceId, target.keyId, k) : memberPk(target.workspaceId, target.memberId);
      // Counted as the hold's own admission would have, uncheck: the limit is enforced only once armed.
      const built: BuiltUpdate =
        target.kind === 'key' && k !== 0
          ? keyShareDebit({ micros: amount, limitMicros: undefined, ttl: cadence === 'never' ? undefined : ttl, check: false, unarmed: true })
          : windowDebit({ micros: amount, limitMicros: undefined, ttl: cadence === 'never' ? undefined : ttl, check: false, unarmed: true });
      try {
        await ctx.doc.send(
          new TransactWriteCommand({
            TransactItems: [
              {
                Update: {
                  TableName: table(ctx, 'usage'),
                  Key: rowKey,
                  UpdateExpression: 'SET #w = list_append(#w, :add)',
                  // Still open, with its amount as read: an extension meanwhile is adopted with it on the next try.
                  ConditionExpression: '#state = :open AND amountMicros = :amount AND NOT contains(#w, :sk)',
                  ExpressionAttributeNames: { '#w': 'windows', '#state': 'state' },
                  ExpressionAttributeValues: { ':add': [sk], ':amount': amount, ':sk': sk, ':open': 'open' },
                  ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
                },
              },
              { Update: { TableName: ledger, Key: { pk: windowPk, sk }, ...built } },
              {
                Put: {
                  TableName: ledger,
                  Item: { pk: homePk(target), sk: adoptedSk(sk, String(hold.requestId)), amountMicros: amount, ttl: Math.floor(nowOf(ctx) / 1000) + MARKER_DAYS * 86_400 },
                  ConditionExpression: 'attribute_not_exists(pk)',
                },
              },
            ],
          }),
        );
        break;
      } catch (err) {
        if (!isCancelled(err)) throw err;
        const reasons = err.CancellationReasons ?? [];
        if (reasons[0]?.Code === 'ConditionalCheckFailed') {
          // Settled meanwhile (its usage row counts it), adopted by another run, or grown: read it again.
          const again: { Item?: Record<string, unknown> } = await ctx.doc.send(new GetCommand({ TableName: table(ctx, 'usage'), Key: rowKey, ConsistentRead: true }));
          hold = again.Item;
          continue;
        }
        await sleep(20 * (attempt + 1));
      }
    }
  }
}

const adoptedSk = (sk: string, holdId: string): string => `ADOPTED#${sk}#${holdId}`;

/** The requests adopted into this window, by their markers. */
async function adoptedIds(ctx: AdminContext, target: ArmingTarget, sk: string): Promise<Set<string>> {
  const ids = new Set<string>();
  const prefix = `ADOPTED#${sk}#`;
  let start: Record<string, unknown> | undefined;
  do {
    const out = await ctx.doc.send(
      new QueryCommand({
        TableName: table(ctx, 'ledger'),
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
        ExpressionAttributeValues: { ':pk': homePk(target), ':prefix': prefix },
        ConsistentRead: true,
        ExclusiveStartKey: start,
      }),
    );
    for (const item of out.Items ?? []) ids.add(String(item.sk).slice(prefix.length));
    start = out.LastEvaluatedKey;
  } while (start !== undefined);
  return ids;
}

/**
 * What the window's requests before `trackFrom` that are not adopted were charged: every one of
 * them has settled (the counters are closed and the open ones adopted), so its row is a usage row.
 */
async function settledBefore(ctx: AdminContext, target: ArmingTarget, from: number, sk: string): Promise<number> {
  const adopted = await adoptedIds(ctx, target, sk);
  const rows = await usageRows(ctx.doc, table(ctx, 'usage'), target.workspaceId, { from: new Date(from).toISOString(), to: new Date(target.generation).toISOString() });
  const mine = (r: UsageRecord): boolean => (target.kind === 'key' ? r.keyId === target.keyId : r.memberId === target.memberId);
  return rows.filter((r) => mine(r) && r.byok !== true && r.startedAt < target.generation && !adopted.has(r.requestId)).reduce((a, r) => a + r.chargeMicros, 0);
}

/** Step 4: the base onto the window's home item and the armed mark on every item a counting write may land on, once. */
async function writeBase(ctx: AdminContext, target: ArmingTarget, from: number, sk: string): Promise<void> {
  const ledger = table(ctx, 'ledger');
  const base = await settledBefore(ctx, target, from, sk);
  const cadence = cadenceOf(target);
  const end = windowEnd(cadence, target.generation);
  const ttl = end === undefined ? undefined : Math.floor(end / 1000) + WINDOW_RETENTION_S;
  const ttlSet = ttl === undefined ? '' : ', #ttl = if_not_exists(#ttl, :ttl)';
  const names = { '#armed': 'armed', ...(ttl === undefined ? {} : { '#ttl': 'ttl' }) };
  const items: NonNullable<ConstructorParameters<typeof TransactWriteCommand>[0]['TransactItems']> = [
    {
      Update: {
        TableName: ledger,
        Key: { pk: homePk(target), sk },
        UpdateExpression: `SET #armed = :gen, #settled = if_not_exists(#settled, :zero) + :base, #used = if_not_exists(#used, :zero) + :base, #held = if_not_exists(#held, :zero)${ttlSet}`,
        ConditionExpression: 'attribute_not_exists(#armed)',
        ExpressionAttributeNames: { ...names, '#settled': 'settledMicros', '#used': 'usedMicros', '#held': 'heldMicros' },
        ExpressionAttributeValues: { ':gen': target.generation, ':base': base, ':zero': 0, ...(ttl === undefined ? {} : { ':ttl': ttl }) },
      },
    },
  ];
  // Every other key slice of the window: a write that only counts is refused there from now on too.
  if (target.kind === 'key') {
    for (let k = 1; k < KEY_SLICES; k += 1) {
      items.push({
        Update: {
          TableName: ledger,
          Key: { pk: keySlicePk(target.workspaceId, target.keyId, k), sk },
          UpdateExpression: `SET #armed = :gen${ttlSet}`,
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: { ':gen': target.generation, ...(ttl === undefined ? {} : { ':ttl': ttl }) },
        },
      });
    }
  }
  for (let attempt = 0; ; attempt += 1) {
    try {
      await ctx.doc.send(new TransactWriteCommand({ TransactItems: items }));
      return;
    } catch (err) {
      if (!isCancelled(err)) throw err;
      // Armed by another run already: its base stands.
      if (err.CancellationReasons?.[0]?.Code === 'ConditionalCheckFailed') return;
      if (attempt >= 20) throw err;
      await sleep(20 * (attempt + 1));
    }
  }
}

/** Step 5: the record says the limit is armed, while it still names this arming. */
async function recordArmed(ctx: AdminContext, target: ArmingTarget): Promise<void> {
  try {
    await ctx.doc.send(
      target.kind === 'key'
        ? new UpdateCommand({
            TableName: table(ctx, 'keys'),
            Key: { keyHash: target.keyHash },
            UpdateExpression: 'SET creditArmedFrom = :gen',
            ConditionExpression: 'attribute_exists(keyHash) AND creditTrackFrom = :gen',
            ExpressionAttributeValues: { ':gen': target.generation },
          })
        : new UpdateCommand({
            TableName: table(ctx, 'workspaces'),
            Key: { pk: target.workspaceId, sk: memberSk(target.memberId) },
            UpdateExpression: 'SET monthlyArmedFrom = :gen',
            ConditionExpression: 'attribute_exists(pk) AND monthlyTrackFrom = :gen',
            ExpressionAttributeValues: { ':gen': target.generation },
          }),
    );
  } catch (err) {
    // The limit was removed or set again meanwhile: that change's own arming decides.
    if (!(err instanceof Error && err.name === 'ConditionalCheckFailedException')) throw err;
  }
}

/** A single write tried again on DynamoDB's transaction conflicts (a counter in a running admission). */
async function retry<T>(write: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt += 1) {
    try {
      return await write();
    } catch (err) {
      if (!(err instanceof Error && err.name === 'TransactionConflictException') || attempt >= 20) throw err;
      await sleep(10 * (attempt + 1));
    }
  }
}
