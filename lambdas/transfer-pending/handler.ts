/**
 * Stands in for the transfer agent (`lambdas/transfer/handler.ts`, being written on branch
 * `regions-ledger`) until it is merged, so that a multi-region stage synthesizes and its event
 * source mapping, grants and alarms can be reviewed. It applies nothing: it fails every batch, so
 * the ledger stream's records stay unconsumed (the mapping retries, then records their positions
 * in the agent's dead-letter queue, whose alarm fires) rather than being acknowledged unapplied.
 * Money in transit between regions stays in transit, counted by the `sent`/`recv` counters; it is
 * neither spent nor lost (docs/regions.md). `lib/transfer-agent.ts` uses the real agent as soon as
 * its file exists, and `cdk synth` warns while it does not.
 */
export class TransferAgentMissingError extends Error {
  override readonly name = 'TransferAgentMissingError';
}

export function handler(): Promise<never> {
  return Promise.reject(new TransferAgentMissingError('the transfer agent (lambdas/transfer/handler.ts) is not in this build; ledger stream records are left for it'));
}
