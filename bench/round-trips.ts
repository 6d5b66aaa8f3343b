/**
 * Counts the DynamoDB round trips the benchmark asks about, from outside the production adapters:
 * a client's `send` is wrapped, and each call is attributed to the ledger (the ledger, holds and
 * usage tables) or to lookups (keys, workspaces, catalog) by the tables its command names.
 */

/** Round trips seen so far. */
export interface TripCounts {
  ledger: number;
  lookups: number;
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

/**
 * Wraps the `send` of each client in place and returns the live counts. `tablePrefix` names the
 * stage's tables, so `<prefix>ledger`, `<prefix>holds` and `<prefix>usage` count as the ledger.
 */
export function countRoundTrips(clients: readonly object[], tablePrefix: string): TripCounts {
  const counts: TripCounts = { ledger: 0, lookups: 0 };
  const ledgerTables = new Set(['ledger', 'holds', 'usage'].map((name) => `${tablePrefix}${name}`));
  for (const client of clients as Sender[]) {
    const send = client.send.bind(client);
    client.send = (command, ...rest) => {
      const tables = [...tablesOf(command.input)];
      if (tables.some((t) => ledgerTables.has(t))) counts.ledger += 1;
      else counts.lookups += 1;
      return send(command, ...rest);
    };
  }
  return counts;
}
