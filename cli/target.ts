/**
 * Which Sluice the CLI talks to, and how. `local` (the default) reads the state file `npm start`
 * writes for the management API's loopback URL and the admin token's file; `dev`, `stg` and
 * `prod` call the stage's management Function URL (`--endpoint` or `SLUICE_ADMIN_URL`, printed
 * by `cdk deploy` as `AdminUrl`), signed with the default AWS credentials.
 */
import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { LocalStageNotRunningError, ValidationError } from '../lambdas/store/directory-errors';
import { localAdminApi, signedAdminApi, type AdminApi } from './api-client';
import { ADMIN_URL_ENV, DEFAULT_LOCAL_STATE_FILE, LOCAL_STATE_ENV } from './paths';

/** Stages the CLI can target. */
export const STAGES = ['local', 'dev', 'stg', 'prod'] as const;
/** One of `STAGES`. */
export type Stage = (typeof STAGES)[number];

/** What the CLI reads of `.sluice/local.json` (npm start writes more). */
export interface LocalState {
  /** The local management API, e.g. `http://127.0.0.1:8788`. */
  readonly adminUrl: string;
  /** The admin token's file; default `admin-token` beside the state file. */
  readonly adminTokenFile?: string;
}

/** A resolved target. */
export interface Target {
  readonly api: AdminApi;
  /** Human description, e.g. `local (http://127.0.0.1:8788)`. */
  readonly description: string;
}

function readJsonObject(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new LocalStageNotRunningError(path);
    throw err;
  }
  try {
    const parsed: unknown = JSON.parse(text);
    return typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : {};
  } catch {
    throw new ValidationError(`${path} is not JSON; run npm start again`);
  }
}

/** Reads and checks the local state file. */
export function readLocalState(path: string): LocalState {
  const o = readJsonObject(path);
  const adminUrl = o['adminUrl'];
  const adminTokenFile = o['adminTokenFile'];
  if (typeof adminUrl !== 'string' || (adminTokenFile !== undefined && typeof adminTokenFile !== 'string')) {
    throw new ValidationError(`${path} names no management API (adminUrl); is npm start still starting? run it again`);
  }
  return { adminUrl, ...(typeof adminTokenFile === 'string' ? { adminTokenFile } : {}) };
}

/** The region of a Function URL (`<id>.lambda-url.<region>.on.aws`), when it says. */
function regionOfUrl(url: string): string | undefined {
  try {
    return /\.lambda-url\.([a-z0-9-]+)\.on\.aws$/.exec(new URL(url).hostname)?.[1];
  } catch {
    return undefined;
  }
}

/** Builds the management API client for a stage. */
export function resolveTarget(opts: { stage: string; region?: string; endpoint?: string; env: NodeJS.ProcessEnv; fetchImpl?: typeof fetch }): Target {
  if (!(STAGES as readonly string[]).includes(opts.stage)) {
    throw new ValidationError(`--stage must be one of ${STAGES.join(', ')}, got ${JSON.stringify(opts.stage)}`);
  }
  if (opts.stage === 'local') {
    const statePath = opts.env[LOCAL_STATE_ENV] || DEFAULT_LOCAL_STATE_FILE;
    const state = readLocalState(statePath);
    const tokenFile =
      state.adminTokenFile === undefined
        ? resolve(dirname(statePath), 'admin-token')
        : isAbsolute(state.adminTokenFile)
          ? state.adminTokenFile
          : resolve(dirname(statePath), state.adminTokenFile);
    let token: string;
    try {
      token = readFileSync(tokenFile, 'utf8').trim();
    } catch {
      throw new ValidationError(`cannot read the admin token at ${tokenFile}; run npm start (it creates the token on its first start)`);
    }
    return { api: localAdminApi(opts.endpoint ?? state.adminUrl, token, opts.fetchImpl), description: `local (${state.adminUrl})` };
  }
  const url = opts.endpoint ?? opts.env[ADMIN_URL_ENV];
  if (url === undefined || url === '') {
    throw new ValidationError(`--stage ${opts.stage} needs the management URL: --endpoint <AdminUrl output of cdk deploy>, or ${ADMIN_URL_ENV}`);
  }
  const region = opts.region ?? regionOfUrl(url) ?? opts.env['AWS_REGION'] ?? opts.env['AWS_DEFAULT_REGION'];
  if (region === undefined) throw new ValidationError('name the AWS region with --region (or AWS_REGION)');
  return { api: signedAdminApi(url, region, opts.fetchImpl), description: `${opts.stage} (${url}, region ${region})` };
}
