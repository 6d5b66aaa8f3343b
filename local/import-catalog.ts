/**
 * The catalog files written straight into a stage's tables: local mode's start-up, the tests and
 * the benchmarks. Operators import through the management API (`sluice catalog import`).
 */
import { loadCatalogFiles } from '../cli/catalog-files';
import type { AdminContext } from '../lambdas/store/directory-context';
import { writeCatalog } from '../lambdas/store/directory-catalog';

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

