/**
 * The shapes of the items Sluice stores. Money is always an integer count of micro-units
 * (millionths of a minor unit, e.g. of a cent); limits configured in minor units are stored
 * already multiplied out. No prompt, reply or raw key ever appears in any of these.
 */

/** Cadence on which a key's credit-limit window resets. `never` is one window for all time. */
export type WindowCadence = 'daily' | 'weekly' | 'monthly' | 'never';

/** How a key ended: revoked, replaced by a rotation, or revoked with its member's removal. */
export type KeyEndedHow = 'revoked' | 'rotated' | 'member-removed';

/** keys table: one API key, addressed by the SHA-256 hex of the raw key. */
export interface KeyRecord {
  readonly keyHash: string;
  readonly keyId: string;
  readonly workspaceId: string;
  /** Member the key was minted for, when any (monthly member limits count against it). */
  readonly memberId?: string;
  /** Prefix and last four characters, the only visible part. */
  readonly visible: string;
  readonly name?: string;
  /** Epoch milliseconds. */
  readonly createdAt: number;
  /** Epoch milliseconds; absent when the key does not expire. */
  readonly expiresAt?: number;
  /** Set when the key has ended (revoked or replaced); such a key is refused like one never issued. */
  readonly revokedAt?: number;
  /** Who ended it (the management principal), set with `revokedAt`; absent on keys ended before it was kept. */
  readonly endedBy?: string;
  /** How it ended, set with `revokedAt`. */
  readonly endedHow?: KeyEndedHow;
  /** The key's credit limit in micro-units; absent for none. */
  readonly creditLimitMicros?: number;
  /** The window the credit limit counts over (default `monthly`). */
  readonly creditWindow?: WindowCadence;
  /**
   * Set when the limit was set on a window that was not tracked: from this instant every
   * admission counts the key's window (`lambdas/core/limit-arming.ts`). Absent with a limit: tracked all along.
   */
  readonly creditTrackFrom?: number;
  /** Equals `creditTrackFrom` once the arming wrote what the window held before it: the limit is enforced. */
  readonly creditArmedFrom?: number;
  /**
   * Left by removing or re-arming a tracked limit: the windows such limits counted the key's
   * requests on, newest first, each until the gateways' caches have let go of it
   * (`keyRateWindow` in `lambdas/core/windows.ts`).
   */
  readonly creditCountWindows?: readonly { readonly cadence: WindowCadence; readonly generation?: number; readonly until: number }[];
}

/** workspaces table, sk `META`. */
export interface WorkspaceRecord {
  readonly pk: string; // workspaceId
  readonly sk: 'META';
  readonly workspaceId: string;
  readonly name: string;
  readonly createdAt: number;
  readonly paused: boolean;
  /** Spend rate cap in minor units per rolling 60 s (default 5000, minimum 100). */
  readonly spendRateCapMinor?: number;
  /** Workspace monthly spend limit, micro-units per UTC calendar month. */
  readonly monthlyLimitMicros?: number;
  /** Permitted model ids (exact ids); absent means unrestricted. */
  readonly permittedModels?: readonly string[];
  /** Slug identifier (without `profile/`) of the default routing profile. */
  readonly defaultProfile?: string;
  /** Providers for which the workspace brings its own key; value is the secret's name. */
  readonly byok?: Readonly<Record<string, string>>;
  /** Live keys plus outstanding invitation reservations, at most five. */
  readonly keySlots?: number;
  /** Below this available balance (micro-units) the low-credit notice fires; absent for none. */
  readonly lowCreditThresholdMicros?: number;
}

/** workspaces table, sk `MEMBER#<memberId>`. */
export interface MemberRecord {
  readonly pk: string;
  readonly sk: string;
  readonly workspaceId: string;
  readonly memberId: string;
  readonly email?: string;
  readonly role: 'owner' | 'member';
  /** Member monthly spend limit, micro-units per UTC calendar month. */
  readonly monthlyLimitMicros?: number;
  /** As a key's `creditTrackFrom`, for the member's monthly limit. */
  readonly monthlyTrackFrom?: number;
  /** As a key's `creditArmedFrom`, for the member's monthly limit. */
  readonly monthlyArmedFrom?: number;
}

/** workspaces table, sk `PROFILE#<identifier>`. */
export interface ProfileRecord {
  readonly pk: string;
  readonly sk: string;
  readonly workspaceId: string;
  readonly identifier: string;
  /** Ordered provider-pinned model ids, in the customer's order. */
  readonly models: readonly string[];
}

/**
 * ledger table, one slice of a workspace's ledger: pk `WS#<workspaceId>` (slice 0) or
 * `WS#<workspaceId>#S<n>`, sk `BALANCE`. On every slice `available + held + spent = credited`;
 * summed over slices, `credited` is every credit ever added. The spend-rate headroom (`rc`, `rr`,
 * `rt`, the guard lap `rl` and 64 one-character slots) and the slice's share of the workspace
 * month (`mo`, `ms`, `mh`, `mu`, `mr`, `ml`) live on the same item, which stays under 1 KB; see
 * `lambdas/store/items.ts` and docs/store.md.
 */
export interface BalanceRecord {
  readonly pk: string;
  readonly sk: 'BALANCE';
  readonly availableMicros: number;
  readonly heldMicros: number;
  readonly spentMicros: number;
  readonly creditedMicros: number;
  /** Slice 0 only: how many slices admissions use (absent: 1). */
  readonly sliceCount?: number;
  /** Slice 0 only: the most slices ever used, so retired ones are still read. */
  readonly sliceHigh?: number;
  /** Slice 0 only: the operator's setting; automatic growth never goes below it. */
  readonly sliceFloor?: number;
}

/**
 * ledger table, one limit window, written only while its limit is tracked:
 * `KEY#<ws>#<keyId>[#S<j>]` / `KEYWIN#<keyId>#<windowId>[~<generation>]` and
 * `MEMBER#<ws>#<memberId>` / `MEMBERMONTH#<memberId>#<yyyy-mm>[~<generation>]`.
 * `used = settled + held`, kept as its own attribute because a condition cannot add.
 */
export interface WindowRecord {
  readonly pk: string;
  readonly sk: string;
  readonly settledMicros: number;
  readonly heldMicros: number;
  readonly usedMicros: number;
  readonly ttl?: number;
}

/** Endpoint family a request is filed under. */
export type EndpointFamily = 'chat_completions' | 'responses';

/**
 * Where a request's row is in its life: an open hold, settled into its usage row, or released: an
 * admission whose outcome the gateway could not learn, answered with a refusal and given back
 * whole (or fenced before it could land), never a usage row (`lambdas/store/request-rows.ts`).
 */
export type RowState = 'open' | 'settled' | 'released';

/**
 * An open credit hold: a request's row in the usage table while it runs (`state` `open`), put at
 * admission and turned into the request's usage row by its settlement.
 */
export interface HoldRecord {
  readonly holdId: string; // the request id
  readonly workspaceId: string;
  readonly keyId: string;
  readonly memberId?: string;
  readonly family: EndpointFamily;
  /** Model id the request named (slug as sent). */
  readonly requestedModel: string;
  readonly amountMicros: number;
  /** Upper bound of the prompt's cost: what a request is charged when a provider replied without counts (`gateway/settle.ts`). */
  readonly inputMicros: number;
  /**
   * ledger sort keys of the windows this hold occupies: the key window and member month when
   * their limits are tracked, and always the workspace month (`MONTH#<yyyy-mm>`, on its slice).
   * A limit's arming may append a window to an open hold (it adopts it).
   */
  readonly windows: readonly string[];
  /** Whether the request runs on the workspace's own provider key (not charged to the balance). */
  readonly byok: boolean;
  /** Epoch ms the request started: the time in its id (`lambdas/core/request-id.ts`), and its row's sort key. */
  readonly createdAt: number;
  /** Epoch ms after which the request cannot still be running (540 s limit plus grace). */
  readonly expiresAt: number;
  /** The ledger slice the hold was taken from (absent: slice 0). */
  readonly slice?: number;
}

/** Token counts as the provider reported them. */
export interface TokenCounts {
  readonly inputTokens: number;
  /** Of `inputTokens`, how many the provider served from its prompt cache. */
  readonly cachedInputTokens: number;
  readonly outputTokens: number;
  /** Of `outputTokens`, how many were reasoning. */
  readonly reasoningTokens: number;
}

/** How a request ended, as recorded on its usage row. */
export type Outcome =
  | 'ok'
  | 'provider_error'
  | 'upstream_fault'
  | 'client_disconnected'
  | 'balance_exhausted'
  | 'timeout'
  | 'swept';

/** usage table: metadata about one settled request. Never a prompt or a reply. */
export interface UsageRecord {
  /** `<workspaceId>#U<n>`: a workspace's rows spread over USAGE_SHARDS partition key values. */
  readonly pk?: string;
  /** `settled` (absent on rows written before requests had one row from admission on). */
  readonly state?: RowState;
  readonly workspaceId: string;
  readonly sk: string; // `<iso time>#<requestId>`
  readonly requestId: string;
  readonly keyId: string;
  readonly memberId?: string;
  readonly family: EndpointFamily;
  readonly requestedModel: string;
  /** `<provider>/<model>` that actually served; absent when nothing served. */
  readonly servedBy?: string;
  readonly provider?: string;
  readonly stream: boolean;
  readonly byok: boolean;
  readonly status: number;
  readonly outcome: Outcome;
  readonly inputTokens: number;
  readonly cachedInputTokens: number;
  readonly outputTokens: number;
  readonly reasoningTokens: number;
  readonly chargeMicros: number;
  readonly holdMicros: number;
  readonly attempts: number;
  readonly startedAt: number;
  readonly durationMs: number;
  readonly firstByteMs?: number;
  /** The token counts are Sluice's own count: the provider's never arrived. */
  readonly estimated?: boolean;
}
