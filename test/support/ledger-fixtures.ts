/**
 * What the sliced-ledger suites build their races from: the pinned "now", limits that bind
 * nothing, an admission request and a settlement, and a batch of admissions sorted into holds and
 * refusals. Dates are ahead of the real clock (see `clock.ts`), so DynamoDB Local's TTL sweep never
 * collects a counter a race relies on.
 */
import type { AdmissionLimits, AdmitRequest, Settlement } from '../../lambdas/gateway/ports';
import type { HoldRecord } from '../../lambdas/shared/records';
import type { DynamoLedger } from '../../lambdas/store';
import { testDate } from './clock';

/** The races' "now": 22 November of the tests' year, at noon UTC. */
export const NOW = testDate(10, 22, 12, 0, 0);

/** Limits that bind nothing, for races against one limit at a time. */
export const OPEN: AdmissionLimits = { keyWindow: 'monthly', spendRateCapMicros: 1e15, keyRatePerMinute: 1e9 };

/** A request builder whose hold ids carry `tag` (each suite its own), unique per call. */
export function requestsTagged(tag: string): (workspaceId: string, amountMicros: number, over?: Partial<AdmitRequest>) => AdmitRequest {
  let seq = 0;
  return (workspaceId, amountMicros, over = {}) => {
    seq += 1;
    return {
      holdId: `req_${tag}${seq}_${Math.random().toString(36).slice(2)}`,
      workspaceId,
      keyId: 'key_a',
      family: 'chat_completions',
      requestedModel: 'local/sim-small',
      amountMicros,
      inputMicros: Math.floor(amountMicros / 4),
      byok: false,
      limits: OPEN,
      now: NOW,
      expiresAt: NOW + 600_000,
      ...over,
    };
  };
}

/** A provider's reply charged `chargeMicros`, settled at `now`. */
export function settlement(chargeMicros: number, now = NOW + 1000): Settlement {
  return { counts: { inputTokens: 1, cachedInputTokens: 0, outputTokens: 1, reasoningTokens: 0 }, chargeMicros, stream: false, status: 200, outcome: 'ok', attempts: 1, now };
}

/** Admits every request at once; returns the holds placed and the refusals' kinds. */
export async function admitAll(ledger: DynamoLedger, requests: AdmitRequest[]): Promise<{ admitted: HoldRecord[]; refused: string[] }> {
  const outcomes = await Promise.all(requests.map((r) => ledger.admit(r)));
  const admitted: HoldRecord[] = [];
  const refused: string[] = [];
  for (const o of outcomes) {
    if (o.admitted) admitted.push(o.hold);
    else refused.push(o.refusal.kind);
  }
  return { admitted, refused };
}
