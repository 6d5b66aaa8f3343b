/**
 * Item images for the local replicator, pure. The replicator keeps images in the shape a stream
 * record carries them to Lambda (binary as base64 text), so its state is plain JSON that can be
 * written to a file; these functions turn them into the SDK's shape for a write and back, and give
 * an image a fingerprint that two equal items always share.
 */
import type { AttributeValue as SdkValue } from '@aws-sdk/client-dynamodb';
import type { AttributeValue as JsonValue } from 'aws-lambda';

/** An item (or a key) as JSON: attribute values as a stream record hands them to Lambda. */
export type JsonImage = Record<string, JsonValue>;

/** An item in the SDK's shape, for PutItem and DeleteItem. */
export type SdkImage = Record<string, SdkValue>;

/** The fingerprint of an item that does not exist (deleted, or never written). */
export const ABSENT = '-';

/**
 * A string equal for two images exactly when the items are equal: attribute names sorted, set
 * members sorted (DynamoDB keeps no order in a set), lists in order, every value with its type.
 */
export function fingerprint(image: JsonImage | null | undefined): string {
  if (image === null || image === undefined) return ABSENT;
  return canonicalMap(image);
}

function canonicalMap(map: Readonly<Record<string, JsonValue>>): string {
  const names = Object.keys(map).sort();
  return `{${names.map((name) => `${JSON.stringify(name)}:${canonical(map[name] as JsonValue)}`).join(',')}}`;
}

function canonical(value: JsonValue): string {
  if (value.S !== undefined) return `S${JSON.stringify(value.S)}`;
  if (value.N !== undefined) return `N${value.N}`;
  if (value.B !== undefined) return `B${value.B}`;
  if (value.BOOL !== undefined) return value.BOOL ? 'T' : 'F';
  if (value.NULL !== undefined) return 'Z';
  if (value.SS !== undefined) return `SS${JSON.stringify([...value.SS].sort())}`;
  if (value.NS !== undefined) return `NS${JSON.stringify([...value.NS].sort())}`;
  if (value.BS !== undefined) return `BS${JSON.stringify([...value.BS].sort())}`;
  if (value.L !== undefined) return `L[${value.L.map(canonical).join(',')}]`;
  if (value.M !== undefined) return `M${canonicalMap(value.M)}`;
  throw new Error(`unsupported attribute value: ${JSON.stringify(Object.keys(value))}`);
}

/** A JSON image as the SDK writes it. */
export function toSdkImage(image: JsonImage): SdkImage {
  const out: SdkImage = {};
  for (const [name, value] of Object.entries(image)) out[name] = toSdkValue(value);
  return out;
}

function toSdkValue(value: JsonValue): SdkValue {
  const bytes = (text: string): Uint8Array => new Uint8Array(Buffer.from(text, 'base64'));
  if (value.S !== undefined) return { S: value.S };
  if (value.N !== undefined) return { N: value.N };
  if (value.B !== undefined) return { B: bytes(value.B) };
  if (value.BOOL !== undefined) return { BOOL: value.BOOL };
  if (value.NULL !== undefined) return { NULL: value.NULL };
  if (value.SS !== undefined) return { SS: [...value.SS] };
  if (value.NS !== undefined) return { NS: [...value.NS] };
  if (value.BS !== undefined) return { BS: value.BS.map(bytes) };
  if (value.L !== undefined) return { L: value.L.map(toSdkValue) };
  if (value.M !== undefined) return { M: toSdkImage(value.M) };
  throw new Error(`unsupported attribute value: ${JSON.stringify(Object.keys(value))}`);
}

/** An SDK image (a write's ALL_OLD) as JSON; undefined stays undefined (no item). */
export function fromSdkImage(image: SdkImage | undefined): JsonImage | undefined {
  if (image === undefined) return undefined;
  const out: JsonImage = {};
  for (const [name, value] of Object.entries(image)) out[name] = fromSdkValue(value);
  return out;
}

function fromSdkValue(value: SdkValue): JsonValue {
  const text = (bytes: Uint8Array): string => Buffer.from(bytes).toString('base64');
  if (value.S !== undefined) return { S: value.S };
  if (value.N !== undefined) return { N: value.N };
  if (value.B !== undefined) return { B: text(value.B) };
  if (value.BOOL !== undefined) return { BOOL: value.BOOL };
  if (value.NULL !== undefined) return { NULL: value.NULL };
  if (value.SS !== undefined) return { SS: [...value.SS] };
  if (value.NS !== undefined) return { NS: [...value.NS] };
  if (value.BS !== undefined) return { BS: value.BS.map(text) };
  if (value.L !== undefined) return { L: value.L.map(fromSdkValue) };
  if (value.M !== undefined) return { M: fromSdkImage(value.M) ?? {} };
  throw new Error(`unsupported attribute value: ${JSON.stringify(Object.keys(value))}`);
}
