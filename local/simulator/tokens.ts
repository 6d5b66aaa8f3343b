/**
 * Deterministic "tokens": the simulator's unit of text. A token is a word (with its leading
 * whitespace) or, for JSON, a short fragment. Nothing here tokenizes like a real model; it only
 * needs to be stable, cheap and countable, so tests can predict every byte.
 */

/** A sequence of tokens read by index, so a million-token reply never exists as one string. */
export interface TokenSeq {
  readonly length: number;
  at(index: number): string;
}

/** The words generated replies cycle through. */
export const WORDS: readonly string[] = Object.freeze([
  'alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf', 'hotel',
  'india', 'juliett', 'kilo', 'lima', 'mike', 'november', 'oscar', 'papa',
]);

/** `count` generated words: "alpha bravo charlie ...". */
export function wordSeq(count: number): TokenSeq {
  return {
    length: count,
    at: (i) => (i === 0 ? WORDS[0] : ' ' + WORDS[i % WORDS.length]),
  };
}

/** A sequence over pieces already in memory. */
export function arraySeq(pieces: readonly string[]): TokenSeq {
  return { length: pieces.length, at: (i) => pieces[i] ?? '' };
}

/** The first `count` tokens of `seq`. */
export function takeSeq(seq: TokenSeq, count: number): TokenSeq {
  return count >= seq.length ? seq : { length: count, at: (i) => seq.at(i) };
}

/** The whole text; only for replies whose size is known to be reasonable or unavoidable. */
export function joinSeq(seq: TokenSeq): string {
  let out = '';
  for (let i = 0; i < seq.length; i++) out += seq.at(i);
  return out;
}

/**
 * Splits text into word tokens, each keeping the whitespace before it (trailing whitespace
 * stays on the last word), so the pieces join back exactly and there is one per word.
 */
export function splitWords(text: string): string[] {
  return text.split(/(?<=\S)(?=\s+\S)/).filter((p) => p.length > 0);
}

/** Splits a string into fragments of `size` code points (JSON arguments are streamed this way). */
export function fragments(text: string, size = 4): string[] {
  const points = Array.from(text);
  const out: string[] = [];
  for (let i = 0; i < points.length; i += size) out.push(points.slice(i, i + size).join(''));
  return out;
}

function isSpace(code: number): boolean {
  return code === 32 || (code >= 9 && code <= 13);
}

/** Whitespace-separated words in `text`, counted without allocating. */
export function countWords(text: string): number {
  let count = 0;
  let inWord = false;
  for (let i = 0; i < text.length; i++) {
    const space = isSpace(text.charCodeAt(i));
    if (!space && !inWord) count++;
    inWord = !space;
  }
  return count;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const MAX_SAMPLE_DEPTH = 6;

/**
 * A deterministic value matching a JSON Schema well enough for tool arguments and structured
 * output: every declared property filled by type. Not a validator; unknown shapes get "sample".
 */
export function sampleFromSchema(schema: unknown, depth = 0): unknown {
  if (!isRecord(schema) || depth > MAX_SAMPLE_DEPTH) return 'sample';
  if (schema.const !== undefined) return schema.const;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0];
  for (const key of ['anyOf', 'oneOf', 'allOf'] as const) {
    const options = schema[key];
    if (Array.isArray(options) && options.length > 0) {
      const first = options.find((o) => !(isRecord(o) && o.type === 'null')) ?? options[0];
      return sampleFromSchema(first, depth + 1);
    }
  }
  const declared = schema.type;
  const type = Array.isArray(declared) ? declared.find((t) => t !== 'null') : declared;
  if (type === 'object' || (type === undefined && isRecord(schema.properties))) {
    const out: Record<string, unknown> = {};
    const properties = isRecord(schema.properties) ? schema.properties : {};
    for (const [name, sub] of Object.entries(properties)) out[name] = sampleFromSchema(sub, depth + 1);
    return out;
  }
  switch (type) {
    case 'array':
      return [sampleFromSchema(schema.items, depth + 1)];
    case 'integer':
    case 'number':
      return typeof schema.minimum === 'number' ? schema.minimum : 1;
    case 'boolean':
      return true;
    case 'null':
      return null;
    default:
      return 'sample';
  }
}
