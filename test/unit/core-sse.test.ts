/** The SSE relay: byte-exact pass-through, usage read from the stream, DESIGN decision 4. */
import { SseRelay, readUsage, usageComment, type RelayOptions } from '../../lambdas/core/sse';
import type { TokenCounts } from '../../lambdas/shared/records';

type Json = Record<string, unknown>;

const base = { id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1_790_000_000, model: 'gpt-4.1-mini-2025-04-14', system_fingerprint: 'fp_1' };
const choice = (delta: Json, finish: string | null = null): Json => ({ ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] });

/** What the provider sends without include_usage: a chat stream with text, a tool call and multi-byte characters. */
const CHAT_CHUNKS: readonly Json[] = [
  choice({ role: 'assistant', content: '', refusal: null }),
  choice({ content: 'Héllo 😀 中文 — ' }),
  choice({ content: '"usage":null} {"quoted"} \\ ' }),
  choice({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'f', arguments: '' } }] }),
  choice({ tool_calls: [{ index: 0, function: { arguments: '{"a":1,"usage":null,"é":"😀"}' } }] }),
  choice({}, 'tool_calls'),
];
const USAGE = {
  prompt_tokens: 21,
  completion_tokens: 9,
  total_tokens: 30,
  prompt_tokens_details: { cached_tokens: 5, audio_tokens: 0 },
  completion_tokens_details: { reasoning_tokens: 2, audio_tokens: 0 },
};
const USAGE_COUNTS: TokenCounts = { inputTokens: 21, cachedInputTokens: 5, outputTokens: 9, reasoningTokens: 2 };

type Eol = '\n' | '\r\n';
const frame = (json: Json | string, eol: Eol = '\n'): string => `data: ${typeof json === 'string' ? json : JSON.stringify(json)}${eol}${eol}`;
/** The same chunk as sent when include_usage was asked: `"usage":null` last. */
const withNullUsage = (json: Json): string => `${JSON.stringify(json).slice(0, -1)},"usage":null}`;
const DONE = (eol: Eol = '\n'): string => `data: [DONE]${eol}${eol}`;

const plainFrames = (eol: Eol = '\n'): string[] => CHAT_CHUNKS.map((c) => frame(c, eol));
const askedFrames = (eol: Eol = '\n'): string[] => [
  ...CHAT_CHUNKS.map((c) => frame(withNullUsage(c), eol)),
  frame({ ...base, choices: [], usage: USAGE }, eol),
];

interface Fed {
  readonly out: Buffer;
  readonly done: Buffer | undefined;
  readonly doneCount: number;
  readonly relay: SseRelay;
}

function feed(options: RelayOptions, pieces: readonly Buffer[]): Fed {
  const relay = new SseRelay(options);
  const outs: Buffer[] = [];
  let done: Buffer | undefined;
  let doneCount = 0;
  for (const p of pieces) {
    const step = relay.push(p);
    if (step.out !== undefined) outs.push(Buffer.from(step.out));
    if (step.done !== undefined) {
      done = Buffer.from(step.done);
      doneCount += 1;
    }
  }
  return { out: Buffer.concat(outs), done, doneCount, relay };
}

/** Every single split point, plus one byte at a time. */
function splits(buf: Buffer): Buffer[][] {
  const all: Buffer[][] = [];
  for (let i = 0; i <= buf.length; i += 1) all.push([buf.subarray(0, i), buf.subarray(i)]);
  all.push([...buf].map((b) => Buffer.from([b])));
  return all;
}

const CHAT: RelayOptions = { family: 'chat_completions', injectedUsage: false };
const CHAT_INJECTED: RelayOptions = { family: 'chat_completions', injectedUsage: true };
const RESPONSES: RelayOptions = { family: 'responses', injectedUsage: false };

describe('readUsage', () => {
  test.each<[string, unknown, TokenCounts | undefined]>([
    ['chat naming', USAGE, USAGE_COUNTS],
    [
      'responses naming',
      { input_tokens: 7, input_tokens_details: { cached_tokens: 1 }, output_tokens: 3, output_tokens_details: { reasoning_tokens: 2 }, total_tokens: 10 },
      { inputTokens: 7, cachedInputTokens: 1, outputTokens: 3, reasoningTokens: 2 },
    ],
    ['chat without details', { prompt_tokens: 4, completion_tokens: 6 }, { inputTokens: 4, cachedInputTokens: 0, outputTokens: 6, reasoningTokens: 0 }],
    ['unreadable numbers count as 0', { prompt_tokens: -1, completion_tokens: 1.5 }, { inputTokens: 0, cachedInputTokens: 0, outputTokens: 0, reasoningTokens: 0 }],
    ['null', null, undefined],
    ['empty object', {}, undefined],
    ['a string', 'usage', undefined],
  ])('%s', (_l, usage, expected) => {
    expect(readUsage(usage)).toEqual(expected);
  });
});

describe('chat stream, client asked nothing was injected: byte-exact pass-through', () => {
  describe.each<[string, Eol]>([['LF', '\n'], ['CRLF', '\r\n']])('%s line endings', (_l, eol) => {
    const frames = askedFrames(eol); // the client asked for usage itself
    const input = Buffer.from([...frames, DONE(eol)].join(''), 'utf8');

    test('at every split point and one byte at a time: output equals input minus [DONE]; usage read', () => {
      for (const pieces of splits(input)) {
        const fed = feed(CHAT, pieces);
        expect(fed.out.equals(Buffer.from(frames.join(''), 'utf8'))).toBe(true);
        expect(fed.done?.toString('utf8')).toBe(DONE(eol));
        expect(fed.doneCount).toBe(1);
        expect(fed.relay.usage).toEqual(USAGE_COUNTS);
        expect(fed.relay.ended).toBe(true);
        expect(fed.relay.flush()).toBeUndefined();
      }
    });

    test('every frame is forwarded as soon as its blank line arrives', () => {
      const relay = new SseRelay(CHAT);
      let forwarded = '';
      let consumed = 0;
      const ends: number[] = [];
      for (const f of frames) ends.push((ends[ends.length - 1] ?? 0) + Buffer.byteLength(f));
      for (const byte of input) {
        const step = relay.push(Buffer.from([byte]));
        consumed += 1;
        if (step.out !== undefined) forwarded += step.out.toString('latin1');
        const complete = ends.filter((e) => e <= consumed).length;
        const expected = Buffer.from(frames.slice(0, complete).join(''), 'utf8').toString('latin1');
        expect(forwarded).toBe(expected);
      }
    });
  });

  test('the plain stream (no usage at all) passes untouched and leaves usage unknown', () => {
    const input = Buffer.from([...plainFrames(), DONE()].join(''));
    const fed = feed(CHAT, [input]);
    expect(fed.out.equals(Buffer.from(plainFrames().join('')))).toBe(true);
    expect(fed.relay.usage).toBeUndefined();
    expect(fed.relay.frames).toBe(CHAT_CHUNKS.length);
  });

  test('comment and keep-alive frames pass and are not counted as data frames', () => {
    const input = `: keep-alive\n\n${frame(CHAT_CHUNKS[1] as Json)}:ping\n\n${DONE()}`;
    const fed = feed(CHAT, [Buffer.from(input)]);
    expect(fed.out.toString()).toBe(input.slice(0, -DONE().length));
    expect(fed.relay.frames).toBe(1);
  });

  test('nothing after [DONE] is forwarded', () => {
    const relay = new SseRelay(CHAT);
    const first = relay.push(Buffer.from(`${frame(CHAT_CHUNKS[0] as Json)}${DONE()}${frame(CHAT_CHUNKS[1] as Json)}`));
    expect(first.out?.toString()).toBe(frame(CHAT_CHUNKS[0] as Json));
    expect(first.done?.toString()).toBe(DONE());
    const later = relay.push(Buffer.from(frame(CHAT_CHUNKS[2] as Json)));
    expect(later.out).toBeUndefined();
    expect(later.done).toBeUndefined();
    expect(relay.flush()).toBeUndefined();
  });

  test('an empty chunk changes nothing', () => {
    const relay = new SseRelay(CHAT);
    expect(relay.push(Buffer.alloc(0))).toEqual({ out: undefined });
  });
});

describe('injected include_usage (DESIGN decision 4)', () => {
  describe.each<[string, Eol]>([['LF', '\n'], ['CRLF', '\r\n']])('%s line endings', (_l, eol) => {
    const input = Buffer.from([...askedFrames(eol), DONE(eol)].join(''), 'utf8');
    const expected = Buffer.from(plainFrames(eol).join(''), 'utf8');

    test('at every split point: output equals what the provider sends without include_usage', () => {
      for (const pieces of splits(input)) {
        const fed = feed(CHAT_INJECTED, pieces);
        expect(fed.out.equals(expected)).toBe(true);
        expect(fed.done?.toString('utf8')).toBe(DONE(eol));
        expect(fed.relay.usage).toEqual(USAGE_COUNTS);
      }
    });
  });

  test('a usage object inside a choice chunk is read but not withheld', () => {
    const last = { ...choice({}, 'stop'), usage: USAGE };
    const frames = [frame(withNullUsage(CHAT_CHUNKS[1] as Json)), frame(last)];
    const fed = feed(CHAT_INJECTED, [Buffer.from([...frames, DONE()].join(''))]);
    expect(fed.out.toString('utf8')).toBe(frame(CHAT_CHUNKS[1] as Json) + frame(last));
    expect(fed.relay.usage).toEqual(USAGE_COUNTS);
  });

  test('without injection, the usage-only chunk is forwarded', () => {
    const fed = feed(CHAT, [Buffer.from([...askedFrames(), DONE()].join(''))]);
    expect(fed.out.toString('utf8')).toBe(askedFrames().join(''));
  });

  test('a `"usage":null` spelled inside a string (escaped) is never stripped', () => {
    const c = choice({ content: 'x,"usage":null y' });
    expect(JSON.stringify(c)).toContain(',\\"usage\\":null');
    const fed = feed(CHAT_INJECTED, [Buffer.from(frame(withNullUsage(c)))]);
    expect(fed.out.toString('utf8')).toBe(frame(c));
  });
});

describe('responses-family streams', () => {
  const ev = (type: string, data: Json, eol: Eol = '\n'): string => `event: ${type}${eol}data: ${JSON.stringify({ type, ...data })}${eol}${eol}`;
  const RUSAGE = { input_tokens: 40, input_tokens_details: { cached_tokens: 8 }, output_tokens: 12, output_tokens_details: { reasoning_tokens: 4 }, total_tokens: 52 };
  const RCOUNTS: TokenCounts = { inputTokens: 40, cachedInputTokens: 8, outputTokens: 12, reasoningTokens: 4 };
  const stream = (endType: string, eol: Eol = '\n'): string =>
    [
      ev('response.created', { sequence_number: 0, response: { id: 'resp_1', status: 'in_progress', usage: null } }, eol),
      ev('response.output_text.delta', { sequence_number: 1, delta: 'Hé😀 "type":"response.completed" 中' }, eol),
      ev(endType, { sequence_number: 2, response: { id: 'resp_1', status: 'done', usage: RUSAGE } }, eol),
    ].join('');

  test.each<[string, string, Eol]>([
    ['response.completed', 'response.completed', '\n'],
    ['response.incomplete', 'response.incomplete', '\n'],
    ['response.completed, CRLF', 'response.completed', '\r\n'],
  ])('%s: every byte forwarded at every split; usage read from the terminal event', (_l, endType, eol) => {
    const input = Buffer.from(stream(endType, eol), 'utf8');
    for (const pieces of splits(input)) {
      for (const options of [RESPONSES, { ...RESPONSES, injectedUsage: true }]) {
        const fed = feed(options, pieces);
        expect(fed.out.equals(input)).toBe(true);
        expect(fed.done).toBeUndefined();
        expect(fed.relay.usage).toEqual(RCOUNTS);
      }
    }
  });

  test('no usage before the terminal event', () => {
    const relay = new SseRelay(RESPONSES);
    relay.push(Buffer.from(stream('response.completed').split('event: response.completed')[0] as string));
    expect(relay.usage).toBeUndefined();
  });
});

describe('flush', () => {
  test('returns an incomplete tail, once', () => {
    const relay = new SseRelay(CHAT);
    const tail = 'data: {"partial":"é';
    const step = relay.push(Buffer.from(`${frame(CHAT_CHUNKS[0] as Json)}${tail}`));
    expect(step.out?.toString()).toBe(frame(CHAT_CHUNKS[0] as Json));
    expect(relay.flush()?.toString('utf8')).toBe(tail);
    expect(relay.flush()).toBeUndefined();
  });

  test('a tail ending in half a blank line is still a tail', () => {
    const relay = new SseRelay(CHAT);
    relay.push(Buffer.from('data: {"a":1}\r\n\r'));
    expect(relay.flush()?.toString()).toBe('data: {"a":1}\r\n\r');
  });

  test('nothing when the stream ended cleanly', () => {
    const relay = new SseRelay(CHAT);
    relay.push(Buffer.from(frame(CHAT_CHUNKS[0] as Json)));
    expect(relay.flush()).toBeUndefined();
  });
});

describe('usageComment', () => {
  test('one comment line `:x-sluice-usage <json>` and a blank line', () => {
    const text = usageComment(USAGE_COUNTS, 1234, false).toString('utf8');
    expect(text.startsWith(':x-sluice-usage ')).toBe(true);
    expect(text.endsWith('\n\n')).toBe(true);
    const body = text.slice(':x-sluice-usage '.length, -2);
    expect(body).not.toMatch(/[\r\n]/);
    expect(JSON.parse(body)).toEqual({
      prompt_tokens: 21,
      completion_tokens: 9,
      total_tokens: 30,
      cached_tokens: 5,
      reasoning_tokens: 2,
      charge_micros: 1234,
      estimated: false,
    });
  });

  test('without counts: zeros, marked estimated', () => {
    const text = usageComment(undefined, 50, true).toString('utf8');
    expect(JSON.parse(text.slice(':x-sluice-usage '.length, -2))).toMatchObject({ prompt_tokens: 0, completion_tokens: 0, charge_micros: 50, estimated: true });
  });
});

describe('legal spelling variations', () => {
  test('usage with whitespace after the colon (`"usage": {`) is still read and, when injected, withheld', () => {
    const usageFrame = `data: ${JSON.stringify({ ...base, choices: [], usage: USAGE }, null, 1).replace(/\n\s*/g, ' ')}\n\n`;
    expect(usageFrame).toContain('"usage": {');
    const fed = feed(CHAT_INJECTED, [Buffer.from(frame(CHAT_CHUNKS[1] as Json) + usageFrame + DONE())]);
    expect(fed.relay.usage).toEqual(USAGE_COUNTS);
    expect(fed.out.toString('utf8')).toBe(frame(CHAT_CHUNKS[1] as Json));
  });

  test('`data:[DONE]` (no space; SSE makes the space optional) ends the stream', () => {
    const fed = feed(CHAT, [Buffer.from(`${frame(CHAT_CHUNKS[0] as Json)}data:[DONE]\n\n`)]);
    expect(fed.done?.toString()).toBe('data:[DONE]\n\n');
    expect(fed.out.toString()).toBe(frame(CHAT_CHUNKS[0] as Json));
  });

  test('responses: a terminal event spelled with spaces is still read', () => {
    const data = '{"type": "response.completed", "response": {"usage": {"input_tokens": 3, "output_tokens": 4}}}';
    const fed = feed(RESPONSES, [Buffer.from(`event: response.completed\ndata: ${data}\n\n`)]);
    expect(fed.relay.usage).toEqual({ inputTokens: 3, cachedInputTokens: 0, outputTokens: 4, reasoningTokens: 0 });
    expect(fed.relay.complete).toBe(true);
  });

  // Doubtful: the strip of `"usage":null` is an exact byte run, so a provider that writes JSON
  // with spaces (`, "usage": null`, e.g. Python's json.dumps defaults) keeps the field in every
  // chunk the client receives, which it would not have had without include_usage.
  test('injected: `, "usage": null` with spaces is stripped too', () => {
    const spaced = (json: Json): string => `${JSON.stringify(json, null, 1).replace(/\n\s*/g, ' ').slice(0, -1)}, "usage": null}`;
    const plain = (json: Json): string => JSON.stringify(json, null, 1).replace(/\n\s*/g, ' ');
    const c = CHAT_CHUNKS[1] as Json;
    const fed = feed(CHAT_INJECTED, [Buffer.from(`${frame(spaced(c))}${DONE()}`)]);
    expect(fed.out.toString('utf8')).toBe(frame(plain(c)));
  });
});

describe('faults: never forwarded, and nothing after them', () => {
  test.each<[string, RelayOptions, string, 'malformed' | 'provider_error']>([
    ['chat: a data frame that is not JSON', CHAT, 'data: {"id":"x","choices":[\n\n', 'malformed'],
    ['chat: a data frame that is a JSON array', CHAT, 'data: [1,2]\n\n', 'malformed'],
    ['chat: the provider\'s in-band error', CHAT, 'data: {"error":{"message":"overloaded","type":"server_error"}}\n\n', 'provider_error'],
    ['responses: an error event', RESPONSES, 'event: error\ndata: {"type":"error","code":"server_error","message":"x"}\n\n', 'provider_error'],
    ['responses: not JSON', RESPONSES, 'event: response.output_text.delta\ndata: {oops\n\n', 'malformed'],
  ])('%s', (_l, options, bad, fault) => {
    const good = options.family === 'chat_completions' ? frame(CHAT_CHUNKS[1] as Json) : 'event: response.created\ndata: {"type":"response.created"}\n\n';
    const after = options.family === 'chat_completions' ? frame(CHAT_CHUNKS[2] as Json) + DONE() : 'event: response.completed\ndata: {"type":"response.completed"}\n\n';
    for (const pieces of [[Buffer.from(good + bad + after)], [Buffer.from(good), Buffer.from(bad), Buffer.from(after)]]) {
      const relay = new SseRelay(options);
      const steps = pieces.map((p) => relay.push(p));
      const out = Buffer.concat(steps.flatMap((s) => (s.out === undefined ? [] : [s.out]))).toString('utf8');
      expect(out).toBe(good);
      expect(steps.filter((s) => s.fault !== undefined).map((s) => s.fault)).toEqual([fault]);
      expect(steps.every((s) => s.done === undefined)).toBe(true);
      expect(relay.fault).toBe(fault);
      expect(relay.end()).toEqual({ out: undefined });
    }
  });

  test('chat: a `"error": null` field is not a fault', () => {
    const c = { ...(CHAT_CHUNKS[1] as Json), error: null };
    const fed = feed(CHAT, [Buffer.from(frame(c) + DONE())]);
    expect(fed.out.toString('utf8')).toBe(frame(c));
    expect(fed.relay.fault).toBeUndefined();
  });
});

describe('end(): the upstream closed cleanly', () => {
  test('nothing pending: nothing to do', () => {
    const relay = new SseRelay(CHAT);
    relay.push(Buffer.from(frame(CHAT_CHUNKS[0] as Json)));
    expect(relay.end()).toEqual({ out: undefined });
    expect(relay.complete).toBe(false);
  });

  test('only whitespace pending: dropped', () => {
    const relay = new SseRelay(CHAT);
    relay.push(Buffer.from(`${frame(CHAT_CHUNKS[0] as Json)}\n`));
    expect(relay.end()).toEqual({ out: undefined });
  });

  test('a truncated last frame is a fault, not forwarded', () => {
    const relay = new SseRelay(CHAT);
    relay.push(Buffer.from(`${frame(CHAT_CHUNKS[0] as Json)}data: {"id":"x","cho`));
    expect(relay.end()).toEqual({ out: undefined, fault: 'malformed' });
  });

  test('chat: `data: [DONE]` without its blank line is still the end marker', () => {
    const relay = new SseRelay(CHAT);
    relay.push(Buffer.from(`${frame(CHAT_CHUNKS[0] as Json)}data: [DONE]\n`));
    const last = relay.end();
    expect(last.out).toBeUndefined();
    expect(last.done?.toString()).toMatch(/^data: \[DONE\]\n/);
    expect(relay.complete).toBe(true);
  });

  test('responses: complete only once a terminal event was seen', () => {
    const relay = new SseRelay(RESPONSES);
    relay.push(Buffer.from('event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"a"}\n\n'));
    expect(relay.complete).toBe(false);
    expect(relay.frames).toBe(1);
    relay.push(Buffer.from('event: response.failed\ndata: {"type":"response.failed","response":{"usage":null}}\n\n'));
    expect(relay.complete).toBe(true);
    expect(relay.frames).toBe(1);
  });

  // Doubtful: end() hands back the last frame without its terminating blank line, and the caller
  // (forward.ts relayStream) writes the error frame / `:x-sluice-usage` comment right after it, so
  // the comment lands on the same line as the frame's data (`data: {...}:x-sluice-usage {...}`)
  // and the client's parser sees invalid JSON; an unterminated `[DONE]` written last is, per the
  // SSE rules, an event that is never dispatched.
  test.each<[string, RelayOptions, string]>([
    ['chat data frame', CHAT, `data: ${JSON.stringify(CHAT_CHUNKS[1])}`],
    ['responses terminal event', RESPONSES, 'event: response.completed\ndata: {"type":"response.completed","response":{"usage":{"input_tokens":1,"output_tokens":2}}}'],
    ['chat [DONE]', CHAT, 'data: [DONE]'],
  ])('an unterminated last frame (%s) comes back as a whole event', (_l, options, last) => {
    const relay = new SseRelay(options);
    relay.push(Buffer.from(last));
    const step = relay.end();
    const bytes = (step.out ?? step.done)?.toString('utf8') ?? '';
    expect(bytes.startsWith(last)).toBe(true);
    expect(bytes).toMatch(/(\n\n|\r\n\r\n)$/);
  });
});
