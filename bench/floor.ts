/**
 * The floor: the admission transaction itself, from the benchmark's own process, on its own
 * workspace, over the client the gateway uses (DynamoWire), so the floor carries no client
 * overhead the gateway does not pay. Each latency target meets its own phase's floor.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { DynamoLedger } from '../lambdas/adapters/dynamo-ledger';
import { wireClient } from '../lambdas/adapters/dynamo-client';
import type { AdmissionLimits, AdmitRequest } from '../lambdas/gateway/ports';
import type { RuntimeConfig } from '../lambdas/shared/config';
import { tableName } from '../lambdas/shared/schema';
import { countRoundTrips, type TripCounts } from './round-trips';
import { MODEL_SHORT, TABLE_PREFIX, type Caller } from './phases/requests';

/** Something to undo at the end of the run (the stack's `Cleanup`). */
interface Undo {
  add(name: string, run: () => Promise<void>): void;
}

/** The floor's admission's limits: none but the defaults every admission carries (a phase whose workspace sets more passes them, so the floor writes the items its requests do). */
export const FLOOR_LIMITS: AdmissionLimits = { keyWindow: 'monthly', spendRateCapMicros: 5_000_000_000, keyRatePerMinute: 100_000_000 };

/** The ledger's three tables under the benchmark's prefix. */
export function benchTables(): { ledger: string; usage: string } {
  return { ledger: tableName(TABLE_PREFIX, 'ledger'), usage: tableName(TABLE_PREFIX, 'usage') };
}

/** The floor's ledger over DynamoWire, and the samples it keeps per phase. */
export class Floor {
  private readonly trips: TripCounts;
  private readonly ledger: DynamoLedger;
  /** Samples of the phase running now; `takeSamples` hands them over and starts afresh. */
  private samples: number[] = [];
  /** Client-side CPU of each kept call that took one round trip, over every phase. */
  readonly cpuUs: number[] = [];
  /** Round trips of the kept calls that were retried (left out of the samples). */
  readonly retries: number[] = [];

  constructor(
    config: RuntimeConfig,
    doc: DynamoDBDocumentClient,
    private readonly caller: Caller,
    cleanup: Undo,
    /** The stage's tables and their prefix (the main run's by default; the two-region run names its own). */
    tables: { readonly prefix: string; readonly ledger: string; readonly usage: string } = { prefix: TABLE_PREFIX, ...benchTables() },
    /** The limits its admissions carry: the phase's requests' own, so the floor's transaction writes the items theirs do. */
    private readonly limits: AdmissionLimits = FLOOR_LIMITS,
  ) {
    const wire = wireClient(config, doc);
    cleanup.add('wire client', async () => wire.destroy());
    this.trips = countRoundTrips([wire], tables.prefix);
    this.ledger = new DynamoLedger(wire, { ledger: tables.ledger, usage: tables.usage });
  }

  /** One admission on the floor's own workspace (the same small hold every time). */
  admission(now: number): AdmitRequest {
    return {
      holdId: `req_${randomBytes(12).toString('hex')}`,
      workspaceId: this.caller.workspaceId,
      keyId: this.caller.keyId,
      family: 'chat_completions',
      requestedModel: `local/${MODEL_SHORT}`,
      amountMicros: 3_000,
      inputMicros: 1_000,
      byok: false,
      limits: this.limits,
      now,
      expiresAt: now + 600_000,
    };
  }

  /** One admission and its settlement; `keep` records its latency and CPU. */
  async transaction(keep: boolean): Promise<void> {
    const now = Date.now();
    const before = this.trips.ledger;
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    const outcome = await this.ledger.admit(this.admission(now));
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(c0);
    if (!outcome.admitted) throw new Error(`the floor's admission was refused: ${outcome.refusal.kind}`);
    const trips = this.trips.ledger - before;
    if (keep) {
      if (trips === 1) {
        this.samples.push(ms);
        // Nothing else runs in this process meanwhile: this is the client-side CPU of one call.
        this.cpuUs.push(cpu.user + cpu.system);
      } else this.retries.push(trips);
    }
    await this.ledger.settle(outcome.hold, { counts: undefined, chargeMicros: 1_000, stream: false, status: 200, outcome: 'ok', attempts: 1, now: Date.now() });
  }

  /** The latency samples kept since the last call. */
  takeSamples(): number[] {
    const taken = this.samples;
    this.samples = [];
    return taken;
  }
}
