/**
 * `npm start`'s console: the console handler's app on `http://localhost:<port>` over the local
 * stage's tables, its bundle built by esbuild in memory. Kept apart from `start.ts` so the
 * console's part of local mode is one call there.
 */
import type { AdminDeps } from '../lambdas/admin/ports';
import { CONSOLE_ENV, loadConsoleConfig } from '../lambdas/console/env';
import { memoryAssets } from './console-assets';
import { serveConsole, type ConsoleServer } from './console-server';

/** Default port of the local console (`SLUICE_CONSOLE_PORT` changes it; 0 picks a free one). */
export const DEFAULT_CONSOLE_PORT = 8790;

/** Starts the local console on the management API's dependencies (the same store and audit). */
export async function startLocalConsole(opts: { admin: AdminDeps; keyRatePerMinute: number; env?: NodeJS.ProcessEnv }): Promise<ConsoleServer> {
  const env = opts.env ?? process.env;
  const raw = env['SLUICE_CONSOLE_PORT'];
  const port = raw === undefined || raw === '' ? DEFAULT_CONSOLE_PORT : Number(raw);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) throw new Error(`SLUICE_CONSOLE_PORT must be a port number, got ${raw}`);
  const assets = memoryAssets();
  try {
    return await serveConsole({
      port,
      deps: (chosen) => ({
        admin: opts.admin,
        // The origin names the port actually chosen: passkeys are bound to `localhost`, and every
        // change must come from this origin.
        config: loadConsoleConfig({ ...env, [CONSOLE_ENV.origin]: `http://localhost:${chosen}` }),
        assets,
        keyRatePerMinute: opts.keyRatePerMinute,
      }),
    });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') {
      throw new Error(`port ${port} on 127.0.0.1 is already in use: run with SLUICE_CONSOLE_PORT=<another port> npm start`);
    }
    throw err;
  }
}
