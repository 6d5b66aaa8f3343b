/**
 * SPEC's `store` rule on the responses endpoint, table-driven: only the boolean `false` passes (and
 * an absent field); every other value present is 400 `unsupported_value` on param `store`. Chat
 * completions forward every field, `store` included.
 */
import { storeRefusal } from '../../lambdas/core/request-fields';

const refused = { status: 400, code: 'unsupported_value', param: 'store', type: 'invalid_request_error' };

const cases: readonly [string, boolean, Record<string, unknown>, typeof refused | undefined][] = [
  ['absent', true, { model: 'm' }, undefined],
  ['false', true, { store: false }, undefined],
  ['true', true, { store: true }, refused],
  ['the string "true"', true, { store: 'true' }, refused],
  ['the string "false"', true, { store: 'false' }, refused],
  ['1', true, { store: 1 }, refused],
  ['0', true, { store: 0 }, refused],
  ['null', true, { store: null }, refused],
  ['an object', true, { store: {} }, refused],
  ['an array', true, { store: [false] }, refused],
  ['true on chat completions (forwarded as sent)', false, { store: true }, undefined],
  ['"yes" on chat completions', false, { store: 'yes' }, undefined],
];

describe('storeRefusal', () => {
  it.each(cases)('%s', (_name, refuses, body, expected) => {
    const err = storeRefusal(refuses, body);
    if (expected === undefined) {
      expect(err).toBeUndefined();
      return;
    }
    expect(err === undefined ? undefined : { status: err.status, code: err.code, param: err.param, type: err.type }).toEqual(expected);
  });

  it('reads only own properties: an inherited store is not the body saying anything', () => {
    const body = Object.create({ store: true }) as Record<string, unknown>;
    expect(storeRefusal(true, body)).toBeUndefined();
  });
});
