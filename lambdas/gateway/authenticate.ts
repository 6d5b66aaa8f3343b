/**
 * The door: the bearer key (shape, lookup, expiry) and the key's request rate. DESIGN's order puts
 * expiry before the rate limiter, so an expired key never consumes that allowance.
 */
import { hashKey, isKeyShaped } from '../core/api-key';
import { SluiceError } from '../core/errors';
import { keyRateWindow } from '../core/windows';
import type { KeyRecord, WorkspaceRecord } from '../shared/records';
import { guarded } from './faults';
import type { RequestContext } from './ports';

/** What the rest of the request knows once the key is accepted. */
export interface Caller {
  readonly key: KeyRecord;
  readonly workspace: WorkspaceRecord;
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/**
 * The live key a raw key hashes to, and its workspace; neither when none is. A function of the
 * module, not a closure made per request: V8 compiles such a closure again after each full
 * collection (docs/gateway.md, "Pretenuring").
 */
async function keyAndWorkspace(keys: RequestContext['deps']['keys'], workspaces: RequestContext['deps']['workspaces'], raw: string): Promise<{ key?: KeyRecord; workspace?: WorkspaceRecord }> {
  const key = await keys.findByHash(hashKey(raw));
  if (key === undefined || key.revokedAt !== undefined) return {};
  return { key, workspace: await workspaces.workspace(key.workspaceId) };
}

/** The store is not answering (DynamoWire gives up within its call budget): SPEC's 503 that clears on its own. */
function keysUnreadable(): SluiceError {
  return new SluiceError('balance_unavailable', 'The server could not check the API key right now; try again shortly.');
}

/** Accepts the `Authorization` header's key or throws SPEC's 401. */
export async function authenticate(ctx: RequestContext, authorization: string | undefined): Promise<Caller> {
  const match = authorization === undefined ? null : BEARER.exec(authorization);
  if (match === null) {
    throw new SluiceError('invalid_api_key', 'You did not provide an API key. Send it in the Authorization header as: Bearer <API_KEY>.');
  }
  const raw = match[1] as string;
  if (!isKeyShaped(raw)) {
    throw new SluiceError(
      'invalid_api_key',
      "The API key format is wrong: a Sluice key is slc_live_, slc_stg_ or slc_dev_ followed by 43 characters. Check that it is not another provider's key.",
    );
  }
  const { keys, workspaces } = ctx.deps;
  const { key, workspace } = await guarded(ctx.requestId, 'authenticate', () => keyAndWorkspace(keys, workspaces, raw), keysUnreadable);
  // One sentence for every key that is not live, so a stolen key is not confirmed as once real.
  if (key === undefined || workspace === undefined) throw new SluiceError('invalid_api_key', 'Incorrect API key provided.');
  if (key.expiresAt !== undefined && key.expiresAt <= ctx.deps.clock()) {
    throw new SluiceError('key_expired', `This API key expired at ${new Date(key.expiresAt).toISOString()}. Create a new key; expired keys are not renewed.`);
  }
  return { key, workspace };
}

/** SPEC's 429 for the key's request rate. */
export function rateLimited(perMinute: number, retryAfterSeconds: number): SluiceError {
  return new SluiceError('rate_limit_exceeded', `This key has reached its limit of ${perMinute} requests per minute.`, {
    'Retry-After': String(retryAfterSeconds),
  });
}

/** Counts one request against the key's per-minute rate; throws its 429 when the rate is spent. */
export async function countRequest(ctx: RequestContext, caller: Caller): Promise<void> {
  const { ledger, config, clock } = ctx.deps;
  const result = await guarded(
    ctx.requestId,
    'rate',
    () => {
      const now = clock();
      // Counted where every admission of this minute counts it (the key window, while a limit is tracked).
      return ledger.countRequest(caller.workspace.workspaceId, caller.key.keyId, config.keyRatePerMinute, now, keyRateWindow(caller.key.keyId, caller.key, now));
    },
    () => new SluiceError('balance_unavailable', 'The ledger cannot be reached right now; try again shortly.'),
  );
  if (result.retryAfterSeconds !== undefined) throw rateLimited(config.keyRatePerMinute, result.retryAfterSeconds);
}

/**
 * A refusal between the door and admission still counts one request against the key's rate, so
 * a rate-limited key meets its 429 first, as DESIGN's order has it. Only the rate limit outranks
 * the refusal; a ledger fault while counting does not (it is logged by `countRequest`).
 */
export async function counted(ctx: RequestContext, caller: Caller, err: SluiceError): Promise<SluiceError> {
  try {
    await countRequest(ctx, caller);
  } catch (rateErr) {
    if (rateErr instanceof SluiceError && rateErr.kind === 'rate_limit_exceeded') return rateErr;
  }
  return err;
}
