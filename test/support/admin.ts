/**
 * The management API for integration tests: the loopback server `npm start` runs, over a test's
 * own tables, with a state file and an admin token of its own so `sluice` (the CLI, as a child
 * process) finds it exactly as it finds a real local stage.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AdminDeps } from '../../lambdas/admin/app';
import { DynamoBalancePort } from '../../lambdas/store/balance-port';
import type { AdminContext } from '../../lambdas/store/directory-context';
import { LocalFileSecretStore } from '../../lambdas/store/directory-secrets';
import { ensureAdminToken, serveAdmin } from '../../local/admin-server';
import type { TestTables } from './dynamo';

/** A running local management API and what a CLI child process needs to reach it. */
export interface TestAdmin {
  readonly url: string;
  readonly token: string;
  /** The folder holding `local.json`, `admin-token` and `secrets.json`. */
  readonly dir: string;
  readonly ctx: AdminContext;
  readonly deps: AdminDeps;
  /** The environment for `bin/sluice.js`: SLUICE_LOCAL_STATE points at this folder's state file. */
  readonly env: NodeJS.ProcessEnv;
  /** Stops the server and removes `dir`. */
  close(): Promise<void>;
}

/** Starts the management API on a free loopback port over `t`'s tables. */
export async function startTestAdmin(t: TestTables, opts: { now?: () => number; secretsFile?: string } = {}): Promise<TestAdmin> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-admin-'));
  const ctx: AdminContext = {
    doc: t.doc,
    tablePrefix: t.prefix,
    stage: 'local',
    // A gateway under test reads provider keys from the same file when it is given.
    secrets: new LocalFileSecretStore(opts.secretsFile ?? join(dir, 'secrets.json')),
    ...(opts.now === undefined ? {} : { now: opts.now }),
  };
  const deps: AdminDeps = { ctx, balance: new DynamoBalancePort(ctx) };
  const { token } = await ensureAdminToken(join(dir, 'admin-token'));
  const server = await serveAdmin({ deps, token, port: 0 });
  writeFileSync(join(dir, 'local.json'), JSON.stringify({ adminUrl: server.url, adminTokenFile: join(dir, 'admin-token') }));
  const env: NodeJS.ProcessEnv = { ...process.env, SLUICE_LOCAL_STATE: join(dir, 'local.json') };
  delete env['SLUICE_LOCAL_SECRETS_FILE'];
  delete env['SLUICE_ADMIN_URL'];
    const close = async (): Promise<void> => {
    try {
      await server.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  return { url: server.url, token, dir, ctx, deps, env, close };
}
