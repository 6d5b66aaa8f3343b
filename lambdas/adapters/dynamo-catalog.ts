/**
 * The catalog read from DynamoDB: the whole table (tens of items) is scanned once and cached for
 * SLUICE_CATALOG_CACHE_TTL_MS, so a model lookup on the warm path makes no round trip.
 */
import { ScanCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { MODEL_PK_PREFIX, PROVIDER_PK_PREFIX, catalogItemToModel, catalogItemToProvider } from '../catalog/items';
import type { CatalogModel, ProviderConfig } from '../shared/catalog-types';
import type { Catalog } from '../gateway/ports';
import { TtlCache } from './ttl-cache';

interface Snapshot {
  readonly models: ReadonlyMap<string, CatalogModel>;
  readonly providers: ReadonlyMap<string, ProviderConfig>;
}

export class DynamoCatalog implements Catalog {
  private readonly cache: TtlCache<Snapshot>;
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly table: string,
    ttlMs: number,
    clock: () => number = Date.now,
  ) {
    this.cache = new TtlCache(ttlMs, clock, 1);
  }

  private snapshot(): Promise<Snapshot> {
    return this.cache.get('all', async () => {
      const models = new Map<string, CatalogModel>();
      const providers = new Map<string, ProviderConfig>();
      let start: Record<string, unknown> | undefined;
      do {
        const page = await this.doc.send(new ScanCommand({ TableName: this.table, ExclusiveStartKey: start }));
        for (const item of page.Items ?? []) {
          const pk = String(item.pk);
          if (pk.startsWith(MODEL_PK_PREFIX)) {
            const m = catalogItemToModel(item);
            models.set(m.id, m);
          } else if (pk.startsWith(PROVIDER_PK_PREFIX)) {
            const p = catalogItemToProvider(item);
            providers.set(p.name, p);
          }
        }
        start = page.LastEvaluatedKey;
      } while (start !== undefined);
      return { models, providers };
    });
  }

  async model(id: string): Promise<CatalogModel | undefined> {
    return (await this.snapshot()).models.get(id);
  }

  async models(): Promise<readonly CatalogModel[]> {
    return [...(await this.snapshot()).models.values()].sort((a, b) => a.id.localeCompare(b.id));
  }

  async provider(name: string): Promise<ProviderConfig | undefined> {
    return (await this.snapshot()).providers.get(name);
  }

  async providers(): Promise<readonly ProviderConfig[]> {
    return [...(await this.snapshot()).providers.values()];
  }
}
