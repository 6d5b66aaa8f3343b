/**
 * Keys, workspaces, members and routing profiles read from DynamoDB, cached in memory for a few
 * seconds (SLUICE_CACHE_TTL_MS): a revocation, pause or limit change bites within that time.
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import type { DocumentSender } from './dynamo-wire';
import type { KeyRecord, MemberRecord, ProfileRecord, WorkspaceRecord } from '../shared/records';
import type { KeyDirectory, WorkspaceDirectory } from '../gateway/ports';
import { TtlCache } from './ttl-cache';

export interface DirectoryTables {
  readonly keys: string;
  readonly workspaces: string;
}

export class DynamoDirectory implements KeyDirectory, WorkspaceDirectory {
  private readonly cache: TtlCache<Record<string, unknown> | undefined>;
  constructor(
    private readonly doc: DocumentSender,
    private readonly tables: DirectoryTables,
    ttlMs: number,
    clock: () => number = Date.now,
  ) {
    this.cache = new TtlCache(ttlMs, clock);
  }

  private read(table: string, key: Record<string, string>): Promise<Record<string, unknown> | undefined> {
    const cacheKey = `${table}|${Object.values(key).join('|')}`;
    return this.cache.get(cacheKey, async () => {
      const out = await this.doc.send(new GetCommand({ TableName: table, Key: key }));
      return out.Item;
    });
  }

  async findByHash(keyHash: string): Promise<KeyRecord | undefined> {
    return (await this.read(this.tables.keys, { keyHash })) as KeyRecord | undefined;
  }

  async workspace(workspaceId: string): Promise<WorkspaceRecord | undefined> {
    return (await this.read(this.tables.workspaces, { pk: workspaceId, sk: 'META' })) as WorkspaceRecord | undefined;
  }

  async member(workspaceId: string, memberId: string): Promise<MemberRecord | undefined> {
    return (await this.read(this.tables.workspaces, { pk: workspaceId, sk: `MEMBER#${memberId}` })) as MemberRecord | undefined;
  }

  async profile(workspaceId: string, identifier: string): Promise<ProfileRecord | undefined> {
    return (await this.read(this.tables.workspaces, { pk: workspaceId, sk: `PROFILE#${identifier}` })) as ProfileRecord | undefined;
  }
}
