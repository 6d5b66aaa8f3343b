/**
 * Checks on request fields SPEC gives a rule for, beyond the model field (see `model-id.ts`). Pure:
 * each takes the parsed body and returns the refusal, or undefined when the field is acceptable.
 */
import { SluiceError } from './errors';

/**
 * SPEC, responses endpoint: `store` is a boolean of which only `false` is accepted; omitted is
 * served. Any other value present (`true`, but also `"true"`, `1`, `null`, an object) would reach
 * the provider as something it may read as asking to store the conversation, so it is refused
 * `400 unsupported_value` with `param` `store`, before anything is held or called. Chat
 * completions forward every field as sent (SPEC), so the rule is the responses family's only:
 * `refusesStore` is the family's rule (`FamilyRules.refusesStore`).
 */
export function storeRefusal(refusesStore: boolean, body: Readonly<Record<string, unknown>>): SluiceError | undefined {
  if (!refusesStore || !Object.prototype.hasOwnProperty.call(body, 'store') || body.store === false) return undefined;
  return new SluiceError('unsupported_value_store', "Sluice keeps no conversation state, so only store: false is accepted (or leave 'store' out).");
}
