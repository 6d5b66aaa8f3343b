/**
 * A quiet workspace pays exactly one store round trip before the first byte (issue 10): the
 * admission's one TransactWriteItems, whatever the ledger's own upkeep did after earlier replies.
 *
 * On DynamoDB Local, with the clock injected: a workspace's requests one after another over
 * several minutes of simulated time, so the spend-rate record's 64 one-second slots are reused
 * (a second's slot comes round again 64 s later, holding an aged-out reservation) and the
 * ledger's per-workspace upkeep (every 30 s after a settlement: re-reading slice 0, pruning aged
 * slots) runs many times between admissions. Every store call is counted by the benchmark's own
 * wrapper (`bench/round-trips.ts`), which names each call, so a failure says which one was extra.
 * The last case serves streamed requests through the real `Gateway` (in-memory directory, catalog
 * and provider; the ledger on DynamoDB Local) and counts the calls up to the first byte written.
 */
import { hashKey } from '../../lambdas/core/api-key';
import { wireClient } from '../../lambdas/adapters/dynamo-client';
import type { DynamoWire } from '../../lambdas/adapters/dynamo-wire';
import { DEFAULT_SPEND_RATE_CAP_MINOR } from '../../lambdas/core/limits';
import { MICROS_PER_MINOR } from '../../lambdas/core/pricing';
import { tableName } from '../../lambdas/shared/schema';
import { Gateway } from '../../lambdas/gateway/app';
import type { AdmissionLimits, AdmitRequest, GatewayDeps, Settlement } from '../../lambdas/gateway/ports';
import { loadConfig } from '../../lambdas/shared/config';
import { DynamoLedger, readBalance } from '../../lambdas/store';
import { addCredit, createWorkspace, type AdminContext } from '../../local/ops';
import { callName, countRoundTrips, type TripLog } from '../../bench/round-trips';
import { testTables, type TestTables, RACE_LIMITS } from '../support/dynamo';
import { testDate } from '../support/clock';
import { CollectingSink, KEY_ID, MemoryDirectory, RAW_KEY, ScriptedUpstream, memoryCatalog } from '../support/memory-ports';

let tables: TestTables;
let wire: DynamoWire;
let admin: AdminContext;
const log: TripLog = { keep: true, calls: [] };
const t = (name: Parameters<typeof tableName>[1]): string => tableName(tables.prefix, name);
const ledgerTables = (): { ledger: string; usage: string } => ({ ledger: t('ledger'), usage: t('usage') });

beforeAll(async () => {
  tables = await testTables();
  wire = wireClient({ dynamoEndpoint: tables.endpoint }, tables.doc, process.env, RACE_LIMITS);
  countRoundTrips([wire], tables.prefix, log);
  admin = { doc: tables.doc, tablePrefix: tables.prefix, stage: 'local' };
});

afterAll(() => {
  wire.destroy();
  tables.client.destroy();
});

jest.setTimeout(180_000);

/** Ahead of the real clock, so DynamoDB Local's TTL never collects a hold or counter mid-test (test/support/clock.ts). */
const START = testDate(10, 22, 12, 0, 0, 250);
/** The deployed default cap, and a workspace month limit: every item an admission writes carries its condition. */
const LIMITS: AdmissionLimits = {
  keyWindow: 'monthly',
  keyLimitMicros: 500 * MICROS_PER_MINOR,
  workspaceLimitMicros: 900 * MICROS_PER_MINOR,
  spendRateCapMicros: DEFAULT_SPEND_RATE_CAP_MINOR * MICROS_PER_MINOR,
  keyRatePerMinute: 1e9,
};
const HOLD = 20_000;
const CHARGE = 7_000;

function request(workspaceId: string, n: number, now: number): AdmitRequest {
  return {
    holdId: `req_fb${n}_${Math.random().toString(36).slice(2)}`,
    workspaceId,
    keyId: 'key_fb',
    family: 'chat_completions',
    requestedModel: 'local/sim-small',
    amountMicros: HOLD,
    inputMicros: HOLD / 4,
    byok: false,
    limits: LIMITS,
    now,
    expiresAt: now + 600_000,
  };
}

function settlement(now: number): Settlement {
  return { counts: { inputTokens: 3, cachedInputTokens: 0, outputTokens: 5, reasoningTokens: 0 }, chargeMicros: CHARGE, stream: true, status: 200, outcome: 'ok', attempts: 1, now };
}

/** The calls made by `run`, by name. */
async function callsOf<T>(run: () => Promise<T>): Promise<{ result: T; calls: string[] }> {
  const from = log.calls.length;
  const result = await run();
  return { result, calls: log.calls.slice(from).map(callName) };
}

describe('store round trips before the first byte, quiet workspace', () => {
  // Gaps between requests (simulated ms): steady, sparse (one request now and then, every slot
  // aged out), and bursts around a slot's reuse 64 s later. Each case spans several 30 s upkeep
  // intervals and more than two rounds of the 64 slots.
  it.each([
    ['one request every 1.3 s for 2.6 minutes', Array.from({ length: 120 }, () => 1_300)],
    ['one request every 7 to 70 s for 20 minutes', Array.from({ length: 30 }, (_, i) => 7_000 + ((i * 9_973) % 63_000))],
    ['bursts of 3 in one second, 64 s apart and 61 to 65 s apart', Array.from({ length: 60 }, (_, i) => (i % 3 === 0 ? 61_000 + ((i / 3) % 5) * 1_000 : 150))],
  ])('%s: every admission is one TransactWriteItems', async (_name, gaps) => {
    const ws = await createWorkspace(admin, { name: 'first-byte' });
    await addCredit(admin, { workspaceId: ws.workspaceId, minor: 100_000 });
    const ledger = new DynamoLedger(wire, ledgerTables());
    let now = START;
    const off: string[] = [];
    let settledTrips = 0;
    for (const [i, gap] of gaps.entries()) {
      now += gap;
      const { result, calls } = await callsOf(() => ledger.admit(request(ws.workspaceId, i, now)));
      expect(result.admitted).toBe(true);
      if (!result.admitted) return;
      if (calls.length !== 1 || calls[0] !== 'TransactWriteItems') off.push(`request ${i} at +${now - START} ms: ${calls.join(' + ')}`);
      // The reply takes 400 ms; whatever upkeep runs after it is not the next request's.
      const settled = await callsOf(() => ledger.settle(result.hold, settlement(now + 400)));
      expect(settled.result).toBe(true);
      settledTrips += settled.calls.length;
    }
    expect(off).toEqual([]);
    // The upkeep really ran, after replies: more calls after the replies than one per settlement.
    expect(settledTrips).toBeGreaterThan(gaps.length);
    const b = await readBalance(tables.doc, ledgerTables(), ws.workspaceId, now + 1000);
    expect(b.heldMicros).toBe(0);
    expect(b.spentMicros).toBe(gaps.length * CHARGE);
    expect(b.availableMicros + b.heldMicros + b.spentMicros).toBe(b.creditedMicros);
  });
});

/** A sink that notes the store calls made up to the first byte written to the client. */
class FirstByteSink extends CollectingSink {
  callsBefore: string[] | undefined;
  constructor(private readonly from: number) {
    super();
  }
  override write(chunk: Buffer): Promise<void> | undefined {
    this.callsBefore ??= log.calls.slice(this.from).map(callName);
    return super.write(chunk);
  }
}

describe('the gateway, streamed, on DynamoDB Local: one store call before the first byte', () => {
  const frame = (value: unknown): string => `data: ${JSON.stringify(value)}\n\n`;
  const chunk = { id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'sim-small' };
  const reply = [
    frame({ ...chunk, choices: [{ index: 0, delta: { content: 'Hi' }, finish_reason: null }] }),
    frame({ ...chunk, choices: [], usage: { prompt_tokens: 21, completion_tokens: 2, total_tokens: 23 } }),
    'data: [DONE]\n\n',
  ];

  it('a quiet workspace, one stream every 1.1 s of simulated time for 3 minutes, past the upkeep and the slots coming round', async () => {
    const ws = await createWorkspace(admin, { name: 'first-byte-gateway' });
    await addCredit(admin, { workspaceId: ws.workspaceId, minor: 100_000 });
    let now = START;
    const directory = new MemoryDirectory();
    const keyHash = hashKey(RAW_KEY);
    directory.keys.set(keyHash, { keyHash, keyId: KEY_ID, workspaceId: ws.workspaceId, visible: 'slc_dev_…aaaa', createdAt: now });
    directory.workspaces.set(ws.workspaceId, { pk: ws.workspaceId, sk: 'META', workspaceId: ws.workspaceId, name: 'fb', createdAt: now, paused: false });
    let id = 0;
    const deps: GatewayDeps = {
      config: loadConfig({ SLUICE_STAGE: 'test', SLUICE_KEY_RATE_PER_MINUTE: '100000000' }),
      keys: directory,
      workspaces: directory,
      catalog: memoryCatalog(),
      secrets: { get: () => Promise.resolve(undefined) },
      ledger: new DynamoLedger(wire, ledgerTables()),
      upstream: new ScriptedUpstream(() => ({ status: 200, headers: { 'content-type': 'text/event-stream' }, chunks: reply })),
      telemetry: { request: () => undefined },
      env: { SLUICE_LOCAL_UPSTREAM_URL: 'http://127.0.0.1:9/v1' },
      clock: () => now,
      newId: () => `fbgw${(id += 1)}${Math.random().toString(36).slice(2, 8)}`,
    };
    const gateway = new Gateway(deps);
    const body = Buffer.from(JSON.stringify({ model: 'local/sim-small', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 16, stream: true }));
    const off: string[] = [];
    const streams = 165;
    for (let i = 0; i < streams; i += 1) {
      now += 1_100;
      const sink = new FirstByteSink(log.calls.length);
      await gateway.serve({ method: 'POST', path: '/v1/chat/completions', headers: { authorization: `Bearer ${RAW_KEY}`, 'content-type': 'application/json' }, body, traceId: `t${i}` }, sink);
      expect(sink.status).toBe(200);
      expect(sink.text).toContain('data: [DONE]');
      const before = sink.callsBefore ?? [];
      if (before.length !== 1 || before[0] !== 'TransactWriteItems') off.push(`stream ${i} at +${now - START} ms: ${before.join(' + ')}`);
    }
    expect(off).toEqual([]);
    const b = await readBalance(tables.doc, ledgerTables(), ws.workspaceId, now + 1000);
    expect(b.heldMicros).toBe(0);
    expect(b.spentMicros).toBeGreaterThan(0);
    expect(b.availableMicros + b.heldMicros + b.spentMicros).toBe(b.creditedMicros);
  });
});
