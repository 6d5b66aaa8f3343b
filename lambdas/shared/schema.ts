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

/** A global secondary index (always projecting ALL attributes). */
export interface IndexSchema {
  readonly indexName: string;
  readonly partitionKey: KeyAttribute;
  readonly sortKey?: KeyAttribute;
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

export type TableName = 'keys' | 'workspaces' | 'ledger' | 'holds' | 'usage' | 'rollups' | 'catalog' | 'audit';

const S = (name: string): KeyAttribute => ({ name, type: 'S' });
const N = (name: string): KeyAttribute => ({ name, type: 'N' });

/**
 * Name of the index the sweeper queries for holds by expiry: partition `expiryShard` (one of
 * EXPIRY_SHARDS values, from the hold id), sort `expiresAt`. Sharded so that no index key is
 * written by every request of the service.
 */
export const HOLDS_BY_EXPIRY = 'byExpiryShard';
/** Name of the index finding one request's usage row by its request id. */
export const USAGE_BY_REQUEST = 'byRequest';
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
  /** Open credit holds, one per admitted request; `expiryShard` puts them in the sweeper's index. */
  holds: {
    name: 'holds',
    partitionKey: S('holdId'),
    indexes: [{ indexName: HOLDS_BY_EXPIRY, partitionKey: S('expiryShard'), sortKey: N('expiresAt') }],
    ttlAttribute: 'ttl',
    stream: false,
  },
  /**
   * One metadata-only row per settled request; its stream feeds the aggregator. Partition
   * `<workspaceId>#U<n>` (USAGE_SHARDS per workspace, from the request id), sort
   * `<iso time>#<requestId>`; `byRequest` finds one request's row.
   */
  usage: {
    name: 'usage',
    partitionKey: S('pk'),
    sortKey: S('sk'),
    indexes: [{ indexName: USAGE_BY_REQUEST, partitionKey: S('requestId') }],
    ttlAttribute: 'ttl',
    stream: true,
  },
  /** Daily and monthly totals written by the aggregator, plus its de-duplication markers. */
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
