/**
 * Forwarding an admitted request: the attempts in the customer's order, the reply relayed to the
 * client untouched (SPEC's `model` echo aside), and settlement on the provider's own counts,
 * whatever the client or the provider did. Once the status has gone out, a fault is written as one
 * in-band error frame (DESIGN decision 9).
 */
import { SluiceError, errorFrame, relayedRefusal, renderError, type ErrorKind } from '../core/errors';
import { setTopLevel } from '../core/json-splice';
import { chargeMicros, costMicros, type HoldSize, type Rates } from '../core/pricing';
import { SseRelay, readUsage, usageComment } from '../core/sse';
import type { CatalogModel } from '../shared/catalog-types';
import type { EndpointFamily, HoldRecord, Outcome, TokenCounts } from '../shared/records';
import type { GatewayDeps } from './app';
import type { AdmissionLimits, ResponseSink, UpstreamResponse } from './ports';
import { baseUrl, buildUpstreamBody, endpointUrl, serviceKey, upstreamHeaders } from './providers';
import type { Candidate } from './resolve';

/** SPEC: the Retry-After of `upstream_rate_limited` is held between these, 5 when none was sent. */
const RETRY_AFTER_MIN = 1;
const RETRY_AFTER_MAX = 60;
const RETRY_AFTER_DEFAULT = 5;
/** Error bodies from providers are read up to this size; the rest is dropped. */
const MAX_ERROR_BODY = 65_536;
/** Frames that carry no output token (role, finish, usage) tolerated above the ceiling. */
const FRAME_SLACK = 4;
/** Minimum number of output tokens an extension of a hold adds. */
const EXTENSION_TOKENS = 256;

export interface ForwardArgs {
  readonly deps: GatewayDeps;
  readonly body: string;
  readonly parsed: Readonly<Record<string, unknown>>;
  readonly family: EndpointFamily;
  readonly requestedModel: string;
  readonly route: boolean;
  readonly candidates: readonly Candidate[];
  readonly hold: HoldRecord;
  readonly holdSize: HoldSize | undefined;
  readonly limits: AdmissionLimits;
  readonly sink: ResponseSink;
  readonly requestId: string;
  readonly traceId: string;
  readonly startedAt: number;
  readonly onStatus: (status: number, code: string | null) => void;
  /** Told how the request ended, for the request's telemetry line. */
  readonly onSettled?: (fields: { readonly chargeMicros: number; readonly firstByteMs?: number; readonly servedBy?: string; readonly outcome: Outcome }) => void;
}

/** Why an attempt did not produce a reply, and whether the next model may be tried. */
interface Failure {
  readonly error: SluiceError;
  readonly fallback: boolean;
}

class DeadlineError extends Error {
  override readonly name = 'DeadlineError';
}

function ratesOf(model: CatalogModel): Rates {
  const input = model.inputRateThousandths ?? 0;
  return {
    inputRateThousandths: input,
    cachedInputRateThousandths: model.cachedInputRateThousandths ?? input,
    outputRateThousandths: model.outputRateThousandths ?? 0,
  };
}

function retryAfter(header: string | undefined): number {
  if (header === undefined) return RETRY_AFTER_DEFAULT;
  const seconds = Number(header);
  let value = Number.isFinite(seconds) ? seconds : (Date.parse(header) - Date.now()) / 1000;
  if (!Number.isFinite(value)) return RETRY_AFTER_DEFAULT;
  value = Math.ceil(value);
  return Math.min(RETRY_AFTER_MAX, Math.max(RETRY_AFTER_MIN, value));
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

function parseJson(buf: Buffer): unknown {
  try {
    return JSON.parse(buf.toString('utf8'));
  } catch {
    return undefined;
  }
}

/** Maps a provider's error status to SPEC's answer and whether a route may move on. */
function failureFor(status: number, headers: UpstreamResponse['headers'], body: unknown, candidate: Candidate): Failure {
  const byok = candidate.byokSecret !== undefined;
  const name = candidate.provider.displayName;
  if (status === 429) {
    if (byok) {
      return { fallback: true, error: new SluiceError('provider_key_refused_429', `${name} says the workspace's own key is over its rate limit. Retry with backoff.`) };
    }
    return {
      fallback: true,
      error: new SluiceError('upstream_rate_limited', `${name} is rate-limiting calls to ${candidate.model.id}. Retry after the time given.`, {
        'Retry-After': String(retryAfter(headers['retry-after'])),
      }),
    };
  }
  if (byok) {
    // Any other status on the workspace's own key: SPEC's provider_key_refused. The provider's
    // wording is not relayed for 401/403, since it can echo part of the key.
    return {
      fallback: status >= 500,
      error: new SluiceError('provider_key_refused_400', `${name} refused the call made with the workspace's own key (status ${status}).`),
    };
  }
  if (status >= 500) {
    return { fallback: true, error: new SluiceError('internal', `${name} answered with an error (status ${status}). Retry with backoff.`) };
  }
  if (status === 401 || status === 403) {
    return { fallback: true, error: new SluiceError('internal', `${name} did not accept Sluice's credentials. Retry later; quote the request id if it persists.`) };
  }
  // A provider's own refusal of the request: relayed with its status and wording.
  return { fallback: status === 404 || status === 408, error: relayedRefusal(status, body) };
}

/** Runs the attempts, relays the reply, and settles. Never throws. */
export async function forward(args: ForwardArgs): Promise<void> {
  const { deps, candidates } = args;
  const overall = new AbortController();
  const deadlineMs = args.startedAt + deps.config.requestLimitMs;
  const timer = setTimeout(() => overall.abort(new DeadlineError()), Math.max(0, deadlineMs - deps.clock()));
  let attempts = 0;
  let failure: Failure | undefined;
  try {
    for (const [index, candidate] of candidates.entries()) {
      attempts += 1;
      const result = await attempt(args, candidate, overall.signal, index === candidates.length - 1);
      if (result.kind === 'reply') {
        if (args.parsed.stream === true) await relayStream(args, candidate, result.response, result.injectedUsage, attempts, overall);
        else await relayBody(args, candidate, result.response, attempts);
        return;
      }
      failure = result.failure;
      if (!failure.fallback || overall.signal.aborted) break;
    }
    const error =
      overall.signal.aborted
        ? new SluiceError('request_timeout', `The request ran past the ${Math.round(deps.config.requestLimitMs / 1000)}-second limit. Split the work or stream it.`)
        : (failure?.error ?? new SluiceError('internal', 'No provider answered.'));
    await writeError(args, error);
    await settle(args, { counts: undefined, chargeMicros: 0, attempts, status: error.status, outcome: 'provider_error', stream: false });
  } catch (err) {
    // A fault of our own after admission: answer if nothing was sent, and release the hold.
    console.error(JSON.stringify({ level: 'error', requestId: args.requestId, fault: err instanceof Error ? err.name : typeof err }));
    if (!args.sink.started) await writeError(args, new SluiceError('internal', 'The server had an error while processing your request.')).catch(() => undefined);
    else await args.sink.end().catch(() => undefined);
    await settle(args, { counts: undefined, chargeMicros: 0, attempts, status: 500, outcome: 'upstream_fault', stream: false });
  } finally {
    clearTimeout(timer);
  }
}

type AttemptResult = { kind: 'reply'; response: UpstreamResponse; injectedUsage: boolean } | { kind: 'failed'; failure: Failure };

async function attempt(args: ForwardArgs, candidate: Candidate, overall: AbortSignal, last: boolean): Promise<AttemptResult> {
  const { deps, family } = args;
  let key: string | null | undefined;
  try {
    key = candidate.byokSecret !== undefined ? await deps.secrets.get(candidate.byokSecret) : await serviceKey(candidate.provider, deps);
  } catch {
    key = undefined;
  }
  if (key === undefined) {
    const error =
      candidate.byokSecret !== undefined
        ? new SluiceError('provider_key_refused_400', `The workspace's own key for ${candidate.provider.displayName} cannot be read.`)
        : new SluiceError('no_provider_configured', `No key is configured for ${candidate.provider.displayName}.`);
    return { kind: 'failed', failure: { error, fallback: true } };
  }
  const base = baseUrl(candidate.provider, deps.env);
  if (base === undefined) {
    return { kind: 'failed', failure: { error: new SluiceError('no_provider_configured', `${candidate.provider.displayName} has no address configured.`), fallback: true } };
  }
  const { text, injectedUsage } = buildUpstreamBody(args.body, args.parsed, family, candidate.model, candidate.provider);
  const payload = Buffer.from(text, 'utf8');
  const started = deps.clock();
  try {
    const response = await deps.upstream.send({
      url: endpointUrl(base, family),
      headers: upstreamHeaders(candidate.provider, key, payload.length),
      body: payload,
      signal: last ? overall : attemptSignal(overall, deps.config.attemptTimeoutMs),
    });
    deps.telemetry.upstream?.({ provider: candidate.provider.name, status: response.status, latencyMs: deps.clock() - started });
    if (response.status >= 200 && response.status < 300) return { kind: 'reply', response, injectedUsage };
    const errBody = parseJson(await readLimited(response.body, MAX_ERROR_BODY));
    return { kind: 'failed', failure: failureFor(response.status, response.headers, errBody, candidate) };
  } catch {
    if (overall.aborted) return { kind: 'failed', failure: { fallback: false, error: new SluiceError('request_timeout', 'The request ran past its time limit.') } };
    return {
      kind: 'failed',
      failure: {
        fallback: true,
        error: new SluiceError(
          'model_not_available',
          `The provider still serves ${candidate.model.id}, but Sluice cannot reach it right now. Nothing about the request is wrong; retry later.`,
        ),
      },
    };
  }
}

/** A signal that aborts with the overall one, or when a non-final attempt waits too long. */
function attemptSignal(overall: AbortSignal, timeoutMs: number): AbortSignal {
  return AbortSignal.any([overall, AbortSignal.timeout(timeoutMs)]);
}

function successHeaders(args: ForwardArgs, candidate: Candidate, attempts: number, contentType: string): Record<string, string> {
  return {
    'content-type': contentType,
    'x-sluice-request-id': args.requestId,
    'x-request-id': args.requestId,
    'x-sluice-served-by': candidate.model.id,
    'x-sluice-provider': candidate.provider.name,
    'x-sluice-retry-attempt-count': String(attempts - 1),
    'x-sluice-cache-status': 'none',
    'x-sluice-trace-id': args.traceId,
  };
}

async function writeError(args: ForwardArgs, error: SluiceError): Promise<void> {
  const rendered = renderError(error, args.requestId);
  args.onStatus(rendered.status, rendered.body.error.code);
  args.sink.start(rendered.status, {
    'content-type': 'application/json',
    'x-sluice-request-id': args.requestId,
    'x-request-id': args.requestId,
    ...rendered.headers,
  });
  await args.sink.write(Buffer.from(JSON.stringify(rendered.body)));
  await args.sink.end();
}

/** What a reply is charged: the provider's counts at the serving model's rates; nothing on BYOK. */
function charge(candidate: Candidate, counts: TokenCounts): number {
  return candidate.byokSecret !== undefined ? 0 : chargeMicros(counts, ratesOf(candidate.model));
}

/**
 * The charge when the provider's counts never arrived (a cut stream, a body that is not JSON):
 * the prompt's upper bound plus one output token per frame received, never more than the hold.
 */
function estimate(hold: HoldRecord, candidate: Candidate, frames: number): number {
  if (candidate.byokSecret !== undefined) return 0;
  const output = costMicros(frames, ratesOf(candidate.model).outputRateThousandths);
  return Math.min(hold.amountMicros, hold.inputMicros + output);
}

async function relayBody(args: ForwardArgs, candidate: Candidate, response: UpstreamResponse, attempts: number): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const chunk of response.body) chunks.push(chunk as Buffer);
  let text = Buffer.concat(chunks).toString('utf8');
  const parsed = parseJson(Buffer.from(text, 'utf8'));
  const record = parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : undefined;
  const counts = record === undefined ? undefined : readUsage(record.usage);
  if (record === undefined) {
    await writeError(args, new SluiceError('internal', `${candidate.provider.displayName} sent a reply that is not JSON.`));
    await settle(args, { counts: undefined, chargeMicros: estimate(args.hold, candidate, 0), attempts, status: 500, outcome: 'upstream_fault', stream: false, candidate });
    return;
  }
  // SPEC's echo rule: a pinned chat request gets back the slug it sent; a route, or a body with no
  // string `model`, keeps the provider's; a responses-format reply is forwarded as sent.
  if (args.family === 'chat_completions' && !args.route && typeof record.model === 'string') {
    text = setTopLevel(text, 'model', JSON.stringify(args.requestedModel));
  }
  const chargeNow = counts === undefined ? estimate(args.hold, candidate, 0) : charge(candidate, counts);
  args.onStatus(200, null);
  const firstByteMs = args.deps.clock() - args.startedAt;
  args.sink.start(200, successHeaders(args, candidate, attempts, 'application/json'));
  await args.sink.write(Buffer.from(text, 'utf8'));
  await args.sink.end();
  await settle(args, {
    counts,
    chargeMicros: chargeNow,
    attempts,
    status: 200,
    outcome: 'ok',
    stream: false,
    candidate,
    firstByteMs,
  });
}

async function relayStream(
  args: ForwardArgs,
  candidate: Candidate,
  response: UpstreamResponse,
  injectedUsage: boolean,
  attempts: number,
  overall: AbortController,
): Promise<void> {
  const { deps, sink } = args;
  let hold = args.hold;
  const relay = new SseRelay({ family: args.family, injectedUsage });
  args.onStatus(200, null);
  sink.start(200, { ...successHeaders(args, candidate, attempts, 'text/event-stream; charset=utf-8'), 'cache-control': 'no-cache' });
  const firstByteMs = deps.clock() - args.startedAt;
  let coveredTokens = args.holdSize?.outputCeilingTokens ?? Number.POSITIVE_INFINITY;
  const outputRate = ratesOf(candidate.model).outputRateThousandths;
  let ending: { kind: ErrorKind; message: string; outcome: Outcome } | undefined;
  let doneFrame: Buffer | undefined;
  try {
    for await (const chunk of response.body) {
      const step = relay.push(chunk as Buffer);
      if (step.out !== undefined) await sink.write(step.out);
      if (step.done !== undefined) {
        doneFrame = step.done;
        break;
      }
      if (candidate.byokSecret === undefined && relay.frames > coveredTokens + FRAME_SLACK) {
        // The provider is producing past what the hold covers: grow the hold or end the stream.
        const extraTokens = Math.max(EXTENSION_TOKENS, Math.ceil(coveredTokens / 4));
        const grown = await deps.ledger.extend(hold, costMicros(extraTokens, outputRate), args.limits, deps.clock()).catch(() => false);
        if (!grown) {
          ending = { kind: 'balance_exhausted', message: 'The workspace balance ran out part way; the reply is cut here and charged for what it produced.', outcome: 'balance_exhausted' };
          overall.abort();
          break;
        }
        coveredTokens += extraTokens;
        hold = { ...hold, amountMicros: hold.amountMicros + costMicros(extraTokens, outputRate) };
      }
    }
  } catch {
    ending = overall.signal.aborted
      ? { kind: 'request_timeout', message: 'The request ran past its time limit; the stream ends here.', outcome: 'timeout' }
      : { kind: 'upstream_stream_failed', message: `${candidate.provider.displayName} broke off the stream; it ends here and is charged for what was produced.`, outcome: 'upstream_fault' };
  }
  if (ending === undefined && doneFrame === undefined) {
    const rest = relay.flush();
    if (rest !== undefined) await sink.write(rest);
  }
  response.body.destroy();
  const counts = relay.usage;
  const chargeNow =
    ending?.outcome === 'balance_exhausted'
      ? hold.amountMicros
      : counts !== undefined
        ? charge(candidate, counts)
        : estimate(hold, candidate, relay.frames);
  if (ending !== undefined) await sink.write(Buffer.from(errorFrame(ending.kind, ending.message, args.requestId)));
  await sink.write(usageComment(counts, chargeNow, counts === undefined));
  if (doneFrame !== undefined) await sink.write(doneFrame);
  await sink.end();
  await settle(args, {
    hold,
    counts,
    chargeMicros: chargeNow,
    attempts,
    status: 200,
    outcome: ending?.outcome ?? 'ok',
    stream: true,
    candidate,
    firstByteMs,
  });
}

interface SettleArgs {
  /** The hold as it stands (a stream may have grown it); the admitted one when absent. */
  readonly hold?: HoldRecord;
  readonly counts: TokenCounts | undefined;
  readonly chargeMicros: number;
  readonly attempts: number;
  readonly status: number;
  readonly outcome: Outcome;
  readonly stream: boolean;
  readonly candidate?: Candidate;
  readonly firstByteMs?: number;
}

/** Settles the hold; a failure here is logged and left to the sweeper, never to the client. */
async function settle(args: ForwardArgs, s: SettleArgs): Promise<void> {
  const { deps } = args;
  args.onSettled?.({ chargeMicros: s.chargeMicros, firstByteMs: s.firstByteMs, servedBy: s.candidate?.model.id, outcome: s.outcome });
  try {
    await deps.ledger.settle(s.hold ?? args.hold, {
      counts: s.counts,
      chargeMicros: s.chargeMicros,
      servedBy: s.candidate?.model.id,
      provider: s.candidate?.provider.name,
      stream: s.stream,
      status: s.status,
      outcome: s.outcome,
      attempts: s.attempts,
      now: deps.clock(),
      firstByteMs: s.firstByteMs,
    });
  } catch (err) {
    console.error(JSON.stringify({ level: 'error', requestId: args.requestId, event: 'settle_failed', fault: err instanceof Error ? err.name : typeof err }));
  }
}
