/**
 * The low-credit notifier's ports: where thresholds and recorded crossings are read and written,
 * where a workspace's balance comes from, and where a notice is published.
 */

/** One low-credit notice: metadata only, never a key, a prompt or a reply. */
export interface LowCreditNotice {
  /** Unique per crossing: the recorded marker and the published event carry the same id. */
  readonly crossingId: string;
  readonly workspaceId: string;
  readonly thresholdMicros: number;
  readonly availableMicros: number;
  /** Epoch ms of the check that saw the crossing. */
  readonly at: number;
  readonly stage: string;
}

/** A workspace the notifier looks at: it has a threshold, or a crossing on record, or both. */
export interface WatchedWorkspace {
  readonly workspaceId: string;
  /** The workspace's `lowCreditThresholdMicros`, as stored (validated by the core). */
  readonly thresholdMicros?: unknown;
  /** The crossing on record, if a notice was sent and not re-armed since. */
  readonly crossingId?: string;
}

/** Thresholds and the record of crossings (DynamoDB: the workspaces table). */
export interface NoticeStore {
  /** Every workspace with a threshold or a recorded crossing. */
  watched(): AsyncIterable<WatchedWorkspace>;
  /**
   * Records a crossing unless one is already on record; false when another check got there
   * first (then it, not this one, publishes).
   */
  record(notice: LowCreditNotice): Promise<boolean>;
  /** Removes the record of `crossingId` (and only that one): the next fall below is a new crossing. */
  clear(workspaceId: string, crossingId: string): Promise<void>;
}

/**
 * The credit available to new requests, micro-units; undefined when the workspace has no balance
 * yet. Kept to one function so the ledger's layout (one item today, escrow slices later) is known
 * in one place.
 */
export type BalanceReader = (workspaceId: string) => Promise<number | undefined>;

/** Publishes a notice; rejects if it could not be delivered (the crossing is then retried). */
export interface NoticePublisher {
  publish(notice: LowCreditNotice): Promise<void>;
}
