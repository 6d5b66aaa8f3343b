/**
 * The catalog's import: the two entry arrays validated as a whole, then written to the catalog
 * table; what the table holds beyond them is named, and removed only when asked to prune. Used
 * by the deploy-time import function and by `sluice catalog import`, so both validate and write
 * exactly alike.
 */
import { basename } from 'node:path';
import { BatchWriteCommand, ScanCommand, type BatchWriteCommandInput, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { CatalogModel, ProviderConfig } from '../shared/catalog-types';
import { CatalogValidationError } from './errors';
import { MODEL_PK_PREFIX, PROVIDER_PK_PREFIX, checkCatalog, modelToItem, parseCatalogModel, parseProviderConfig, providerToItem } from './items';

/** Validated catalog entries. */
export interface CatalogEntries {
  readonly providers: ProviderConfig[];
  readonly models: CatalogModel[];
}

/** Where the catalog is written. */
export interface CatalogTable {
  readonly doc: DynamoDBDocumentClient;
  readonly tableName: string;
}

/** What an import wrote, what the table holds that the entries do not list, and what it removed. */
export interface ImportResult {
  readonly providers: number;
  readonly models: number;
  /**
   * Provider names and model ids in the table that the entries do not list (added at run time
   * with `sluice provider add` / `model add`, or dropped from the files): removed only when the
   * import prunes, otherwise only named, so an import never deletes silently.
   */
  readonly unlisted: { readonly providers: readonly string[]; readonly models: readonly string[] };
  /** Whether the unlisted items were removed. */
  readonly pruned: boolean;
  readonly removedProviders: number;
  readonly removedModels: number;
}

/** How an import treats what the entries do not list. */
export interface ImportOptions {
  /**
   * Delete the items the entries do not list.
   * @default false: they are kept and named in {@link ImportResult.unlisted}
   */
  readonly prune?: boolean;
}

/** The label an entry goes by in error messages, before it is known to be valid. */
function entryLabel(file: string, index: number, entry: unknown, field: 'name' | 'id'): string {
  const tag = typeof entry === 'object' && entry !== null ? (entry as Record<string, unknown>)[field] : undefined;
  return `${basename(file)} entry ${index}${typeof tag === 'string' ? ` (${tag})` : ''}`;
}

/**
 * Validates the two arrays, entry by entry and as a whole (the files' contents, or the copy a
 * deploy bundles); `sources` name them in error messages. Nothing is written.
 */
export function parseCatalogEntries(
  rawProviders: readonly unknown[],
  rawModels: readonly unknown[],
  sources: { readonly providers: string; readonly models: string } = { providers: 'providers.json', models: 'catalog.json' },
): CatalogEntries {
  const providers = rawProviders.map((e, i) => parseProviderConfig(e, entryLabel(sources.providers, i, e, 'name')));
  const models = rawModels.map((e, i) => parseCatalogModel(e, entryLabel(sources.models, i, e, 'id')));
  if (providers.length === 0) throw new CatalogValidationError(`${basename(sources.providers)} lists no provider`);
  checkCatalog(providers, models, { providers: basename(sources.providers), models: basename(sources.models) });
  return { providers, models };
}

type WriteRequest = NonNullable<BatchWriteCommandInput['RequestItems']>[string][number];

/** Writes requests 25 at a time (the BatchWriteItem limit), re-sending whatever comes back unprocessed. */
async function batchWrite(table: CatalogTable, requests: readonly WriteRequest[]): Promise<void> {
  const name = table.tableName;
  for (let i = 0; i < requests.length; i += 25) {
    let pending: WriteRequest[] = requests.slice(i, i + 25);
    for (let attempt = 0; pending.length > 0; attempt++) {
      if (attempt > 0) await new Promise((r) => setTimeout(r, Math.min(2000, 50 * 2 ** attempt)));
      if (attempt > 10) throw new Error('the catalog table kept refusing writes (throttled); try again');
      const out = await table.doc.send(new BatchWriteCommand({ RequestItems: { [name]: pending } }));
      pending = out.UnprocessedItems?.[name] ?? [];
    }
  }
}

/** Every item of the catalog table. */
export async function scanCatalog(table: CatalogTable): Promise<Record<string, unknown>[]> {
  const items: Record<string, unknown>[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const out = await table.doc.send(new ScanCommand({ TableName: table.tableName, ConsistentRead: true, ExclusiveStartKey: start }));
    items.push(...(out.Items ?? []));
    start = out.LastEvaluatedKey;
  } while (start !== undefined);
  return items;
}

/**
 * Writes validated entries (see {@link parseCatalogEntries}). What the table holds beyond them is
 * named in the result, and deleted only with `prune` (models first, then providers, so a model
 * never outlives its provider).
 */
export async function writeCatalogEntries(table: CatalogTable, { providers, models }: Readonly<CatalogEntries>, options: ImportOptions = {}): Promise<ImportResult> {
  const existing = (await scanCatalog(table)).map((i) => String(i['pk']));
  const providerItems = providers.map(providerToItem);
  const modelItems = models.map(modelToItem);
  const keep = new Set<string>([...providerItems, ...modelItems].map((i) => i.pk));
  const staleModels = existing.filter((pk) => pk.startsWith(MODEL_PK_PREFIX) && !keep.has(pk)).sort();
  const staleProviders = existing.filter((pk) => pk.startsWith(PROVIDER_PK_PREFIX) && !keep.has(pk)).sort();
  const unlisted = {
    providers: staleProviders.map((pk) => pk.slice(PROVIDER_PK_PREFIX.length)),
    models: staleModels.map((pk) => pk.slice(MODEL_PK_PREFIX.length)),
  };
  if (options.prune !== true) {
    // Without prune a kept model may name a provider the entries do not list: it is kept too
    // (unlisted providers are never removed here), so no model is left without its provider.
    await batchWrite(table, providerItems.map((Item) => ({ PutRequest: { Item } })));
    await batchWrite(table, modelItems.map((Item) => ({ PutRequest: { Item } })));
    return { providers: providers.length, models: models.length, unlisted, pruned: false, removedProviders: 0, removedModels: 0 };
  }
  // Providers before models, so a reader never meets a new model whose provider is not there yet.
  await batchWrite(table, providerItems.map((Item) => ({ PutRequest: { Item } })));
  await batchWrite(table, modelItems.map((Item) => ({ PutRequest: { Item } })));
  await batchWrite(table, staleModels.map((pk) => ({ DeleteRequest: { Key: { pk } } })));
  await batchWrite(table, staleProviders.map((pk) => ({ DeleteRequest: { Key: { pk } } })));
  return { providers: providers.length, models: models.length, unlisted, pruned: true, removedProviders: staleProviders.length, removedModels: staleModels.length };
}
