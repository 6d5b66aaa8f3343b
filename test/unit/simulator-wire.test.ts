/**
 * The simulator's bytes on the wire, checked against OpenAI's published schemas.
 */
import { startSimulator, type Simulator } from '../../local/simulator';
import { assertConforms, validatorFor } from '../support/openapi';

interface SseFrame {
  readonly event: string | undefined;
  readonly data: string;
}

function parseSse(body: string): SseFrame[] {
  expect(body.endsWith('\n\n')).toBe(true);
  return body
    .split('\n\n')
    .filter((f) => f.length > 0)
    .map((frame) => {
      let event: string | undefined;
      const data: string[] = [];
      for (const line of frame.split('\n')) {
        if (line.startsWith('event: ')) event = line.slice(7);
        else if (line.startsWith('data: ')) data.push(line.slice(6));
        else throw new Error(`unexpected line ${JSON.stringify(line)}`);
      }
      return { event, data: data.join('\n') };
    });
}

type Json = Record<string, unknown>;

let sim: Simulator;
beforeAll(async () => {
  sim = await startSimulator();
});
afterAll(async () => {
  await sim.close();
});
beforeEach(() => sim.reset());

async function post(path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${sim.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer test', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

const userMessage = { role: 'user', content: 'What is the weather like in Paris today?' };

describe('chat completions, non-streamed', () => {
  it('returns a schema-valid completion of 12 deterministic words', async () => {
    const res = await post('/chat/completions', { model: 'sim-small', messages: [userMessage] });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(res.headers.get('x-request-id')).toMatch(/^req_/);
    const body = (await res.json()) as Json;
    assertConforms('CreateChatCompletionResponse', body);
    expect(body).toMatchObject({
      object: 'chat.completion',
      model: 'sim-small',
      choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: 'alpha bravo charlie delta echo foxtrot golf hotel india juliett kilo lima' } }],
      usage: {
        // 8 words + 3 per message
        prompt_tokens: 8 + 3,
        completion_tokens: 12,
        total_tokens: 23,
        prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
        completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
      },
    });
    expect(body.id).toMatch(/^chatcmpl-/);
    expect(typeof body.system_fingerprint).toBe('string');
  });

  it('caps at the larger of max_tokens and max_completion_tokens with finish_reason length', async () => {
    const res = await post('/chat/completions', { model: 'm', messages: [userMessage], max_tokens: 3, max_completion_tokens: 5 });
    const body = (await res.json()) as { choices: { finish_reason: string; message: { content: string } }[]; usage: { completion_tokens: number } };
    expect(body.choices[0].finish_reason).toBe('length');
    expect(body.choices[0].message.content).toBe('alpha bravo charlie delta echo');
    expect(body.usage.completion_tokens).toBe(5);
  });

  it('counts an image part as 85 tokens and never reports more prompt tokens than body bytes', async () => {
    const raw = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: [{ type: 'text', text: 'what is this' }, { type: 'image_url', image_url: { url: 'data:x' } }] }] });
    sim.script('m', [{ kind: 'ok' }, { kind: 'ok', promptTokens: 1_000_000 }]);
    const counted = (await (await post('/chat/completions', raw)).json()) as { usage: { prompt_tokens: number } };
    expect(counted.usage.prompt_tokens).toBe(3 + 3 + 85);
    const inflated = (await (await post('/chat/completions', raw)).json()) as { usage: { prompt_tokens: number } };
    expect(inflated.usage.prompt_tokens).toBe(Buffer.byteLength(raw));
  });

  it('reports scripted cached and reasoning tokens', async () => {
    sim.script('m', [{ kind: 'ok', cachedTokens: 4, reasoningTokens: 7, completionTokens: 2 }]);
    const body = (await (await post('/chat/completions', { model: 'm', messages: [userMessage] })).json()) as Json;
    assertConforms('CreateChatCompletionResponse', body);
    expect(body.usage).toMatchObject({ completion_tokens: 9, prompt_tokens_details: { cached_tokens: 4 }, completion_tokens_details: { reasoning_tokens: 7 } });
  });

  it('calls the tool named by tool_choice with arguments from its schema', async () => {
    const tools = [
      { type: 'function', function: { name: 'first', parameters: { type: 'object', properties: {} } } },
      { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { enum: ['c', 'f'] } } } } },
    ];
    const res = await post('/chat/completions', { model: 'm', messages: [userMessage], tools, tool_choice: { type: 'function', function: { name: 'get_weather' } } });
    const body = (await res.json()) as { choices: { finish_reason: string; message: { content: unknown; tool_calls: { id: string; function: { name: string; arguments: string } }[] } }[] };
    assertConforms('CreateChatCompletionResponse', body);
    const [choice] = body.choices;
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.content).toBeNull();
    expect(choice.message.tool_calls[0].id).toMatch(/^call_/);
    expect(choice.message.tool_calls[0].function.name).toBe('get_weather');
    expect(JSON.parse(choice.message.tool_calls[0].function.arguments)).toEqual({ city: 'sample', unit: 'c' });
  });

  it.each([
    ['tool_choice none', { tool_choice: 'none' }, [userMessage]],
    ['a tool result last', {}, [userMessage, { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] }, { role: 'tool', tool_call_id: 'c1', content: '18C' }]],
  ])('answers in text after %s', async (_label, extra, messages) => {
    const tools = [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: {} } } }];
    const body = (await (await post('/chat/completions', { model: 'm', messages, tools, ...extra })).json()) as Json;
    assertConforms('CreateChatCompletionResponse', body);
    expect(body.choices).toMatchObject([{ finish_reason: 'stop', message: { content: expect.stringContaining('alpha') } }]);
  });

  it('answers json_schema response_format with JSON matching the schema', async () => {
    const response_format = { type: 'json_schema', json_schema: { name: 'r', schema: { type: 'object', properties: { city: { type: 'string' } } } } };
    const body = (await (await post('/chat/completions', { model: 'm', messages: [userMessage], response_format })).json()) as { choices: { message: { content: string } }[] };
    expect(JSON.parse(body.choices[0].message.content)).toEqual({ city: 'sample' });
  });

  it('writes a huge reply in pieces (chunked), still one valid JSON body', async () => {
    sim.script('m', [{ kind: 'ok', completionTokens: 50_000 }]);
    const res = await post('/chat/completions', { model: 'm', messages: [userMessage] });
    expect(res.headers.get('content-length')).toBeNull();
    const body = (await res.json()) as { choices: { message: { content: string } }[]; usage: { completion_tokens: number } };
    expect(body.choices[0].message.content.split(' ')).toHaveLength(50_000);
    expect(body.usage.completion_tokens).toBe(50_000);
  });

  it('names the provider model when told to, or leaves it out', async () => {
    sim.script('m', [{ kind: 'ok', responseModel: 'm-2025-01-01' }, { kind: 'ok', responseModel: null }]);
    const dated = (await (await post('/chat/completions', { model: 'm', messages: [userMessage] })).json()) as Json;
    const unnamed = (await (await post('/chat/completions', { model: 'm', messages: [userMessage] })).json()) as Json;
    expect(dated.model).toBe('m-2025-01-01');
    expect('model' in unnamed).toBe(false);
  });
});

describe('chat completions, streamed', () => {
  async function stream(body: Json): Promise<{ res: Response; frames: SseFrame[] }> {
    const res = await post('/chat/completions', { model: 'm', messages: [userMessage], stream: true, ...body });
    return { res, frames: parseSse(await res.text()) };
  }

  it('streams role, one chunk per token, finish, usage, [DONE], every chunk schema-valid', async () => {
    const { res, frames } = await stream({ max_tokens: 4, stream_options: { include_usage: true } });
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(frames.at(-1)?.data).toBe('[DONE]');
    const chunks = frames.slice(0, -1).map((f) => JSON.parse(f.data) as Json);
    for (const chunk of chunks) assertConforms('CreateChatCompletionStreamResponse', chunk);
    expect(chunks.map((c) => c.choices)).toEqual([
      [{ index: 0, delta: { role: 'assistant', content: '', refusal: null }, logprobs: null, finish_reason: null }],
      ...['alpha', ' bravo', ' charlie', ' delta'].map((content) => [{ index: 0, delta: { content }, logprobs: null, finish_reason: null }]),
      [{ index: 0, delta: {}, logprobs: null, finish_reason: 'length' }],
      [],
    ]);
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true);
    expect(chunks.at(-1)?.usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 4, total_tokens: 15 });
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
  });

  it('sends no usage field at all unless include_usage is set', async () => {
    const { frames } = await stream({});
    const chunks = frames.slice(0, -1).map((f) => JSON.parse(f.data) as Json);
    expect(chunks).toHaveLength(1 + 12 + 1);
    expect(chunks.some((c) => 'usage' in c)).toBe(false);
  });

  it('omits the usage chunk for a provider that does not report', async () => {
    sim.script('m', [{ kind: 'ok', omitUsage: true }]);
    const { frames } = await stream({ stream_options: { include_usage: true } });
    const chunks = frames.slice(0, -1).map((f) => JSON.parse(f.data) as { choices: unknown[] });
    expect(chunks.every((c) => c.choices.length === 1)).toBe(true);
  });

  it('streams tool calls as OpenAI does: id and name first, then argument fragments', async () => {
    sim.script('m', [{ kind: 'ok', toolCalls: [{ name: 'a', arguments: '{"q":"paris weather"}' }, { name: 'b', arguments: '{}' }] }]);
    const { frames } = await stream({ stream_options: { include_usage: true } });
    const chunks = frames.slice(0, -1).map((f) => JSON.parse(f.data) as { choices: { delta: { tool_calls?: { index: number; id?: string; function: { name?: string; arguments: string } }[] }; finish_reason: string | null }[] });
    for (const chunk of chunks) assertConforms('CreateChatCompletionStreamResponse', chunk);
    const deltas = chunks.flatMap((c) => c.choices.flatMap((ch) => ch.delta.tool_calls ?? []));
    expect(deltas[0]).toEqual({ index: 0, id: expect.stringMatching(/^call_/), type: 'function', function: { name: 'a', arguments: '' } });
    const args = (i: number): string => deltas.filter((d) => d.index === i).map((d) => d.function.arguments).join('');
    expect(args(0)).toBe('{"q":"paris weather"}');
    expect(args(1)).toBe('{}');
    expect(deltas.filter((d) => d.index === 0).length).toBeGreaterThan(3);
    expect(chunks.at(-2)?.choices[0].finish_reason).toBe('tool_calls');
  });

  it('paces frames by chunkDelayMs', async () => {
    sim.script('m', [{ kind: 'ok', completionTokens: 3, chunkDelayMs: 60 }]);
    const started = Date.now();
    await stream({});
    // role + 3 tokens + finish: four gaps between five frames.
    expect(Date.now() - started).toBeGreaterThanOrEqual(4 * 60 - 10);
  });
});

describe('responses', () => {
  const functionTool = { type: 'function', name: 'lookup', parameters: { type: 'object', properties: { id: { type: 'integer' } } } };

  it('returns a schema-valid completed Response', async () => {
    const res = await post('/responses', { model: 'm', input: 'Say hello', instructions: 'Be brief.' });
    const body = (await res.json()) as Json;
    assertConforms('Response', body);
    expect(body).toMatchObject({
      object: 'response',
      status: 'completed',
      model: 'm',
      instructions: 'Be brief.',
      incomplete_details: null,
      output: [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', annotations: [], text: expect.stringMatching(/^alpha bravo/) }] }],
      usage: { input_tokens: 2 + 3 + 2 + 3, input_tokens_details: { cached_tokens: 0 }, output_tokens: 12, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 22 },
    });
    expect(body.id).toMatch(/^resp_/);
  });

  it('is incomplete when max_output_tokens caps it', async () => {
    const body = (await (await post('/responses', { model: 'm', input: [{ role: 'user', content: [{ type: 'input_text', text: 'hi' }] }], max_output_tokens: 3 })).json()) as Json;
    assertConforms('Response', body);
    expect(body).toMatchObject({ status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' }, usage: { output_tokens: 3 } });
  });

  it('calls a function tool, echoing the tool normalized', async () => {
    const body = (await (await post('/responses', { model: 'm', input: 'find 7', tools: [functionTool] })).json()) as Json;
    assertConforms('Response', body);
    expect(body.output).toEqual([
      { id: expect.stringMatching(/^fc_/), type: 'function_call', status: 'completed', arguments: '{"id":1}', call_id: expect.stringMatching(/^call_/), name: 'lookup' },
    ]);
    expect(body.tools).toEqual([{ ...functionTool, strict: true }]);
  });

  it('answers in text after a function_call_output', async () => {
    const input = [
      { role: 'user', content: 'find 7' },
      { type: 'function_call', call_id: 'call_1', name: 'lookup', arguments: '{"id":7}' },
      { type: 'function_call_output', call_id: 'call_1', output: 'seven' },
    ];
    const body = (await (await post('/responses', { model: 'm', input, tools: [functionTool] })).json()) as { output: { type: string }[] };
    expect(body.output.map((o) => o.type)).toEqual(['message']);
  });

  it('streams the real event sequence with consecutive sequence numbers, no [DONE]', async () => {
    const res = await post('/responses', { model: 'm', input: 'hi', stream: true, max_output_tokens: 2 });
    const frames = parseSse(await res.text());
    const events = frames.map((f) => JSON.parse(f.data) as { type: string; sequence_number: number; response?: Json });
    for (const event of events) assertConforms('ResponseStreamEvent', event);
    expect(frames.map((f) => f.event)).toEqual(events.map((e) => e.type));
    expect(events.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.incomplete',
    ]);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    expect(events.at(-1)?.response).toMatchObject({ status: 'incomplete', usage: { output_tokens: 2 } });
  });

  it('streams function-call argument deltas', async () => {
    const res = await post('/responses', { model: 'm', input: 'find', stream: true, tools: [functionTool] });
    const events = parseSse(await res.text()).map((f) => JSON.parse(f.data) as { type: string; delta?: string; arguments?: string });
    for (const event of events) assertConforms('ResponseStreamEvent', event);
    const deltas = events.filter((e) => e.type === 'response.function_call_arguments.delta').map((e) => e.delta);
    expect(deltas.join('')).toBe('{"id":1}');
    expect(events.find((e) => e.type === 'response.function_call_arguments.done')?.arguments).toBe('{"id":1}');
    expect(events.at(-1)?.type).toBe('response.completed');
  });
});

describe('models, auth and errors', () => {
  it('lists models', async () => {
    const body = (await (await fetch(`${sim.url}/models`)).json()) as { data: { id: string }[] };
    assertConforms('ListModelsResponse', body);
    expect(body.data.map((m) => m.id)).toEqual(['sim-small', 'sim-large', 'sim-reasoning']);
    expect((await fetch(`${sim.url}/models/sim-large`)).status).toBe(200);
    expect((await fetch(`${sim.url}/models/nope`)).status).toBe(404);
  });

  it.each([
    [400, 'temperature', 'unsupported_value'],
    [401, null, 'invalid_api_key'],
    [404, null, 'model_not_found'],
    [429, null, 'rate_limit_exceeded'],
    [500, null, null],
    [503, null, null],
  ])('scripted %i is an OpenAI ErrorResponse', async (status, param, code) => {
    sim.script('m', [{ kind: 'error', status, ...(param ? { param } : {}) }]);
    const res = await post('/chat/completions', { model: 'm', messages: [userMessage] });
    expect(res.status).toBe(status);
    const body = (await res.json()) as { error: Json };
    assertConforms('ErrorResponse', body);
    expect(body.error).toMatchObject({ param, code });
  });

  it('sends scripted headers and verbatim string bodies', async () => {
    sim.script('m', [{ kind: 'error', status: 502, body: '<html>bad gateway</html>', headers: { 'retry-after': '3' } }]);
    const res = await post('/chat/completions', { model: 'm', messages: [userMessage] });
    expect(res.status).toBe(502);
    expect(res.headers.get('retry-after')).toBe('3');
    expect(await res.text()).toBe('<html>bad gateway</html>');
  });

  it.each([
    ['not JSON', '{"model":', null, null],
    ['no model', { messages: [userMessage] }, 'model', 'missing_required_parameter'],
    ['no messages', { model: 'm' }, 'messages', 'missing_required_parameter'],
    ['max_tokens 0', { model: 'm', messages: [userMessage], max_tokens: 0 }, 'max_tokens', 'integer_below_min_value'],
    ['max_tokens a string', { model: 'm', messages: [userMessage], max_tokens: '5' }, 'max_tokens', 'invalid_type'],
  ])('refuses a request with %s as OpenAI does', async (_label, body, param, code) => {
    const res = await post('/chat/completions', body);
    expect(res.status).toBe(400);
    const json = (await res.json()) as { error: Json };
    assertConforms('ErrorResponse', json);
    expect(json.error).toMatchObject({ type: 'invalid_request_error', param, code });
  });

  it('answers an unknown path with Invalid URL', async () => {
    const res = await post('/completions', { model: 'm' });
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: { message: string } }).error.message).toBe('Invalid URL (POST /v1/completions)');
  });

  it('records every request, refused ones included, before answering', async () => {
    await post('/chat/completions', '{"model":', { 'x-trace': 'abc' });
    await post('/responses', { model: 'm', input: 'x' });
    expect(sim.recorded.map((r) => [r.method, r.path])).toEqual([
      ['POST', '/v1/chat/completions'],
      ['POST', '/v1/responses'],
    ]);
    expect(sim.recorded[0]).toMatchObject({ rawBody: '{"model":', json: undefined, headers: { 'x-trace': 'abc', authorization: 'Bearer test' } });
    expect(sim.recorded[1].json).toEqual({ model: 'm', input: 'x' });
    sim.clearRecorded();
    expect(sim.recorded).toHaveLength(0);
  });
});

describe('with accepted keys and a provider that requires max_tokens', () => {
  let strict: Simulator;
  beforeAll(async () => {
    strict = await startSimulator({ acceptedKeys: ['sk-good-key-123'], requireMaxTokens: true });
  });
  afterAll(async () => {
    await strict.close();
  });
  const call = (headers: Record<string, string>, body: Json): Promise<Response> =>
    fetch(`${strict.url}/chat/completions`, { method: 'POST', headers, body: JSON.stringify(body) });

  it.each([
    ['no key', {}],
    ['a wrong key', { authorization: 'Bearer sk-wrong-key-456' }],
    ['not bearer', { authorization: 'Basic sk-good-key-123' }],
  ])('refuses %s with invalid_api_key, and records it', async (_label, headers) => {
    strict.clearRecorded();
    const res = await call(headers, { model: 'm', messages: [userMessage], max_tokens: 1 });
    expect(res.status).toBe(401);
    const body = (await res.json()) as { error: Json };
    assertConforms('ErrorResponse', body);
    expect(body.error).toMatchObject({ code: 'invalid_api_key', type: 'invalid_request_error' });
    expect(JSON.stringify(body)).not.toContain('sk-wrong-key-456');
    expect(strict.recorded).toHaveLength(1);
  });

  it('accepts the key, and refuses a request lacking max_tokens', async () => {
    expect((await call({ authorization: 'Bearer sk-good-key-123' }, { model: 'm', messages: [userMessage], max_tokens: 1 })).status).toBe(200);
    const res = await call({ authorization: 'Bearer sk-good-key-123' }, { model: 'm', messages: [userMessage] });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: Json }).error).toMatchObject({ param: 'max_tokens', code: 'missing_required_parameter' });
  });
});

describe('the schema validator itself', () => {
  it('rejects what the schemas forbid', () => {
    expect(validatorFor('ErrorResponse')({ error: { message: 'x', type: 't', param: null } })).not.toEqual([]);
    expect(validatorFor('CreateChatCompletionStreamResponse')({ id: 'x', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: {}, finish_reason: 'bogus' }] })).not.toEqual([]);
    expect(validatorFor('ResponseStreamEvent')({ type: 'response.output_text.delta', item_id: 'i', output_index: 0, content_index: 0, delta: 'x', sequence_number: 1 })).not.toEqual([]);
    expect(() => validatorFor('NoSuchSchema')).toThrow('no schema named NoSuchSchema');
  });

  it('accepts nullable fields written the OpenAPI 3.0 way', () => {
    expect(validatorFor('CreateChatCompletionStreamResponse')({ id: 'x', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: {}, finish_reason: null, logprobs: null }], usage: null })).toEqual([]);
  });
});
