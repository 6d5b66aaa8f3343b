/**
 * A workspace's slice count on DynamoDB Local: the operator sees and sets it through the
 * management API and `sluice workspace slices` (audited), and the ledger's hook shrinks a cooled
 * workspace's slices while a 50-way load runs, never below the operator's floor, keeping
 * `credited = available + held + spent` summed over slices and losing no hold.
 */
import { GetCommand, ScanCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { wireClient } from '../../lambdas/adapters/dynamo-client';
import type { DynamoWire } from '../../lambdas/adapters/dynamo-wire';
import { MICROS_PER_MINOR } from '../../lambdas/core/pricing';
import type { AdmissionLimits, AdmitRequest, Settlement } from '../../lambdas/gateway/ports';
import type { HoldRecord } from '../../lambdas/shared/records';
import { tableName } from '../../lambdas/shared/schema';
import { DynamoLedger, readBalance, setLedgerSlices } from '../../lambdas/store';
import { writeSliceCount } from '../../lambdas/store/ledger';
import { slicePk } from '../../lambdas/store/keys';
import { FLUSH_ADMISSIONS, SLICE_STATS_SK, STATS_BUCKETS, readSliceCount } from '../../lambdas/store/slice-stats';
import { addCredit, createWorkspace, type AdminContext } from '../../local/ops';
import { startTestAdmin, type TestAdmin } from '../support/admin';
import { RACE_LIMITS, testTables, type TestTables } from '../support/dynamo';

jest.setTimeout(240_000);

const BIN = resolve(__dirname, '../../bin/sluice.js');
const OPEN: AdmissionLimits = { keyWindow: 'monthly', spendRateCapMicros: 1e15, keyRatePerMinute: 1e9 };

let tables: TestTables;
let wire: DynamoWire;
let admin: AdminContext;
const t = (name: Parameters<typeof tableName>[1]): string => tableName(tables.prefix, name);
const ledgerTables = (): { ledger: string; usage: string } => ({ ledger: t('ledger'), usage: t('usage') });

beforeAll(async () => {
  tables = await testTables();
  wire = wireClient({ dynamoEndpoint: tables.endpoint }, tables.doc, process.env, RACE_LIMITS);
  admin = { doc: tables.doc, tablePrefix: tables.prefix, stage: 'local' };
});

afterAll(() => {
  wire.destroy();
  tables.client.destroy();
});

let seq = 0;
/** A request at the wall clock's time: the hook reports by wall time, and the windows follow it. */
function request(workspaceId: string, amountMicros: number): AdmitRequest {
  seq += 1;
  const now = Date.now();
  return {
    holdId: `req_c${seq}_${Math.random().toString(36).slice(2)}`,
    workspaceId,
    keyId: `key_${seq % 5}`,
    family: 'chat_completions',
    requestedModel: 'local/sim-small',
    amountMicros,
    inputMicros: Math.floor(amountMicros / 4),
    byok: false,
    limits: OPEN,
    now,
    expiresAt: now + 600_000,
  };
}

function settlement(chargeMicros: number): Settlement {
  return { counts: { inputTokens: 1, cachedInputTokens: 0, outputTokens: 1, reasoningTokens: 0 }, chargeMicros, stream: false, status: 200, outcome: 'ok', attempts: 1, now: Date.now() };
}

/**
 * A workspace grown (as automatic growth does, floor untouched) to `slices`, whose count last
 * changed 20 minutes ago and whose reports show a quiet quarter of an hour: what shrinking waits for.
 */
async function cooledWorkspace(creditMinor: number, slices: number, floor?: number): Promise<string> {
  const ws = (await createWorkspace(admin, { name: 'cooled' })).workspaceId;
  await addCredit(admin, { workspaceId: ws, minor: creditMinor });
  if (floor !== undefined) await setLedgerSlices(tables.doc, ledgerTables(), ws, floor);
  expect(await writeSliceCount(tables.doc, t('ledger'), ws, floor ?? 1, slices, undefined)).toBe(true);
  const now = Date.now();
  await tables.doc.send(new UpdateCommand({ TableName: t('ledger'), Key: { pk: slicePk(ws, 0), sk: 'BALANCE' }, UpdateExpression: 'SET sliceChangedAt = :at', ExpressionAttributeValues: { ':at': now - 20 * 60_000 } }));
  // A report 16 minutes back (a trickle, no conflicts): the span is covered and quiet.
  const old = Math.floor(now / 60_000) - 16;
  await tables.doc.send(
    new UpdateCommand({
      TableName: t('ledger'),
      Key: { pk: slicePk(ws, 0), sk: SLICE_STATS_SK },
      UpdateExpression: 'SET #m = :m, #a = :a, #c = :c',
      ExpressionAttributeNames: { '#m': `m${old % STATS_BUCKETS}`, '#a': `a${old % STATS_BUCKETS}`, '#c': `c${old % STATS_BUCKETS}` },
      ExpressionAttributeValues: { ':m': old, ':a': 12, ':c': 0 },
    }),
  );
  return ws;
}

async function waitFor<T>(read: () => Promise<T>, done: (v: T) => boolean, ms: number): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await read();
    if (done(v) || Date.now() > end) return v;
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** `workers` loops admitting and settling on `ledger` until `stop()`; the holds admitted and the charges made. */
function load(ledger: DynamoLedger, ws: string, workers: number, stop: () => boolean): Promise<{ holds: HoldRecord[]; charged: number; chargedMicros: number }> {
  const holds: HoldRecord[] = [];
  let charged = 0;
  let chargedMicros = 0;
  const worker = async (i: number): Promise<void> => {
    for (let n = 0; !stop(); n += 1) {
      // Under this machine's load an admission may give up (a 503 to a client): nothing was held, go on.
      const out = await ledger.admit(request(ws, 2 * MICROS_PER_MINOR)).catch((err: unknown) => ({ admitted: false as const, err }));
      if (!out.admitted) continue;
      holds.push(out.hold);
      const charge = (n * 7919 + i * 31) % (3 * MICROS_PER_MINOR); // sometimes above the hold
      await ledger.settle(out.hold, settlement(charge));
      charged += 1;
      chargedMicros += charge;
    }
  };
  return Promise.all(Array.from({ length: workers }, (_, i) => worker(i))).then(() => ({ holds, charged, chargedMicros }));
}

describe('automatic shrinking (the ledger\'s hook)', () => {
  it('shrinks a cooled workspace under a 50-way load, once, and keeps credited = available + held + spent over slices with no hold lost', async () => {
    const ws = await cooledWorkspace(100_000, 16);
    const ledger = new DynamoLedger(wire, ledgerTables());
    let stop = false;
    const running = load(ledger, ws, 50, () => stop);
    let shrunk: Awaited<ReturnType<typeof readSliceCount>>;
    let reported = 0;
    try {
      // The first report (after 200 admissions) finds a quiet span: 16 → 8 while the load runs.
      shrunk = await waitFor(() => readSliceCount(tables.doc, t('ledger'), ws), (v) => v?.count !== 16, 180_000);
      // Keep the load on the new count until a second report (admissions and settlements on retired slices included).
      const stats = await waitFor(
        () => tables.doc.send(new GetCommand({ TableName: t('ledger'), Key: { pk: slicePk(ws, 0), sk: SLICE_STATS_SK }, ConsistentRead: true })),
        (g) => Object.keys(g.Item ?? {}).filter((k) => /^a\d+$/.test(k)).reduce((a, k) => a + Number(g.Item?.[k]), 0) >= 12 + 2 * FLUSH_ADMISSIONS,
        120_000,
      );
      reported = Object.keys(stats.Item ?? {}).filter((k) => /^a\d+$/.test(k)).reduce((a, k) => a + Number(stats.Item?.[k]), 0);
    } finally {
      stop = true;
    }
    const { holds, charged, chargedMicros } = await running;
    expect(shrunk).toMatchObject({ count: 8, floor: 1, high: 16 });
    expect(shrunk?.changedAt).toBeGreaterThan(Date.now() - 300_000);
    expect(reported).toBeGreaterThanOrEqual(12 + 2 * FLUSH_ADMISSIONS);
    expect(charged).toBe(holds.length);
    expect(holds.length).toBeGreaterThanOrEqual(2 * FLUSH_ADMISSIONS);
    // Hysteresis: the change just made stands; the second report did not shrink again.
    expect((await readSliceCount(tables.doc, t('ledger'), ws))?.count).toBe(8);
    const b = await readBalance(tables.doc, ledgerTables(), ws);
    expect(b.creditedMicros).toBe(100_000 * MICROS_PER_MINOR);
    expect(b.availableMicros + b.heldMicros + b.spentMicros).toBe(b.creditedMicros);
    expect(b.heldMicros).toBe(0);
    expect(b.slices).toBe(8);
    // Every hold settled: no request's row is left open.
    const left = await tables.doc.send(
      new ScanCommand({ TableName: t('usage'), FilterExpression: 'workspaceId = :ws AND #state = :open', ExpressionAttributeNames: { '#state': 'state' }, ExpressionAttributeValues: { ':ws': ws, ':open': 'open' }, ConsistentRead: true }),
    );
    expect(left.Items ?? []).toEqual([]);
    // What the settlements charged is what was spent, to the unit (the credit covers every charge above its hold).
    expect(b.spentMicros).toBe(chargedMicros);
    expect(b.spentMicros).toBeGreaterThan(0);
  });

  it('never shrinks below the operator\'s floor', async () => {
    const ws = await cooledWorkspace(100_000, 16, 10);
    const ledger = new DynamoLedger(wire, ledgerTables());
    let stop = false;
    const running = load(ledger, ws, 20, () => stop);
    let after: Awaited<ReturnType<typeof readSliceCount>>;
    try {
      after = await waitFor(() => readSliceCount(tables.doc, t('ledger'), ws), (v) => v?.count !== 16, 180_000);
    } finally {
      stop = true;
    }
    await running;
    // Halving would give 8; the floor of 10 holds.
    expect(after).toMatchObject({ count: 10, floor: 10 });
    const b = await readBalance(tables.doc, ledgerTables(), ws);
    expect(b.availableMicros + b.heldMicros + b.spentMicros).toBe(b.creditedMicros);
    expect(b.heldMicros).toBe(0);
  });
});

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

describe('sluice workspace slices (management API, audited)', () => {
  let api: TestAdmin;
  beforeAll(async () => {
    api = await startTestAdmin(tables);
  });
  afterAll(() => api.close());

  function sluice(args: readonly string[]): Promise<Run> {
    return new Promise((resolvePromise, reject) => {
      const child = spawn(process.execPath, [BIN, ...args], { env: api.env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      child.on('error', reject);
      child.on('close', (code) => resolvePromise({ code, stdout, stderr }));
    });
  }

  it('shows the count, floor and recent conflict rate, sets count and floor, consolidates, and audits the change', async () => {
    const ws = (await createWorkspace(admin, { name: 'operator' })).workspaceId;
    await addCredit(admin, { workspaceId: ws, minor: 50 });
    const shown = await sluice(['workspace', 'slices', '-w', ws, '--json']);
    expect(shown.code).toBe(0);
    expect(JSON.parse(shown.stdout)).toMatchObject({ workspaceId: ws, slices: 1, floor: 1, high: 1, maxSlices: 48, changedAt: null, recent: { admissions: 0, conflicts: 0, conflictRate: null }, automatic: { wouldShrinkTo: null } });

    const set = await sluice(['workspace', 'slices', '-w', ws, '--set', '6', '--json']);
    expect(set.code).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({ slices: 6, floor: 6, previous: 1 });
    // Spread some credit over the slices, then set it back to 2: the retired slices' credit is on slice 0 and 1.
    const ledger = new DynamoLedger(wire, ledgerTables());
    for (let i = 0; i < 12; i += 1) {
      const out = await ledger.admit(request(ws, MICROS_PER_MINOR));
      if (out.admitted) await ledger.settle(out.hold, settlement(250_000));
    }
    const lowered = await sluice(['workspace', 'slices', '-w', ws, '--set', '2']);
    expect(lowered.code).toBe(0);
    expect(lowered.stdout).toContain('ledger slices: 2 (was 6); floor 2');
    const snapshot = await new DynamoLedger(wire, ledgerTables()).readSlices(ws);
    expect(snapshot.slices.filter((s) => s.slice >= 2).every((s) => s.availableMicros === 0)).toBe(true);
    const b = await readBalance(tables.doc, ledgerTables(), ws);
    expect(b).toMatchObject({ creditedMicros: 50 * MICROS_PER_MINOR, spentMicros: 12 * 250_000, heldMicros: 0, slices: 2, sliceFloor: 2 });
    expect(b.availableMicros + b.heldMicros + b.spentMicros).toBe(b.creditedMicros);

    // Reports from the gateway processes: 40 admissions this minute, 4 of them met a conflict.
    const minute = Math.floor(Date.now() / 60_000);
    await tables.doc.send(
      new UpdateCommand({
        TableName: t('ledger'),
        Key: { pk: slicePk(ws, 0), sk: SLICE_STATS_SK },
        UpdateExpression: 'SET #m = :m, #a = :a, #c = :c',
        ExpressionAttributeNames: { '#m': `m${minute % STATS_BUCKETS}`, '#a': `a${minute % STATS_BUCKETS}`, '#c': `c${minute % STATS_BUCKETS}` },
        ExpressionAttributeValues: { ':m': minute, ':a': 40, ':c': 4 },
      }),
    );
    const human = await sluice(['workspace', 'slices', '-w', ws]);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/40 admissions .*4 met a conflict \(10%\); grows above 20%/);

    const trail = await sluice(['audit', 'list', '-w', ws, '--json']);
    const entries = (JSON.parse(trail.stdout) as { entries: { action: string; summary: Record<string, unknown> }[] }).entries.filter((e) => e.action === 'workspace.slices');
    expect(entries.map((e) => e.summary)).toEqual([
      { slices: 2, floor: 2, previous: 6 },
      { slices: 6, floor: 6, previous: 1 },
    ]);
  });

  it.each([
    ['0 slices', ['--set', '0'], 'invalid_argument'],
    ['more than 48', ['--set', '49'], 'invalid_argument'],
    ['not a number', ['--set', 'many'], 'invalid_argument'],
  ])('refuses %s, changing nothing', async (_name, extra, code) => {
    const ws = (await createWorkspace(admin, { name: 'refusals' })).workspaceId;
    const run = await sluice(['workspace', 'slices', '-w', ws, ...extra, '--json']);
    expect(run.code).toBe(1);
    expect((JSON.parse(run.stdout) as { error: { code: string } }).error.code).toBe(code);
    expect((await readSliceCount(tables.doc, t('ledger'), ws))?.count).toBe(1);
  });

  it('refuses a workspace that does not exist', async () => {
    const run = await sluice(['workspace', 'slices', '-w', 'ws_nosuch', '--json']);
    expect(run.code).toBe(1);
    expect((JSON.parse(run.stdout) as { error: { code: string } }).error.code).toBe('workspace_not_found');
  });
});
