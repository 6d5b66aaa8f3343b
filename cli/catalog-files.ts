/**
 * Reading the catalog files (`config/providers.json`, `config/catalog.json`) on the operator's
 * machine. The CLI validates them here first, for a message that names the file, and sends the
 * entries to the management API, which validates them again before writing.
 */
import { readFileSync } from 'node:fs';
import type { CatalogModel, ProviderConfig } from '../lambdas/shared/catalog-types';
import { parseCatalogEntries } from '../lambdas/store/directory-catalog-items';
import { CatalogValidationError } from '../lambdas/store/directory-errors';
import { DEFAULT_CATALOG_FILE, DEFAULT_PROVIDERS_FILE } from './paths';

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

/** Reads and validates both files, entry by entry and as a whole; nothing is written. */
export function loadCatalogFiles(input: { providersFile?: string; catalogFile?: string } = {}): {
  providers: ProviderConfig[];
  models: CatalogModel[];
} {
  const providersFile = input.providersFile ?? DEFAULT_PROVIDERS_FILE;
  const catalogFile = input.catalogFile ?? DEFAULT_CATALOG_FILE;
  return parseCatalogEntries(readArray(providersFile), readArray(catalogFile), { providers: providersFile, models: catalogFile });
}

