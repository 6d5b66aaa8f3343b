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

/**
 * The placeholders a text holds: each `#` or `:` and the name characters after it (so `:v1` is
 * not in `:v10`). A text holds the same placeholders whoever built it, so this is worked out once
 * per text and kept (see `build`).
 */
interface Shape {
  /** The names' placeholders, each once, in the order the text first names them. */
  readonly nameKeys: readonly string[];
  /** The values' placeholders by number (`:v1` is 1), ascending. */
  readonly valueNumbers: readonly number[];
  /**
   * `ExpressionAttributeNames` for a builder that has every name of `nameKeys` (a placeholder spells
   * its name, so the object is the same for all of them), frozen: every command of this text
   * carries this one object. Made by the first such builder, in its order.
   */
  names?: Readonly<Record<string, string>>;
}

/** What `text` holds, read once: placeholders are `#` or `:` then name characters, as `a()` and `v()` spell them. */
function shapeOf(text: string): Shape {
  const nameKeys: string[] = [];
  const valueNumbers: number[] = [];
  for (let at = 0; at < text.length; at += 1) {
    const code = text.charCodeAt(at);
    if (code !== 35 && code !== 58) continue; // '#', ':'
    let end = at + 1;
    while (end < text.length && continues(text.charCodeAt(end))) end += 1;
    const key = text.slice(at, end);
    if (code === 35 && !nameKeys.includes(key)) nameKeys.push(key);
    if (code === 58 && /^:v[1-9][0-9]*$/.test(key) && !valueNumbers.includes(Number(key.slice(2)))) valueNumbers.push(Number(key.slice(2)));
    at = end - 1;
  }
  return { nameKeys, valueNumbers: valueNumbers.sort((x, y) => x - y) };
}

/**
 * Shapes by text. An admission and a settlement write the same few texts on every request (the
 * slice debit one per spend-rate slot name); past the bound all are dropped at once.
 */
const SHAPES = new Map<string, Shape>();
const SHAPES_MAX = 1_024;

/**
 * The entries of `names` whose key the text holds, in their order, as an object; undefined when
 * none is. Built by `Object.fromEntries`, which keeps an object of many properties in V8's fast
 * layout: one filled a property at a time by computed keys turns into a hash table past about 20
 * (an admission's slice update names 14 attributes and 25 values).
 */
function namesIn(shape: Shape, names: ReadonlyMap<string, string>): Record<string, string> | undefined {
  const kept: [string, string][] = [];
  for (const entry of names) if (shape.nameKeys.includes(entry[0])) kept.push(entry);
  return kept.length === 0 ? undefined : Object.fromEntries(kept);
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

  /** `SET #name = :vN`: one attribute to one value. */
  setTo(name: string, value: unknown): this {
    return this.set(`${this.a(name)} = ${this.v(value)}`);
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
    // DynamoDB refuses placeholders the expressions do not use: keep only those that appear. The
    // text's placeholders are read once per text (the same few texts come on every request): each
    // looked up in the text on every build was about 40 us a request (74 placeholders over four
    // texts of 100 to 700 characters); now it is a lookup of the text and of its names.
    const text = condition === '' ? update : `${update} ${condition}`;
    let shape = SHAPES.get(text);
    if (shape === undefined) {
      shape = shapeOf(text);
      if (SHAPES.size >= SHAPES_MAX) SHAPES.clear();
      SHAPES.set(text, shape);
    }
    // The names: the text's one frozen object when this builder named every placeholder in it (it
    // always does: every name goes through a()); else only those it named, as a fresh object.
    let names: Record<string, string> | undefined;
    if (shape.nameKeys.every((key) => this.names.has(key))) {
      if (shape.nameKeys.length > 0) names = shape.names ??= Object.freeze(namesIn(shape, this.names) as Record<string, string>);
    } else names = namesIn(shape, this.names);
    // The values: those of this builder's the text uses (a text spelled by hand may name more).
    const numbers = shape.valueNumbers;
    let values: Record<string, unknown> | undefined;
    if (numbers.length > 0) {
      const all = this.values;
      if (numbers.length === all.length && numbers[numbers.length - 1] === all.length) values = Object.fromEntries(all);
      else {
        const kept: [string, unknown][] = [];
        for (const n of numbers) if (n <= all.length) kept.push(all[n - 1] as [string, unknown]);
        if (kept.length > 0) values = Object.fromEntries(kept);
      }
    }
    return {
      UpdateExpression: update,
      ...(condition !== '' ? { ConditionExpression: condition } : {}),
      ...(names !== undefined ? { ExpressionAttributeNames: names } : {}),
      ...(values !== undefined ? { ExpressionAttributeValues: values } : {}),
    };
  }
}
