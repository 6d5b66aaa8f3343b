/**
 * The management API's catalog: the import (validated, written whole and pruned, exactly as the
 * deploy-time import does it, through `lambdas/catalog/import.ts`), reading it back, and the
 * check that refuses ids in no catalog.
 */
import type { CatalogModel, ProviderConfig } from '../shared/catalog-types';
import { scanCatalog, writeCatalogEntries, type CatalogTable, type ImportResult } from '../catalog/import';
import { MODEL_PK_PREFIX, catalogItemToModel, catalogItemToProvider } from '../catalog/items';
import { closestId } from '../core/closest-id';
import type { AdminContext } from './directory-context';
import { table } from './directory-context';
import { ModelNotInCatalogError } from './directory-errors';

function catalogTable(ctx: AdminContext): CatalogTable {
  return { doc: ctx.doc, tableName: table(ctx, 'catalog') };
}

/** Writes validated entries (see `parseCatalogEntries`) and prunes what they no longer list. */
export function writeCatalog(
  ctx: AdminContext,
  entries: { readonly providers: readonly ProviderConfig[]; readonly models: readonly CatalogModel[] },
): Promise<ImportResult> {
  return writeCatalogEntries(catalogTable(ctx), { providers: [...entries.providers], models: [...entries.models] });
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

/**
 * Refuses ids that are in no catalog, naming the closest catalogued id. Reads the catalog
 * table, so a model imported a moment ago counts.
 */
export async function requireCatalogued(ctx: AdminContext, ids: readonly string[]): Promise<void> {
  const known = (await scanCatalog(catalogTable(ctx))).filter((i) => i['kind'] === 'model').map((i) => String(i['pk']).slice(MODEL_PK_PREFIX.length));
  const set = new Set(known);
  for (const id of ids) if (!set.has(id)) throw new ModelNotInCatalogError(id, closestId(id, known));
}
