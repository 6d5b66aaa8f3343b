/**
 * A quick look at one server-sent-event frame, in its bytes, for the relay's common case.
 *
 * Almost every frame of a provider stream is one `data:` line (a responses event adds an `event:`
 * line before it) holding a JSON object that matters to Sluice only for being valid JSON: no
 * error, no usage counts, no terminal event type. Decoding, splitting and `JSON.parse`-ing each of
 * them cost more than everything else the gateway does per chunk, so this scan checks the JSON
 * grammar (RFC 8259) in place, without decoding or allocating, and notes the few top-level
 * members the relay reads.
 *
 * It is deliberately conservative: it answers only when the frame has the common shape and is
 * certainly valid, and says "not sure" for anything else (an unusual layout, a top-level `error`,
 * usage counts, escaped top-level keys, invalid JSON, ...), which the relay then judges the exact,
 * slow way. So it can make the relay faster, never different.
 */

const TAB = 0x09;
const LF = 0x0a;
const CR = 0x0d;
const SPACE = 0x20;
const QUOTE = 0x22;
const PLUS = 0x2b;
const COMMA = 0x2c;
const MINUS = 0x2d;
const DOT = 0x2e;
const SLASH = 0x2f;
const ZERO = 0x30;
const NINE = 0x39;
const COLON = 0x3a;
const LBRACKET = 0x5b;
const BACKSLASH = 0x5c;
const RBRACKET = 0x5d;
const LBRACE = 0x7b;
const RBRACE = 0x7d;

const DATA = Buffer.from('data:');
const EVENT = Buffer.from('event:');
const USAGE = Buffer.from('usage');
const ERROR = Buffer.from('error');
const TYPE = Buffer.from('type');
const TRUE = Buffer.from('true');
const FALSE = Buffer.from('false');
const NULL = Buffer.from('null');

/** Bytes that end a run of plain string content: the quote, the backslash, control characters. */
const STRING_STOP = new Uint8Array(256);
for (let c = 0; c < SPACE; c += 1) STRING_STOP[c] = 1;
STRING_STOP[QUOTE] = 1;
STRING_STOP[BACKSLASH] = 1;

/** What the parser expects next. */
const VALUE = 0;
const KEY = 1;
const AFTER = 2;

/** Containers on the parser's stack. */
const OBJECT = 0;
const ARRAY = 1;

/** The top-level members whose values the scan notes. */
const OTHER_MEMBER = 0;
const USAGE_MEMBER = 1;
const TYPE_MEMBER = 2;

/**
 * The outcome of {@link FrameScan.read} for the last frame read; reused from frame to frame so the
 * hot path allocates nothing.
 */
export class FrameScan {
  /** The `event:` line's value, when the frame has one. */
  event: string | undefined;
  /** The top-level `type` member when it is a string, else undefined. */
  type: string | undefined;
  /**
   * Where the top-level `,"usage":null` member lies (from its comma to the end of `null`), or -1
   * when there is none to strip: no `usage`, or `usage` is the object's first member.
   */
  stripFrom = -1;
  stripTo = -1;
  /** Members named `usage`, at any depth, so far in this frame. */
  private usageKeys = 0;
  private typeKeys = 0;
  private typeFrom = -1;
  private typeTo = -1;
  /** Whether the last string read had an escape sequence. */
  private escaped = false;
  private readonly stack: number[] = [];

  /**
   * Reads `frame[start, end)`, which ends with its blank line. True when the frame is one optional
   * `event:` line and one `data:` line holding a valid JSON object with no top-level `error`,
   * no top-level `usage` other than `null`, no other `usage` member anywhere, at most one
   * top-level `type` (unescaped when a string) and no escaped top-level key; false when not sure.
   */
  read(frame: Buffer, start: number, end: number): boolean {
    this.event = undefined;
    this.type = undefined;
    this.stripFrom = -1;
    this.stripTo = -1;
    this.usageKeys = 0;
    this.typeKeys = 0;
    this.typeFrom = -1;
    let i = start;
    if (startsWith(frame, i, end, EVENT)) {
      i = this.eventLine(frame, i + EVENT.length, end);
      if (i < 0) return false;
    }
    if (!startsWith(frame, i, end, DATA)) return false;
    i += DATA.length;
    if (frame[i] === SPACE) i += 1; // SSE: one optional space after the colon
    i = skipBlanks(frame, i, end);
    if (frame[i] !== LBRACE) return false;
    i = this.object(frame, i, end);
    if (i < 0) return false;
    // Only the line break and the blank line may follow: one data line, nothing else.
    for (; i < end; i += 1) if (frame[i] !== CR && frame[i] !== LF) return false;
    if (this.typeFrom >= 0) this.type = frame.toString('utf8', this.typeFrom, this.typeTo);
    return true;
  }

  /** Reads the `event:` line's value; returns where the next line starts, or -1. */
  private eventLine(frame: Buffer, i: number, end: number): number {
    if (frame[i] === SPACE) i += 1;
    const from = i;
    while (i < end && frame[i] !== CR && frame[i] !== LF) i += 1;
    if (i >= end) return -1;
    this.event = frame.toString('utf8', from, i);
    if (frame[i] === CR) i += 1;
    if (frame[i] === LF) i += 1;
    return i;
  }

  /**
   * Checks the JSON object at `i` (RFC 8259, with only spaces and tabs as blanks: a line break
   * would end the data line) and notes the top-level members. Returns the index after the object
   * and the blanks following it, or -1 when not sure.
   */
  private object(b: Buffer, i: number, end: number): number {
    const stack = this.stack;
    let depth = 0;
    let state = VALUE;
    let member = OTHER_MEMBER;
    /** The comma before the current top-level member, -1 for the first member. */
    let comma = -1;
    for (;;) {
      i = skipBlanks(b, i, end);
      if (i >= end) return -1;
      const c = b[i];
      if (state === VALUE) {
        const owner = member;
        member = OTHER_MEMBER;
        const from = i;
        if (c === LBRACE || c === LBRACKET) {
          if (owner === USAGE_MEMBER) return -1; // usage counts: the exact path reads them
          stack[depth] = c === LBRACE ? OBJECT : ARRAY;
          depth += 1;
          i = skipBlanks(b, i + 1, end);
          if (b[i] === (c === LBRACE ? RBRACE : RBRACKET)) {
            i += 1;
            depth -= 1;
            state = AFTER;
          } else {
            state = c === LBRACE ? KEY : VALUE;
            if (depth === 1) comma = -1;
          }
          continue;
        }
        if (c === QUOTE) {
          i = this.string(b, i, end);
          if (i < 0 || owner === USAGE_MEMBER) return -1;
          if (owner === TYPE_MEMBER) {
            if (this.escaped) return -1;
            this.typeFrom = from + 1;
            this.typeTo = i - 1;
          }
        } else if (c === MINUS || (c !== undefined && c >= ZERO && c <= NINE)) {
          i = number(b, i, end);
          if (i < 0 || owner === USAGE_MEMBER) return -1;
        } else if (startsWith(b, i, end, NULL)) {
          i += NULL.length;
          if (owner === USAGE_MEMBER && comma >= 0) {
            this.stripFrom = comma;
            this.stripTo = i;
          }
        } else if (startsWith(b, i, end, TRUE) || startsWith(b, i, end, FALSE)) {
          if (owner === USAGE_MEMBER) return -1;
          i += c === TRUE[0] ? TRUE.length : FALSE.length;
        } else {
          return -1;
        }
        state = AFTER;
      } else if (state === KEY) {
        if (c !== QUOTE) return -1;
        const from = i + 1;
        i = this.string(b, i, end);
        if (i < 0) return -1;
        member = this.key(b, from, i - 1, depth);
        if (member < 0) return -1;
        i = skipBlanks(b, i, end);
        if (b[i] !== COLON) return -1;
        i += 1;
        state = VALUE;
      } else {
        if (depth === 0) return i;
        const container = stack[depth - 1];
        if (c === COMMA) {
          if (depth === 1) comma = i;
          i += 1;
          state = container === OBJECT ? KEY : VALUE;
        } else if ((c === RBRACE && container === OBJECT) || (c === RBRACKET && container === ARRAY)) {
          i += 1;
          depth -= 1;
        } else {
          return -1;
        }
      }
    }
  }

  /** Classifies the key `b[from, to)` read at `depth`; -1 when only the exact path can judge it. */
  private key(b: Buffer, from: number, to: number, depth: number): number {
    // A `"usage":null` member at any depth is what the exact path strips: one at most, here.
    if (rangeEquals(b, from, to, USAGE) && ++this.usageKeys > 1) return -1;
    if (depth !== 1) return OTHER_MEMBER;
    if (this.escaped) return -1; // `"\u0065rror"` is `error`
    if (rangeEquals(b, from, to, USAGE)) return USAGE_MEMBER;
    if (rangeEquals(b, from, to, ERROR)) return -1;
    if (rangeEquals(b, from, to, TYPE)) return ++this.typeKeys > 1 ? -1 : TYPE_MEMBER;
    return OTHER_MEMBER;
  }

  /** Checks the string at `b[i]` (a quote); returns the index after its closing quote, or -1. */
  private string(b: Buffer, i: number, end: number): number {
    this.escaped = false;
    for (i += 1; i < end; ) {
      const c = b[i] as number;
      if (STRING_STOP[c] === 0) {
        i += 1;
        continue;
      }
      if (c === QUOTE) return i + 1;
      if (c === BACKSLASH) {
        this.escaped = true;
        const e = b[i + 1];
        if (e === QUOTE || e === BACKSLASH || e === SLASH || e === 0x62 || e === 0x66 || e === 0x6e || e === 0x72 || e === 0x74) i += 2;
        else if (e === 0x75 && isHex(b[i + 2]) && isHex(b[i + 3]) && isHex(b[i + 4]) && isHex(b[i + 5])) i += 6;
        else return -1;
      } else {
        return -1; // a control character, a line break among them
      }
    }
    return -1;
  }
}

/** Checks the number at `b[i]`: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`; returns its end, or -1. */
function number(b: Buffer, i: number, end: number): number {
  if (b[i] === MINUS) i += 1;
  if (b[i] === ZERO) i += 1;
  else if (isDigit(b[i])) i = digits(b, i, end);
  else return -1;
  if (b[i] === DOT) {
    if (!isDigit(b[i + 1])) return -1;
    i = digits(b, i + 1, end);
  }
  if (b[i] === 0x65 || b[i] === 0x45) {
    i += 1;
    if (b[i] === PLUS || b[i] === MINUS) i += 1;
    if (!isDigit(b[i])) return -1;
    i = digits(b, i, end);
  }
  return i;
}

function digits(b: Buffer, i: number, end: number): number {
  while (i < end && isDigit(b[i])) i += 1;
  return i;
}

function isDigit(c: number | undefined): boolean {
  return c !== undefined && c >= ZERO && c <= NINE;
}

function isHex(c: number | undefined): boolean {
  if (c === undefined) return false;
  const lower = c | 0x20;
  return (c >= ZERO && c <= NINE) || (lower >= 0x61 && lower <= 0x66);
}

function skipBlanks(b: Buffer, i: number, end: number): number {
  while (i < end && (b[i] === SPACE || b[i] === TAB)) i += 1;
  return i;
}

function startsWith(b: Buffer, i: number, end: number, word: Buffer): boolean {
  if (i + word.length > end) return false;
  for (let k = 0; k < word.length; k += 1) if (b[i + k] !== word[k]) return false;
  return true;
}

function rangeEquals(b: Buffer, from: number, to: number, word: Buffer): boolean {
  return to - from === word.length && startsWith(b, from, to, word);
}
