/**
 * POST /v1/responses end to end with the official client's `responses.create`, streamed and not:
 * the same door as chat (key, catalog, hold, usage row under its own family), the responses family
 * required of the model, `store: true` refused before anything is held or called, `store` omitted
 * forwarded as omitted, events passed through unchanged with `:x-sluice-usage` immediately before
 * the end, and usage read from the terminal event (completed, incomplete, failed). A fixed-bytes
 * provider stands in where the simulator cannot produce a stream (a failed response, a stream that
 * stops without its terminal event).
 */
import OpenAI from 'openai';
import { createProfile } from '../../local/ops';
import { startStack, expectInvariant, type TestStack } from '../support/stack';
import {
  addToCatalog,
  chargeOn,
  dataOf,
  estimateOn,
  expectApiError,
  fixedUpstream,
  framesOf,
  holdOn,
  localProvider,
  modelUnder,
  rawPost,
  responsesCounts,
  rowOf,
  usageCommentOf,
  type FixedUpstream,
} from '../support/e2e';

let stack: TestStack;
let fixture: FixedUpstream;

beforeAll(async () => {
  fixture = await fixedUpstream();
  stack = await startStack({ env: { SLUICE_FIXTURE_URL: fixture.url } });
  await addToCatalog(
    stack,
    [{ ...localProvider(), name: 'fixture', displayName: 'Fixed-bytes provider', baseUrlEnv: 'SLUICE_FIXTURE_URL' }],
    [modelUnder('fixture', 'local/sim-small')],
  );
});

afterAll(async () => {
  await stack?.close();
  await fixture?.close();
});

beforeEach(() => stack.sim.reset());

const responsesCalls = (): { model: unknown; json: Record<string, unknown>; rawBody: string }[] =>
  stack.sim.recorded
    .filter((r) => r.path === '/v1/responses')
    .map((r) => ({ model: (r.json as { model?: unknown }).model, json: r.json as Record<string, unknown>, rawBody: r.rawBody }));

describe('non-streamed', () => {
  it('is served through the same door, forwarded as the provider sent it, and filed under its own family', async () => {
    const before = await stack.balance();
    const { data, response } = await stack
      .client()
      .responses.create({ model: 'local/sim-small', input: 'Say hello in a few words', max_output_tokens: 50, reasoning: { effort: 'low' } })
      .withResponse();
    expect(data.object).toBe('response');
    expect(data.status).toBe('completed');
    expect(data.output_text.length).toBeGreaterThan(0);
    // A responses-format reply is forwarded as the provider sent it.
    expect(data.model).toBe('sim-small');
    expect(response.headers.get('x-sluice-served-by')).toBe('local/sim-small');
    expect(response.headers.get('x-sluice-provider')).toBe('local');
    expect(response.headers.get('x-sluice-retry-attempt-count')).toBe('0');

    const calls = responsesCalls();
    expect(calls).toHaveLength(1);
    // Forwarded untouched but for the model: reasoning rides along, no store is added, no max_tokens either.
    const sent = calls[0]!.rawBody.replace('"model":"sim-small"', '"model":"local/sim-small"');
    expect(JSON.parse(sent)).toEqual({ model: 'local/sim-small', input: 'Say hello in a few words', max_output_tokens: 50, reasoning: { effort: 'low' } });
    expect('store' in calls[0]!.json).toBe(false);

    await stack.settled();
    const after = await stack.balance();
    const expected = await chargeOn(stack, 'local/sim-small', responsesCounts(data.usage!));
    expect(expected).toBeGreaterThan(0);
    const row = await rowOf(stack, response.headers.get('x-sluice-request-id'));
    expect(row).toMatchObject({
      family: 'responses',
      requestedModel: 'local/sim-small',
      servedBy: 'local/sim-small',
      stream: false,
      outcome: 'ok',
      chargeMicros: expected,
      inputTokens: data.usage!.input_tokens,
      outputTokens: data.usage!.output_tokens,
    });
    // The same hold sizing as chat: the ceiling sent (max_output_tokens) under the model's maximum.
    expect(row.holdMicros).toBe((await holdOn(stack, 'local/sim-small', sent, 'responses')).amountMicros);
    expect(before.availableMicros - after.availableMicros).toBe(expected);
    expectInvariant(after);
  });

  it('store: false is forwarded as sent', async () => {
    await stack.client().responses.create({ model: 'local/sim-small', input: 'x', store: false });
    expect(responsesCalls()[0]!.json.store).toBe(false);
    await stack.settled();
    expectInvariant(await stack.balance());
  });

  it('store: true is refused 400 unsupported_value on param store, before anything is held or called', async () => {
    const before = await stack.balance();
    const rowsBefore = (await stack.usageRows()).length;
    const bodies: OpenAI.Responses.ResponseCreateParams[] = [
      { model: 'local/sim-small', input: 'x', store: true },
      { model: 'local/sim-small', input: 'x', store: true, stream: true },
      // Before the model is even resolved.
      { model: 'local/does-not-exist', input: 'x', store: true },
    ];
    for (const body of bodies) {
      await expectApiError(stack.client().responses.create(body), 400, 'unsupported_value', 'invalid_request_error', 'store');
    }
    expect(stack.sim.recorded).toHaveLength(0);
    expect(await stack.balance()).toEqual(before);
    expect(await stack.usageRows()).toHaveLength(rowsBefore);
  });

  it('a model not offered for the responses family is 404 model_not_available, calling nothing', async () => {
    const e = await expectApiError(stack.client().responses.create({ model: 'local/sim-chat-only', input: 'x' }), 404, 'model_not_available', 'not_found_error', null);
    expect(e.message).toContain('/v1/responses');
    expect(stack.sim.recorded).toHaveLength(0);
  });

  it('the same key and balance rules: 401 for a bad key, 402 without credit', async () => {
    await expectApiError(stack.client(`slc_dev_${'B'.repeat(43)}`).responses.create({ model: 'local/sim-small', input: 'x' }), 401, 'invalid_api_key', 'authentication_error', null);
    const poor = await stack.seed(0);
    await expectApiError(stack.client(poor.rawKey).responses.create({ model: 'local/sim-small', input: 'x' }), 402, 'insufficient_credit', 'insufficient_quota', null);
    expect(stack.sim.recorded).toHaveLength(0);
    expect(await stack.usageRows(poor.workspaceId)).toHaveLength(0);
  });

  it('a profile falls back on the responses endpoint too, skipping members not offered for it', async () => {
    await createProfile(stack.admin, { workspaceId: stack.workspaceId, identifier: 'resp-chain', models: ['local/sim-chat-only', 'local/sim-small', 'local/sim-large'] });
    stack.sim.script('sim-small', [{ kind: 'error', status: 500 }]);
    const before = await stack.balance();
    const { data, response } = await stack.client().responses.create({ model: 'profile/resp-chain', input: 'route me' }).withResponse();
    expect(response.headers.get('x-sluice-served-by')).toBe('local/sim-large');
    expect(response.headers.get('x-sluice-retry-attempt-count')).toBe('1');
    expect(data.model).toBe('sim-large');
    expect(responsesCalls().map((c) => c.model)).toEqual(['sim-small', 'sim-large']);
    expect(responsesCalls()[1]!.rawBody).toBe(responsesCalls()[0]!.rawBody.replace('"model":"sim-small"', '"model":"sim-large"'));
    await stack.settled();
    const after = await stack.balance();
    const expected = await chargeOn(stack, 'local/sim-large', responsesCounts(data.usage!));
    expect(before.availableMicros - after.availableMicros).toBe(expected);
    expect(await rowOf(stack, response.headers.get('x-sluice-request-id'))).toMatchObject({
      family: 'responses',
      requestedModel: 'profile/resp-chain',
      servedBy: 'local/sim-large',
      attempts: 2,
      chargeMicros: expected,
    });
    expectInvariant(after);
  });
});

describe('streamed', () => {
  it('passes the events to the official client and charges the counts of response.completed', async () => {
    const before = await stack.balance();
    const { data: stream, response } = await stack.client().responses.create({ model: 'local/sim-small', input: 'Stream a few words', stream: true }).withResponse();
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(response.headers.get('x-sluice-served-by')).toBe('local/sim-small');
    const types: string[] = [];
    let text = '';
    let completed: OpenAI.Responses.Response | undefined;
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'response.output_text.delta') text += event.delta;
      if (event.type === 'response.completed') completed = event.response;
    }
    expect(types[0]).toBe('response.created');
    expect(types.at(-1)).toBe('response.completed');
    expect(text.length).toBeGreaterThan(0);
    expect(completed?.output_text ?? text).toBeTruthy();
    expect('store' in responsesCalls()[0]!.json).toBe(false);
    await stack.settled();
    const after = await stack.balance();
    const expected = await chargeOn(stack, 'local/sim-small', responsesCounts(completed!.usage!));
    expect(expected).toBeGreaterThan(0);
    expect(before.availableMicros - after.availableMicros).toBe(expected);
    expect(await rowOf(stack, response.headers.get('x-sluice-request-id'))).toMatchObject({ family: 'responses', stream: true, outcome: 'ok', chargeMicros: expected });
    expectInvariant(after);
  });

  it('relays the provider bytes unchanged, with :x-sluice-usage immediately before the end', async () => {
    const events = [
      'event: response.created\ndata: {"type":"response.created","sequence_number":0,"response":{"id":"resp_fx","object":"response","status":"in_progress","model":"fx-model-2025","output":[],"usage":null}}\n\n',
      ': keep-alive\n\n',
      'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_fx","output_index":0,"content_index":0,"delta":"Grüße 😀 \\"quoted\\" \\"type\\":\\"response.completed\\""}\n\n',
      'event: response.output_text.delta\ndata: {"type": "response.output_text.delta", "sequence_number": 2, "item_id": "msg_fx", "output_index": 0, "content_index": 0, "delta": " 中文"}\n\n',
      'event: response.completed\ndata: {"type":"response.completed","sequence_number":3,"response":{"id":"resp_fx","object":"response","status":"completed","model":"fx-model-2025","output":[],"usage":{"input_tokens":21,"input_tokens_details":{"cached_tokens":4},"output_tokens":9,"output_tokens_details":{"reasoning_tokens":2},"total_tokens":30}}}\n\n',
    ].join('');
    fixture.reply(200, 'text/event-stream', events);
    const before = await stack.balance();
    const res = await rawPost(stack, '/responses', JSON.stringify({ model: 'fixture/sim-small', input: 'x', stream: true }));
    expect(res.status).toBe(200);
    const counts = { inputTokens: 21, cachedInputTokens: 4, outputTokens: 9, reasoningTokens: 2 };
    const expected = await chargeOn(stack, 'fixture/sim-small', counts);
    expect(res.text.startsWith(events)).toBe(true);
    const tail = res.text.slice(events.length);
    expect(tail).toMatch(/^:x-sluice-usage [^\n]*\n\n$/);
    expect(usageCommentOf(tail.slice(0, -2))).toMatchObject({ prompt_tokens: 21, completion_tokens: 9, cached_tokens: 4, charge_micros: expected, estimated: false });
    await stack.settled();
    const after = await stack.balance();
    expect(before.availableMicros - after.availableMicros).toBe(expected);
    expect(await rowOf(stack, res.headers.get('x-sluice-request-id'))).toMatchObject({ servedBy: 'fixture/sim-small', family: 'responses', chargeMicros: expected, outputTokens: 9, reasoningTokens: 2 });
    expectInvariant(after);
  });

  it('charges the counts of response.incomplete', async () => {
    const before = await stack.balance();
    const stream = await stack.client().responses.create({ model: 'local/sim-small', input: 'A long answer please', max_output_tokens: 3, stream: true });
    let last: OpenAI.Responses.ResponseStreamEvent | undefined;
    for await (const event of stream) last = event;
    expect(last?.type).toBe('response.incomplete');
    const usage = (last as OpenAI.Responses.ResponseIncompleteEvent).response.usage!;
    expect(usage.output_tokens).toBe(3);
    await stack.settled();
    const after = await stack.balance();
    expect(before.availableMicros - after.availableMicros).toBe(await chargeOn(stack, 'local/sim-small', responsesCounts(usage)));
    expectInvariant(after);
  });

  it('charges the counts of response.failed', async () => {
    const events = [
      'event: response.created\ndata: {"type":"response.created","sequence_number":0,"response":{"id":"resp_f","object":"response","status":"in_progress","output":[],"usage":null}}\n\n',
      'event: response.failed\ndata: {"type":"response.failed","sequence_number":1,"response":{"id":"resp_f","object":"response","status":"failed","error":{"code":"server_error","message":"failed"},"output":[],"usage":{"input_tokens":13,"output_tokens":5,"total_tokens":18}}}\n\n',
    ].join('');
    fixture.reply(200, 'text/event-stream', events);
    const before = await stack.balance();
    const res = await rawPost(stack, '/responses', JSON.stringify({ model: 'fixture/sim-small', input: 'x', stream: true }));
    expect(res.text.startsWith(events)).toBe(true);
    const expected = await chargeOn(stack, 'fixture/sim-small', { inputTokens: 13, cachedInputTokens: 0, outputTokens: 5, reasoningTokens: 0 });
    expect(usageCommentOf(framesOf(res.text).at(-1))).toMatchObject({ prompt_tokens: 13, completion_tokens: 5, charge_micros: expected, estimated: false });
    await stack.settled();
    const after = await stack.balance();
    expect(before.availableMicros - after.availableMicros).toBe(expected);
    expectInvariant(after);
  });

  describe('a stream that breaks ends with one in-band error frame, charged for what it produced', () => {
    it.each<[string, () => void, number]>([
      ['a frame that is not JSON', () => stack.sim.script('sim-small', [{ kind: 'malformed', afterChunks: 7 }]), 7],
      ["the provider's error event", () => stack.sim.script('sim-small', [{ kind: 'stream-error', afterChunks: 6 }]), 6],
      ['an upstream reset', () => stack.sim.script('sim-small', [{ kind: 'reset', afterChunks: 5 }]), 5],
    ])('%s', async (_label, arrange, goodFrames) => {
      arrange();
      const before = await stack.balance();
      const raw = JSON.stringify({ model: 'local/sim-small', input: 'Tell me a story', stream: true });
      const res = await rawPost(stack, '/responses', raw);
      expect(res.status).toBe(200);
      const frames = framesOf(res.text);
      expect(frames).toHaveLength(goodFrames + 2);
      const deltas = frames.slice(0, goodFrames).filter((f) => f.startsWith('event: response.output_text.delta')).length;
      expect(deltas).toBeGreaterThan(0);
      expect(dataOf(frames[goodFrames]!)).toEqual({
        error: { message: expect.any(String) as unknown, type: 'api_error', param: null, code: 'upstream_stream_failed', request_id: res.headers.get('x-sluice-request-id') },
      });
      expect(res.text).not.toContain('not json');
      expect(res.text).not.toContain('event: error');
      const usage = usageCommentOf(frames[goodFrames + 1]);
      await stack.settled();
      const after = await stack.balance();
      const row = await rowOf(stack, res.headers.get('x-sluice-request-id'));
      const expected = await estimateOn(stack, 'local/sim-small', raw, deltas, row.holdMicros, 'responses');
      expect(row).toMatchObject({ family: 'responses', outcome: 'upstream_fault', chargeMicros: expected });
      expect(usage).toMatchObject({ charge_micros: expected, estimated: true });
      expect(before.availableMicros - after.availableMicros).toBe(expected);
      expectInvariant(after);
    });

    it('a stream the provider closes before its terminal event', async () => {
      const events = [
        'event: response.created\ndata: {"type":"response.created","sequence_number":0,"response":{"id":"resp_c","status":"in_progress","usage":null}}\n\n',
        'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","sequence_number":1,"delta":"half"}\n\n',
      ].join('');
      fixture.reply(200, 'text/event-stream', events);
      const before = await stack.balance();
      const raw = JSON.stringify({ model: 'fixture/sim-small', input: 'x', stream: true });
      const res = await rawPost(stack, '/responses', raw);
      expect(res.text.startsWith(events)).toBe(true);
      const frames = framesOf(res.text.slice(events.length));
      expect(frames).toHaveLength(2);
      expect(dataOf(frames[0]!)).toMatchObject({ error: { code: 'upstream_stream_failed' } });
      await stack.settled();
      const after = await stack.balance();
      const row = await rowOf(stack, res.headers.get('x-sluice-request-id'));
      const expected = await estimateOn(stack, 'fixture/sim-small', raw, 1, row.holdMicros, 'responses');
      expect(usageCommentOf(frames[1])).toMatchObject({ charge_micros: expected, estimated: true });
      expect(row).toMatchObject({ outcome: 'upstream_fault', chargeMicros: expected });
      expect(before.availableMicros - after.availableMicros).toBe(expected);
      expectInvariant(after);
    });
  });
});
