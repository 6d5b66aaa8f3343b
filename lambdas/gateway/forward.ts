/**
 * Forwarding an admitted request: the attempts in the customer's order, the reply relayed to the
 * client untouched (SPEC's `model` echo aside), and settlement on the provider's own counts,
 * whatever the client or the provider did. Once the status has gone out, a fault is written as one
 * in-band error frame (DESIGN decision 9).
 */
import { finished, type Readable } from 'node:stream';
import { SluiceError, errorFrame, relayedRefusal, type ErrorKind } from '../core/errors';
import { setTopLevel } from '../core/json-splice';
import { chargeMicros, costMicros, promptBound, sizeHold, type HoldSize, type Rates } from '../core/pricing';
import { SseRelay, readUsage, usageComment, type RelayFault, type RelayStep } from '../core/sse';
import { ReplyTape, countPromptTokens, countReplyTokens, encodingOf, estimateCharge, tokenCounter, type CountTokens, type Estimate } from '../core/token-count';
import type { CatalogModel } from '../shared/catalog-types';
import type { EndpointFamily, HoldRecord, Outcome, TokenCounts } from '../shared/records';
import type { GatewayDeps } from './app';
import { eachChunk } from './each-chunk';
import type { AdmissionLimits, ResponseSink, UpstreamResponse } from './ports';
import { requestIdHeaders, writeErrorResponse } from './respond';
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
  /** For `upstream_rate_limited`: the provider's figure, already held between 1 and 60. */
  readonly retryAfterSeconds?: number;
}

class DeadlineError extends Error {
  override readonly name = 'DeadlineError';
}

class FirstByteTimeoutError extends Error {
  override readonly name = 'FirstByteTimeoutError';
}

function ratesOf(model: CatalogModel): Rates {
  const input = model.inputRateThousandths ?? 0;
  return {
    inputRateThousandths: input,
    cachedInputRateThousandths: model.cachedInputRateThousandths ?? input,
    outputRateThousandths: model.outputRateThousandths ?? 0,
  };
}

/** SPEC's Retry-After of `upstream_rate_limited`: the provider's figure held to 1..60, 5 when none. */
export function retryAfter(header: string | undefined): number {
  const raw = header?.trim();
  if (raw === undefined || raw === '') return RETRY_AFTER_DEFAULT;
  // Delay-seconds, or an HTTP-date.
  let value = /^[+-]?\d+(\.\d+)?$/.test(raw) ? Number(raw) : (Date.parse(raw) - Date.now()) / 1000;
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
    const seconds = retryAfter(headers['retry-after']);
    return {
      fallback: true,
      retryAfterSeconds: seconds,
      error: new SluiceError('upstream_rate_limited', `${name} is rate-limiting calls to ${candidate.model.id}. Retry after the time given.`, {
        'Retry-After': String(seconds),
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

/**
 * The answer when no attempt produced a reply: the last attempt's failure. When that is a rate
 * limit, its Retry-After is the soonest any rate-limited model of the chain named.
 */
function exhausted(failures: readonly Failure[]): SluiceError {
  const last = failures[failures.length - 1];
  if (last === undefined) return new SluiceError('internal', 'No provider answered.');
  if (last.error.kind !== 'upstream_rate_limited') return last.error;
  const figures = failures.map((f) => f.retryAfterSeconds).filter((s): s is number => s !== undefined);
  const message = failures.length > 1 ? 'Every model of the route that was tried is rate-limiting calls. Retry after the time given.' : last.error.message;
  return new SluiceError('upstream_rate_limited', message, { 'Retry-After': String(Math.min(...figures)) });
}

function timeoutError(deps: GatewayDeps): SluiceError {
  return new SluiceError('request_timeout', `The request ran past the ${Math.round(deps.config.requestLimitMs / 1000)}-second limit. Split the work or stream it.`);
}

/** Runs the attempts, relays the reply, and settles. Never throws. */
export async function forward(args: ForwardArgs): Promise<void> {
  const { deps, candidates } = args;
  const overall = new AbortController();
  const deadlineMs = args.startedAt + deps.config.requestLimitMs;
  const timer = setTimeout(() => overall.abort(new DeadlineError()), Math.max(0, deadlineMs - deps.clock()));
  let attempts = 0;
  let replied: Candidate | undefined;
  const failures: Failure[] = [];
  try {
    for (const [index, candidate] of candidates.entries()) {
      attempts += 1;
      const result = await attempt(args, candidate, overall.signal, index === candidates.length - 1);
      if (result.kind === 'reply') {
        replied = candidate;
        if (args.parsed.stream === true) await relayStream(args, candidate, result.response, result.injectedUsage, attempts, overall);
        else await relayBody(args, candidate, result.response, attempts, overall.signal);
        return;
      }
      failures.push(result.failure);
      if (!result.failure.fallback || overall.signal.aborted) break;
    }
    const timedOut = overall.signal.aborted;
    const error = timedOut ? timeoutError(deps) : exhausted(failures);
    await writeError(args, error);
    await settle(args, { counts: undefined, chargeMicros: 0, attempts, status: error.status, outcome: timedOut ? 'timeout' : 'provider_error', stream: false });
  } catch (err) {
    // A fault of our own after admission: answer if nothing was sent, and release the hold.
    console.error(JSON.stringify({ level: 'error', requestId: args.requestId, fault: err instanceof Error ? err.name : typeof err }));
    if (!args.sink.started) await writeError(args, new SluiceError('internal', 'The server had an error while processing your request.')).catch(() => undefined);
    else await args.sink.end().catch(() => undefined);
    // Once a provider has replied it has billed the prompt at least: charge its upper bound, as
    // for a request whose function died, so a fault of ours never loses the charge.
    const chargeNow = replied === undefined ? 0 : estimate(args, args.hold, replied, 0);
    await settle(args, { counts: undefined, chargeMicros: chargeNow, attempts, status: 500, outcome: 'upstream_fault', stream: false, ...(replied ? { candidate: replied } : {}) });
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
  // A model that is not the chain's last gets a limited wait for its first byte (the status line),
  // and only for that: once it has begun answering, only the request's own deadline applies.
  const firstByte = last ? undefined : new AbortController();
  const firstByteTimer =
    firstByte === undefined ? undefined : setTimeout(() => firstByte.abort(new FirstByteTimeoutError()), deps.config.attemptTimeoutMs);
  try {
    const response = await deps.upstream.send({
      url: endpointUrl(base, family),
      headers: upstreamHeaders(candidate.provider, key, payload.length),
      body: payload,
      signal: firstByte === undefined ? overall : AbortSignal.any([overall, firstByte.signal]),
    });
    clearTimeout(firstByteTimer);
    deps.telemetry.upstream?.({ requestId: args.requestId, provider: candidate.provider.name, status: response.status, latencyMs: deps.clock() - started });
    if (response.status >= 200 && response.status < 300) return { kind: 'reply', response, injectedUsage };
    const errBody = parseJson(await readLimited(response.body, MAX_ERROR_BODY));
    return { kind: 'failed', failure: failureFor(response.status, response.headers, errBody, candidate) };
  } catch {
    if (overall.aborted) return { kind: 'failed', failure: { fallback: false, error: timeoutError(deps) } };
    const message =
      firstByte?.signal.aborted === true
        ? `${candidate.model.id} did not begin answering within ${Math.round(deps.config.attemptTimeoutMs / 1000)} seconds. Nothing about the request is wrong; retry later.`
        : `The provider still serves ${candidate.model.id}, but Sluice cannot reach it right now. Nothing about the request is wrong; retry later.`;
    return { kind: 'failed', failure: { fallback: true, error: new SluiceError('model_not_available', message) } };
  } finally {
    clearTimeout(firstByteTimer);
  }
}

function successHeaders(args: ForwardArgs, candidate: Candidate, attempts: number, contentType: string): Record<string, string> {
  return {
    'content-type': contentType,
    ...requestIdHeaders(args.requestId),
    'x-sluice-served-by': candidate.model.id,
    'x-sluice-provider': candidate.provider.name,
    'x-sluice-retry-attempt-count': String(attempts - 1),
    'x-sluice-cache-status': 'none',
    'x-sluice-trace-id': args.traceId,
  };
}

async function writeError(args: ForwardArgs, error: SluiceError): Promise<void> {
  const sent = await writeErrorResponse(args.sink, args.requestId, error);
  args.onStatus(sent.status, sent.code);
}

/** What a reply is charged: the provider's counts at the serving model's rates; nothing on BYOK. */
function charge(candidate: Candidate, counts: TokenCounts): number {
  return candidate.byokSecret !== undefined ? 0 : chargeMicros(counts, ratesOf(candidate.model));
}

/**
 * The hold the serving model alone would have needed (the admitted one covers the chain's most
 * expensive model): its prompt bound at its own input rate, and its own output ceiling.
 */
function servingSize(args: ForwardArgs, candidate: Candidate): HoldSize | undefined {
  if (candidate.byokSecret !== undefined) return undefined;
  try {
    return sizeHold(candidate.model, args.parsed, promptBound(Buffer.byteLength(args.body, 'utf8'), args.parsed), args.family);
  } catch {
    return args.holdSize;
  }
}

/**
 * The charge when the provider's counts never arrived (a cut stream, a body that is not JSON):
 * the prompt's upper bound at the serving model's rate plus one output token per frame received,
 * never more than the hold.
 */
function estimate(args: ForwardArgs, hold: HoldRecord, candidate: Candidate, frames: number): number {
  if (candidate.byokSecret !== undefined) return 0;
  const input = servingSize(args, candidate)?.inputMicros ?? hold.inputMicros;
  const output = costMicros(frames, ratesOf(candidate.model).outputRateThousandths);
  return Math.min(hold.amountMicros, input + output);
}

/**
 * The charge when the provider's counts never arrived, from a count (issue 14): the prompt and
 * what the reply produced, counted with the serving model's tokenizer, at its rates, never above
 * the hold; nothing to the balance on the workspace's own key. Only these rare paths load the
 * tokenizer.
 */
function counted(args: ForwardArgs, hold: HoldRecord, candidate: Candidate, output: (count: CountTokens) => number): Estimate {
  const count = tokenCounter(encodingOf(candidate.model.tokenizer));
  const cap = candidate.byokSecret !== undefined ? 0 : hold.amountMicros;
  return estimateCharge(countPromptTokens(args.parsed, args.family, count), output(count), ratesOf(candidate.model), cap);
}

/** How long a provider may take to end its body after its last frame before it is cut off. */
const BODY_END_GRACE_MS = 2_000;

/** Discards what is left of a finished reply's body, so its socket can be reused; cuts it if it lingers. */
function releaseForReuse(body: Readable): void {
  if (body.readableEnded || body.destroyed) return;
  const timer = setTimeout(() => body.destroy(), BODY_END_GRACE_MS);
  timer.unref();
  finished(body, () => clearTimeout(timer));
  body.resume();
}

/** Writes to the client; false once the client has gone (settlement goes on regardless). */
async function tryWrite(sink: ResponseSink, chunk: Buffer): Promise<boolean> {
  try {
    await sink.write(chunk);
    return true;
  } catch {
    return false;
  }
}

async function relayBody(args: ForwardArgs, candidate: Candidate, response: UpstreamResponse, attempts: number, overall: AbortSignal): Promise<void> {
  const chunks: Buffer[] = [];
  try {
    for await (const chunk of response.body) chunks.push(chunk as Buffer);
  } catch {
    // The provider began its reply and broke off (or the deadline passed) before the body was whole.
    const timedOut = overall.aborted;
    const error = timedOut ? timeoutError(args.deps) : new SluiceError('internal', `${candidate.provider.displayName} broke off its reply. Retry with backoff.`);
    await writeError(args, error);
    const status = error.status;
    const guess = counted(args, args.hold, candidate, () => 0);
    await settle(args, { counts: guess.counts, estimated: true, chargeMicros: guess.chargeMicros, attempts, status, outcome: timedOut ? 'timeout' : 'upstream_fault', stream: false, candidate });
    return;
  }
  let text = Buffer.concat(chunks).toString('utf8');
  const parsed = parseJson(Buffer.from(text, 'utf8'));
  const record = parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : undefined;
  const counts = record === undefined ? undefined : readUsage(record.usage);
  if (record === undefined) {
    await writeError(args, new SluiceError('internal', `${candidate.provider.displayName} sent a reply that is not JSON.`));
    const guess = counted(args, args.hold, candidate, () => 0);
    await settle(args, { counts: guess.counts, estimated: true, chargeMicros: guess.chargeMicros, attempts, status: 500, outcome: 'upstream_fault', stream: false, candidate });
    return;
  }
  // SPEC's echo rule: a pinned chat request gets back the slug it sent; a route, or a body with no
  // string `model`, keeps the provider's; a responses-format reply is forwarded as sent.
  if (args.family === 'chat_completions' && !args.route && typeof record.model === 'string') {
    text = setTopLevel(text, 'model', JSON.stringify(args.requestedModel));
  }
  // No usage in the body: the prompt and the reply are counted, the output charged too.
  const guess = counts === undefined ? counted(args, args.hold, candidate, (count) => countReplyTokens(record, count)) : undefined;
  const chargeNow = guess !== undefined ? guess.chargeMicros : charge(candidate, counts as TokenCounts);
  args.onStatus(200, null);
  const firstByteMs = args.deps.clock() - args.startedAt;
  args.sink.start(200, successHeaders(args, candidate, attempts, 'application/json'));
  const delivered = await tryWrite(args.sink, Buffer.from(text, 'utf8'));
  await args.sink.end().catch(() => undefined);
  await settle(args, {
    counts: counts ?? guess?.counts,
    estimated: guess !== undefined,
    chargeMicros: chargeNow,
    attempts,
    status: 200,
    outcome: delivered ? 'ok' : 'client_disconnected',
    stream: false,
    candidate,
    firstByteMs,
  });
}

/** How a stream that had begun ended early: the in-band error frame and the usage row's outcome. */
interface Ending {
  readonly kind: ErrorKind;
  readonly message: string;
  readonly outcome: Outcome;
}

function brokenStream(candidate: Candidate, fault: RelayFault | 'reset' | 'unfinished'): Ending {
  const name = candidate.provider.displayName;
  const why =
    fault === 'malformed'
      ? `${name} sent a stream frame that is not JSON`
      : fault === 'provider_error'
        ? `${name} reported an error part way through the stream`
        : fault === 'reset'
          ? `${name} broke off the stream`
          : `${name} ended the stream before finishing it`;
  return { kind: 'upstream_stream_failed', message: `${why}; it ends here and is charged for what was produced.`, outcome: 'upstream_fault' };
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
  const tape = new ReplyTape();
  args.onStatus(200, null);
  sink.start(200, { ...successHeaders(args, candidate, attempts, 'text/event-stream; charset=utf-8'), 'cache-control': 'no-cache' });
  const firstByteMs = deps.clock() - args.startedAt;
  // The serving model's own ceiling: the hold covers at least that much of its output.
  let coveredTokens = servingSize(args, candidate)?.outputCeilingTokens ?? args.holdSize?.outputCeilingTokens ?? Number.POSITIVE_INFINITY;
  const outputRate = ratesOf(candidate.model).outputRateThousandths;
  let ending: Ending | undefined;
  let doneFrame: Buffer | undefined;
  let clientGone = false;
  /** The provider is producing past what the hold covers: grow the hold, or end the stream (true). */
  const outgrown = async (): Promise<boolean> => {
    const extraTokens = Math.max(EXTENSION_TOKENS, Math.ceil(coveredTokens / 4));
    const grown = await deps.ledger.extend(hold, costMicros(extraTokens, outputRate), args.limits, deps.clock()).catch(() => false);
    if (!grown) {
      ending = { kind: 'balance_exhausted', message: 'The workspace balance ran out part way; the reply is cut here and charged for what it produced.', outcome: 'balance_exhausted' };
      overall.abort();
      return true;
    }
    coveredTokens += extraTokens;
    hold = { ...hold, amountMicros: hold.amountMicros + costMicros(extraTokens, outputRate) };
    return false;
  };
  /** What follows a chunk once its bytes are written: true ends the relay. */
  const afterWrite = (step: RelayStep): boolean | Promise<boolean> => {
    if (step.fault !== undefined) {
      ending = brokenStream(candidate, step.fault);
      return true;
    }
    if (step.done !== undefined) {
      doneFrame = step.done;
      return true;
    }
    return candidate.byokSecret === undefined && relay.frames > coveredTokens + FRAME_SLACK ? outgrown() : false;
  };
  const clientLeft = (): true => {
    // The client went away: stop the provider too, and settle on what it produced.
    clientGone = true;
    ending = { kind: 'upstream_stream_failed', message: 'The client went away.', outcome: 'client_disconnected' };
    return true;
  };
  try {
    // Chunk by chunk as they arrive. A chunk the client's side takes at once is relayed with no
    // promise at all (`for await` and an awaited write cost two promises and a generator step per
    // chunk); a write that must wait, or a hold extension, pauses the provider's body meanwhile.
    await eachChunk(response.body, (chunk) => {
      tape.keep(chunk);
      const step = relay.push(chunk);
      if (step.out === undefined) return afterWrite(step);
      let wait: Promise<void> | undefined;
      try {
        wait = sink.write(step.out);
      } catch {
        return clientLeft();
      }
      return wait === undefined ? afterWrite(step) : wait.then(() => afterWrite(step), clientLeft);
    });
    if (ending === undefined && doneFrame === undefined) {
      // The provider closed the stream cleanly: judge what is left, then whether it finished.
      const last = relay.end();
      if (last.out !== undefined) clientGone = !(await tryWrite(sink, last.out));
      if (last.fault !== undefined) ending = brokenStream(candidate, last.fault);
      else if (last.done !== undefined) doneFrame = last.done;
      else if (!relay.complete) ending = brokenStream(candidate, 'unfinished');
    }
  } catch {
    // An ending already decided (the balance ran out, so the provider was cut) stands.
    ending ??= overall.signal.aborted
      ? { kind: 'request_timeout', message: 'The request ran past its time limit; the stream ends here.', outcome: 'timeout' }
      : brokenStream(candidate, 'reset');
  }
  if (clientGone) overall.abort();
  // A stream that ended as it should leaves the provider's body at its very end: read that out, so
  // its keep-alive connection goes back to the pool (destroying it would cost a new connection,
  // and a TLS handshake, per streamed request). Anything else cuts the provider off.
  if (ending === undefined && !clientGone && relay.complete) releaseForReuse(response.body);
  else response.body.destroy();
  // The provider's counts when they arrived; otherwise (it reports none, it broke off, the balance
  // cut it) a count of the prompt and of what was produced, never above the hold.
  const reported = relay.usage;
  const guess = reported === undefined ? counted(args, hold, candidate, (count) => tape.countOutput(count, relay.frames)) : undefined;
  const counts = reported ?? guess?.counts;
  const chargeNow = guess !== undefined ? guess.chargeMicros : charge(candidate, reported as TokenCounts);
  if (!clientGone) {
    // The end of the stream: an in-band error frame when it broke, then the usage comment, then
    // the provider's end marker when it sent one.
    const tail: Buffer[] = [];
    if (ending !== undefined) tail.push(Buffer.from(errorFrame(ending.kind, ending.message, args.requestId)));
    tail.push(usageComment(counts, chargeNow, guess !== undefined));
    if (doneFrame !== undefined) tail.push(doneFrame);
    await tryWrite(sink, Buffer.concat(tail));
    await sink.end().catch(() => undefined);
  }
  await settle(args, {
    hold,
    counts,
    estimated: guess !== undefined,
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
  readonly estimated?: boolean;
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
      ...(s.candidate !== undefined ? { byok: s.candidate.byokSecret !== undefined } : {}),
      stream: s.stream,
      status: s.status,
      outcome: s.outcome,
      attempts: s.attempts,
      now: deps.clock(),
      firstByteMs: s.firstByteMs,
      ...(s.estimated === true ? { estimated: true } : {}),
    });
  } catch (err) {
    console.error(JSON.stringify({ level: 'error', requestId: args.requestId, event: 'settle_failed', fault: err instanceof Error ? err.name : typeof err }));
  }
}
