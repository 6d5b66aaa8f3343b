/**
 * What a request is charged, in every way it can end. Pure: the settlement phase gathers what
 * happened (the provider's counts, the frames it produced, whether the balance ran out) and this
 * module decides the figure, so every money outcome is one table-tested function.
 *
 * Money is integer micro-units throughout (DESIGN decision 5).
 */
import type { CatalogModel } from '../shared/catalog-types';
import type { EndpointFamily, TokenCounts } from '../shared/records';
import { chargeMicros, costMicros, promptBound, sizeHold, type HoldSize, type Rates } from './pricing';

/** The catalog rates of a model, a missing cached rate falling back to the input rate. */
export function ratesOf(model: CatalogModel): Rates {
  const input = model.inputRateThousandths ?? 0;
  return {
    inputRateThousandths: input,
    cachedInputRateThousandths: model.cachedInputRateThousandths ?? input,
    outputRateThousandths: model.outputRateThousandths ?? 0,
  };
}

/**
 * The hold one model alone needs for a request (its prompt bound at its own input rate, its own
 * output ceiling), or undefined when it cannot be priced. Admission sizes every candidate of a
 * route with this once; the largest is held, and each candidate keeps its own size for its
 * estimate and its stream's ceiling.
 */
export function candidateSize(
  model: CatalogModel,
  body: Readonly<Record<string, unknown>>,
  bodyBytes: number,
  family: EndpointFamily,
): HoldSize {
  return sizeHold(model, body, promptBound(bodyBytes, body), family);
}

/** How a request ended, as far as its charge is concerned. */
export type ChargeBasis =
  /** No provider replied (every attempt failed, a timeout before the status, a fault of ours before a reply). */
  | { readonly kind: 'no_reply' }
  /** The provider's own counts arrived. */
  | { readonly kind: 'counts'; readonly counts: TokenCounts }
  /**
   * A provider replied but its counts never arrived (a cut stream, a body that is not JSON, a fault
   * of ours after the reply): `frames` output-bearing frames were seen.
   */
  | { readonly kind: 'no_counts'; readonly frames: number }
  /** The balance ran out part way through a stream: the whole (grown) hold is spent. */
  | { readonly kind: 'balance_exhausted' };

/** What {@link chargeFor} needs besides the basis. */
export interface ChargeInput {
  readonly basis: ChargeBasis;
  /** Served on the workspace's own provider key: the provider bills the workspace, Sluice charges nothing. */
  readonly byok: boolean;
  /** The serving model's rates. */
  readonly rates: Rates;
  /** The hold as it stands at settlement (a stream may have grown it): no charge exceeds it. */
  readonly holdMicros: number;
  /** The prompt's upper bound at the serving model's input rate (what a dead request is charged). */
  readonly inputBoundMicros: number;
  /**
   * A tokenizer's estimate of the counts for when the provider reported none; when given, a reply
   * without counts is charged this (never above the hold) instead of the prompt's upper bound.
   */
  readonly estimatedCounts?: TokenCounts;
}

/**
 * The charge in micro-units:
 * - no reply: 0 (nothing was produced, SPEC rule 1);
 * - BYOK: 0 (the provider bills the workspace directly);
 * - the provider's counts: those counts at the serving model's rates, at face value;
 * - no counts: the tokenizer's estimate when there is one, else the prompt's upper bound plus one
 *   output token per frame received; never more than the hold;
 * - the balance ran out: the hold, which the stream has used up.
 */
export function chargeFor(input: ChargeInput): number {
  const { basis } = input;
  if (basis.kind === 'no_reply' || input.byok) return 0;
  switch (basis.kind) {
    case 'counts':
      return chargeMicros(basis.counts, input.rates);
    case 'balance_exhausted':
      return input.holdMicros;
    case 'no_counts': {
      const estimate =
        input.estimatedCounts !== undefined
          ? chargeMicros(input.estimatedCounts, input.rates)
          : input.inputBoundMicros + costMicros(basis.frames, input.rates.outputRateThousandths);
      return Math.min(input.holdMicros, estimate);
    }
  }
}

/** Frames that carry no output token (role, finish, usage) tolerated above a stream's ceiling. */
export const FRAME_SLACK = 4;
/** Minimum number of output tokens one extension of a hold adds. */
export const EXTENSION_TOKENS = 256;

/** Whether a stream has produced more frames than its hold covers (so the hold must grow or the stream end). */
export function outgrown(frames: number, coveredTokens: number): boolean {
  return frames > coveredTokens + FRAME_SLACK;
}

/** How many output tokens to add to a hold a stream has outgrown: a quarter more, at least {@link EXTENSION_TOKENS}. */
export function extensionTokens(coveredTokens: number): number {
  return Math.max(EXTENSION_TOKENS, Math.ceil(coveredTokens / 4));
}
