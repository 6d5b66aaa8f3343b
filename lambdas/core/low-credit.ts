/**
 * The low-credit notice's decision (SPEC: "a low-credit notice exists in the workspace
 * settings"). A workspace that sets `lowCreditThresholdMicros` is told once when its available
 * credit falls below that figure, and not again until the balance has risen above it and fallen
 * once more. The decision is pure: the notifier reads the threshold, the balance and whether the
 * current crossing was already announced, and does what this says.
 */

/** What the notifier knows of one workspace when it decides. */
export interface LowCreditInput {
  /** The workspace's threshold, micro-units; absent (or not a non-negative integer) means no notice. */
  readonly thresholdMicros?: number;
  /** Credit available to new requests now, micro-units (held credit is not available). */
  readonly availableMicros: number;
  /** Whether a notice for the current crossing is already recorded. */
  readonly notified: boolean;
}

/**
 * - `notify`: the balance is below the threshold and this crossing has not been announced.
 * - `rearm`: a recorded notice no longer applies (the balance rose above the threshold, or the
 *   threshold was removed), so the next fall below is a new crossing.
 * - `none`: nothing changes.
 */
export type LowCreditDecision = 'notify' | 'rearm' | 'none';

/** Whether a stored threshold is one the notifier acts on. */
export function isThreshold(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

/**
 * Decides what one check of one workspace does. Below means strictly below; above means strictly
 * above. A balance exactly at the threshold changes nothing either way, so a balance that sits on
 * it cannot make the notice flap.
 */
export function decideLowCredit(input: LowCreditInput): LowCreditDecision {
  const { thresholdMicros, availableMicros, notified } = input;
  if (!isThreshold(thresholdMicros)) return notified ? 'rearm' : 'none';
  if (availableMicros < thresholdMicros) return notified ? 'none' : 'notify';
  if (availableMicros > thresholdMicros) return notified ? 'rearm' : 'none';
  return 'none';
}
