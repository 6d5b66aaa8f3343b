/**
 * The attempts: the admitted request's models tried in the customer's order, one upstream call
 * each, until one replies or a failure ends the chain. Each call but the last has a limited wait
 * for its first byte; all of them share the request's own deadline.
 */
import type { SluiceError } from '../core/errors';
import { exhaustedError, keyMissingFailure, providerFailure, timeoutError, unreachableFailure, type Failure } from '../core/upstream-failure';
import type { Admitted, PricedCandidate } from './admit';
import { logFault } from './faults';
import type { RequestContext, UpstreamResponse } from './ports';
import { baseUrl, buildUpstreamBody, endpointUrl, serviceKey, upstreamHeaders } from './providers';

/** Error bodies from providers are read up to this size; the rest is dropped. */
const MAX_ERROR_BODY = 65_536;

class DeadlineError extends Error {
  override readonly name = 'DeadlineError';
}

class FirstByteTimeoutError extends Error {
  override readonly name = 'FirstByteTimeoutError';
}

/** The request's own deadline (SPEC's 540 s from its start): one controller every phase after admission shares. */
export interface Deadline {
  readonly controller: AbortController;
  clear(): void;
}

/** Starts the request's deadline timer. */
export function startDeadline(ctx: RequestContext): Deadline {
  const controller = new AbortController();
  const left = ctx.startedAt + ctx.deps.config.requestLimitMs - ctx.deps.clock();
  const timer = setTimeout(() => controller.abort(new DeadlineError()), Math.max(0, left));
  return { controller, clear: () => clearTimeout(timer) };
}

/** How the attempts ended: a provider's reply to relay, or the answer when none replied. */
export type Attempts =
  | { readonly kind: 'reply'; readonly candidate: PricedCandidate; readonly response: UpstreamResponse; readonly injectedUsage: boolean; readonly attempts: number }
  | { readonly kind: 'failed'; readonly error: SluiceError; readonly timedOut: boolean; readonly attempts: number };

/** Tries the candidates in order; a failure that may move the route on moves it on. */
export async function attemptAll(ctx: RequestContext, admitted: Admitted, overall: AbortSignal): Promise<Attempts> {
  const failures: Failure[] = [];
  const { candidates } = admitted;
  let attempts = 0;
  for (const [index, candidate] of candidates.entries()) {
    attempts += 1;
    const result = await attemptOne(ctx, admitted, candidate, overall, index === candidates.length - 1);
    if (result.kind === 'reply') return { ...result, candidate, attempts };
    failures.push(result.failure);
    if (!result.failure.fallback || overall.aborted) break;
  }
  const timedOut = overall.aborted;
  return { kind: 'failed', error: timedOut ? timeoutError(ctx.deps.config.requestLimitMs) : exhaustedError(failures), timedOut, attempts };
}

type One = { readonly kind: 'reply'; readonly response: UpstreamResponse; readonly injectedUsage: boolean } | { readonly kind: 'failed'; readonly failure: Failure };

async function attemptOne(ctx: RequestContext, admitted: Admitted, candidate: PricedCandidate, overall: AbortSignal, last: boolean): Promise<One> {
  const { deps } = ctx;
  const byok = candidate.byokSecret !== undefined;
  let key: string | null | undefined;
  try {
    key = byok ? await deps.secrets.get(candidate.byokSecret as string) : await serviceKey(candidate.provider, deps);
  } catch (err) {
    logFault(ctx.requestId, 'provider_key', err);
    key = undefined;
  }
  if (key === undefined) return { kind: 'failed', failure: keyMissingFailure(candidate.provider.displayName, byok, 'key') };
  const base = baseUrl(candidate.provider, deps.env);
  if (base === undefined) return { kind: 'failed', failure: keyMissingFailure(candidate.provider.displayName, byok, 'address') };

  const family = admitted.rules.family;
  const { text, injectedUsage } = buildUpstreamBody(admitted.text, admitted.body, family, candidate.model, candidate.provider);
  const payload = Buffer.from(text, 'utf8');
  const started = deps.clock();
  // A model that is not the chain's last gets a limited wait for its first byte (the status line),
  // and only for that: once it has begun answering, only the request's own deadline applies.
  const firstByte = last ? undefined : new AbortController();
  const firstByteTimer = firstByte === undefined ? undefined : setTimeout(() => firstByte.abort(new FirstByteTimeoutError()), deps.config.attemptTimeoutMs);
  try {
    const response = await deps.upstream.send({
      url: endpointUrl(base, family),
      headers: upstreamHeaders(candidate.provider, key, payload.length),
      body: payload,
      signal: firstByte === undefined ? overall : AbortSignal.any([overall, firstByte.signal]),
    });
    clearTimeout(firstByteTimer);
    deps.telemetry.upstream?.({ requestId: ctx.requestId, provider: candidate.provider.name, status: response.status, latencyMs: deps.clock() - started });
    if (response.status >= 200 && response.status < 300) return { kind: 'reply', response, injectedUsage };
    const errBody = parseJson(await readLimited(response.body, MAX_ERROR_BODY));
    const attempted = { modelId: candidate.model.id, providerName: candidate.provider.displayName, byok };
    return { kind: 'failed', failure: providerFailure(response.status, response.headers['retry-after'], errBody, attempted, deps.clock()) };
  } catch (err) {
    // No answer at all (refused, reset, timed out) is the provider's fault as much as a 5xx: it
    // counts in the provider's UpstreamErrors (status 0), which its error-rate alarm watches.
    deps.telemetry.upstream?.({ requestId: ctx.requestId, provider: candidate.provider.name, status: 0, latencyMs: deps.clock() - started });
    if (overall.aborted) return { kind: 'failed', failure: { fallback: false, error: timeoutError(deps.config.requestLimitMs) } };
    const timedOut = firstByte?.signal.aborted === true;
    // A provider that cannot be reached is logged by kind too: it is a fault, if not ours.
    if (!timedOut) logFault(ctx.requestId, 'upstream', err);
    return { kind: 'failed', failure: unreachableFailure(candidate.model.id, timedOut ? Math.round(deps.config.attemptTimeoutMs / 1000) : undefined) };
  } finally {
    clearTimeout(firstByteTimer);
  }
}

async function readLimited(body: UpstreamResponse['body'], limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const b = chunk as Buffer;
    if (size < limit) chunks.push(b.subarray(0, limit - size));
    size += b.length;
  }
  return Buffer.concat(chunks);
}

/** Parses JSON, or undefined when it is not JSON. */
export function parseJson(buf: Buffer): unknown {
  return parseJsonText(buf.toString('utf8'));
}

/** Parses JSON text, or undefined when it is not JSON. */
export function parseJsonText(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
