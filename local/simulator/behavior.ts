/**
 * What the simulator does with one request. A behavior is plain data, so the same values can be
 * scripted in-process (`sim.script(...)`) or sent as JSON to the control surface (`POST /_sim/script`)
 * by local mode and benchmarks running in another process.
 *
 * Every kind except `error` carries {@link ReplyOptions}: the reply that is produced (in full for
 * `ok` and `stall`, up to the fault for `reset`, `malformed` and `stream-error`).
 *
 * "Chunks" below are the data frames of a streamed reply, counted from 0: for chat the role chunk,
 * one chunk per token, the finish chunk and (when asked) the usage chunk; for responses one event
 * per frame. The `[DONE]` terminator is never counted. When `afterChunks` is at least the number
 * of frames the reply has, the fault happens after the last frame, in place of the terminator.
 */

/** A function call the simulator should return instead of the one it derives from the request. */
export interface ScriptedToolCall {
  /** Function name, returned as is. */
  readonly name: string;
  /** Arguments string, returned as is (it need not be valid JSON: providers do send broken JSON). */
  readonly arguments: string;
}

/** The shape of a successful reply, shared by every kind that produces one. */
export interface ReplyOptions {
  /**
   * Reply text, streamed one whitespace-led word per token. Absent: a deterministic sequence of
   * words (or, under `response_format` json_object/json_schema, a small JSON object).
   */
  readonly text?: string;
  /**
   * Completion tokens before the ceiling. Without `text` this many words are produced (default
   * 12); with `text` it only sets the reported count, so usage can be decoupled from content.
   */
  readonly completionTokens?: number;
  /** Forces a tool-call reply with exactly these calls, whether or not the request had tools. */
  readonly toolCalls?: readonly ScriptedToolCall[];
  /** Reported cached prompt tokens; clamped to the prompt token count. Default 0. */
  readonly cachedTokens?: number;
  /**
   * Reported reasoning tokens. They are part of the completion count (as with OpenAI) and spend
   * the `max_tokens` budget first. Default 0.
   */
  readonly reasoningTokens?: number;
  /** Reported prompt tokens instead of the counted ones; still clamped to the body's byte length. */
  readonly promptTokens?: number;
  /** Produce the full completion even past `max_tokens` / `max_output_tokens` (provider overrun). */
  readonly ignoreCeiling?: boolean;
  /** Leave usage out: no `usage` in bodies, no usage chunk in chat streams (a provider that never reports). */
  readonly omitUsage?: boolean;
  /** Delay between streamed frames; overrides the simulator-wide `chunkDelayMs`. */
  readonly chunkDelayMs?: number;
  /** Accept the request, then send nothing (not even headers) for this long. */
  readonly stallBeforeFirstByteMs?: number;
  /** The `model` the reply names; default the request's. `null` leaves the field out. */
  readonly responseModel?: string | null;
  /** Extra response headers (e.g. provider rate-limit headers). */
  readonly headers?: Readonly<Record<string, string>>;
}

/** A normal reply. */
export interface OkBehavior extends ReplyOptions {
  readonly kind: 'ok';
}

/**
 * An HTTP error reply. Without `body`, an OpenAI `ErrorResponse` fitting the status is sent
 * (400 invalid_request_error, 401 invalid_api_key, 404 model_not_found, 429 rate_limit_exceeded,
 * 500/503 server_error), with `message`/`type`/`param`/`code` overriding its fields. A string
 * `body` is sent verbatim as text/plain (e.g. an HTML page from a proxy); any other value as JSON.
 */
export interface ErrorBehavior {
  readonly kind: 'error';
  readonly status: number;
  readonly body?: unknown;
  /** e.g. `{ 'retry-after': '2' }` */
  readonly headers?: Readonly<Record<string, string>>;
  readonly message?: string;
  readonly type?: string;
  /** With status 400 and no `message`/`code`, the error reads as OpenAI's unsupported_value for this param. */
  readonly param?: string | null;
  readonly code?: string | null;
}

/**
 * The connection is closed without finishing the response. Streamed: headers and `afterChunks`
 * frames are sent, then the socket is destroyed, so the body ends without its final chunk and
 * clients see a network error. Non-streamed, or with `beforeHeaders`: destroyed before any byte.
 */
export interface ResetBehavior extends ReplyOptions {
  readonly kind: 'reset';
  readonly afterChunks: number;
  readonly beforeHeaders?: boolean;
}

/**
 * A pause, then a normal reply. Without `afterChunks`, or for a non-streamed request, nothing at
 * all is sent for `ms` (a slow first byte); with it on a stream, headers and `afterChunks` frames
 * are sent first (a stream that goes quiet). `ms` is capped at 2^31-1.
 */
export interface StallBehavior extends ReplyOptions {
  readonly kind: 'stall';
  readonly ms: number;
  readonly afterChunks?: number;
}

/**
 * Streamed: `afterChunks` good frames, then one data frame that is not JSON, then a clean end
 * with no terminator. Non-streamed: a 200 `application/json` body that is truncated JSON.
 */
export interface MalformedBehavior extends ReplyOptions {
  readonly kind: 'malformed';
  readonly afterChunks: number;
}

/**
 * Streamed: `afterChunks` good frames, then an in-band error frame as OpenAI sends one
 * (chat: `data: {"error":{...}}`; responses: an `error` event), then a clean end with no
 * terminator. Non-streamed: a 500 with that error body.
 */
export interface StreamErrorBehavior extends ReplyOptions {
  readonly kind: 'stream-error';
  readonly afterChunks: number;
  readonly message?: string;
  readonly type?: string;
  readonly param?: string | null;
  readonly code?: string | null;
}

/** Everything the simulator can be told to do with one request. */
export type Behavior =
  | OkBehavior
  | ErrorBehavior
  | ResetBehavior
  | StallBehavior
  | MalformedBehavior
  | StreamErrorBehavior;

/** A behavior that failed validation (a typo in a field name would otherwise be silently ignored). */
export class BehaviorError extends Error {
  override readonly name = 'BehaviorError';
}

type Check = (value: unknown) => boolean;

const isString: Check = (v) => typeof v === 'string';
const isBool: Check = (v) => typeof v === 'boolean';
const isCount: Check = (v) => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const isMs: Check = (v) => typeof v === 'number' && Number.isFinite(v) && v >= 0;
const isNullableString: Check = (v) => v === null || typeof v === 'string';
const isAnything: Check = () => true;
const isStatus: Check = (v) => typeof v === 'number' && Number.isInteger(v) && v >= 100 && v <= 599;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const isHeaders: Check = (v) => isRecord(v) && Object.values(v).every(isString);
const isToolCalls: Check = (v) =>
  Array.isArray(v) && v.length > 0 && v.every((c) => isRecord(c) && isString(c.name) && isString(c.arguments));

const REPLY_FIELDS: Readonly<Record<string, Check>> = {
  text: isString,
  completionTokens: isCount,
  toolCalls: isToolCalls,
  cachedTokens: isCount,
  reasoningTokens: isCount,
  promptTokens: isCount,
  ignoreCeiling: isBool,
  omitUsage: isBool,
  chunkDelayMs: isMs,
  stallBeforeFirstByteMs: isMs,
  responseModel: isNullableString,
  headers: isHeaders,
};

interface KindSpec {
  readonly fields: Readonly<Record<string, Check>>;
  readonly required: readonly string[];
  readonly reply: boolean;
}

const ERROR_FIELDS: Readonly<Record<string, Check>> = {
  message: isString,
  type: isString,
  param: isNullableString,
  code: isNullableString,
};

const KINDS: Readonly<Record<Behavior['kind'], KindSpec>> = {
  ok: { fields: {}, required: [], reply: true },
  error: { fields: { status: isStatus, body: isAnything, headers: isHeaders, ...ERROR_FIELDS }, required: ['status'], reply: false },
  reset: { fields: { afterChunks: isCount, beforeHeaders: isBool }, required: ['afterChunks'], reply: true },
  stall: { fields: { ms: isMs, afterChunks: isCount }, required: ['ms'], reply: true },
  malformed: { fields: { afterChunks: isCount }, required: ['afterChunks'], reply: true },
  'stream-error': { fields: { afterChunks: isCount, ...ERROR_FIELDS }, required: ['afterChunks'], reply: true },
};

function isKind(v: unknown): v is Behavior['kind'] {
  return typeof v === 'string' && Object.prototype.hasOwnProperty.call(KINDS, v);
}

/**
 * Checks a behavior that arrived as data (JSON over the control surface, or an in-process value
 * built loosely) and returns it typed. Unknown fields are refused rather than ignored.
 * @throws BehaviorError naming the offending field
 */
export function parseBehavior(value: unknown, where = 'behavior'): Behavior {
  if (!isRecord(value)) throw new BehaviorError(`${where} must be an object`);
  const kind = value.kind;
  if (!isKind(kind)) {
    throw new BehaviorError(`${where}.kind must be one of ${Object.keys(KINDS).join(', ')}`);
  }
  const spec = KINDS[kind];
  for (const field of spec.required) {
    if (value[field] === undefined) throw new BehaviorError(`${where}.${field} is required for kind '${kind}'`);
  }
  for (const [field, fieldValue] of Object.entries(value)) {
    if (field === 'kind' || fieldValue === undefined) continue;
    const check = spec.fields[field] ?? (spec.reply ? REPLY_FIELDS[field] : undefined);
    if (check === undefined) throw new BehaviorError(`${where}.${field} is not a field of kind '${kind}'`);
    if (!check(fieldValue)) throw new BehaviorError(`${where}.${field} has an invalid value`);
  }
  // Every field was checked against the kind's table above, so the value has the declared shape.
  return value as unknown as Behavior;
}

const DEFAULT_BEHAVIOR: OkBehavior = Object.freeze({ kind: 'ok' });

/**
 * Scripts (one-shot queues per exact model string) and defaults (per model, then `'*'`).
 * A script wins over a default so a test can inject one fault into an otherwise steady model.
 */
export class BehaviorBook {
  private readonly scripts = new Map<string, Behavior[]>();
  private readonly defaults = new Map<string, Behavior>();

  /** Appends to the model's queue (appending, so two calls queue in call order). */
  script(model: string, behaviors: readonly unknown[]): void {
    const parsed = behaviors.map((b, i) => parseBehavior(b, `behaviors[${i}]`));
    const queue = this.scripts.get(model);
    if (queue === undefined) this.scripts.set(model, parsed);
    else queue.push(...parsed);
  }

  setDefault(model: string, behavior: unknown): void {
    this.defaults.set(model, parseBehavior(behavior));
  }

  /** The behavior for the next request naming `model`, consuming a scripted one when queued. */
  next(model: string | undefined): Behavior {
    if (model !== undefined) {
      const queue = this.scripts.get(model);
      if (queue !== undefined) {
        const scripted = queue.shift();
        if (queue.length === 0) this.scripts.delete(model);
        if (scripted !== undefined) return scripted;
      }
      const forModel = this.defaults.get(model);
      if (forModel !== undefined) return forModel;
    }
    return this.defaults.get('*') ?? DEFAULT_BEHAVIOR;
  }

  clear(): void {
    this.scripts.clear();
    this.defaults.clear();
  }
}
