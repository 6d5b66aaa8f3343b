/**
 * What every admin operation runs against, and the DynamoDB plumbing they share: table names,
 * item keys, and a transaction helper that retries conflicts and hands cancellations back as
 * per-item reasons so each operation can turn them into its own domain error.
 */
import type { RegionSetup } from './regions';
import { ConditionalCheckFailedException, TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import type { CancellationReason } from '@aws-sdk/client-dynamodb';
import { TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import type { DynamoDBDocumentClient, TransactWriteCommandInput } from '@aws-sdk/lib-dynamodb';
import { randomBytes } from 'node:crypto';
import { tableName } from '../shared/schema';
import type { TableName } from '../shared/schema';
import { ConcurrentUpdateError } from './directory-errors';
import type { SecretStore } from './directory-secrets';

/** Everything an admin operation needs; the clock and the secret store are injectable for tests. */
export interface AdminContext {
  readonly doc: DynamoDBDocumentClient;
  /** Table-name prefix, e.g. `sluice-dev-`. */
  readonly tablePrefix: string;
  /** `local`, `dev`, `stg` or `prod`: decides the key prefix and the secret names. */
  readonly stage: string;
  /** Epoch milliseconds; defaults to `Date.now`. */
  readonly now?: () => number;
  /** Where BYOK provider keys are kept; only the BYOK operations need it. */
  readonly secrets?: SecretStore;
  /**
   * How long the gateways cache key, workspace and member records (their `SLUICE_CACHE_TTL_MS`;
   * default 5 s): a limit set on a window that was not tracked is armed this long (plus a margin)
   * after it is written (`lambdas/core/limit-arming.ts`).
   */
  readonly cacheTtlMs?: number;
  /**
   * The stage's regions when it has several (`SLUICE_REGIONS`, docs/regions.md): balances are then
   * summed over every region's slices, and `workspace slices` shows each region's part.
   */
  readonly regions?: RegionSetup;
}

/** One item of a `TransactWriteItems` call, as the document client takes it. */
export type TransactItem = NonNullable<TransactWriteCommandInput['TransactItems']>[number];

/** The full name of one of Sluice's tables in this context. */
export function table(ctx: AdminContext, name: TableName): string {
  return tableName(ctx.tablePrefix, name);
}

/** The context's clock. */
export function nowOf(ctx: AdminContext): number {
  return (ctx.now ?? Date.now)();
}

/** Sort key of a workspace's settings item. */
export const META = 'META';
/** Sort key of a member item. */
export function memberSk(memberId: string): string {
  return `MEMBER#${memberId}`;
}
/** Sort key of a routing-profile item. */
export function profileSk(identifier: string): string {
  return `PROFILE#${identifier}`;
}
/** Ledger partition key of a workspace. */
export function ledgerPk(workspaceId: string): string {
  return `WS#${workspaceId}`;
}
/** Ledger sort key of the balance item. */
export const BALANCE = 'BALANCE';

/** A fresh opaque id such as `ws_3f9a0c…`; 80 random bits make collisions a non-issue. */
export function newId(kind: 'ws' | 'mem' | 'key'): string {
  return `${kind}_${randomBytes(10).toString('hex')}`;
}

/** Per-item reasons of a cancelled transaction, in the order of the items sent. */
export type Reasons = readonly (CancellationReason | undefined)[];

/** Whether item `index` of a cancelled transaction failed its condition. */
export function failedAt(reasons: Reasons, index: number): boolean {
  return reasons[index]?.Code === 'ConditionalCheckFailed';
}

const MAX_ATTEMPTS = 12;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Runs one `TransactWriteItems`. Conflicts with another in-flight transaction are retried with
 * jittered backoff (they say nothing about the data). A cancellation for any other reason is
 * passed to `onCancel`, which returns the domain error to throw (or undefined to rethrow as is).
 */
export async function transact(
  ctx: { readonly doc: { send(command: TransactWriteCommand): Promise<unknown> } },
  items: readonly TransactItem[],
  onCancel: (reasons: Reasons) => Error | undefined | Promise<Error | undefined>,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await ctx.doc.send(new TransactWriteCommand({ TransactItems: [...items] }));
      return;
    } catch (err) {
      if (!(err instanceof TransactionCanceledException)) throw err;
      const reasons: Reasons = err.CancellationReasons ?? [];
      const conflicted = reasons.some((r) => r?.Code === 'TransactionConflict');
      const conditionFailed = reasons.some((r) => r?.Code === 'ConditionalCheckFailed');
      if (conflicted && !conditionFailed) {
        if (attempt >= MAX_ATTEMPTS) throw new ConcurrentUpdateError('the workspace');
        await sleep(Math.random() * Math.min(1000, 20 * 2 ** attempt));
        continue;
      }
      throw (await onCancel(reasons)) ?? err;
    }
  }
}

/**
 * Runs a single conditional write and turns a failed condition into `onFailed()`'s error; every
 * other error is rethrown untouched.
 */
export async function conditional<T>(write: () => Promise<T>, onFailed: () => Error | Promise<Error>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if (err instanceof ConditionalCheckFailedException) throw await onFailed();
    throw err;
  }
}
