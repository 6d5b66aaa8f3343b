/**
 * Builds the console's dependencies once, at cold start: the management API's (the same store,
 * the same audited use cases), the console's settings, and the browser bundle beside the handler.
 */
import { join } from 'node:path';
import { makeAdminDeps } from '../admin/wiring';
import type { RuntimeConfig } from '../shared/config';
import { FolderAssets } from './assets';
import type { ConsoleConfig } from './env';
import type { ConsoleAssets, ConsoleDeps } from './ports';

/** The deps of a deployed (or locally served) console. */
export function makeConsoleDeps(config: RuntimeConfig, consoleConfig: ConsoleConfig, env: NodeJS.ProcessEnv = process.env, assets?: ConsoleAssets): ConsoleDeps {
  return {
    admin: makeAdminDeps(config, env),
    config: consoleConfig,
    assets: assets ?? new FolderAssets(consoleConfig.assetsDir ?? join(__dirname, 'console-assets')),
    keyRatePerMinute: config.keyRatePerMinute,
  };
}
