/**
 * Server-sent-event relay: passes a provider's stream through frame by frame, unchanged, while
 * reading the provider's own token counts out of it. Pure: bytes in, bytes out.
 *
 * A frame is forwarded as soon as its terminating blank line has arrived; only an incomplete
 * trailing frame is kept back, because the relay must see a whole frame before it knows whether
 * that frame is the usage-only chunk it asked for itself (DESIGN decision 4), the end marker
 * before which the `:x-sluice-usage` comment goes, or a fault (a data frame that is not JSON, or
 * the provider's own in-band error). A fault is never forwarded: the caller ends the stream with
 * one error frame in SPEC's envelope instead (DESIGN decision 9), and nothing after it passes.
 */
import type { EndpointFamily, TokenCounts } from '../shared/records';
import { FrameScan } from './sse-scan';

const EMPTY = Buffer.alloc(0);
const LF = 0x0a;
const CR = 0x0d;
const DONE = '[DONE]';
/**
 * The `"usage":null` member OpenAI adds to every chunk once usage is asked for, however spaced.
 * Inside a JSON string a quote is escaped, so a comma, optional blanks and an unescaped quote can
 * only be the member itself.
 */
const USAGE_NULL = /,[ \t\r\n]*"usage"[ \t\r\n]*:[ \t\r\n]*null(?=[ \t\r\n]*[,}])/g;
const RESPONSE_END_TYPES: ReadonlySet<string> = new Set(['response.completed', 'response.incomplete', 'response.failed']);

/** A token count as reported: a non-negative safe integer, else 0. */
function num(v: unknown): number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : 0;
}

/** What `details` answers for a usage object without the member. */
const NO_DETAILS: Readonly<Record<string, unknown>> = Object.freeze({});

/** A usage object's `…_details` member, or an empty one. */
function details(v: unknown): Record<string, unknown> {
  return v !== null && typeof v === 'object' ? (v as Record<string, unknown>) : NO_DETAILS;
}

/** Token counts from an OpenAI-format usage object (chat or responses naming); undefined if absent. */
export function readUsage(usage: unknown): TokenCounts | undefined {
  if (usage === null || typeof usage !== 'object') return undefined;
  const u = usage as Record<string, unknown>;
  if (typeof u.prompt_tokens === 'number' || typeof u.completion_tokens === 'number') {
    return {
      inputTokens: num(u.prompt_tokens),
      cachedInputTokens: num(details(u.prompt_tokens_details).cached_tokens),
      outputTokens: num(u.completion_tokens),
      reasoningTokens: num(details(u.completion_tokens_details).reasoning_tokens),
    };
  }
  if (typeof u.input_tokens === 'number' || typeof u.output_tokens === 'number') {
    return {
      inputTokens: num(u.input_tokens),
      cachedInputTokens: num(details(u.input_tokens_details).cached_tokens),
      outputTokens: num(u.output_tokens),
      reasoningTokens: num(details(u.output_tokens_details).reasoning_tokens),
    };
  }
  return undefined;
}

/** Options of one relay. */
export interface RelayOptions {
  readonly family: EndpointFamily;
  /** Sluice added `stream_options.include_usage` itself: withhold what that produced. */
  readonly injectedUsage: boolean;
}

/**
 * Why a provider stream cannot be relayed further: a data frame that is not a JSON object
 * (`malformed`), or the provider's own in-band error (`provider_error`: a chat `{"error":…}`
 * frame, a responses `error` event).
 */
export type RelayFault = 'malformed' | 'provider_error';

/** What to do with the bytes of one upstream chunk. */
export interface RelayStep {
  /** Bytes to write to the client now (possibly empty). */
  readonly out: Buffer | undefined;
  /** The end marker arrived: the caller writes the usage comment, then `done`, then ends. */
  readonly done?: Buffer;
  /** The stream broke: the caller writes `out`, then one error frame, then ends. */
  readonly fault?: RelayFault;
}

/**
 * Incremental relay of one provider stream. Most frames are judged from a quick scan of their
 * bytes (`sse-scan.ts`); the few that matter (usage counts, the end marker, faults, terminal
 * events) and any the scan is not sure of are decoded and parsed in full.
 */
export class SseRelay {
  private pending: Buffer = EMPTY;
  /** The quick look that spares the common frame a decode and a `JSON.parse` (see `sse-scan.ts`). */
  private readonly scan = new FrameScan();
  /** Counts reported by the provider in the stream, once seen. */
  usage: TokenCounts | undefined;
  /**
   * Frames that carry output so far, the estimate of output produced when no counts arrive:
   * every chat data frame; for responses, the `*.delta` events.
   */
  frames = 0;
  /** Whether the stream's end marker (chat `[DONE]`) has been seen. */
  ended = false;
  /** Whether a responses stream's terminal event (completed, incomplete, failed) has been seen. */
  terminal = false;
  /** Set once the stream has broken; nothing after the fault is forwarded. */
  fault: RelayFault | undefined;

  constructor(private readonly options: RelayOptions) {}

  /** Whether the provider finished its stream properly: `[DONE]`, or a terminal responses event. */
  get complete(): boolean {
    return this.options.family === 'chat_completions' ? this.ended : this.terminal;
  }

  /** Feeds one upstream chunk; returns what to forward now. */
  push(chunk: Buffer): RelayStep {
    const buf = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    // One frame per chunk is the common case: no array for it.
    let out: Buffer | undefined;
    let pieces: Buffer[] | undefined;
    let start = 0;
    let done: Buffer | undefined;
    let fault: RelayFault | undefined;
    for (;;) {
      const end = frameEnd(buf, start);
      if (end === -1) break;
      const frame = start === 0 && end === buf.length ? buf : buf.subarray(start, end);
      start = end;
      if (this.ended || this.fault !== undefined) continue; // nothing after the end marker or a fault
      const kept = this.inspect(frame);
      if (kept === 'done') {
        this.ended = true;
        done = frame;
        continue;
      }
      if (kept === 'fault') {
        fault = this.fault;
        continue;
      }
      if (kept === undefined) continue;
      if (out === undefined) out = kept;
      else (pieces ??= [out]).push(kept);
    }
    this.pending = start === buf.length ? EMPTY : Buffer.from(buf.subarray(start));
    if (pieces !== undefined) out = Buffer.concat(pieces);
    if (fault !== undefined) return { out, fault };
    return done === undefined ? { out } : { out, done };
  }

  /** Bytes of an incomplete last frame left when the upstream ended (as they are). */
  flush(): Buffer | undefined {
    if (this.pending.length === 0 || this.ended) return undefined;
    const rest = this.pending;
    this.pending = EMPTY;
    return rest;
  }

  /**
   * The upstream ended cleanly: an unterminated last frame is judged like any other (a provider
   * may close right after `data: [DONE]\n`), so a truncated one is a fault, never forwarded.
   */
  end(): RelayStep {
    const tail = this.flush();
    if (tail === undefined || this.fault !== undefined || tail.toString('latin1').trim() === '') return { out: undefined };
    // Whole again: what follows it (the usage comment, an error frame) must not join its last line.
    const text = tail.toString('latin1');
    const rest = Buffer.from(`${text.replace(/[\r\n]+$/, '')}${text.includes('\r\n') ? '\r\n\r\n' : '\n\n'}`, 'latin1');
    const kept = this.inspect(rest);
    if (kept === 'done') {
      this.ended = true;
      return { out: undefined, done: rest };
    }
    if (kept === 'fault') return { out: undefined, fault: this.fault };
    return { out: kept };
  }

  /** Returns the frame to forward, `undefined` to withhold it, `'done'` for the end marker, or `'fault'`. */
  private inspect(frame: Buffer): Buffer | undefined | 'done' | 'fault' {
    const quick = this.quick(frame);
    if (quick !== null) return quick;
    const fields = frameFields(frame);
    if (fields.data === undefined) return frame; // a comment or keep-alive
    if (this.options.family === 'chat_completions') {
      if (fields.data.trim() === DONE) return 'done';
      const parsed = parseObject(fields.data);
      if (parsed === undefined) return this.broke('malformed');
      if (parsed.error !== undefined && parsed.error !== null) return this.broke('provider_error');
      this.frames += 1; // a fault produced nothing, so only good frames count
      const counts = readUsage(parsed.usage);
      if (counts !== undefined) {
        this.usage = counts;
        if (this.options.injectedUsage && Array.isArray(parsed.choices) && parsed.choices.length === 0) {
          return undefined; // the usage-only chunk Sluice asked for; the client did not
        }
      }
      if (this.options.injectedUsage && parsed.usage === null) {
        // Asking for usage makes OpenAI add `"usage":null` to every chunk; strip it so the client
        // gets the bytes it would have had without asking.
        return Buffer.from(frame.toString('latin1').replace(USAGE_NULL, ''), 'latin1');
      }
      return frame;
    }
    // Responses: events are `event:`/`data:` pairs; usage rides on the terminal response event.
    const parsed = parseObject(fields.data);
    if (parsed === undefined) return this.broke('malformed');
    const type = typeof parsed.type === 'string' ? parsed.type : fields.event;
    if (fields.event === 'error' || type === 'error') return this.broke('provider_error');
    if (type !== undefined && type.endsWith('.delta')) this.frames += 1;
    if (type !== undefined && RESPONSE_END_TYPES.has(type)) {
      this.terminal = true;
      const response = parsed.response;
      if (response !== null && typeof response === 'object') {
        const counts = readUsage((response as Record<string, unknown>).usage);
        if (counts !== undefined) this.usage = counts;
      }
    }
    return frame;
  }

  /**
   * The common frame, judged from the scan alone: what `inspect` would return for it, or null
   * when the scan is not sure or the frame needs the full parse (the end marker, a fault, usage
   * counts, a terminal responses event).
   */
  private quick(frame: Buffer): Buffer | null {
    const scan = this.scan;
    if (!scan.read(frame, 0, frame.length)) return null;
    if (this.options.family === 'chat_completions') {
      this.frames += 1;
      // Stripping the injected `"usage":null` (see `inspect`): the scan found where it is.
      return this.options.injectedUsage && scan.stripFrom >= 0 ? without(frame, scan.stripFrom, scan.stripTo) : frame;
    }
    const type = scan.type ?? scan.event;
    if (scan.event === 'error' || type === 'error' || (type !== undefined && RESPONSE_END_TYPES.has(type))) return null;
    if (type !== undefined && type.endsWith('.delta')) this.frames += 1;
    return frame;
  }

  private broke(fault: RelayFault): 'fault' {
    this.fault = fault;
    return 'fault';
  }
}

/**
 * Where the frame starting at `start` ends: just after its first blank line, `\n\n` or
 * `\r\n\r\n`, whichever comes first; -1 when it has not arrived yet. Every blank line holds a
 * line feed, so only the line feeds are visited (one for a one-line frame), each found natively.
 */
function frameEnd(buf: Buffer, start: number): number {
  for (let p = buf.indexOf(LF, start); p !== -1; p = buf.indexOf(LF, p + 1)) {
    if (p > start && buf[p - 1] === CR && buf[p + 1] === CR && buf[p + 2] === LF) return p + 3;
    if (buf[p + 1] === LF) return p + 2;
  }
  return -1;
}

/** `frame` less the bytes `[from, to)`, in a new buffer. */
function without(frame: Buffer, from: number, to: number): Buffer {
  const out = Buffer.allocUnsafe(frame.length - (to - from));
  frame.copy(out, 0, 0, from);
  frame.copy(out, from, to);
  return out;
}

/** The `event:` name and the joined `data:` lines of one frame (SSE: one optional space after the colon). */
function frameFields(frame: Buffer): { readonly event?: string; readonly data?: string } {
  let event: string | undefined;
  const data: string[] = [];
  for (const line of frame.toString('utf8').split(/\r\n|\r|\n/)) {
    if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
    else if (line.startsWith('event:')) event = line.slice(6).replace(/^ /, '');
  }
  return data.length === 0 ? { event } : { event, data: data.join('\n') };
}

/** Parses a frame's data as a JSON object; undefined when it is not one. */
function parseObject(data: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(data);
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The `:x-sluice-usage` comment line: the provider's counts and the charge, one line of JSON. */
export function usageComment(counts: TokenCounts | undefined, chargeMicros: number, estimated: boolean): Buffer {
  const c = counts ?? { inputTokens: 0, cachedInputTokens: 0, outputTokens: 0, reasoningTokens: 0 };
  const payload = {
    prompt_tokens: c.inputTokens,
    completion_tokens: c.outputTokens,
    total_tokens: c.inputTokens + c.outputTokens,
    cached_tokens: c.cachedInputTokens,
    reasoning_tokens: c.reasoningTokens,
    charge_micros: chargeMicros,
    estimated,
  };
  return Buffer.from(`:x-sluice-usage ${JSON.stringify(payload)}\n\n`);
}
