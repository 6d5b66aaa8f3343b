/**
 * End to end with the official `openai` client against the local server, DynamoDB Local and the
 * upstream simulator: models, chat completions streamed and not, tool calls, what travels
 * upstream, refusals as APIError, and every request charged exactly.
 */
import OpenAI, { APIError } from 'openai';
import { startStack, expectInvariant, type TestStack } from '../support/stack';
import { chargeMicros } from '../../lambdas/core/pricing';
import { validatorFor } from '../support/openapi';
import { createKey } from '../../local/ops';

let stack: TestStack;

beforeAll(async () => {
  stack = await startStack();
});

afterAll(async () => {
  await stack?.close();
});

beforeEach(() => stack.sim.reset());

/** The catalog rates of a model as the gateway prices it. */
async function ratesOf(id: string): Promise<{ inputRateThousandths: number; cachedInputRateThousandths: number; outputRateThousandths: number }> {
  const m = await stack.wiring.catalog.model(id);
  if (m === undefined || m.inputRateThousandths === null || m.outputRateThousandths === null) throw new Error(`no rates for ${id}`);
  return { inputRateThousandths: m.inputRateThousandths, cachedInputRateThousandths: m.cachedInputRateThousandths ?? m.inputRateThousandths, outputRateThousandths: m.outputRateThousandths };
}

async function expectApiError(p: Promise<unknown>, status: number, code: string | null, type?: string, param?: string | null): Promise<APIError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(APIError);
    const e = err as APIError;
    expect(e.status).toBe(status);
    expect(e.code ?? null).toBe(code);
    if (type !== undefined) expect(e.type).toBe(type);
    if (param !== undefined) expect(e.param ?? null).toBe(param);
    expect(e.requestID).toMatch(/^req_[0-9a-f]{24}$/);
    return e;
  }
  throw new Error('expected an APIError');
}

describe('models', () => {
  it('lists the models the key can call, each with the sluice block', async () => {
    const page = await stack.client().models.list();
    const ids = page.data.map((m) => m.id);
    expect(ids).toContain('local/sim-small');
    // Not served now: not in the list of what the key can call.
    expect(ids).not.toContain('local/sim-retired');
    const entry = page.data.find((m) => m.id === 'local/sim-small') as unknown as Record<string, unknown>;
    expect(entry.object).toBe('model');
    expect(entry.owned_by).toBe('local');
    const block = entry.sluice as Record<string, unknown>;
    expect(block.model_id).toBe('local/sim-small');
    expect(Number.isInteger(block.max_output_tokens)).toBe(true);
    expect(Number.isInteger(block.input_rate_thousandths)).toBe(true);
    expect(Object.keys(block.capabilities as object).sort()).toEqual(['audio', 'json_mode', 'streaming', 'tools', 'vision']);
  });

  it('reads one model with its parameters, ids with slashes included', async () => {
    const model = (await stack.client().models.retrieve('local/sim-small')) as unknown as Record<string, unknown>;
    expect(model.id).toBe('local/sim-small');
    expect(Array.isArray(model.parameters)).toBe(true);
    const nested = (await stack.client().models.retrieve('local/org/sim-nested')) as unknown as Record<string, unknown>;
    expect(nested.id).toBe('local/org/sim-nested');
    await expectApiError(stack.client().models.retrieve('local/nope'), 404, 'model_not_found', 'not_found_error', null);
  });
});

describe('chat completions', () => {
  it('answers non-streamed, echoes the slug, and charges exactly the provider counts', async () => {
    const before = await stack.balance();
    const { data, response } = await stack
      .client()
      .chat.completions.create({ model: 'local/sim-small', messages: [{ role: 'user', content: 'Say hello' }], max_tokens: 50 })
      .withResponse();
    expect(data.model).toBe('local/sim-small');
    expect(data.object).toBe('chat.completion');
    expect(data.choices[0]?.message.content).toBeTruthy();
    expect(response.headers.get('x-sluice-served-by')).toBe('local/sim-small');
    expect(response.headers.get('x-sluice-request-id')).toMatch(/^req_/);
    expect(response.headers.get('x-request-id')).toBe(response.headers.get('x-sluice-request-id'));
    expect(response.headers.get('x-sluice-provider')).toBe('local');
    expect(response.headers.get('x-sluice-retry-attempt-count')).toBe('0');
    await stack.settled();
    const after = await stack.balance();
    const usage = data.usage!;
    const expected = chargeMicros(
      { inputTokens: usage.prompt_tokens, cachedInputTokens: usage.prompt_tokens_details?.cached_tokens ?? 0, outputTokens: usage.completion_tokens, reasoningTokens: 0 },
      await ratesOf('local/sim-small'),
    );
    expect(expected).toBeGreaterThan(0);
    expect(before.availableMicros - after.availableMicros).toBe(expected);
    expect(after.spentMicros - before.spentMicros).toBe(expected);
    expect(after.heldMicros).toBe(0);
    expectInvariant(after);
    const rows = await stack.usageRows();
    const row = rows.find((r) => r.requestId === response.headers.get('x-sluice-request-id'));
    expect(row).toMatchObject({ chargeMicros: expected, servedBy: 'local/sim-small', family: 'chat_completions', outcome: 'ok', stream: false });
    // Metadata only: nothing of the prompt or reply is on the row.
    expect(JSON.stringify(row)).not.toContain('hello');
  });

  it('prices cached input tokens as their own kind', async () => {
    stack.sim.script('sim-small', [{ kind: 'ok', cachedTokens: 3 }]);
    const before = await stack.balance();
    const data = await stack.client().chat.completions.create({ model: 'local/sim-small', messages: [{ role: 'user', content: 'one two three four five six' }] });
    await stack.settled();
    const after = await stack.balance();
    const usage = data.usage!;
    expect(usage.prompt_tokens_details?.cached_tokens).toBe(3);
    const rates = await ratesOf('local/sim-small');
    expect(rates.cachedInputRateThousandths).toBeLessThan(rates.inputRateThousandths);
    const expected = chargeMicros({ inputTokens: usage.prompt_tokens, cachedInputTokens: 3, outputTokens: usage.completion_tokens, reasoningTokens: 0 }, rates);
    expect(before.availableMicros - after.availableMicros).toBe(expected);
    expectInvariant(after);
  });

  it('forwards the body as sent, and no client header but the key travels', async () => {
    const body = {
      model: 'local/sim-small',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'What is this?' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } }] }],
      temperature: 0.7,
      seed: 12345678901234567890,
      response_format: { type: 'json_object' },
      custom_field: { nested: [1, 2.50, 'x'] },
    };
    const raw = `{"model":"local/sim-small","messages":${JSON.stringify(body.messages)},"temperature":0.70,"seed":12345678901234567890,"response_format":{"type":"json_object"},"custom_field":{"nested":[1,2.50,"x"]}}`;
    const res = await fetch(`${stack.baseURL}/chat/completions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${stack.rawKey}`,
        'content-type': 'application/json',
        'openai-organization': 'org-123',
        'openai-project': 'proj-123',
        'x-sluice-debug': '1',
        'x-custom': 'y',
      },
      body: raw,
    });
    expect(res.status).toBe(200);
    await res.text();
    const recorded = stack.sim.recorded.filter((r) => r.path === '/v1/chat/completions');
    expect(recorded).toHaveLength(1);
    // Byte for byte but for the provider's model id.
    expect(recorded[0]!.rawBody).toBe(raw.replace('"model":"local/sim-small"', '"model":"sim-small"'));
    const headers = Object.keys(recorded[0]!.headers);
    for (const h of ['openai-organization', 'openai-project', 'x-sluice-debug', 'x-custom']) expect(headers).not.toContain(h);
    // Our key never travels to the provider.
    expect(JSON.stringify(recorded[0]!.headers)).not.toContain(stack.rawKey);
    await stack.settled();
  });

  it('does not forward provider rate-limit headers', async () => {
    stack.sim.script('sim-small', [{ kind: 'ok', headers: { 'x-ratelimit-remaining-requests': '99', 'x-ratelimit-limit-tokens': '1000' } }]);
    const { response } = await stack.client().chat.completions.create({ model: 'local/sim-small', messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    expect(response.headers.get('x-ratelimit-remaining-requests')).toBeNull();
    expect(response.headers.get('x-ratelimit-limit-tokens')).toBeNull();
    await stack.settled();
  });

  it('streams frames unchanged with the usage comment right before [DONE], and charges the counts', async () => {
    const before = await stack.balance();
    const stream = await stack.client().chat.completions.create({ model: 'local/sim-small', messages: [{ role: 'user', content: 'Stream please' }], stream: true });
    const validate = validatorFor('CreateChatCompletionStreamResponse');
    let text = '';
    let chunks = 0;
    for await (const chunk of stream) {
      chunks += 1;
      expect(validate(chunk)).toEqual([]);
      // The client did not ask for usage: no usage-only chunk, no usage field.
      expect(chunk.choices.length).toBeGreaterThan(0);
      expect('usage' in chunk).toBe(false);
      text += chunk.choices[0]?.delta.content ?? '';
    }
    expect(chunks).toBeGreaterThan(3);
    expect(text.length).toBeGreaterThan(0);
    await stack.settled();
    const after = await stack.balance();
    const rows = await stack.usageRows();
    const row = rows.sort((a, b) => b.startedAt - a.startedAt)[0]!;
    expect(row.stream).toBe(true);
    expect(row.outputTokens).toBeGreaterThan(0);
    expect(before.availableMicros - after.availableMicros).toBe(row.chargeMicros);
    expectInvariant(after);
  });

  it('reuses its connection to the provider after a finished stream, and not after one it cut', async () => {
    const ask = async (): Promise<void> => {
      const stream = await stack.client().chat.completions.create({ model: 'local/sim-small', messages: [{ role: 'user', content: 'Stream please' }], stream: true });
      for await (const chunk of stream) expect(chunk.object).toBe('chat.completion.chunk');
      await stack.settled();
    };
    await ask();
    await ask();
    await stack.client().chat.completions.create({ model: 'local/sim-small', messages: [{ role: 'user', content: 'Once more' }] });
    const [first, second, third] = stack.sim.recorded;
    expect(first?.connection).toBeGreaterThan(0);
    expect(second?.connection).toBe(first?.connection);
    expect(third?.connection).toBe(first?.connection);

    // A stream broken off by the provider is not reused.
    stack.sim.script('sim-small', [{ kind: 'reset', afterChunks: 2 }]);
    await expect(
      (async () => {
        const stream = await stack.client().chat.completions.create({ model: 'local/sim-small', messages: [{ role: 'user', content: 'Break' }], stream: true });
        for await (const chunk of stream) expect(chunk.object).toBe('chat.completion.chunk');
      })(),
    ).rejects.toThrow();
    await stack.settled();
    await ask();
    const after = stack.sim.recorded.slice(3);
    expect(after).toHaveLength(2);
    expect(after[1]?.connection).not.toBe(after[0]?.connection);
  });

  it('puts exactly one :x-sluice-usage line immediately before data: [DONE]', async () => {
    const res = await fetch(`${stack.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.rawKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'local/sim-small', messages: [{ role: 'user', content: 'x' }], stream: true, stream_options: { include_usage: true } }),
    });
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const raw = await res.text();
    const lines = raw.split('\n').filter((l) => l !== '');
    expect(lines[lines.length - 1]).toBe('data: [DONE]');
    expect(lines[lines.length - 2]).toMatch(/^:x-sluice-usage \{/);
    expect(lines.filter((l) => l.startsWith(':x-sluice-usage'))).toHaveLength(1);
    const usage = JSON.parse(lines[lines.length - 2]!.slice(':x-sluice-usage '.length)) as Record<string, number>;
    // The client asked for usage, so the provider's usage chunk passes too, and agrees.
    const usageChunk = JSON.parse(lines[lines.length - 3]!.slice('data: '.length)) as { choices: unknown[]; usage: { prompt_tokens: number; completion_tokens: number } };
    expect(usageChunk.choices).toEqual([]);
    expect(usage.prompt_tokens).toBe(usageChunk.usage.prompt_tokens);
    expect(usage.completion_tokens).toBe(usageChunk.usage.completion_tokens);
    expect(Number.isInteger(usage.charge_micros)).toBe(true);
    await stack.settled();
  });

  it('asks the provider for stream usage itself and withholds what that adds', async () => {
    const res = await fetch(`${stack.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.rawKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'local/sim-small', messages: [{ role: 'user', content: 'x' }], stream: true }),
    });
    const raw = await res.text();
    const sent = stack.sim.recorded.at(-1)!.json as Record<string, unknown>;
    expect(sent.stream_options).toEqual({ include_usage: true });
    expect(raw).not.toContain('"usage"');
    const usageLine = raw.split('\n').find((l) => l.startsWith(':x-sluice-usage '))!;
    expect(JSON.parse(usageLine.slice(16)).completion_tokens).toBeGreaterThan(0);
    await stack.settled();
  });

  it('streams a tool call in deltas ending with finish_reason tool_calls', async () => {
    const stream = await stack.client().chat.completions.create({
      model: 'local/sim-small',
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
      tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }],
      tool_choice: 'auto',
      stream: true,
    });
    let name = '';
    let args = '';
    let finish: string | null | undefined;
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta;
      for (const call of delta?.tool_calls ?? []) {
        name += call.function?.name ?? '';
        args += call.function?.arguments ?? '';
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(name).toBe('get_weather');
    expect(() => JSON.parse(args)).not.toThrow();
    expect(finish).toBe('tool_calls');
    const sent = stack.sim.recorded.at(-1)!.json as Record<string, unknown>;
    expect(sent.tools).toBeDefined();
    expect(sent.tool_choice).toBe('auto');
    await stack.settled();
  });

  it('relays a provider refusal of a parameter with its status and wording, and charges nothing', async () => {
    stack.sim.script('sim-small', [{ kind: 'error', status: 400, param: 'temperature', message: "Unsupported value: 'temperature' does not support 3.0 with this model." }]);
    const before = await stack.balance();
    const e = await expectApiError(
      stack.client().chat.completions.create({ model: 'local/sim-small', messages: [{ role: 'user', content: 'x' }], temperature: 3 }),
      400,
      'unsupported_value',
      'invalid_request_error',
      'temperature',
    );
    expect(e.message).toContain("Unsupported value: 'temperature'");
    await stack.settled();
    const after = await stack.balance();
    expect(after.availableMicros).toBe(before.availableMicros);
    expectInvariant(after);
  });
});

describe('refusals', () => {
  const chat = (client: OpenAI, model: string, extra: Record<string, unknown> = {}): Promise<unknown> =>
    client.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }], ...extra } as never);

  it('401 for a missing, malformed, unknown or expired key', async () => {
    const e1 = await expectApiError(chat(stack.client('sk-not-ours'), 'local/sim-small'), 401, 'invalid_api_key', 'authentication_error', null);
    expect(e1.message).toMatch(/format/);
    const unknown = `slc_dev_${'A'.repeat(43)}`;
    const e2 = await expectApiError(chat(stack.client(unknown), 'local/sim-small'), 401, 'invalid_api_key', 'authentication_error', null);
    expect(e2.message).toMatch(/Incorrect API key provided\.$/);
    const expiredAt = Date.UTC(2026, 0, 2, 3, 4, 5);
    const expired = await createKey({ ...stack.admin, now: () => expiredAt - 60_000 }, { workspaceId: stack.workspaceId, expiresAt: expiredAt });
    const e3 = await expectApiError(chat(stack.client(expired.rawKey), 'local/sim-small'), 401, 'key_expired', 'authentication_error', null);
    expect(e3.message).toContain('2026-01-02T03:04:05.000Z');
    const res = await fetch(`${stack.baseURL}/models`);
    expect(res.status).toBe(401);
    const body = (await res.json()) as { error: Record<string, unknown> };
    expect(Object.keys(body)).toEqual(['error']);
    expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'param', 'request_id', 'type']);
    expect(body.error.message).toMatch(/Bearer/);
  });

  it('400 for model ids: missing, malformed, unpinned', async () => {
    await expectApiError(chat(stack.client(), undefined as unknown as string), 400, null, 'invalid_request_error', 'model');
    await expectApiError(chat(stack.client(), 'openai/gpt 4'), 400, 'invalid_model_id', 'invalid_request_error', 'model');
    await expectApiError(chat(stack.client(), `local/${'a'.repeat(123)}`), 400, 'invalid_model_id', 'invalid_request_error', 'model');
    await expectApiError(chat(stack.client(), 'gpt-4.1-mini'), 400, 'model_id_not_pinned', 'invalid_request_error', 'model');
  });

  it('404 model_not_found and model_not_available with distinct messages', async () => {
    await expectApiError(chat(stack.client(), 'local/does-not-exist'), 404, 'model_not_found', 'not_found_error', null);
    await expectApiError(chat(stack.client(), 'nosuchprovider/x'), 404, 'model_not_found', 'not_found_error', null);
    const retired = await expectApiError(chat(stack.client(), 'local/sim-retired'), 404, 'model_not_available', 'not_found_error', null);
    expect(retired.message).toMatch(/retired/);
    expect(retired.message).toContain('local/sim-small');
    const unreachable = await expectApiError(chat(stack.client(), 'local/sim-unreachable'), 404, 'model_not_available');
    expect(unreachable.message).toMatch(/cannot reach/);
    const notServed = await expectApiError(chat(stack.client(), 'local/sim-not-served'), 404, 'model_not_available');
    expect(notServed.message).toMatch(/not served at the moment/);
    await expectApiError(chat(stack.client(), 'sluice/auto'), 404, 'model_not_available');
  });

  it('503 model_not_priceable without a ceiling on a model with no maximum, served once max_tokens is sent', async () => {
    await expectApiError(chat(stack.client(), 'local/sim-no-max'), 503, 'model_not_priceable');
    const ok = (await chat(stack.client(), 'local/sim-no-max', { max_tokens: 20 })) as { object: string };
    expect(ok.object).toBe('chat.completion');
    await stack.settled();
  });

  it('402 insufficient_credit holds and calls nothing', async () => {
    const poor = await stack.seed(0);
    const calls = stack.sim.recorded.length;
    await expectApiError(chat(stack.client(poor.rawKey), 'local/sim-small'), 402, 'insufficient_credit', 'insufficient_quota', null);
    expect(stack.sim.recorded.length).toBe(calls);
    const b = await stack.balance(poor.workspaceId);
    expect(b).toEqual({ availableMicros: 0, heldMicros: 0, spentMicros: 0, creditedMicros: 0 });
    expect(await stack.usageRows(poor.workspaceId)).toHaveLength(0);
  });

  it('404 endpoint_not_supported, 405 with Allow, 413 from a declared length, 400 for bad JSON', async () => {
    const auth = { authorization: `Bearer ${stack.rawKey}` };
    const r404 = await fetch(`${stack.baseURL}/embeddings`, { method: 'POST', headers: auth, body: '{}' });
    expect(r404.status).toBe(404);
    expect(((await r404.json()) as { error: { code: string } }).error.code).toBe('endpoint_not_supported');
    const r405 = await fetch(`${stack.baseURL}/chat/completions`, { headers: auth });
    expect(r405.status).toBe(405);
    expect(r405.headers.get('allow')).toBe('POST');
    expect(((await r405.json()) as { error: { code: string } }).error.code).toBe('method_not_allowed');
    const r405b = await fetch(`${stack.baseURL}/models`, { method: 'POST', headers: auth, body: '{}' });
    expect(r405b.headers.get('allow')).toBe('GET');
    const big = await fetch(`${stack.baseURL}/chat/completions`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: 'x'.repeat(8_388_609) });
    expect(big.status).toBe(413);
    expect(((await big.json()) as { error: { code: string } }).error.code).toBe('payload_too_large');
    const bad = await fetch(`${stack.baseURL}/chat/completions`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{"model":' });
    expect(bad.status).toBe(400);
    expect(bad.headers.get('x-sluice-request-id')).toMatch(/^req_/);
    expect(bad.headers.get('x-request-id')).toBe(bad.headers.get('x-sluice-request-id'));
  });
});
