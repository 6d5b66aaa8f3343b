/**
 * What the console runs against: the management API's dependencies (so every change is the
 * very operation the CLI makes, with one audit record), its own settings, the browser bundle,
 * the clock and random ids.
 */
import type { AdminDeps } from '../admin/ports';
import type { ConsoleConfig } from './env';

/** One static file of the browser bundle. */
export interface ConsoleAsset {
  readonly contentType: string;
  readonly body: string;
}

/** Where the browser bundle comes from: files beside the handler when deployed, esbuild locally. */
export interface ConsoleAssets {
  get(name: string): Promise<ConsoleAsset | undefined>;
}

/** The console's dependencies. */
export interface ConsoleDeps {
  readonly admin: AdminDeps;
  readonly config: ConsoleConfig;
  readonly assets: ConsoleAssets;
  /** The per-key request rate the gateway enforces (SPEC: the settings screen lists it). */
  readonly keyRatePerMinute: number;
  /** Epoch milliseconds; defaults to the admin context's clock. */
  readonly now?: () => number;
  /** `n` random bytes, base64url (session ids, CSRF tokens). */
  readonly randomToken?: (bytes: number) => string;
}

/** The signed-in member a session API call runs as. */
export interface ConsoleSession {
  readonly sessionId: string;
  readonly workspaceId: string;
  readonly memberId: string;
  readonly role: 'owner' | 'member';
  readonly email: string | null;
  readonly csrf: string;
}

/** The principal a console change is audited under: the signed-in member. */
export function consolePrincipal(s: { workspaceId: string; memberId: string }): string {
  return `console:${s.workspaceId}/${s.memberId}`;
}
