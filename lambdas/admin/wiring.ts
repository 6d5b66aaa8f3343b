/**
 * Builds the management API's dependencies once, at cold start, from the validated
 * configuration: the DynamoDB document client, the secret store for BYOK keys, the balance port.
 */
import { regionSetupFromEnv } from '../store/regions';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { documentClient } from '../adapters/dynamo-client';
import type { RuntimeConfig } from '../shared/config';
import { LocalFileSecretStore, SecretsManagerStore, type SecretStore } from '../store/directory-secrets';
import type { AdminDeps } from './app';
import { DynamoBalancePort } from '../store/balance-port';
import { DynamoConfigHome } from '../store/config-home';

/** Environment variable naming local mode's BYOK secret file (the gateway reads the same one). */
export const LOCAL_SECRETS_FILE_ENV = 'SLUICE_LOCAL_SECRETS_FILE';

/** The deps of a stage: Secrets Manager when deployed, the local 0600 file in local mode. */
export function makeAdminDeps(config: RuntimeConfig, env: NodeJS.ProcessEnv = process.env): AdminDeps {
  const doc = documentClient(config);
  const file = env[LOCAL_SECRETS_FILE_ENV];
  let secrets: SecretStore;
  if (config.secretSource === 'env') {
    if (file === undefined || file === '') throw new Error(`${LOCAL_SECRETS_FILE_ENV} must name the local secret file in local mode`);
    secrets = new LocalFileSecretStore(file);
  } else {
    secrets = new SecretsManagerStore(new SecretsManagerClient({}));
  }
  // The gateways' cache lifetime: a limit set on an untracked window is armed after it (`core/limit-arming.ts`).
  // With several regions (`SLUICE_REGIONS`), balances are summed over every region's slices.
  const regions = regionSetupFromEnv(env);
  const ctx = { doc, tablePrefix: config.tablePrefix, stage: config.stage, secrets, cacheTtlMs: config.cacheTtlMs, ...(regions === undefined ? {} : { regions }) };
  return {
    ctx,
    balance: new DynamoBalancePort(ctx),
    // Several regions: changes are accepted only where the recorded configuration home names this region.
    ...(regions === undefined ? {} : { configHome: new DynamoConfigHome(ctx, regions) }),
    // One JSON line per fault, by kind: never a body, a key or a secret.
    logFault: (fields) => console.error(JSON.stringify({ level: 'error', ...fields })),
    env,
  };
}
