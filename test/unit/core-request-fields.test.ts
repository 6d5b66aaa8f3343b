/**
 * SPEC's `store` rule on the responses endpoint, table-driven: only the boolean `false` passes (and
 * an absent field); every other value present is 400 `unsupported_value` on param `store`. Chat
 * completions forward every field, `store` included.
 */
import { storeRefusal } from '../../lambdas/core/request-fields';
import type { EndpointFamily } from '../../lambdas/shared/records';

const refused = { status: 400, code: 'unsupported_value', param: 'store', type: 'invalid_request_error' };

const cases: readonly [string, EndpointFamily, Record<string, unknown>, typeof refused | undefined][] = [
  ['absent', 'responses', { model: 'm' }, undefined],
  ['false', 'responses', { store: false }, undefined],
  ['true', 'responses', { store: true }, refused],
  ['the string "true"', 'responses', { store: 'true' }, refused],
  ['the string "false"', 'responses', { store: 'false' }, refused],
  ['1', 'responses', { store: 1 }, refused],
  ['0', 'responses', { store: 0 }, refused],
  ['null', 'responses', { store: null }, refused],
  ['an object', 'responses', { store: {} }, refused],
  ['an array', 'responses', { store: [false] }, refused],
  ['true on chat completions (forwarded as sent)', 'chat_completions', { store: true }, undefined],
  ['"yes" on chat completions', 'chat_completions', { store: 'yes' }, undefined],
];

describe('storeRefusal', () => {
  it.each(cases)('%s', (_name, family, body, expected) => {
    const err = storeRefusal(family, body);
    if (expected === undefined) {
      expect(err).toBeUndefined();
      return;
    }
    expect(err === undefined ? undefined : { status: err.status, code: err.code, param: err.param, type: err.type }).toEqual(expected);
  });

  it('reads only own properties: an inherited store is not the body saying anything', () => {
    const body = Object.create({ store: true }) as Record<string, unknown>;
    expect(storeRefusal('responses', body)).toBeUndefined();
  });
});
