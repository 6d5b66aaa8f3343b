/**
 * Request-reading and body-writing helpers shared by the chat and responses endpoints.
 */
import { invalidParam, type OpenAiErrorBody } from './errors';
import { countWords, type TokenSeq } from './tokens';

/** A request body turned into what an endpoint needs, or the refusal OpenAI would send. */
export type Parsed<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly status: number; readonly body: OpenAiErrorBody };

/** A refusal. */
export function refuse(status: number, body: OpenAiErrorBody): { ok: false; status: number; body: OpenAiErrorBody } {
  return { ok: false, status, body };
}

/** A plain JSON object (not an array, not null). */
export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Tokens OpenAI's counting adds per message (role and separators). */
export const TOKENS_PER_MESSAGE = 3;
/** Tokens charged for one image part (OpenAI's low-detail figure). */
export const TOKENS_PER_IMAGE = 85;

/** Words in a text field; zero for anything that is not a string. */
export function words(v: unknown): number {
  return typeof v === 'string' ? countWords(v) : 0;
}

/**
 * Reads one token ceiling (`max_tokens` and friends). OpenAI refuses a non-integer or a value
 * below 1 with these exact codes, and the gateway relays them, so the wording matters.
 */
export function readCeiling(body: Record<string, unknown>, param: string): Parsed<number | undefined> {
  const v = body[param];
  if (v === undefined || v === null) return { ok: true, value: undefined };
  if (typeof v !== 'number' || !Number.isInteger(v)) {
    return refuse(
      400,
      invalidParam(param, `Invalid type for '${param}': expected an integer, but got ${typeof v === 'number' ? 'a decimal' : `a ${typeof v}`} instead.`, 'invalid_type'),
    );
  }
  if (v < 1) {
    return refuse(
      400,
      invalidParam(param, `Invalid '${param}': integer below minimum value. Expected a value >= 1, but got ${v} instead.`, 'integer_below_min_value'),
    );
  }
  return { ok: true, value: v };
}

/** Placeholder put where the reply text goes, so a huge body can be written around it piecewise. */
export const TEXT_MARK = '\u0000sluice-sim-text\u0000';
const ESCAPED_MARK = JSON.stringify(TEXT_MARK).slice(1, -1);

/** A JSON body cut at its one text field. */
export interface SplitBody {
  readonly head: string;
  readonly text: TokenSeq;
  readonly tail: string;
}

/** Serializes `body` (which holds {@link TEXT_MARK} once, or not at all) around `text`. */
export function splitAtMark(body: unknown, text: TokenSeq): SplitBody {
  const json = JSON.stringify(body);
  const at = json.indexOf(ESCAPED_MARK);
  if (at < 0) return { head: json, text: { length: 0, at: () => '' }, tail: '' };
  return { head: json.slice(0, at), text, tail: json.slice(at + ESCAPED_MARK.length) };
}

/** One token as it appears inside a JSON string literal. */
export function escapeJsonText(piece: string): string {
  return JSON.stringify(piece).slice(1, -1);
}

/** Current time in whole seconds, as `created` fields carry it. */
export function unixSeconds(): number {
  return Math.floor(Date.now() / 1000);
}
