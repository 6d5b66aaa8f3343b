/**
 * Where local mode keeps its state, for `npm start` and `npm run start:regions` alike: under
 * `SLUICE_LOCAL_HOME` (default the repository), DynamoDB Local's data in `.dynamodb/` and
 * Sluice's own files in `.sluice/` (both the user's alone: 0700, files 0600).
 */
import { join, resolve } from 'node:path';

/** The local state's paths, read from the environment once. */
export interface LocalStatePaths {
  /** `SLUICE_LOCAL_HOME`, or the repository. */
  readonly home: string;
  /** DynamoDB Local's data (`npm start`'s; `start:regions` keeps a folder per region inside it). */
  readonly dataDir: string;
  /** Sluice's own local files. */
  readonly stateDir: string;
  /** `npm start`'s state file (its ports and PIDs; the CLI finds the management API through it). */
  readonly localStateFile: string;
  /** The management API's token. */
  readonly adminTokenFile: string;
  /** BYOK and provider keys (`SLUICE_LOCAL_SECRETS_FILE` to keep them elsewhere). */
  readonly secretsFile: string;
}

/** The paths for a process started from `repoRoot`, with `env`'s settings. */
export function localStatePaths(repoRoot: string, env: NodeJS.ProcessEnv = process.env): LocalStatePaths {
  const home = resolve(env.SLUICE_LOCAL_HOME || repoRoot);
  const stateDir = join(home, '.sluice');
  return {
    home,
    dataDir: join(home, '.dynamodb'),
    stateDir,
    localStateFile: join(stateDir, 'local.json'),
    adminTokenFile: join(stateDir, 'admin-token'),
    secretsFile: env.SLUICE_LOCAL_SECRETS_FILE || join(stateDir, 'secrets.json'),
  };
}
