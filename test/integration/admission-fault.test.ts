/**
 * An admission whose outcome the gateway never learns (rule 3: nothing is held or charged for a
 * refusal). The gateway's ledger talks to DynamoDB Local through a wrapper over the real
 * `DynamoWire` that, when told, lets the admission's transaction reach the store and be applied,
 * then throws as a timed-out call does (the reply lost), or throws before sending it (the call truly
 * failed), and can make the store unreachable for everything else for a while. The gateway answers
 * 503 `balance_unavailable` and calls no provider; afterwards the workspace has lost exactly what
 * it was charged (nothing), nothing is held on the slice or in the key's credit-limit window, the
 * request's row is `released` (out of the sweeper's index, never a usage row), and a sweep far in
 * the future finds nothing to charge. Where the release could not be made within the request's
 * budget (the store away that long), the row looks like a request whose function died after its
 * provider call, and the sweeper settles it as one: the hold back, the prompt's bound charged
 * (docs/robustness.md says why that residue is kept).
 */
import { ScanCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { setKeyCreditLimit } from '../../local/ops';
import { DynamoLedger } from '../../lambdas/adapters/dynamo-ledger';
import type { DocumentSender } from '../../lambdas/adapters/dynamo-wire';
import type { Ledger } from '../../lambdas/gateway/ports';
import { tableName } from '../../lambdas/shared/schema';
import { readRequestRow } from '../../lambdas/store/request-rows';
import { sweep } from '../../lambdas/sweeper/sweep';
import { expectApiError } from '../support/e2e';
import { expectInvariant, startStack, type Balance, type TestStack } from '../support/stack';

jest.setTimeout(90_000);

/** How the next admission's transaction fails: after the store applied it, or before it was sent. */
type AdmissionFault = 'applied' | 'not-applied';

/** Short, so the tests that outlast it stay short; long enough that a loaded machine still lets the store come back within it. */
const REQUEST_LIMIT_MS = 8_000;

let stack: TestStack;
let fault: AdmissionFault | undefined;
/** While true, every call but the faulted admission fails as a store that does not answer. */
let storeDown = false;
/** Set with the fault: the store stops answering right after the faulted admission. */
let downAfter = false;
let captured: TransactWriteCommand | undefined;
let inner: Ledger | undefined;

const t = (name: 'ledger' | 'usage'): string => tableName(stack.tables.prefix, name);
const lostReply = (): Error => Object.assign(new Error('the store did not answer within the call budget'), { name: 'TimeoutError' });

/** The admission: the one transaction that puts a request's row. */
function isAdmission(command: unknown): command is TransactWriteCommand {
  return command instanceof TransactWriteCommand && (command.input.TransactItems ?? []).some((item) => item.Put?.TableName === t('usage'));
}

/** The wrapper over the gateway's real client. */
function faulty(wire: DocumentSender): DocumentSender {
  const pass = wire.send.bind(wire) as (command: unknown) => Promise<unknown>;
  const send = async (command: unknown): Promise<unknown> => {
    if (isAdmission(command) && fault !== undefined) {
      const how = fault;
      fault = undefined;
      captured = command;
      if (how === 'applied') await pass(command);
      if (downAfter) storeDown = true;
      throw lostReply();
    }
    if (storeDown) throw lostReply();
    return pass(command);
  };
  return { send } as unknown as DocumentSender;
}

beforeAll(async () => {
  // The gateway's ledger is built once the stack has its tables and client: until then, this stand-in forwards to nothing.
  const late: Ledger = {
    admit: (r) => (inner as Ledger).admit(r),
    settle: (h, s) => (inner as Ledger).settle(h, s),
    extend: (h, x, l, n) => (inner as Ledger).extend(h, x, l, n),
    countRequest: (w, k, r, n) => (inner as Ledger).countRequest(w, k, r, n),
    release: (w, id, n) => (inner as Ledger).release(w, id, n),
  };
  stack = await startStack({ overrides: { ledger: late }, env: { SLUICE_REQUEST_LIMIT_MS: String(REQUEST_LIMIT_MS), SLUICE_HOLD_GRACE_MS: '0' } });
  inner = new DynamoLedger(faulty(stack.wiring.wire), { ledger: t('ledger'), usage: t('usage') });
  // Every limit that has a window of its own: the key's credit limit (the workspace month rides on the slice).
  await setKeyCreditLimit(stack.admin, { workspaceId: stack.workspaceId, keyId: stack.keyId, limitMinor: 50_000, window: 'monthly' });
});

afterAll(async () => {
  await stack?.close();
});

beforeEach(() => {
  fault = undefined;
  storeDown = false;
  downAfter = false;
  captured = undefined;
  stack.sim.reset();
});

const ask = (): Promise<unknown> => stack.client().chat.completions.create({ model: 'local/sim-small', messages: [{ role: 'user', content: 'hello' }] });

/** The key's credit-limit window item (the limit's arming names it by its generation). */
async function keyWindow(): Promise<{ heldMicros: number; settledMicros: number }> {
  const out = await stack.tables.doc.send(new ScanCommand({ TableName: t('ledger'), ConsistentRead: true }));
  const item = (out.Items ?? []).find((i) => i.pk === `KEY#${stack.workspaceId}#${stack.keyId}` && String(i.sk).startsWith('KEYWIN#'));
  if (item === undefined) throw new Error('the key window is not tracked');
  return { heldMicros: Number(item.heldMicros ?? 0), settledMicros: Number(item.settledMicros ?? 0) };
}

/** The request's row once it is released (the release may finish just after the answer): polled, 10 s at most. */
async function releasedRow(id: string): Promise<Record<string, unknown> | undefined> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const row = await readRequestRow(stack.tables.doc, t('usage'), stack.workspaceId, id);
    if (row?.state === 'released' || Date.now() > deadline) return row;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The request id the refusal named. */
async function refusedId(p: Promise<unknown>): Promise<string> {
  const e = await expectApiError(p, 503, 'balance_unavailable', 'server_error', null);
  const id = e.headers?.get('x-sluice-request-id');
  if (typeof id !== 'string') throw new Error('the refusal carries no request id');
  return id;
}

/** What the faults must leave: nothing lost, nothing held, no usage row, no provider called. */
async function expectNothingHeldOrCharged(before: Balance, windowBefore: { heldMicros: number; settledMicros: number }, rowsBefore: number): Promise<void> {
  const after = await stack.balance();
  expectInvariant(after);
  // Balance lost == charged, and the charge is nothing.
  expect(after.availableMicros).toBe(before.availableMicros);
  expect(after.spentMicros).toBe(before.spentMicros);
  expect(after.heldMicros).toBe(0);
  expect(await keyWindow()).toEqual(windowBefore);
  expect(await stack.usageRows()).toHaveLength(rowsBefore);
  expect(stack.sim.recorded.filter((r) => r.path === '/v1/chat/completions')).toHaveLength(0);
}

async function sweepLater(): Promise<{ swept: number; chargedMicros: number }> {
  const ledger = new DynamoLedger(stack.tables.doc, { ledger: t('ledger'), usage: t('usage') });
  return sweep({ doc: stack.tables.doc, usageTable: t('usage'), ledger, stage: 'local', writeLine: () => undefined }, Date.now() + 10 * REQUEST_LIMIT_MS);
}

/** Runs `work` with the gateway's fault lines (logged by kind) kept off the test's output; `work` may read them. */
async function quietly<T>(work: (logged: () => string[]) => Promise<T>): Promise<T> {
  const lines: string[] = [];
  const spy = jest.spyOn(console, 'error').mockImplementation((...args: unknown[]) => {
    lines.push(args.map(String).join(' '));
  });
  try {
    return await work(() => lines);
  } finally {
    spy.mockRestore();
  }
}

describe('an admission that fails without an answer', () => {
  it('applied, its reply lost: 503, and the row it wrote is released before the answer, the hold and the key window given back whole', async () => {
    await ask(); // one settled request, so the figures are not all zero
    await stack.settled();
    stack.sim.reset();
    const before = await stack.balance();
    const windowBefore = await keyWindow();
    const rowsBefore = (await stack.usageRows()).length;

    fault = 'applied';
    const id = await quietly(() => refusedId(ask()));
    expect(captured).toBeDefined();
    // Released (before the answer when the store answers within a second: the unit tests hold that
    // order; here, on a shared machine, the test waits for it).
    const row = await releasedRow(id);
    expect(row).toMatchObject({ state: 'released', requestId: id });
    expect(row?.expiryShard).toBeUndefined(); // out of the sweeper's index
    await expectNothingHeldOrCharged(before, windowBefore, rowsBefore);

    // The sweeper, long after the row's expiry, has nothing to settle or charge.
    expect(await sweepLater()).toMatchObject({ swept: 0, chargedMicros: 0 });
    // Releasing again changes nothing (idempotent).
    await (inner as Ledger).release(stack.workspaceId, id, Date.now());
    await expectNothingHeldOrCharged(before, windowBefore, rowsBefore);
  });

  it('truly failed (never applied): 503, nothing held, and a copy of the admission arriving late is cancelled by the released row', async () => {
    const before = await stack.balance();
    const windowBefore = await keyWindow();
    const rowsBefore = (await stack.usageRows()).length;

    fault = 'not-applied';
    const id = await quietly(() => refusedId(ask()));
    expect(await releasedRow(id)).toMatchObject({ state: 'released' });
    await expectNothingHeldOrCharged(before, windowBefore, rowsBefore);

    // The admission's own transaction, reaching the store only now: refused whole by its row's condition.
    await expect(stack.wiring.wire.send(captured as TransactWriteCommand)).rejects.toMatchObject({ name: 'TransactionCanceledException' });
    await expectNothingHeldOrCharged(before, windowBefore, rowsBefore);
    expect(await sweepLater()).toMatchObject({ swept: 0, chargedMicros: 0 });
  });

  it('applied, then the store stops answering: 503 at once, and the gateway releases the row once the store answers again, within the request budget', async () => {
    const before = await stack.balance();
    const windowBefore = await keyWindow();
    const rowsBefore = (await stack.usageRows()).length;

    fault = 'applied';
    downAfter = true;
    const started = Date.now();
    const id = await quietly(async () => {
      const refused = await refusedId(ask());
      // The answer did not wait for a store that does not answer (the release's first try gets 1 s).
      expect(Date.now() - started).toBeLessThan(REQUEST_LIMIT_MS);
      // The hold is still there while the store is away.
      expect((await stack.balance()).heldMicros).toBeGreaterThan(0);
      storeDown = false;
      // The gateway keeps trying after its answer; the row is released well within the request's budget.
      await stack.settled(stack.workspaceId, REQUEST_LIMIT_MS);
      return refused;
    });
    expect(await releasedRow(id)).toMatchObject({ state: 'released' });
    await expectNothingHeldOrCharged(before, windowBefore, rowsBefore);
    expect(await sweepLater()).toMatchObject({ swept: 0, chargedMicros: 0 });
  });

  it('applied, and the store away past the request budget: the sweeper gives the hold back and charges the prompt bound, as for a dead request', async () => {
    const before = await stack.balance();
    const windowBefore = await keyWindow();
    const rowsBefore = (await stack.usageRows()).length;

    fault = 'applied';
    downAfter = true;
    const id = await quietly(async (logged) => {
      const refused = await refusedId(ask());
      // The gateway tries until the request's budget is spent, then gives up: its release's fault
      // line says so (it comes once the next pause would pass the budget, which can be before it ends).
      const gaveUp = (): boolean => logged().some((l) => l.includes(refused) && l.includes('"phase":"release"'));
      for (const until = Date.now() + REQUEST_LIMIT_MS + 5_000; !gaveUp() && Date.now() < until; ) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(gaveUp()).toBe(true);
      return refused;
    });
    storeDown = false;
    const open = await readRequestRow(stack.tables.doc, t('usage'), stack.workspaceId, id);
    expect(open).toMatchObject({ state: 'open' });
    const bound = Math.min(Number(open?.inputMicros), Number(open?.amountMicros));
    expect(bound).toBeGreaterThan(0);
    const held = await stack.balance();
    expect(held.heldMicros).toBeGreaterThan(0);
    expectInvariant(held);

    const swept = await sweepLater();
    expect(swept).toMatchObject({ swept: 1, chargedMicros: bound });
    const after = await stack.balance();
    expectInvariant(after);
    // Balance lost == charged: the prompt bound, nothing more, and nothing left held.
    expect(after).toEqual({ ...before, availableMicros: before.availableMicros - bound, spentMicros: before.spentMicros + bound, heldMicros: 0 });
    expect(await keyWindow()).toEqual({ heldMicros: windowBefore.heldMicros, settledMicros: windowBefore.settledMicros + bound });
    // The swept request's row is the usage row of that charge (the sweeper's record); no provider was called.
    const rows = await stack.usageRows();
    expect(rows).toHaveLength(rowsBefore + 1);
    expect(rows.find((r) => r.requestId === id)).toMatchObject({ outcome: 'swept', chargeMicros: bound });
    expect(stack.sim.recorded.filter((r) => r.path === '/v1/chat/completions')).toHaveLength(0);
  });
});
