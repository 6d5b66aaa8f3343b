/**
 * Which Sluice the CLI talks to. `local` (the default) reads the state file `npm start` writes;
 * `dev`, `stg` and `prod` use the default AWS credentials and the stage's table prefix.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import type { AdminContext } from './context';
import { LocalStageNotRunningError, ValidationError } from './errors';
import { DEFAULT_LOCAL_STATE_FILE, LOCAL_SECRETS_ENV, LOCAL_STATE_ENV } from './paths';
import { LocalFileSecretStore, SecretsManagerStore } from './secret-store';

/** Stages the CLI can target. */
export const STAGES = ['local', 'dev', 'stg', 'prod'] as const;
/** One of `STAGES`. */
export type Stage = (typeof STAGES)[number];

/** What `npm start` writes to `.sluice/local.json`. */
export interface LocalState {
  /** DynamoDB Local's endpoint, e.g. `http://127.0.0.1:8000`. */
  readonly endpoint: string;
  /** Table prefix of the local tables, e.g. `sluice-local-`. */
  readonly tablePrefix: string;
  /** Where the local stage keeps BYOK secrets; default `secrets.json` beside the state file. */
  readonly secretsFile?: string;
}

/** A resolved target: the admin context plus a way to release its clients. */
export interface Target {
  readonly ctx: AdminContext;
  /** Human description, e.g. `local (http://127.0.0.1:8000, sluice-local-)`. */
  readonly description: string;
  close(): void;
}

/** Reads and checks the local state file. */
export function readLocalState(path: string): LocalState {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new LocalStageNotRunningError(path);
    throw err;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new ValidationError(`${path} is not JSON; run npm start again`);
  }
  const o = (typeof parsed === 'object' && parsed !== null ? parsed : {}) as Record<string, unknown>;
  const endpoint = o['endpoint'];
  const tablePrefix = o['tablePrefix'];
  const secretsFile = o['secretsFile'];
  if (typeof endpoint !== 'string' || typeof tablePrefix !== 'string' || (secretsFile !== undefined && typeof secretsFile !== 'string')) {
    throw new ValidationError(`${path} must hold { endpoint, tablePrefix }; run npm start again`);
  }
  return { endpoint, tablePrefix, ...(typeof secretsFile === 'string' ? { secretsFile } : {}) };
}

/** Builds the admin context for a stage. */
export function resolveTarget(opts: { stage: string; region?: string; env: NodeJS.ProcessEnv }): Target {
  if (!(STAGES as readonly string[]).includes(opts.stage)) {
    throw new ValidationError(`--stage must be one of ${STAGES.join(', ')}, got ${JSON.stringify(opts.stage)}`);
  }
  if (opts.stage === 'local') {
    const statePath = opts.env[LOCAL_STATE_ENV] || DEFAULT_LOCAL_STATE_FILE;
    const state = readLocalState(statePath);
    const client = new DynamoDBClient({
      endpoint: state.endpoint,
      region: 'local',
      // Placeholders: DynamoDB Local runs with -sharedDb and ignores them, and they keep the SDK
      // from looking for real credentials on the operator's machine.
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      maxAttempts: 3,
    });
    const secretsPath =
      opts.env[LOCAL_SECRETS_ENV] ||
      (state.secretsFile === undefined
        ? resolve(dirname(statePath), 'secrets.json')
        : isAbsolute(state.secretsFile)
          ? state.secretsFile
          : resolve(dirname(statePath), state.secretsFile));
    return {
      ctx: {
        doc: DynamoDBDocumentClient.from(client),
        tablePrefix: state.tablePrefix,
        stage: 'local',
        secrets: new LocalFileSecretStore(secretsPath),
      },
      description: `local (${state.endpoint}, ${state.tablePrefix})`,
      close: () => client.destroy(),
    };
  }
  const region = opts.region;
  const client = new DynamoDBClient(region === undefined ? {} : { region });
  const secrets = new SecretsManagerClient(region === undefined ? {} : { region });
  const tablePrefix = `sluice-${opts.stage}-`;
  return {
    ctx: {
      doc: DynamoDBDocumentClient.from(client),
      tablePrefix,
      stage: opts.stage,
      secrets: new SecretsManagerStore(secrets),
    },
    description: `${opts.stage} (${tablePrefix}, region ${region ?? 'from the AWS environment'})`,
    close: () => {
      client.destroy();
      secrets.destroy();
    },
  };
}
