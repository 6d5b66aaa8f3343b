/**
 * Catalog import: `config/providers.json` and `config/catalog.json` into the catalog table,
 * validated strictly, written whole, and pruned of what the files no longer list.
 */
import { BatchWriteCommand, ScanCommand } from '@aws-sdk/lib-dynamodb';
import type { BatchWriteCommandInput } from '@aws-sdk/lib-dynamodb';
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import type { CatalogModel, ProviderConfig } from '../../lambdas/shared/catalog-types';
import {
  MODEL_PK_PREFIX,
  PROVIDER_PK_PREFIX,
  catalogItemToModel,
  catalogItemToProvider,
  checkCatalog,
  modelToItem,
  parseCatalogModel,
  parseProviderConfig,
  providerToItem,
} from '../catalog-items';
import type { AdminContext } from '../context';
import { table } from '../context';
import { CatalogValidationError } from '../errors';
import { DEFAULT_CATALOG_FILE, DEFAULT_PROVIDERS_FILE } from '../paths';

function readArray(file: string): unknown[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new CatalogValidationError(`cannot read ${file}: ${(err as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new CatalogValidationError(`${file} is not valid JSON: ${(err as Error).message}`);
  }
  if (!Array.isArray(parsed)) throw new CatalogValidationError(`${file} must hold a JSON array`);
  return parsed;
}

/** The label an entry goes by in error messages, before it is known to be valid. */
function entryLabel(file: string, index: number, entry: unknown, field: 'name' | 'id'): string {
  const tag = typeof entry === 'object' && entry !== null ? (entry as Record<string, unknown>)[field] : undefined;
  return `${basename(file)} entry ${index}${typeof tag === 'string' ? ` (${tag})` : ''}`;
}

/** Reads and validates both files, entry by entry and as a whole; nothing is written. */
export function loadCatalogFiles(input: { providersFile?: string; catalogFile?: string } = {}): {
  providers: ProviderConfig[];
  models: CatalogModel[];
} {
  const providersFile = input.providersFile ?? DEFAULT_PROVIDERS_FILE;
  const catalogFile = input.catalogFile ?? DEFAULT_CATALOG_FILE;
  return parseCatalogEntries(readArray(providersFile), readArray(catalogFile), { providers: providersFile, models: catalogFile });
}

/**
 * Validates the two arrays, entry by entry and as a whole (the files' contents, or the copy a
 * deploy bundles); `sources` name them in error messages. Nothing is written.
 */
export function parseCatalogEntries(
  rawProviders: readonly unknown[],
  rawModels: readonly unknown[],
  sources: { readonly providers: string; readonly models: string } = { providers: 'providers.json', models: 'catalog.json' },
): { providers: ProviderConfig[]; models: CatalogModel[] } {
  const providers = rawProviders.map((e, i) => parseProviderConfig(e, entryLabel(sources.providers, i, e, 'name')));
  const models = rawModels.map((e, i) => parseCatalogModel(e, entryLabel(sources.models, i, e, 'id')));
  if (providers.length === 0) throw new CatalogValidationError(`${basename(sources.providers)} lists no provider`);
  checkCatalog(providers, models, { providers: basename(sources.providers), models: basename(sources.models) });
  return { providers, models };
}

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

/**
 * Imports the provider and model files. Everything is validated before anything is written;
 * re-importing the same files leaves the table unchanged. Items whose keys the files no longer
 * list are deleted (models first, then providers, so a model never outlives its provider).
 */
export async function importCatalog(
  ctx: AdminContext,
  input: { providersFile?: string; catalogFile?: string } = {},
): Promise<{ providers: number; models: number; removedProviders: number; removedModels: number }> {
  return writeCatalog(ctx, loadCatalogFiles(input));
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
