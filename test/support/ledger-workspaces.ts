/**
 * What the sliced-ledger race suites do to their own tables: make a workspace with some credit
 * over a given number of slices, check `credited = available + held + spent` summed over every
 * slice with every hold settled, and spread a fresh workspace over its slices before a race. The
 * tables are read through a getter, since a suite creates them in its `beforeAll`.
 */
import { tableName } from '../../lambdas/shared/schema';
import type { AdmissionLimits, AdmitRequest } from '../../lambdas/gateway/ports';
import { readBalance, setLedgerSlices, type DynamoLedger, type LedgerTables } from '../../lambdas/store';
import { addCredit, createWorkspace } from '../../local/ops';
import type { TestTables } from './dynamo';
import { NOW, settlement } from './ledger-fixtures';

/** The helpers of one suite, over the tables its getter returns. */
export interface LedgerWorkspaces {
  /** The ledger's three tables under the suite's prefix. */
  ledgerTables(): LedgerTables;
  /** A workspace with `creditMinor` of credit and `slices` ledger slices; resolves to its id. */
  workspace(creditMinor: number, slices: number): Promise<string>;
  /** The invariant summed over every slice, with every hold settled, and the credit as given. */
  expectSettledInvariant(workspaceId: string, creditedMicros: number): Promise<void>;
}

/** The helpers over `tables()` (called when a helper runs, not now). */
export function ledgerWorkspaces(tables: () => TestTables): LedgerWorkspaces {
  const ledgerTables = (): LedgerTables => {
    const { prefix } = tables();
    return { ledger: tableName(prefix, 'ledger'), usage: tableName(prefix, 'usage') };
  };
  return {
    ledgerTables,
    async workspace(creditMinor, slices) {
      const { doc, prefix } = tables();
      const admin = { doc, tablePrefix: prefix, stage: 'local' };
      const ws = await createWorkspace(admin, { name: 'slices-test' });
      if (creditMinor > 0) await addCredit(admin, { workspaceId: ws.workspaceId, minor: creditMinor });
      await setLedgerSlices(doc, ledgerTables(), ws.workspaceId, slices);
      return ws.workspaceId;
    },
    async expectSettledInvariant(workspaceId, creditedMicros) {
      const b = await readBalance(tables().doc, ledgerTables(), workspaceId, NOW);
      expect(b.creditedMicros).toBe(creditedMicros);
      expect(b.availableMicros + b.heldMicros + b.spentMicros).toBe(b.creditedMicros);
      expect(b.heldMicros).toBe(0);
    },
  };
}

/**
 * Spreads a fresh workspace before a race: sequential admissions of one micro-unit each (charged
 * nothing) teach the process the slice count and pull credit and the key's headroom onto every
 * slice, in the minute before NOW, so the race itself starts on every slice at once and finds the
 * minute's request count untouched.
 */
export async function warm(
  ledger: DynamoLedger,
  request: (workspaceId: string, amountMicros: number, over?: Partial<AdmitRequest>) => AdmitRequest,
  workspaceId: string,
  limits: AdmissionLimits,
): Promise<void> {
  for (let i = 0; i < 24; i += 1) {
    const out = await ledger.admit(request(workspaceId, 1, { limits, now: NOW - 60_000 }));
    if (out.admitted) await ledger.settle(out.hold, settlement(0, NOW - 59_000));
  }
}
