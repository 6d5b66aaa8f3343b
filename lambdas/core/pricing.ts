/**
 * Money arithmetic: what a request may cost at most (the hold) and what it did cost (the charge).
 * Integers only. Rates are thousandths of a minor unit per million tokens; amounts are micro-units
 * (millionths of a minor unit), so one token costs `rate / 1000` micro-units and a charge is
 * `ceil(tokens × rate / 1000)` per kind of token.
 */
import { SluiceError } from './errors';
import type { EndpointFamily, TokenCounts } from '../shared/records';

/** The rates of one model, as the catalog publishes them. */
export interface Rates {
  readonly inputRateThousandths: number;
  readonly cachedInputRateThousandths: number;
  readonly outputRateThousandths: number;
}

/** What hold sizing needs to know about a model. */
export interface PricedModel {
  readonly id: string;
  readonly contextWindowTokens: number | null;
  readonly maxOutputTokens: number | null;
  readonly inputRateThousandths: number | null;
  readonly cachedInputRateThousandths: number | null;
  readonly outputRateThousandths: number | null;
}

/** Micro-units per minor unit. */
export const MICROS_PER_MINOR = 1_000_000;

/**
 * A prompt's text is never more tokens than its UTF-8 bytes (every tokenizer in use emits at least
 * one byte per token), but an image costs tokens by its pixels, not its bytes: each image part is
 * allowed this many tokens, the most any catalogued provider bills for one image at full detail.
 */
export const IMAGE_PART_TOKENS = 6_000;
/** Each audio or file part is allowed this many tokens (a file part on top of its expanded bytes). */
export const OTHER_PART_TOKENS = 6_000;
/**
 * A prompt whose text bound exceeds this many times the model's context window cannot be held
 * against sensibly and is refused `context_length_exceeded`: no tokenizer averages this many bytes
 * per token on real text, so such a prompt cannot fit.
 */
export const CONTEXT_BOUND_FACTOR = 32;

/** `ceil(tokens × rate / 1000)` micro-units, checked to stay a safe integer. */
export function costMicros(tokens: number, rateThousandths: number): number {
  const product = tokens * rateThousandths;
  if (!Number.isSafeInteger(product)) throw new RangeError('cost out of safe integer range');
  return Math.ceil(product / 1000);
}

/** The charge for the provider's own counts: cached input at its own rate, reasoning as output. */
export function chargeMicros(counts: TokenCounts, rates: Rates): number {
  const cached = Math.min(counts.cachedInputTokens, counts.inputTokens);
  return (
    costMicros(counts.inputTokens - cached, rates.inputRateThousandths) +
    costMicros(cached, rates.cachedInputRateThousandths) +
    costMicros(counts.outputTokens, rates.outputRateThousandths)
  );
}

/** Reads a ceiling; a value that is not a positive safe integer counts as absent (SPEC). */
function readCeiling(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isSafeInteger(value) && value > 0 ? value : undefined;
}

/**
 * The caller's output ceiling for the endpoint family: chat takes the larger of `max_tokens` and
 * `max_completion_tokens`; responses takes `max_output_tokens`. Undefined when none can be read.
 */
export function callerCeiling(body: Readonly<Record<string, unknown>>, family: EndpointFamily): number | undefined {
  if (family !== 'chat_completions') return readCeiling(body.max_output_tokens);
  const a = readCeiling(body.max_tokens);
  const b = readCeiling(body.max_completion_tokens);
  return a === undefined ? b : b === undefined ? a : Math.max(a, b);
}

/** Upper bound of a request's prompt, in tokens, and how many of them are text bytes. */
export interface PromptBound {
  readonly tokens: number;
  readonly textBytes: number;
}

/**
 * Where the payload of a media part sits, by part type: only these strings are images or audio
 * (billed by pixels or seconds, not bytes), so only they leave the text bound.
 */
const MEDIA_PAYLOADS: Readonly<Record<string, readonly (readonly string[])[]>> = {
  image_url: [['image_url', 'url'], ['image_url']],
  input_image: [['image_url']],
  input_audio: [['input_audio', 'data'], ['data']],
};
/** File parts (PDFs) are billed for their text and page images: their bytes stay in the bound, times this. */
const FILE_PART_TYPES = new Set(['file', 'input_file']);
export const FILE_EXPANSION = 4;

function at(record: Readonly<Record<string, unknown>>, path: readonly string[]): unknown {
  let node: unknown = record;
  for (const key of path) {
    if (node === null || typeof node !== 'object' || Array.isArray(node)) return undefined;
    node = (node as Record<string, unknown>)[key];
  }
  return node;
}

/**
 * Upper bound of the prompt's tokens from the raw body. Every byte of the body counts as a token
 * (so text is never under-estimated; JSON syntax and field names only add margin), except the
 * payload strings of image and audio parts, which are replaced by a fixed per-part allowance.
 * What is subtracted is each payload's shortest JSON spelling, never more than its raw bytes, so
 * no spelling of the body can push text out of the bound. File parts keep their bytes, times
 * FILE_EXPANSION (compressed PDF text expands), plus the allowance.
 */
export function promptBound(rawBodyBytes: number, body: unknown): PromptBound {
  let mediaParts = 0;
  let mediaBytes = 0;
  let fileBytes = 0;
  const visit = (node: unknown, depth: number): void => {
    if (depth > 64 || node === null || typeof node !== 'object') return;
    if (Array.isArray(node)) {
      for (const item of node) visit(item, depth + 1);
      return;
    }
    const record = node as Record<string, unknown>;
    const type = typeof record.type === 'string' ? record.type : undefined;
    const payloads = type === undefined ? undefined : MEDIA_PAYLOADS[type];
    if (payloads !== undefined) {
      for (const path of payloads) {
        const value = at(record, path);
        if (typeof value === 'string') {
          mediaParts += 1;
          mediaBytes += Buffer.byteLength(JSON.stringify(value), 'utf8');
          break;
        }
      }
    } else if (type !== undefined && FILE_PART_TYPES.has(type)) {
      mediaParts += 1;
      fileBytes += Buffer.byteLength(JSON.stringify(record), 'utf8');
    }
    for (const value of Object.values(record)) visit(value, depth + 1);
  };
  visit(body, 0);
  const textBytes = Math.max(0, rawBodyBytes - mediaBytes);
  return { tokens: textBytes + fileBytes * (FILE_EXPANSION - 1) + mediaParts * Math.max(IMAGE_PART_TOKENS, OTHER_PART_TOKENS), textBytes };
}

/** The hold for one model: the most the request could cost on it, and its parts. */
export interface HoldSize {
  readonly amountMicros: number;
  readonly inputMicros: number;
  readonly outputCeilingTokens: number;
}

/**
 * Sizes the hold for a request on one model, per SPEC's Limits: the output ceiling is the smaller of
 * the caller's figure and the model's `max_output_tokens`; without a caller figure it is the model's
 * maximum; with neither, `model_not_priceable`. The prompt is held at its upper bound, but never at
 * more tokens than the model's context window, since no provider bills a prompt beyond it.
 */
export function sizeHold(model: PricedModel, body: Readonly<Record<string, unknown>>, bound: PromptBound, family: EndpointFamily): HoldSize {
  if (model.inputRateThousandths === null || model.outputRateThousandths === null) {
    throw new SluiceError('model_not_priceable', `The model ${model.id} has no price on record right now; try again later.`);
  }
  const caller = callerCeiling(body, family);
  const max = model.maxOutputTokens ?? undefined;
  const ceiling = caller === undefined ? max : max === undefined ? caller : Math.min(caller, max);
  if (ceiling === undefined) {
    throw new SluiceError(
      'model_not_priceable',
      `The model ${model.id} publishes no maximum output, so a request must name its own ceiling: send max_tokens.`,
    );
  }
  const window = model.contextWindowTokens;
  if (window !== null && bound.textBytes > window * CONTEXT_BOUND_FACTOR) {
    throw new SluiceError(
      'context_length_exceeded',
      `This prompt is too large for ${model.id} (context window ${window} tokens) to price or hold credit against. Shorten the messages.`,
    );
  }
  const promptTokens = window === null ? bound.tokens : Math.min(bound.tokens, window);
  const inputMicros = costMicros(promptTokens, model.inputRateThousandths);
  const outputMicros = model.outputRateThousandths * ceiling;
  // A ceiling so large its cost leaves the safe integers (a model with no published maximum, and
  // max_tokens of 10^12) needs a hold beyond any balance: the answer is the 402, not a fault.
  if (!Number.isSafeInteger(outputMicros) || !Number.isSafeInteger(inputMicros + Math.ceil(outputMicros / 1000))) {
    throw new SluiceError('insufficient_credit', 'The workspace balance cannot cover this request. Add credit, or send a smaller max_tokens.');
  }
  const amountMicros = inputMicros + costMicros(ceiling, model.outputRateThousandths);
  return { amountMicros, inputMicros, outputCeilingTokens: ceiling };
}

/** Formats micro-units as minor units with six decimals, for messages and the CLI. */
export function formatMinor(micros: number): string {
  const sign = micros < 0 ? '-' : '';
  const abs = Math.abs(micros);
  const whole = Math.floor(abs / MICROS_PER_MINOR);
  const frac = String(abs % MICROS_PER_MINOR).padStart(6, '0');
  return `${sign}${whole}.${frac}`;
}
