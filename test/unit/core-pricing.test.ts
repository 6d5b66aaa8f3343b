/** Money arithmetic: charge, hold and the prompt's upper bound. Integers only. */
import { SluiceError } from '../../lambdas/core/errors';
import {
  CONTEXT_BOUND_FACTOR,
  FILE_EXPANSION,
  IMAGE_PART_TOKENS,
  OTHER_PART_TOKENS,
  callerCeiling,
  chargeMicros,
  costMicros,
  formatMinor,
  promptBound,
  sizeHold,
  type PricedModel,
  type PromptBound,
} from '../../lambdas/core/pricing';
import type { TokenCounts } from '../../lambdas/shared/records';

function bytes(s: string): number {
  return Buffer.byteLength(s, 'utf8');
}

/** The bound of a body as the gateway computes it: raw bytes plus the parsed value. */
function boundOf(raw: string): PromptBound {
  return promptBound(bytes(raw), JSON.parse(raw) as unknown);
}

function refusal(fn: () => unknown): SluiceError {
  try {
    fn();
  } catch (err) {
    if (err instanceof SluiceError) return err;
    throw err;
  }
  throw new Error('expected a SluiceError');
}

describe('costMicros: ceil(tokens × rate / 1000)', () => {
  test.each([
    [0, 5000, 0],
    [1, 1, 1],
    [1000, 1, 1],
    [1001, 1, 2],
    [3, 333, 1],
    [3, 334, 2],
    [1, 1000, 1],
    [1, 1001, 2],
    [1_000_000, 2_500_000, 2_500_000_000],
    [128_000, 15_000_000, 1_920_000_000],
    [7, 0, 0],
  ])('%d tokens at %d → %d', (tokens, rate, expected) => {
    expect(costMicros(tokens, rate)).toBe(expected);
  });

  test('a product beyond the safe integers throws instead of rounding', () => {
    expect(() => costMicros(2 ** 30, 2 ** 30)).toThrow(RangeError);
  });
});

describe('chargeMicros', () => {
  const rates = { inputRateThousandths: 2000, cachedInputRateThousandths: 500, outputRateThousandths: 8000 };
  const counts = (input: number, cached: number, output: number, reasoning = 0): TokenCounts => ({
    inputTokens: input,
    cachedInputTokens: cached,
    outputTokens: output,
    reasoningTokens: reasoning,
  });

  test.each<[string, TokenCounts, number]>([
    ['no cache', counts(1000, 0, 200), 2000 + 1600],
    ['cached tokens at their own rate', counts(1000, 400, 200), 1200 + 200 + 1600],
    ['all cached', counts(1000, 1000, 0), 500],
    ['cached above input is clamped to input', counts(100, 500, 0), 50],
    ['reasoning is part of output, not added on top', counts(10, 0, 100, 60), 20 + 800],
    ['nothing', counts(0, 0, 0), 0],
  ])('%s', (_l, c, expected) => {
    expect(chargeMicros(c, rates)).toBe(expected);
  });

  test('each kind is rounded up on its own', () => {
    expect(chargeMicros(counts(2, 1, 1), { inputRateThousandths: 1, cachedInputRateThousandths: 1, outputRateThousandths: 1 })).toBe(3);
  });
});

describe('callerCeiling', () => {
  test.each<[string, Record<string, unknown>, number | undefined]>([
    ['none', {}, undefined],
    ['max_tokens', { max_tokens: 100 }, 100],
    ['max_completion_tokens', { max_completion_tokens: 200 }, 200],
    ['both: larger wins (completion larger)', { max_tokens: 100, max_completion_tokens: 300 }, 300],
    ['both: larger wins (max_tokens larger)', { max_tokens: 400, max_completion_tokens: 300 }, 400],
    ['max_output_tokens is not a chat ceiling', { max_output_tokens: 77 }, undefined],
    ['string', { max_tokens: '100' }, undefined],
    ['negative', { max_tokens: -5 }, undefined],
    ['zero', { max_tokens: 0 }, undefined],
    ['float', { max_tokens: 10.5 }, undefined],
    ['NaN', { max_tokens: Number.NaN }, undefined],
    ['Infinity', { max_tokens: Number.POSITIVE_INFINITY }, undefined],
    ['huge, not a safe integer', { max_tokens: 2 ** 53 }, undefined],
    ['largest safe integer', { max_tokens: Number.MAX_SAFE_INTEGER }, Number.MAX_SAFE_INTEGER],
    ['null', { max_tokens: null }, undefined],
    ['boolean', { max_tokens: true }, undefined],
    ['object', { max_tokens: { n: 5 } }, undefined],
    ['unreadable max_tokens, readable max_completion_tokens', { max_tokens: 'lots', max_completion_tokens: 50 }, 50],
    ['readable max_tokens, unreadable max_completion_tokens', { max_tokens: 60, max_completion_tokens: -1 }, 60],
    ['both unreadable', { max_tokens: 1.5, max_completion_tokens: '9' }, undefined],
  ])('%s', (_l, body, expected) => {
    expect(callerCeiling(body, 'chat_completions')).toBe(expected);
  });

  test.each<[string, Record<string, unknown>, number | undefined]>([
    ['max_output_tokens', { max_output_tokens: 77 }, 77],
    ['chat fields are not a responses ceiling', { max_tokens: 100, max_completion_tokens: 200 }, undefined],
    ['unreadable', { max_output_tokens: '77' }, undefined],
  ])('responses: %s', (_l, body, expected) => {
    expect(callerCeiling(body, 'responses')).toBe(expected);
  });
});

describe('sizeHold (SPEC Limits: output ceiling and credit hold)', () => {
  const model: PricedModel = {
    id: 'p/m',
    contextWindowTokens: 1000,
    maxOutputTokens: 500,
    inputRateThousandths: 2000,
    cachedInputRateThousandths: 1000,
    outputRateThousandths: 8000,
  };
  const small: PromptBound = { tokens: 100, textBytes: 100 };

  test.each<[string, Partial<PricedModel>, Record<string, unknown>, number]>([
    ['no caller figure: the model maximum', {}, {}, 500],
    ['caller below the model maximum', {}, { max_tokens: 100 }, 100],
    ['caller above the model maximum is capped', {}, { max_tokens: 900 }, 500],
    ['larger of the two caller figures, then capped', {}, { max_tokens: 50, max_completion_tokens: 120 }, 120],
    ['unreadable caller figure is absent', {}, { max_tokens: '100' }, 500],
    ['no model maximum: the caller figure', { maxOutputTokens: null }, { max_tokens: 300 }, 300],
  ])('%s', (_l, override, body, ceiling) => {
    const m = { ...model, ...override };
    const hold = sizeHold(m, body, small, 'chat_completions');
    expect(hold.outputCeilingTokens).toBe(ceiling);
    expect(hold.inputMicros).toBe(200); // 100 tokens × 2000 / 1000
    expect(hold.amountMicros).toBe(200 + ceiling * 8);
  });

  test.each<[string, Partial<PricedModel>, Record<string, unknown>]>([
    ['no caller figure and no model maximum', { maxOutputTokens: null }, {}],
    ['unreadable caller figure and no model maximum', { maxOutputTokens: null }, { max_tokens: -1 }],
    ['no input rate', { inputRateThousandths: null }, { max_tokens: 10 }],
    ['no output rate', { outputRateThousandths: null }, { max_tokens: 10 }],
  ])('%s → 503 model_not_priceable', (_l, override, body) => {
    const e = refusal(() => sizeHold({ ...model, ...override }, body, small, 'chat_completions'));
    expect([e.status, e.code]).toEqual([503, 'model_not_priceable']);
  });

  test('the message says to send max_tokens when only the ceiling is missing', () => {
    expect(refusal(() => sizeHold({ ...model, maxOutputTokens: null }, {}, small, 'chat_completions')).message).toContain('max_tokens');
  });

  test('a missing cached-input rate does not stop pricing the hold', () => {
    expect(sizeHold({ ...model, cachedInputRateThousandths: null }, {}, small, 'chat_completions').amountMicros).toBe(200 + 4000);
  });

  test('context_length_exceeded only past CONTEXT_BOUND_FACTOR × window, with param messages', () => {
    const limit = 1000 * CONTEXT_BOUND_FACTOR;
    const atLimit = sizeHold(model, {}, { tokens: limit, textBytes: limit }, 'chat_completions');
    // The prompt is held at the window, never more.
    expect(atLimit.inputMicros).toBe(costMicros(1000, 2000));
    const e = refusal(() => sizeHold(model, {}, { tokens: limit + 1, textBytes: limit + 1 }, 'chat_completions'));
    expect([e.status, e.type, e.code, e.param]).toEqual([400, 'invalid_request_error', 'context_length_exceeded', 'messages']);
  });

  test('media allowance counts toward the hold but not toward the context refusal', () => {
    const bound: PromptBound = { tokens: 1000 * CONTEXT_BOUND_FACTOR + 6000, textBytes: 1000 * CONTEXT_BOUND_FACTOR };
    expect(sizeHold(model, {}, bound, 'chat_completions').inputMicros).toBe(costMicros(1000, 2000));
  });

  test('the prompt is held at min(bound, window)', () => {
    expect(sizeHold(model, {}, { tokens: 999, textBytes: 999 }, 'chat_completions').inputMicros).toBe(costMicros(999, 2000));
    expect(sizeHold(model, {}, { tokens: 1001, textBytes: 1001 }, 'chat_completions').inputMicros).toBe(costMicros(1000, 2000));
  });

  test('no context window: the bound as it is, and no context refusal', () => {
    const m = { ...model, contextWindowTokens: null };
    expect(sizeHold(m, {}, { tokens: 5_000_000, textBytes: 5_000_000 }, 'chat_completions').inputMicros).toBe(costMicros(5_000_000, 2000));
  });

  test('pricing is decided before the context check', () => {
    const e = refusal(() => sizeHold({ ...model, inputRateThousandths: null }, {}, { tokens: 10 ** 7, textBytes: 10 ** 7 }, 'chat_completions'));
    expect(e.code).toBe('model_not_priceable');
  });
});

describe('promptBound', () => {
  test('text only: every byte of the body counts', () => {
    const raw = JSON.stringify({ model: 'p/m', messages: [{ role: 'user', content: 'héllo wörld ✓ 😀' }] });
    expect(boundOf(raw)).toEqual({ tokens: bytes(raw), textBytes: bytes(raw) });
  });

  test('a 1 MB base64 image counts as one allowance, not a million tokens', () => {
    const image = `data:image/png;base64,${'A'.repeat(1_000_000)}`;
    const raw = JSON.stringify({
      model: 'p/m',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'what is this?' }, { type: 'image_url', image_url: { url: image } }] }],
    });
    const b = boundOf(raw);
    expect(b.tokens).toBeLessThan(IMAGE_PART_TOKENS + 500);
    expect(b.tokens).toBeGreaterThanOrEqual(IMAGE_PART_TOKENS + bytes('what is this?'));
    expect(b.textBytes).toBeLessThan(500);
    expect(b.tokens - b.textBytes).toBe(IMAGE_PART_TOKENS);
  });

  test.each([
    ['chat image_url', { type: 'image_url', image_url: { url: 'data:x' } }],
    ['chat input_audio', { type: 'input_audio', input_audio: { data: 'QUJD', format: 'wav' } }],
    ['responses input_image', { type: 'input_image', image_url: 'data:x' }],
  ])('%s: the payload string is replaced by the allowance, the rest of the part stays', (_l, part) => {
    const payload = 'Z'.repeat(100_000);
    const big = JSON.parse(JSON.stringify(part).replace(/QUJD|data:x/, payload)) as Record<string, unknown>;
    const raw = JSON.stringify({ model: 'p/m', input: [{ role: 'user', content: [{ type: 'input_text', text: 'hi' }, big] }] });
    const b = boundOf(raw);
    expect(b.textBytes).toBe(bytes(raw) - bytes(JSON.stringify(payload)));
    expect(b.tokens).toBe(b.textBytes + Math.max(IMAGE_PART_TOKENS, OTHER_PART_TOKENS));
    expect(b.tokens).toBeLessThan(10_000);
  });

  test.each([
    ['chat file', { type: 'file', file: { file_data: 'QUJD', filename: 'a.pdf' } }],
    ['responses input_file', { type: 'input_file', file_data: 'QUJD', filename: 'a.pdf' }],
  ])('%s: a file keeps its bytes, expanded (compressed PDF text grows), plus the allowance', (_l, part) => {
    const payload = 'Z'.repeat(100_000);
    const big = JSON.parse(JSON.stringify(part).replace('QUJD', payload)) as Record<string, unknown>;
    const raw = JSON.stringify({ model: 'p/m', input: [{ role: 'user', content: [{ type: 'input_text', text: 'hi' }, big] }] });
    const b = boundOf(raw);
    expect(b.textBytes).toBe(bytes(raw));
    expect(b.tokens).toBe(bytes(raw) + (FILE_EXPANSION - 1) * bytes(JSON.stringify(big)) + Math.max(IMAGE_PART_TOKENS, OTHER_PART_TOKENS));
  });

  test('text cannot hide inside a part that merely claims a media type', () => {
    const text = 'w'.repeat(100_000);
    const raw = JSON.stringify({ model: 'p/m', messages: [{ role: 'user', type: 'input_file', content: text }, { type: 'image_url', content: text }] });
    const b = boundOf(raw);
    expect(b.textBytes).toBe(bytes(raw));
    expect(b.tokens).toBeGreaterThanOrEqual(2 * 100_000);
  });

  test('numbers spelled longer when re-serialised cannot shrink the text bound', () => {
    const text = 't'.repeat(100_000);
    const raw = `{"model":"p/m","messages":[{"role":"user","content":"${text}"},{"type":"image_url","image_url":{"url":"data:x","pad":[${Array(2000).fill('1e20').join(',')}]}}]}`;
    const b = boundOf(raw);
    expect(b.textBytes).toBeGreaterThanOrEqual(100_000);
  });

  test('nested parts: every media part counts once, wherever it sits', () => {
    const img = { type: 'image_url', image_url: { url: `data:${'B'.repeat(50_000)}` } };
    const raw = JSON.stringify({
      model: 'p/m',
      messages: [
        { role: 'user', content: [img, { type: 'text', text: 'a' }] },
        { role: 'tool', tool_call_id: 't', content: [{ type: 'text', text: 'b' }, { nested: [[img]] }] },
        { role: 'user', content: [img] },
      ],
    });
    const b = boundOf(raw);
    expect(b.tokens - b.textBytes).toBe(3 * IMAGE_PART_TOKENS);
    expect(b.textBytes).toBe(bytes(raw) - 3 * bytes(JSON.stringify(img.image_url.url)));
  });

  test('a raw body with whitespace keeps the whitespace as margin', () => {
    const value = { model: 'p/m', messages: [{ role: 'user', content: 'x' }] };
    const raw = JSON.stringify(value, null, 4);
    expect(boundOf(raw).textBytes).toBe(bytes(raw));
  });

  describe('the bound is never below a simple token count of the text (generated)', () => {
    // Deterministic PRNG so a failure reproduces.
    let seed = 0x2545f491;
    const rand = (): number => {
      seed ^= seed << 13;
      seed ^= seed >>> 17;
      seed ^= seed << 5;
      return (seed >>> 0) / 0x1_0000_0000;
    };
    const alphabet = ['a', 'Z', '7', ' ', ' ', '\n', '"', '\\', 'é', 'ß', '中', '文', '😀', '🇫🇷', '\u0000', '\u2028', '\t', '{', '}'];
    const gen = (): string => {
      const n = Math.floor(rand() * 400);
      let s = '';
      for (let i = 0; i < n; i += 1) s += alphabet[Math.floor(rand() * alphabet.length)] as string;
      return s;
    };
    const words = (s: string): number => s.split(/\s+/).filter((w) => w !== '').length;

    test('300 generated prompts, with and without an image part', () => {
      for (let i = 0; i < 300; i += 1) {
        const text = gen();
        const withImage = i % 2 === 1;
        const content = withImage ? [{ type: 'text', text }, { type: 'image_url', image_url: { url: `data:${'Q'.repeat(2000)}` } }] : text;
        const raw = JSON.stringify({ model: 'p/m', messages: [{ role: 'user', content }] });
        const b = boundOf(raw);
        const textBytes = bytes(text);
        const chars = [...text].length;
        expect(textBytes).toBeGreaterThanOrEqual(chars);
        expect(chars).toBeGreaterThanOrEqual(words(text));
        expect(b.textBytes).toBeGreaterThanOrEqual(textBytes);
        expect(b.tokens).toBeGreaterThanOrEqual(b.textBytes);
      }
    });
  });

  describe('adversarial bodies: the bound must still cover the text', () => {
    const text = 'x'.repeat(100_000);

    // A number spelled `1e20` in the raw body (4 bytes) serialises as 21 digits, so the media part's
    // re-serialised size exceeds its raw size and the surplus is subtracted from the text.
    test('numbers with exponents inside a media part do not hide text', () => {
      const numbers = new Array(10_000).fill('1e20').join(',');
      const raw =
        `{"model":"p/m","messages":[{"role":"user","content":[{"type":"text","text":"${text}"},` +
        `{"type":"image_url","image_url":{"url":"data:x"},"pad":[${numbers}]}]}]}`;
      const b = boundOf(raw);
      expect(b.textBytes).toBeGreaterThanOrEqual(text.length);
      expect(b.tokens).toBeGreaterThanOrEqual(text.length);
    });

    // Any object whose `type` names a media kind is treated as a media part, even when it is a
    // message carrying text: its whole text is replaced by one allowance.
    test('a media `type` on an object that is not a content part does not hide its text', () => {
      const raw = JSON.stringify({ model: 'p/m', messages: [{ role: 'user', type: 'input_file', content: text }] });
      const b = boundOf(raw);
      expect(b.textBytes).toBeGreaterThanOrEqual(text.length);
    });
  });
});

describe('formatMinor', () => {
  test.each([
    [0, '0.000000'],
    [1, '0.000001'],
    [999_999, '0.999999'],
    [1_000_000, '1.000000'],
    [1_234_567, '1.234567'],
    [500_000_000_000, '500000.000000'],
    [-1, '-0.000001'],
    [-1_500_000, '-1.500000'],
  ])('%d → %s', (micros, expected) => {
    expect(formatMinor(micros)).toBe(expected);
  });
});

describe('a ceiling whose cost leaves the safe integers (found by the HTTP property tests)', () => {
  it('is 402 insufficient_credit, not a fault', () => {
    const model = { id: 'local/sim-no-max', inputRateThousandths: 150_000, cachedInputRateThousandths: 150_000, outputRateThousandths: 600_000, maxOutputTokens: null, contextWindowTokens: null };
    const body = { max_tokens: 1e12 };
    let thrown: unknown;
    try {
      sizeHold(model, body, promptBound(20, body), 'chat_completions');
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toMatchObject({ status: 402, code: 'insufficient_credit' });
  });
});
