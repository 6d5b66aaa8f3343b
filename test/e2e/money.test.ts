/**
 * Money paths over HTTP with the official client: a stream that outruns the balance, a client
 * that hangs up, the owner's pause, key credit limits, the spend-rate cap, the per-key request
 * rate and store faults. Every test ends with the ledger invariant and no hold left open.
 */
import { APIError } from 'openai';
import { GetCommand, ScanCommand } from '@aws-sdk/lib-dynamodb';
import { createKey, setKeyCreditLimit, setPaused, setSpendRateCap } from '../../local/ops';
import { chargeMicros, formatMinor } from '../../lambdas/core/pricing';
import { tableName } from '../../lambdas/shared/schema';
import type { Catalog, Ledger } from '../../lambdas/gateway/ports';
import { expectInvariant, startStack, type TestStack } from '../support/stack';
import { estimateOn, framesOf } from '../support/e2e';

const SIM_SMALL = { inputRateThousandths: 10_000, cachedInputRateThousandths: 5_000, outputRateThousandths: 40_000 };

async function expectApiError(p: Promise<unknown>, status: number, code: string): Promise<APIError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(APIError);
    const e = err as APIError;
    expect({ status: e.status, code: e.code }).toEqual({ status, code });
    return e;
  }
  throw new Error('expected an APIError');
}

async function post(stack: TestStack, body: unknown, signal?: AbortSignal, key = stack.rawKey): Promise<Response> {
  return fetch(`${stack.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    ...(signal ? { signal } : {}),
  });
}

describe('with one stack', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startStack();
  });
  afterAll(async () => stack?.close());
  beforeEach(() => stack.sim.reset());
  afterEach(async () => {
    await stack.settled();
    expectInvariant(await stack.balance());
  });

  it('a stream that outruns its hold and the balance ends with balance_exhausted and is charged what it produced, at most what it held', async () => {
    const poor = await stack.seed(1); // 1 minor = 1,000,000 micros
    stack.sim.script('sim-large', [{ kind: 'ok', completionTokens: 3000, ignoreCeiling: true }]);
    const sent = { model: 'local/sim-large', messages: [{ role: 'user', content: 'go on' }], max_tokens: 10, stream: true };
    const res = await post(stack, sent, undefined, poor.rawKey);
    expect(res.status).toBe(200);
    const raw = await res.text();
    const errorLine = raw.split('\n').find((l) => l.startsWith('data: {"error"'));
    expect(errorLine).toBeDefined();
    const envelope = JSON.parse(errorLine!.slice(6)) as { error: Record<string, unknown> };
    expect(envelope.error.code).toBe('balance_exhausted');
    expect(Object.keys(envelope.error).sort()).toEqual(['code', 'message', 'param', 'request_id', 'type']);
    expect(raw).not.toContain('data: [DONE]');
    // It was cut well before the provider's 3000 tokens.
    const frames = raw.split('\n').filter((l) => l.startsWith('data: {"id"')).length;
    expect(frames).toBeLessThan(1000);
    await stack.settled(poor.workspaceId);
    const b = await stack.balance(poor.workspaceId);
    expectInvariant(b);
    expect(b.availableMicros).toBeGreaterThanOrEqual(0);
    const [row] = await stack.usageRows(poor.workspaceId);
    expect(row!.outcome).toBe('balance_exhausted');
    // Issue 14: a count of the prompt and of the frames it relayed, capped at the hold (the
    // simulator's words run to more than one token a frame, so here the cap binds).
    expect(row!.chargeMicros).toBe(await estimateOn(stack, 'local/sim-large', JSON.stringify(sent), framesOf(raw), row!.holdMicros));
    expect(row!.chargeMicros).toBeLessThanOrEqual(row!.holdMicros);
    expect(row!.estimated).toBe(true);
    expect(b.spentMicros).toBe(row!.chargeMicros);
    // The hold had grown past its admission size before the balance ran out.
    expect(row!.holdMicros).toBeGreaterThan(10 * 1_500 + 500 * 300);
  });

  it('a stream that outruns its hold while the balance allows keeps going, and is charged the provider counts', async () => {
    stack.sim.script('sim-small', [{ kind: 'ok', completionTokens: 600, ignoreCeiling: true }]);
    const before = await stack.balance();
    const res = await post(stack, { model: 'local/sim-small', messages: [{ role: 'user', content: 'long' }], max_tokens: 5, stream: true });
    const raw = await res.text();
    expect(raw).toContain('data: [DONE]');
    expect(raw).not.toContain('"error"');
    await stack.settled();
    const after = await stack.balance();
    const usage = JSON.parse(raw.split('\n').find((l) => l.startsWith(':x-sluice-usage '))!.slice(16)) as { prompt_tokens: number; completion_tokens: number };
    expect(usage.completion_tokens).toBe(600);
    const expected = chargeMicros({ inputTokens: usage.prompt_tokens, cachedInputTokens: 0, outputTokens: 600, reasoningTokens: 0 }, SIM_SMALL);
    expect(before.availableMicros - after.availableMicros).toBe(expected);
  });

  it('a client that hangs up mid-stream is still settled on the provider counts', async () => {
    stack.sim.script('sim-small', [{ kind: 'ok', completionTokens: 40, chunkDelayMs: 10 }]);
    const before = await stack.balance();
    const controller = new AbortController();
    const res = await post(stack, { model: 'local/sim-small', messages: [{ role: 'user', content: 'bye' }], stream: true }, controller.signal);
    const requestId = res.headers.get('x-sluice-request-id');
    const reader = res.body!.getReader();
    await reader.read();
    controller.abort();
    await stack.settled();
    const row = (await stack.usageRows()).find((r) => r.requestId === requestId)!;
    expect(row.outputTokens).toBe(40);
    expect(row.outcome).toBe('ok');
    const expected = chargeMicros({ inputTokens: row.inputTokens, cachedInputTokens: 0, outputTokens: 40, reasoningTokens: 0 }, SIM_SMALL);
    expect(row.chargeMicros).toBe(expected);
    expect(before.availableMicros - (await stack.balance()).availableMicros).toBe(expected);
  });

  it("the owner's pause refuses new requests with 503 while a running one finishes and is charged", async () => {
    stack.sim.script('sim-small', [{ kind: 'ok', completionTokens: 30, chunkDelayMs: 10 }]);
    const res = await post(stack, { model: 'local/sim-small', messages: [{ role: 'user', content: 'x' }], stream: true });
    const reader = res.body!.getReader();
    await reader.read();
    await setPaused(stack.admin, { workspaceId: stack.workspaceId, paused: true });
    try {
      const calls = stack.sim.recorded.length;
      await expectApiError(stack.client().chat.completions.create({ model: 'local/sim-small', messages: [{ role: 'user', content: 'x' }] }), 503, 'paused_by_owner');
      await expectApiError(stack.client().models.list(), 503, 'paused_by_owner');
      expect(stack.sim.recorded.length).toBe(calls);
      let rest = '';
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        rest += Buffer.from(value).toString();
      }
      expect(rest).toContain('data: [DONE]');
      await stack.settled();
      const row = (await stack.usageRows()).find((r) => r.requestId === res.headers.get('x-sluice-request-id'))!;
      expect(row.outputTokens).toBe(30);
      expect(row.chargeMicros).toBeGreaterThan(0);
    } finally {
      await setPaused(stack.admin, { workspaceId: stack.workspaceId, paused: false });
    }
    const ok = await stack.client().chat.completions.create({ model: 'local/sim-small', messages: [{ role: 'user', content: 'x' }] });
    expect(ok.object).toBe('chat.completion');
  });

  it('a fault of our own after the provider replied still charges the prompt bound, and releases the rest', async () => {
    const before = await stack.balance();
    let started = false;
    const sink = {
      get started() {
        return started;
      },
      start(status: number) {
        // The reply is ready upstream; the response cannot be written (a bug, a runtime fault).
        if (status === 200) throw new Error('sink broke');
        started = true;
      },
      write: () => Promise.resolve(),
      end: () => Promise.resolve(),
    };
    const body = Buffer.from(JSON.stringify({ model: 'local/sim-small', messages: [{ role: 'user', content: 'x' }], max_tokens: 5 }));
    const errors = jest.spyOn(console, 'error').mockImplementation(() => undefined);
    try {
      await stack.wiring.gateway.serve(
        { method: 'POST', path: '/v1/chat/completions', headers: { authorization: `Bearer ${stack.rawKey}`, 'content-type': 'application/json' }, body, traceId: 't' },
        sink,
      );
    } finally {
      errors.mockRestore();
    }
    expect(stack.sim.recorded.filter((r) => r.path === '/v1/chat/completions')).toHaveLength(1);
    await stack.settled();
    const row = (await stack.usageRows()).sort((a, b) => b.startedAt - a.startedAt)[0]!;
    expect(row.outcome).toBe('upstream_fault');
    expect(row.servedBy).toBe('local/sim-small');
    // The prompt's upper bound: every byte of the body as a token at the input rate.
    expect(row.chargeMicros).toBe(Math.ceil((body.length * SIM_SMALL.inputRateThousandths) / 1000));
    expect(row.chargeMicros).toBeLessThan(row.holdMicros);
    const after = await stack.balance();
    expect(before.availableMicros - after.availableMicros).toBe(row.chargeMicros);
  });

  it('a key credit limit refuses 402 naming settled and held; other keys keep serving', async () => {
    const limited = await createKey(stack.admin, { workspaceId: stack.workspaceId });
    await setKeyCreditLimit(stack.admin, { workspaceId: stack.workspaceId, keyId: limited.keyId, limitMinor: 1, window: 'monthly' });
    // Slow enough (20 chunks 250 ms apart) that the stream still holds when the next request asks,
    // even on a loaded machine: once it settled, its small charge would leave room for the next.
    stack.sim.script('sim-small', [{ kind: 'ok', completionTokens: 20, chunkDelayMs: 250 }]);
    const running = await post(stack, { model: 'local/sim-small', messages: [{ role: 'user', content: 'x' }], stream: true }, undefined, limited.rawKey);
    const reader = running.body!.getReader();
    await reader.read();
    // The running request's hold: its row, open.
    const holds = await stack.tables.doc.send(new ScanCommand({ TableName: tableName(stack.tables.prefix, 'usage'), ConsistentRead: true }));
    const held = Number((holds.Items ?? []).find((h) => h.keyId === limited.keyId && h.state === 'open')!.amountMicros);
    const e = await expectApiError(
      stack.client(limited.rawKey).chat.completions.create({ model: 'local/sim-large', messages: [{ role: 'user', content: 'x' }], max_tokens: 600 }),
      402,
      'key_limit_exceeded',
    );
    expect(e.type).toBe('insufficient_quota');
    expect(e.message).toContain(`${formatMinor(0)} settled and ${formatMinor(held)} held`);
    // The workspace's other key is not limited.
    const other = await stack.client().chat.completions.create({ model: 'local/sim-large', messages: [{ role: 'user', content: 'x' }], max_tokens: 600 });
    expect(other.object).toBe('chat.completion');
    while (!(await reader.read()).done);
  });

  it('the spend rate cap refuses 429 with Retry-After once reservations in 60 s reach it', async () => {
    const ws = await stack.seed(1000);
    await setSpendRateCap(stack.admin, { workspaceId: ws.workspaceId, capMinor: 100 });
    // sim-large with no ceiling holds 32768 × 1500 micros ≈ 49.2 minor, so two fit under 100.
    const ask = (): Promise<unknown> => stack.client(ws.rawKey).chat.completions.create({ model: 'local/sim-large', messages: [{ role: 'user', content: 'x' }] });
    await ask();
    await ask();
    const e = await expectApiError(ask(), 429, 'spend_rate_exceeded');
    const retry = Number(e.headers?.get('retry-after'));
    expect(Number.isInteger(retry)).toBe(true);
    expect(retry).toBeGreaterThanOrEqual(1);
    expect(retry).toBeLessThanOrEqual(61);
    // A request that reserves less still fits.
    const small = await stack.client(ws.rawKey).chat.completions.create({ model: 'local/sim-large', messages: [{ role: 'user', content: 'x' }], max_tokens: 100 });
    expect(small.object).toBe('chat.completion');
    await stack.settled(ws.workspaceId);
    expectInvariant(await stack.balance(ws.workspaceId));
  });
});

describe('per-key request rate', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startStack({ env: { SLUICE_KEY_RATE_PER_MINUTE: '3' } });
  });
  afterAll(async () => stack?.close());

  it('refuses the fourth request of a minute 429 with Retry-After; an expired key never consumes the allowance', async () => {
    // Stay clear of a minute boundary, where the counter would reset mid-test.
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 50_000) await new Promise((r) => setTimeout(r, 61_000 - intoMinute));
    const expired = await createKey({ ...stack.admin, now: () => Date.now() - 120_000 }, { workspaceId: stack.workspaceId, expiresAt: Date.now() - 60_000 });
    for (let i = 0; i < 5; i += 1) await expectApiError(stack.client(expired.rawKey).models.list(), 401, 'key_expired');
    const rateItems = await stack.tables.doc.send(new ScanCommand({ TableName: tableName(stack.tables.prefix, 'ledger'), ConsistentRead: true }));
    expect((rateItems.Items ?? []).filter((i) => String(i.sk).startsWith(`RATE#${expired.keyId}#`))).toHaveLength(0);

    const client = stack.client();
    await client.models.list();
    await client.chat.completions.create({ model: 'local/sim-small', messages: [{ role: 'user', content: 'x' }] });
    // A refusal before admission counts too.
    await expectApiError(client.chat.completions.create({ model: 'local/unknown', messages: [] }), 404, 'model_not_found');
    const e = await expectApiError(client.chat.completions.create({ model: 'local/sim-small', messages: [{ role: 'user', content: 'x' }] }), 429, 'rate_limit_exceeded');
    expect(e.type).toBe('rate_limit_error');
    const retry = Number(e.headers?.get('retry-after'));
    expect(retry).toBeGreaterThanOrEqual(1);
    expect(retry).toBeLessThanOrEqual(60);
    // The rate limit outranks what the request would otherwise have met (a bad model here).
    await expectApiError(client.chat.completions.create({ model: 'local/unknown', messages: [] }), 429, 'rate_limit_exceeded');
    await stack.settled();
    expectInvariant(await stack.balance());
  });
});

describe('store faults map to their 503s and hold nothing', () => {
  it('ledger unavailable → 503 balance_unavailable; catalog unreadable → 503 model_pricing_unreadable', async () => {
    const failingLedger: Ledger = {
      admit: () => Promise.reject(new Error('ProvisionedThroughputExceededException')),
      settle: () => Promise.resolve(false),
      extend: () => Promise.resolve(false),
      countRequest: () => Promise.resolve({}),
      release: () => Promise.resolve(),
    };
    const stack = await startStack({ overrides: { ledger: failingLedger } });
    try {
      await expectApiError(stack.client().chat.completions.create({ model: 'local/sim-small', messages: [{ role: 'user', content: 'x' }] }), 503, 'balance_unavailable');
      expect(stack.sim.recorded).toHaveLength(0);
    } finally {
      await stack.close();
    }
    const failingCatalog: Catalog = {
      model: () => Promise.reject(new Error('boom')),
      models: () => Promise.reject(new Error('boom')),
      provider: () => Promise.reject(new Error('boom')),
      providers: () => Promise.reject(new Error('boom')),
    };
    const stack2 = await startStack({ overrides: { catalog: failingCatalog } });
    try {
      const e = await expectApiError(stack2.client().chat.completions.create({ model: 'local/sim-small', messages: [{ role: 'user', content: 'x' }] }), 503, 'model_pricing_unreadable');
      expect(e.message).not.toContain('boom');
      await expectApiError(stack2.client().models.list(), 503, 'model_pricing_unreadable');
      const b = await stack2.balance();
      expect(b.heldMicros).toBe(0);
      const holds = await stack2.tables.doc.send(new GetCommand({ TableName: tableName(stack2.tables.prefix, 'ledger'), Key: { pk: `WS#${stack2.workspaceId}`, sk: 'BALANCE' } }));
      expect(holds.Item?.spentMicros).toBe(0);
    } finally {
      await stack2.close();
    }
  });
});
