/**
 * Relaying a non-streamed reply: read whole, SPEC's `model` echo applied, written in one piece.
 * The charge is the provider's counts, or the estimate when the body carries none.
 */
import { SluiceError } from '../core/errors';
import { setTopLevel } from '../core/json-splice';
import { readUsage } from '../core/sse';
import { timeoutError } from '../core/upstream-failure';
import type { Admitted } from './admit';
import { parseJsonText, type Attempts } from './attempt';
import type { RequestContext } from './ports';
import { successHeaders, tryWrite, writeErrorResponse } from './respond';
import { countReplyTokens } from '../core/token-count';
import { eachChunk } from './each-chunk';
import { chargeOf, countedTokens, type Ending } from './settle';

type Reply = Extract<Attempts, { kind: 'reply' }>;

/** Relays the reply's body; returns how it ended, for settlement. */
export async function relayBody(ctx: RequestContext, admitted: Admitted, reply: Reply, overall: AbortSignal): Promise<Ending> {
  const { candidate, response, attempts } = reply;
  const { hold } = admitted;
  const name = candidate.provider.displayName;
  const failed = async (error: SluiceError, outcome: 'timeout' | 'upstream_fault'): Promise<Ending> => {
    const sent = await writeErrorResponse(ctx.sink, ctx.requestId, error);
    // The provider replied, so it has billed the prompt at least: charge the counted prompt.
    const estimated = countedTokens(admitted, candidate, () => 0);
    const chargeMicros = chargeOf(hold, candidate, { kind: 'no_counts', frames: 0 }, estimated);
    return { hold, counts: estimated, estimated: true, chargeMicros, attempts, status: sent.status, code: sent.code, outcome, stream: false, candidate };
  };

  const chunks: Buffer[] = [];
  try {
    // `eachChunk`, not `for await`: the async iterator's set-up (its stream helpers, a promise a
    // chunk) cost more than collecting the few chunks of a whole body.
    await eachChunk(response.body, (chunk) => {
      chunks.push(chunk);
      return false;
    });
  } catch {
    // The provider began its reply and broke off (or the deadline passed) before the body was whole.
    if (overall.aborted) return failed(timeoutError(ctx.deps.config.requestLimitMs), 'timeout');
    return failed(new SluiceError('internal', `${name} broke off its reply. Retry with backoff.`), 'upstream_fault');
  }
  // The provider's bytes are what the client gets, unless SPEC's echo rewrites the `model` field.
  let body = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
  const text = body.toString('utf8');
  const parsed = parseJsonText(text);
  const record = parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : undefined;
  if (record === undefined) return failed(new SluiceError('internal', `${name} sent a reply that is not JSON.`), 'upstream_fault');
  const counts = readUsage(record.usage);
  // SPEC's echo rule: a pinned chat request gets back the slug it sent; a route, or a body with no
  // string `model`, keeps the provider's; a responses-format reply is forwarded as sent.
  if (admitted.rules.echoesModel && !admitted.route && typeof record.model === 'string') {
    body = Buffer.from(setTopLevel(text, 'model', JSON.stringify(admitted.requestedModel)), 'utf8');
  }
  // No usage in the body: the prompt and the reply are counted, the output charged too.
  const estimated = counts === undefined ? countedTokens(admitted, candidate, (count) => countReplyTokens(record, count)) : undefined;
  const chargeMicros = chargeOf(hold, candidate, counts === undefined ? { kind: 'no_counts', frames: 0 } : { kind: 'counts', counts }, estimated);
  const firstByteMs = ctx.deps.clock() - ctx.startedAt;
  // The body is whole, so its charge is known before the headers go: the client reads it here,
  // in the unit of the stream's `:x-sluice-usage` line; the usage row stays the authority.
  ctx.sink.start(200, { ...successHeaders(ctx, candidate, attempts, 'application/json'), 'x-sluice-charge': String(chargeMicros) });
  const delivered = await tryWrite(ctx.sink, body);
  await ctx.sink.end().catch(() => undefined);
  return { hold, counts: counts ?? estimated, estimated: estimated !== undefined, chargeMicros, attempts, status: 200, outcome: delivered ? 'ok' : 'client_disconnected', stream: false, candidate, firstByteMs };
}
