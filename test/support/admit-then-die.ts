/**
 * A request whose function dies: admits one hold through the real ledger against DynamoDB Local,
 * prints `admitted`, then exits with code 9 before it can settle, the way a Lambda killed
 * mid-request leaves its hold. Run by the sweeper's integration test with `npx tsx`.
 *
 * Environment: SLUICE_DYNAMODB_ENDPOINT, SLUICE_TABLE_PREFIX, and DIE_WORKSPACE, DIE_KEY, DIE_HOLD,
 * DIE_AMOUNT_MICROS, DIE_INPUT_MICROS, DIE_EXPIRES_IN_MS.
 */
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { DynamoLedger } from '../../lambdas/adapters/dynamo-ledger';
import { tableName } from '../../lambdas/shared/schema';
import { makeDynamoClient } from '../../local/tables';

function need(name: string): string {
  const v = process.env[name];
  if (v === undefined || v === '') throw new Error(`${name} is not set`);
  return v;
}

async function main(): Promise<void> {
  const prefix = need('SLUICE_TABLE_PREFIX');
  const doc = DynamoDBDocumentClient.from(makeDynamoClient(need('SLUICE_DYNAMODB_ENDPOINT')), { marshallOptions: { removeUndefinedValues: true } });
  const ledger = new DynamoLedger(doc, { ledger: tableName(prefix, 'ledger'), usage: tableName(prefix, 'usage') });
  const now = Date.now();
  const out = await ledger.admit({
    holdId: need('DIE_HOLD'),
    workspaceId: need('DIE_WORKSPACE'),
    keyId: need('DIE_KEY'),
    family: 'chat_completions',
    requestedModel: 'local/echo',
    amountMicros: Number(need('DIE_AMOUNT_MICROS')),
    inputMicros: Number(need('DIE_INPUT_MICROS')),
    byok: false,
    limits: { keyWindow: 'monthly', spendRateCapMicros: 1e15, keyRatePerMinute: 1e6 },
    now,
    expiresAt: now + Number(need('DIE_EXPIRES_IN_MS')),
  });
  if (!out.admitted) {
    process.stdout.write(`refused ${out.refusal.kind}\n`);
    process.exit(2);
  }
  process.stdout.write('admitted\n', () => {
    // Dies here, hold open, as a function killed mid-request does: no settle, no cleanup.
    process.exit(9);
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
