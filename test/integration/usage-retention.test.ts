/**
 * Usage retention on DynamoDB Local: with a retention configured, every usage row the ledger
 * writes carries a `ttl` that many days after settlement (the usage table's TTL attribute, from
 * the same schema CDK deploys); without one, rows carry none and are kept. The configuration
 * that feeds it is read and validated once, at cold start.
 */
import { usageRows } from '../../lambdas/store/balance';
import { DynamoLedger } from '../../lambdas/adapters/dynamo-ledger';
import type { AdmissionLimits } from '../../lambdas/gateway/ports';
import { ENV, loadConfig } from '../../lambdas/shared/config';
import { TABLES, tableName } from '../../lambdas/shared/schema';
import { addCredit, createWorkspace, type AdminContext } from '../../local/ops';
import { testTables, type TestTables } from '../support/dynamo';
import { testDate } from '../support/clock';

let tables: TestTables;
let admin: AdminContext;
const t = (name: Parameters<typeof tableName>[1]): string => tableName(tables.prefix, name);

beforeAll(async () => {
  tables = await testTables();
  admin = { doc: tables.doc, tablePrefix: tables.prefix, stage: 'local' };
});

afterAll(() => {
  tables.client.destroy();
});

// In the tests' future year: DynamoDB Local's TTL sweep runs on the real clock and would delete a
// row whose ttl had passed before the test reads it back (see support/clock).
const NOW = testDate(10, 23, 12, 0, 0, 500);
const OPEN: AdmissionLimits = { keyWindow: 'monthly', spendRateCapMicros: 1e15, keyRatePerMinute: 1e9 };

async function usageRowAfterOneRequest(usageRetentionDays: number | undefined): Promise<Record<string, unknown>> {
  const ledger = new DynamoLedger(tables.doc, { ledger: t('ledger'), usage: t('usage'), ...(usageRetentionDays === undefined ? {} : { usageRetentionDays }) });
  const { workspaceId } = await createWorkspace(admin, { name: 'retention' });
  await addCredit(admin, { workspaceId, minor: 10 });
  const out = await ledger.admit({
    holdId: `req_ret_${usageRetentionDays ?? 'none'}`,
    workspaceId,
    keyId: 'key_a',
    family: 'chat_completions',
    requestedModel: 'local/sim-small',
    amountMicros: 2_000_000,
    inputMicros: 500_000,
    byok: false,
    limits: OPEN,
    now: NOW,
    expiresAt: NOW + 600_000,
  });
  if (!out.admitted) throw new Error('not admitted');
  await ledger.settle(out.hold, { counts: { inputTokens: 3, cachedInputTokens: 0, outputTokens: 2, reasoningTokens: 0 }, chargeMicros: 1_000, stream: false, status: 200, outcome: 'ok', attempts: 1, now: NOW + 1_000 });
  // A workspace's rows are spread over shards; the store reads them all.
  const rows = (await usageRows(tables.doc, t('usage'), workspaceId)) as unknown as Record<string, unknown>[];
  expect(rows).toHaveLength(1);
  return rows[0] ?? {};
}

describe('usage retention', () => {
  it('is the usage table\'s TTL attribute in the schema both CDK and local mode build from', () => {
    expect(TABLES.usage.ttlAttribute).toBe('ttl');
  });

  it('stamps each usage row with a ttl the retention after settlement', async () => {
    const row = await usageRowAfterOneRequest(30);
    expect(row.ttl).toBe(Math.floor((NOW + 1_000) / 1000) + 30 * 86_400);
    expect(row.chargeMicros).toBe(1_000);
  });

  it('keeps rows for good when no retention is configured', async () => {
    const row = await usageRowAfterOneRequest(undefined);
    expect(row.ttl).toBeUndefined();
  });

  it.each<[string | undefined, number | undefined]>([
    [undefined, undefined],
    ['', undefined],
    ['30', 30],
    ['400', 400],
  ])('reads %j from the environment as %p', (raw, days) => {
    const env: NodeJS.ProcessEnv = raw === undefined ? {} : { [ENV.usageRetentionDays]: raw };
    expect(loadConfig(env).usageRetentionDays).toBe(days);
  });

  it.each(['0', '-1', '1.5', 'thirty'])('refuses %j at cold start', (raw) => {
    expect(() => loadConfig({ [ENV.usageRetentionDays]: raw })).toThrow(/SLUICE_USAGE_RETENTION_DAYS/);
  });
});
