/**
 * Secret sources for provider keys. Deployed: Secrets Manager, cached with an expiry so a rotated
 * key is picked up. Local: provider keys from SLUICE_PROVIDER_KEY_<NAME> variables, and the
 * workspaces' own keys from the CLI's git-ignored `.sluice/secrets.json`. Values are never logged.
 */
import { readFile } from 'node:fs/promises';
import { GetSecretValueCommand, type SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { SecretSource } from '../gateway/ports';
import { TtlCache } from './ttl-cache';

/** Secrets Manager, with values cached for `ttlMs`. */
export class SecretsManagerSource implements SecretSource {
  private readonly cache: TtlCache<string | undefined>;

  constructor(
    private readonly client: SecretsManagerClient,
    ttlMs = 300_000,
  ) {
    this.cache = new TtlCache(ttlMs);
  }

  get(name: string): Promise<string | undefined> {
    return this.cache.get(name, async () => {
      try {
        const out = await this.client.send(new GetSecretValueCommand({ SecretId: name }));
        return out.SecretString || undefined;
      } catch (err) {
        if (err instanceof Error && err.name === 'ResourceNotFoundException') return undefined;
        throw err;
      }
    });
  }
}

/**
 * Local mode: `sluice/<stage>/providers/<name>` maps to SLUICE_PROVIDER_KEY_<NAME>; any other
 * name is looked up in the local secret file the CLI writes.
 */
export class LocalSecretSource implements SecretSource {
  constructor(
    private readonly env: Readonly<Record<string, string | undefined>>,
    private readonly file: string,
  ) {}

  async get(name: string): Promise<string | undefined> {
    const provider = /\/providers\/([A-Za-z0-9_-]+)$/.exec(name);
    if (provider !== null) {
      const value = this.env[`SLUICE_PROVIDER_KEY_${(provider[1] as string).toUpperCase().replace(/-/g, '_')}`];
      return value || undefined;
    }
    try {
      const stored: unknown = JSON.parse(await readFile(this.file, 'utf8'));
      if (stored !== null && typeof stored === 'object') {
        const value = (stored as Record<string, unknown>)[name];
        return typeof value === 'string' ? value : undefined;
      }
      return undefined;
    } catch {
      return undefined;
    }
  }
}
