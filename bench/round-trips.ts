/**
 * Counts the DynamoDB round trips the benchmark asks about, from outside the production adapters:
 * a client's `send` is wrapped, and each call is attributed to the ledger (the ledger, holds and
 * usage tables) or to lookups (keys, workspaces, catalog) by the tables its command names.
 *
 * While `counts.keep` is on, each call is also logged with its DynamoDB operation and how it
 * ended (a cancelled transaction with the reason of each item and the sort key's kind of the
 * item refused), so a request that makes more round trips than it should can be named: which
 * operation the extra one was, and why the first did not do.
 */

/** One call, as the log keeps it. */
export interface TripCall {
  /** Position of the call among every call of the process (ledger and lookups), from 0. */
  readonly seq: number;
  /** DynamoDB's operation name: `TransactWriteItems`, `TransactGetItems`, `GetItem`, … */
  readonly op: string;
  /** Whether the call names a ledger table (ledger, holds, usage). */
  readonly ledger: boolean;
  /** `ok` once answered; an error's name, a cancellation with its refused items; `pending` until then. */
  outcome: string;
}

/** Round trips seen so far. */
export interface TripCounts {
  ledger: number;
  lookups: number;
}

/** The calls made while `keep` was on (the benchmark turns it on only while it records). */
export interface TripLog {
  keep: boolean;
  readonly calls: TripCall[];
}

interface Sender {
  send(command: { readonly input?: unknown }, ...rest: unknown[]): Promise<unknown>;
}

/** Every table name a command's input names (`TableName`, and the keys of `RequestItems`). */
export function tablesOf(input: unknown, out: Set<string> = new Set()): Set<string> {
  if (Array.isArray(input)) {
    for (const item of input) tablesOf(item, out);
  } else if (input !== null && typeof input === 'object') {
    for (const [key, value] of Object.entries(input)) {
      if (key === 'TableName' && typeof value === 'string') out.add(value);
      else if (key === 'RequestItems' && value !== null && typeof value === 'object') for (const name of Object.keys(value)) out.add(name);
      else if (key === 'TransactItems') tablesOf(value, out);
      else if (value !== null && typeof value === 'object' && /^(Put|Update|Delete|ConditionCheck|Get)$/.test(key)) tablesOf(value, out);
    }
  }
  return out;
}

const OPERATIONS: Readonly<Record<string, string>> = {
  TransactWriteCommand: 'TransactWriteItems',
  TransactGetCommand: 'TransactGetItems',
  GetCommand: 'GetItem',
  PutCommand: 'PutItem',
  UpdateCommand: 'UpdateItem',
  DeleteCommand: 'DeleteItem',
  BatchGetCommand: 'BatchGetItem',
  BatchWriteCommand: 'BatchWriteItem',
  QueryCommand: 'Query',
  ScanCommand: 'Scan',
};

/** DynamoDB's name for the operation a command object sends (the class name when unknown). */
export function operationOf(command: object): string {
  const name = command.constructor.name;
  return OPERATIONS[name] ?? name.replace(/Command$/, '');
}

/**
 * The kind of an item a transaction item names: its sort key up to the first `#` (`BALANCE`,
 * `MONTH`, `KEYWIN`, `RATE`), or the table's suffix for a keyless table (`holds`, `usage`). Ids
 * are left out: a kind says which item of a request it was, never whose.
 */
export function itemKind(entry: unknown): string {
  if (entry === null || typeof entry !== 'object') return '?';
  const inner = Object.values(entry as Record<string, unknown>)[0] as { Key?: Record<string, unknown>; Item?: Record<string, unknown>; TableName?: string } | undefined;
  const sk = inner?.Key?.sk ?? inner?.Item?.sk;
  if (typeof sk === 'string' && (inner?.TableName ?? '').endsWith('ledger')) return sk.split('#')[0] ?? '?';
  return (inner?.TableName ?? '?').replace(/^.*-/, '');
}

/**
 * How a call failed, for the log: the error's name, and for a cancelled transaction each refused
 * item's kind and reason (`TransactionCanceled[BALANCE:ConditionalCheckFailed]`).
 */
export function outcomeOf(err: unknown, input: unknown): string {
  if (!(err instanceof Error)) return 'error';
  const reasons = (err as Error & { CancellationReasons?: { Code?: string }[] }).CancellationReasons;
  if (err.name !== 'TransactionCanceledException' || !Array.isArray(reasons)) return err.name;
  const items = ((input as { TransactItems?: unknown[] } | undefined)?.TransactItems ?? []) as unknown[];
  const refused = reasons.map((r, i) => (r.Code !== undefined && r.Code !== 'None' ? `${itemKind(items[i])}:${r.Code}` : undefined)).filter((s) => s !== undefined);
  return `TransactionCanceled[${refused.join(',')}]`;
}

/** One logged call as the report names it: `TransactWriteItems` or `TransactWriteItems→TransactionCanceled[…]`. */
export function callName(c: Pick<TripCall, 'op' | 'outcome'>): string {
  return c.outcome === 'ok' ? c.op : `${c.op}→${c.outcome}`;
}

/**
 * Wraps the `send` of each client in place and returns the live counts. `tablePrefix` names the
 * stage's tables, so `<prefix>ledger` and `<prefix>usage` count as the ledger.
 * With `log`, each call made while `log.keep` is on is added to `log.calls`.
 */
export function countRoundTrips(clients: readonly object[], tablePrefix: string, log: TripLog = { keep: false, calls: [] }): TripCounts {
  const counts: TripCounts = { ledger: 0, lookups: 0 };
  const ledgerTables = new Set(['ledger', 'usage'].map((name) => `${tablePrefix}${name}`));
  for (const client of clients as Sender[]) {
    const send = client.send.bind(client);
    client.send = (command, ...rest) => {
      const tables = [...tablesOf(command.input)];
      const ledger = tables.some((t) => ledgerTables.has(t));
      const seq = counts.ledger + counts.lookups;
      if (ledger) counts.ledger += 1;
      else counts.lookups += 1;
      if (!log.keep) return send(command, ...rest);
      const call: TripCall = { seq, op: operationOf(command), ledger, outcome: 'pending' };
      log.calls.push(call);
      return send(command, ...rest).then(
        (out) => {
          call.outcome = 'ok';
          return out;
        },
        (err: unknown) => {
          call.outcome = outcomeOf(err, command.input);
          throw err;
        },
      );
    };
  }
  return counts;
}

/** The ledger calls of the log with `from <= seq < to`, by name. */
export function ledgerCallsBetween(log: TripLog, from: number, to: number): string[] {
  return log.calls.filter((c) => c.ledger && c.seq >= from && c.seq < to).map(callName);
}
