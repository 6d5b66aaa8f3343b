/**
 * Upstream faults end to end: the provider's rate limit (429 `upstream_rate_limited` with SPEC's
 * Retry-After), its 5xx, a provider nobody can reach, SPEC's three `model_not_available` messages,
 * 503 `no_provider_configured`, the request deadline (504 before the first byte, an in-band
 * error frame after it), first-byte timeouts inside a route, and streams that break part way
 * (reset, a frame that is not JSON, the provider's own in-band error): one error frame in SPEC's
 * envelope, settled on what was produced. Every charge is asserted exactly, nothing where none is due.
 */
import { APIError } from 'openai';
import { createProfile } from '../../local/ops';
import type { Behavior } from '../../local/simulator';
import { startStack, expectInvariant, type TestStack } from '../support/stack';
import {
  addToCatalog,
  chargeOn,
  chatCounts,
  closedPort,
  dataOf,
  estimateOn,
  expectApiError,
  framesOf,
  localProvider,
  modelUnder,
  rawPost,
  rowOf,
  usageCommentOf,
} from '../support/e2e';

const chatBody = (model: string, extra: Record<string, unknown> = {}): string =>
  JSON.stringify({ model, messages: [{ role: 'user', content: 'Tell me something long' }], ...extra });

const chatModels = (stack: TestStack): unknown[] =>
  stack.sim.recorded.filter((r) => r.path === '/v1/chat/completions').map((r) => (r.json as { model?: unknown }).model);

/** Drains a stream through the official client: the chunks that arrived, and the error it ended with. */
async function drain(stream: AsyncIterable<unknown>): Promise<{ chunks: number; error: unknown }> {
  let chunks = 0;
  try {
    for await (const _ of stream) chunks += 1;
  } catch (err) {
    return { chunks, error: err };
  }
  return { chunks, error: undefined };
}

describe('with the default limits', () => {
  let stack: TestStack;

  beforeAll(async () => {
    stack = await startStack({ env: { SLUICE_DEAD_URL: `http://127.0.0.1:${await closedPort()}/v1` } });
    await addToCatalog(
      stack,
      [
        { ...localProvider(), name: 'dead', displayName: 'Provider nobody answers for', baseUrlEnv: 'SLUICE_DEAD_URL' },
        // Takes a key of the service's own, and none is configured.
        {
          ...localProvider(),
          name: 'keyless',
          displayName: 'Provider without a key',
          keySource: { secretName: 'sluice/{stage}/providers/keyless', env: 'SLUICE_PROVIDER_KEY_KEYLESS' },
        },
      ],
      [modelUnder('dead', 'local/sim-small'), modelUnder('keyless', 'local/sim-small')],
    );
  });

  afterAll(async () => {
    await stack?.close();
  });

  beforeEach(() => stack.sim.reset());

  it.each<[string, Record<string, string>, string]>([
    ['the provider figure', { 'retry-after': '17' }, '17'],
    ['held to 60 at most', { 'retry-after': '600' }, '60'],
    ['held to 1 at least', { 'retry-after': '0' }, '1'],
    ['rounded up to whole seconds', { 'retry-after': '2.2' }, '3'],
    ['5 when the provider sent none', {}, '5'],
    ['5 when the provider sent an empty one', { 'retry-after': '' }, '5'],
  ])('429 upstream_rate_limited with Retry-After: %s', async (_label, headers, expected) => {
    stack.sim.script('sim-small', [{ kind: 'error', status: 429, headers: { ...headers, 'x-ratelimit-remaining-requests': '0' } }]);
    const before = await stack.balance();
    const e = await expectApiError(
      stack.client().chat.completions.create({ model: 'local/sim-small', messages: [{ role: 'user', content: 'x' }] }),
      429,
      'upstream_rate_limited',
      'rate_limit_error',
      null,
    );
    expect(e.headers?.get('retry-after')).toBe(expected);
    expect(e.headers?.get('x-ratelimit-remaining-requests')).toBeNull();
    await stack.settled();
    const after = await stack.balance();
    expect(after).toEqual(before);
    expect(await rowOf(stack, e.requestID ?? null)).toMatchObject({ status: 429, chargeMicros: 0, outcome: 'provider_error' });
    expectInvariant(after);
  });

  it('a streamed request rate-limited before its first byte gets the same JSON 429', async () => {
    stack.sim.script('sim-small', [{ kind: 'error', status: 429, headers: { 'retry-after': '9' } }]);
    const res = await rawPost(stack, '/chat/completions', chatBody('local/sim-small', { stream: true }));
    expect(res.status).toBe(429);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.headers.get('retry-after')).toBe('9');
    expect((JSON.parse(res.text) as { error: { code: string } }).error.code).toBe('upstream_rate_limited');
    await stack.settled();
    expectInvariant(await stack.balance());
  });

  it('a profile answers 429 only once every member is rate-limited, with the soonest Retry-After', async () => {
    await createProfile(stack.admin, { workspaceId: stack.workspaceId, identifier: 'all-limited', models: ['local/sim-small', 'local/sim-large', 'local/org/sim-nested'] });
    stack.sim.script('sim-small', [{ kind: 'error', status: 429, headers: { 'retry-after': '30' } }]);
    stack.sim.script('sim-large', [{ kind: 'error', status: 429, headers: { 'retry-after': '7' } }]);
    stack.sim.script('org/sim-nested', [{ kind: 'error', status: 429, headers: { 'retry-after': '12' } }]);
    const before = await stack.balance();
    const e = await expectApiError(
      stack.client().chat.completions.create({ model: 'profile/all-limited', messages: [{ role: 'user', content: 'x' }] }),
      429,
      'upstream_rate_limited',
      'rate_limit_error',
    );
    expect(e.headers?.get('retry-after')).toBe('7');
    expect(chatModels(stack)).toEqual(['sim-small', 'sim-large', 'org/sim-nested']);
    await stack.settled();
    const after = await stack.balance();
    expect(after).toEqual(before);
    const row = await rowOf(stack, e.requestID ?? null);
    expect(row).toMatchObject({ status: 429, attempts: 3, chargeMicros: 0 });
    expect(row.servedBy).toBeUndefined();
    expectInvariant(after);
  });

  it("a provider's 5xx is a 500 api_error, its body not relayed, nothing charged", async () => {
    stack.sim.script('sim-small', [{ kind: 'error', status: 502, body: '<html>Bad gateway at upstream-lb-7</html>' }]);
    const before = await stack.balance();
    const e = await expectApiError(stack.client().chat.completions.create({ model: 'local/sim-small', messages: [{ role: 'user', content: 'x' }] }), 500, null, 'api_error', null);
    expect(e.message).not.toContain('upstream-lb-7');
    await stack.settled();
    expect(await stack.balance()).toEqual(before);
    expectInvariant(await stack.balance());
  });

  it("model_not_available's three messages: retired, unreachable, not served; a replacement only when the provider named one", async () => {
    const chat = (model: string): Promise<unknown> => stack.client().chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }] });
    const retired = await expectApiError(chat('local/sim-retired'), 404, 'model_not_available', 'not_found_error', null);
    const retiredBare = await expectApiError(chat('local/sim-retired-norepl'), 404, 'model_not_available', 'not_found_error', null);
    const unreachable = await expectApiError(chat('local/sim-unreachable'), 404, 'model_not_available', 'not_found_error', null);
    const notServed = await expectApiError(chat('local/sim-not-served'), 404, 'model_not_available', 'not_found_error', null);
    expect(retired.message).toMatch(/retired/);
    expect(retired.message).toMatch(/neither retrying nor changing the request/);
    expect(retired.message).toContain('local/sim-small');
    expect(retiredBare.message).toMatch(/retired/);
    expect(retiredBare.message).not.toMatch(/replacement/);
    expect(unreachable.message).toMatch(/still serves .* cannot reach it right now/);
    expect(unreachable.message).toMatch(/Nothing about the request is wrong/);
    expect(notServed.message).toMatch(/not served at the moment/);
    expect(notServed.message).toMatch(/retrying later/);
    expect(new Set([retired.message, unreachable.message, notServed.message]).size).toBe(3);
    expect(stack.sim.recorded).toHaveLength(0);
  });

  it('a provider that cannot be reached right now is 404 model_not_available with the unreachable message; nothing charged', async () => {
    const before = await stack.balance();
    const refused = await expectApiError(stack.client().chat.completions.create({ model: 'dead/sim-small', messages: [{ role: 'user', content: 'x' }] }), 404, 'model_not_available', 'not_found_error', null);
    expect(refused.message).toMatch(/cannot reach it right now/);
    // A connection dropped before the first byte reads the same.
    stack.sim.script('sim-small', [{ kind: 'reset', afterChunks: 0 }]);
    const dropped = await expectApiError(stack.client().chat.completions.create({ model: 'local/sim-small', messages: [{ role: 'user', content: 'x' }] }), 404, 'model_not_available');
    expect(dropped.message).toMatch(/cannot reach it right now/);
    await stack.settled();
    expect(await stack.balance()).toEqual(before);
    expect(await rowOf(stack, refused.requestID ?? null)).toMatchObject({ status: 404, chargeMicros: 0, attempts: 1 });
    expectInvariant(await stack.balance());
  });

  it('503 no_provider_configured for a model whose provider has no key; a profile leaves such a member out', async () => {
    const before = await stack.balance();
    await expectApiError(
      stack.client().chat.completions.create({ model: 'keyless/sim-small', messages: [{ role: 'user', content: 'x' }] }),
      503,
      'no_provider_configured',
      'api_error',
      null,
    );
    expect(stack.sim.recorded).toHaveLength(0);
    expect(await stack.balance()).toEqual(before);

    await createProfile(stack.admin, { workspaceId: stack.workspaceId, identifier: 'keyless-first', models: ['keyless/sim-small', 'local/sim-small'] });
    const { data, response } = await stack.client().chat.completions.create({ model: 'profile/keyless-first', messages: [{ role: 'user', content: 'x' }] }).withResponse();
    expect(response.headers.get('x-sluice-served-by')).toBe('local/sim-small');
    expect(chatModels(stack)).toEqual(['sim-small']);
    await stack.settled();
    const after = await stack.balance();
    expect(before.availableMicros - after.availableMicros).toBe(await chargeOn(stack, 'local/sim-small', chatCounts(data.usage!)));
    expectInvariant(after);
  });

  describe('a stream that breaks part way ends with one in-band error frame and is charged for what it produced', () => {
    it.each<[string, Behavior, number]>([
      ['an upstream reset', { kind: 'reset', afterChunks: 4 }, 4],
      ['a frame that is not JSON', { kind: 'malformed', afterChunks: 3 }, 3],
      ["the provider's own in-band error", { kind: 'stream-error', afterChunks: 2, message: 'The server had an error while processing your request (upstream-host-9).' }, 2],
    ])('%s', async (_label, behavior, goodFrames) => {
      stack.sim.script('sim-small', [behavior]);
      const before = await stack.balance();
      const raw = chatBody('local/sim-small', { stream: true });
      const res = await rawPost(stack, '/chat/completions', raw);
      expect(res.status).toBe(200);
      const requestId = res.headers.get('x-sluice-request-id');
      const frames = framesOf(res.text);
      // The good frames, unchanged; then our error frame; then the usage comment; no [DONE].
      expect(frames).toHaveLength(goodFrames + 2);
      for (const f of frames.slice(0, goodFrames)) {
        const chunk = dataOf(f)!;
        expect(chunk.object).toBe('chat.completion.chunk');
        expect(chunk.model).toBe('sim-small');
      }
      const error = dataOf(frames[goodFrames]!);
      expect(error).toEqual({
        error: { message: expect.any(String) as unknown, type: 'api_error', param: null, code: 'upstream_stream_failed', request_id: requestId },
      });
      expect(res.text).not.toContain('not json');
      expect(res.text).not.toContain('upstream-host-9');
      expect(res.text).not.toContain('[DONE]');
      const usage = usageCommentOf(frames[goodFrames + 1]);
      expect(usage.estimated).toBe(true);

      await stack.settled();
      const after = await stack.balance();
      const row = await rowOf(stack, requestId);
      const expected = await estimateOn(stack, 'local/sim-small', raw, goodFrames, row.holdMicros);
      expect(expected).toBeGreaterThan(0);
      expect(row).toMatchObject({ servedBy: 'local/sim-small', stream: true, status: 200, outcome: 'upstream_fault', chargeMicros: expected });
      expect(usage.charge_micros).toBe(expected);
      expect(before.availableMicros - after.availableMicros).toBe(expected);
      expect(after.heldMicros).toBe(0);
      expectInvariant(after);
    });

    it('the official client gets the chunks that arrived, then an APIError with code upstream_stream_failed', async () => {
      stack.sim.script('sim-small', [{ kind: 'malformed', afterChunks: 3 }]);
      const stream = await stack.client().chat.completions.create({ model: 'local/sim-small', messages: [{ role: 'user', content: 'x' }], stream: true });
      const { chunks, error } = await drain(stream);
      expect(chunks).toBe(3);
      expect(error).toBeInstanceOf(APIError);
      expect((error as APIError).code).toBe('upstream_stream_failed');
      expect((error as APIError).requestID).toMatch(/^req_/);
      await stack.settled();
      expectInvariant(await stack.balance());
    });
  });

  it('a non-streamed reply that is not JSON is a 500, charged at the prompt bound of the model that answered', async () => {
    stack.sim.script('sim-small', [{ kind: 'malformed', afterChunks: 0 }]);
    const before = await stack.balance();
    const raw = chatBody('local/sim-small');
    const res = await rawPost(stack, '/chat/completions', raw);
    expect(res.status).toBe(500);
    expect((JSON.parse(res.text) as { error: { type: string; code: unknown } }).error).toMatchObject({ type: 'api_error', code: null });
    await stack.settled();
    const after = await stack.balance();
    const row = await rowOf(stack, res.headers.get('x-sluice-request-id'));
    const expected = await estimateOn(stack, 'local/sim-small', raw, 0, row.holdMicros);
    expect(row).toMatchObject({ status: 500, outcome: 'upstream_fault', chargeMicros: expected, servedBy: 'local/sim-small' });
    expect(before.availableMicros - after.availableMicros).toBe(expected);
    expectInvariant(after);
  });
});

describe('with a short request limit and attempt timeout', () => {
  // 4 s for the whole request; 1.5 s for the first byte of a model that is not a route's last.
  let stack: TestStack;

  beforeAll(async () => {
    stack = await startStack({ env: { SLUICE_REQUEST_LIMIT_MS: '4000', SLUICE_ATTEMPT_TIMEOUT_MS: '1500' } });
  });

  afterAll(async () => {
    await stack?.close();
  });

  beforeEach(() => stack.sim.reset());

  it('504 when nothing arrived before the request limit, streamed or not; nothing charged', async () => {
    stack.sim.setDefault('sim-small', { kind: 'stall', ms: 60_000 });
    const before = await stack.balance();
    const [plain, streamed] = await Promise.all([
      expectApiError(stack.client().chat.completions.create({ model: 'local/sim-small', messages: [{ role: 'user', content: 'x' }] }), 504, 'request_timeout', 'server_error', null),
      rawPost(stack, '/chat/completions', chatBody('local/sim-small', { stream: true })),
    ]);
    expect(streamed.status).toBe(504);
    expect(streamed.headers.get('content-type')).toMatch(/^application\/json/);
    expect((JSON.parse(streamed.text) as { error: { code: string } }).error.code).toBe('request_timeout');
    await stack.settled();
    const after = await stack.balance();
    expect(after).toEqual(before);
    expect(await rowOf(stack, plain.requestID ?? null)).toMatchObject({ status: 504, chargeMicros: 0, outcome: 'timeout' });
    expect(await rowOf(stack, streamed.headers.get('x-sluice-request-id'))).toMatchObject({ status: 504, chargeMicros: 0, outcome: 'timeout' });
    expectInvariant(after);
  });

  it('once streaming, the request limit ends the stream with an in-band error frame, charged for what was produced', async () => {
    stack.sim.script('sim-small', [{ kind: 'stall', ms: 60_000, afterChunks: 3 }]);
    const before = await stack.balance();
    const raw = chatBody('local/sim-small', { stream: true });
    const res = await rawPost(stack, '/chat/completions', raw);
    expect(res.status).toBe(200);
    const frames = framesOf(res.text);
    expect(frames).toHaveLength(5);
    expect(dataOf(frames[3]!)).toMatchObject({ error: { code: 'request_timeout', type: 'server_error', param: null, request_id: res.headers.get('x-sluice-request-id') } });
    const usage = usageCommentOf(frames[4]);
    await stack.settled();
    const after = await stack.balance();
    const row = await rowOf(stack, res.headers.get('x-sluice-request-id'));
    const expected = await estimateOn(stack, 'local/sim-small', raw, 3, row.holdMicros);
    expect(row).toMatchObject({ outcome: 'timeout', chargeMicros: expected, stream: true });
    expect(usage.charge_micros).toBe(expected);
    expect(before.availableMicros - after.availableMicros).toBe(expected);
    expectInvariant(after);
  });

  it('a route moves on when a model has not begun answering within the attempt timeout', async () => {
    await createProfile(stack.admin, { workspaceId: stack.workspaceId, identifier: 'slow-first', models: ['local/sim-small', 'local/sim-large'] });
    stack.sim.script('sim-small', [{ kind: 'stall', ms: 60_000 }]);
    const before = await stack.balance();
    const { data, response } = await stack.client().chat.completions.create({ model: 'profile/slow-first', messages: [{ role: 'user', content: 'x' }] }).withResponse();
    expect(response.headers.get('x-sluice-served-by')).toBe('local/sim-large');
    expect(response.headers.get('x-sluice-retry-attempt-count')).toBe('1');
    expect(chatModels(stack)).toEqual(['sim-small', 'sim-large']);
    await stack.settled();
    const after = await stack.balance();
    const expected = await chargeOn(stack, 'local/sim-large', chatCounts(data.usage!));
    expect(before.availableMicros - after.availableMicros).toBe(expected);
    expect(await rowOf(stack, response.headers.get('x-sluice-request-id'))).toMatchObject({ servedBy: 'local/sim-large', attempts: 2, chargeMicros: expected });
    expectInvariant(after);
  });

  it('the attempt timeout is for the first byte only: a stream that began is not cut when it runs longer', async () => {
    await createProfile(stack.admin, { workspaceId: stack.workspaceId, identifier: 'slow-stream', models: ['local/sim-small', 'local/sim-large'] });
    // About 2 s of frames: longer than the attempt timeout, well inside the request limit.
    stack.sim.script('sim-small', [{ kind: 'ok', completionTokens: 8, chunkDelayMs: 200 }]);
    const before = await stack.balance();
    const res = await rawPost(stack, '/chat/completions', chatBody('profile/slow-stream', { stream: true, stream_options: { include_usage: true } }));
    expect(res.status).toBe(200);
    expect(res.headers.get('x-sluice-served-by')).toBe('local/sim-small');
    const frames = framesOf(res.text);
    expect(frames.at(-1)).toBe('data: [DONE]');
    expect(res.text).not.toContain('"error"');
    const usageChunk = dataOf(frames.at(-3)!) as { usage: { prompt_tokens: number; completion_tokens: number } };
    expect(usageChunk.usage.completion_tokens).toBe(8);
    expect(chatModels(stack)).toEqual(['sim-small']);
    await stack.settled();
    const after = await stack.balance();
    const expected = await chargeOn(stack, 'local/sim-small', { inputTokens: usageChunk.usage.prompt_tokens, cachedInputTokens: 0, outputTokens: 8, reasoningTokens: 0 });
    expect(usageCommentOf(frames.at(-2)).charge_micros).toBe(expected);
    expect(before.availableMicros - after.availableMicros).toBe(expected);
    expectInvariant(after);
  });
});

describe('with no provider configured at all', () => {
  let stack: TestStack;

  beforeAll(async () => {
    // The simulator's address is the only thing that makes provider `local` usable.
    stack = await startStack({ env: { SLUICE_LOCAL_UPSTREAM_URL: '' } });
  });

  afterAll(async () => {
    await stack?.close();
  });

  it('503 no_provider_configured on the model list and on chat, holding and calling nothing', async () => {
    const before = await stack.balance();
    await expectApiError(stack.client().models.list(), 503, 'no_provider_configured', 'api_error', null);
    await expectApiError(stack.client().chat.completions.create({ model: 'local/sim-small', messages: [{ role: 'user', content: 'x' }] }), 503, 'no_provider_configured', 'api_error', null);
    await expectApiError(stack.client().chat.completions.create({ model: 'openai/gpt-5', messages: [{ role: 'user', content: 'x' }] }), 503, 'no_provider_configured', 'api_error', null);
    expect(stack.sim.recorded).toHaveLength(0);
    expect(await stack.balance()).toEqual(before);
    expect(await stack.usageRows()).toHaveLength(0);
  });
});
