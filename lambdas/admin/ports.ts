/**
 * What the management API's routes run against and receive, apart from the app that matches
 * them (so routes and app do not import each other).
 */
import type { AdminContext } from '../store/directory-context';
import type { BalancePort } from '../store/balance-port';

/** What the use cases run against. */
export interface AdminDeps {
  readonly ctx: AdminContext;
  /** Every balance read and write goes through this port. */
  readonly balance: BalancePort;
  /** Where faults are reported by kind (never a body, a key or a secret). */
  readonly logFault?: (fields: Readonly<Record<string, string>>) => void;
}

/** A match of a route: its parameters, decoded. */
export interface RouteCall {
  readonly params: Readonly<Record<string, string>>;
  readonly query: Readonly<Record<string, string | undefined>>;
  readonly body: Readonly<Record<string, unknown>>;
  readonly deps: AdminDeps;
  readonly principal: string;
  readonly requestId: string;
}

