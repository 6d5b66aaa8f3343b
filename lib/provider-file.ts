/**
 * Reads the provider accounts from `config/` at synth time. Only what CDK needs is checked here
 * (a name and where the key lives); the catalog import validates the rest of each entry.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { ProviderConfig } from '../lambdas/shared/catalog-types';

/** The repository root, where `config/` and `lambdas/` live. */
export const REPO_ROOT = path.resolve(__dirname, '..');

/** Default location of the provider accounts: a JSON array of `ProviderConfig`. */
export const PROVIDERS_FILE = path.join(REPO_ROOT, 'config', 'providers.json');

/** Thrown when the provider file exists but cannot be used. */
export class ProviderFileError extends Error {
  override readonly name = 'ProviderFileError';
}

/** The part of a provider entry that CDK reads. */
export type ProviderKeySource = Pick<ProviderConfig, 'name' | 'keySource'>;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function toKeySource(entry: unknown, where: string): ProviderKeySource {
  if (!isRecord(entry)) throw new ProviderFileError(`${where}: expected an object`);
  const { name, keySource } = entry;
  if (typeof name !== 'string' || name === '') throw new ProviderFileError(`${where}: name must be a non-empty string`);
  if (keySource === 'none') return { name, keySource };
  if (isRecord(keySource) && typeof keySource.secretName === 'string' && typeof keySource.env === 'string') {
    return { name, keySource: { secretName: keySource.secretName, env: keySource.env } };
  }
  throw new ProviderFileError(`${where} (${name}): keySource must be 'none' or { secretName, env }`);
}

/**
 * The providers' key sources from a provider file: a JSON array of `ProviderConfig`, or an
 * object with a `providers` array (the shape of `CatalogFile`). A missing file yields an empty
 * list, so the stack synthesizes before the catalog exists; a malformed one throws.
 */
export function loadProviderKeySources(file: string = PROVIDERS_FILE): readonly ProviderKeySource[] {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    if (isRecord(err) && err.code === 'ENOENT') return [];
    throw err;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new ProviderFileError(`${file}: not JSON (${err instanceof Error ? err.message : String(err)})`);
  }
  const list = Array.isArray(parsed) ? parsed : isRecord(parsed) ? parsed.providers : undefined;
  if (!Array.isArray(list)) throw new ProviderFileError(`${file}: expected an array of providers`);
  return list.map((entry: unknown, i) => toKeySource(entry, `${file}[${i}]`));
}
