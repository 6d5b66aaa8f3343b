/**
 * The DynamoDB tables of Sluice, described once. The CDK constructs and local mode both build
 * their tables from this module, so a key or index cannot drift between the two.
 *
 * Table names are `<prefix><name>`, where the prefix is `sluice-<stage>-` (CDK) or `sluice-local-`
 * (local mode); the functions receive the prefix in `SLUICE_TABLE_PREFIX`.
 */

/** Attribute types DynamoDB keys may have. */
export type KeyType = 'S' | 'N';

/** One key attribute. */
export interface KeyAttribute {
  readonly name: string;
  readonly type: KeyType;
}

/** A global secondary index. */
export interface IndexSchema {
  readonly indexName: string;
  readonly partitionKey: KeyAttribute;
  readonly sortKey?: KeyAttribute;
  /**
   * What the index carries besides the keys. `KEYS_ONLY` entries are written only when an item
   * gains, loses or changes its index keys (1 unit each, being small); `ALL` copies every attribute,
   * so every write to the item is written to the index too.
   * @default 'ALL'
   */
  readonly projection?: 'ALL' | 'KEYS_ONLY';
}

/** A table's keys, indexes, TTL attribute and stream. */
export interface TableSchema {
  readonly name: TableName;
  readonly partitionKey: KeyAttribute;
  readonly sortKey?: KeyAttribute;
  readonly indexes: readonly IndexSchema[];
  /** Attribute holding an epoch-seconds expiry for DynamoDB TTL (garbage collection only). */
  readonly ttlAttribute?: string;
  /** Whether the table emits a NEW_IMAGE stream. */
  readonly stream: boolean;
  /** Kept when the stack is deleted, whatever the stage's removal policy (the audit trail). */
  readonly retain?: boolean;
}

export type TableName = 'keys' | 'workspaces' | 'ledger' | 'usage' | 'rollups' | 'catalog' | 'audit';

const S = (name: string): KeyAttribute => ({ name, type: 'S' });
const N = (name: string): KeyAttribute => ({ name, type: 'N' });

/**
 * Name of the index the sweeper queries for open requests by expiry: partition `expiryShard` (one
 * of EXPIRY_SHARDS values, from the request id), sort `expiresAt`. Sparse: only an open request's
 * row carries `expiryShard` (its settlement removes it), so the index holds exactly the open holds.
 * Sharded so that no index key is written by every request of the service; keys only, so a row's
 * other writes (a stream's hold growing, a pending charge) never reach it.
 */
export const OPEN_BY_EXPIRY = 'byExpiryShard';
/** Name of the index listing a workspace's keys. */
export const KEYS_BY_WORKSPACE = 'byWorkspace';
/** Name of the audit table's index of every change of one UTC day. */
export const AUDIT_BY_DAY = 'byDay';

export const TABLES: Readonly<Record<TableName, TableSchema>> = Object.freeze({
  /** API keys by the SHA-256 hex of the raw key. */
  keys: {
    name: 'keys',
    partitionKey: S('keyHash'),
    indexes: [{ indexName: KEYS_BY_WORKSPACE, partitionKey: S('workspaceId'), sortKey: S('keyId') }],
    stream: false,
  },
  /**
   * Workspace settings (sk `META`), members (`MEMBER#<id>`), routing profiles (`PROFILE#<slug>`),
   * console invitations (`INVITE#<id>`) and passkeys (`PASSKEY#<credential>`); the console's
   * challenges and sessions each in a partition of their own, collected by TTL once expired.
   */
  workspaces: {
    name: 'workspaces',
    partitionKey: S('pk'),
    sortKey: S('sk'),
    indexes: [],
    ttlAttribute: 'ttl',
    stream: false,
  },
  /**
   * Money: each workspace's ledger slices (sk `BALANCE`) with their month shares, each key's own
   * items under `KEY#<keyId>`, each member's month under `MEMBER#<ws>#<memberId>`. Layout:
   * `lambdas/store/keys.ts`.
   */
  ledger: {
    name: 'ledger',
    partitionKey: S('pk'),
    sortKey: S('sk'),
    indexes: [],
    ttlAttribute: 'ttl',
    stream: false,
  },
  /**
   * One row per admitted request, metadata only: put at admission as the request's open hold
   * (`state` `open`: its amount, prompt bound, windows, slice and expiry) and turned into its
   * settled usage row by its settlement (`state` `settled`: what served it, the counts, the charge).
   * Partition `<workspaceId>#U<n>` (USAGE_SHARDS per workspace, from the request id), sort
   * `<iso start>#<requestId>` (the start is in the request id, so a row's key is known from its
   * workspace and id). Open rows are in the sparse `byExpiryShard` index for the sweeper. Its
   * stream feeds the aggregator, which counts a row at its settlement.
   */
  usage: {
    name: 'usage',
    partitionKey: S('pk'),
    sortKey: S('sk'),
    indexes: [{ indexName: OPEN_BY_EXPIRY, partitionKey: S('expiryShard'), sortKey: N('expiresAt'), projection: 'KEYS_ONLY' }],
    ttlAttribute: 'ttl',
    stream: true,
  },
  /** Daily and monthly totals written by the aggregator, plus the record of which rows it has counted. */
  rollups: {
    name: 'rollups',
    partitionKey: S('pk'),
    sortKey: S('sk'),
    indexes: [],
    ttlAttribute: 'ttl',
    stream: false,
  },
  /** Model catalog (`MODEL#<id>`) and provider accounts (`PROVIDER#<name>`). */
  catalog: {
    name: 'catalog',
    partitionKey: S('pk'),
    indexes: [],
    stream: false,
  },
  /**
   * The management API's audit trail (`lambdas/store/audit.ts`): pk the workspace id (or
   * `SLUICE`), sk `<ISO time>#<requestId>`. No TTL: it is kept, and retained in every stage.
   */
  audit: {
    name: 'audit',
    partitionKey: S('pk'),
    sortKey: S('sk'),
    indexes: [{ indexName: AUDIT_BY_DAY, partitionKey: S('day'), sortKey: S('sk') }],
    stream: false,
    retain: true,
  },
});

/** Every table, in a stable order. */
export const ALL_TABLES: readonly TableSchema[] = Object.values(TABLES);

/** The full table name for a prefix. */
export function tableName(prefix: string, name: TableName): string {
  return `${prefix}${name}`;
}
