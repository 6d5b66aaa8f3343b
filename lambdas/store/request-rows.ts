/**
 * A request's row in the usage table, from admission to settlement: the store's one record of a
 * request, written twice. The admission puts it open (`state` `open`: the hold's amount, prompt
 * bound, windows, slice and expiry, and `expiryShard`, which puts it in the sweeper's sparse
 * index) in its transaction; the settlement turns that same item into the request's usage row
 * (`state` `settled`: what served it, the counts, the charge), removing what only an open hold
 * needs, the index key with it. A put and an update (2 + 2 write units, the row staying under 1 KB)
 * where a hold's put, its delete and a usage row's put were 6, and no hold table.
 *
 * Every condition on a row lives here, with its reason:
 * - the put: `attribute_not_exists(pk)`, so a retried admission cannot place it twice;
 * - the settlement: `state = open AND amountMicros = <the hold's>`: idempotent (a second settlement
 *   finds it settled), and a stale copy of a hold that has since grown cannot release the wrong sum;
 * - a stream's hold growing and a failed settlement's pending charge: `state = open`;
 * - a release (an admission whose outcome the gateway never learnt, answered with a refusal):
 *   as the settlement's, the row becoming `released`; or, when no row is there, a put of the
 *   released row `attribute_not_exists(pk)`, which fences the admission should it land later.
 * A settled row is never written again (only DynamoDB's TTL removes it), which the aggregator
 * relies on: it counts a row when a stream record shows it settled.
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { requestIdTime } from '../core/request-id';
import type { Settlement } from '../gateway/ports';
import type { EndpointFamily, HoldRecord, RowState } from '../shared/records';
import type { DocumentSender } from '../adapters/dynamo-wire';
import { UpdateBuilder, type BuiltUpdate } from './expr';
import { expiryShard, requestRowKey } from './keys';
import type { Item } from './items';

const OPEN: RowState = 'open';
const SETTLED: RowState = 'settled';
const RELEASED: RowState = 'released';
const DAY_S = 86_400;
/**
 * How long a released row stays before DynamoDB's TTL collects it: it only has to outlive any copy
 * of its admission still on its way to the store (a client gives up on a call after seconds; the
 * store forgets a transaction's idempotency token after 10 minutes).
 */
const RELEASED_KEEP_S = DAY_S;

/** Attributes only an open row carries; its settlement removes them. */
const OPEN_ONLY = ['expiryShard', 'expiresAt', 'amountMicros', 'inputMicros', 'windows', 'slice', 'pendingChargeMicros'] as const;

/**
 * When a request's row says it started: the time its id carries (so the row's key follows from the
 * workspace and the id), else, for an id without one, the admission's `now`.
 */
export function rowStart(requestId: string, now: number): number {
  return requestIdTime(requestId) ?? now;
}

/** The key of an open hold's row. */
export function holdKey(hold: Pick<HoldRecord, 'workspaceId' | 'holdId' | 'createdAt'>): { pk: string; sk: string } {
  return requestRowKey(hold.workspaceId, hold.holdId, hold.createdAt);
}

/** The row an admission puts: the request, open. */
export function openRow(hold: HoldRecord): Item {
  return {
    ...holdKey(hold),
    state: OPEN,
    requestId: hold.holdId,
    workspaceId: hold.workspaceId,
    keyId: hold.keyId,
    ...(hold.memberId !== undefined ? { memberId: hold.memberId } : {}),
    family: hold.family,
    requestedModel: hold.requestedModel,
    amountMicros: hold.amountMicros,
    inputMicros: hold.inputMicros,
    windows: hold.windows,
    byok: hold.byok,
    startedAt: hold.createdAt,
    expiresAt: hold.expiresAt,
    // Only an open row carries it: the sweeper's index holds the open requests and nothing else.
    expiryShard: expiryShard(hold.holdId),
    ...(hold.slice !== undefined && hold.slice !== 0 ? { slice: hold.slice } : {}),
  };
}

/** The admission's put of a row, for its transaction. */
export function openRowPut(usageTable: string, hold: HoldRecord): { Put: { TableName: string; Item: Item; ConditionExpression: string } } {
  // The request id is fresh: a retried admission cannot place its row twice.
  return { Put: { TableName: usageTable, Item: openRow(hold), ConditionExpression: 'attribute_not_exists(pk)' } };
}

/** What a settlement writes into the row beside the hold's own figures. */
export interface SettledFigures {
  readonly chargeMicros: number;
  /** Of the charge, what the balance could not cover (recorded, not collected). */
  readonly uncollectedMicros: number;
  /** Days before DynamoDB TTL collects the settled row; absent: kept. */
  readonly retentionDays?: number;
}

/**
 * The settlement's update of a row: open with exactly this hold's amount, it becomes the
 * request's usage row. Conditioned so that it is idempotent and a stale copy of a grown hold
 * cannot settle the wrong sum (the module comment); the row's old image comes back when refused.
 */
export function settleRowUpdate(usageTable: string, hold: HoldRecord, s: Settlement, figures: SettledFigures): { Update: { TableName: string; Key: Item; ReturnValuesOnConditionCheckFailure: 'ALL_OLD' } & BuiltUpdate } {
  const counts = s.counts ?? { inputTokens: 0, cachedInputTokens: 0, outputTokens: 0, reasoningTokens: 0 };
  const b = new UpdateBuilder();
  b.setTo('state', SETTLED);
  if (s.servedBy !== undefined) b.setTo('servedBy', s.servedBy);
  if (s.provider !== undefined) b.setTo('provider', s.provider);
  b.setTo('stream', s.stream);
  b.setTo('byok', s.byok ?? hold.byok);
  b.setTo('status', s.status);
  b.setTo('outcome', s.outcome);
  b.setTo('inputTokens', counts.inputTokens);
  b.setTo('cachedInputTokens', counts.cachedInputTokens);
  b.setTo('outputTokens', counts.outputTokens);
  b.setTo('reasoningTokens', counts.reasoningTokens);
  b.setTo('chargeMicros', figures.chargeMicros);
  b.setTo('holdMicros', hold.amountMicros);
  b.setTo('attempts', s.attempts);
  // From the request's arrival, on the gateway's clock (the sweeper times nothing: from the start to now).
  b.setTo('durationMs', s.durationMs ?? Math.max(0, s.now - hold.createdAt));
  if (s.firstByteMs !== undefined) b.setTo('firstByteMs', s.firstByteMs);
  if (s.estimated === true) b.setTo('estimated', true);
  if (figures.uncollectedMicros > 0) b.setTo('uncollectedMicros', figures.uncollectedMicros);
  // Retention starts at settlement: an open row never carries a TTL (collecting it would lose a hold).
  if (figures.retentionDays !== undefined) b.setTo('ttl', Math.floor(s.now / 1000) + figures.retentionDays * DAY_S);
  for (const name of OPEN_ONLY) b.remove(name);
  b.when(`${b.a('state')} = ${b.v(OPEN)}`).when(`${b.a('amountMicros')} = ${b.v(hold.amountMicros)}`);
  // And on its windows: a copy taken before a limit's arming adopted the request (`limit-arming.ts`) would miss one.
  b.when(`size(${b.a('windows')}) = ${b.v(hold.windows.length)}`);
  return { Update: { TableName: usageTable, Key: holdKey(hold), ...b.build(), ReturnValuesOnConditionCheckFailure: 'ALL_OLD' } };
}

/**
 * The release of a row an admission put but the gateway answered with a refusal (it never learnt
 * the admission's outcome): conditioned exactly as {@link settleRowUpdate}, so it is idempotent and
 * gives back the amount stored; the row becomes `released`, out of the sweeper's index, and is
 * never a usage row (nothing reads a released row but the conditions that meet it).
 */
export function releaseRowUpdate(usageTable: string, hold: HoldRecord, now: number): { Update: { TableName: string; Key: Item; ReturnValuesOnConditionCheckFailure: 'ALL_OLD' } & BuiltUpdate } {
  const b = new UpdateBuilder();
  b.setTo('state', RELEASED);
  b.setTo('ttl', Math.floor(now / 1000) + RELEASED_KEEP_S);
  for (const name of OPEN_ONLY) b.remove(name);
  b.when(`${b.a('state')} = ${b.v(OPEN)}`).when(`${b.a('amountMicros')} = ${b.v(hold.amountMicros)}`);
  b.when(`size(${b.a('windows')}) = ${b.v(hold.windows.length)}`);
  return { Update: { TableName: usageTable, Key: holdKey(hold), ...b.build(), ReturnValuesOnConditionCheckFailure: 'ALL_OLD' } };
}

/**
 * A released row written where no row is (the admission never landed, or has not yet): a later copy
 * of the admission then meets its own `attribute_not_exists(pk)` and is cancelled whole, so nothing
 * can be held for a request already refused. An update that creates the item (the gateway's client
 * speaks updates, not puts); one write unit, only on that fault's path.
 */
export function releasedRowCreate(usageTable: string, workspaceId: string, requestId: string, startedAt: number, now: number): { TableName: string; Key: Item } & BuiltUpdate {
  const b = new UpdateBuilder();
  b.setTo('state', RELEASED);
  b.setTo('requestId', requestId);
  b.setTo('workspaceId', workspaceId);
  b.setTo('ttl', Math.floor(now / 1000) + RELEASED_KEEP_S);
  b.when(`attribute_not_exists(${b.a('pk')})`);
  return { TableName: usageTable, Key: requestRowKey(workspaceId, requestId, startedAt), ...b.build() };
}

/**
 * A stream's hold growing by `extraMicros`, while its request is open and has the windows this
 * copy knows (a limit's arming may have adopted it since: the old image then tells which).
 */
export function extendRowUpdate(usageTable: string, hold: HoldRecord, extraMicros: number): { Update: { TableName: string; Key: Item; ReturnValuesOnConditionCheckFailure: 'ALL_OLD' } & BuiltUpdate } {
  const b = new UpdateBuilder();
  b.set(`${b.a('amountMicros')} = ${b.a('amountMicros')} + ${b.v(extraMicros)}`);
  b.when(`${b.a('state')} = ${b.v(OPEN)}`);
  b.when(`size(${b.a('windows')}) = ${b.v(hold.windows.length)}`);
  return { Update: { TableName: usageTable, Key: holdKey(hold), ...b.build(), ReturnValuesOnConditionCheckFailure: 'ALL_OLD' } };
}

/** The charge a settlement computed but could not write, left on the open row for the sweeper. */
export function pendingChargeUpdate(usageTable: string, hold: HoldRecord, chargeMicros: number): { TableName: string; Key: Item } & BuiltUpdate {
  const b = new UpdateBuilder();
  b.setTo('pendingChargeMicros', chargeMicros);
  b.when(`${b.a('state')} = ${b.v(OPEN)}`);
  return { TableName: usageTable, Key: holdKey(hold), ...b.build() };
}

/** An open row read back, as the hold it is, with the charge a failed settlement left on it. */
export type StoredHold = HoldRecord & { readonly pendingChargeMicros?: number };

const FAMILIES: readonly EndpointFamily[] = ['chat_completions', 'responses'];

function isString(v: unknown): v is string {
  return typeof v === 'string';
}

function isInt(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v);
}

/**
 * A query filter keeping settled rows only (a row from before rows had a state is one): an open
 * row is a running request's hold, not yet a usage row. ANDed with a caller's own filter, if any.
 */
export function settledRowsFilter(also?: string): { FilterExpression: string; ExpressionAttributeNames: Record<string, string>; ExpressionAttributeValues: Record<string, unknown> } {
  const settled = '(attribute_not_exists(#rowState) OR #rowState = :rowSettled)';
  return {
    FilterExpression: also === undefined ? settled : `${also} AND ${settled}`,
    ExpressionAttributeNames: { '#rowState': 'state' },
    ExpressionAttributeValues: { ':rowSettled': SETTLED },
  };
}

/** Whether a row is open (a hold). */
export function isOpenRow(item: Item | undefined): boolean {
  return item?.state === OPEN;
}

/** Whether a row is a settled request's usage row (a row written before rows had a state is one). */
export function isSettledRow(item: Item | undefined): boolean {
  return item !== undefined && (item.state === SETTLED || (item.state === undefined && typeof item.outcome === 'string'));
}

/** An open row as the hold it is, or undefined when it is not open or lacks what settling needs (never guessed at). */
export function holdOfRow(item: Item | undefined): StoredHold | undefined {
  if (item === undefined || !isOpenRow(item)) return undefined;
  const { requestId, workspaceId, keyId, memberId, family, requestedModel, amountMicros, inputMicros, windows, byok, startedAt, expiresAt, slice, pendingChargeMicros } = item;
  if (typeof requestId !== 'string' || typeof workspaceId !== 'string' || typeof keyId !== 'string') return undefined;
  if (typeof family !== 'string' || !(FAMILIES as readonly string[]).includes(family) || typeof requestedModel !== 'string') return undefined;
  if (!isInt(amountMicros) || !isInt(inputMicros) || !isInt(startedAt) || !isInt(expiresAt) || typeof byok !== 'boolean') return undefined;
  if (!Array.isArray(windows) || !windows.every(isString)) return undefined;
  return {
    holdId: requestId,
    workspaceId,
    keyId,
    ...(typeof memberId === 'string' ? { memberId } : {}),
    family: family as EndpointFamily,
    requestedModel,
    amountMicros,
    inputMicros,
    windows,
    byok,
    createdAt: startedAt,
    expiresAt,
    ...(isInt(slice) ? { slice } : {}),
    ...(isInt(pendingChargeMicros) ? { pendingChargeMicros } : {}),
  };
}

/**
 * One request's row, open or settled, by its workspace and id (strongly consistent); undefined
 * when there is none, or the id carries no start (one minted before ids did: its key cannot be
 * known without an index).
 */
export async function readRequestRow(db: DocumentSender, usageTable: string, workspaceId: string, requestId: string): Promise<Item | undefined> {
  const startedAt = requestIdTime(requestId);
  if (startedAt === undefined) return undefined;
  const got = await db.send(new GetCommand({ TableName: usageTable, Key: requestRowKey(workspaceId, requestId, startedAt), ConsistentRead: true }));
  return got.Item as Item | undefined;
}
