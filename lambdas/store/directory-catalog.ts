/**
 * Catalog import: provider and model entries (the contents of `config/providers.json` and
 * `config/catalog.json`, read by the CLI or bundled by a deploy) into the catalog table,
 * validated strictly, written whole, and pruned of what the files no longer list.
 */
import { BatchWriteCommand, ScanCommand } from '@aws-sdk/lib-dynamodb';
import type { BatchWriteCommandInput } from '@aws-sdk/lib-dynamodb';
import type { CatalogModel, ProviderConfig } from '../shared/catalog-types';
import {
  MODEL_PK_PREFIX,
  PROVIDER_PK_PREFIX,
  catalogItemToModel,
  catalogItemToProvider,
  modelToItem,
  providerToItem,
} from './directory-catalog-items';
import type { AdminContext } from './directory-context';
import { table } from './directory-context';
import { ModelNotInCatalogError } from './directory-errors';
import { closestId } from '../core/closest-id';

type WriteRequest = NonNullable<BatchWriteCommandInput['RequestItems']>[string][number];

/** Writes requests 25 at a time (the BatchWriteItem limit), re-sending whatever comes back unprocessed. */
async function batchWrite(ctx: AdminContext, requests: readonly WriteRequest[]): Promise<void> {
  const name = table(ctx, 'catalog');
  for (let i = 0; i < requests.length; i += 25) {
    let pending: WriteRequest[] = requests.slice(i, i + 25);
    for (let attempt = 0; pending.length > 0; attempt++) {
      if (attempt > 0) await new Promise((r) => setTimeout(r, Math.min(2000, 50 * 2 ** attempt)));
      if (attempt > 10) throw new Error('the catalog table kept refusing writes (throttled); try again');
      const out = await ctx.doc.send(new BatchWriteCommand({ RequestItems: { [name]: pending } }));
      pending = out.UnprocessedItems?.[name] ?? [];
    }
  }
}

async function scanCatalog(ctx: AdminContext): Promise<Record<string, unknown>[]> {
  const items: Record<string, unknown>[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const out = await ctx.doc.send(new ScanCommand({ TableName: table(ctx, 'catalog'), ConsistentRead: true, ExclusiveStartKey: start }));
    items.push(...(out.Items ?? []));
    start = out.LastEvaluatedKey;
  } while (start !== undefined);
  return items;
}

/** Writes validated entries (see {@link parseCatalogEntries}) and prunes what they no longer list. */
export async function writeCatalog(
  ctx: AdminContext,
  { providers, models }: { readonly providers: readonly ProviderConfig[]; readonly models: readonly CatalogModel[] },
): Promise<{ providers: number; models: number; removedProviders: number; removedModels: number }> {
  const existing = (await scanCatalog(ctx)).map((i) => String(i['pk']));
  const providerItems = providers.map(providerToItem);
  const modelItems = models.map(modelToItem);
  const keep = new Set<string>([...providerItems, ...modelItems].map((i) => i.pk));
  const staleModels = existing.filter((pk) => pk.startsWith(MODEL_PK_PREFIX) && !keep.has(pk));
  const staleProviders = existing.filter((pk) => pk.startsWith(PROVIDER_PK_PREFIX) && !keep.has(pk));
  // Providers before models, so a reader never meets a new model whose provider is not there yet.
  await batchWrite(ctx, providerItems.map((Item) => ({ PutRequest: { Item } })));
  await batchWrite(ctx, modelItems.map((Item) => ({ PutRequest: { Item } })));
  await batchWrite(ctx, staleModels.map((pk) => ({ DeleteRequest: { Key: { pk } } })));
  await batchWrite(ctx, staleProviders.map((pk) => ({ DeleteRequest: { Key: { pk } } })));
  return { providers: providers.length, models: models.length, removedProviders: staleProviders.length, removedModels: staleModels.length };
}

/** Reads the whole catalog table back through the same readers the gateway uses. */
export async function readCatalog(ctx: AdminContext): Promise<{ providers: ProviderConfig[]; models: CatalogModel[] }> {
  const items = await scanCatalog(ctx);
  const providers = items.filter((i) => i['kind'] === 'provider').map(catalogItemToProvider);
  const models = items.filter((i) => i['kind'] === 'model').map(catalogItemToModel);
  providers.sort((a, b) => a.name.localeCompare(b.name));
  models.sort((a, b) => a.id.localeCompare(b.id));
  return { providers, models };
}

/**
 * Refuses ids that are in no catalog, naming the closest catalogued id. Reads the catalog
 * table, so a model imported a moment ago counts.
 */
export async function requireCatalogued(ctx: AdminContext, ids: readonly string[]): Promise<void> {
  const known = (await scanCatalog(ctx)).filter((i) => i['kind'] === 'model').map((i) => String(i['pk']).slice(MODEL_PK_PREFIX.length));
  const set = new Set(known);
  for (const id of ids) if (!set.has(id)) throw new ModelNotInCatalogError(id, closestId(id, known));
}
