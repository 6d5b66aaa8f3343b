/**
 * Catalog import: `config/providers.json` and `config/catalog.json` into the catalog table,
 * validated strictly, written whole, and pruned of what the files no longer list.
 */
import { readFileSync } from 'node:fs';
import type { CatalogModel, ProviderConfig } from '../../lambdas/shared/catalog-types';
import { parseCatalogEntries, scanCatalog, writeCatalogEntries, type CatalogTable, type ImportResult } from '../../lambdas/catalog/import';
import { catalogItemToModel, catalogItemToProvider } from '../../lambdas/catalog/items';
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

export { parseCatalogEntries };

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
 * Imports the provider and model files. Everything is validated before anything is written;
 * re-importing the same files leaves the table unchanged. Items whose keys the files no longer
 * list are deleted (models first, then providers, so a model never outlives its provider).
 */
export async function importCatalog(
  ctx: AdminContext,
  input: { providersFile?: string; catalogFile?: string } = {},
): Promise<ImportResult> {
  return writeCatalog(ctx, loadCatalogFiles(input));
}

/** Writes validated entries (see {@link parseCatalogEntries}) and prunes what they no longer list. */
export function writeCatalog(
  ctx: AdminContext,
  entries: { readonly providers: readonly ProviderConfig[]; readonly models: readonly CatalogModel[] },
): Promise<ImportResult> {
  return writeCatalogEntries(catalogTable(ctx), { providers: [...entries.providers], models: [...entries.models] });
}

function catalogTable(ctx: AdminContext): CatalogTable {
  return { doc: ctx.doc, tableName: table(ctx, 'catalog') };
}

/** Reads the whole catalog table back through the same readers the gateway uses. */
export async function readCatalog(ctx: AdminContext): Promise<{ providers: ProviderConfig[]; models: CatalogModel[] }> {
  const items = await scanCatalog(catalogTable(ctx));
  const providers = items.filter((i) => i['kind'] === 'provider').map(catalogItemToProvider);
  const models = items.filter((i) => i['kind'] === 'model').map(catalogItemToModel);
  providers.sort((a, b) => a.name.localeCompare(b.name));
  models.sort((a, b) => a.id.localeCompare(b.id));
  return { providers, models };
}
