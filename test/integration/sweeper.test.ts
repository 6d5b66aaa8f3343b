/**
 * The hold sweeper against DynamoDB Local: holds admitted through the real ledger, some expired,
 * swept, and the ledger checked item by item; plus a request really killed mid-flight (a child
 * process that admits and exits before settling). A hold is a request's row in the usage table
 * while it is open (`lambdas/store/request-rows.ts`).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { GetCommand, PutCommand, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { DynamoLedger } from '../../lambdas/adapters/dynamo-ledger';
import { sweep, sweptChargeMicros, type SweepDeps } from '../../lambdas/sweeper/sweep';
import type { HoldRecord, UsageRecord } from '../../lambdas/shared/records';
import { OPEN_BY_EXPIRY, tableName } from '../../lambdas/shared/schema';
import { testTables, type TestTables } from '../support/dynamo';
import { expiryShard, windowKey } from '../../lambdas/store/keys';
import { usageRows as readUsageRows } from '../../lambdas/store/balance';
import { holdKey, pendingChargeUpdate } from '../../lambdas/store/request-rows';
import { requestIdDigits, requestIdTime } from '../../lambdas/core/request-id';

const REPO = path.resolve(__dirname, '../..');
const CREDIT = 1_000_000_000; // 1000 minor units
const MINUTE = 60_000;

let db: TestTables;
let ledger: DynamoLedger;
let t: (name: 'ledger' | 'usage') => string;

/** Fresh tables for every test: the sweeper reads every open hold, so tests must not share them. */
function useFreshTables(): void {
  beforeEach(async () => {
    db = await testTables();
    t = (name) => tableName(db.prefix, name);
    ledger = new DynamoLedger(db.doc, { ledger: t('ledger'), usage: t('usage') });
  });
  afterEach(() => db.client.destroy());
}

async function createBalance(workspaceId: string): Promise<void> {
  await db.doc.send(
    new PutCommand({
      TableName: t('ledger'),
      Item: { pk: `WS#${workspaceId}`, sk: 'BALANCE', availableMicros: CREDIT, heldMicros: 0, spentMicros: 0, creditedMicros: CREDIT, rateBuckets: {} },
    }),
  );
}

interface HoldSpec {
  readonly holdId: string;
  readonly amountMicros: number;
  readonly inputMicros: number;
  readonly now: number;
  readonly expiresAt: number;
  readonly byok?: boolean;
}

async function admit(workspaceId: string, spec: HoldSpec): Promise<HoldRecord> {
  const out = await ledger.admit({
    holdId: spec.holdId,
    workspaceId,
    keyId: 'key_1',
    family: 'chat_completions',
    requestedModel: 'local/echo',
    amountMicros: spec.amountMicros,
    inputMicros: spec.inputMicros,
    byok: spec.byok ?? false,
    limits: { keyWindow: 'monthly', spendRateCapMicros: 1e15, keyRatePerMinute: 1e6 },
    now: spec.now,
    expiresAt: spec.expiresAt,
  });
  if (!out.admitted) throw new Error(`admission refused: ${out.refusal.kind}`);
  return out.hold;
}

async function balance(workspaceId: string): Promise<Record<string, number>> {
  const got = await db.doc.send(new GetCommand({ TableName: t('ledger'), Key: { pk: `WS#${workspaceId}`, sk: 'BALANCE' }, ConsistentRead: true }));
  const item = got.Item ?? {};
  return { available: item.availableMicros, held: item.heldMicros, spent: item.spentMicros, credited: item.creditedMicros };
}

/** A window's figures: a key's or member's window item, or the slice's share of the workspace month (on the slice item since issue 21). */
async function ledgerItem(workspaceId: string, sk: string): Promise<Record<string, unknown> | undefined> {
  if (sk.startsWith('MONTH#')) {
    const month = (await ledger.readSlices(workspaceId)).slices[0]?.month;
    return month?.exists === true ? { heldMicros: month.heldMicros, settledMicros: month.settledMicros, usedMicros: month.usedMicros } : undefined;
  }
  const got = await db.doc.send(new GetCommand({ TableName: t('ledger'), Key: windowKey(workspaceId, 0, sk), ConsistentRead: true }));
  return got.Item;
}

/** Whether a hold is still open: the request's row, by its workspace, id and start. */
async function holdExists(workspaceId: string, holdId: string, startedAt: number): Promise<boolean> {
  const got = await db.doc.send(new GetCommand({ TableName: t('usage'), Key: holdKey({ workspaceId, holdId, createdAt: startedAt }), ConsistentRead: true }));
  return got.Item?.state === 'open';
}

async function usageRows(workspaceId: string): Promise<UsageRecord[]> {
  return readUsageRows(db.doc, t('usage'), workspaceId);
}

function deps(lines: string[]): SweepDeps {
  return { doc: db.doc, usageTable: t('usage'), ledger, stage: 'test', writeLine: (line) => lines.push(line) };
}

function expectInvariant(b: Record<string, number>): void {
  expect(b.credited).toBe((b.available ?? NaN) + (b.held ?? NaN) + (b.spent ?? NaN));
}

describe('sweptChargeMicros (the policy)', () => {
  const base = { amountMicros: 5_000, inputMicros: 1_200 } as HoldRecord;
  it.each([
    ['the prompt bound when nothing is pending', {}, 1_200],
    ['the pending charge when the gateway left one', { pendingChargeMicros: 3_100 }, 3_100],
    ['a pending zero (nothing was billed)', { pendingChargeMicros: 0 }, 0],
    ['a pending charge in full, even above the hold (the ledger collects only what the balance has)', { pendingChargeMicros: 9_000 }, 9_000],
    ['never more than the hold (prompt bound)', { inputMicros: 7_000 }, 5_000],
    ['the prompt bound when the pending value is not a whole number', { pendingChargeMicros: 1.5 }, 1_200],
  ])('charges %s', (_name, extra, expected) => {
    expect(sweptChargeMicros({ ...base, ...extra })).toBe(expected);
  });
});

describe('sweep', () => {
  useFreshTables();

  it('settles only expired holds, each at its inputMicros (or pending charge), and a second sweep changes nothing', async () => {
    const ws = 'ws_sweep';
    await createBalance(ws);
    const t0 = Date.now();
    const admittedAt = t0 - 10 * MINUTE;
    const expired = t0 - 1_000;
    const a = await admit(ws, { holdId: 'req_a', amountMicros: 5_000_000, inputMicros: 1_200_000, now: admittedAt, expiresAt: expired });
    const b = await admit(ws, { holdId: 'req_b', amountMicros: 3_000_000, inputMicros: 700_000, now: admittedAt, expiresAt: expired - 5_000 });
    const live = await admit(ws, { holdId: 'req_live', amountMicros: 2_000_000, inputMicros: 100_000, now: t0, expiresAt: t0 + 10 * MINUTE });
    const pending = await admit(ws, { holdId: 'req_pending', amountMicros: 4_000_000, inputMicros: 900_000, now: admittedAt, expiresAt: expired });
    const over = await admit(ws, { holdId: 'req_over', amountMicros: 1_000_000, inputMicros: 200_000, now: admittedAt, expiresAt: expired });
    const byok = await admit(ws, { holdId: 'req_byok', amountMicros: 6_000_000, inputMicros: 600_000, now: admittedAt, expiresAt: expired, byok: true });
    // What the gateway writes when its own settlement failed after computing the real charge.
    for (const [hold, micros] of [[pending, 2_500_000], [over, 9_000_000]] as const) {
      await db.doc.send(new UpdateCommand(pendingChargeUpdate(t('usage'), hold, micros)));
    }
    const before = await balance(ws);
    expect(before.held).toBe(5_000_000 + 3_000_000 + 2_000_000 + 4_000_000 + 1_000_000);
    expectInvariant(before);

    const lines: string[] = [];
    const result = await sweep(deps(lines), t0);

    const charges = { req_a: 1_200_000, req_b: 700_000, req_pending: 2_500_000, req_over: 9_000_000 };
    const charged = Object.values(charges).reduce((x, y) => x + y, 0);
    expect(result).toEqual({ swept: 5, failed: 0, deferred: 0, outstanding: 1, chargedMicros: charged });

    for (const h of [a, b, pending, over, byok]) expect(await holdExists(ws, h.holdId, h.createdAt)).toBe(false);
    expect(await holdExists(ws, live.holdId, live.createdAt)).toBe(true);

    const after = await balance(ws);
    expect(after).toEqual({ available: CREDIT - live.amountMicros - charged, held: live.amountMicros, spent: charged, credited: CREDIT });
    expectInvariant(after);

    // The limit windows the holds occupied: only the live hold is still held there.
    for (const sk of a.windows) {
      const w = await ledgerItem(ws, sk);
      expect(w).toMatchObject({ heldMicros: live.amountMicros, settledMicros: charged, usedMicros: live.amountMicros + charged });
    }

    const rows = await usageRows(ws);
    expect(rows).toHaveLength(5);
    for (const row of rows) {
      expect(row).toMatchObject({ outcome: 'swept', status: 0, stream: false, attempts: 0, inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, reasoningTokens: 0 });
      expect(row.chargeMicros).toBe(row.requestId === 'req_byok' ? 0 : charges[row.requestId as keyof typeof charges]);
    }

    const metrics = JSON.parse(lines[lines.length - 1] ?? '{}') as Record<string, unknown>;
    expect(metrics).toMatchObject({
      _aws: { CloudWatchMetrics: [{ Namespace: 'Sluice', Dimensions: [['Stage']] }] },
      Stage: 'test',
      HoldsSwept: 5,
      HoldsOutstanding: 1,
      SpendMicros: charged,
    });
    const names = (metrics._aws as { CloudWatchMetrics: { Metrics: { Name: string }[] }[] }).CloudWatchMetrics[0]?.Metrics.map((m) => m.Name);
    expect(names).toEqual(expect.arrayContaining(['HoldsSwept', 'HoldsOutstanding']));

    // Again at the same instant: nothing left to do, nothing changes.
    const again = await sweep(deps([]), t0);
    expect(again.swept).toBe(0);
    expect(await balance(ws)).toEqual(after);
    expect(await usageRows(ws)).toHaveLength(5);

    // Settling a swept hold once more (a late gateway, an overlapping run) is a no-op too.
    await ledger.settle(a, { counts: undefined, chargeMicros: a.amountMicros, stream: false, status: 200, outcome: 'ok', attempts: 1, now: t0 });
    expect(await balance(ws)).toEqual(after);
    expect(await usageRows(ws)).toHaveLength(5);

    // Once its expiry passes, the live hold is swept too.
    const later = await sweep(deps([]), live.expiresAt);
    expect(later).toMatchObject({ swept: 1, outstanding: 0 });
    const end = await balance(ws);
    expect(end).toEqual({ available: CREDIT - charged - live.inputMicros, held: 0, spent: charged + live.inputMicros, credited: CREDIT });
    expectInvariant(end);
  });

  it('finds open holds through the sparse index of requests\' rows: only open rows are in it, and a hold grown before its request died is swept whole', async () => {
    const ws = 'ws_index';
    await createBalance(ws);
    const t0 = Date.now();
    const limits = { keyWindow: 'monthly' as const, spendRateCapMicros: 1e15, keyRatePerMinute: 1e6 };
    const inIndex = async (hold: HoldRecord): Promise<boolean> => {
      const out = await db.doc.send(
        new QueryCommand({ TableName: t('usage'), IndexName: OPEN_BY_EXPIRY, KeyConditionExpression: 'expiryShard = :s', ExpressionAttributeValues: { ':s': expiryShard(hold.holdId) } }),
      );
      return (out.Items ?? []).some((e) => e.sk === holdKey(hold).sk);
    };
    // A stream whose hold grew (1 -> 2 minor units) and whose function then died.
    const grown = await admit(ws, { holdId: 'req_grown', amountMicros: 1_000_000, inputMicros: 1_500_000, now: t0 - 10 * MINUTE, expiresAt: t0 - 1 });
    expect(await ledger.extend(grown, 1_000_000, limits, t0 - 9 * MINUTE)).toBe(true);
    // A request that settled: its row is a usage row, no longer in the index.
    const done = await admit(ws, { holdId: 'req_done', amountMicros: 1_000_000, inputMicros: 100_000, now: t0 - 10 * MINUTE, expiresAt: t0 - 1 });
    await ledger.settle(done, { counts: undefined, chargeMicros: 200_000, stream: false, status: 200, outcome: 'ok', attempts: 1, now: t0 - 9 * MINUTE });
    expect(await inIndex(grown)).toBe(true);
    expect(await inIndex(done)).toBe(false);
    expect((await balance(ws)).held).toBe(2_000_000);

    const result = await sweep(deps([]), t0);
    expect(result).toMatchObject({ swept: 1, failed: 0, outstanding: 0, chargedMicros: 1_500_000 });
    expect(await inIndex(grown)).toBe(false);
    // The whole grown hold came back, less the prompt bound the dead request is charged.
    const after = await balance(ws);
    expect(after).toEqual({ available: CREDIT - 200_000 - 1_500_000, held: 0, spent: 200_000 + 1_500_000, credited: CREDIT });
    expectInvariant(after);
    const rows = await usageRows(ws);
    // (Both started at the same instant: their rows sort by id.)
    expect(rows.map((r) => [r.requestId, r.outcome, r.chargeMicros, r.holdMicros])).toEqual([
      ['req_done', 'ok', 200_000, 1_000_000],
      ['req_grown', 'swept', 1_500_000, 2_000_000],
    ]);
  });

  it('stops taking holds at its deadline and leaves the rest for the next tick', async () => {
    const ws = 'ws_deadline';
    await createBalance(ws);
    const t0 = Date.now();
    for (const id of ['d1', 'd2', 'd3']) await admit(ws, { holdId: `req_${id}`, amountMicros: 1_000_000, inputMicros: 10_000, now: t0 - MINUTE, expiresAt: t0 - 1 });
    const cut = await sweep({ ...deps([]), deadline: t0, clock: () => t0 }, t0);
    expect(cut).toMatchObject({ swept: 0, deferred: 3, outstanding: 3 });
    expect((await balance(ws)).held).toBe(3_000_000);
    const next = await sweep(deps([]), t0);
    expect(next).toMatchObject({ swept: 3, deferred: 0 });
    expect((await balance(ws)).held).toBe(0);
  });

  it('the Lambda handler sweeps with adapters built from the environment', async () => {
    const ws = 'ws_handler';
    await createBalance(ws);
    const t0 = Date.now();
    await admit(ws, { holdId: 'req_handler', amountMicros: 2_000_000, inputMicros: 300_000, now: t0 - MINUTE, expiresAt: t0 - 1 });
    // A deployed stage's name: local mode keeps the EMF line off the console.
    const vars = { SLUICE_STAGE: 'dev', SLUICE_TABLE_PREFIX: db.prefix, SLUICE_DYNAMODB_ENDPOINT: db.endpoint };
    const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
    Object.assign(process.env, vars);
    const written: string[] = [];
    const spy = jest.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    });
    try {
      const { handler } = await import('../../lambdas/sweeper/handler');
      const out = await handler({ 'detail-type': 'Scheduled Event' }, { getRemainingTimeInMillis: () => 55_000 });
      expect(out).toEqual({ swept: 1 });
    } finally {
      spy.mockRestore();
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
    expect(written.join('')).toContain('"HoldsSwept":1');
    expect(written.join('')).toMatch(/"TransactionConflicts":\d+/);
    expect(await balance(ws)).toEqual({ available: CREDIT - 300_000, held: 0, spent: 300_000, credited: CREDIT });
  });
});

describe('a request whose process is killed before settling', () => {
  useFreshTables();

  it('leaves a hold that the sweeper settles once it expires', async () => {
    const ws = 'ws_killed';
    await createBalance(ws);
    // A gateway's id: it carries the request's start, so the test finds the row from it.
    const holdId = `req_${requestIdDigits(Date.now(), randomBytes(7).toString('hex'))}`;
    const child = spawn('npx', ['tsx', path.join(REPO, 'test/support/admit-then-die.ts')], {
      cwd: REPO,
      env: {
        ...process.env,
        SLUICE_DYNAMODB_ENDPOINT: db.endpoint,
        SLUICE_TABLE_PREFIX: db.prefix,
        DIE_WORKSPACE: ws,
        DIE_KEY: 'key_1',
        DIE_HOLD: holdId,
        DIE_AMOUNT_MICROS: '8000000',
        DIE_INPUT_MICROS: '1500000',
        DIE_EXPIRES_IN_MS: '1000',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    expect({ code, stdout, stderr }).toMatchObject({ code: 9, stdout: 'admitted\n' });

    // The dead request's hold is open and its money held.
    const startedAt = requestIdTime(holdId) as number;
    expect(await holdExists(ws, holdId, startedAt)).toBe(true);
    expect(await balance(ws)).toMatchObject({ held: 8_000_000, available: CREDIT - 8_000_000 });
    // Before it expires, the sweeper leaves it alone (it might still be running).
    expect((await sweep(deps([]), Date.now() - 5_000)).swept).toBe(0);

    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const result = await sweep(deps([]), Date.now());
    expect(result.swept).toBe(1);
    expect(await holdExists(ws, holdId, startedAt)).toBe(false);
    const b = await balance(ws);
    expect(b).toEqual({ available: CREDIT - 1_500_000, held: 0, spent: 1_500_000, credited: CREDIT });
    expectInvariant(b);
    const rows = await usageRows(ws);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ requestId: holdId, outcome: 'swept', chargeMicros: 1_500_000, holdMicros: 8_000_000 });
  }, 60_000);
});
