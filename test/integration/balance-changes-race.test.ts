/**
 * Issue 22 item 11, on DynamoDB Local with real concurrency: top-ups and adjustments sent at the
 * same moment each answer the balance their own change left, on one slice and on a workspace
 * whose credit is spread over eight. Read in the order they landed, the answers form one chain
 * from the starting balance to the final one (`credited` moves by each change and nothing else);
 * answering the balance read after the change, as before, gives several the same final figure.
 */
import { wireClient } from '../../lambdas/adapters/dynamo-client';
import type { DynamoWire } from '../../lambdas/adapters/dynamo-wire';
import { MICROS_PER_MINOR } from '../../lambdas/core/pricing';
import { DynamoLedger } from '../../lambdas/store';
import { DynamoBalancePort, type BalanceView } from '../../lambdas/store/balance-port';
import { testTables, type TestTables, RACE_LIMITS } from '../support/dynamo';
import { OPEN, requestsTagged } from '../support/ledger-fixtures';
import { ledgerWorkspaces, warm } from '../support/ledger-workspaces';

let tables: TestTables;
let wire: DynamoWire;

beforeAll(async () => {
  tables = await testTables();
  wire = wireClient({ dynamoEndpoint: tables.endpoint }, tables.doc, process.env, RACE_LIMITS);
});

afterAll(() => {
  wire.destroy();
  tables.client.destroy();
});

jest.setTimeout(180_000);

const request = requestsTagged('b');
const { ledgerTables, workspace, expectSettledInvariant } = ledgerWorkspaces(() => tables);

/**
 * The answers in the order their changes landed, checked to be one chain: each starts where the
 * one before left `credited` (the first where the workspace started) and moves it by its own
 * change; with changes all of one sign and all different, the order is the sort by `credited`.
 */
function expectChain(startCreditedMicros: number, answers: readonly { delta: number; balance: BalanceView }[]): void {
  const rising = answers[0] !== undefined && answers[0].delta > 0;
  const ordered = [...answers].sort((a, b) => (rising ? a.balance.creditedMicros - b.balance.creditedMicros : b.balance.creditedMicros - a.balance.creditedMicros));
  let credited = startCreditedMicros;
  for (const a of ordered) {
    credited += a.delta;
    expect({ delta: a.delta, credited: a.balance.creditedMicros }).toEqual({ delta: a.delta, credited });
    // Nothing else runs here, so what is available is what is credited less what was spent.
    expect(a.balance.availableMicros + a.balance.heldMicros + a.balance.spentMicros).toBe(a.balance.creditedMicros);
    expect(a.balance.heldMicros).toBe(0);
  }
  expect(new Set(answers.map((a) => a.balance.availableMicros)).size).toBe(answers.length);
}

describe('concurrent top-ups and adjustments', () => {
  it.each([1, 8])('over %i slice(s): each answers the balance its own change left, one chain from start to end', async (slices) => {
    const ws = await workspace(10_000, slices);
    if (slices > 1) {
      await warm(new DynamoLedger(wire, ledgerTables()), request, ws, OPEN);
      const spread = await new DynamoLedger(wire, ledgerTables()).readSlices(ws);
      expect(spread.slices.filter((s) => s.availableMicros > 0).length).toBeGreaterThan(1);
    }
    const port = new DynamoBalancePort({ doc: tables.doc, tablePrefix: tables.prefix, stage: 'local' });
    const start = await port.read(ws);
    expect(start.creditedMicros).toBe(10_000 * MICROS_PER_MINOR);

    // Seven adjustments at once, each a different amount taken off (USD 1.00 to 7.00).
    const takes = [1, 2, 3, 4, 5, 6, 7].map((n) => -n * 100 * MICROS_PER_MINOR);
    const adjusted = await Promise.all(
      takes.map(async (delta, i) => ({ delta, balance: (await port.adjust({ workspaceId: ws, deltaMicros: delta, reason: `race ${i}`, who: 'test', requestId: `req_adj_${slices}_${i}` })).balance })),
    );
    expectChain(start.creditedMicros, adjusted);
    const afterAdjust = await port.read(ws);
    expect(afterAdjust.creditedMicros).toBe(start.creditedMicros - 28 * 100 * MICROS_PER_MINOR);
    expect(Math.min(...adjusted.map((a) => a.balance.creditedMicros))).toBe(afterAdjust.creditedMicros);

    // Five top-ups at once, some with references: the same, rising.
    const adds = [1, 2, 3, 4, 5].map((n) => n * 100 * MICROS_PER_MINOR);
    const credited = await Promise.all(
      adds.map(async (micros, i) => {
        const out = await port.credit({ workspaceId: ws, micros, ...(i % 2 === 0 ? { reference: `INV-race-${slices}-${i}` } : {}), who: 'test', requestId: `req_add_${slices}_${i}` });
        expect(out.applied).toBe(true);
        return { delta: micros, balance: out.balance };
      }),
    );
    expectChain(afterAdjust.creditedMicros, credited);
    const end = await port.read(ws);
    expect(Math.max(...credited.map((c) => c.balance.creditedMicros))).toBe(end.creditedMicros);
    // Every change is in the statement once, and the ledger's invariant holds over every slice.
    const statement = await port.statement(ws, 100);
    expect(statement.filter((e) => e.requestId.startsWith(`req_adj_${slices}_`))).toHaveLength(7);
    expect(statement.filter((e) => e.requestId.startsWith(`req_add_${slices}_`))).toHaveLength(5);
    await expectSettledInvariant(ws, end.creditedMicros);
  });
});
