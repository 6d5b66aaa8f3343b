/**
 * Filesystem locations the operator surface uses, resolved from the repository root so the CLI
 * behaves the same from any working directory.
 */
import { resolve } from 'node:path';

/** The repository root (this file lives in `cli/`). */
export const REPO_ROOT = resolve(__dirname, '..');

/** Default provider accounts file. */
export const DEFAULT_PROVIDERS_FILE = resolve(REPO_ROOT, 'config', 'providers.json');
/** Default model catalog file. */
export const DEFAULT_CATALOG_FILE = resolve(REPO_ROOT, 'config', 'catalog.json');

/** Environment variable overriding where the local stage's state file is read. */
export const LOCAL_STATE_ENV = 'SLUICE_LOCAL_STATE';
/** Environment variable overriding where the local stage keeps BYOK secrets (the gateway reads the same one). */
export const LOCAL_SECRETS_ENV = 'SLUICE_LOCAL_SECRETS_FILE';
/** The local stage's state file, written by `npm start`: endpoints, the admin URL and its token file. */
export const DEFAULT_LOCAL_STATE_FILE = resolve(REPO_ROOT, '.sluice', 'local.json');
/** Environment variable holding a deployed stage's management URL (the stack's `AdminUrl` output). */
export const ADMIN_URL_ENV = 'SLUICE_ADMIN_URL';
