/**
 * A tap on DynamoDB's HTTP calls: a recording pass-through in front of DynamoDB Local. The
 * gateway (its `DynamoWire`) and the aggregator (its SDK client) are pointed at it through their
 * ordinary endpoint setting, so nothing is added to the production adapters and the tap sees
 * whatever key layout the store has, from the bytes on the wire.
 *
 * In `map` mode every write (PutItem, UpdateItem, DeleteItem, TransactWriteItems,
 * BatchWriteItem) is recorded item by item with its image before and after: the image before
 * from the tap's own record of what it saw written, else read from DynamoDB Local before the call
 * is passed on; the image after from the request (a put) or read back once the call succeeded (an
 * update). The tap also asks for `ReturnConsumedCapacity` (DynamoDB Local reports it; it does not
 * check signatures) and keeps what a single-item call reports. The extra reads make this mode slow:
 * its loads are for counting, not timing. In `count` mode calls are only counted, with the
 * cancellations of transactions by conflict, so throughput runs through the same hop. With
 * `locks` set (either mode), the tap also cancels and refuses calls as DynamoDB would for
 * transaction conflicts, which DynamoDB Local never does (`dynamo-conflicts.ts`).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { TABLES, type TableName, type TableSchema } from '../lambdas/shared/schema';
import { cancelledForConflict, writeConflict, type ItemLocks } from './dynamo-conflicts';
import { itemSize, readUnits, writeUnits, type ItemWrite, type ReadCall, type WireItem } from './store-map-model';

/** What the tap does with the calls it passes on. */
export type TapMode = 'map' | 'count';

/** Calls counted since the last {@link WriteTap.take}. */
export interface CallCounts {
  /** Successful calls by operation (`TransactWriteItems`, `GetItem`, …), per source. */
  readonly calls: Record<string, number>;
  /** Transactions cancelled, and of those, cancelled by a `TransactionConflict`, per source. */
  readonly cancelled: Record<string, number>;
  readonly conflicts: Record<string, number>;
  /** With conflicts on: TransactGetItems cancelled for a conflict, and single-item writes refused (`TransactionConflictException`). */
  readonly conflictedReads: Record<string, number>;
  readonly conflictedWrites: Record<string, number>;
  /** With conflicts on: the items each refusal met, by source, operation and key family (`ledger WS#…/BALANCE`). */
  readonly conflictItems: Record<string, number>;
  /** Other failed calls, by error type. */
  readonly errors: Record<string, number>;
  /** Write calls whose reported capacity (per table) equalled the tap's own figure, and did not. */
  reportedAgrees: number;
  reportedDiffers: number;
  /** The first few disagreements: operation, table, computed and reported units. */
  readonly differences: string[];
}

type Json = Record<string, unknown>;
/** DynamoDB Local checks that a signature is present, not what it says. */
const TAP_AUTH = 'AWS4-HMAC-SHA256 Credential=local/20260101/local/dynamodb/aws4_request, SignedHeaders=host, Signature=tap';
const WRITES = new Set(['PutItem', 'UpdateItem', 'DeleteItem', 'TransactWriteItems', 'BatchWriteItem']);
const READS = new Set(['GetItem', 'BatchGetItem', 'TransactGetItems', 'Query', 'Scan']);
const SINGLE_WRITES = new Set(['PutItem', 'UpdateItem', 'DeleteItem']);

interface PendingItem {
  readonly op: ItemWrite['op'];
  readonly tableName: string;
  readonly schema: TableSchema;
  readonly key: WireItem;
  /** The item a put writes. */
  readonly item?: WireItem;
  readonly entry: Json;
}

const inc = (m: Record<string, number>, k: string, by = 1): void => {
  m[k] = (m[k] ?? 0) + by;
};

/** The recording pass-through; see the module comment. */
export class WriteTap {
  mode: TapMode = 'count';
  /** Workspace ids to attribute writes to (found in a write's key, item or values, else its call's). */
  workspaces: readonly string[] = [];
  /** DynamoDB's transaction conflicts, when set (`dynamo-conflicts.ts`); DynamoDB Local alone has none. */
  locks: ItemLocks | undefined;
  private writes: ItemWrite[] = [];
  private reads: ReadCall[] = [];
  private counts = WriteTap.emptyCounts();
  /** Last image of every item the tap saw written (or read), by table and key. */
  private readonly images = new Map<string, WireItem | null>();
  private readonly servers: http.Server[] = [];
  private readonly upstream: URL;
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 128 });
  private readonly byName = new Map<string, TableSchema>();

  /**
   * @param endpoint DynamoDB Local's endpoint
   * @param tablePrefix the prefix of the tables the stack uses, to find each table's schema
   */
  constructor(endpoint: string, tablePrefix: string) {
    this.upstream = new URL(endpoint);
    for (const name of Object.keys(TABLES) as TableName[]) this.byName.set(`${tablePrefix}${name}`, TABLES[name]);
  }

  private static emptyCounts(): CallCounts {
    return { calls: {}, cancelled: {}, conflicts: {}, conflictedReads: {}, conflictedWrites: {}, conflictItems: {}, errors: {}, reportedAgrees: 0, reportedDiffers: 0, differences: [] };
  }

  /** Makes a table the stack did not create under its prefix known to the tap (an aggregator's own rollups table, say). */
  addTable(fullName: string, schema: TableSchema): void {
    this.byName.set(fullName, schema);
  }

  /** Starts a listener for one source (`gateway`, `aggregator`); resolves to the endpoint to give it. */
  async listen(source: string): Promise<string> {
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        this.handle(source, req, Buffer.concat(chunks)).then(
          (reply) => {
            res.writeHead(reply.status, { 'content-type': reply.contentType, 'content-length': String(reply.body.length) });
            res.end(reply.body);
          },
          (err: unknown) => {
            res.writeHead(500, { 'content-type': 'application/x-amz-json-1.0' });
            res.end(JSON.stringify({ __type: 'com.amazonaws.dynamodb.v20120810#InternalServerError', message: `tap: ${err instanceof Error ? err.message : String(err)}` }));
          },
        );
      });
    });
    server.keepAliveTimeout = 30_000;
    this.servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  /** The writes, reads and counts recorded since the last call, and a fresh start. */
  take(): { writes: ItemWrite[]; reads: ReadCall[]; counts: CallCounts } {
    const out = { writes: this.writes, reads: this.reads, counts: this.counts };
    this.writes = [];
    this.reads = [];
    this.counts = WriteTap.emptyCounts();
    return out;
  }

  async close(): Promise<void> {
    await Promise.all(
      this.servers.map(
        (s) =>
          new Promise<void>((resolve) => {
            s.closeAllConnections();
            s.close(() => resolve());
          }),
      ),
    );
    this.agent.destroy();
  }

  private async handle(source: string, req: http.IncomingMessage, body: Buffer): Promise<{ status: number; contentType: string; body: Buffer }> {
    const target = String(req.headers['x-amz-target'] ?? '');
    const op = target.slice(target.indexOf('.') + 1);
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string' && k !== 'host' && k !== 'content-length' && k !== 'connection') headers[k] = v;
    const mapping = this.mode === 'map' && target.startsWith('DynamoDB_') && WRITES.has(op);
    const reading = this.mode === 'map' && target.startsWith('DynamoDB_') && READS.has(op);
    let input: Json | undefined;
    let pending: PendingItem[] = [];
    let sent = body;
    if (mapping) {
      input = JSON.parse(body.toString('utf8')) as Json;
      pending = this.itemsOf(op, input);
      for (const p of pending) await this.before(p);
      // DynamoDB Local does not check signatures, so the body may change under them.
      if (input.ReturnConsumedCapacity === undefined) sent = Buffer.from(JSON.stringify({ ...input, ReturnConsumedCapacity: 'INDEXES' }), 'utf8');
    }
    // DynamoDB Local runs transactions one at a time and never cancels one for a conflict; real
    // DynamoDB does. With `conflictWindowMs` set, the tap cancels as DynamoDB would
    // (`dynamo-conflicts.ts`), so the gateway meets its conflicts and answers them as it would there.
    let release: (() => void) | undefined;
    if (this.locks !== undefined && (op === 'TransactWriteItems' || op === 'TransactGetItems' || SINGLE_WRITES.has(op))) {
      const parsed = input ?? (JSON.parse(body.toString('utf8')) as Json);
      const items = op === 'TransactGetItems' ? this.getsOf(parsed) : this.itemsOf(op, parsed);
      const ids = items.map((p) => this.id(p));
      const passage = op === 'TransactWriteItems' ? this.locks.transactWrite(ids) : op === 'TransactGetItems' ? this.locks.transactGet(ids) : this.locks.singleWrite(ids[0] ?? '');
      if (!passage.passed) {
        for (const i of passage.conflicts) {
          const p = items[i];
          if (p !== undefined) inc(this.counts.conflictItems, `${source} ${op} ${family(p)}`);
        }
        const reply = op === 'TransactWriteItems' || op === 'TransactGetItems' ? cancelledForConflict(ids.length, passage.conflicts) : writeConflict();
        if (op === 'TransactWriteItems') {
          inc(this.counts.conflicts, source);
          inc(this.counts.cancelled, source);
        } else if (op === 'TransactGetItems') inc(this.counts.conflictedReads, source);
        else inc(this.counts.conflictedWrites, source);
        return { status: 400, contentType: 'application/x-amz-json-1.0', body: Buffer.from(JSON.stringify(reply), 'utf8') };
      }
      release = passage.release;
    }
    let reply: { status: number; contentType: string; body: Buffer };
    try {
      reply = await this.post(headers, sent);
    } finally {
      release?.();
    }
    if (reply.status === 200) inc(this.counts.calls, `${source} ${op}`);
    else this.countFailure(source, op, reply.body);
    if (mapping && input !== undefined && reply.status === 200) await this.record(source, op, input, pending, JSON.parse(reply.body.toString('utf8') || '{}') as Json);
    if (reading && reply.status === 200) await this.recordRead(source, op, JSON.parse(body.toString('utf8')) as Json, JSON.parse(reply.body.toString('utf8') || '{}') as Json);
    return reply;
  }

  private countFailure(source: string, op: string, body: Buffer): void {
    let parsed: Json = {};
    try {
      parsed = JSON.parse(body.toString('utf8')) as Json;
    } catch {
      // not JSON (a proxy's page): counted as an unknown error
    }
    const type = String(parsed.__type ?? 'unknown');
    const name = type.slice(type.lastIndexOf('#') + 1);
    if (name === 'TransactionCanceledException') {
      inc(this.counts.cancelled, source);
      const reasons = Array.isArray(parsed.CancellationReasons) ? (parsed.CancellationReasons as { Code?: string }[]) : [];
      if (reasons.some((r) => r.Code === 'TransactionConflict')) inc(this.counts.conflicts, source);
      return;
    }
    inc(this.counts.errors, `${source} ${op} ${name}`);
  }

  /** The items a write call touches, with their keys. */
  private itemsOf(op: string, input: Json): PendingItem[] {
    const out: PendingItem[] = [];
    const add = (kind: ItemWrite['op'], entry: Json): void => {
      const tableName = String(entry.TableName ?? '');
      const schema = this.byName.get(tableName);
      if (schema === undefined) return; // not one of the stack's tables
      const item = entry.Item as WireItem | undefined;
      const key = (entry.Key as WireItem | undefined) ?? pick(schema, item ?? {});
      out.push({ op: kind, tableName, schema, key, ...(item === undefined ? {} : { item }), entry });
    };
    if (op === 'PutItem') add('Put', input);
    else if (op === 'UpdateItem') add('Update', input);
    else if (op === 'DeleteItem') add('Delete', input);
    else if (op === 'TransactWriteItems') {
      for (const t of (input.TransactItems ?? []) as Json[]) {
        for (const kind of ['Put', 'Update', 'Delete', 'ConditionCheck'] as const) if (t[kind] !== undefined) add(kind, t[kind] as Json);
      }
    } else if (op === 'BatchWriteItem') {
      for (const [table, requests] of Object.entries((input.RequestItems ?? {}) as Record<string, Json[]>)) {
        for (const r of requests) {
          if (r.PutRequest !== undefined) add('Put', { TableName: table, ...(r.PutRequest as Json) });
          if (r.DeleteRequest !== undefined) add('Delete', { TableName: table, ...(r.DeleteRequest as Json) });
        }
      }
    }
    return out;
  }

  /** The items a TransactGetItems reads, in order. */
  private getsOf(input: Json): PendingItem[] {
    const out: PendingItem[] = [];
    for (const t of (input.TransactItems ?? []) as Json[]) {
      const get = (t.Get ?? {}) as Json;
      const tableName = String(get.TableName ?? '');
      const schema = this.byName.get(tableName);
      if (schema !== undefined) out.push({ op: 'ConditionCheck', tableName, schema, key: (get.Key ?? {}) as WireItem, entry: get });
    }
    return out;
  }

  private id(p: Pick<PendingItem, 'tableName' | 'key' | 'schema'>): string {
    return `${p.tableName}\u0000${JSON.stringify(pick(p.schema, p.key))}`;
  }

  /** Makes sure the image before the write is known (read it when the tap never saw the item). */
  private async before(p: PendingItem): Promise<void> {
    const id = this.id(p);
    if (this.images.has(id)) return;
    this.images.set(id, (await this.read(p.tableName, p.key)) ?? null);
  }

  private async record(source: string, op: string, input: Json, pending: readonly PendingItem[], output: Json): Promise<void> {
    const transactional = op === 'TransactWriteItems';
    const whole = JSON.stringify(input);
    const computed = new Map<string, number>();
    for (const p of pending) {
      const id = this.id(p);
      const before = this.images.get(id) ?? undefined;
      let after: WireItem | undefined;
      if (p.op === 'Put') after = p.item;
      else if (p.op === 'Update') after = await this.read(p.tableName, p.key);
      else if (p.op === 'ConditionCheck') after = before;
      this.images.set(id, after ?? null);
      const own = this.attribute(JSON.stringify(p.entry));
      // A write that names no workspace belongs to its call's workspace, when the call has one.
      const call = own.length > 0 ? own : this.attribute(whole);
      const write: ItemWrite = {
        source,
        op: p.op,
        table: p.schema.name,
        transactional,
        key: pick(p.schema, p.key),
        ...(before === undefined ? {} : { before }),
        ...(after === undefined ? {} : { after }),
        workspaces: call.length === 1 ? call : own,
      };
      this.writes.push(write);
      const size = Math.max(before === undefined ? 0 : itemSize(before), after === undefined ? 0 : itemSize(after), itemSize(write.key));
      computed.set(p.tableName, (computed.get(p.tableName) ?? 0) + writeUnits(size, transactional));
    }
    // DynamoDB Local's figure per table; a single-item call's is that item's own.
    const consumed = ([] as Json[]).concat((output.ConsumedCapacity ?? []) as Json | Json[]);
    const reportedBy = new Map<string, number>();
    for (const c of consumed) {
      const table = String(c.TableName ?? '');
      const units = Number((c.Table as Json | undefined)?.CapacityUnits ?? c.CapacityUnits);
      if (Number.isFinite(units)) reportedBy.set(table, (reportedBy.get(table) ?? 0) + units);
    }
    for (const [table, reported] of reportedBy) {
      if (!computed.has(table)) continue;
      if (reported === computed.get(table)) this.counts.reportedAgrees += 1;
      else {
        this.counts.reportedDiffers += 1;
        if (this.counts.differences.length < 5) this.counts.differences.push(`${source} ${op} ${table}: computed ${computed.get(table)}, reported ${reported} (${pending.filter((p) => p.tableName === table).map((p) => p.op).join(' ')})`);
      }
      if (pending.length === 1 && !transactional) {
        const last = this.writes.pop() as ItemWrite;
        this.writes.push({ ...last, reportedUnits: reported });
      }
    }
  }

  /**
   * A read call's units by DynamoDB's rules (`readUnits`): each item of a GetItem, BatchGetItem or
   * TransactGetItems on its own, a Query or Scan on what it returned. An item read with a
   * projection is sized whole (read back), as DynamoDB charges; a Query or Scan that filtered is
   * charged on what it examined, which the tap reads back by running it again without the filter.
   */
  private async recordRead(source: string, op: string, input: Json, output: Json): Promise<void> {
    const tables = new Set<string>();
    let units = 0;
    let items = 0;
    const schemaOf = (tableName: unknown): TableSchema | undefined => this.byName.get(String(tableName ?? ''));
    const whole = async (tableName: string, schema: TableSchema, item: WireItem | undefined, projected: boolean): Promise<number> => {
      if (item === undefined) return 0;
      if (!projected) return itemSize(item);
      return itemSize((await this.read(tableName, pick(schema, item))) ?? item);
    };
    if (op === 'GetItem') {
      const schema = schemaOf(input.TableName);
      if (schema === undefined) return;
      tables.add(schema.name);
      const item = output.Item as WireItem | undefined;
      items += item === undefined ? 0 : 1;
      units += readUnits(await whole(String(input.TableName), schema, item, input.ProjectionExpression !== undefined), input.ConsistentRead === true ? 'strong' : 'eventual');
    } else if (op === 'BatchGetItem') {
      for (const [tableName, request] of Object.entries((input.RequestItems ?? {}) as Record<string, Json>)) {
        const schema = schemaOf(tableName);
        if (schema === undefined) continue;
        tables.add(schema.name);
        const kind = request.ConsistentRead === true ? 'strong' : 'eventual';
        const got = ((output.Responses as Record<string, WireItem[]> | undefined)?.[tableName] ?? []) as WireItem[];
        const unprocessed = (((output.UnprocessedKeys as Record<string, Json> | undefined)?.[tableName]?.Keys ?? []) as unknown[]).length;
        const missing = Math.max(0, ((request.Keys ?? []) as unknown[]).length - got.length - unprocessed);
        for (const item of got) units += readUnits(await whole(tableName, schema, item, request.ProjectionExpression !== undefined), kind);
        units += missing * readUnits(0, kind);
        items += got.length;
      }
    } else if (op === 'TransactGetItems') {
      const gets = ((input.TransactItems ?? []) as Json[]).map((t) => (t.Get ?? {}) as Json);
      const responses = (output.Responses ?? []) as Json[];
      for (const [i, get] of gets.entries()) {
        const schema = schemaOf(get.TableName);
        if (schema === undefined) continue;
        tables.add(schema.name);
        const item = responses[i]?.Item as WireItem | undefined;
        items += item === undefined ? 0 : 1;
        units += readUnits(await whole(String(get.TableName), schema, item, get.ProjectionExpression !== undefined), 'transactional');
      }
    } else {
      const schema = schemaOf(input.TableName);
      if (schema === undefined) return;
      tables.add(schema.name);
      const returned = (output.Items ?? []) as WireItem[];
      items += returned.length;
      let examined = returned;
      if (input.FilterExpression !== undefined || input.ProjectionExpression !== undefined || input.Select !== undefined) {
        // What DynamoDB charges: every item the call examined, whole. Read again without filter or projection.
        const { FilterExpression: _f, ProjectionExpression: _p, Select: _s, ...plain } = input;
        const names = plain.ExpressionAttributeNames as Record<string, string> | undefined;
        const values = plain.ExpressionAttributeValues as Record<string, unknown> | undefined;
        const used = `${String(plain.KeyConditionExpression ?? '')}`;
        const again = await this.post(
          { 'content-type': 'application/x-amz-json-1.0', 'x-amz-target': `DynamoDB_20120810.${op}`, authorization: TAP_AUTH },
          Buffer.from(
            JSON.stringify({
              ...plain,
              ...(names === undefined ? {} : { ExpressionAttributeNames: Object.fromEntries(Object.entries(names).filter(([k]) => used.includes(k))) }),
              ...(values === undefined ? {} : { ExpressionAttributeValues: Object.fromEntries(Object.entries(values).filter(([k]) => used.includes(k))) }),
              ...(output.Count !== undefined && typeof output.ScannedCount === 'number' ? { Limit: output.ScannedCount } : {}),
            }),
            'utf8',
          ),
        );
        if (again.status === 200) examined = ((JSON.parse(again.body.toString('utf8')) as Json).Items ?? []) as WireItem[];
      }
      units += readUnits(
        examined.reduce((sum, item) => sum + itemSize(item), 0),
        input.ConsistentRead === true ? 'strong' : 'eventual',
      );
    }
    if (tables.size > 0) this.reads.push({ source, op, tables: [...tables], units, items });
  }

  private attribute(text: string): string[] {
    return this.workspaces.filter((ws) => text.includes(ws));
  }

  /** A consistent read straight from DynamoDB Local (not through the tap, not recorded). */
  private async read(tableName: string, key: WireItem): Promise<WireItem | undefined> {
    const reply = await this.post(
      { 'content-type': 'application/x-amz-json-1.0', 'x-amz-target': 'DynamoDB_20120810.GetItem', authorization: TAP_AUTH },
      Buffer.from(JSON.stringify({ TableName: tableName, Key: key, ConsistentRead: true }), 'utf8'),
    );
    if (reply.status !== 200) return undefined;
    return (JSON.parse(reply.body.toString('utf8')) as { Item?: WireItem }).Item;
  }

  private post(headers: Record<string, string>, body: Buffer): Promise<{ status: number; contentType: string; body: Buffer }> {
    return new Promise((resolve, reject) => {
      const req = http.request(
        { hostname: this.upstream.hostname, port: this.upstream.port, method: 'POST', path: '/', agent: this.agent, headers: { ...headers, 'content-length': String(body.length) } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, contentType: String(res.headers['content-type'] ?? 'application/x-amz-json-1.0'), body: Buffer.concat(chunks) }));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  }
}

/** An item's key family: its table and the leading part of each key attribute (`ledger WS#…/BALANCE`). */
function family(p: Pick<PendingItem, 'schema' | 'key'>): string {
  const part = (a: { name: string } | undefined): string | undefined => {
    if (a === undefined) return undefined;
    const v = String(p.key[a.name]?.S ?? p.key[a.name]?.N ?? '');
    const head = v.split('#')[0] ?? '';
    return head === v ? v.replace(/[0-9a-f-]{8,}/gi, '…') : `${head}#…`;
  };
  return [p.schema.name, [part(p.schema.partitionKey), part(p.schema.sortKey)].filter((x) => x !== undefined).join('/')].join(' ');
}

/** The primary key attributes of an item, by the table's schema. */
function pick(schema: TableSchema, item: WireItem): WireItem {
  const out: Record<string, WireItem[string]> = {};
  for (const a of [schema.partitionKey, schema.sortKey]) {
    if (a === undefined) continue;
    const v = item[a.name];
    if (v !== undefined) out[a.name] = v;
  }
  return out;
}
