/** The `model` field: SPEC's length and character rules and its three forms. */
import { SluiceError } from '../../lambdas/core/errors';
import { AUTO_MODEL_ID, MAX_MODEL_ID_LENGTH, parseModelField, type ModelRef } from '../../lambdas/core/model-id';

function refusal(value: unknown): SluiceError {
  try {
    parseModelField(value);
  } catch (err) {
    if (err instanceof SluiceError) return err;
    throw err;
  }
  throw new Error(`expected ${JSON.stringify(value)} to be refused`);
}

describe('refusals', () => {
  test.each([['undefined', undefined], ['null', null], ['empty string', '']])('%s → 400, param model, code null', (_l, value) => {
    const e = refusal(value);
    expect([e.kind, e.status, e.type, e.param, e.code]).toEqual(['model_missing', 400, 'invalid_request_error', 'model', null]);
  });

  test.each([
    ['number', 42],
    ['boolean', true],
    ['array', ['openai/gpt-4.1']],
    ['object', { id: 'openai/gpt-4.1' }],
  ])('not a string (%s) → 400 invalid model, param model', (_l, value) => {
    const e = refusal(value);
    expect([e.kind, e.status, e.param]).toEqual(['model_invalid', 400, 'model']);
    expect(e.code).toBe('invalid_model_id');
  });

  test('128 characters pass, 129 are refused', () => {
    const ok = `p/${'a'.repeat(MAX_MODEL_ID_LENGTH - 2)}`;
    expect(ok).toHaveLength(128);
    expect(parseModelField(ok)).toEqual({ kind: 'pinned', id: ok, provider: 'p', providerModelId: 'a'.repeat(126) });
    const long = `${ok}a`;
    expect(long).toHaveLength(129);
    expect([refusal(long).kind, refusal(long).param]).toEqual(['model_invalid', 'model']);
  });

  test.each([' ', '#', 'é', '?', '%', '+', '\\', '"', '\n', '\u0000', '\u{1F600}', '~', '*', ',', '='])(
    'forbidden character %j → model_invalid',
    (ch) => {
      const e = refusal(`openai/gpt${ch}4`);
      expect([e.kind, e.status, e.param, e.code]).toEqual(['model_invalid', 400, 'model', 'invalid_model_id']);
    },
  );

  test('a forbidden character wins over the missing provider', () => {
    expect(refusal('gpt 4').kind).toBe('model_invalid');
  });

  test.each(['gpt-4.1-mini', 'gpt4', 'claude-3.5@2024:latest', 'a'])('bare id %s → model_id_not_pinned', (value) => {
    const e = refusal(value);
    expect([e.kind, e.status, e.code, e.type]).toEqual(['model_id_not_pinned', 400, 'model_id_not_pinned', 'invalid_request_error']);
    expect(e.message).toContain(value);
  });
});

describe('accepted forms', () => {
  const allowed = [
    ...'ABCDEFGHIJKLMNOPQRSTUVWXYZ',
    ...'abcdefghijklmnopqrstuvwxyz',
    ...'0123456789',
    '.',
    '_',
    ':',
    '/',
    '@',
    '-',
  ];
  test.each(allowed.map((c) => [c]))('allowed character %j', (ch) => {
    const value = `prov/m${ch}x`;
    const ref = parseModelField(value);
    expect(ref).toEqual({ kind: 'pinned', id: value, provider: 'prov', providerModelId: `m${ch}x` });
  });

  test.each<[string, ModelRef]>([
    ['openai/gpt-4.1-mini', { kind: 'pinned', id: 'openai/gpt-4.1-mini', provider: 'openai', providerModelId: 'gpt-4.1-mini' }],
    ['local/org/x', { kind: 'pinned', id: 'local/org/x', provider: 'local', providerModelId: 'org/x' }],
    ['together/meta-llama/Llama-3.3-70B', { kind: 'pinned', id: 'together/meta-llama/Llama-3.3-70B', provider: 'together', providerModelId: 'meta-llama/Llama-3.3-70B' }],
    ['openai/ft:gpt-4o:org@v2', { kind: 'pinned', id: 'openai/ft:gpt-4o:org@v2', provider: 'openai', providerModelId: 'ft:gpt-4o:org@v2' }],
    ['profile/abc', { kind: 'profile', id: 'profile/abc', identifier: 'abc' }],
    ['profile/a/b', { kind: 'profile', id: 'profile/a/b', identifier: 'a/b' }],
    ['sluice/auto', { kind: 'auto', id: 'sluice/auto' }],
    ['sluice/other', { kind: 'pinned', id: 'sluice/other', provider: 'sluice', providerModelId: 'other' }],
    ['Profile/abc', { kind: 'pinned', id: 'Profile/abc', provider: 'Profile', providerModelId: 'abc' }],
  ])('%s', (value, expected) => {
    expect(parseModelField(value)).toEqual(expected);
  });

  test('the auto id is sluice/auto', () => {
    expect(AUTO_MODEL_ID).toBe('sluice/auto');
  });
});

describe('an empty provider part', () => {
  // SPEC: "A well-formed id with no provider in front is refused 400 model_id_not_pinned".
  // A leading slash names no provider; today it parses as provider '' and fails later as 404.
  test('/gpt-4.1-mini names no provider → model_id_not_pinned', () => {
    expect(refusal('/gpt-4.1-mini').kind).toBe('model_id_not_pinned');
  });
});
