import { BehaviorBook, BehaviorError, parseBehavior } from '../../local/simulator/behavior';
import { IdSource, planReply, type PlanRequest } from '../../local/simulator/plan';
import { countWords, fragments, joinSeq, sampleFromSchema, splitWords, wordSeq } from '../../local/simulator/tokens';

const request = (overrides: Partial<PlanRequest> = {}): PlanRequest => ({
  model: 'sim-small',
  countedPromptTokens: 10,
  bodyBytes: 1000,
  ceiling: undefined,
  tool: undefined,
  structured: undefined,
  ...overrides,
});

describe('parseBehavior', () => {
  it.each([
    [{ kind: 'ok' }],
    [{ kind: 'ok', text: 'hi', completionTokens: 3, cachedTokens: 1, reasoningTokens: 2, ignoreCeiling: true, omitUsage: false }],
    [{ kind: 'ok', toolCalls: [{ name: 'f', arguments: '{}' }], responseModel: null, headers: { 'x-a': 'b' } }],
    [{ kind: 'error', status: 429, headers: { 'retry-after': '2' }, body: { anything: 1 }, param: null }],
    [{ kind: 'reset', afterChunks: 0, beforeHeaders: true }],
    [{ kind: 'stall', ms: 10, afterChunks: 2, completionTokens: 4 }],
    [{ kind: 'malformed', afterChunks: 1 }],
    [{ kind: 'stream-error', afterChunks: 1, code: 'server_error' }],
  ])('accepts %j', (value) => {
    expect(parseBehavior(value)).toEqual(value);
  });

  it.each([
    [null, 'must be an object'],
    [{ kind: 'explode' }, 'kind must be one of'],
    [{ kind: 'ok', completion_tokens: 3 }, 'completion_tokens is not a field'],
    [{ kind: 'ok', completionTokens: -1 }, 'completionTokens has an invalid value'],
    [{ kind: 'ok', completionTokens: 1.5 }, 'completionTokens has an invalid value'],
    [{ kind: 'error' }, 'status is required'],
    [{ kind: 'error', status: 700 }, 'status has an invalid value'],
    [{ kind: 'error', status: 500, text: 'x' }, 'text is not a field'],
    [{ kind: 'reset' }, 'afterChunks is required'],
    [{ kind: 'stall', ms: 'soon' }, 'ms has an invalid value'],
    [{ kind: 'ok', toolCalls: [] }, 'toolCalls has an invalid value'],
    [{ kind: 'ok', headers: { a: 1 } }, 'headers has an invalid value'],
  ])('refuses %j', (value, message) => {
    expect(() => parseBehavior(value)).toThrow(BehaviorError);
    expect(() => parseBehavior(value)).toThrow(message);
  });
});

describe('BehaviorBook', () => {
  it('consumes scripts in order, then falls back to the model default, then *', () => {
    const book = new BehaviorBook();
    book.setDefault('*', { kind: 'error', status: 503 });
    book.setDefault('a', { kind: 'ok', text: 'default a' });
    book.script('a', [{ kind: 'error', status: 500 }]);
    book.script('a', [{ kind: 'reset', afterChunks: 1 }]);
    expect(book.next('a').kind).toBe('error');
    expect(book.next('a').kind).toBe('reset');
    expect(book.next('a')).toEqual({ kind: 'ok', text: 'default a' });
    expect(book.next('b')).toEqual({ kind: 'error', status: 503 });
    expect(book.next(undefined)).toEqual({ kind: 'error', status: 503 });
    book.clear();
    expect(book.next('a')).toEqual({ kind: 'ok' });
  });

  it('validates scripted behaviors when they are queued, not when used', () => {
    const book = new BehaviorBook();
    expect(() => book.script('a', [{ kind: 'ok' }, { kind: 'nope' }])).toThrow('behaviors[1].kind');
    expect(book.next('a')).toEqual({ kind: 'ok' });
  });
});

describe('planReply', () => {
  const ids = new IdSource();

  it.each([
    // [label, request overrides, reply options, expected completion, reasoning, visible tokens, truncated]
    ['default length', {}, {}, 12, 0, 12, false],
    ['ceiling cuts', { ceiling: 5 }, {}, 5, 0, 5, true],
    ['ceiling equal is not a cut', { ceiling: 12 }, {}, 12, 0, 12, false],
    ['ignoreCeiling overruns', { ceiling: 5 }, { ignoreCeiling: true, completionTokens: 40 }, 40, 0, 40, false],
    ['reasoning counts as completion', {}, { completionTokens: 4, reasoningTokens: 6 }, 10, 6, 4, false],
    ['reasoning spends the ceiling first', { ceiling: 8 }, { completionTokens: 4, reasoningTokens: 6 }, 8, 6, 2, true],
    ['reasoning alone exceeds the ceiling', { ceiling: 3 }, { completionTokens: 4, reasoningTokens: 6 }, 3, 3, 0, true],
    ['text sets the tokens', {}, { text: 'one two three' }, 3, 0, 3, false],
    ['completionTokens decouples usage from text', {}, { text: 'one two three', completionTokens: 50 }, 50, 0, 3, false],
  ] as const)('%s', (_label, req, options, completion, reasoning, visible, truncated) => {
    const plan = planReply(request(req), options, ids);
    expect(plan.completionTokens).toBe(completion);
    expect(plan.reasoningTokens).toBe(reasoning);
    expect(plan.text.length).toBe(visible);
    expect(plan.truncated).toBe(truncated);
  });

  it('clamps prompt tokens to the body byte length and cached tokens to prompt tokens', () => {
    const plan = planReply(request({ countedPromptTokens: 50, bodyBytes: 20 }), { cachedTokens: 999 }, ids);
    expect(plan.promptTokens).toBe(20);
    expect(plan.cachedTokens).toBe(20);
    expect(planReply(request(), { promptTokens: 7, cachedTokens: 3 }, ids)).toMatchObject({ promptTokens: 7, cachedTokens: 3 });
  });

  it('derives a tool call from the tool schema, fragmented for streaming', () => {
    const plan = planReply(
      request({ tool: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } } } } }),
      {},
      ids,
    );
    expect(plan.toolCalls).toHaveLength(1);
    const [call] = plan.toolCalls;
    expect(call.name).toBe('get_weather');
    expect(JSON.parse(call.arguments)).toEqual({ city: 'sample', days: 1 });
    expect(call.fragments.length).toBeGreaterThan(2);
    expect(call.fragments.join('')).toBe(call.arguments);
    expect(plan.completionTokens).toBe(call.fragments.length);
    expect(plan.text.length).toBe(0);
  });

  it('truncates tool arguments at the ceiling, keeping the first call', () => {
    const plan = planReply(request({ ceiling: 2 }), { toolCalls: [{ name: 'a', arguments: '{"x":"0123456789"}' }, { name: 'b', arguments: '{}' }] }, ids);
    expect(plan.truncated).toBe(true);
    expect(plan.toolCalls.map((c) => c.name)).toEqual(['a']);
    expect(plan.toolCalls[0].arguments).toBe('{"x":"01');
  });

  it('produces JSON for structured output', () => {
    const schema = { type: 'object', properties: { ok: { type: 'boolean' }, tags: { type: 'array', items: { type: 'string' } } } };
    const plan = planReply(request({ structured: { kind: 'json_schema', schema } }), {}, ids);
    expect(JSON.parse(joinSeq(plan.text))).toEqual({ ok: true, tags: ['sample'] });
    expect(JSON.parse(joinSeq(planReply(request({ structured: { kind: 'json_object' } }), {}, ids).text))).toEqual({ answer: 'alpha bravo charlie' });
  });

  it('names the request model unless told otherwise', () => {
    expect(planReply(request(), {}, ids).model).toBe('sim-small');
    expect(planReply(request(), { responseModel: 'sim-small-2025-01-01' }, ids).model).toBe('sim-small-2025-01-01');
    expect(planReply(request(), { responseModel: null }, ids).model).toBeNull();
  });

  it('gives distinct ids', () => {
    expect(ids.next('call_')).not.toBe(ids.next('call_'));
  });
});

describe('tokens', () => {
  it('generates words lazily and deterministically', () => {
    const seq = wordSeq(1_000_000_000);
    expect(seq.at(0)).toBe('alpha');
    expect(seq.at(17)).toBe(' bravo');
    expect(joinSeq(wordSeq(3))).toBe('alpha bravo charlie');
  });

  it.each(['one two  three\n', '  leading', 'single', 'héllo wörld 🎉 ok', ''])('splits %j into words that join back', (text) => {
    expect(splitWords(text).join('')).toBe(text);
    expect(splitWords(text).length).toBe(countWords(text));
  });

  it('fragments by code point, never splitting a surrogate pair', () => {
    expect(fragments('🎉🎉🎉🎉🎉', 2)).toEqual(['🎉🎉', '🎉🎉', '🎉']);
  });

  it('samples enum, const and nested shapes', () => {
    expect(sampleFromSchema({ enum: ['c', 'f'] })).toBe('c');
    expect(sampleFromSchema({ anyOf: [{ type: 'null' }, { type: 'number', minimum: 3 }] })).toBe(3);
    expect(sampleFromSchema({ type: ['null', 'object'], properties: { a: { const: 1 } } })).toEqual({ a: 1 });
  });
});
