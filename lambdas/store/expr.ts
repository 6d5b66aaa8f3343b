/**
 * A small builder for update and condition expressions, so each item's write is assembled from
 * named pieces (each with its reason at the call site) without hand-numbering placeholders.
 */
import { memoized } from '../shared/memo';

/** The expression parts of one `Update`, as the document client takes them. */
export interface BuiltUpdate {
  readonly UpdateExpression: string;
  readonly ConditionExpression?: string;
  readonly ExpressionAttributeNames?: Record<string, string>;
  readonly ExpressionAttributeValues?: Record<string, unknown>;
}

/** Whether a character code can continue a placeholder (`a` and `v` make `#` or `:`, then letters, digits and underscores). */
function continues(code: number): boolean {
  return (code >= 48 && code <= 57) || (code >= 65 && code <= 90) || (code >= 97 && code <= 122) || code === 95;
}

/** Whether `key` appears in `text` as a whole placeholder (`:v1` is not in `:v10`). */
function appears(text: string, key: string): boolean {
  for (let at = text.indexOf(key); at !== -1; at = text.indexOf(key, at + 1)) {
    if (!continues(text.charCodeAt(at + key.length))) return true;
  }
  return false;
}

/**
 * The entries of `all` whose key appears in `text`, in their order, as an object; undefined when
 * none does. Built by `Object.fromEntries`, which keeps an object of many properties in V8's fast
 * layout: one filled a property at a time by computed keys turns into a hash table past about 20
 * (an admission's slice update names 14 attributes and 25 values), and each of those was built,
 * then walked again by the request's JSON writer, as a dictionary on every request.
 */
function used<V>(text: string, all: Iterable<readonly [string, V]>): Record<string, V> | undefined {
  let kept: [string, V][] | undefined;
  for (const entry of all) {
    if (appears(text, entry[0])) (kept ??= []).push(entry as [string, V]);
  }
  return kept === undefined ? undefined : Object.fromEntries(kept);
}

/**
 * Placeholders already spelled, by attribute name: an admission and a settlement name the same
 * few dozen attributes on every request, so each is spelled once per process.
 */
const nameKey = memoized((name) => `#${name.replace(/[^A-Za-z0-9]/g, (c) => `_${c.charCodeAt(0).toString(16)}_`)}`);

/** `:v1`, `:v2`, … spelled once per process. */
const VALUE_KEYS: string[] = [];

function valueKey(n: number): string {
  return (VALUE_KEYS[n] ??= `:v${n}`);
}

/** Collects SET, ADD and REMOVE clauses and ANDed conditions with generated placeholders. */
export class UpdateBuilder {
  private readonly sets: string[] = [];
  private readonly adds: string[] = [];
  private readonly removes: string[] = [];
  private readonly conds: string[] = [];
  /** By placeholder, in the order first named (a name given twice keeps its place). */
  private readonly names = new Map<string, string>();
  /** In order: each value has a placeholder of its own. */
  private readonly values: [string, unknown][] = [];
  private n = 0;

  /** A placeholder for a value. */
  v(value: unknown): string {
    this.n += 1;
    const key = valueKey(this.n);
    this.values.push([key, value]);
    return key;
  }

  /**
   * A placeholder for an attribute name (every name goes through here: `ttl` and others are
   * reserved). Any character a placeholder cannot hold is spelled by its code between
   * underscores (an underscore too), so two names never share a placeholder (the slice item's
   * one-character slot names `-` and `_` among them).
   */
  a(name: string): string {
    const key = nameKey(name);
    this.names.set(key, name);
    return key;
  }

  set(clause: string): this {
    this.sets.push(clause);
    return this;
  }

  add(name: string, amount: number): this {
    this.adds.push(`${this.a(name)} ${this.v(amount)}`);
    return this;
  }

  remove(name: string): this {
    this.removes.push(this.a(name));
    return this;
  }

  /** Attributes to remove named literally (comma-separated, names no placeholder needs: letters and digits, no reserved word). */
  removeNamed(names: string): this {
    this.removes.push(names);
    return this;
  }

  /** One more condition, ANDed with the rest. */
  when(condition: string): this {
    this.conds.push(`(${condition})`);
    return this;
  }

  build(): BuiltUpdate {
    const parts: string[] = [];
    if (this.sets.length > 0) parts.push(`SET ${this.sets.join(', ')}`);
    if (this.adds.length > 0) parts.push(`ADD ${this.adds.join(', ')}`);
    if (this.removes.length > 0) parts.push(`REMOVE ${this.removes.join(', ')}`);
    const update = parts.join(' ');
    const condition = this.conds.join(' AND ');
    // DynamoDB refuses placeholders the expressions do not use: keep only those that appear. Each
    // placeholder is looked for with indexOf, no regular expression and no list of matches (a
    // regular expression per placeholder cost about 15 us per update, on every admission and
    // settlement; the list of every match, its Set and the entries' arrays that replaced it were
    // about a tenth of the bytes a request allocates).
    const text = condition === '' ? update : `${update} ${condition}`;
    const names = used(text, this.names);
    const values = used(text, this.values);
    return {
      UpdateExpression: update,
      ...(condition !== '' ? { ConditionExpression: condition } : {}),
      ...(names !== undefined ? { ExpressionAttributeNames: names } : {}),
      ...(values !== undefined ? { ExpressionAttributeValues: values } : {}),
    };
  }
}
