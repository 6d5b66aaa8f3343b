/**
 * What the management API's routes run against and receive, apart from the app that matches
 * them (so routes and app do not import each other).
 */
import type { AdminContext } from '../store/directory-context';
import type { BalancePort } from '../store/balance-port';
import type { AuditSummary } from '../store/audit';
import type { ConfigHomePort } from '../store/config-home';

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
  /**
   * Where the configuration home is recorded (a stage with several regions): changes are accepted
   * only where it names this region. @default the stage's home region, never moved (no store read)
   */
  readonly configHome?: ConfigHomePort;
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
  /**
   * Served outside the configuration home too: only the move of the configuration home itself,
   * which its target region records while the old home may be lost. @default false
   */
  readonly anyRegion?: boolean;
  run(call: RouteCall): Promise<RouteResult>;
}
