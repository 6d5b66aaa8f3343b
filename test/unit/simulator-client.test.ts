/**
 * The simulator driven by the official `openai` client: what the gateway's users will run.
 */
import http from 'node:http';
import OpenAI from 'openai';
import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import { startSimulator, type Simulator } from '../../local/simulator';
import { assertConforms } from '../support/openapi';

let sim: Simulator;
let client: OpenAI;
beforeAll(async () => {
  sim = await startSimulator();
  // No retries and no logging, so each test sees exactly one request and a quiet console.
  client = new OpenAI({ baseURL: sim.url, apiKey: 'x', maxRetries: 0, logLevel: 'off' });
});
afterAll(async () => {
  await sim.close();
});
beforeEach(() => sim.reset());

const messages = [{ role: 'user' as const, content: 'Tell me something.' }];

async function collect(stream: AsyncIterable<ChatCompletionChunk>): Promise<{ chunks: ChatCompletionChunk[]; error: unknown }> {
  const chunks: ChatCompletionChunk[] = [];
  try {
    for await (const chunk of stream) chunks.push(chunk);
  } catch (error) {
    return { chunks, error };
  }
  return { chunks, error: undefined };
}

function text(chunks: readonly ChatCompletionChunk[]): string {
  return chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
}

describe('chat completions through the openai client', () => {
  it('non-streamed', async () => {
    const completion = await client.chat.completions.create({ model: 'sim-small', messages, max_completion_tokens: 4 });
    expect(completion.model).toBe('sim-small');
    expect(completion.choices[0].message.content).toBe('alpha bravo charlie delta');
    expect(completion.choices[0].finish_reason).toBe('length');
    expect(completion.usage?.completion_tokens).toBe(4);
  });

  it('streamed with include_usage: deltas join to the text, usage arrives last', async () => {
    const stream = await client.chat.completions.create({ model: 'm', messages, stream: true, stream_options: { include_usage: true } });
    const { chunks, error } = await collect(stream);
    expect(error).toBeUndefined();
    for (const chunk of chunks) assertConforms('CreateChatCompletionStreamResponse', chunk);
    expect(text(chunks)).toBe('alpha bravo charlie delta echo foxtrot golf hotel india juliett kilo lima');
    expect(chunks.at(-2)?.choices[0].finish_reason).toBe('stop');
    expect(chunks.at(-1)?.choices).toEqual([]);
    expect(chunks.at(-1)?.usage).toMatchObject({ completion_tokens: 12, prompt_tokens: 6, total_tokens: 18 });
  });

  it('streamed tool call reassembles from deltas and ends with tool_calls', async () => {
    const stream = await client.chat.completions.create({
      model: 'm',
      messages,
      stream: true,
      tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } } } } }],
    });
    const { chunks, error } = await collect(stream);
    expect(error).toBeUndefined();
    const calls = new Map<number, { id?: string; name?: string; args: string }>();
    for (const chunk of chunks) {
      for (const delta of chunk.choices[0]?.delta.tool_calls ?? []) {
        const call = calls.get(delta.index) ?? { args: '' };
        call.id ??= delta.id;
        call.name ??= delta.function?.name;
        call.args += delta.function?.arguments ?? '';
        calls.set(delta.index, call);
      }
    }
    expect([...calls.values()]).toEqual([{ id: expect.stringMatching(/^call_/), name: 'get_weather', args: '{"city":"sample","days":1}' }]);
    expect(chunks.at(-1)?.choices[0].finish_reason).toBe('tool_calls');
  });

  it('the stream helper reassembles the final message too', async () => {
    sim.script('m', [{ kind: 'ok', toolCalls: [{ name: 'a', arguments: '{"x":1}' }, { name: 'b', arguments: '{"y":2}' }] }]);
    const runner = client.chat.completions.stream({ model: 'm', messages });
    const final = await runner.finalChatCompletion();
    expect(final.choices[0].message.tool_calls?.map((c) => (c.type === 'function' ? [c.function.name, c.function.arguments] : []))).toEqual([
      ['a', '{"x":1}'],
      ['b', '{"y":2}'],
    ]);
  });
});

describe('responses through the openai client', () => {
  it('non-streamed', async () => {
    const response = await client.responses.create({ model: 'm', input: 'hello', max_output_tokens: 20 });
    expect(response.status).toBe('completed');
    expect(response.output_text).toBe('alpha bravo charlie delta echo foxtrot golf hotel india juliett kilo lima');
    expect(response.usage).toMatchObject({ input_tokens: 4, output_tokens: 12, total_tokens: 16 });
  });

  it('streamed', async () => {
    const stream = await client.responses.create({ model: 'm', input: [{ role: 'user', content: 'hello' }], stream: true });
    const types: string[] = [];
    let deltas = '';
    let finalUsage: unknown;
    for await (const event of stream) {
      assertConforms('ResponseStreamEvent', event);
      types.push(event.type);
      if (event.type === 'response.output_text.delta') deltas += event.delta;
      if (event.type === 'response.completed') finalUsage = event.response.usage;
    }
    expect(types[0]).toBe('response.created');
    expect(types.at(-1)).toBe('response.completed');
    expect(deltas.split(' ')).toHaveLength(12);
    expect(finalUsage).toMatchObject({ output_tokens: 12 });
  });

  it('the stream helper yields the final response', async () => {
    const final = await client.responses.stream({ model: 'm', input: 'hi', max_output_tokens: 2 }).finalResponse();
    expect(final.status).toBe('incomplete');
    expect(final.output_text).toBe('alpha bravo');
  });
});

describe('errors through the openai client', () => {
  it('a 400 naming a param surfaces as BadRequestError with code and param', async () => {
    sim.script('m', [{ kind: 'error', status: 400, param: 'temperature' }]);
    const error = await client.chat.completions.create({ model: 'm', messages, temperature: 0.5 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error).toMatchObject({ status: 400, code: 'unsupported_value', param: 'temperature', type: 'invalid_request_error' });
  });

  it('a 404 surfaces as NotFoundError model_not_found', async () => {
    sim.script('gone', [{ kind: 'error', status: 404 }]);
    const error = await client.responses.create({ model: 'gone', input: 'x' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.NotFoundError);
    expect(error).toMatchObject({ code: 'model_not_found' });
    expect((error as Error).message).toContain('The model `gone` does not exist');
  });

  it('a 429 carries retry-after', async () => {
    sim.script('m', [{ kind: 'error', status: 429, headers: { 'retry-after': '7' } }]);
    const error = await client.chat.completions.create({ model: 'm', messages }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.RateLimitError);
    expect((error as InstanceType<typeof OpenAI.RateLimitError>).headers.get('retry-after')).toBe('7');
  });

  it('a wrong key is an AuthenticationError', async () => {
    const locked = await startSimulator({ acceptedKeys: ['right'] });
    try {
      const wrong = new OpenAI({ baseURL: locked.url, apiKey: 'wrong', maxRetries: 0, logLevel: 'off' });
      const error = await wrong.models.list().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OpenAI.AuthenticationError);
      expect(error).toMatchObject({ status: 401, code: 'invalid_api_key' });
      const right = new OpenAI({ baseURL: locked.url, apiKey: 'right', maxRetries: 0 });
      expect((await right.models.list()).data.length).toBeGreaterThan(0);
    } finally {
      await locked.close();
    }
  });

  it('scripts are consumed one per request, so a client retry sees the next behavior', async () => {
    sim.script('m', [{ kind: 'error', status: 503, headers: { 'retry-after-ms': '10' } }]);
    const retrying = new OpenAI({ baseURL: sim.url, apiKey: 'x', maxRetries: 1, logLevel: 'off' });
    const completion = await retrying.chat.completions.create({ model: 'm', messages });
    expect(completion.choices[0].finish_reason).toBe('stop');
    expect(sim.recorded).toHaveLength(2);
    expect(sim.recorded[1].headers['x-stainless-retry-count']).toBe('1');
  });
});

describe('faults', () => {
  it('reset mid-stream errors the iteration after exactly afterChunks chunks', async () => {
    sim.script('m', [{ kind: 'reset', afterChunks: 3 }]);
    const { chunks, error } = await collect(await client.chat.completions.create({ model: 'm', messages, stream: true }));
    // undici's error comes from Node's realm, not jest's, so match on its shape, not its class.
    expect(error).toMatchObject({ name: 'TypeError', message: 'terminated' });
    expect(chunks).toHaveLength(3);
    expect(text(chunks)).toBe('alpha bravo');
  });

  it('reset of a non-streamed request is a connection error', async () => {
    sim.script('m', [{ kind: 'reset', afterChunks: 0 }]);
    await expect(client.chat.completions.create({ model: 'm', messages })).rejects.toBeInstanceOf(OpenAI.APIConnectionError);
    expect(sim.recorded).toHaveLength(1);
  });

  it('reset beforeHeaders fails a streamed request before any response', async () => {
    sim.script('m', [{ kind: 'reset', afterChunks: 0, beforeHeaders: true }]);
    await expect(client.chat.completions.create({ model: 'm', messages, stream: true })).rejects.toBeInstanceOf(OpenAI.APIConnectionError);
  });

  it('stall delays the first byte, then replies normally', async () => {
    sim.script('m', [{ kind: 'stall', ms: 300 }]);
    const started = Date.now();
    const completion = await client.chat.completions.create({ model: 'm', messages });
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    expect(completion.choices[0].message.content).toContain('alpha');
  });

  it('stall with afterChunks goes quiet mid-stream, then finishes', async () => {
    sim.script('m', [{ kind: 'stall', ms: 300, afterChunks: 2, completionTokens: 3 }]);
    const stream = await client.chat.completions.create({ model: 'm', messages, stream: true });
    const arrivals: number[] = [];
    for await (const chunk of stream) {
      expect(chunk.object).toBe('chat.completion.chunk');
      arrivals.push(Date.now());
    }
    expect(arrivals).toHaveLength(5);
    expect(arrivals[2] - arrivals[1]).toBeGreaterThanOrEqual(290);
    expect(arrivals[1] - arrivals[0]).toBeLessThan(200);
  });

  it('a stalled request ends when the client gives up, and the simulator closes promptly', async () => {
    const slow = await startSimulator();
    let closedIn = Infinity;
    try {
      slow.setDefault('*', { kind: 'stall', ms: 60_000 });
      const impatient = new OpenAI({ baseURL: slow.url, apiKey: 'x', maxRetries: 0, timeout: 200 });
      const started = Date.now();
      await expect(impatient.chat.completions.create({ model: 'm', messages })).rejects.toBeInstanceOf(OpenAI.APIConnectionError);
      expect(Date.now() - started).toBeLessThan(1000);
      // A second request is still stalled when the simulator closes: close must not wait for it.
      const pending = new OpenAI({ baseURL: slow.url, apiKey: 'x', maxRetries: 0 }).chat.completions.create({ model: 'm', messages }).catch((e: unknown) => e);
      await new Promise((resolve) => setTimeout(resolve, 50));
      const closing = Date.now();
      await slow.close();
      closedIn = Date.now() - closing;
      expect(await pending).toBeInstanceOf(OpenAI.APIConnectionError);
    } finally {
      if (closedIn === Infinity) await slow.close();
    }
    expect(closedIn).toBeLessThan(1000);
  });

  it('a malformed frame makes the client throw a SyntaxError after the good chunks', async () => {
    sim.script('m', [{ kind: 'malformed', afterChunks: 2 }]);
    const { chunks, error } = await collect(await client.chat.completions.create({ model: 'm', messages, stream: true }));
    expect(error).toBeInstanceOf(SyntaxError);
    expect(chunks).toHaveLength(2);
  });

  it('a malformed non-streamed body fails to parse', async () => {
    sim.script('m', [{ kind: 'malformed', afterChunks: 0 }]);
    await expect(client.chat.completions.create({ model: 'm', messages })).rejects.toThrow();
  });

  it('an in-band stream error surfaces as APIError with its code', async () => {
    sim.script('m', [{ kind: 'stream-error', afterChunks: 4, code: 'server_overloaded', message: 'try later' }]);
    const { chunks, error } = await collect(await client.chat.completions.create({ model: 'm', messages, stream: true }));
    expect(chunks).toHaveLength(4);
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect(error).toMatchObject({ code: 'server_overloaded', message: 'try later' });
  });

  it('an in-band responses error is an error event', async () => {
    sim.script('m', [{ kind: 'stream-error', afterChunks: 3 }]);
    const types: string[] = [];
    for await (const event of await client.responses.create({ model: 'm', input: 'x', stream: true })) {
      assertConforms('ResponseStreamEvent', event);
      types.push(event.type);
    }
    expect(types).toEqual(['response.created', 'response.in_progress', 'response.output_item.added', 'error']);
  });

  it('streams a million-token reply lazily: memory stays flat while the client does not read', async () => {
    sim.script('m', [{ kind: 'ok', completionTokens: 1_000_000 }]);
    const before = process.memoryUsage().heapUsed;
    const { port } = new URL(sim.url);
    const body = JSON.stringify({ model: 'm', messages, stream: true });
    const firstBytes = await new Promise<{ res: http.IncomingMessage; req: http.ClientRequest; first: string }>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, path: '/v1/chat/completions', method: 'POST' }, (res) => {
        res.once('data', (chunk: Buffer) => {
          res.pause();
          resolve({ res, req, first: chunk.toString('utf8') });
        });
      });
      req.on('error', reject);
      req.end(body);
    });
    expect(firstBytes.first).toContain('"role":"assistant"');
    // Give an eager implementation ample time to build everything.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const grown = process.memoryUsage().heapUsed - before;
    firstBytes.req.destroy();
    // A million frames held at once would be hundreds of megabytes.
    expect(grown).toBeLessThan(64 * 1024 * 1024);
  });
});

describe('control surface', () => {
  const control = (path: string, init?: RequestInit): Promise<Response> => fetch(new URL(`/_sim/${path}`, sim.url), init);
  const postJson = (path: string, body: unknown): Promise<Response> =>
    control(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

  it('scripts, defaults, records and resets over HTTP', async () => {
    expect((await postJson('script', { model: 'm', behaviors: [{ kind: 'error', status: 429 }] })).status).toBe(200);
    expect((await postJson('default', { model: '*', behavior: { kind: 'ok', text: 'from default' } })).status).toBe(200);
    await expect(client.chat.completions.create({ model: 'm', messages })).rejects.toBeInstanceOf(OpenAI.RateLimitError);
    expect((await client.chat.completions.create({ model: 'm', messages })).choices[0].message.content).toBe('from default');

    const recorded = (await (await control('recorded')).json()) as { path: string; json: { model: string } }[];
    expect(recorded.map((r) => [r.path, r.json.model])).toEqual([
      ['/v1/chat/completions', 'm'],
      ['/v1/chat/completions', 'm'],
    ]);
    expect((await postJson('reset', {})).status).toBe(200);
    expect(sim.recorded).toHaveLength(0);
    expect((await client.chat.completions.create({ model: 'm', messages })).choices[0].message.content).toContain('alpha');
  });

  it('refuses a malformed behavior with a 400 naming the field', async () => {
    const res = await postJson('script', { model: 'm', behaviors: [{ kind: 'ok', completion_tokens: 3 }] });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { message: string } };
    assertConforms('ErrorResponse', body);
    expect(body.error.message).toContain('completion_tokens');
  });

  it('clears recorded requests with DELETE and answers unknown control paths with 404', async () => {
    await client.models.list();
    expect(sim.recorded).toHaveLength(1);
    expect((await control('recorded', { method: 'DELETE' })).status).toBe(200);
    expect(sim.recorded).toHaveLength(0);
    expect((await control('nothing')).status).toBe(404);
  });
});
