/**
 * The catalog files validated and written straight into a stage's tables: local mode's start-up,
 * the tests and the benchmarks. Operators import through the management API (`sluice catalog import`).
 */
import { readCatalogFiles } from '../cli/catalog-files';
import { parseCatalogEntries } from '../lambdas/catalog/import';
import type { CatalogModel, ProviderConfig } from '../lambdas/shared/catalog-types';
import type { AdminContext } from '../lambdas/store/directory-context';
import { writeCatalog } from '../lambdas/store/directory-catalog';
import type { ImportOptions, ImportResult } from '../lambdas/catalog/import';

/** Reads and validates both files, entry by entry and as a whole; nothing is written. */
export function loadCatalogFiles(input: { providersFile?: string; catalogFile?: string } = {}): { providers: ProviderConfig[]; models: CatalogModel[] } {
  const { providers, models, sources } = readCatalogFiles(input);
  return parseCatalogEntries(providers, models, sources);
}

/**
 * Imports the provider and model files. Everything is validated before anything is written;
 * re-importing the same files leaves the table unchanged. Items the files do not list (a provider
 * or model added at run time) are kept and named in the result, and deleted only with `prune`.
 */
export async function importCatalog(
  ctx: AdminContext,
  input: { providersFile?: string; catalogFile?: string } = {},
  options: ImportOptions = {},
): Promise<ImportResult> {
  return writeCatalog(ctx, loadCatalogFiles(input), options);
}
