/**
 * The gateway's use case in-process, on in-memory ports (`test/support/memory-ports.ts`): DESIGN's
 * order of checks with nothing held for any refusal, the routing-profile fallback rules, and every
 * settlement outcome with SPEC's ledger invariant. No DynamoDB Local, no socket.
 */
import { countPromptTokens, tokenCounter } from '../../lambdas/core/token-count';
import { CollectingSink, memoryGateway, RAW_KEY, type CannedReply, type MemoryGateway } from '../support/memory-ports';

const CHAT = '/v1/chat/completions';
const auth = { authorization: `Bearer ${RAW_KEY}`, 'content-type': 'application/json' };
const ask = (model: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({ model, messages: [{ role: 'user', content: 'Hello' }], ...extra });

/** sim-small's rates: 10,000 and 40,000 thousandths of a minor unit per million tokens, so 10 and 40 micro-units per token. */
const usage = { prompt_tokens: 21, completion_tokens: 2, total_tokens: 23 };
const CHARGE_21_IN_2_OUT = 21 * 10 + 2 * 40;
/**
 * Issue 14: without the provider's counts, the prompt and what was produced are counted (o200k):
 * `ask`'s prompt counts PROMPT_TOKENS, and each `delta('x')` here is one token; never above the hold.
 */
const PROMPT_TOKENS = countPromptTokens(ask('local/sim-small'), 'chat_completions', tokenCounter('o200k_base'));
const counted = (outputTokens: number) => (h: { amountMicros: number }): number => Math.min(h.amountMicros, PROMPT_TOKENS * 10 + outputTokens * 40);

function completion(model = 'sim-small'): CannedReply {
  return { status: 200, headers: { 'content-type': 'application/json' }, chunks: [JSON.stringify({ id: 'c1', object: 'chat.completion', created: 1, model, choices: [{ index: 0, message: { role: 'assistant', content: 'Hi' }, finish_reason: 'stop' }], usage })] };
}

const frame = (value: unknown): string => `data: ${JSON.stringify(value)}\n\n`;
const delta = (content: string): string => frame({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'sim-small', choices: [{ index: 0, delta: { content }, finish_reason: null }] });
const usageFrame = frame({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'sim-small', choices: [], usage });
const DONE = 'data: [DONE]\n\n';

function expectSettledOnce(mg: MemoryGateway): void {
  expect(mg.ledger.invariantHolds()).toBe(true);
  expect(mg.ledger.heldMicros).toBe(0);
  expect(mg.ledger.open.size).toBe(0);
  expect(mg.ledger.settlements).toHaveLength(1);
}

describe("DESIGN's order of checks: each refusal in its place, nothing held, no provider called", () => {
  type Row = [string, (mg: MemoryGateway) => void, Parameters<MemoryGateway['serve']>[0], number, string | null];
  const rows: Row[] = [
    ['a declared length over 8 MiB, before the key is looked at', () => undefined, { headers: { 'content-length': '8388609' }, json: ask('local/sim-small') }, 413, 'payload_too_large'],
    ['no Authorization header', () => undefined, { headers: {}, json: ask('local/sim-small') }, 401, 'invalid_api_key'],
    ["another provider's key, refused on shape", () => undefined, { headers: { authorization: 'Bearer sk-proj-abc' }, json: ask('local/sim-small') }, 401, 'invalid_api_key'],
    ['a well-shaped key never issued', () => undefined, { headers: { authorization: `Bearer slc_dev_${'b'.repeat(43)}` }, json: ask('local/sim-small') }, 401, 'invalid_api_key'],
    ['an expired key, before the rate limiter', (mg) => { mg.setKey({ expiresAt: Date.now() - 1000 }); mg.ledger.rateRetryAfter = 9; }, { json: ask('local/sim-small') }, 401, 'key_expired'],
    ['a path Sluice does not serve', () => undefined, { path: '/v1/embeddings', json: ask('local/sim-small') }, 404, 'endpoint_not_supported'],
    ['a method not served on the path', () => undefined, { method: 'GET', path: CHAT }, 405, 'method_not_allowed'],
    ["the key's rate, before the body is read", (mg) => { mg.ledger.rateRetryAfter = 7; }, { body: Buffer.from('{not json') }, 429, 'rate_limit_exceeded'],
    ['an undeclared body over 8 MiB', () => undefined, { headers: auth, body: Buffer.alloc(8_388_609, 0x20) }, 413, 'payload_too_large'],
    ['a body that is not JSON', () => undefined, { body: Buffer.from('{not json') }, 400, 'invalid_json'],
    ['JSON that is not an object', () => undefined, { json: [1, 2] }, 400, 'invalid_request_body'],
    ['no model named', () => undefined, { json: { messages: [] } }, 400, null],
    ['a model field outside the allowed characters', () => undefined, { json: ask('local/sim small') }, 400, 'invalid_model_id'],
    ['a bare model id', () => undefined, { json: ask('sim-small') }, 400, 'model_id_not_pinned'],
    ['store: true on the responses endpoint', () => undefined, { path: '/v1/responses', json: { model: 'local/sim-small', input: 'Hi', store: true } }, 400, 'unsupported_value'],
    ['a model in no catalog', () => undefined, { json: ask('local/sim-nope') }, 404, 'model_not_found'],
    ['a retired model', () => undefined, { json: ask('local/sim-retired') }, 404, 'model_not_available'],
    ['a model not offered on this endpoint', () => undefined, { path: '/v1/responses', json: { model: 'local/sim-chat-only', input: 'Hi' } }, 404, 'model_not_available'],
    ['sluice/auto with no default route', () => undefined, { json: ask('sluice/auto') }, 404, 'model_not_available'],
    ['a model outside the permitted set', (mg) => mg.setWorkspace({ permittedModels: ['local/sim-large'] }), { json: ask('local/sim-small') }, 403, 'model_not_permitted'],
    ['resolution before the pause', (mg) => mg.setWorkspace({ paused: true }), { json: ask('local/sim-nope') }, 404, 'model_not_found'],
    ["the owner's pause", (mg) => mg.setWorkspace({ paused: true }), { json: ask('local/sim-small') }, 503, 'paused_by_owner'],
    ['the pause before pricing', (mg) => mg.setWorkspace({ paused: true }), { json: ask('local/sim-no-max') }, 503, 'paused_by_owner'],
    ['no ceiling and no published maximum', () => undefined, { json: ask('local/sim-no-max') }, 503, 'model_not_priceable'],
    ['a balance that cannot cover the hold', (mg) => { mg.ledger.availableMicros = 10; mg.ledger.creditedMicros = 10; }, { json: ask('local/sim-small') }, 402, 'insufficient_credit'],
    ["the key's credit limit", (mg) => { mg.ledger.refusal = { kind: 'key_limit_exceeded', settledMicros: 1, heldMicros: 2, limitMicros: 3 }; }, { json: ask('local/sim-small') }, 402, 'key_limit_exceeded'],
    ['the spend rate cap', (mg) => { mg.ledger.refusal = { kind: 'spend_rate_exceeded', retryAfterSeconds: 12, capMicros: 5_000_000_000 }; }, { json: ask('local/sim-small') }, 429, 'spend_rate_exceeded'],
    ['money still in transit from another region', (mg) => { mg.ledger.refusal = { kind: 'in_transit', retryAfterSeconds: 1 }; }, { json: ask('local/sim-small') }, 503, 'balance_unavailable'],
    ['GET /v1/models on a paused workspace', (mg) => mg.setWorkspace({ paused: true }), { method: 'GET', path: '/v1/models' }, 503, 'paused_by_owner'],
  ];

  test.each(rows)('%s', async (_name, setup, request, status, code) => {
    const mg = memoryGateway();
    setup(mg);
    const before = { available: mg.ledger.availableMicros, spent: mg.ledger.spentMicros };
    const sink = await mg.serve(request);
    expect(sink.status).toBe(status);
    const error = sink.json().error as Record<string, unknown>;
    expect(error.code).toBe(code);
    expect(typeof error.request_id).toBe('string');
    expect(mg.upstream.calls).toHaveLength(0);
    expect(mg.ledger.open.size).toBe(0);
    expect(mg.ledger.heldMicros).toBe(0);
    expect(mg.ledger.availableMicros).toBe(before.available);
    expect(mg.ledger.spentMicros).toBe(before.spent);
    expect(mg.ledger.invariantHolds()).toBe(true);
  });

  test('an expired key never consumes the rate allowance; other refusals after the door count one request', async () => {
    const expired = memoryGateway();
    expired.setKey({ expiresAt: Date.now() - 1 });
    await expired.serve({ json: ask('local/sim-small') });
    expect(expired.ledger.counted).toBe(0);
    const unknown = memoryGateway();
    await unknown.serve({ json: ask('local/sim-nope') });
    expect(unknown.ledger.counted).toBe(1);
  });

  test('a wait for money in transit between regions says when to retry, and does not count against the key\'s rate', async () => {
    // A refused admission's request is counted by a separate `countRequest`; this one is not.
    const mg = memoryGateway();
    mg.ledger.refusal = { kind: 'in_transit', retryAfterSeconds: 1 };
    const countsInTransit = jest.spyOn(mg.ledger, 'countRequest');
    const sink = await mg.serve({ json: ask('local/sim-small') });
    expect([sink.status, sink.headers['Retry-After'], countsInTransit.mock.calls.length]).toEqual([503, '1', 0]);
    const limited = memoryGateway();
    limited.ledger.refusal = { kind: 'key_limit_exceeded', settledMicros: 1, heldMicros: 2, limitMicros: 3 };
    const countsLimited = jest.spyOn(limited.ledger, 'countRequest');
    await limited.serve({ json: ask('local/sim-small') });
    expect(countsLimited.mock.calls.length).toBe(1);
  });

  test('the 429s carry Retry-After and the 405 carries Allow', async () => {
    const rate = memoryGateway();
    rate.ledger.rateRetryAfter = 7;
    expect((await rate.serve({ json: ask('local/sim-small') })).headers['Retry-After']).toBe('7');
    const method = memoryGateway();
    expect((await method.serve({ method: 'GET', path: CHAT })).headers.Allow).toBe('POST');
  });
});

describe('routing-profile fallback', () => {
  const PROFILE = { pk: 'ws_mem', sk: 'PROFILE#p', workspaceId: 'ws_mem', identifier: 'p', models: ['local/sim-small', 'local/sim-large'] };

  type Row = [string, CannedReply, boolean, number];
  const rows: Row[] = [
    ['a rate limit (429) moves on', { status: 429, chunks: ['{}'] }, true, 200],
    ['a provider 5xx moves on', { status: 503, chunks: ['{}'] }, true, 200],
    ['a 404 from the provider moves on', { status: 404, chunks: ['{}'] }, true, 200],
    ['a 408 from the provider moves on', { status: 408, chunks: ['{}'] }, true, 200],
    ["a refusal of Sluice's own credentials moves on", { status: 401, chunks: ['{}'] }, true, 200],
    ['a provider that cannot be reached moves on', { connectError: new Error('ECONNREFUSED') }, true, 200],
    ['a provider that does not begin in time moves on', { hang: true }, true, 200],
    ['a 400 refusal of the request ends the route and is relayed', { status: 400, chunks: [JSON.stringify({ error: { message: 'bad temperature', type: 'invalid_request_error', param: 'temperature', code: null } })] }, false, 400],
    ['a 422 refusal ends the route and is relayed', { status: 422, chunks: ['{"error":{"message":"no"}}'] }, false, 422],
  ];

  test.each(rows)('%s', async (_name, first, movesOn, status) => {
    const mg = memoryGateway({ env: { SLUICE_ATTEMPT_TIMEOUT_MS: '20' }, replies: (id) => (id === 'sim-small' ? first : completion('sim-large')) });
    mg.directory.profiles.set('p', PROFILE);
    const sink = await mg.serve({ json: ask('profile/p', { max_tokens: 16 }) });
    expect(sink.status).toBe(status);
    expect(mg.upstream.calls.map((c) => c.model)).toEqual(movesOn ? ['sim-small', 'sim-large'] : ['sim-small']);
    if (movesOn) {
      expect(sink.headers['x-sluice-served-by']).toBe('local/sim-large');
      expect(sink.headers['x-sluice-retry-attempt-count']).toBe('1');
      // A route keeps the provider's `model` (SPEC's echo is for a pinned id only).
      expect(sink.json().model).toBe('sim-large');
    }
    expectSettledOnce(mg);
    expect(mg.ledger.settlements[0]?.settlement.attempts).toBe(movesOn ? 2 : 1);
  });

  test('an exhausted chain of rate limits answers with the soonest Retry-After', async () => {
    const mg = memoryGateway({ replies: (id) => ({ status: 429, headers: { 'retry-after': id === 'sim-small' ? '30' : '8' }, chunks: ['{}'] }) });
    mg.directory.profiles.set('p', PROFILE);
    const sink = await mg.serve({ json: ask('profile/p', { max_tokens: 16 }) });
    expect(sink.status).toBe(429);
    expect(sink.headers['Retry-After']).toBe('8');
    expect(mg.ledger.settlements[0]?.settlement).toMatchObject({ outcome: 'provider_error', chargeMicros: 0 });
    expectSettledOnce(mg);
  });

  test('members that cannot be served or priced are left out before admission; the hold covers the dearest that remains', async () => {
    const mg = memoryGateway({ replies: () => completion() });
    mg.directory.profiles.set('p', { ...PROFILE, models: ['local/sim-retired', 'local/sim-no-max', 'local/sim-small', 'local/sim-large'] });
    const sink = await mg.serve({ json: ask('profile/p') });
    expect(sink.status).toBe(200);
    expect(mg.upstream.calls.map((c) => c.model)).toEqual(['sim-small']);
    // sim-large's maximum output (32,768 tokens at 1,500 micro-units each) is the largest hold.
    expect(mg.ledger.admitted[0]?.amountMicros).toBeGreaterThanOrEqual(32_768 * 1_500);
    expectSettledOnce(mg);
  });

  test('a pinned id is echoed in a non-streamed chat reply', async () => {
    const mg = memoryGateway({ replies: () => completion() });
    const sink = await mg.serve({ json: ask('local/sim-small') });
    expect(sink.json().model).toBe('local/sim-small');
  });
});

describe('settlement: every way a request ends, charged as it should be, the hold always back', () => {
  type Row = [string, Partial<Parameters<typeof memoryGateway>[0]> & { prepare?: (mg: MemoryGateway) => void; failWritesAfter?: number }, Record<string, unknown>, number, string, (hold: { amountMicros: number; inputMicros: number }) => number];
  const rows: Row[] = [
    ['a reply with counts: the counts at face value', { replies: () => completion() }, ask('local/sim-small'), 200, 'ok', () => CHARGE_21_IN_2_OUT],
    ['a stream with counts: the counts', { replies: () => ({ chunks: [delta('Hi'), delta('!'), usageFrame, DONE] }) }, ask('local/sim-small', { stream: true }), 200, 'ok', () => CHARGE_21_IN_2_OUT],
    ['a reply that is not JSON: the counted prompt', { replies: () => ({ chunks: ['<html>'] }) }, ask('local/sim-small'), 500, 'upstream_fault', counted(0)],
    ['a reply that breaks off: the counted prompt', { replies: () => ({ chunks: ['{"id":'], breakAfter: new Error('ECONNRESET') }) }, ask('local/sim-small'), 500, 'upstream_fault', counted(0)],
    ['a stream cut before [DONE]: the counted prompt and frames', { replies: () => ({ chunks: [delta('a'), delta('b'), delta('c')] }) }, ask('local/sim-small', { stream: true }), 200, 'upstream_fault', counted(3)],
    ['a stream with a frame that is not JSON', { replies: () => ({ chunks: [delta('a'), 'data: {oops\n\n'] }) }, ask('local/sim-small', { stream: true }), 200, 'upstream_fault', counted(1)],
    ['a stream whose client went away', { replies: () => ({ chunks: [delta('a'), delta('b'), delta('c'), usageFrame, DONE] }), failWritesAfter: 1 }, ask('local/sim-small', { stream: true }), 200, 'client_disconnected', counted(2)],
    [
      'a stream that outgrows its hold when the balance has run out: what it produced (t0..t6, 7 frames), counted, at most the hold',
      { replies: () => ({ chunks: Array.from({ length: 12 }, (_, i) => delta(`t${i}`)).concat([usageFrame, DONE]) }), prepare: (mg) => { mg.ledger.extensionsLeft = 0; } },
      ask('local/sim-small', { stream: true, max_tokens: 2 }),
      200,
      'balance_exhausted',
      counted(7 * tokenCounter('o200k_base')('t0')),
    ],
    ['no model replied: nothing', { replies: () => ({ status: 500, chunks: ['{}'] }) }, ask('local/sim-small'), 500, 'provider_error', () => 0],
    ['the request limit passed before a reply: nothing', { env: { SLUICE_REQUEST_LIMIT_MS: '30' }, replies: () => ({ hang: true }) }, ask('local/sim-small'), 504, 'timeout', () => 0],
    [
      "served on the workspace's own key: nothing (the provider bills the workspace)",
      { replies: () => completion('gpt-4.1-mini'), prepare: (mg) => { mg.setWorkspace({ byok: { openai: 'byok/openai' } }); mg.secrets.set('byok/openai', 'sk-own'); } },
      ask('openai/gpt-4.1-mini'),
      200,
      'ok',
      () => 0,
    ],
  ];

  test.each(rows)('%s', async (_name, options, body, status, outcome, expectedCharge) => {
    const mg = memoryGateway(options);
    options.prepare?.(mg);
    const sink = await mg.serve({ json: body }, new CollectingSink(options.failWritesAfter));
    expect(sink.status).toBe(status);
    expectSettledOnce(mg);
    const settled = mg.ledger.settlements[0];
    expect(settled?.settlement.outcome).toBe(outcome);
    expect(settled?.settlement.chargeMicros).toBe(expectedCharge(settled?.hold ?? { amountMicros: NaN, inputMicros: NaN }));
    expect(mg.ledger.spentMicros).toBe(settled?.settlement.chargeMicros);
  });

  test('a stream that outgrows its hold grows it and is charged its counts', async () => {
    const frames = Array.from({ length: 12 }, (_, i) => delta(`t${i}`));
    const mg = memoryGateway({ replies: () => ({ chunks: [...frames, frame({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'sim-small', choices: [], usage: { prompt_tokens: 21, completion_tokens: 12, total_tokens: 33 } }), DONE] }) });
    const sink = await mg.serve({ json: ask('local/sim-small', { stream: true, max_tokens: 2 }) });
    expect(sink.text).toContain('data: [DONE]');
    expect(sink.text).toContain(':x-sluice-usage ');
    expectSettledOnce(mg);
    expect(mg.ledger.settlements[0]?.settlement).toMatchObject({ outcome: 'ok', chargeMicros: 21 * 10 + 12 * 40 });
    expect(mg.ledger.settlements[0]?.hold.amountMicros).toBeGreaterThan(mg.ledger.admitted[0]?.amountMicros ?? Infinity);
  });
});

describe('faults are logged by kind before they become refusals', () => {
  let lines: string[];
  let spy: jest.SpyInstance;
  beforeEach(() => {
    lines = [];
    spy = jest.spyOn(console, 'error').mockImplementation((line: unknown) => {
      lines.push(String(line));
    });
  });
  afterEach(() => spy.mockRestore());

  const SECRET = 'the prompt says: my password is hunter2';

  test.each<[string, 'admit' | 'countRequest' | 'settle' | 'extend', Record<string, unknown>, number, string | null]>([
    ['a TypeError in the ledger on admission: 503 balance_unavailable, logged', 'admit', ask('local/sim-small'), 503, 'balance_unavailable'],
    // Only the rate limit outranks a refusal; a fault while counting leaves the refusal standing.
    ['a TypeError counting the key rate beside a refusal: the refusal, the fault logged', 'countRequest', ask('local/sim-nope'), 404, 'model_not_found'],
  ])('%s', async (_name, method, body, status, code) => {
    const mg = memoryGateway({ replies: () => completion() });
    mg.ledger.faults = { [method]: new TypeError(SECRET) };
    const sink = await mg.serve({ json: body });
    expect(sink.status).toBe(status);
    expect((sink.json().error as Record<string, unknown>).code).toBe(code);
    const logged = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(logged).toContainEqual(expect.objectContaining({ level: 'error', fault: 'TypeError', phase: method === 'admit' ? 'admit' : 'rate' }));
    expect(lines.join('\n')).not.toContain('hunter2');
    expect(mg.ledger.heldMicros).toBe(0);
  });

  test('an admission that failed without an answer is released, under the refused request id, before the 503 goes out', async () => {
    const mg = memoryGateway({ replies: () => completion() });
    mg.ledger.faults = { admit: new TypeError(SECRET) };
    const sink = new CollectingSink();
    // Whether the answer had begun when the ledger was asked to release.
    const release = mg.ledger.release.bind(mg.ledger);
    let answeredFirst: boolean | undefined;
    mg.ledger.release = (w, id, now) => {
      answeredFirst = sink.started;
      return release(w, id, now);
    };
    await mg.serve({ json: ask('local/sim-small') }, sink);
    expect(sink.status).toBe(503);
    const id = (sink.json().error as Record<string, unknown>).request_id;
    expect(mg.ledger.released).toEqual([id]);
    expect(answeredFirst).toBe(false);
    expect(mg.upstream.calls).toHaveLength(0);
  });

  test('a release the store refuses is tried again until the request budget ends, then logged by kind', async () => {
    const mg = memoryGateway({ replies: () => completion(), env: { SLUICE_REQUEST_LIMIT_MS: '1500' } });
    mg.ledger.faults = { admit: new TypeError(SECRET), release: new TypeError(SECRET) };
    const sink = await mg.serve({ json: ask('local/sim-small') });
    expect(sink.status).toBe(503);
    const logged = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(logged).toContainEqual(expect.objectContaining({ level: 'error', phase: 'release', fault: 'TypeError' }));
    expect(lines.join('\n')).not.toContain('hunter2');
  });

  test('a TypeError in the ledger at settlement is logged and the client still has its reply', async () => {
    const mg = memoryGateway({ replies: () => completion() });
    mg.ledger.faults = { settle: new TypeError(SECRET) };
    const sink = await mg.serve({ json: ask('local/sim-small') });
    expect(sink.status).toBe(200);
    expect(lines.map((l) => JSON.parse(l) as Record<string, unknown>)).toContainEqual(expect.objectContaining({ phase: 'settle', fault: 'TypeError' }));
    expect(lines.join('\n')).not.toContain('hunter2');
  });

  test('a TypeError counting the rate of a GET: 503 balance_unavailable, logged', async () => {
    const mg = memoryGateway();
    mg.ledger.faults = { countRequest: new TypeError(SECRET) };
    const sink = await mg.serve({ method: 'GET', path: '/v1/models' });
    expect(sink.status).toBe(503);
    expect((sink.json().error as Record<string, unknown>).code).toBe('balance_unavailable');
    expect(lines.map((l) => JSON.parse(l) as Record<string, unknown>)).toContainEqual(expect.objectContaining({ phase: 'rate', fault: 'TypeError' }));
  });

  test('a fault in the key lookup is 503 balance_unavailable (issue 14: a store that stops answering is not a 500) and is logged', async () => {
    const mg = memoryGateway();
    mg.directory.findByHash = () => Promise.reject(new RangeError(SECRET));
    const sink = await mg.serve({ json: ask('local/sim-small') });
    expect(sink.status).toBe(503);
    expect(sink.json().error).toMatchObject({ code: 'balance_unavailable', type: 'server_error' });
    expect(lines.map((l) => JSON.parse(l) as Record<string, unknown>)).toContainEqual(expect.objectContaining({ phase: 'authenticate', fault: 'RangeError' }));
  });
});

describe('between requests: the idle port', () => {
  it('is called once the last request in flight is served, after its telemetry line, and not while another runs', async () => {
    let idle = 0;
    const linesSeenAt: number[] = [];
    const mg = memoryGateway({
      idle: () => {
        idle += 1;
      },
      telemetry: { request: () => linesSeenAt.push(idle) },
      replies: () => completion(),
    });
    // Two at once: the first to finish finds the other still in flight.
    const [a, b] = await Promise.all([mg.serve({ json: ask('local/sim-small') }), mg.serve({ json: ask('local/sim-small') })]);
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(idle).toBe(1);
    expect(linesSeenAt).toEqual([0, 0]);
    // A refusal ends a request as well.
    const refused = await mg.serve({ headers: {}, json: ask('local/sim-small') });
    expect(refused.status).toBe(401);
    expect(idle).toBe(2);
    expect(linesSeenAt).toEqual([0, 0, 1]);
  });
});
