/**
 * Routing profiles end to end with the official client: `profile/<identifier>` and `sluice/auto`
 * try the customer's models in order; rate limits, 5xx, unreachable providers and first-byte
 * timeouts move on (first-byte timeouts: faults.test.ts), a provider's 400-series refusal ends the request; the body's `model` is
 * replaced on each attempt (and `max_tokens` added only for a provider whose API needs it); the
 * headers, the usage row and the charge name the model that served; the hold covers the most
 * expensive member; the permitted set is applied before any provider is called.
 */
import OpenAI from 'openai';
import { addCredit, createProfile, setDefaultProfile, setPermittedModels } from '../../local/ops';
import { startSimulator, type Simulator } from '../../local/simulator';
import { startStack, expectInvariant, type TestStack } from '../support/stack';
import { addToCatalog, chargeOn, closedPort, chatCounts, expectApiError, holdOn, localProvider, modelUnder, rawPost, rowOf } from '../support/e2e';

let stack: TestStack;
/** A provider whose API refuses a chat request that names no ceiling. */
let strictSim: Simulator;

beforeAll(async () => {
  strictSim = await startSimulator({ requireMaxTokens: true });
  const deadUrl = `http://127.0.0.1:${await closedPort()}/v1`;
  stack = await startStack({ env: { SLUICE_STRICT_URL: strictSim.url, SLUICE_DEAD_URL: deadUrl } });
  await addToCatalog(
    stack,
    [
      { ...localProvider(), name: 'strict', displayName: 'Simulator that needs max_tokens', requiresMaxTokens: true, baseUrlEnv: 'SLUICE_STRICT_URL' },
      { ...localProvider(), name: 'dead', displayName: 'Provider nobody answers for', baseUrlEnv: 'SLUICE_DEAD_URL' },
    ],
    [modelUnder('strict', 'local/sim-small'), modelUnder('dead', 'local/sim-small')],
  );
});

afterAll(async () => {
  await stack?.close();
  await strictSim?.close();
});

beforeEach(() => {
  stack.sim.reset();
  strictSim.reset();
});

const chatCalls = (sim: Simulator): { model: unknown; rawBody: string; headers: Record<string, string> }[] =>
  sim.recorded.filter((r) => r.path === '/v1/chat/completions').map((r) => ({ model: (r.json as { model?: unknown }).model, rawBody: r.rawBody, headers: r.headers }));

async function profile(identifier: string, models: string[], workspaceId = stack.workspaceId): Promise<string> {
  await createProfile(stack.admin, { workspaceId, identifier, models });
  return `profile/${identifier}`;
}

describe('profile fallback', () => {
  it('tries the models in the customer order past a 5xx and a 429, and names the one that served everywhere', async () => {
    const slug = await profile('fallback', ['local/sim-small', 'local/sim-large', 'local/org/sim-nested']);
    stack.sim.script('sim-small', [{ kind: 'error', status: 500 }]);
    stack.sim.script('sim-large', [{ kind: 'error', status: 429, headers: { 'retry-after': '3' } }]);
    const before = await stack.balance();
    const client = new OpenAI({ baseURL: stack.baseURL, apiKey: stack.rawKey, maxRetries: 0, organization: 'org-abc', project: 'proj-abc' });
    const { data, response } = await client.chat.completions
      .create({ model: slug, messages: [{ role: 'user', content: 'Route me somewhere' }], temperature: 0.5, max_tokens: 40 })
      .withResponse();

    expect(response.status).toBe(200);
    expect(response.headers.get('x-sluice-served-by')).toBe('local/org/sim-nested');
    expect(response.headers.get('x-sluice-provider')).toBe('local');
    expect(response.headers.get('x-sluice-retry-attempt-count')).toBe('2');
    // A route is a chain, not one model: the reply keeps the provider's model string.
    expect(data.model).toBe('org/sim-nested');

    // One attempt per model, in order; each body is the client's bytes with only `model` replaced.
    const calls = chatCalls(stack.sim);
    expect(calls.map((c) => c.model)).toEqual(['sim-small', 'sim-large', 'org/sim-nested']);
    const sent = calls[0]!.rawBody.replace('"model":"sim-small"', `"model":"${slug}"`);
    expect(JSON.parse(sent)).toEqual({ model: slug, messages: [{ role: 'user', content: 'Route me somewhere' }], temperature: 0.5, max_tokens: 40 });
    for (const c of calls) {
      expect(c.rawBody).toBe(sent.replace(`"model":"${slug}"`, `"model":${JSON.stringify(c.model)}`));
      for (const h of ['openai-organization', 'openai-project']) expect(Object.keys(c.headers)).not.toContain(h);
      expect(JSON.stringify(c.headers)).not.toContain(stack.rawKey);
    }

    await stack.settled();
    const after = await stack.balance();
    const expected = await chargeOn(stack, 'local/org/sim-nested', chatCounts(data.usage!));
    expect(expected).toBeGreaterThan(0);
    const row = await rowOf(stack, response.headers.get('x-sluice-request-id'));
    expect(row).toMatchObject({
      requestedModel: slug,
      servedBy: 'local/org/sim-nested',
      provider: 'local',
      attempts: 3,
      family: 'chat_completions',
      outcome: 'ok',
      chargeMicros: expected,
      inputTokens: data.usage!.prompt_tokens,
      outputTokens: data.usage!.completion_tokens,
    });
    // The hold covered the chain's most expensive member, whichever served.
    const holds = await Promise.all(['local/sim-small', 'local/sim-large', 'local/org/sim-nested'].map((id) => holdOn(stack, id, sent)));
    expect(row.holdMicros).toBe(Math.max(...holds.map((h) => h.amountMicros)));
    expect(row.holdMicros).toBe(holds[1]!.amountMicros);
    expect(before.availableMicros - after.availableMicros).toBe(expected);
    expect(after.spentMicros - before.spentMicros).toBe(expected);
    expect(after.heldMicros).toBe(0);
    expectInvariant(after);
  });

  it('stops at the first model that answers', async () => {
    const slug = await profile('first-wins', ['local/sim-small', 'local/sim-large']);
    const before = await stack.balance();
    const { data, response } = await stack.client().chat.completions.create({ model: slug, messages: [{ role: 'user', content: 'hello' }] }).withResponse();
    expect(response.headers.get('x-sluice-served-by')).toBe('local/sim-small');
    expect(response.headers.get('x-sluice-retry-attempt-count')).toBe('0');
    expect(data.model).toBe('sim-small');
    expect(chatCalls(stack.sim).map((c) => c.model)).toEqual(['sim-small']);
    await stack.settled();
    const after = await stack.balance();
    const expected = await chargeOn(stack, 'local/sim-small', chatCounts(data.usage!));
    expect(before.availableMicros - after.availableMicros).toBe(expected);
    expect(await rowOf(stack, response.headers.get('x-sluice-request-id'))).toMatchObject({ servedBy: 'local/sim-small', attempts: 1, chargeMicros: expected });
    expectInvariant(after);
  });

  it('drops a member it cannot price and serves with the rest; refuses only when none is left', async () => {
    const slug = await profile('skip-unpriced', ['local/sim-no-max', 'local/sim-small']);
    const { response } = await stack.client().chat.completions.create({ model: slug, messages: [{ role: 'user', content: 'x' }] }).withResponse();
    expect(response.headers.get('x-sluice-served-by')).toBe('local/sim-small');
    expect(chatCalls(stack.sim).map((c) => c.model)).toEqual(['sim-small']);
    const only = await profile('only-unpriced', ['local/sim-no-max']);
    await expect(stack.client().chat.completions.create({ model: only, messages: [{ role: 'user', content: 'x' }] })).rejects.toMatchObject({
      status: 503,
      code: 'model_not_priceable',
    });
    await stack.settled();
    expectInvariant(await stack.balance());
  });

  it("ends on a provider's 400-series refusal of the request, relayed, without trying the next model or charging", async () => {
    const slug = await profile('refusal-ends', ['local/sim-small', 'local/sim-large']);
    stack.sim.script('sim-small', [{ kind: 'error', status: 400, param: 'temperature', message: "Unsupported value: 'temperature' does not support 3 with this model." }]);
    const before = await stack.balance();
    const e = await expectApiError(
      stack.client().chat.completions.create({ model: slug, messages: [{ role: 'user', content: 'x' }], temperature: 3 }),
      400,
      'unsupported_value',
      'invalid_request_error',
      'temperature',
    );
    expect(e.message).toContain("Unsupported value: 'temperature'");
    expect(chatCalls(stack.sim).map((c) => c.model)).toEqual(['sim-small']);
    await stack.settled();
    const after = await stack.balance();
    expect(after.availableMicros).toBe(before.availableMicros);
    const row = await rowOf(stack, e.requestID ?? null);
    expect(row).toMatchObject({ status: 400, chargeMicros: 0, attempts: 1, outcome: 'provider_error' });
    expect(row.servedBy).toBeUndefined();
    expectInvariant(after);
  });

  it('moves on past an unreachable provider and a connection dropped before the first byte', async () => {
    const slug = await profile('gone', ['dead/sim-small', 'local/sim-large', 'local/org/sim-nested']);
    // The connection is dropped before a byte of the reply.
    stack.sim.script('sim-large', [{ kind: 'reset', afterChunks: 0 }]);
    const before = await stack.balance();
    const { data, response } = await stack.client().chat.completions.create({ model: slug, messages: [{ role: 'user', content: 'anyone?' }] }).withResponse();
    expect(response.headers.get('x-sluice-served-by')).toBe('local/org/sim-nested');
    expect(response.headers.get('x-sluice-retry-attempt-count')).toBe('2');
    expect(chatCalls(stack.sim).map((c) => c.model)).toEqual(['sim-large', 'org/sim-nested']);
    await stack.settled();
    const after = await stack.balance();
    const expected = await chargeOn(stack, 'local/org/sim-nested', chatCounts(data.usage!));
    expect(before.availableMicros - after.availableMicros).toBe(expected);
    expect(await rowOf(stack, response.headers.get('x-sluice-request-id'))).toMatchObject({ servedBy: 'local/org/sim-nested', attempts: 3, chargeMicros: expected });
    expectInvariant(after);
  });

  it('relays a streamed tool call intact after a fallback, and charges the model that served', async () => {
    const slug = await profile('tools', ['local/sim-small', 'local/sim-large']);
    const args = '{"city":"Zürich","unit":"°C","note":"a \\"quoted\\" 😀 word"}';
    stack.sim.script('sim-small', [{ kind: 'error', status: 429 }]);
    stack.sim.script('sim-large', [{ kind: 'ok', toolCalls: [{ name: 'get_weather', arguments: args }] }]);
    const before = await stack.balance();
    const { data: stream, response } = await stack
      .client()
      .chat.completions.create({
        model: slug,
        messages: [{ role: 'user', content: 'Weather in Zürich?' }],
        tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }],
        tool_choice: 'auto',
        stream: true,
        stream_options: { include_usage: true },
      })
      .withResponse();
    expect(response.headers.get('x-sluice-served-by')).toBe('local/sim-large');
    expect(response.headers.get('x-sluice-retry-attempt-count')).toBe('1');
    let name = '';
    let joined = '';
    let finish: string | null | undefined;
    let toolChunks = 0;
    let usage: OpenAI.CompletionUsage | undefined;
    const models = new Set<string>();
    for await (const chunk of stream) {
      models.add(chunk.model);
      for (const call of chunk.choices[0]?.delta.tool_calls ?? []) {
        toolChunks += 1;
        expect(call.index).toBe(0);
        name += call.function?.name ?? '';
        joined += call.function?.arguments ?? '';
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(name).toBe('get_weather');
    expect(joined).toBe(args);
    expect(toolChunks).toBeGreaterThan(2);
    expect(finish).toBe('tool_calls');
    expect([...models]).toEqual(['sim-large']);
    const calls = chatCalls(stack.sim);
    expect(calls.map((c) => c.model)).toEqual(['sim-small', 'sim-large']);
    expect(calls[1]!.rawBody).toBe(calls[0]!.rawBody.replace('"model":"sim-small"', '"model":"sim-large"'));

    await stack.settled();
    const after = await stack.balance();
    const expected = await chargeOn(stack, 'local/sim-large', chatCounts(usage!));
    expect(expected).toBeGreaterThan(0);
    expect(before.availableMicros - after.availableMicros).toBe(expected);
    expect(await rowOf(stack, response.headers.get('x-sluice-request-id'))).toMatchObject({
      servedBy: 'local/sim-large',
      requestedModel: slug,
      attempts: 2,
      stream: true,
      outcome: 'ok',
      chargeMicros: expected,
    });
    expectInvariant(after);
  });

  it('refuses an unknown profile 404 model_not_found, calling nothing', async () => {
    await expectApiError(stack.client().chat.completions.create({ model: 'profile/nope', messages: [{ role: 'user', content: 'x' }] }), 404, 'model_not_found', 'not_found_error', null);
    expect(stack.sim.recorded).toHaveLength(0);
  });
});

describe('sluice/auto', () => {
  it('is refused 404 model_not_available without a default, and resolves the default profile once set', async () => {
    const ws = await stack.seed(100_000);
    const e = await expectApiError(
      stack.client(ws.rawKey).chat.completions.create({ model: 'sluice/auto', messages: [{ role: 'user', content: 'x' }] }),
      404,
      'model_not_available',
      'not_found_error',
      null,
    );
    expect(e.message).toMatch(/default/);
    expect(stack.sim.recorded).toHaveLength(0);
    expect(await stack.usageRows(ws.workspaceId)).toHaveLength(0);

    await profile('auto-chain', ['local/sim-large', 'local/sim-small'], ws.workspaceId);
    await setDefaultProfile(stack.admin, { workspaceId: ws.workspaceId, identifier: 'auto-chain' });
    stack.sim.script('sim-large', [{ kind: 'error', status: 503 }]);
    const before = await stack.balance(ws.workspaceId);
    const { data, response } = await stack
      .client(ws.rawKey)
      .chat.completions.create({ model: 'sluice/auto', messages: [{ role: 'user', content: 'auto please' }] })
      .withResponse();
    expect(response.headers.get('x-sluice-served-by')).toBe('local/sim-small');
    expect(response.headers.get('x-sluice-retry-attempt-count')).toBe('1');
    expect(data.model).toBe('sim-small');
    expect(chatCalls(stack.sim).map((c) => c.model)).toEqual(['sim-large', 'sim-small']);
    await stack.settled(ws.workspaceId);
    const after = await stack.balance(ws.workspaceId);
    const expected = await chargeOn(stack, 'local/sim-small', chatCounts(data.usage!));
    expect(before.availableMicros - after.availableMicros).toBe(expected);
    expect(await rowOf(stack, response.headers.get('x-sluice-request-id'), ws.workspaceId)).toMatchObject({
      requestedModel: 'sluice/auto',
      servedBy: 'local/sim-small',
      attempts: 2,
      chargeMicros: expected,
    });
    expectInvariant(after);
  });
});

describe('permitted models', () => {
  it('403 model_not_permitted before any provider is called; a profile skips excluded members', async () => {
    const ws = await stack.seed(100_000);
    await setPermittedModels(stack.admin, { workspaceId: ws.workspaceId, models: ['local/sim-large', 'local/sim-retired'] });
    const client = stack.client(ws.rawKey);
    const chat = (model: string): Promise<unknown> => client.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }] });
    const before = await stack.balance(ws.workspaceId);

    await expectApiError(chat('local/sim-small'), 403, 'model_not_permitted', 'permission_error', null);
    // Every member that could be served is excluded (the retired one cannot be served at all).
    await expectApiError(chat(await profile('excluded', ['local/sim-retired', 'local/sim-small', 'local/org/sim-nested'], ws.workspaceId)), 403, 'model_not_permitted', 'permission_error', null);
    // Nothing in the profile can be served: that is 404, not 403.
    await expectApiError(chat(await profile('unservable', ['local/sim-retired', 'local/sim-not-served'], ws.workspaceId)), 404, 'model_not_available', 'not_found_error', null);
    expect(stack.sim.recorded).toHaveLength(0);
    expect(await stack.usageRows(ws.workspaceId)).toHaveLength(0);
    expect(await stack.balance(ws.workspaceId)).toEqual(before);

    const slug = await profile('partly', ['local/sim-small', 'local/sim-large'], ws.workspaceId);
    const { data, response } = await client.chat.completions.create({ model: slug, messages: [{ role: 'user', content: 'x' }] }).withResponse();
    expect(response.headers.get('x-sluice-served-by')).toBe('local/sim-large');
    expect(response.headers.get('x-sluice-retry-attempt-count')).toBe('0');
    expect(chatCalls(stack.sim).map((c) => c.model)).toEqual(['sim-large']);
    await stack.settled(ws.workspaceId);
    const after = await stack.balance(ws.workspaceId);
    expect(before.availableMicros - after.availableMicros).toBe(await chargeOn(stack, 'local/sim-large', chatCounts(data.usage!)));
    expectInvariant(after);
  });
});

describe('hold sizing', () => {
  it("holds for the chain's most expensive member: 402 for the profile where its cheap first member alone would pass", async () => {
    const ws = await stack.seed(0);
    await addCredit(stack.admin, { workspaceId: ws.workspaceId, minor: 1 });
    const client = stack.client(ws.rawKey);
    const body = { messages: [{ role: 'user' as const, content: 'x' }] };
    const raw = (model: string): string => JSON.stringify({ model, ...body });
    // Without a ceiling the hold is each model's maximum output: sim-large's exceeds 1 minor unit, sim-small's does not.
    expect((await holdOn(stack, 'local/sim-large', raw('local/sim-large'))).amountMicros).toBeGreaterThan(1_000_000);
    expect((await holdOn(stack, 'local/sim-small', raw('local/sim-small'))).amountMicros).toBeLessThan(1_000_000);
    const slug = await profile('cheap-first', ['local/sim-small', 'local/sim-large'], ws.workspaceId);
    await expectApiError(client.chat.completions.create({ model: slug, ...body }), 402, 'insufficient_credit', 'insufficient_quota', null);
    expect(stack.sim.recorded).toHaveLength(0);
    const before = await stack.balance(ws.workspaceId);
    const data = await client.chat.completions.create({ model: 'local/sim-small', ...body });
    await stack.settled(ws.workspaceId);
    const after = await stack.balance(ws.workspaceId);
    expect(before.availableMicros - after.availableMicros).toBe(await chargeOn(stack, 'local/sim-small', chatCounts(data.usage!)));
    expectInvariant(after);
  });
});

describe('body rewrites', () => {
  const raw = (model: string, extra = ''): string => `{"model":"${model}","messages":[{"role":"user","content":"hi there"}]${extra}}`;

  it('adds max_tokens (the model maximum) only for a provider whose API refuses a request without one', async () => {
    // The provider really does refuse it.
    const direct = await fetch(`${strictSim.url}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: raw('sim-small') });
    expect(direct.status).toBe(400);
    strictSim.reset();

    const before = await stack.balance();
    const res = await rawPost(stack, '/chat/completions', raw('strict/sim-small'));
    expect(res.status).toBe(200);
    expect(res.headers.get('x-sluice-served-by')).toBe('strict/sim-small');
    const max = (await stack.wiring.catalog.model('strict/sim-small'))!.maxOutputTokens;
    expect(chatCalls(strictSim).map((c) => c.rawBody)).toEqual([raw('sim-small', `,"max_tokens":${String(max)}`)]);
    const reply = JSON.parse(res.text) as { model: string; usage: OpenAI.CompletionUsage };
    expect(reply.model).toBe('strict/sim-small');

    // A ceiling of either name is left alone.
    const capped = await rawPost(stack, '/chat/completions', raw('strict/sim-small', ',"max_completion_tokens":30'));
    expect(capped.status).toBe(200);
    expect(chatCalls(strictSim)[1]!.rawBody).toBe(raw('sim-small', ',"max_completion_tokens":30'));

    await stack.settled();
    const after = await stack.balance();
    const second = JSON.parse(capped.text) as { usage: OpenAI.CompletionUsage };
    const expected = (await chargeOn(stack, 'strict/sim-small', chatCounts(reply.usage))) + (await chargeOn(stack, 'strict/sim-small', chatCounts(second.usage)));
    expect(before.availableMicros - after.availableMicros).toBe(expected);
    expectInvariant(after);
  });

  it('rewrites per attempt: model and max_tokens follow each provider of the chain', async () => {
    const slug = await profile('strict-then-local', ['strict/sim-small', 'local/sim-small']);
    strictSim.script('sim-small', [{ kind: 'error', status: 502 }]);
    const before = await stack.balance();
    const res = await rawPost(stack, '/chat/completions', raw(slug));
    expect(res.status).toBe(200);
    expect(res.headers.get('x-sluice-served-by')).toBe('local/sim-small');
    const max = (await stack.wiring.catalog.model('strict/sim-small'))!.maxOutputTokens;
    expect(chatCalls(strictSim).map((c) => c.rawBody)).toEqual([raw('sim-small', `,"max_tokens":${String(max)}`)]);
    expect(chatCalls(stack.sim).map((c) => c.rawBody)).toEqual([raw('sim-small')]);
    await stack.settled();
    const after = await stack.balance();
    const reply = JSON.parse(res.text) as { usage: OpenAI.CompletionUsage };
    expect(before.availableMicros - after.availableMicros).toBe(await chargeOn(stack, 'local/sim-small', chatCounts(reply.usage)));
    expect(await rowOf(stack, res.headers.get('x-sluice-request-id'))).toMatchObject({ servedBy: 'local/sim-small', provider: 'local', attempts: 2 });
    expectInvariant(after);
  });
});
