/**
 * Relaying a stream: frames passed through as they arrive (the SSE relay withholds only what
 * Sluice asked for itself), the hold grown when the provider outproduces it, and the stream's end
 * written by Sluice: an in-band error frame when it broke (DESIGN decision 9), the usage comment,
 * then the provider's end marker.
 */
import { ReplyTape } from '../core/token-count';
import { finished, type Readable } from 'node:stream';
import { extensionTokens, outgrown, ratesOf } from '../core/charge';
import { errorFrame, type ErrorKind } from '../core/errors';
import { costMicros } from '../core/pricing';
import { SseRelay, usageComment, type RelayFault, type RelayStep } from '../core/sse';
import type { Outcome } from '../shared/records';
import type { Admitted, PricedCandidate } from './admit';
import type { Attempts } from './attempt';
import { eachChunk } from './each-chunk';
import { logFault } from './faults';
import type { RequestContext } from './ports';
import { successHeaders, tryWrite } from './respond';
import { chargeOf, countedTokens, type Ending } from './settle';

type Reply = Extract<Attempts, { kind: 'reply' }>;

/** How long a provider may take to end its body after its last frame before it is cut off. */
const BODY_END_GRACE_MS = 2_000;

/** How a stream that had begun ended early: the in-band error frame and the usage row's outcome. */
interface Broken {
  readonly kind: ErrorKind;
  readonly message: string;
  readonly outcome: Outcome;
}

function brokenStream(candidate: PricedCandidate, fault: RelayFault | 'reset' | 'unfinished'): Broken {
  const name = candidate.provider.displayName;
  const why = {
    malformed: `${name} sent a stream frame that is not JSON`,
    provider_error: `${name} reported an error part way through the stream`,
    reset: `${name} broke off the stream`,
    unfinished: `${name} ended the stream before finishing it`,
  }[fault];
  return { kind: 'upstream_stream_failed', message: `${why}; it ends here and is charged for what was produced.`, outcome: 'upstream_fault' };
}

/** Discards what is left of a finished reply's body, so its socket can be reused; cuts it if it lingers. */
function releaseForReuse(body: Readable): void {
  if (body.readableEnded || body.destroyed) return;
  const timer = setTimeout(() => body.destroy(), BODY_END_GRACE_MS);
  timer.unref();
  finished(body, () => clearTimeout(timer));
  body.resume();
}

/** Relays the stream to its end; returns how it ended, for settlement. */
export async function relayStream(ctx: RequestContext, admitted: Admitted, reply: Reply, overall: AbortController): Promise<Ending> {
  const { deps, sink } = ctx;
  const { candidate, response, attempts } = reply;
  let hold = admitted.hold;
  const relay = new SseRelay({ family: admitted.rules.family, injectedUsage: reply.injectedUsage });
  const tape = new ReplyTape();
  sink.start(200, { ...successHeaders(ctx, candidate, attempts, 'text/event-stream; charset=utf-8'), 'cache-control': 'no-cache' });
  const firstByteMs = deps.clock() - ctx.startedAt;
  // The serving model's own ceiling: the hold covers at least that much of its output.
  let coveredTokens = candidate.size?.outputCeilingTokens ?? Number.POSITIVE_INFINITY;
  const outputRate = ratesOf(candidate.model).outputRateThousandths;
  let ending: Broken | undefined;
  let doneFrame: Buffer | undefined;
  let clientGone = false;
  /** The provider is producing past what the hold covers: grow the hold, or end the stream (true). */
  const grow = async (): Promise<boolean> => {
    const extraTokens = extensionTokens(coveredTokens);
    const extra = costMicros(extraTokens, outputRate);
    const grown = await deps.ledger.extend(hold, extra, admitted.limits, deps.clock()).catch((err: unknown) => {
      logFault(ctx.requestId, 'extend', err);
      return false;
    });
    if (!grown) {
      ending = { kind: 'balance_exhausted', message: 'The workspace balance ran out part way; the reply is cut here and charged for what it produced.', outcome: 'balance_exhausted' };
      overall.abort();
      return true;
    }
    coveredTokens += extraTokens;
    hold = { ...hold, amountMicros: hold.amountMicros + extra };
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
    return candidate.byokSecret === undefined && outgrown(relay.frames, coveredTokens) ? grow() : false;
  };
  const clientLeft = (): true => {
    // The client went away: stop the provider too, and settle on what it produced.
    clientGone = true;
    ending = { kind: 'upstream_stream_failed', message: 'The client went away.', outcome: 'client_disconnected' };
    return true;
  };
  try {
    // Chunk by chunk as they arrive. A chunk the client's side takes at once is relayed with no
    // promise at all; a write that must wait, or a hold extension, pauses the provider's body meanwhile.
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
  // its keep-alive connection goes back to the pool. Anything else cuts the provider off.
  if (ending === undefined && !clientGone && relay.complete) releaseForReuse(response.body);
  else response.body.destroy();
  // The provider's counts when they arrived; otherwise (it reports none, it broke off, the balance
  // cut it) a count of the prompt and of what was produced, never above the hold (issue 14: a
  // stream cut by balance_exhausted is charged what it produced, not all it held).
  const reported = relay.usage;
  const estimated = reported === undefined ? countedTokens(admitted, candidate, (count) => tape.countOutput(count, relay.frames)) : undefined;
  const counts = reported ?? estimated;
  const chargeMicros = chargeOf(hold, candidate, reported !== undefined ? { kind: 'counts', counts: reported } : { kind: 'no_counts', frames: relay.frames }, estimated);
  if (!clientGone) {
    const tail: Buffer[] = [];
    if (ending !== undefined) tail.push(Buffer.from(errorFrame(ending.kind, ending.message, ctx.requestId)));
    tail.push(usageComment(counts, chargeMicros, estimated !== undefined));
    if (doneFrame !== undefined) tail.push(doneFrame);
    await tryWrite(sink, Buffer.concat(tail));
    await sink.end().catch(() => undefined);
  }
  return { hold, counts, estimated: estimated !== undefined, chargeMicros, attempts, status: 200, code: null, outcome: ending?.outcome ?? 'ok', stream: true, candidate, firstByteMs };
}
