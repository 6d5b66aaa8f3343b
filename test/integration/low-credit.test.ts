/**
 * The low-credit notice on DynamoDB Local, with the real ledger settling real holds: however
 * many settlements happen under the threshold, and however the notifier's runs overlap, one
 * notice goes out per crossing; a top-up above the threshold re-arms it, and the next fall below
 * is a second crossing with a notice of its own.
 */
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { DynamoLedger } from '../../lambdas/adapters/dynamo-ledger';
import type { AdmissionLimits, Settlement } from '../../lambdas/gateway/ports';
import { checkLowCredit, type CheckDeps } from '../../lambdas/notifier/check';
import { setLedgerSlices } from '../../lambdas/store';
import { DynamoNoticeStore, LOW_CREDIT_SK, availableCredit } from '../../lambdas/store/notices';
import type { LowCreditNotice } from '../../lambdas/notifier/ports';
import { tableName } from '../../lambdas/shared/schema';
import { addCredit, createWorkspace, type AdminContext } from '../../local/ops';
import { testTables, type TestTables } from '../support/dynamo';
import { testDate } from '../support/clock';

let tables: TestTables;
let ledger: DynamoLedger;
let admin: AdminContext;
const t = (name: Parameters<typeof tableName>[1]): string => tableName(tables.prefix, name);
const ledgerTables = (): { ledger: string; usage: string } => ({ ledger: t('ledger'), usage: t('usage') });

beforeAll(async () => {
  tables = await testTables();
  ledger = new DynamoLedger(tables.doc, { ledger: t('ledger'), usage: t('usage') });
  admin = { doc: tables.doc, tablePrefix: tables.prefix, stage: 'local' };
});

afterAll(() => {
  tables.client.destroy();
});

// In the tests' future year: DynamoDB Local's TTL sweep runs on the real clock (see support/clock).
const NOW = testDate(10, 23, 12, 0, 0);
const OPEN: AdmissionLimits = { keyWindow: 'monthly', spendRateCapMicros: 1e15, keyRatePerMinute: 1e9 };
let seq = 0;

/** One request's whole money path: admit a hold, settle it for `chargeMicros`. */
async function settleOne(workspaceId: string, chargeMicros: number): Promise<void> {
  seq += 1;
  const out = await ledger.admit({
    holdId: `req_lc${seq}`,
    workspaceId,
    keyId: 'key_a',
    family: 'chat_completions',
    requestedModel: 'local/sim-small',
    amountMicros: chargeMicros * 2,
    inputMicros: chargeMicros,
    byok: false,
    limits: OPEN,
    now: NOW + seq,
    expiresAt: NOW + seq + 600_000,
  });
  if (!out.admitted) throw new Error(`admission refused: ${out.refusal.kind}`);
  const settlement: Settlement = {
    counts: { inputTokens: 10, cachedInputTokens: 0, outputTokens: 5, reasoningTokens: 0 },
    chargeMicros,
    stream: false,
    status: 200,
    outcome: 'ok',
    attempts: 1,
    now: NOW + seq + 500,
  };
  await ledger.settle(out.hold, settlement);
}

async function setThreshold(workspaceId: string, micros: number): Promise<void> {
  // The management API owns this field; the test writes it directly, as the brief for the notifier says.
  await tables.doc.send(
    new UpdateCommand({ TableName: t('workspaces'), Key: { pk: workspaceId, sk: 'META' }, UpdateExpression: 'SET lowCreditThresholdMicros = :t', ExpressionAttributeValues: { ':t': micros } }),
  );
}

async function available(workspaceId: string): Promise<number> {
  const out = await tables.doc.send(new GetCommand({ TableName: t('ledger'), Key: { pk: `WS#${workspaceId}`, sk: 'BALANCE' }, ConsistentRead: true }));
  const i = out.Item ?? {};
  expect(i.creditedMicros).toBe(Number(i.availableMicros) + Number(i.heldMicros) + Number(i.spentMicros));
  return Number(i.availableMicros);
}

describe('low-credit notice on DynamoDB Local', () => {
  it('fires once per crossing, not once per settlement or per overlapping run', async () => {
    const { workspaceId } = await createWorkspace(admin, { name: 'low-credit' });
    await addCredit(admin, { workspaceId, minor: 100 }); // 100,000,000 micros
    await setThreshold(workspaceId, 99_500_000);
    // Neighbours: one without a threshold, one with plenty of credit; neither is ever notified.
    const quiet = await createWorkspace(admin, { name: 'no-threshold' });
    await addCredit(admin, { workspaceId: quiet.workspaceId, minor: 1 });
    const rich = await createWorkspace(admin, { name: 'rich' });
    await addCredit(admin, { workspaceId: rich.workspaceId, minor: 1_000 });
    await setThreshold(rich.workspaceId, 1_000_000);

    const published: LowCreditNotice[] = [];
    let ids = 0;
    const deps: CheckDeps = {
      store: new DynamoNoticeStore(tables.doc, t('workspaces')),
      readBalance: availableCredit(tables.doc, ledgerTables()),
      publisher: { publish: async (n) => void published.push(n) },
      newId: () => `lc_${(ids += 1)}`,
      stage: 'local',
      writeLine: () => undefined,
    };
    // Two runs at once after every settlement: the conditional write lets only one announce.
    const run = async (): Promise<void> => {
      const results = await Promise.all([checkLowCredit(deps, NOW), checkLowCredit(deps, NOW)]);
      for (const r of results) expect(r.failed).toBe(0);
    };

    await run();
    expect(published).toHaveLength(0);

    // 50 settlements, every one of them leaving the balance under the threshold.
    await settleOne(workspaceId, 1_000_000);
    await run();
    for (let i = 1; i < 50; i += 1) {
      await settleOne(workspaceId, 100_000);
      expect(await available(workspaceId)).toBeLessThan(99_500_000);
      await run();
    }
    expect(await available(workspaceId)).toBe(100_000_000 - 1_000_000 - 49 * 100_000);
    expect(published).toHaveLength(1);
    expect(published[0]).toMatchObject({ workspaceId, thresholdMicros: 99_500_000, availableMicros: 99_000_000 });

    // A top-up above the threshold re-arms without a notice.
    await addCredit(admin, { workspaceId, minor: 10 });
    expect(await available(workspaceId)).toBeGreaterThan(99_500_000);
    await run();
    expect(published).toHaveLength(1);
    const rearmed = await tables.doc.send(new GetCommand({ TableName: t('workspaces'), Key: { pk: workspaceId, sk: LOW_CREDIT_SK }, ConsistentRead: true }));
    expect(rearmed.Item).toBeUndefined();

    // Falling below again is a second crossing: one more notice, and only one.
    await settleOne(workspaceId, 5_000_000);
    await run();
    await run();
    expect(published).toHaveLength(2);
    expect(published[1]?.crossingId).not.toBe(published[0]?.crossingId);
    expect(published.every((n) => n.workspaceId === workspaceId)).toBe(true);
    const recorded = await tables.doc.send(new GetCommand({ TableName: t('workspaces'), Key: { pk: workspaceId, sk: LOW_CREDIT_SK }, ConsistentRead: true }));
    expect(recorded.Item).toMatchObject({ crossingId: published[1]?.crossingId, thresholdMicros: 99_500_000 });
  });

  it('judges a workspace split into slices on its whole balance, not on one slice', async () => {
    const { workspaceId } = await createWorkspace(admin, { name: 'sliced' });
    await addCredit(admin, { workspaceId, minor: 100 }); // 100,000,000 micros
    await setLedgerSlices(tables.doc, ledgerTables(), workspaceId, 4);
    // Credit lands on slice 0; requests admitted on the other slices pull headroom to them.
    for (let i = 0; i < 12; i += 1) await settleOne(workspaceId, 100_000);
    const sliceZero = await tables.doc.send(new GetCommand({ TableName: t('ledger'), Key: { pk: `WS#${workspaceId}`, sk: 'BALANCE' }, ConsistentRead: true }));
    const zero = Number(sliceZero.Item?.availableMicros);
    const whole = await availableCredit(tables.doc, ledgerTables())(workspaceId);
    expect(whole).toBe(100_000_000 - 12 * 100_000);
    // The case that matters: slice 0 alone is below a threshold the whole balance is above.
    expect(zero).toBeLessThan(whole as number);
    await setThreshold(workspaceId, zero + 1);

    const published: LowCreditNotice[] = [];
    const deps: CheckDeps = {
      store: new DynamoNoticeStore(tables.doc, t('workspaces')),
      readBalance: availableCredit(tables.doc, ledgerTables()),
      publisher: { publish: async (n) => void published.push(n) },
      newId: () => 'lc_sliced',
      stage: 'local',
      writeLine: () => undefined,
    };
    await checkLowCredit(deps, NOW);
    expect(published.filter((n) => n.workspaceId === workspaceId)).toHaveLength(0);
  });
});
