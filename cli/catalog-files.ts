/**
 * Reading the catalog files (`config/providers.json`, `config/catalog.json`) on the operator's
 * machine. The CLI sends their entries to the management API, which validates them (naming the
 * file and the entry) before writing anything; local mode and the tests validate them in
 * process through `local/import-catalog.ts`.
 */
import { readFileSync } from 'node:fs';
import { CatalogValidationError } from '../lambdas/catalog/errors';
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

/** The two files' entries as they are, unvalidated, and the file names for messages. */
export function readCatalogFiles(input: { providersFile?: string; catalogFile?: string } = {}): {
  providers: unknown[];
  models: unknown[];
  sources: { providers: string; models: string };
} {
  const providersFile = input.providersFile ?? DEFAULT_PROVIDERS_FILE;
  const catalogFile = input.catalogFile ?? DEFAULT_CATALOG_FILE;
  return { providers: readArray(providersFile), models: readArray(catalogFile), sources: { providers: providersFile, models: catalogFile } };
}
