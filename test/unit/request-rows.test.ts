/**
 * A request's row from admission to settlement, as the store writes it: the id that carries the
 * request's start, the open row a hold is, the settlement's update that turns it into a usage row,
 * and which stream records the aggregator is handed.
 */
import { matchesFilters, USAGE_STREAM_FILTERS } from '../../lambdas/aggregator/mapping';
import { requestIdDigits, requestIdTime } from '../../lambdas/core/request-id';
import type { Settlement } from '../../lambdas/gateway/ports';
import type { HoldRecord } from '../../lambdas/shared/records';
import { expiryShard, requestRowKey, usagePk } from '../../lambdas/store/keys';
import { holdOfRow, isSettledRow, openRow, rowStart, settleRowUpdate } from '../../lambdas/store/request-rows';

const START = Date.UTC(2027, 1, 13, 9, 30, 0, 123);

describe('request ids carry their start', () => {
  it('24 hex digits: the start in the first 11, random after', () => {
    const digits = requestIdDigits(START, 'abcdef0123456789');
    expect(digits).toMatch(/^[0-9a-f]{24}$/);
    expect(digits.slice(11)).toBe('abcdef0123456');
    expect(requestIdTime(`req_${digits}`)).toBe(START);
  });

  it.each([
    ['an id of another shape', 'req_1'],
    ['too short', 'req_0192f1a2b3c4d5e6f70819'],
    ['not hex', 'req_0192f1a2b3c4d5e6f708192z'],
    ['another prefix', 'key_0192f1a2b3c4d5e6f708192a'],
  ])('no start in %s', (_name, id) => {
    expect(requestIdTime(id)).toBeUndefined();
  });

  it('refuses what it cannot encode', () => {
    expect(() => requestIdDigits(-1, 'abcdef0123456')).toThrow(RangeError);
    expect(() => requestIdDigits(16 ** 11, 'abcdef0123456')).toThrow(RangeError);
    expect(() => requestIdDigits(START, 'xyz')).toThrow(RangeError);
  });

  it('a row starts at its id\'s start, or at the admission for an id without one', () => {
    expect(rowStart(`req_${requestIdDigits(START, 'abcdef0123456')}`, START + 50)).toBe(START);
    expect(rowStart('req_1', START + 50)).toBe(START + 50);
  });
});

describe('the row', () => {
  const id = `req_${requestIdDigits(START, '0123456789abc')}`;
  const hold: HoldRecord = {
    holdId: id,
    workspaceId: 'ws_a',
    keyId: 'key_a',
    memberId: 'mem_a',
    family: 'chat_completions',
    requestedModel: 'openai/gpt-x',
    amountMicros: 5_000,
    inputMicros: 1_200,
    windows: ['KEYWIN#key_a#M2027-02', 'MONTH#2027-02'],
    byok: false,
    createdAt: START,
    expiresAt: START + 600_000,
    slice: 3,
  };
  const settlement: Settlement = {
    counts: { inputTokens: 10, cachedInputTokens: 2, outputTokens: 5, reasoningTokens: 1 },
    chargeMicros: 4_000,
    servedBy: 'openai/gpt-x',
    provider: 'openai',
    stream: false,
    status: 200,
    outcome: 'ok',
    attempts: 1,
    now: START + 2_000,
  };

  it('an admission puts it open, at the key its workspace and id name, in the sweeper\'s index', () => {
    const row = openRow(hold);
    expect(row).toMatchObject({ ...requestRowKey('ws_a', id, START), state: 'open', requestId: id, amountMicros: 5_000, startedAt: START, expiresAt: START + 600_000, slice: 3 });
    expect(row.pk).toBe(usagePk('ws_a', id));
    expect(row.expiryShard).toBe(expiryShard(id));
    expect(row).not.toHaveProperty('ttl'); // an open row is never collected: it is a hold
    expect(holdOfRow(row)).toEqual(hold);
    expect(isSettledRow(row)).toBe(false);
  });

  it('settlement: conditioned on open and the amount, sets the usage row\'s figures, removes what only a hold needs', () => {
    const { Update } = settleRowUpdate('U', hold, settlement, { chargeMicros: 4_000, uncollectedMicros: 0, retentionDays: 30 });
    expect(Update.Key).toEqual(requestRowKey('ws_a', id, START));
    expect(Update.ReturnValuesOnConditionCheckFailure).toBe('ALL_OLD');
    const values = Update.ExpressionAttributeValues ?? {};
    const valueOf = (text: string, name: string): unknown => values[new RegExp(`#${name} = (:v\\d+)`).exec(text)?.[1] ?? ''];
    expect(valueOf(Update.ConditionExpression ?? '', 'state')).toBe('open');
    expect(valueOf(Update.ConditionExpression ?? '', 'amountMicros')).toBe(5_000);
    for (const [name, value] of [
      ['state', 'settled'],
      ['chargeMicros', 4_000],
      ['holdMicros', 5_000],
      ['durationMs', 2_000],
      ['outcome', 'ok'],
      ['servedBy', 'openai/gpt-x'],
      ['ttl', Math.floor((START + 2_000) / 1000) + 30 * 86_400],
    ] as const) {
      expect(valueOf(Update.UpdateExpression, name)).toBe(value);
    }
    const removed = /REMOVE (.*)$/.exec(Update.UpdateExpression)?.[1]?.split(', ').map((n) => Update.ExpressionAttributeNames?.[n]);
    expect(removed).toEqual(expect.arrayContaining(['expiryShard', 'expiresAt', 'amountMicros', 'inputMicros', 'windows', 'slice', 'pendingChargeMicros']));
    expect(Update.UpdateExpression).not.toContain('#uncollectedMicros');
  });

  it.each([
    ['a settled row', { state: 'settled', outcome: 'ok' }, true],
    ['a row from before rows had a state', { outcome: 'ok' }, true],
    ['an open row', { state: 'open' }, false],
    ['nothing', undefined, false],
  ])('isSettledRow: %s', (_name, item, settled) => {
    expect(isSettledRow(item)).toBe(settled);
  });

  it('an open row lacking what settling needs is not taken for a hold', () => {
    const { amountMicros: _amount, ...broken } = openRow(hold);
    expect(holdOfRow(broken)).toBeUndefined();
    expect(holdOfRow({ ...openRow(hold), state: 'settled' })).toBeUndefined();
  });
});

describe('the stream records the aggregator is handed (the mapping\'s filter)', () => {
  const image = (state: string | undefined, extra: Record<string, unknown> = {}): Record<string, unknown> => ({ ...(state === undefined ? {} : { state: { S: state } }), outcome: { S: 'ok' }, ...extra });
  it.each([
    ['a row\'s change to settled', 'MODIFY', image('settled'), true],
    ['a row inserted settled (a state of its own)', 'INSERT', image('settled'), true],
    ['a row inserted settled before rows had a state', 'INSERT', image(undefined), true],
    ['a row\'s open INSERT', 'INSERT', { state: { S: 'open' } }, false],
    ['a hold growing (the row still open)', 'MODIFY', image('open'), false],
    ['a TTL deletion', 'REMOVE', image('settled'), false],
    ['a MODIFY of a row without a state', 'MODIFY', image(undefined), false],
  ])('%s: %s', (_name, eventName, newImage, handed) => {
    expect(matchesFilters({ eventName, dynamodb: { NewImage: newImage } }, USAGE_STREAM_FILTERS)).toBe(handed);
  });
});
