/**
 * Settlement: the charge for how the request ended (decided by `core/charge`), and the one ledger
 * transaction that charges it, returns the rest of the hold and files the usage row. A failure
 * here is logged and left to the sweeper, never to the client, who has had the reply.
 */
import { chargeFor, ratesOf, type ChargeBasis } from '../core/charge';
import type { HoldRecord, Outcome, TokenCounts } from '../shared/records';
import { countPromptTokens, encodingOf, tokenCounter, type CountTokens } from '../core/token-count';
import type { Admitted, PricedCandidate } from './admit';
import { logFault } from './faults';
import type { RequestContext, Served } from './ports';

/** How a request ended after admission: what settlement writes and the telemetry line reports. */
export interface Ending {
  /** The hold as it stands (a stream may have grown it). */
  readonly hold: HoldRecord;
  readonly counts: TokenCounts | undefined;
  readonly chargeMicros: number;
  readonly attempts: number;
  readonly status: number;
  readonly code?: string | null;
  readonly outcome: Outcome;
  readonly stream: boolean;
  /** The model that replied, if one did. */
  readonly candidate?: PricedCandidate;
  readonly firstByteMs?: number;
  /** The counts are Sluice's own count: the provider's never arrived. */
  readonly estimated?: boolean;
}

/** The charge for a reply by `candidate` that ended as `basis`, against the hold as it stands. */
export function chargeOf(hold: HoldRecord, candidate: PricedCandidate, basis: ChargeBasis, estimatedCounts?: TokenCounts): number {
  return chargeFor({
    basis,
    byok: candidate.byokSecret !== undefined,
    rates: ratesOf(candidate.model),
    holdMicros: hold.amountMicros,
    inputBoundMicros: candidate.size?.inputMicros ?? hold.inputMicros,
    ...(estimatedCounts !== undefined ? { estimatedCounts } : {}),
  });
}

/**
 * The counts when the provider's never arrived (issue 14): the prompt and what the reply produced,
 * counted with the serving model's tokenizer. Only these rare paths load the tokenizer.
 */
export function countedTokens(admitted: Admitted, candidate: PricedCandidate, output: (count: CountTokens) => number): TokenCounts {
  const count = tokenCounter(encodingOf(candidate.model.tokenizer));
  const inputTokens = countPromptTokens(admitted.body, admitted.rules.family, count);
  return { inputTokens, cachedInputTokens: 0, outputTokens: output(count), reasoningTokens: 0 };
}

/** Settles the hold; never throws. Returns what the request's telemetry line says of it. */
export async function settle(ctx: RequestContext, ending: Ending): Promise<Served> {
  const { deps } = ctx;
  const candidate = ending.candidate;
  // Both from the request's arrival on one clock, so the first byte is never after the end.
  const now = deps.clock();
  const durationMs = Math.max(now - ctx.startedAt, ending.firstByteMs ?? 0);
  try {
    await deps.ledger.settle(ending.hold, {
      counts: ending.counts,
      chargeMicros: ending.chargeMicros,
      servedBy: candidate?.model.id,
      provider: candidate?.provider.name,
      ...(candidate !== undefined ? { byok: candidate.byokSecret !== undefined } : {}),
      stream: ending.stream,
      status: ending.status,
      outcome: ending.outcome,
      attempts: ending.attempts,
      now,
      firstByteMs: ending.firstByteMs,
      durationMs,
      ...(ending.estimated === true ? { estimated: true } : {}),
    });
  } catch (err) {
    logFault(ctx.requestId, 'settle', err);
  }
  return {
    status: ending.status,
    code: ending.code ?? null,
    servedBy: candidate?.model.id,
    outcome: ending.outcome,
    chargeMicros: ending.chargeMicros,
    firstByteMs: ending.firstByteMs,
  };
}
