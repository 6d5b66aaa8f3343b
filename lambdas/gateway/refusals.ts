/** SPEC's code and message for each way the ledger refuses an admission. */
import { SluiceError } from '../core/errors';
import { formatMinor } from '../core/pricing';
import { rateLimited } from './authenticate';
import type { AdmissionLimits, Refusal } from './ports';

/** The refusal the client gets for an admission the ledger refused. */
export function refusalError(refusal: Refusal, limits: AdmissionLimits): SluiceError {
  switch (refusal.kind) {
    case 'insufficient_credit':
      return new SluiceError('insufficient_credit', 'The workspace balance cannot cover this request. Add credit, or send a smaller max_tokens.');
    case 'key_limit_exceeded':
      return new SluiceError(
        'key_limit_exceeded',
        `This key's credit limit of ${formatMinor(refusal.limitMicros)} is reached for its ${limits.keyWindow} window: ` +
          `${formatMinor(refusal.settledMicros)} settled and ${formatMinor(refusal.heldMicros)} held, and this request needs more than the rest.`,
      );
    case 'member_limit_exceeded':
      return new SluiceError('member_limit_exceeded', `The member's monthly spend limit of ${formatMinor(refusal.limitMicros)} is reached for this calendar month.`);
    case 'workspace_limit_exceeded':
      return new SluiceError('workspace_limit_exceeded', `The workspace's monthly spend limit of ${formatMinor(refusal.limitMicros)} is reached for this calendar month.`);
    case 'spend_rate_exceeded':
      return new SluiceError(
        'spend_rate_exceeded',
        `The workspace's spend rate cap of ${formatMinor(refusal.capMicros)} per 60 seconds is reached. Retry, and send max_tokens so each request reserves less.`,
        { 'Retry-After': String(refusal.retryAfterSeconds) },
      );
    case 'rate_limit_exceeded':
      return rateLimited(limits.keyRatePerMinute, refusal.retryAfterSeconds);
    case 'in_transit':
      return new SluiceError('balance_unavailable', 'The balance this request needs is in another region and has not reached this one yet; try again shortly.', { 'Retry-After': String(refusal.retryAfterSeconds) });
  }
}
