/**
 * The oracle for the relay's quick scan (`lambdas/core/sse-scan.ts`): `SseRelay` exactly as it was
 * before the scan, judging every frame the slow, exact way. The scan may make the relay faster,
 * never different, so both must give the same bytes, counts and faults for any input.
 */
import { readUsage, type RelayFault, type RelayOptions, type RelayStep } from '../../lambdas/core/sse';
import type { TokenCounts } from '../../lambdas/shared/records';

const LF_LF = Buffer.from('\n\n');
const CRLF_CRLF = Buffer.from('\r\n\r\n');
const DONE = '[DONE]';
/**
 * The `"usage":null` member OpenAI adds to every chunk once usage is asked for, however spaced.
 * Inside a JSON string a quote is escaped, so a comma, optional blanks and an unescaped quote can
 * only be the member itself.
 */
const USAGE_NULL = /,[ \t\r\n]*"usage"[ \t\r\n]*:[ \t\r\n]*null(?=[ \t\r\n]*[,}])/g;
const RESPONSE_END_TYPES: ReadonlySet<string> = new Set(['response.completed', 'response.incomplete', 'response.failed']);

/** The relay as it was before the quick scan: every frame decoded, split and `JSON.parse`d. */
export class ReferenceRelay {
  private pending: Buffer = Buffer.alloc(0);
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
    const pieces: Buffer[] = [];
    let start = 0;
    let done: Buffer | undefined;
    let fault: RelayFault | undefined;
    for (;;) {
      const lf = buf.indexOf(LF_LF, start);
      const crlf = buf.indexOf(CRLF_CRLF, start);
      let end: number;
      if (lf === -1 && crlf === -1) break;
      if (crlf !== -1 && (lf === -1 || crlf < lf)) end = crlf + 4;
      else end = lf + 2;
      const frame = buf.subarray(start, end);
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
      if (kept !== undefined) pieces.push(kept);
    }
    this.pending = start === buf.length ? Buffer.alloc(0) : Buffer.from(buf.subarray(start));
    const out = pieces.length === 0 ? undefined : pieces.length === 1 ? pieces[0] : Buffer.concat(pieces);
    if (fault !== undefined) return { out, fault };
    return done === undefined ? { out } : { out, done };
  }

  /** Bytes of an incomplete last frame left when the upstream ended (as they are). */
  flush(): Buffer | undefined {
    if (this.pending.length === 0 || this.ended) return undefined;
    const rest = this.pending;
    this.pending = Buffer.alloc(0);
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

  private broke(fault: RelayFault): 'fault' {
    this.fault = fault;
    return 'fault';
  }
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
