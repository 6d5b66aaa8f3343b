/**
 * Where the operator surface keeps a workspace's own provider keys (BYOK). A small port with two
 * adapters: Secrets Manager for deployed stages, a 0600 JSON file for the local stage. The gateway
 * reads the same secrets through its own port; both sides agree only on the secret name
 * (`byokSecretName`) and, locally, on the file's shape: one JSON object of name → value.
 */
import {
  CreateSecretCommand,
  DeleteSecretCommand,
  GetSecretValueCommand,
  InvalidRequestException,
  PutSecretValueCommand,
  ResourceNotFoundException,
  RestoreSecretCommand,
  SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';

/** A place to keep secret strings by name. */
export interface SecretStore {
  /** Creates or replaces the secret. */
  put(name: string, value: string): Promise<void>;
  /** The secret's value, or undefined when there is none. */
  get(name: string): Promise<string | undefined>;
  /** Removes the secret; removing one that does not exist is not an error. */
  delete(name: string): Promise<void>;
}

/** The secret name of a workspace's own key for a provider: `sluice/<stage>/byok/<workspaceId>/<provider>`. */
export function byokSecretName(stage: string, workspaceId: string, provider: string): string {
  return `sluice/${stage}/byok/${workspaceId}/${provider}`;
}

/** Options of `SecretsManagerStore`. */
export interface SecretsManagerStoreOptions {
  /**
   * Days a deleted secret stays recoverable.
   * @default 7 (the shortest Secrets Manager allows), so a mistaken removal can be undone
   */
  readonly recoveryWindowInDays?: number;
}

/** Secrets Manager adapter for deployed stages. */
export class SecretsManagerStore implements SecretStore {
  private readonly client: SecretsManagerClient;
  private readonly recoveryWindowInDays: number;

  constructor(client: SecretsManagerClient = new SecretsManagerClient({}), options: SecretsManagerStoreOptions = {}) {
    this.client = client;
    this.recoveryWindowInDays = options.recoveryWindowInDays ?? 7;
  }

  async put(name: string, value: string): Promise<void> {
    try {
      await this.client.send(new PutSecretValueCommand({ SecretId: name, SecretString: value }));
    } catch (err) {
      if (err instanceof ResourceNotFoundException) {
        await this.client.send(new CreateSecretCommand({ Name: name, SecretString: value }));
        return;
      }
      // A secret removed earlier is only scheduled for deletion and refuses new values until
      // restored; setting the key again is exactly the operator's intent to restore it.
      if (err instanceof InvalidRequestException && /deletion/i.test(err.message)) {
        await this.client.send(new RestoreSecretCommand({ SecretId: name }));
        await this.client.send(new PutSecretValueCommand({ SecretId: name, SecretString: value }));
        return;
      }
      throw err;
    }
  }

  async get(name: string): Promise<string | undefined> {
    try {
      const out = await this.client.send(new GetSecretValueCommand({ SecretId: name }));
      return out.SecretString;
    } catch (err) {
      if (err instanceof ResourceNotFoundException) return undefined;
      throw err;
    }
  }

  async delete(name: string): Promise<void> {
    try {
      await this.client.send(new DeleteSecretCommand({ SecretId: name, RecoveryWindowInDays: this.recoveryWindowInDays }));
    } catch (err) {
      if (err instanceof ResourceNotFoundException) return;
      throw err;
    }
  }
}

/**
 * Local-stage adapter: one JSON object `{ "<name>": "<value>" }` in a file only its owner may
 * read (mode 0600), by default `.sluice/secrets.json` at the repository root (git-ignored).
 * Writes go to a temporary file first and are renamed into place, so a reader never sees half.
 */
export class LocalFileSecretStore implements SecretStore {
  /** Path of the JSON file. */
  readonly path: string;

  constructor(path: string) {
    this.path = path;
  }

  private async load(): Promise<Record<string, string>> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
      throw err;
    }
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      throw new Error(`${this.path} is not a JSON object of secret names to values`);
    }
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(parsed)) if (typeof v === 'string') out[k] = v;
    return out;
  }

  private async save(secrets: Record<string, string>): Promise<void> {
    await mkdir(dirname(this.path), { recursive: true, mode: 0o700 });
    const tmp = `${this.path}.${process.pid}.${Date.now()}.tmp`;
    await writeFile(tmp, `${JSON.stringify(secrets, null, 2)}\n`, { mode: 0o600 });
    // The mode given to writeFile is filtered by the umask; set it explicitly.
    await chmod(tmp, 0o600);
    await rename(tmp, this.path);
  }

  async put(name: string, value: string): Promise<void> {
    const secrets = await this.load();
    secrets[name] = value;
    await this.save(secrets);
  }

  async get(name: string): Promise<string | undefined> {
    return (await this.load())[name];
  }

  async delete(name: string): Promise<void> {
    const secrets = await this.load();
    if (!(name in secrets)) return;
    delete secrets[name];
    await this.save(secrets);
  }
}
