/**
 * The hold sweeper's use case: settles every open hold whose expiry has passed, that is, every
 * request whose function died (or was killed) before it could settle. DynamoDB TTL cannot do
 * this: it only collects garbage, days late, and would leave the money held.
 *
 * Policy for what a dead request is charged (DESIGN.md leaves it to us; README and tests state
 * it): the hold's `inputMicros`, the upper bound of the prompt's cost, because the provider has
 * surely billed the prompt while the output is unknown and is not charged. When the gateway had
 * already computed the real charge but failed to settle, it leaves that on the hold as
 * `pendingChargeMicros`, and that is charged instead. Either is capped at the hold's amount, the
 * most the customer agreed to have taken for the request.
 *
 * Idempotent by construction: `Ledger.settle` is conditional on the hold still existing, so a
 * second sweep, an overlapping run, or the gateway settling at the same moment changes nothing.
 */
import { GetCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { Ledger, Settlement } from '../gateway/ports';
import type { EndpointFamily, HoldRecord } from '../shared/records';
import { stageCountsLine } from '../shared/emf';
import { scanExpiryIndex } from '../store/holds';

/** What {@link sweep} runs on. */
export interface SweepDeps {
  readonly doc: DynamoDBDocumentClient;
  /** Full name of the holds table. */
  readonly holdsTable: string;
  /** Settles a hold; the DynamoDB ledger in production. */
  readonly ledger: Pick<Ledger, 'settle'>;
  /** Stage name, the `Stage` dimension of the metrics. */
  readonly stage: string;
  /** Where the EMF metrics line and error lines go. @default a line on stdout */
  readonly writeLine?: (line: string) => void;
  /**
   * Epoch ms after which no further hold is started (the function's timeout is near); the rest
   * wait for the next tick. @default no deadline
   */
  readonly deadline?: number;
  /** The clock the deadline is checked against. @default Date.now */
  readonly clock?: () => number;
  /**
   * Transaction conflicts the ledger met since the last call (its `onConflict` hook counts them);
   * reported as `TransactionConflicts` when given. @default not reported
   */
  readonly takeConflicts?: () => number;
}

/** What one sweep did. */
export interface SweepResult {
  /** Holds this run settled. */
  readonly swept: number;
  /** Expired holds whose settlement failed (they stay open for the next tick). */
  readonly failed: number;
  /** Expired holds seen but left for the next tick because the deadline came (pages not read are not counted). */
  readonly deferred: number;
  /** Open holds after the run: still-running requests plus expired holds not settled. */
  readonly outstanding: number;
  /** Sum of what the swept holds were charged, micro-units. */
  readonly chargedMicros: number;
}

/** A hold as read back from the table, with the attribute the gateway adds when its settlement failed. */
type StoredHold = HoldRecord & { readonly pendingChargeMicros?: number };

/** Holds settled at once: enough to finish a backlog within a tick, few enough not to pile conflicts on one balance. */
const CONCURRENCY = 4;

/**
 * What the sweeper charges a dead request, in micro-units: `pendingChargeMicros` when the hold
 * carries one (the real charge a live settlement computed; like a live settlement it may exceed
 * the hold, and the ledger collects the excess only from what the balance has), else
 * `inputMicros`, capped at the hold's amount; never below zero.
 */
export function sweptChargeMicros(hold: StoredHold): number {
  const pending = hold.pendingChargeMicros;
  if (pending !== undefined && Number.isSafeInteger(pending) && pending >= 0) return pending;
  return Math.max(0, Math.min(hold.inputMicros, hold.amountMicros));
}

const FAMILIES: readonly EndpointFamily[] = ['chat_completions', 'responses'];

function isInt(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v);
}

/** The stored item as a hold, or undefined when it lacks what settling needs (never guessed at). */
function asHold(item: Record<string, unknown>): StoredHold | undefined {
  const { holdId, workspaceId, keyId, memberId, family, requestedModel, amountMicros, inputMicros, windows, byok, createdAt, expiresAt, ttl } = item;
  if (typeof holdId !== 'string' || typeof workspaceId !== 'string' || typeof keyId !== 'string') return undefined;
  if (typeof family !== 'string' || !(FAMILIES as readonly string[]).includes(family) || typeof requestedModel !== 'string') return undefined;
  if (!isInt(amountMicros) || !isInt(inputMicros) || !isInt(createdAt) || !isInt(expiresAt) || typeof byok !== 'boolean') return undefined;
  if (!Array.isArray(windows) || !windows.every((w): w is string => typeof w === 'string')) return undefined;
  const pending = item.pendingChargeMicros;
  return {
    holdId,
    workspaceId,
    keyId,
    ...(typeof memberId === 'string' ? { memberId } : {}),
    family: family as EndpointFamily,
    requestedModel,
    amountMicros,
    inputMicros,
    windows,
    byok,
    createdAt,
    expiresAt,
    expiryShard: typeof item.expiryShard === 'string' ? item.expiryShard : '',
    ...(isInt(item.slice) ? { slice: item.slice } : {}),
    ttl: isInt(ttl) ? ttl : 0,
    ...(isInt(pending) ? { pendingChargeMicros: pending } : {}),
  };
}

/** The settlement a swept hold gets: no counts (nothing is known of the reply), outcome `swept`. */
function sweptSettlement(hold: StoredHold, now: number): Settlement {
  return { counts: undefined, chargeMicros: sweptChargeMicros(hold), stream: false, status: 0, outcome: 'swept', attempts: 0, now };
}

/** Runs `work` over `items`, at most `limit` at a time. */
async function eachLimited<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < items.length) {
      const item = items[next] as T;
      next += 1;
      await work(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
}

/**
 * Settles every hold whose expiry is at or before `now`, then writes one EMF line with
 * `HoldsSwept`, `HoldsOutstanding`, `SpendMicros`, `ExpiredHoldsBacklog` and, when counted, `TransactionConflicts`
 * (namespace `Sluice`, dimension `Stage`).
 * A hold that fails to settle is logged and left for the next tick; it does not stop the rest.
 */
export async function sweep(deps: SweepDeps, now: number): Promise<SweepResult> {
  const write = deps.writeLine ?? ((line: string) => void process.stdout.write(`${line}\n`));
  const clock = deps.clock ?? Date.now;
  let swept = 0;
  let failed = 0;
  let deferred = 0;
  let chargedMicros = 0;

  const settleOne = async (indexed: Record<string, unknown>): Promise<void> => {
    if (deps.deadline !== undefined && clock() >= deps.deadline) {
      deferred += 1;
      return;
    }
    const holdId = indexed.holdId;
    try {
      if (typeof holdId !== 'string') throw new Error('index item without a holdId');
      // The index is eventually consistent: amounts must come from the item itself, or a hold
      // extended just before its request died would be released short and stay held forever.
      const got = await deps.doc.send(new GetCommand({ TableName: deps.holdsTable, Key: { holdId }, ConsistentRead: true }));
      if (got.Item === undefined) return; // settled since the index was read
      const hold = asHold(got.Item);
      if (hold === undefined) throw new Error('hold item lacks the attributes settlement needs');
      if (hold.expiresAt > now) return; // the item, not the index, says whether it may still run
      const settlement = sweptSettlement(hold, now);
      await deps.ledger.settle(hold, settlement);
      swept += 1;
      if (!hold.byok) chargedMicros += settlement.chargeMicros;
    } catch (err) {
      failed += 1;
      write(
        JSON.stringify({
          level: 'error',
          event: 'sweep_failed',
          holdId: typeof holdId === 'string' ? holdId : undefined,
          error: err instanceof Error ? `${err.name}: ${err.message}` : String(err),
        }),
      );
    }
  };

  // Every shard of the expiry index is read; past the deadline, no further page is read (the
  // time the function has left goes to the settlements already started).
  const pastDeadline = (): boolean => deps.deadline !== undefined && clock() >= deps.deadline;
  const scan = await scanExpiryIndex(deps.doc, deps.holdsTable, now, (page) => eachLimited(page, CONCURRENCY, settleOne), pastDeadline);

  const outstanding = scan.live + failed + deferred;
  const conflicts = deps.takeConflicts?.();
  write(
    stageCountsLine(
      deps.stage,
      now,
      { event: 'sweep', failed, deferred },
      {
        HoldsSwept: swept,
        HoldsOutstanding: outstanding,
        SpendMicros: chargedMicros,
        // Expired holds this run left open (failed or out of time): the backlog alarm's metric.
        ExpiredHoldsBacklog: failed + deferred,
        ...(conflicts === undefined ? {} : { TransactionConflicts: conflicts }),
      },
    ),
  );
  return { swept, failed, deferred, outstanding, chargedMicros };
}
