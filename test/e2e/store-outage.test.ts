/**
 * The store stops answering (issue 14, item 6). The gateway runs on a DynamoDB Local of this file's
 * own, which is paused with SIGSTOP (by its own PID: the kernel still accepts connections, nothing
 * answers) or stopped (connections refused) and then resumed or restarted on the same data:
 * - a request is refused `503 balance_unavailable` within the store-call budget (DynamoWire's
 *   10 s), not held to the function's timeout and never a 500;
 * - once the store answers again, serving resumes by itself;
 * - a settlement that could not be written is completed by the sweeper: one usage row, nothing
 *   held, nothing lost or charged twice.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type DynamoLocal, startDynamoLocal } from '../../local/dynamo-local';
import { DEFAULT_CALL_BUDGET_MS } from '../../lambdas/adapters/dynamo-wire';
import { DynamoLedger } from '../../lambdas/adapters/dynamo-ledger';
import { sweep } from '../../lambdas/sweeper/sweep';
import { tableName } from '../../lambdas/shared/schema';
import { startStack, expectInvariant, type TestStack } from '../support/stack';
import { expectApiError } from '../support/e2e';

jest.setTimeout(90_000);

let db: DynamoLocal;
let dataDir: string;
let stack: TestStack;
let paused = false;

const REQUEST_LIMIT_MS = 6_000;

beforeAll(async () => {
  dataDir = mkdtempSync(path.join(tmpdir(), 'sluice-outage-'));
  // This file's own instance, for half a minute: C1 only starts it (and starts it again) on half the CPU.
  db = await startDynamoLocal({ dataDir, readyTimeoutMs: 60_000, jit: 'quick' });
  stack = await startStack({
    dynamoEndpoint: db.endpoint,
    env: {
      // The catalog stays cached (as it mostly is when deployed); keys and the ledger go to the store.
      SLUICE_CATALOG_CACHE_TTL_MS: '600000',
      SLUICE_REQUEST_LIMIT_MS: String(REQUEST_LIMIT_MS),
      SLUICE_HOLD_GRACE_MS: '0',
    },
  });
});

afterAll(async () => {
  if (paused) process.kill(db.pid, 'SIGCONT');
  await stack?.close();
  await db?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

const ask = () => stack.client().chat.completions.create({ model: 'local/sim-small', messages: [{ role: 'user', content: 'hello' }] });
const askStream = () => stack.client().chat.completions.create({ model: 'local/sim-small', messages: [{ role: 'user', content: 'hello' }], stream: true });

it('paused (SIGSTOP): 503 balance_unavailable within the call budget, then serving resumes by itself', async () => {
  await ask();
  await stack.settled();
  const before = await stack.balance();

  process.kill(db.pid, 'SIGSTOP');
  paused = true;
  const waits: number[] = [];
  try {
    for (let i = 0; i < 1; i += 1) {
      const started = Date.now();
      await expectApiError(ask(), 503, 'balance_unavailable', 'server_error', null);
      waits.push(Date.now() - started);
    }
  } finally {
    process.kill(db.pid, 'SIGCONT');
    paused = false;
  }
  // Bounded: one store call's budget and a little; not the 540 s request limit, not a hang.
  for (const w of waits) expect(w).toBeLessThan(DEFAULT_CALL_BUDGET_MS + 2_000);
  expect(stack.sim.recorded.filter((r) => r.path === '/v1/chat/completions')).toHaveLength(1);

  // The store answers again: the very next request is served, with no restart of anything.
  const reply = await ask();
  expect(reply.choices[0]?.message.content).toBeTruthy();
  await stack.settled();
  const after = await stack.balance();
  expectInvariant(after);
  expect(after.heldMicros).toBe(0);
  expect(after.spentMicros).toBeGreaterThan(before.spentMicros);
  // One row per admitted request: the two refusals held nothing and left none.
  expect(await stack.usageRows()).toHaveLength(2);
  process.stdout.write(`store paused: balance_unavailable after ${waits.join(' / ')} ms\n`);
});

it('refusing connections: 503 at once; a settlement that could not be written is completed by the sweeper', async () => {
  const rowsBefore = (await stack.usageRows()).length;
  stack.sim.script('sim-small', [{ kind: 'ok', chunkDelayMs: 150, completionTokens: 12 }]);
  const stream = await askStream();
  const iterator = stream[Symbol.asyncIterator]();
  await iterator.next(); // admitted and streaming

  // The store goes away mid-stream; the stream still ends, its settlement cannot be written.
  const port = db.port;
  await db.stop();
  const started = Date.now();
  await expectApiError(ask(), 503, 'balance_unavailable', 'server_error', null);
  const refusedAfter = Date.now() - started;
  for (let r = await iterator.next(); r.done !== true; r = await iterator.next()) {
    // drain to the end
  }
  // Until the gateway's settlement has failed: its line is written once the ledger's settle has
  // given up (every retry within the budget spent), and nothing of the request writes after it.
  // At most twice the budget, the fixed wait this replaces.
  const logged: string[] = [];
  const quiet = jest.spyOn(console, 'error').mockImplementation((line: unknown) => {
    logged.push(String(line));
  });
  try {
    const settleFailed = (): boolean => logged.some((l) => l.includes('"phase":"settle"'));
    for (const until = Date.now() + 2 * DEFAULT_CALL_BUDGET_MS; !settleFailed() && Date.now() < until; ) await new Promise((r) => setTimeout(r, 100));
  } finally {
    quiet.mockRestore();
  }
  // The failure is logged by kind, never with a body.
  expect(logged.some((l) => l.includes('"phase":"settle"'))).toBe(true);
  expect(logged.join('\n')).not.toContain('hello');

  db = await startDynamoLocal({ dataDir, port, readyTimeoutMs: 60_000, jit: 'quick' });
  const held = await stack.balance();
  expect(held.heldMicros).toBeGreaterThan(0); // the hold is still there: nothing was lost
  expectInvariant(held);

  // The sweeper settles it once its expiry (admission + request limit + grace) has passed.
  const t = (name: Parameters<typeof tableName>[1]): string => tableName(stack.tables.prefix, name);
  const ledger = new DynamoLedger(stack.tables.doc, { ledger: t('ledger'), usage: t('usage') });
  const now = Date.now() + REQUEST_LIMIT_MS + 1_000;
  const first = await sweep({ doc: stack.tables.doc, usageTable: t('usage'), ledger, stage: 'local', writeLine: () => undefined }, now);
  expect(first.swept).toBe(1);
  const again = await sweep({ doc: stack.tables.doc, usageTable: t('usage'), ledger, stage: 'local', writeLine: () => undefined }, now);
  expect(again.swept).toBe(0); // nothing settled twice

  const after = await stack.balance();
  expectInvariant(after);
  expect(after.heldMicros).toBe(0);
  const rows = await stack.usageRows();
  expect(rows).toHaveLength(rowsBefore + 1);
  const row = rows.find((r) => r.outcome === 'swept');
  expect(row).toBeDefined();
  expect(row!.chargeMicros).toBeLessThanOrEqual(row!.holdMicros);
  expect(after.spentMicros - held.spentMicros).toBe(row!.chargeMicros);

  // And serving resumed on the restarted store.
  await ask();
  await stack.settled();
  expectInvariant(await stack.balance());
  process.stdout.write(`store refusing connections: balance_unavailable after ${refusedAfter} ms\n`);
});
