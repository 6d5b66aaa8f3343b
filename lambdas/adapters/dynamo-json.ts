/**
 * The document client's commands written straight to DynamoDB's JSON protocol.
 *
 * The gateway's commands carry plain JavaScript values (strings, safe integers, booleans, null,
 * lists and maps). `@aws-sdk/util-dynamodb`'s `marshall` turns each into a tree of attribute-value
 * objects, which `JSON.stringify` then walks again: two passes and an object per value, about a
 * third of a TransactWriteItems' cost in this client (docs/gateway.md). Here those values are
 * written to JSON in one pass, with no tree in between.
 *
 * The output is byte for byte what `JSON.stringify` makes of the command with `marshall` (with
 * `removeUndefinedValues`) applied to `Key`, `Item` and `ExpressionAttributeValues`: the same keys
 * in the same order, the same numbers, the same escapes. Anything else a document may hold (a
 * `Set`, binary data, a `BigInt`, a `NumberValue`, a number `marshall` refuses, a class instance)
 * sends that whole attribute map through `marshall` itself, so its behaviour, errors included, is
 * the library's. `test/unit/dynamo-json.test.ts` holds the equality over generated documents.
 */
import { marshall, type NativeAttributeValue } from '@aws-sdk/util-dynamodb';
import { memoized } from '../shared/memo';

type Json = Record<string, unknown>;

const MARSHAL = { removeUndefinedValues: true } as const;
/** The fields of a request entry whose values are documents, written as attribute values. */
const DOCUMENT_FIELDS = new Set(['Key', 'Item', 'ExpressionAttributeValues']);

/** What `JSON.stringify` escapes in a string: a quote, a backslash, a control character; and any surrogate (a lone one is escaped). */
const ESCAPED = /["\\\u0000-\u001f\ud800-\udfff]/;

/**
 * `JSON.stringify(text)`: the text between quotes when nothing in it is escaped (nearly every
 * string a command holds: keys, ids, expressions, models). `JSON.stringify` of a short string was
 * the largest part of writing a command (about 130,000 instructions a request, callgrind).
 */
function quoted(text: string): string {
  return ESCAPED.test(text) ? JSON.stringify(text) : `"${text}"`;
}

/**
 * A name as a JSON string, remembered: a command's keys (attribute names, placeholders, the
 * protocol's fields) are the same few dozen on every request.
 */
const quotedName = memoized(quoted);

/** One value as an attribute value's JSON, or undefined when it is not a plain value (see the module comment). */
function attributeJson(value: unknown): string | undefined {
  switch (typeof value) {
    case 'string':
      return `{"S":${quoted(value)}}`;
    case 'number':
      // marshall refuses NaN, the infinities and unsafe integers; those go to it for its error.
      return Number.isFinite(value) && value <= Number.MAX_SAFE_INTEGER && value >= Number.MIN_SAFE_INTEGER ? `{"N":"${String(value)}"}` : undefined;
    case 'boolean':
      return value ? '{"BOOL":true}' : '{"BOOL":false}';
    case 'object': {
      if (value === null) return '{"NULL":true}';
      if (Array.isArray(value)) {
        const list = listJson(value);
        return list === undefined ? undefined : `{"L":${list}}`;
      }
      const map = mapJson(value);
      return map === undefined ? undefined : `{"M":${map}}`;
    }
    default:
      return undefined;
  }
}

/** A list's elements: functions and undefined left out, as `marshall` does with `removeUndefinedValues`. */
function listJson(list: readonly unknown[]): string | undefined {
  let out = '[';
  let sep = '';
  for (let i = 0; i < list.length; i += 1) {
    const item = list[i];
    if (item === undefined || typeof item === 'function') continue;
    const json = attributeJson(item);
    if (json === undefined) return undefined;
    out += sep + json;
    sep = ',';
  }
  return `${out}]`;
}

/**
 * A plain object's enumerable properties (in `for…in` order, as `marshall` reads them), functions
 * and undefined left out; undefined for anything that is not a plain object.
 */
function mapJson(value: object): string | undefined {
  const ctor = (value as { constructor?: unknown }).constructor;
  if (ctor !== Object && ctor !== undefined) return undefined;
  let out = '{';
  let sep = '';
  for (const key in value) {
    const item = (value as Record<string, unknown>)[key];
    if (item === undefined || typeof item === 'function') continue;
    // marshall's own `map[key] = …` would set a prototype here, not a property.
    if (key === '__proto__') return undefined;
    const json = attributeJson(item);
    if (json === undefined) return undefined;
    out += `${sep}${quotedName(key)}:${json}`;
    sep = ',';
  }
  return `${out}}`;
}

/** `JSON.stringify(marshall(document, { removeUndefinedValues: true }))`, in one pass when the document allows. */
export function attributeMapJson(document: unknown): string {
  const fast = typeof document === 'object' && document !== null && !Array.isArray(document) ? mapJson(document) : undefined;
  return fast ?? JSON.stringify(marshall(document as Record<string, NativeAttributeValue>, MARSHAL));
}

/**
 * The JSON of frozen plain objects of plain values, written once: the store's expression builder
 * hands every command of one expression the same frozen `ExpressionAttributeNames` (14 to 23 names
 * on each of an admission's and a settlement's updates), which nothing can change.
 */
const FROZEN_JSON = new WeakMap<object, string>();

/** Whether `JSON.stringify(value)` is the same for as long as `value` lives: frozen, plain, and holding only data properties of plain values. */
function unchanging(value: object): boolean {
  const proto: unknown = Object.getPrototypeOf(value);
  if (!Object.isFrozen(value) || (proto !== Object.prototype && proto !== null)) return false;
  return Object.values(Object.getOwnPropertyDescriptors(value)).every(
    (d) => 'value' in d && (d.value === null || (typeof d.value !== 'object' && typeof d.value !== 'function')),
  );
}

/** A field that is not a document, as `JSON.stringify` writes it. */
function fieldJson(value: unknown): string | undefined {
  if (typeof value === 'string') return quoted(value);
  // Object.isFrozen first: false at once for any object that can still take a property.
  if (typeof value !== 'object' || value === null || !Object.isFrozen(value)) return JSON.stringify(value);
  let json = FROZEN_JSON.get(value);
  if (json === undefined) {
    json = JSON.stringify(value);
    if (unchanging(value)) FROZEN_JSON.set(value, json);
  }
  return json;
}

/**
 * A request entry (`Get`, `Put`, `Update`, `Delete`, `ConditionCheck`, or an `UpdateItem`'s whole
 * input) as JSON: its documents as attribute values, every other field as `JSON.stringify` writes it.
 */
export function entryJson(entry: Json): string {
  let out = '{';
  let sep = '';
  for (const key of Object.keys(entry)) {
    const value = entry[key];
    const json = value !== undefined && DOCUMENT_FIELDS.has(key) ? attributeMapJson(value) : fieldJson(value);
    if (json === undefined) continue;
    out += `${sep}${quotedName(key)}:${json}`;
    sep = ',';
  }
  return `${out}}`;
}

/** `TransactItems`: each item's defined entries, in order. */
function transactItemsJson(items: readonly Json[]): string {
  let out = '[';
  for (let i = 0; i < items.length; i += 1) {
    const item = items[i] as Json;
    let json = '{';
    let sep = '';
    for (const kind of Object.keys(item)) {
      const entry = item[kind];
      if (entry === undefined) continue;
      json += `${sep}${quotedName(kind)}:${entryJson(entry as Json)}`;
      sep = ',';
    }
    out += `${i === 0 ? '' : ','}${json}}`;
  }
  return `${out}]`;
}

/**
 * A TransactWriteItems body: the input's fields in their order, `TransactItems` written as
 * attribute values and `ClientRequestToken` set to `token` (in its place, or last when the input
 * had none), exactly as `JSON.stringify({ ...input, TransactItems, ClientRequestToken: token })`.
 */
export function transactWriteJson(input: Json, token: string): string {
  let out = '{';
  let sep = '';
  let items = false;
  let tokenWritten = false;
  const field = (key: string, json: string | undefined): void => {
    if (json === undefined) return;
    out += `${sep}${quotedName(key)}:${json}`;
    sep = ',';
  };
  for (const key of Object.keys(input)) {
    if (key === 'TransactItems') {
      items = true;
      field(key, transactItemsJson((input.TransactItems as Json[] | undefined) ?? []));
    } else if (key === 'ClientRequestToken') {
      tokenWritten = true;
      field(key, quoted(token));
    } else {
      field(key, JSON.stringify(input[key]));
    }
  }
  if (!items) field('TransactItems', '[]');
  if (!tokenWritten) field('ClientRequestToken', quoted(token));
  return `${out}}`;
}
