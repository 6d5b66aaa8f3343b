/**
 * Per-file DynamoDB tables for integration tests, in the run's shared DynamoDB Local (started by
 * the global setup). Every call gets a fresh table prefix, so test files and tests that want a
 * clean slate never see each other's items.
 */
import { randomBytes } from 'node:crypto';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { ensureTables, makeDynamoClient } from '../../local/tables';
import { TEST_ENDPOINT_ENV } from './global-setup';

export { freePort } from '../../local/free-port';

/** A set of Sluice tables under their own prefix. Call `client.destroy()` when done. */
export interface TestTables {
  readonly client: DynamoDBClient;
  /** Document client over `client` (marshalls plain JavaScript values; removes undefined). */
  readonly doc: DynamoDBDocumentClient;
  /** Table-name prefix, e.g. `t3f9a1c2e-`; pass it as the stage's table prefix. */
  readonly prefix: string;
  readonly endpoint: string;
}

/** The shared DynamoDB Local's endpoint; throws outside a jest run with the global setup. */
export function testEndpoint(): string {
  const endpoint = process.env[TEST_ENDPOINT_ENV];
  if (endpoint === undefined || endpoint === '') {
    throw new Error(`${TEST_ENDPOINT_ENV} is not set: run the tests through jest (its global setup starts DynamoDB Local)`);
  }
  return endpoint;
}

/** Creates every Sluice table under a new unique prefix (in the run's DynamoDB Local unless told) and returns clients for them. */
export async function testTables(endpoint: string = testEndpoint()): Promise<TestTables> {
  const prefix = `t${randomBytes(4).toString('hex')}-`;
  const client = makeDynamoClient(endpoint);
  try {
    await ensureTables(client, prefix);
  } catch (err) {
    client.destroy();
    throw err;
  }
  const doc = DynamoDBDocumentClient.from(client, { marshallOptions: { removeUndefinedValues: true } });
  return { client, doc, prefix, endpoint };
}

/**
 * Store call limits for the ledger's race suites: they prove exactness under 200 concurrent
 * admissions in one process on a shared machine, not latency, so a call is given a minute where a
 * deployed request gives it 10 s (docs/robustness.md). DynamoDB Local, starved of CPU, answers some
 * transactions with a 500 ("timed out ... waiting for a lock. This request will succeed in actual
 * DynamoDB API"), without applying them; a call gets ten attempts (the deployed client's four,
 * with the same client request token), and at most 32 calls are in flight at once (Local runs
 * transactions one at a time behind that lock; the 200 admissions still interleave freely), so
 * such a run still tests exactness, not the machine.
 */
export const RACE_LIMITS = { attemptTimeoutMs: 30_000, callBudgetMs: 60_000, maxAttempts: 10, maxSockets: 32 } as const;
