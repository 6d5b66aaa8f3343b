/**
 * The counts behind estimated charges (issue 14): known o200k/cl100k counts, what is content and
 * what is wire-format framing, media payloads at a flat figure, the reply tape's bound and scaling,
 * and the cap at the hold.
 */
import {
  ReplyTape,
  countFrameTokens,
  countPromptTokens,
  countReplyTokens,
  encodingOf,
  estimateCharge,
  tokenCounter,
} from '../../lambdas/core/token-count';

const o200k = tokenCounter('o200k_base');
const cl100k = tokenCounter('cl100k_base');

describe('tokenCounter', () => {
  it.each([
    ['', 0, 0],
    ['hello world', 2, 2],
    ['Hello, world!', 4, 4],
  ])('%j: o200k %i, cl100k %i', (text, a, b) => {
    expect(o200k(text)).toBe(a);
    expect(cl100k(text)).toBe(b);
  });

  it('is loaded once per encoding', () => {
    expect(tokenCounter('o200k_base')).toBe(o200k);
  });

  it.each([
    ['o200k_base', 'o200k_base'],
    ['cl100k_base', 'cl100k_base'],
    [undefined, 'o200k_base'],
    ['p50k_base', 'o200k_base'],
    [42, 'o200k_base'],
  ])('encodingOf(%j) is %s', (named, expected) => {
    expect(encodingOf(named)).toBe(expected);
  });
});

describe('countPromptTokens', () => {
  const text = 'The committee met on Tuesday to discuss the budget.';
  const n = o200k(text);
  it.each([
    ['chat, one message: priming + framing + role + text', 'chat_completions' as const, { messages: [{ role: 'user', content: text }] }, 3 + 3 + n],
    ['chat, text parts', 'chat_completions' as const, { messages: [{ role: 'user', content: [{ type: 'text', text }] }] }, 3 + 3 + n],
    ['chat, an image part counts a flat 765', 'chat_completions' as const, { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: `data:image/png;base64,${'A'.repeat(100_000)}` } }] }] }, 3 + 3 + 765],
    ['responses, a string input', 'responses' as const, { input: text }, 3 + n],
    ['responses, instructions count too', 'responses' as const, { input: text, instructions: text }, 3 + 2 * n],
    ['the model name and parameters are not content', 'chat_completions' as const, { model: 'openai/gpt-4o', temperature: 0.2, messages: [] }, 3],
  ])('%s', (_name, family, body, expected) => {
    expect(countPromptTokens(body, family, o200k)).toBe(expected);
  });

  it('10 KB of English prose counts about a quarter of its bytes, not every byte', () => {
    const prose = 'The committee met on Tuesday to discuss the budget for the coming year. '.repeat(140);
    const tokens = countPromptTokens({ messages: [{ role: 'user', content: prose }] }, 'chat_completions', o200k);
    expect(tokens).toBeLessThan(prose.length / 3);
    expect(tokens).toBeGreaterThan(prose.length / 8);
  });
});

describe('reply counts', () => {
  it('a chat body: message content and tool call arguments, not roles or ids', () => {
    const reply = {
      id: 'chatcmpl-1',
      choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: 'hello world', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }] } }],
    };
    expect(countReplyTokens(reply, o200k)).toBe(o200k('hello world') + o200k('f') + o200k('{"a":1}'));
  });

  it('a responses body: the output text', () => {
    const reply = { output: [{ type: 'message', id: 'm', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'hello world', annotations: [] }] }] };
    expect(countReplyTokens(reply, o200k)).toBe(2);
  });

  it.each([
    ['a chat delta', { choices: [{ index: 0, delta: { content: ' world' } }] }, 1],
    ['a role-only chat delta', { choices: [{ index: 0, delta: { role: 'assistant' } }] }, 0],
    ['a responses text delta', { type: 'response.output_text.delta', delta: 'hello world' }, 2],
    ['a responses event that is not a delta', { type: 'response.created', response: { id: 'r' } }, 0],
    ['not an object', null, 0],
  ])('a frame: %s', (_name, frame, expected) => {
    expect(countFrameTokens(frame, o200k)).toBe(expected);
  });
});

describe('ReplyTape', () => {
  const frame = (text: string): Buffer => Buffer.from(`data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: text } }] })}\n\n`);

  it('counts the frames it kept, a frame split across chunks included, [DONE] and cut frames not', () => {
    const tape = new ReplyTape();
    const whole = Buffer.concat([frame('hello'), frame(' world'), Buffer.from('data: [DONE]\n\n'), Buffer.from('data: {"choices":[{"delta":{"content":"cut')]);
    for (let i = 0; i < whole.length; i += 7) tape.keep(whole.subarray(i, i + 7));
    expect(tape.countOutput(o200k, 3)).toBe(2);
  });

  it('past its bound keeps nothing more, and scales what it kept by the frames relayed', () => {
    const one = frame(' the');
    const tape = new ReplyTape(one.length * 10);
    for (let i = 0; i < 40; i += 1) tape.keep(one);
    expect(tape.overflowed).toBe(true);
    expect(tape.countOutput(o200k, 40)).toBe(40);
  });

  // Issue 15: the tape copies what it keeps and keeps a sample only once counts are promised.
  const promised = (text: string): Buffer => Buffer.from(`data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: text } }], usage: null })}\n\n`);
  const spaced = (text: string): Buffer => Buffer.from(`data: {"choices":[{"index":0,"delta":{"content":${JSON.stringify(text)}}}], "usage": null}\n\n`);
  it.each([
    // name, frame maker, frames sent, the sample's size in frames, whether the tape overflows, the count
    ['no promise: everything up to the large bound', frame, 40, 10, false, 40],
    ['"usage":null: a sample, scaled by the frames relayed', promised, 40, 10, true, 40],
    ['"usage": null (spaced) is a promise too', spaced, 40, 10, true, 40],
    ['a promised stream shorter than the sample: counted whole', promised, 8, 10, false, 8],
  ])('%s', (_name, make, sent, sampleFrames, overflows, expected) => {
    const one = make(' the');
    const tape = new ReplyTape(one.length * 100, one.length * sampleFrames);
    for (let i = 0; i < sent; i += 1) tape.keep(make(' the'));
    expect(tape.overflowed).toBe(overflows);
    expect(tape.countOutput(o200k, sent)).toBe(expected);
  });

  it('a promise seen late lets go of what it kept past the sample and scales the rest', () => {
    const the = frame(' the');
    const more = frame(' hello world again');
    const tape = new ReplyTape(the.length * 100, the.length * 5);
    // The promise is looked for in the first chunks only: here it comes with the fourth, after
    // five one-token frames and four longer ones.
    for (const chunk of [[the, the, the], [the, the, more], [more, more, more]]) tape.keep(Buffer.concat(chunk));
    tape.keep(promised(' the'));
    for (let i = 0; i < 20; i += 1) tape.keep(the);
    expect(tape.overflowed).toBe(true);
    // Only the first five frames are left, one token each, scaled to the 30 relayed.
    expect(tape.countOutput(o200k, 30)).toBe(30);
  });

  it('keeps copies, not the chunks it was given (a chunk reused or freed later changes nothing)', () => {
    const tape = new ReplyTape();
    const chunk = frame(' hello world');
    const sizes = [3, 7, 11, chunk.length];
    let from = 0;
    for (const size of sizes) {
      const piece = Buffer.from(chunk.subarray(from, Math.min(chunk.length, from + size)));
      tape.keep(piece);
      piece.fill(0x20);
      from += size;
      if (from >= chunk.length) break;
    }
    expect(tape.countOutput(o200k, 1)).toBe(o200k(' hello world'));
  });

  it('copies across slabs: a long stream without a promise is counted whole', () => {
    const tape = new ReplyTape();
    const words = Array.from({ length: 2_000 }, (_, i) => frame(` w${i % 10}`));
    for (const w of words) tape.keep(w);
    expect(tape.overflowed).toBe(false);
    expect(tape.countOutput(o200k, words.length)).toBe(words.reduce((n, _w, i) => n + o200k(` w${i % 10}`), 0));
  });
});

describe('estimateCharge', () => {
  const rates = { inputRateThousandths: 150_000, cachedInputRateThousandths: 75_000, outputRateThousandths: 600_000 };
  it.each([
    ['under the cap', 1000, 100, 10_000_000, 150_000 + 60_000],
    ['capped at the hold', 1000, 100, 200, 200],
    ['nothing on a zero cap (bring your own key)', 1000, 100, 0, 0],
  ])('%s', (_name, input, output, cap, expected) => {
    const e = estimateCharge(input, output, rates, cap);
    expect(e.chargeMicros).toBe(expected);
    expect(e.counts).toEqual({ inputTokens: input, cachedInputTokens: 0, outputTokens: output, reasoningTokens: 0 });
  });
});
