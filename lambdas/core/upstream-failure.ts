/**
 * What a provider's refusal means for the client and for a routing profile: the provider's status
 * to SPEC's code, `Retry-After` held to SPEC's bounds, and which failures move a route on to its
 * next model. Pure: the clock is a parameter.
 */
import { SluiceError, relayedRefusal } from './errors';

/** SPEC: the Retry-After of `upstream_rate_limited` is held between these, 5 when none was sent. */
const RETRY_AFTER_MIN = 1;
const RETRY_AFTER_MAX = 60;
const RETRY_AFTER_DEFAULT = 5;

/** SPEC's Retry-After of `upstream_rate_limited`: the provider's figure held to 1..60, 5 when none. */
export function retryAfterSeconds(header: string | undefined, now: number): number {
  const raw = header?.trim();
  if (raw === undefined || raw === '') return RETRY_AFTER_DEFAULT;
  // Delay-seconds, or an HTTP-date.
  let value = /^[+-]?\d+(\.\d+)?$/.test(raw) ? Number(raw) : (Date.parse(raw) - now) / 1000;
  if (!Number.isFinite(value)) return RETRY_AFTER_DEFAULT;
  value = Math.ceil(value);
  return Math.min(RETRY_AFTER_MAX, Math.max(RETRY_AFTER_MIN, value));
}

/** Why an attempt did not produce a reply, and whether a route may try its next model. */
export interface Failure {
  readonly error: SluiceError;
  readonly fallback: boolean;
  /** For `upstream_rate_limited`: the provider's figure, already held between 1 and 60. */
  readonly retryAfterSeconds?: number;
}

/** The model an attempt called, as the failure's message and rules need it. */
export interface Attempted {
  readonly modelId: string;
  readonly providerName: string;
  /** The call ran on the workspace's own provider key. */
  readonly byok: boolean;
}

/**
 * Maps a provider's error status to SPEC's answer. A route moves on after a rate limit, a 5xx, a
 * refusal of Sluice's own credentials, a 404 or a 408; any other refusal of the request itself is
 * relayed with the provider's status and wording and ends the route.
 */
export function providerFailure(status: number, retryAfterHeader: string | undefined, body: unknown, attempted: Attempted, now: number): Failure {
  const name = attempted.providerName;
  if (status === 429) {
    if (attempted.byok) {
      return { fallback: true, error: new SluiceError('provider_key_refused_429', `${name} says the workspace's own key is over its rate limit. Retry with backoff.`) };
    }
    const seconds = retryAfterSeconds(retryAfterHeader, now);
    return {
      fallback: true,
      retryAfterSeconds: seconds,
      error: new SluiceError('upstream_rate_limited', `${name} is rate-limiting calls to ${attempted.modelId}. Retry after the time given.`, {
        'Retry-After': String(seconds),
      }),
    };
  }
  if (attempted.byok) {
    // Any other status on the workspace's own key: SPEC's provider_key_refused. The provider's
    // wording is not relayed for 401/403, since it can echo part of the key.
    return { fallback: status >= 500, error: new SluiceError('provider_key_refused_400', `${name} refused the call made with the workspace's own key (status ${status}).`) };
  }
  if (status >= 500) return { fallback: true, error: new SluiceError('internal', `${name} answered with an error (status ${status}). Retry with backoff.`) };
  if (status === 401 || status === 403) {
    return { fallback: true, error: new SluiceError('internal', `${name} did not accept Sluice's credentials. Retry later; quote the request id if it persists.`) };
  }
  return { fallback: status === 404 || status === 408, error: relayedRefusal(status, body) };
}

/** The call never got a status: the provider could not be reached, or (not the chain's last) did not begin in time. */
export function unreachableFailure(modelId: string, firstByteTimeoutSeconds: number | undefined): Failure {
  const message =
    firstByteTimeoutSeconds !== undefined
      ? `${modelId} did not begin answering within ${firstByteTimeoutSeconds} seconds. Nothing about the request is wrong; retry later.`
      : `The provider still serves ${modelId}, but Sluice cannot reach it right now. Nothing about the request is wrong; retry later.`;
  return { fallback: true, error: new SluiceError('model_not_available', message) };
}

/** The provider's key cannot be had (a missing service key, an unreadable BYOK secret, no address). */
export function keyMissingFailure(providerName: string, byok: boolean, what: 'key' | 'address'): Failure {
  const error =
    what === 'address'
      ? new SluiceError('no_provider_configured', `${providerName} has no address configured.`)
      : byok
        ? new SluiceError('provider_key_refused_400', `The workspace's own key for ${providerName} cannot be read.`)
        : new SluiceError('no_provider_configured', `No key is configured for ${providerName}.`);
  return { error, fallback: true };
}

/** SPEC's 504 once the request's own limit has passed. */
export function timeoutError(requestLimitMs: number): SluiceError {
  return new SluiceError('request_timeout', `The request ran past the ${Math.round(requestLimitMs / 1000)}-second limit. Split the work or stream it.`);
}

/**
 * The answer when no attempt produced a reply: the last attempt's failure. When that is a rate
 * limit, its Retry-After is the soonest any rate-limited model of the chain named.
 */
export function exhaustedError(failures: readonly Failure[]): SluiceError {
  const last = failures[failures.length - 1];
  if (last === undefined) return new SluiceError('internal', 'No provider answered.');
  if (last.error.kind !== 'upstream_rate_limited') return last.error;
  const figures = failures.map((f) => f.retryAfterSeconds).filter((s): s is number => s !== undefined);
  const message = failures.length > 1 ? 'Every model of the route that was tried is rate-limiting calls. Retry after the time given.' : last.error.message;
  return new SluiceError('upstream_rate_limited', message, { 'Retry-After': String(Math.min(...figures)) });
}
