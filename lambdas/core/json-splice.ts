/**
 * Byte-preserving edits of a JSON object's top-level fields. The body is forwarded as sent, so
 * the few rewrites Sluice makes splice the text instead of re-serialising the whole document:
 * every other byte (number spellings, key order, whitespace, huge integers) reaches the provider
 * exactly as the client wrote it.
 */

/** Index just past the JSON string starting at `i` (which is a `"`). */
function skipString(text: string, i: number): number {
  let j = i + 1;
  for (;;) {
    const c = text.charCodeAt(j);
    if (Number.isNaN(c)) throw new SyntaxError('unterminated string');
    if (c === 0x5c) j += 2;
    else if (c === 0x22) return j + 1;
    else j += 1;
  }
}

/** Index just past the JSON value starting at `i` (whitespace already skipped). */
function skipValue(text: string, i: number): number {
  const c = text[i];
  if (c === '"') return skipString(text, i);
  if (c === '{' || c === '[') {
    let depth = 0;
    let j = i;
    while (j < text.length) {
      const ch = text[j];
      if (ch === '"') {
        j = skipString(text, j);
        continue;
      }
      if (ch === '{' || ch === '[') depth += 1;
      else if (ch === '}' || ch === ']') {
        depth -= 1;
        if (depth === 0) return j + 1;
      }
      j += 1;
    }
    throw new SyntaxError('unterminated container');
  }
  let j = i;
  while (j < text.length && !/[\s,}\]]/.test(text[j] as string)) j += 1;
  return j;
}

function skipWs(text: string, i: number): number {
  let j = i;
  while (j < text.length && /\s/.test(text[j] as string)) j += 1;
  return j;
}

/** Where every occurrence of a top-level field's value sits, `[start, end)`, in order. */
export function topLevelValueRanges(text: string, key: string): (readonly [number, number])[] {
  let i = skipWs(text, 0);
  if (text[i] !== '{') return [];
  i = skipWs(text, i + 1);
  const found: (readonly [number, number])[] = [];
  while (i < text.length && text[i] !== '}') {
    const keyEnd = skipString(text, i);
    const name: unknown = JSON.parse(text.slice(i, keyEnd));
    i = skipWs(text, keyEnd);
    i = skipWs(text, i + 1); // past ':'
    const valueEnd = skipValue(text, i);
    if (name === key) found.push([i, valueEnd]);
    i = skipWs(text, valueEnd);
    if (text[i] === ',') i = skipWs(text, i + 1);
  }
  return found;
}

/** Where a top-level field's value sits (the last occurrence, which JSON.parse keeps), or undefined. */
export function topLevelValueRange(text: string, key: string): readonly [number, number] | undefined {
  return topLevelValueRanges(text, key).at(-1);
}

/**
 * Replaces a top-level field's value with already-serialised JSON, or appends the field. Every
 * duplicate of the key is replaced, so a provider whose parser keeps the first one reads the same
 * value as one that keeps the last.
 */
export function setTopLevel(text: string, key: string, json: string): string {
  const ranges = topLevelValueRanges(text, key);
  if (ranges.length > 0) {
    let out = text;
    for (const [start, end] of [...ranges].reverse()) out = out.slice(0, start) + json + out.slice(end);
    return out;
  }
  const close = text.lastIndexOf('}');
  const before = text.slice(0, close).trimEnd();
  const empty = before.endsWith('{');
  return `${before}${empty ? '' : ','}${JSON.stringify(key)}:${json}${text.slice(close)}`;
}
