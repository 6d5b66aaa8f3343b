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
 * A hold is a request's row in the usage table while it is open (`lambdas/store/request-rows.ts`);
 * the open rows are found through the sparse `byExpiryShard` index (`lambdas/store/holds.ts`).
 *
 * Idempotent by construction: `Ledger.settle` is conditional on the row still being open, so a
 * second sweep, an overlapping run, or the gateway settling at the same moment changes nothing.
 */
import { GetCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { Ledger, Settlement } from '../gateway/ports';
import { stageCountsLine } from '../shared/emf';
import { scanExpiryIndex } from '../store/holds';
import { allExpiryShards } from '../store/keys';
import { holdOfRow, isOpenRow, type StoredHold } from '../store/request-rows';

/** What {@link sweep} runs on. */
export interface SweepDeps {
  readonly doc: DynamoDBDocumentClient;
  /** Full name of the usage table, whose open rows are the holds. */
  readonly usageTable: string;
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
  /**
   * In a stage with several regions: this region, and its tag (`''` in the home region). Only its
   * own expiry shards are read (`X<n><tag>`), and only rows whose `region` is its own are settled
   * (a replicated row of another region's request is that region's to settle, on its slices).
   * @default one region: every shard, every row
   */
  readonly region?: { readonly name: string; readonly tag: string };
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

/** The settlement a swept hold gets: no counts (nothing is known of the reply), outcome `swept`. */
function sweptSettlement(hold: StoredHold, now: number): Settlement {
  return { counts: undefined, chargeMicros: sweptChargeMicros(hold), stream: false, status: 0, outcome: 'swept', attempts: 0, now };
}

/**
 * Whether a row is this region's to settle: its `region` is this one; a row without one was
 * written before the stage had several regions, and is the home region's (tag `''`).
 */
export function ownRow(row: Record<string, unknown> | undefined, region: string, tag: string): boolean {
  const of = row?.region;
  return of === region || (of === undefined && tag === '');
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
    const { pk, sk } = indexed;
    let holdId: string | undefined;
    try {
      if (typeof pk !== 'string' || typeof sk !== 'string') throw new Error('index entry without its row key');
      holdId = sk.slice(sk.indexOf('#') + 1);
      // The index is eventually consistent: amounts must come from the row itself, or a hold
      // extended just before its request died would be released short and stay held forever.
      const got = await deps.doc.send(new GetCommand({ TableName: deps.usageTable, Key: { pk, sk }, ConsistentRead: true }));
      if (!isOpenRow(got.Item)) return; // settled since the index was read
      if (deps.region !== undefined && !ownRow(got.Item, deps.region.name, deps.region.tag)) return; // another region's hold
      const hold = holdOfRow(got.Item);
      if (hold === undefined) throw new Error('open row lacks the attributes settlement needs');
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
          holdId,
          error: err instanceof Error ? `${err.name}: ${err.message}` : String(err),
        }),
      );
    }
  };

  // Every shard of the expiry index is read; past the deadline, no further page is read (the
  // time the function has left goes to the settlements already started).
  const pastDeadline = (): boolean => deps.deadline !== undefined && clock() >= deps.deadline;
  const shards = deps.region === undefined ? undefined : allExpiryShards().map((shard) => `${shard}${deps.region?.tag ?? ''}`);
  const scan = await scanExpiryIndex(deps.doc, deps.usageTable, now, (page) => eachLimited(page, CONCURRENCY, settleOne), pastDeadline, shards);

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
