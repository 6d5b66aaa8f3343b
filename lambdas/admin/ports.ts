/**
 * What the management API's routes run against and receive, apart from the app that matches
 * them (so routes and app do not import each other).
 */
import type { AdminContext } from '../store/directory-context';
import type { BalancePort } from '../store/balance-port';
import type { AuditSummary } from '../store/audit';

/** What the use cases run against. */
export interface AdminDeps {
  readonly ctx: AdminContext;
  /** Every balance read and write goes through this port. */
  readonly balance: BalancePort;
  /** Where faults are reported by kind (never a body, a key or a secret). */
  readonly logFault?: (fields: Readonly<Record<string, string>>) => void;
  /**
   * The environment the stage's gateway shares, for what a provider takes from it (a base URL
   * named by `baseUrlEnv`: local mode's simulator). @default none: providers list as catalogued
   */
  readonly env?: Readonly<Record<string, string | undefined>>;
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

/** What a use case hands back: the JSON body, and for a change, what the audit records. */
export interface RouteResult {
  readonly body: unknown;
  readonly status?: number;
  /** The workspace the change concerns; null for none (the catalog). */
  readonly workspaceId?: string | null;
  /** What changed, for the audit; never a secret. */
  readonly summary?: AuditSummary;
  /** False when nothing changed (a repeated top-up): nothing is audited. */
  readonly changed?: boolean;
}

/** One route. */
export interface Route {
  readonly method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** Path segments after `/admin/v1`; `:name` captures one. */
  readonly pattern: readonly string[];
  /** The audit action; undefined for a read. */
  readonly action?: string;
  run(call: RouteCall): Promise<RouteResult>;
}
