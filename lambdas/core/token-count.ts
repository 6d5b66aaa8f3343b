/**
 * Token counts Sluice works out itself, for the rare requests whose provider's counts never
 * arrived: a provider that reports no usage, a stream that broke off, a stream cut by
 * `balance_exhausted`. The prompt and the reply are counted with a BPE tokenizer of the
 * o200k/cl100k families (`gpt-tokenizer`: pure JavaScript, its encodings shipped in the package,
 * no WebAssembly and nothing fetched), so the charge comes from a count, not from body bytes.
 *
 * The tokenizer is loaded lazily, on the first count: its o200k tables cost about 0.3 s and
 * 2.4 MB to load, which the hot path (the provider reported its counts) never pays. Pure apart
 * from that cached load: no clock, no environment, no I/O.
 */
import { chargeMicros, type Rates } from './pricing';
import type { EndpointFamily, TokenCounts } from '../shared/records';

/** The encodings a catalog entry may name (`tokenizer`); o200k when it names none. */
export type TokenEncoding = 'o200k_base' | 'cl100k_base';
export const TOKEN_ENCODINGS: readonly TokenEncoding[] = ['o200k_base', 'cl100k_base'];
export const DEFAULT_ENCODING: TokenEncoding = 'o200k_base';

/** Counts the tokens of a text. */
export type CountTokens = (text: string) => number;

/** Tokens of priming per request and of framing per message, as OpenAI documents for chat models. */
const REQUEST_OVERHEAD_TOKENS = 3;
const MESSAGE_OVERHEAD_TOKENS = 3;
/**
 * An image or audio part is billed by its pixels or duration, not its bytes: it counts as what
 * OpenAI charges for a 1024×1024 image at high detail (85 + 4 × 170). A string this long or longer
 * inside a part is taken to be such a payload (base64 data), not text.
 */
const MEDIA_PART_TOKENS = 765;
const PAYLOAD_STRING_CHARS = 4_096;
/** Keys whose values are names of the wire format, not content the model reads or writes. */
const NOT_CONTENT = new Set(['id', 'index', 'role', 'type', 'finish_reason', 'status', 'object', 'call_id', 'detail', 'logprobs']);

const loaded = new Map<TokenEncoding, CountTokens>();

/** The counter for an encoding, loaded on first use (see the module comment). */
export function tokenCounter(encoding: TokenEncoding = DEFAULT_ENCODING): CountTokens {
  const hit = loaded.get(encoding);
  if (hit !== undefined) return hit;
  // Literal paths, so a bundler includes them; `require` rather than `import` so nothing loads
  // before a count is asked for.
  const module = (
    encoding === 'cl100k_base' ? require('gpt-tokenizer/encoding/cl100k_base') : require('gpt-tokenizer/encoding/o200k_base')
  ) as { countTokens(text: string): number };
  const count: CountTokens = (text) => (text === '' ? 0 : module.countTokens(text));
  loaded.set(encoding, count);
  return count;
}

/** The encoding a catalog entry names, or the default for anything else. */
export function encodingOf(named: unknown): TokenEncoding {
  return (TOKEN_ENCODINGS as readonly unknown[]).includes(named) ? (named as TokenEncoding) : DEFAULT_ENCODING;
}

/** Tokens of every piece of content in a JSON value: its strings, with media payloads at a flat figure. */
function countContent(value: unknown, count: CountTokens, key?: string): number {
  if (typeof value === 'string') {
    if (key !== undefined && NOT_CONTENT.has(key)) return 0;
    return value.length >= PAYLOAD_STRING_CHARS && /^data:|^[A-Za-z0-9+/=\s]+$/.test(value.slice(0, 256)) ? MEDIA_PART_TOKENS : count(value);
  }
  if (typeof value === 'number' || typeof value === 'boolean') return key !== undefined && NOT_CONTENT.has(key) ? 0 : count(String(value));
  if (Array.isArray(value)) {
    let n = 0;
    for (const item of value) n += countContent(item, count);
    return n;
  }
  if (value !== null && typeof value === 'object') {
    let n = 0;
    for (const [k, v] of Object.entries(value)) {
      // An image or audio part: its URL or data is not text.
      if (k === 'image_url' || k === 'input_audio' || k === 'input_image') n += MEDIA_PART_TOKENS;
      else n += countContent(v, count, k);
    }
    return n;
  }
  return 0;
}

/**
 * The prompt's tokens: the messages (chat) or input and instructions (responses), each message
 * with its framing, and the tool definitions and response format the model also reads.
 */
export function countPromptTokens(body: Readonly<Record<string, unknown>>, family: EndpointFamily, count: CountTokens): number {
  let n = REQUEST_OVERHEAD_TOKENS;
  const turns = family === 'chat_completions' ? body.messages : body.input;
  if (Array.isArray(turns)) {
    for (const turn of turns) n += MESSAGE_OVERHEAD_TOKENS + countContent(turn, count);
  } else {
    n += countContent(turns, count);
  }
  for (const extra of ['instructions', 'tools', 'functions', 'response_format', 'text', 'prediction']) {
    if (body[extra] !== undefined) n += countContent(body[extra], count);
  }
  return n;
}

/** The reply's tokens in a non-streamed body: chat `choices[].message`, or responses `output`. */
export function countReplyTokens(reply: Readonly<Record<string, unknown>>, count: CountTokens): number {
  if (Array.isArray(reply.choices)) {
    let n = 0;
    for (const choice of reply.choices) {
      if (choice !== null && typeof choice === 'object') n += countContent((choice as Record<string, unknown>).message, count);
    }
    return n;
  }
  return countContent(reply.output, count);
}

/** The output tokens one stream frame carries: a chat delta, or a responses `*.delta` event's text. */
export function countFrameTokens(frame: unknown, count: CountTokens): number {
  if (frame === null || typeof frame !== 'object') return 0;
  const f = frame as Record<string, unknown>;
  if (Array.isArray(f.choices)) {
    let n = 0;
    for (const choice of f.choices) {
      if (choice !== null && typeof choice === 'object') n += countContent((choice as Record<string, unknown>).delta, count);
    }
    return n;
  }
  return typeof f.type === 'string' && f.type.endsWith('.delta') && typeof f.delta === 'string' ? count(f.delta) : 0;
}

/** The tape's bound while nothing says the provider will report its counts. */
const TAPE_MAX_BYTES = 4 * 1024 * 1024;
/** The tape's bound once the provider has shown it will report them: a sample for a stream that breaks off. */
const TAPE_SAMPLE_BYTES = 64 * 1024;
/**
 * Bytes the tape copies into at a time: one allocation per slab, not one per chunk. Slabs double
 * from the first, small enough to come from Node's shared buffer pool, so a short stream costs no
 * allocation of its own, up to the largest.
 */
const TAPE_FIRST_SLAB_BYTES = 2 * 1024;
const TAPE_SLAB_BYTES = 16 * 1024;
/**
 * The member OpenAI adds to every chat chunk once usage is asked for (`stream_options.include_usage`):
 * the provider's promise that its counts come at the end. Spaced as OpenAI writes it, and with the
 * one blank other servers put after the colon; a spelling not recognised only keeps the larger bound.
 */
const USAGE_PROMISE = Buffer.from('"usage":null');
const USAGE_PROMISE_SPACED = Buffer.from('"usage": null');
/** Chunks looked at for the promise: it rides on every chunk, so a stream shows it from its first frames or never. */
const PROMISE_LOOKS = 8;

/**
 * What a stream produced, kept for counting should its counts never arrive. The relayed bytes are
 * copied into a few slabs (2 KiB doubling to 16 KiB), so no chunk is held on to: a chunk is a
 * view of the socket's read buffer, and keeping thousands of them per stream kept their buffers
 * alive and made every collection walk them (issue 15: about 3 µs more CPU per busy chunk, and
 * 8–10 MiB more memory on a 100 MiB stream; see docs/gateway.md).
 *
 * How much is kept depends on what the provider has shown. Until it shows it will report its
 * counts, up to 4 MiB (the counts may never come). Once a chunk carries `"usage":null` (a chat
 * stream with usage asked for), the counts come at the end unless the stream breaks off first, so
 * only a 64 KiB sample is kept for that case, and what was kept beyond it is let go. Past its
 * bound the tape keeps nothing more and the count of what it kept is scaled by the frames relayed
 * in all.
 */
export class ReplyTape {
  private readonly slabs: Buffer[] = [];
  /** Bytes used in the last slab. */
  private used = 0;
  private size = 0;
  private bound: number;
  /** Chunks still to be looked at for the promise of counts (0 once found or given up). */
  private looks = PROMISE_LOOKS;
  /** Bytes relayed beyond the bound. */
  overflowed = false;

  constructor(
    maxBytes = TAPE_MAX_BYTES,
    private readonly sampleBytes = TAPE_SAMPLE_BYTES,
  ) {
    this.bound = maxBytes;
  }

  keep(chunk: Buffer): void {
    if (this.overflowed) return;
    if (this.looks > 0) {
      this.looks -= 1;
      if (chunk.includes(USAGE_PROMISE) || chunk.includes(USAGE_PROMISE_SPACED)) this.promise();
    }
    if (this.size + chunk.length > this.bound) {
      this.overflowed = true;
      return;
    }
    let from = 0;
    while (from < chunk.length) {
      let slab = this.slabs[this.slabs.length - 1];
      if (slab === undefined || this.used === slab.length) {
        const kept = this.size + from;
        slab = Buffer.allocUnsafe(Math.min(TAPE_SLAB_BYTES, Math.max(TAPE_FIRST_SLAB_BYTES, kept), this.bound - kept));
        this.slabs.push(slab);
        this.used = 0;
      }
      const copied = chunk.copy(slab, this.used, from);
      this.used += copied;
      from += copied;
    }
    this.size += chunk.length;
  }

  /** The provider will report its counts: from now on keep only a sample, and let go of the rest. */
  private promise(): void {
    this.looks = 0;
    if (this.sampleBytes >= this.bound) return;
    this.bound = this.sampleBytes;
    if (this.size <= this.bound) return;
    // Already past the sample: keep its first bytes (a frame cut there is not counted, as at the bound).
    this.overflowed = true;
    const whole = this.bytes().subarray(0, this.bound);
    this.slabs.length = 0;
    this.slabs.push(Buffer.from(whole));
    this.used = whole.length;
    this.size = whole.length;
  }

  private bytes(): Buffer {
    const last = this.slabs.length - 1;
    return Buffer.concat(this.slabs.map((slab, i) => (i === last ? slab.subarray(0, this.used) : slab)));
  }

  /**
   * Output tokens of the frames kept; when the tape overflowed, scaled up by `framesRelayed`
   * (every frame relayed) over the frames kept.
   */
  countOutput(count: CountTokens, framesRelayed: number): number {
    const text = this.bytes().toString('utf8');
    let tokens = 0;
    let frames = 0;
    for (const block of text.split(/\r?\n\r?\n/)) {
      const data = block
        .split(/\r?\n/)
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).replace(/^ /, ''))
        .join('\n');
      if (data === '' || data === '[DONE]') continue;
      frames += 1;
      try {
        tokens += countFrameTokens(JSON.parse(data), count);
      } catch {
        // A frame cut by the end of the stream or of the tape: its text is not counted.
      }
    }
    if (this.overflowed && frames > 0 && framesRelayed > frames) return Math.ceil((tokens * framesRelayed) / frames);
    return tokens;
  }
}

/** An estimate of what a request used and what it is charged for it. */
export interface Estimate {
  readonly counts: TokenCounts;
  readonly chargeMicros: number;
}

/**
 * The charge from counted tokens at the serving model's rates, never above `capMicros` (the hold:
 * the most the customer agreed to have taken for the request).
 */
export function estimateCharge(inputTokens: number, outputTokens: number, rates: Rates, capMicros: number): Estimate {
  const counts: TokenCounts = { inputTokens, cachedInputTokens: 0, outputTokens, reasoningTokens: 0 };
  return { counts, chargeMicros: Math.max(0, Math.min(capMicros, chargeMicros(counts, rates))) };
}
