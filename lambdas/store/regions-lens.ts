/**
 * A region's view of the ledger: a {@link DocumentSender} that writes and reads the region's own
 * money items under today's keys, so the ledger (`ledger.ts`), top-ups, slice counts and load
 * reports run unchanged in every region while each region writes only items that carry its tag
 * (docs/regions.md, "every item has one writer"):
 *
 * - ledger table: a partition key `WS#<ws>[#S<i>]`, `KEY#<ws>#<key>[#S<j>]`, `MEMBER#<ws>#<m>` or
 *   `XFER#<ws>` becomes `WS#<ws><t>[#S<i>]`, `KEY#<ws>#<key><t>[#S<j>]`, `MEMBER#<ws>#<m><t>`,
 *   `XFER#<ws><t>` (`<t>` = `@<region>`, nothing in the home region); a top-up's credit marker
 *   (`CREDIT#…`), and the management API's statement lines (`STATEMENT#…`) and reference markers
 *   (`CREDITREF#…`), keep their keys (the configuration home writes them). Any other key written
 *   through the lens is refused ({@link RegionKeyError}): a new item family must say whose it is
 *   before a region writes it.
 * - usage table: a request's row put at admission (or made by a failed admission's release) gets `region` (so the aggregator and the
 *   sweeper know whose it is: replicated rows appear in every region's stream and index) and
 *   its expiry shard gets the tag (`X<n><t>`), so each region's sweeper reads only its own holds.
 *   A row's key does not change: request ids are unique, and readers by workspace stay as they are.
 *
 * What comes back (items, unprocessed keys) is shown under today's keys again, so the ledger's
 * bookkeeping (which read item is which) is the same as in one region.
 */
import {
  BatchGetCommand,
  GetCommand,
  TransactGetCommand,
  TransactWriteCommand,
  UpdateCommand,
  type BatchGetCommandOutput,
  type GetCommandOutput,
  type TransactGetCommandOutput,
  type TransactWriteCommandOutput,
  type UpdateCommandOutput,
} from '@aws-sdk/lib-dynamodb';
import type { DocumentSender } from '../adapters/dynamo-wire';
import type { Item } from './items';

/** Thrown when a key is written through a region's lens whose owner the lens does not know. */
export class RegionKeyError extends Error {
  override readonly name = 'RegionKeyError';
}

/** Which tables the lens maps, and the region it maps them for. */
export interface LensTables {
  readonly ledger: string;
  readonly usage: string;
  /** The region whose items the lens shows (written into each request row's `region`). */
  readonly region: string;
  /** `@<region>`, or `''` for the home region (its items keep today's keys). */
  readonly tag: string;
}

/** The partition key a region's own item has, from today's key (`tag` = `@<region>` or `''`). */
export function regionalPk(pk: string, sk: string, tag: string): string {
  if (tag === '') return pk;
  const parts = pk.split('#');
  const head = parts[0];
  if (head === 'WS' && parts.length >= 2 && parts.length <= 3 && (parts.length === 2 || /^S\d+$/.test(parts[2] ?? ''))) {
    // A top-up's reference marker, and the management API's statement lines and reference
    // markers, are the configuration home's, under the workspace's own key: each is written once
    // (its key is unique, or conditioned on being new), by whichever region is the home then.
    if (sk.startsWith('CREDIT#') || sk.startsWith('STATEMENT#') || sk.startsWith('CREDITREF#')) return pk;
    parts[1] = `${parts[1]}${tag}`;
    return parts.join('#');
  }
  if (head === 'XFER' && parts.length === 2) return `${pk}${tag}`;
  if ((head === 'KEY' && (parts.length === 3 || (parts.length === 4 && /^S\d+$/.test(parts[3] ?? '')))) || (head === 'MEMBER' && parts.length === 3)) {
    parts[2] = `${parts[2]}${tag}`;
    return parts.join('#');
  }
  throw new RegionKeyError(`no region owns ledger items under ${head ?? '?'}#…; say whose they are in regions-lens.ts before writing them from a region`);
}

/** Today's key of a region's item (the inverse of {@link regionalPk}). */
export function plainPk(pk: string, tag: string): string {
  return tag === '' ? pk : pk.split(tag).join('');
}

type Key = Record<string, unknown>;

/** Wraps a sender so that a region writes and reads only its own ledger items (module comment). */
export class RegionLens implements DocumentSender {
  constructor(
    private readonly inner: DocumentSender,
    readonly tables: LensTables,
  ) {}

  private key(table: string | undefined, key: Key | undefined): Key | undefined {
    if (key === undefined || table !== this.tables.ledger || this.tables.tag === '') return key;
    return { ...key, pk: regionalPk(String(key.pk), String(key.sk), this.tables.tag) };
  }

  private item(table: string | undefined, item: Item | undefined): Item | undefined {
    if (item === undefined) return item;
    if (table === this.tables.usage) {
      const shard = item.expiryShard;
      return { ...item, region: this.tables.region, ...(typeof shard === 'string' ? { expiryShard: `${shard}${this.tables.tag}` } : {}) };
    }
    return this.key(table, item) as Item | undefined;
  }

  /**
   * A single update of a request row (a failed admission's release may create the row) carries the
   * region too, so every row a region makes says whose it is. Its expression gains one SET.
   */
  private stampRow(input: UpdateCommand['input']): Partial<UpdateCommand['input']> {
    if (input.TableName !== this.tables.usage || input.UpdateExpression === undefined) return {};
    const set = '#lensRegion = :lensRegion';
    const expr = input.UpdateExpression.trimStart();
    return {
      UpdateExpression: expr.startsWith('SET ') ? `SET ${set}, ${expr.slice(4)}` : `SET ${set} ${expr}`,
      ExpressionAttributeNames: { ...input.ExpressionAttributeNames, '#lensRegion': 'region' },
      ExpressionAttributeValues: { ...input.ExpressionAttributeValues, ':lensRegion': this.tables.region },
    };
  }

  private back(table: string | undefined, item: Item | undefined): Item | undefined {
    if (item === undefined || table !== this.tables.ledger || this.tables.tag === '' || typeof item.pk !== 'string') return item;
    return { ...item, pk: plainPk(item.pk, this.tables.tag) };
  }

  send(command: TransactWriteCommand): Promise<TransactWriteCommandOutput>;
  send(command: UpdateCommand): Promise<UpdateCommandOutput>;
  send(command: GetCommand): Promise<GetCommandOutput>;
  send(command: BatchGetCommand): Promise<BatchGetCommandOutput>;
  send(command: TransactGetCommand): Promise<TransactGetCommandOutput>;
  async send(command: TransactWriteCommand | UpdateCommand | GetCommand | BatchGetCommand | TransactGetCommand): Promise<unknown> {
    if (command instanceof UpdateCommand) {
      const { input } = command;
      const out = await this.inner.send(new UpdateCommand({ ...input, Key: this.key(input.TableName, input.Key) ?? {}, ...this.stampRow(input) }));
      return { ...out, ...(out.Attributes !== undefined ? { Attributes: this.back(input.TableName, out.Attributes) } : {}) };
    }
    if (command instanceof GetCommand) {
      const { input } = command;
      const out = await this.inner.send(new GetCommand({ ...input, Key: this.key(input.TableName, input.Key) ?? {} }));
      return { ...out, Item: this.back(input.TableName, out.Item) };
    }
    if (command instanceof BatchGetCommand) {
      const request = command.input.RequestItems ?? {};
      const mapped: typeof request = {};
      for (const [table, ask] of Object.entries(request)) mapped[table] = { ...ask, Keys: (ask.Keys ?? []).map((k) => this.key(table, k) ?? k) };
      const out = await this.inner.send(new BatchGetCommand({ ...command.input, RequestItems: mapped }));
      const responses: Record<string, Item[]> = {};
      for (const [table, items] of Object.entries(out.Responses ?? {})) responses[table] = items.map((i) => this.back(table, i) ?? i);
      const unprocessed: typeof request = {};
      for (const [table, ask] of Object.entries(out.UnprocessedKeys ?? {})) unprocessed[table] = { ...ask, Keys: (ask.Keys ?? []).map((k) => this.back(table, k) ?? k) };
      return { ...out, Responses: responses, UnprocessedKeys: unprocessed };
    }
    if (command instanceof TransactGetCommand) {
      const items = (command.input.TransactItems ?? []).map((t) => (t.Get === undefined ? t : { Get: { ...t.Get, Key: this.key(t.Get.TableName, t.Get.Key) ?? {} } }));
      const out = await this.inner.send(new TransactGetCommand({ ...command.input, TransactItems: items }));
      const tablesOf = items.map((t) => t.Get?.TableName);
      return { ...out, Responses: (out.Responses ?? []).map((r, i) => ({ ...r, Item: this.back(tablesOf[i], r.Item) })) };
    }
    const items = (command.input.TransactItems ?? []).map((t) => {
      if (t.Put !== undefined) return { ...t, Put: { ...t.Put, Item: this.item(t.Put.TableName, t.Put.Item) ?? {} } };
      if (t.Update !== undefined) return { ...t, Update: { ...t.Update, Key: this.key(t.Update.TableName, t.Update.Key) ?? {} } };
      if (t.Delete !== undefined) return { ...t, Delete: { ...t.Delete, Key: this.key(t.Delete.TableName, t.Delete.Key) ?? {} } };
      if (t.ConditionCheck !== undefined) return { ...t, ConditionCheck: { ...t.ConditionCheck, Key: this.key(t.ConditionCheck.TableName, t.ConditionCheck.Key) ?? {} } };
      return t;
    });
    return this.inner.send(new TransactWriteCommand({ ...command.input, TransactItems: items }));
  }
}
