/**
 * The ledger on DynamoDB: one TransactWriteItems to admit (balance, hold, spend-rate bucket, the
 * key's request counter and every limit window, each conditional), one to settle. Conditions
 * cannot add, so each window keeps `usedMicros = settled + held` as its own attribute and the
 * condition compares it with `limit - need`, computed here.
 *
 * When a transaction is cancelled, the reasons do not reliably say every condition that failed,
 * so the refusal is decided from a consistent read of the same items, in SPEC's order (the key's
 * request rate, then the 402s, then the spend rate). If nothing fails on that read, the state
 * changed under us and the transaction is tried again.
 */
import {
  BatchGetCommand,
  GetCommand,
  TransactWriteCommand,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import { bucketOf, partitionBuckets, spendRetryAfterSeconds } from '../core/spend-rate';
import { secondsToNextMinute, windowEnd, windowKeys } from '../core/windows';
import type { HoldRecord, UsageRecord } from '../shared/records';
import type { DocumentSender } from './dynamo-wire';
import type { AdmissionLimits, AdmitOutcome, AdmitRequest, Ledger, Refusal, Settlement } from '../gateway/ports';

type TransactItems = NonNullable<ConstructorParameters<typeof TransactWriteCommand>[0]['TransactItems']>;

/** Table names the ledger writes. */
export interface LedgerTables {
  readonly ledger: string;
  readonly holds: string;
  readonly usage: string;
  /** Days a usage row is kept: it gets a `ttl` that far after settlement; absent keeps it. */
  readonly usageRetentionDays?: number;
}

const BALANCE_SK = 'BALANCE';
const DAY_S = 86_400;
/** Windows are kept this long past their end, for the CLI's ledger view. */
const WINDOW_RETENTION_S = 400 * DAY_S;
/** Holds are garbage-collected by TTL this long after their expiry (the sweeper settles them first). */
const HOLD_RETENTION_S = 7 * DAY_S;
const MAX_ATTEMPTS = 30;
/** A workspace's expired spend-rate buckets are pruned at most this often per process. */
const PRUNE_INTERVAL_MS = 30_000;

/** Which limit a ledger window key answers to. */
type WindowKind = 'key' | 'member' | 'workspace';

interface WindowSpec {
  readonly sk: string;
  readonly kind: WindowKind;
  readonly limitMicros?: number;
  readonly ttl?: number;
}

function isCancelled(err: unknown): err is Error & { CancellationReasons?: { Code?: string }[] } {
  return err instanceof Error && err.name === 'TransactionCanceledException';
}

function isConditionFailure(err: unknown): boolean {
  return err instanceof Error && err.name === 'ConditionalCheckFailedException';
}

/** True when every reason is a conflict or none (the transaction may simply be run again). */
function onlyConflicts(err: Error & { CancellationReasons?: { Code?: string }[] }): boolean {
  const reasons = err.CancellationReasons ?? [];
  return reasons.length > 0 && reasons.every((r) => r.Code === undefined || r.Code === 'None' || r.Code === 'TransactionConflict');
}

function pause(attempt: number): Promise<void> {
  const ms = Math.min(200, 4 * 2 ** Math.min(attempt, 6)) * (0.5 + Math.random());
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function num(v: unknown): number {
  return typeof v === 'number' ? v : 0;
}

function windowKind(sk: string): WindowKind {
  if (sk.startsWith('KEYWIN#')) return 'key';
  if (sk.startsWith('MEMBERMONTH#')) return 'member';
  return 'workspace';
}

function limitFor(kind: WindowKind, limits: AdmissionLimits): number | undefined {
  if (kind === 'key') return limits.keyLimitMicros;
  if (kind === 'member') return limits.memberLimitMicros;
  return limits.workspaceLimitMicros;
}

export class DynamoLedger implements Ledger {
  private readonly lastPrune = new Map<string, number>();
  /** Round trips to DynamoDB made by this instance (for the benchmark's instrumentation). */
  roundTrips = 0;

  constructor(
    /** The gateway passes the lean {@link DynamoWire}; the sweeper and tests may pass the SDK's DocumentClient. */
    private readonly doc: DocumentSender,
    private readonly tables: LedgerTables,
    /** Told of each transaction conflict (a CloudWatch metric when deployed). */
    private readonly onConflict: () => void = () => undefined,
  ) {}

  /** The client, counting one round trip per use. */
  private get db(): DocumentSender {
    this.roundTrips += 1;
    return this.doc;
  }

  /** The windows a request occupies, with the limit each must stay under. */
  private windows(request: Pick<AdmitRequest, 'keyId' | 'memberId' | 'limits' | 'now'>): WindowSpec[] {
    const { limits, now } = request;
    const ttlAfter = (end: number | undefined): number | undefined => (end === undefined ? undefined : Math.floor(end / 1000) + WINDOW_RETENTION_S);
    const monthEnd = windowEnd('monthly', now);
    const specs: WindowSpec[] = [
      { sk: windowKeys.key(request.keyId, limits.keyWindow, now), kind: 'key', limitMicros: limits.keyLimitMicros, ttl: ttlAfter(windowEnd(limits.keyWindow, now)) },
    ];
    if (request.memberId !== undefined) {
      specs.push({ sk: windowKeys.member(request.memberId, now), kind: 'member', limitMicros: limits.memberLimitMicros, ttl: ttlAfter(monthEnd) });
    }
    specs.push({ sk: windowKeys.workspace(now), kind: 'workspace', limitMicros: limits.workspaceLimitMicros, ttl: ttlAfter(monthEnd) });
    return specs;
  }

  private windowUpdate(pk: string, w: WindowSpec, amount: number, withLimit: boolean): TransactItems[number] {
    const values: Record<string, unknown> = { ':amount': amount, ':zero': 0 };
    let update = 'SET settledMicros = if_not_exists(settledMicros, :zero)';
    if (w.ttl !== undefined) {
      update += ', #ttl = if_not_exists(#ttl, :ttl)';
      values[':ttl'] = w.ttl;
    }
    update += ' ADD heldMicros :amount, usedMicros :amount';
    const item: NonNullable<TransactItems[number]['Update']> = {
      TableName: this.tables.ledger,
      Key: { pk, sk: w.sk },
      UpdateExpression: update,
      ExpressionAttributeValues: values,
      ...(w.ttl !== undefined ? { ExpressionAttributeNames: { '#ttl': 'ttl' } } : {}),
    };
    if (withLimit && w.limitMicros !== undefined) {
      // used + amount <= limit, written as used <= limit - amount because conditions cannot add.
      values[':max'] = w.limitMicros - amount;
      return { Update: { ...item, ConditionExpression: 'attribute_not_exists(usedMicros) OR usedMicros <= :max' } };
    }
    return { Update: item };
  }

  async admit(request: AdmitRequest): Promise<AdmitOutcome> {
    const pk = `WS#${request.workspaceId}`;
    const { limits, now } = request;
    const need = request.amountMicros;
    const windows = request.byok ? [] : this.windows(request);
    const hold: HoldRecord = {
      holdId: request.holdId,
      workspaceId: request.workspaceId,
      keyId: request.keyId,
      ...(request.memberId !== undefined ? { memberId: request.memberId } : {}),
      family: request.family,
      requestedModel: request.requestedModel,
      amountMicros: need,
      inputMicros: request.inputMicros,
      windows: windows.map((w) => w.sk),
      byok: request.byok,
      createdAt: now,
      expiresAt: request.expiresAt,
      open: '1',
      ttl: Math.floor(request.expiresAt / 1000) + HOLD_RETENTION_S,
    };
    const rateSk = windowKeys.rate(request.keyId, now);
    const items: TransactItems = [
      {
        Update: {
          TableName: this.tables.ledger,
          Key: { pk, sk: rateSk },
          UpdateExpression: 'ADD requests :one SET #ttl = :ttl',
          ConditionExpression: 'attribute_not_exists(requests) OR requests < :limit',
          ExpressionAttributeNames: { '#ttl': 'ttl' },
          ExpressionAttributeValues: { ':one': 1, ':limit': limits.keyRatePerMinute, ':ttl': Math.floor(now / 1000) + 180 },
        },
      },
      { Put: { TableName: this.tables.holds, Item: hold, ConditionExpression: 'attribute_not_exists(holdId)' } },
    ];
    if (!request.byok) {
      const second = String(bucketOf(now));
      items.push({
        Update: {
          TableName: this.tables.ledger,
          Key: { pk, sk: BALANCE_SK },
          UpdateExpression:
            'SET availableMicros = availableMicros - :need, heldMicros = heldMicros + :need, ' +
            'rateTotal = if_not_exists(rateTotal, :zero) + :need, rateBuckets.#sec = if_not_exists(rateBuckets.#sec, :zero) + :need',
          // The balance covers the hold, and what the last 60 s reserved (an upper bound: buckets
          // not yet pruned still count) leaves room for it under the cap.
          ConditionExpression: 'availableMicros >= :need AND (attribute_not_exists(rateTotal) OR rateTotal <= :rateMax)',
          ExpressionAttributeNames: { '#sec': second },
          ExpressionAttributeValues: { ':need': need, ':zero': 0, ':rateMax': limits.spendRateCapMicros - need },
        },
      });
      for (const w of windows) items.push(this.windowUpdate(pk, w, need, true));
    }
    const impossible = !request.byok && (need > limits.spendRateCapMicros || windows.some((w) => w.limitMicros !== undefined && need > w.limitMicros));
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt += 1) {
      if (!impossible) {
        try {
          await this.db.send(new TransactWriteCommand({ TransactItems: items }));
          return { admitted: true, hold };
        } catch (err) {
          if (isMissingBuckets(err)) {
            await this.initBuckets(pk);
            continue;
          }
          if (!isCancelled(err)) throw err;
          if (onlyConflicts(err)) {
            this.onConflict();
            await pause(attempt);
            continue;
          }
        }
      }
      const refusal = await this.diagnose(pk, rateSk, request, windows);
      if (refusal !== undefined) return { admitted: false, refusal };
      await pause(attempt);
    }
    throw new Error('admission did not settle after repeated conflicts');
  }

  /** Decides, from a consistent read, which refusal applies; undefined when none does any more. */
  private async diagnose(pk: string, rateSk: string, request: AdmitRequest, windows: readonly WindowSpec[]): Promise<Refusal | undefined> {
    const { limits, now } = request;
    const need = request.amountMicros;
    const keys = [{ pk, sk: rateSk }, { pk, sk: BALANCE_SK }, ...windows.map((w) => ({ pk, sk: w.sk }))];
    const result = await this.db.send(
      new BatchGetCommand({ RequestItems: { [this.tables.ledger]: { Keys: keys, ConsistentRead: true } } }),
    );
    const found = new Map<string, Record<string, unknown>>();
    for (const item of result.Responses?.[this.tables.ledger] ?? []) found.set(String(item.sk), item);

    const rate = found.get(rateSk);
    if (rate !== undefined && num(rate.requests) >= limits.keyRatePerMinute) {
      return { kind: 'rate_limit_exceeded', retryAfterSeconds: secondsToNextMinute(now) };
    }
    if (request.byok) return undefined;
    const balance = found.get(BALANCE_SK);
    if (balance === undefined || num(balance.availableMicros) < need) {
      return { kind: 'insufficient_credit', availableMicros: balance === undefined ? 0 : num(balance.availableMicros) };
    }
    for (const w of windows) {
      if (w.limitMicros === undefined) continue;
      const item = found.get(w.sk);
      const used = item === undefined ? 0 : num(item.usedMicros);
      if (used + need <= w.limitMicros) continue;
      if (w.kind === 'key') {
        return { kind: 'key_limit_exceeded', settledMicros: num(item?.settledMicros), heldMicros: num(item?.heldMicros), limitMicros: w.limitMicros };
      }
      return { kind: w.kind === 'member' ? 'member_limit_exceeded' : 'workspace_limit_exceeded', usedMicros: used, limitMicros: w.limitMicros };
    }
    const buckets = (balance.rateBuckets ?? {}) as Record<string, number>;
    const { liveMicros, expired, earliestLive } = partitionBuckets(buckets, now);
    if (need > limits.spendRateCapMicros || liveMicros + need > limits.spendRateCapMicros) {
      return { kind: 'spend_rate_exceeded', retryAfterSeconds: spendRetryAfterSeconds(earliestLive, now), capMicros: limits.spendRateCapMicros };
    }
    // The cap has room once aged-out buckets are dropped: prune them, then the caller retries.
    if (expired.length > 0) await this.prune(pk, expired);
    return undefined;
  }

  private async initBuckets(pk: string): Promise<void> {
    await this.db.send(
      new UpdateCommand({
        TableName: this.tables.ledger,
        Key: { pk, sk: BALANCE_SK },
        UpdateExpression: 'SET rateBuckets = if_not_exists(rateBuckets, :empty)',
        ConditionExpression: 'attribute_exists(pk)',
        ExpressionAttributeValues: { ':empty': {} },
      }),
    ).catch((err: unknown) => {
      if (!isConditionFailure(err)) throw err;
    });
  }

  /** Removes aged-out spend-rate buckets, each only if it still holds what was read. */
  private async prune(pk: string, expired: readonly (readonly [string, number])[]): Promise<void> {
    const batch = expired.slice(0, 80);
    const names: Record<string, string> = {};
    const values: Record<string, number> = { ':sum': batch.reduce((acc, [, v]) => acc + v, 0) };
    const removes: string[] = [];
    const conditions: string[] = [];
    batch.forEach(([second, value], i) => {
      names[`#b${i}`] = second;
      values[`:b${i}`] = value;
      removes.push(`rateBuckets.#b${i}`);
      conditions.push(`rateBuckets.#b${i} = :b${i}`);
    });
    try {
      await this.db.send(
        new UpdateCommand({
          TableName: this.tables.ledger,
          Key: { pk, sk: BALANCE_SK },
          UpdateExpression: `REMOVE ${removes.join(', ')} SET rateTotal = rateTotal - :sum`,
          ConditionExpression: conditions.join(' AND '),
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: values,
        }),
      );
    } catch (err) {
      if (!isConditionFailure(err)) throw err; // someone else pruned first
    }
  }

  /** Prunes a workspace's aged-out buckets now and then, off the request's critical path. */
  private async maybePrune(workspaceId: string, now: number): Promise<void> {
    const last = this.lastPrune.get(workspaceId) ?? 0;
    if (now - last < PRUNE_INTERVAL_MS) return;
    this.lastPrune.set(workspaceId, now);
    const pk = `WS#${workspaceId}`;
    const got = await this.db.send(
      new GetCommand({ TableName: this.tables.ledger, Key: { pk, sk: BALANCE_SK }, ProjectionExpression: 'rateBuckets', ConsistentRead: true }),
    );
    const { expired } = partitionBuckets((got.Item?.rateBuckets ?? {}) as Record<string, number>, now);
    if (expired.length > 0) await this.prune(pk, expired);
  }

  async settle(given: HoldRecord, settlement: Settlement): Promise<boolean> {
    let hold = given;
    const pk = `WS#${hold.workspaceId}`;
    let chargeMicros = hold.byok || settlement.byok === true ? 0 : settlement.chargeMicros;
    let uncollectedMicros = 0;
    let lastError: unknown;
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt += 1) {
      const items = this.settleItems(pk, hold, settlement, chargeMicros, uncollectedMicros);
      try {
        await this.db.send(new TransactWriteCommand({ TransactItems: items }));
        if (!hold.byok) await this.maybePrune(hold.workspaceId, settlement.now).catch(() => undefined);
        return true;
      } catch (err) {
        lastError = err;
        if (!isCancelled(err)) {
          if (attempt >= 3) break;
          await pause(attempt);
          continue;
        }
        const reasons = err.CancellationReasons ?? [];
        if (reasons[0]?.Code === 'ConditionalCheckFailed') {
          // Either already settled (idempotent: nothing to do), or the stored hold has grown
          // since this copy was taken: settle what is stored, so the right amount returns.
          const stored = await this.db.send(new GetCommand({ TableName: this.tables.holds, Key: { holdId: hold.holdId }, ConsistentRead: true }));
          if (stored.Item === undefined) return false;
          hold = { ...hold, amountMicros: num(stored.Item.amountMicros) };
          continue;
        }
        if (reasons[1]?.Code === 'ConditionalCheckFailed' && !hold.byok) {
          // The charge exceeds the hold by more than the balance holds: collect what is there,
          // so the balance never goes below zero, and record the rest as uncollected.
          const got = await this.db.send(new GetCommand({ TableName: this.tables.ledger, Key: { pk, sk: BALANCE_SK }, ConsistentRead: true }));
          const available = Math.max(0, num(got.Item?.availableMicros));
          const collectable = hold.amountMicros + available;
          if (chargeMicros > collectable) {
            uncollectedMicros += chargeMicros - collectable;
            chargeMicros = collectable;
          }
          continue;
        }
        if (onlyConflicts(err)) this.onConflict();
        await pause(attempt);
      }
    }
    // Leave the computed charge on the hold, so the sweeper settles it for what it really cost.
    await this.db
      .send(
        new UpdateCommand({
          TableName: this.tables.holds,
          Key: { holdId: hold.holdId },
          UpdateExpression: 'SET pendingChargeMicros = :charge',
          ConditionExpression: 'attribute_exists(holdId)',
          ExpressionAttributeValues: { ':charge': chargeMicros + uncollectedMicros },
        }),
      )
      .catch(() => undefined);
    throw lastError instanceof Error ? lastError : new Error('settlement did not go through');
  }

  private settleItems(pk: string, hold: HoldRecord, s: Settlement, chargeMicros: number, uncollectedMicros: number): TransactItems {
    const counts = s.counts ?? { inputTokens: 0, cachedInputTokens: 0, outputTokens: 0, reasoningTokens: 0 };
    const usage: UsageRecord & { uncollectedMicros?: number; ttl?: number } = {
      workspaceId: hold.workspaceId,
      sk: `${new Date(hold.createdAt).toISOString()}#${hold.holdId}`,
      requestId: hold.holdId,
      keyId: hold.keyId,
      ...(hold.memberId !== undefined ? { memberId: hold.memberId } : {}),
      family: hold.family,
      requestedModel: hold.requestedModel,
      ...(s.servedBy !== undefined ? { servedBy: s.servedBy } : {}),
      ...(s.provider !== undefined ? { provider: s.provider } : {}),
      stream: s.stream,
      byok: s.byok ?? hold.byok,
      status: s.status,
      outcome: s.outcome,
      inputTokens: counts.inputTokens,
      cachedInputTokens: counts.cachedInputTokens,
      outputTokens: counts.outputTokens,
      reasoningTokens: counts.reasoningTokens,
      chargeMicros,
      holdMicros: hold.amountMicros,
      attempts: s.attempts,
      startedAt: hold.createdAt,
      durationMs: Math.max(0, s.now - hold.createdAt),
      ...(s.firstByteMs !== undefined ? { firstByteMs: s.firstByteMs } : {}),
      ...(s.estimated === true ? { estimated: true } : {}),
      ...(uncollectedMicros > 0 ? { uncollectedMicros } : {}),
      ...(this.tables.usageRetentionDays !== undefined ? { ttl: Math.floor(s.now / 1000) + this.tables.usageRetentionDays * DAY_S } : {}),
    };
    const items: TransactItems = [
      // Settling is conditional on the hold still existing, which makes it idempotent, and on
      // its amount, so a stale copy of a hold that has since grown cannot release the wrong sum.
      {
        Delete: {
          TableName: this.tables.holds,
          Key: { holdId: hold.holdId },
          ConditionExpression: 'attribute_exists(holdId) AND amountMicros = :amount',
          ExpressionAttributeValues: { ':amount': hold.amountMicros },
        },
      },
    ];
    if (!hold.byok) {
      const release = hold.amountMicros - chargeMicros;
      items.push({
        Update: {
          TableName: this.tables.ledger,
          Key: { pk, sk: BALANCE_SK },
          UpdateExpression: 'SET availableMicros = availableMicros + :release, heldMicros = heldMicros - :hold, spentMicros = spentMicros + :charge',
          // A charge above the hold may take from the balance only what it has.
          ConditionExpression: 'availableMicros >= :deficit',
          ExpressionAttributeValues: { ':release': release, ':hold': hold.amountMicros, ':charge': chargeMicros, ':deficit': Math.max(0, -release) },
        },
      });
      for (const sk of hold.windows) {
        items.push({
          Update: {
            TableName: this.tables.ledger,
            Key: { pk, sk },
            UpdateExpression: 'ADD heldMicros :negHold, settledMicros :charge, usedMicros :delta',
            ExpressionAttributeValues: { ':negHold': -hold.amountMicros, ':charge': chargeMicros, ':delta': chargeMicros - hold.amountMicros },
          },
        });
      }
    }
    items.push({ Put: { TableName: this.tables.usage, Item: usage } });
    return items;
  }

  async extend(hold: HoldRecord, extraMicros: number, limits: AdmissionLimits, now: number): Promise<boolean> {
    if (hold.byok) return true;
    const pk = `WS#${hold.workspaceId}`;
    const items: TransactItems = [
      {
        Update: {
          TableName: this.tables.holds,
          Key: { holdId: hold.holdId },
          UpdateExpression: 'SET amountMicros = amountMicros + :extra',
          ConditionExpression: 'attribute_exists(holdId)',
          ExpressionAttributeValues: { ':extra': extraMicros },
        },
      },
      {
        Update: {
          TableName: this.tables.ledger,
          Key: { pk, sk: BALANCE_SK },
          // An extension is a reservation too, so it counts toward the spend rate; it is not
          // refused by the cap, since cutting a running stream for pace would lose what it made.
          UpdateExpression:
            'SET availableMicros = availableMicros - :extra, heldMicros = heldMicros + :extra, ' +
            'rateTotal = if_not_exists(rateTotal, :zero) + :extra, rateBuckets.#sec = if_not_exists(rateBuckets.#sec, :zero) + :extra',
          ConditionExpression: 'availableMicros >= :extra',
          ExpressionAttributeNames: { '#sec': String(bucketOf(now)) },
          ExpressionAttributeValues: { ':extra': extraMicros, ':zero': 0 },
        },
      },
      ...hold.windows.map((sk) => this.windowUpdate(pk, { sk, kind: windowKind(sk), limitMicros: limitFor(windowKind(sk), limits) }, extraMicros, true)),
    ];
    for (let attempt = 0; attempt < 5; attempt += 1) {
      try {
        await this.db.send(new TransactWriteCommand({ TransactItems: items }));
        return true;
      } catch (err) {
        if (isCancelled(err) && onlyConflicts(err)) {
          await pause(attempt);
          continue;
        }
        if (isCancelled(err)) return false;
        throw err;
      }
    }
    return false;
  }

  async countRequest(workspaceId: string, keyId: string, ratePerMinute: number, now: number): Promise<{ readonly retryAfterSeconds?: number }> {
    try {
      await this.db.send(
        new UpdateCommand({
          TableName: this.tables.ledger,
          Key: { pk: `WS#${workspaceId}`, sk: windowKeys.rate(keyId, now) },
          UpdateExpression: 'ADD requests :one SET #ttl = :ttl',
          ConditionExpression: 'attribute_not_exists(requests) OR requests < :limit',
          ExpressionAttributeNames: { '#ttl': 'ttl' },
          ExpressionAttributeValues: { ':one': 1, ':limit': ratePerMinute, ':ttl': Math.floor(now / 1000) + 180 },
        }),
      );
      return {};
    } catch (err) {
      if (isConditionFailure(err)) return { retryAfterSeconds: secondsToNextMinute(now) };
      throw err;
    }
  }
}

/**
 * DynamoDB refuses a nested SET when the parent map does not exist yet (a balance item written
 * without `rateBuckets`); inside a transaction that surfaces as a ValidationError reason.
 */
function isMissingBuckets(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  if (err.name === 'ValidationException') return /document path/i.test(err.message);
  if (!isCancelled(err)) return false;
  return (err.CancellationReasons ?? []).some((r) => r.Code === 'ValidationError');
}
