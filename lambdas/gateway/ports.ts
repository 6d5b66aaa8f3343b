/**
 * The gateway's ports: small interfaces named for what they do. DynamoDB, Secrets Manager and
 * HTTP adapters implement them; tests may pass their own. No AWS type appears here.
 */
import type { Readable } from 'node:stream';
import type { CatalogModel, ProviderConfig } from '../shared/catalog-types';
import type { RuntimeConfig } from '../shared/config';
import type {
  EndpointFamily,
  HoldRecord,
  KeyRecord,
  MemberRecord,
  Outcome,
  ProfileRecord,
  TokenCounts,
  WindowCadence,
  WorkspaceRecord,
} from '../shared/records';

/** Finds API keys by the hash of the raw key. */
export interface KeyDirectory {
  findByHash(keyHash: string): Promise<KeyRecord | undefined>;
}

/** Reads workspace settings, members and routing profiles. */
export interface WorkspaceDirectory {
  workspace(workspaceId: string): Promise<WorkspaceRecord | undefined>;
  member(workspaceId: string, memberId: string): Promise<MemberRecord | undefined>;
  profile(workspaceId: string, identifier: string): Promise<ProfileRecord | undefined>;
}

/** Reads the model catalog and the provider accounts. */
export interface Catalog {
  model(id: string): Promise<CatalogModel | undefined>;
  models(): Promise<readonly CatalogModel[]>;
  provider(name: string): Promise<ProviderConfig | undefined>;
  providers(): Promise<readonly ProviderConfig[]>;
}

/** Reads secrets (provider keys) by name. Values are never logged. */
export interface SecretSource {
  get(name: string): Promise<string | undefined>;
}

/**
 * Every limit that bears on one admission, already resolved from the key, member and workspace.
 * A key window or member month is written only when its limit is given here (`lambdas/core/limit-arming.ts`
 * says when the gateway gives it).
 */
export interface AdmissionLimits {
  readonly keyLimitMicros?: number;
  readonly keyWindow: WindowCadence;
  /**
   * The key's limit is being armed (it was set on a window that was not tracked): the window is
   * counted, and the limit enforced only once the arming has added what the window held before
   * (the ledger learns that from the window item itself).
   */
  readonly keyLimitArming?: boolean;
  /** When tracking of the key's limit began, for a limit set on an untracked window: its window items are that arming's own. */
  readonly keyWindowGeneration?: number;
  readonly memberLimitMicros?: number;
  /** As `keyLimitArming`, for the member's monthly limit. */
  readonly memberLimitArming?: boolean;
  /** As `keyWindowGeneration`, for the member's month. */
  readonly memberMonthGeneration?: number;
  readonly workspaceLimitMicros?: number;
  readonly spendRateCapMicros: number;
  /**
   * A stage with several regions: the whole cap across regions, of which `spendRateCapMicros` is
   * this region's share (the tag its slices' headroom is written under); the cap the headroom's
   * transfers between regions are counted under.
   */
  readonly spendRateCapStageMicros?: number;
  /**
   * A stage with several regions: the cap's headroom transfers have moved into this region under
   * this cap (received less given; negative when it gave more). The region's capacity under the
   * cap is `spendRateCapMicros` plus this: what a refusal is decided on and what headroom rewritten
   * under a changed cap starts from. Absent: 0 (one region).
   */
  readonly spendRateMovedMicros?: number;
  readonly keyRatePerMinute: number;
  /**
   * The key window whose item counts the key's requests of the request's minute (by its start),
   * when one does (`keyRateWindow` in `core/windows.ts`); absent: the minute's request counter.
   */
  readonly keyRateWindow?: string;
}

/** One admission: the hold to place and the limits it must fit under. */
export interface AdmitRequest {
  readonly holdId: string;
  readonly workspaceId: string;
  readonly keyId: string;
  readonly memberId?: string;
  readonly family: EndpointFamily;
  readonly requestedModel: string;
  readonly amountMicros: number;
  /** Upper bound of the prompt's cost, kept on the hold for a reply that comes without counts. */
  readonly inputMicros: number;
  readonly byok: boolean;
  readonly limits: AdmissionLimits;
  readonly now: number;
  readonly expiresAt: number;
}

/** Why an admission was refused, with what SPEC's message and headers need. */
export type Refusal =
  | { readonly kind: 'insufficient_credit'; readonly availableMicros: number }
  | { readonly kind: 'key_limit_exceeded'; readonly settledMicros: number; readonly heldMicros: number; readonly limitMicros: number }
  | { readonly kind: 'member_limit_exceeded'; readonly usedMicros: number; readonly limitMicros: number }
  | { readonly kind: 'workspace_limit_exceeded'; readonly usedMicros: number; readonly limitMicros: number }
  | { readonly kind: 'spend_rate_exceeded'; readonly retryAfterSeconds: number; readonly capMicros: number }
  | { readonly kind: 'rate_limit_exceeded'; readonly retryAfterSeconds: number }
  /** A stage with several regions: what the request needs is in another region and did not arrive within the wait (`503 balance_unavailable`). */
  | { readonly kind: 'in_transit'; readonly retryAfterSeconds: number };

export type AdmitOutcome = { readonly admitted: true; readonly hold: HoldRecord } | { readonly admitted: false; readonly refusal: Refusal };

/** How a request ended, for settlement and its usage row. */
export interface Settlement {
  readonly counts: TokenCounts | undefined;
  /** The request was served on the workspace's own key (a route's hold may say otherwise). */
  readonly byok?: boolean;
  readonly chargeMicros: number;
  readonly servedBy?: string;
  readonly provider?: string;
  readonly stream: boolean;
  readonly status: number;
  readonly outcome: Outcome;
  readonly attempts: number;
  readonly now: number;
  /** From the request's arrival to its first byte, on the gateway's clock; never above `durationMs`. */
  readonly firstByteMs?: number;
  /**
   * From the request's arrival to its end, on the same clock as `firstByteMs`. Absent where no
   * request was timed (the sweeper): the row then counts from admission to `now`.
   */
  readonly durationMs?: number;
  /** The counts were Sluice's own count, the provider's never arrived (`lambdas/core/token-count.ts`). */
  readonly estimated?: boolean;
}

/** The money port: one transaction to admit, one to settle. */
export interface Ledger {
  admit(request: AdmitRequest): Promise<AdmitOutcome>;
  /** Idempotent: settling a hold that is already gone changes nothing and returns false. */
  settle(hold: HoldRecord, settlement: Settlement): Promise<boolean>;
  /**
   * After an admission that failed without an answer (it may or may not have been written) and
   * that the gateway answers with a refusal: gives back whatever it holds, as a settlement charging
   * 0 would, and makes sure it can hold nothing later. Idempotent; rejects while the store cannot
   * be reached.
   */
  release(workspaceId: string, requestId: string, now: number): Promise<void>;
  /** Grows an open hold by `extraMicros` if balance and limits allow; false otherwise. */
  extend(hold: HoldRecord, extraMicros: number, limits: AdmissionLimits, now: number): Promise<boolean>;
  /**
   * Counts one request against the key's per-minute rate outside an admission: on the key window
   * `rateWindow` when the minute of `now` counts there (`keyRateWindow`), else on its counter.
   */
  countRequest(workspaceId: string, keyId: string, ratePerMinute: number, now: number, rateWindow?: string): Promise<{ readonly retryAfterSeconds?: number }>;
}

/** One HTTP call to a provider. */
export interface UpstreamRequest {
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
  readonly signal: AbortSignal;
}

export interface UpstreamResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | undefined>>;
  readonly body: Readable;
}

/** Sends requests to providers. */
export interface Upstream {
  send(request: UpstreamRequest): Promise<UpstreamResponse>;
}

/** Where the response goes: status and headers once, then chunks in order. */
export interface ResponseSink {
  /** Whether the status has been sent (after which faults go in-band). */
  readonly started: boolean;
  start(status: number, headers: Readonly<Record<string, string>>): void;
  /**
   * Writes one chunk. Returns nothing when the sink took it and can take more at once, the common
   * case, so a stream's chunks need no promise each; otherwise a promise that resolves once more
   * may be written (backpressure), or rejects when the client can no longer be written to.
   */
  write(chunk: Buffer): Promise<void> | undefined;
  end(): Promise<void>;
}

/** Request-level telemetry: metric values and one structured log line, never a body or key. */
export interface Telemetry {
  request(fields: Readonly<Record<string, string | number | boolean | undefined>>): void;
  /** A count of something that happened (e.g. `TransactionConflicts`). */
  count?(name: string, value: number): void;
  /** One upstream call's status and latency, by provider; reported before its request's line. */
  upstream?(fields: { readonly requestId?: string; readonly provider: string; readonly status: number; readonly latencyMs: number }): void;
}

/** Everything the gateway runs on: ports, configuration, the clock and the id source. */
export interface GatewayDeps {
  readonly config: RuntimeConfig;
  readonly keys: KeyDirectory;
  readonly workspaces: WorkspaceDirectory;
  readonly catalog: Catalog;
  readonly secrets: SecretSource;
  readonly ledger: Ledger;
  readonly upstream: Upstream;
  readonly telemetry: Telemetry;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly clock: () => number;
  readonly newId: () => string;
  /**
   * Called when the last request in flight has been served, its telemetry line written: the
   * process has nothing to do until the next one (deployed: a collection between requests,
   * `collectBetweenRequests` in `shared/v8-tuning.ts`). Absent: nothing is done.
   */
  readonly idle?: () => void;
}

/** A request as the runtime adapter hands it over. Header names are lower case. */
export interface GatewayRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: Readonly<Record<string, string | undefined>>;
  readonly body: Buffer;
  /** An id for tracing the invocation (the Lambda request id). */
  readonly traceId: string;
}

/** What every phase knows of the request it serves: its ids, when it began, and the ports. */
export interface RequestContext {
  readonly deps: GatewayDeps;
  readonly requestId: string;
  readonly traceId: string;
  readonly startedAt: number;
  readonly sink: ResponseSink;
}

/** What a request's telemetry line says of it, gathered from what each phase returned. */
export interface Served {
  readonly status: number;
  readonly code?: string | null;
  readonly workspaceId?: string;
  readonly keyId?: string;
  readonly model?: string;
  readonly servedBy?: string;
  readonly outcome?: Outcome;
  readonly chargeMicros?: number;
  readonly firstByteMs?: number;
}
