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

/**
 * One stream's relay state, with its callbacks as methods (bound once per stream): a closure
 * made per stream loses its optimized code at each full collection once its last instance is
 * gone, and is compiled again (docs/gateway.md, "Pretenuring"); a bound method runs the one
 * compiled method.
 */
class StreamRun {
  hold: Admitted['hold'];
  /** The serving model's own ceiling: the hold covers at least that much of its output. */
  private coveredTokens: number;
  private readonly outputRate: number;
  ending: Broken | undefined;
  doneFrame: Buffer | undefined;
  clientGone = false;
  readonly relay: SseRelay;
  readonly tape = new ReplyTape();
  /** The step whose bytes are being written while the provider's body is paused (one at a time). */
  private writing: RelayStep | undefined;
  readonly onChunk = this.chunk.bind(this);
  private readonly onWritten = this.written.bind(this);
  private readonly onClientLeft = this.clientLeft.bind(this);
  private readonly onExtendFailed = this.extendFailed.bind(this);

  constructor(
    private readonly ctx: RequestContext,
    private readonly admitted: Admitted,
    private readonly candidate: PricedCandidate,
    private readonly overall: AbortController,
    injectedUsage: boolean,
  ) {
    this.hold = admitted.hold;
    this.relay = new SseRelay({ family: admitted.rules.family, injectedUsage });
    this.coveredTokens = candidate.size?.outputCeilingTokens ?? Number.POSITIVE_INFINITY;
    this.outputRate = ratesOf(candidate.model).outputRateThousandths;
  }

  /**
   * A chunk from the provider. One the client's side takes at once is relayed with no promise at
   * all; a write that must wait, or a hold extension, pauses the provider's body meanwhile.
   */
  private chunk(chunk: Buffer): boolean | Promise<boolean> {
    this.tape.keep(chunk);
    const step = this.relay.push(chunk);
    if (step.out === undefined) return this.afterWrite(step);
    let wait: Promise<void> | undefined;
    try {
      wait = this.ctx.sink.write(step.out);
    } catch {
      return this.clientLeft();
    }
    if (wait === undefined) return this.afterWrite(step);
    this.writing = step;
    return wait.then(this.onWritten, this.onClientLeft);
  }

  private written(): boolean | Promise<boolean> {
    const step = this.writing as RelayStep;
    this.writing = undefined;
    return this.afterWrite(step);
  }

  /** What follows a chunk once its bytes are written: true ends the relay. */
  private afterWrite(step: RelayStep): boolean | Promise<boolean> {
    if (step.fault !== undefined) {
      this.ending = brokenStream(this.candidate, step.fault);
      return true;
    }
    if (step.done !== undefined) {
      this.doneFrame = step.done;
      return true;
    }
    return this.candidate.byokSecret === undefined && outgrown(this.relay.frames, this.coveredTokens) ? this.grow() : false;
  }

  private clientLeft(): true {
    // The client went away: stop the provider too, and settle on what it produced.
    this.clientGone = true;
    this.ending = { kind: 'upstream_stream_failed', message: 'The client went away.', outcome: 'client_disconnected' };
    return true;
  }

  /** The provider is producing past what the hold covers: grow the hold, or end the stream (true). */
  private async grow(): Promise<boolean> {
    const { deps } = this.ctx;
    const extraTokens = extensionTokens(this.coveredTokens);
    const extra = costMicros(extraTokens, this.outputRate);
    const grown = await deps.ledger.extend(this.hold, extra, this.admitted.limits, deps.clock()).catch(this.onExtendFailed);
    if (!grown) {
      this.ending = { kind: 'balance_exhausted', message: 'The workspace balance ran out part way; the reply is cut here and charged for what it produced.', outcome: 'balance_exhausted' };
      this.overall.abort();
      return true;
    }
    this.coveredTokens += extraTokens;
    this.hold = { ...this.hold, amountMicros: this.hold.amountMicros + extra };
    return false;
  }

  private extendFailed(err: unknown): false {
    logFault(this.ctx.requestId, 'extend', err);
    return false;
  }

  /** The output counted from what was produced, for a charge with no counts from the provider. */
  countOutput(count: (text: string) => number): number {
    return this.tape.countOutput(count, this.relay.frames);
  }
}

/** Relays the stream to its end; returns how it ended, for settlement. */
export async function relayStream(ctx: RequestContext, admitted: Admitted, reply: Reply, overall: AbortController): Promise<Ending> {
  const { deps, sink } = ctx;
  const { candidate, response, attempts } = reply;
  const run = new StreamRun(ctx, admitted, candidate, overall, reply.injectedUsage);
  const { relay } = run;
  sink.start(200, { ...successHeaders(ctx, candidate, attempts, 'text/event-stream; charset=utf-8'), 'cache-control': 'no-cache' });
  const firstByteMs = deps.clock() - ctx.startedAt;
  try {
    // Chunk by chunk as they arrive (`StreamRun.chunk`).
    await eachChunk(response.body, run.onChunk);
    if (run.ending === undefined && run.doneFrame === undefined) {
      // The provider closed the stream cleanly: judge what is left, then whether it finished.
      const last = relay.end();
      if (last.out !== undefined) run.clientGone = !(await tryWrite(sink, last.out));
      if (last.fault !== undefined) run.ending = brokenStream(candidate, last.fault);
      else if (last.done !== undefined) run.doneFrame = last.done;
      else if (!relay.complete) run.ending = brokenStream(candidate, 'unfinished');
    }
  } catch {
    // An ending already decided (the balance ran out, so the provider was cut) stands.
    run.ending ??= overall.signal.aborted
      ? { kind: 'request_timeout', message: 'The request ran past its time limit; the stream ends here.', outcome: 'timeout' }
      : brokenStream(candidate, 'reset');
  }
  const { ending, doneFrame, clientGone, hold } = run;
  if (clientGone) overall.abort();
  // A stream that ended as it should leaves the provider's body at its very end: read that out, so
  // its keep-alive connection goes back to the pool. Anything else cuts the provider off.
  if (ending === undefined && !clientGone && relay.complete) releaseForReuse(response.body);
  else response.body.destroy();
  // The provider's counts when they arrived; otherwise (it reports none, it broke off, the balance
  // cut it) a count of the prompt and of what was produced, never above the hold (issue 14: a
  // stream cut by balance_exhausted is charged what it produced, not all it held).
  const reported = relay.usage;
  const estimated = reported === undefined ? countedTokens(admitted, candidate, (count) => run.countOutput(count)) : undefined;
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
