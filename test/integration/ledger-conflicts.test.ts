/**
 * The ledger's races through DynamoDB's transaction conflicts. DynamoDB Local runs one transaction
 * at a time and never cancels one for a conflict, so the other race suites never meet
 * `TransactionConflict`; here the ledger talks to DynamoDB Local through the bench's tap
 * (`bench/store-map-tap.ts`) with DynamoDB's conflict rules on (`bench/dynamo-conflicts.ts`): a
 * TransactWriteItems meeting another ongoing one on an item is cancelled, a single-item write on
 * such an item is refused (`TransactionConflictException`), a TransactGetItems on it is cancelled.
 * Under 200-way races every limit still admits exactly what fits, refusals carry their own code
 * (never a contention error, which would be a 503), holds all come back, and
 * `credited = available + held + spent` holds summed over slices. Each case also asserts that the
 * tap really cancelled something during its race, so the conflict paths did run.
 */
import { wireClient } from '../../lambdas/adapters/dynamo-client';
import type { DynamoWire } from '../../lambdas/adapters/dynamo-wire';
import { MICROS_PER_MINOR } from '../../lambdas/core/pricing';
import type { AdmissionLimits, AdmitRequest } from '../../lambdas/gateway/ports';
import type { HoldRecord } from '../../lambdas/shared/records';
import { DynamoLedger, readBalance } from '../../lambdas/store';
import { ItemLocks } from '../../bench/dynamo-conflicts';
import { WriteTap, type CallCounts } from '../../bench/store-map-tap';
import { testTables, type TestTables, RACE_LIMITS } from '../support/dynamo';
import { NOW, OPEN, requestsTagged, settlement } from '../support/ledger-fixtures';
import { ledgerWorkspaces, warm } from '../support/ledger-workspaces';

/** How long a write holds its items at the tap (its reply, or this, whichever is first): the bench's figure. */
const CONFLICT_WINDOW_MS = 10;

let tables: TestTables;
let tap: WriteTap;
let wire: DynamoWire;

beforeAll(async () => {
  tables = await testTables();
  tap = new WriteTap(tables.endpoint, tables.prefix);
  tap.mode = 'count';
  tap.locks = new ItemLocks(CONFLICT_WINDOW_MS);
  // Only the ledger goes through the tap; setup and the invariant's reads go straight to DynamoDB Local.
  wire = wireClient({ dynamoEndpoint: await tap.listen('gateway') }, tables.doc, process.env, RACE_LIMITS);
});

afterAll(async () => {
  wire.destroy();
  await tap.close();
  tables.client.destroy();
});

jest.setTimeout(180_000);

const request = requestsTagged('c');
const { ledgerTables, workspace, expectSettledInvariant } = ledgerWorkspaces(() => tables);

/** What a race came to: holds placed, refusals' kinds, and anything thrown (by name and message). */
interface RaceOutcome {
  readonly admitted: HoldRecord[];
  readonly refused: string[];
  readonly errors: string[];
}

/**
 * A thrown error by name and message; a cancellation's list of a reason per item is cut to the
 * codes it names and its item count (a 32-item call over 8 slices is the snapshot), so that the
 * same failure on different items is tallied as one.
 */
function describeError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const message = err.message.replace(/\[([^\]]*)\]$/, (_all, list: string) => {
    const codes = list.split(', ');
    return `[${[...new Set(codes.filter((code) => code !== 'None'))].join(', ')} on a ${codes.length}-item call]`;
  });
  return `${err.name}: ${message}`;
}

/**
 * Admits every request at once. Unlike `admitAll`, a thrown admission does not hide the others:
 * it is kept by name, so a failure says what the ledger threw (a `LedgerContentionError` is a 503
 * to the caller, and a `TransactionConflictException` or a cancelled snapshot leaking out a 500).
 */
async function race(ledger: DynamoLedger, requests: AdmitRequest[]): Promise<RaceOutcome> {
  const outcomes = await Promise.allSettled(requests.map((r) => ledger.admit(r)));
  const out: RaceOutcome = { admitted: [], refused: [], errors: [] };
  for (const o of outcomes) {
    if (o.status === 'rejected') out.errors.push(describeError(o.reason));
    else if (o.value.admitted) out.admitted.push(o.value.hold);
    else out.refused.push(o.value.refusal.kind);
  }
  return out;
}

/** Settles every hold at once at `chargeOf(i)`; resolves to the errors thrown (expected none). */
async function settleAll(ledger: DynamoLedger, holds: readonly HoldRecord[], chargeOf: (i: number) => number): Promise<string[]> {
  const outcomes = await Promise.allSettled(holds.map((h, i) => ledger.settle(h, settlement(chargeOf(i)))));
  return outcomes.flatMap((o) => (o.status === 'rejected' ? [describeError(o.reason)] : []));
}

/** The tap's refusals for conflicts since its last take: cancelled transactions, cancelled snapshots, refused single writes. */
function conflictsOf(counts: CallCounts): { transactions: number; reads: number; writes: number } {
  return { transactions: counts.conflicts.gateway ?? 0, reads: counts.conflictedReads.gateway ?? 0, writes: counts.conflictedWrites.gateway ?? 0 };
}

/** Distinct values with how often each came, so a failure shows the mix at a glance. */
function tally(values: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of values) out[v] = (out[v] ?? 0) + 1;
  return out;
}

interface Case {
  readonly name: string;
  readonly slices: number;
  readonly creditMinor: number;
  readonly limits: AdmissionLimits;
  /** How many of the 200 fit, and the one refusal the rest get. */
  readonly fits: number;
  readonly refusal: string;
}

const CASES: readonly Case[] = [
  { name: 'a balance covering exactly 37, over 8 slices', slices: 8, creditMinor: 37, limits: OPEN, fits: 37, refusal: 'insufficient_credit' },
  { name: "a balance covering exactly 37, on 1 slice (today's single-item ledger)", slices: 1, creditMinor: 37, limits: OPEN, fits: 37, refusal: 'insufficient_credit' },
  { name: 'a key rate of 37 a minute, over 8 slices', slices: 8, creditMinor: 1000, limits: { ...OPEN, keyRatePerMinute: 37 }, fits: 37, refusal: 'rate_limit_exceeded' },
  {
    name: 'a workspace monthly limit of 37, over 8 slices',
    slices: 8,
    creditMinor: 1000,
    limits: { ...OPEN, workspaceLimitMicros: 37 * MICROS_PER_MINOR },
    fits: 37,
    refusal: 'workspace_limit_exceeded',
  },
];

describe('ledger races through DynamoDB transaction conflicts (the tap cancels as DynamoDB would)', () => {
  it.each(CASES)('200 concurrent requests against $name: exactly $fits, the rest refused $refusal, all settled back', async (c) => {
    const ws = await workspace(c.creditMinor, c.slices);
    const ledger = new DynamoLedger(wire, ledgerTables());
    // Spread credit and headroom over the slices in the minute before, one admission at a time.
    if (c.slices > 1) await warm(ledger, request, ws, c.limits);
    tap.take();

    const { admitted, refused, errors } = await race(ledger, Array.from({ length: 200 }, () => request(ws, MICROS_PER_MINOR, { limits: c.limits })));
    const met = conflictsOf(tap.take().counts);
    console.log(`${c.name}: admitted ${admitted.length}, refused ${JSON.stringify(tally(refused))}, errors ${JSON.stringify(tally(errors))}; conflicts at the tap ${JSON.stringify(met)}`);

    // One assertion, so that a failure shows what was thrown, admitted and refused together.
    expect({ errors: tally(errors), admitted: admitted.length, refused: tally(refused) }).toEqual({ errors: {}, admitted: c.fits, refused: { [c.refusal]: 200 - c.fits } });
    // The race really met DynamoDB's conflicts: without them this case proves no more than the other suites.
    expect(met.transactions + met.reads + met.writes).toBeGreaterThan(0);

    // After the race, before any settlement: everything admitted is held, nothing lost or made.
    const mid = await readBalance(tables.doc, ledgerTables(), ws, NOW);
    expect(mid.heldMicros).toBe(c.fits * MICROS_PER_MINOR);
    expect(mid.availableMicros + mid.heldMicros + mid.spentMicros).toBe(c.creditMinor * MICROS_PER_MINOR);

    // Settled at once (through the same conflicts), half of them below their hold: the holds all come back.
    const charge = (i: number): number => (i % 2 === 0 ? 400_000 : MICROS_PER_MINOR);
    expect(await settleAll(ledger, admitted, charge)).toEqual([]);
    await expectSettledInvariant(ws, c.creditMinor * MICROS_PER_MINOR);
    const spent = admitted.reduce((acc, _h, i) => acc + charge(i), 0);
    expect((await readBalance(tables.doc, ledgerTables(), ws, NOW)).spentMicros).toBe(spent);
  });
});
