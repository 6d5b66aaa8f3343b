/**
 * The regional ledger's pure parts: the region setting read from the environment, each region's
 * share of a limit (shares always sum to the limit), whose key an item is under (every family a
 * region writes, and a refusal for one nobody owns), the transfer decisions, the aggregator's and
 * the transfer agent's filters.
 */
import { ALIVE_FRESH_MS, aliveKey, freshMark } from '../../lambdas/store/regions-alive';
import type { DynamoDBRecord } from 'aws-lambda';
import { USAGE_STREAM_FILTERS, matchesFilters } from '../../lambdas/aggregator/mapping';
import { regionUsageFilters } from '../../lib/aggregator';
import { giveFor, movedIn, peerCounters, quantityId, quantityOf, rateRoomAfterRetag, receivable, seenSpare, spendSpare } from '../../lambdas/core/transfers';
import type { AdmissionSnapshot, SliceView } from '../../lambdas/core/admission';
import { RegionConfigError, asRegion, regionSetupFromEnv, regionShare, regionTag, type RegionSetup } from '../../lambdas/store/regions';
import { RegionKeyError, plainPk, regionalPk } from '../../lambdas/store/regions-lens';
import { noticeOf } from '../../lambdas/transfer/agent';
import { describeSlices } from '../../cli/commands/slices';

const TWO: RegionSetup = { regions: ['us-east-1', 'us-west-2'], region: 'us-east-1', weights: [1, 1], transferWaitMs: 2000 };

describe('the region setting', () => {
  test('unset is one region: today', () => {
    expect(regionSetupFromEnv({})).toBeUndefined();
    expect(() => regionSetupFromEnv({ SLUICE_REGION: 'us-west-2' })).toThrow(RegionConfigError);
  });

  test('the home region is the first; the process runs as SLUICE_REGION, else AWS_REGION when listed, else home', () => {
    const env = { SLUICE_REGIONS: 'us-east-1,us-west-2' };
    expect(regionSetupFromEnv(env)?.region).toBe('us-east-1');
    expect(regionSetupFromEnv({ ...env, AWS_REGION: 'us-west-2' })?.region).toBe('us-west-2');
    expect(regionSetupFromEnv({ ...env, AWS_REGION: 'eu-west-1' })?.region).toBe('us-east-1');
    expect(regionSetupFromEnv({ ...env, SLUICE_REGION: 'us-west-2', AWS_REGION: 'us-east-1' })?.region).toBe('us-west-2');
    expect(regionSetupFromEnv({ ...env, SLUICE_REGION_WEIGHTS: '3,1' })?.weights).toEqual([3, 1]);
    expect(() => regionSetupFromEnv({ ...env, SLUICE_REGION: 'eu-west-1' })).toThrow(RegionConfigError);
    expect(() => regionSetupFromEnv({ ...env, SLUICE_REGION_WEIGHTS: '1' })).toThrow(RegionConfigError);
    expect(() => regionSetupFromEnv({ ...env, SLUICE_REGION_WEIGHTS: '1,0' })).toThrow(RegionConfigError);
    expect(() => regionSetupFromEnv({ SLUICE_REGIONS: 'us-east-1,us-east-1' })).toThrow(RegionConfigError);
    // The CDK's home region must be the first listed (its items keep today's keys).
    expect(regionSetupFromEnv({ ...env, SLUICE_HOME_REGION: 'us-east-1' })?.regions[0]).toBe('us-east-1');
    expect(() => regionSetupFromEnv({ ...env, SLUICE_HOME_REGION: 'us-west-2' })).toThrow(RegionConfigError);
  });

  test("the home region's items carry no tag; the others' carry @<region>", () => {
    expect(regionTag(TWO)).toBe('');
    expect(regionTag(asRegion(TWO, 'us-west-2'))).toBe('@us-west-2');
  });
});

describe('shares of a limit', () => {
  test.each([
    [0, [1, 1]],
    [1, [1, 1]],
    [7, [1, 1]],
    [100, [1, 1]],
    [101, [3, 1]],
    [999_999, [2, 3, 5]],
  ])('%d over weights %j sums to the limit exactly, each within one unit of its weighted part', (total, weights) => {
    const setup: RegionSetup = { ...TWO, regions: weights.map((_, i) => `r-${i}`), region: 'r-0', weights };
    const shares = setup.regions.map((r) => regionShare(setup, total, r));
    expect(shares.reduce((a, b) => a + b, 0)).toBe(total);
    const sum = weights.reduce((a, b) => a + b, 0);
    shares.forEach((s, i) => expect(Math.abs(s - (total * (weights[i] as number)) / sum)).toBeLessThan(1));
  });

  test('an unbounded figure is not split', () => {
    expect(regionShare(TWO, Number.MAX_SAFE_INTEGER)).toBe(Number.MAX_SAFE_INTEGER);
  });
});

describe("a region's keys", () => {
  test.each([
    ['WS#ws_1', 'BALANCE', 'WS#ws_1@us-west-2'],
    ['WS#ws_1#S3', 'BALANCE', 'WS#ws_1@us-west-2#S3'],
    ['WS#ws_1', 'SLICESTATS', 'WS#ws_1@us-west-2'],
    ['WS#ws_1', 'CREDIT#ref', 'WS#ws_1'],
    ['KEY#ws_1#key_a', 'RATE#key_a#1', 'KEY#ws_1#key_a@us-west-2'],
    ['KEY#ws_1#key_a#S5', 'KEYWIN#key_a#2026-11', 'KEY#ws_1#key_a@us-west-2#S5'],
    ['MEMBER#ws_1#mem_b', 'MEMBERMONTH#mem_b#2026-11', 'MEMBER#ws_1#mem_b@us-west-2'],
    ['XFER#ws_1', 'CREDIT', 'XFER#ws_1@us-west-2'],
  ])('%s / %s is %s, and back', (pk, sk, want) => {
    expect(regionalPk(pk, sk, '@us-west-2')).toBe(want);
    expect(plainPk(want, '@us-west-2')).toBe(pk);
    expect(regionalPk(pk, sk, '')).toBe(pk);
  });

  test('a family no region owns is refused, not written untagged', () => {
    expect(() => regionalPk('WS#ws_1#DAY#2026-11-01', 'ALL', '@us-west-2')).toThrow(RegionKeyError);
    expect(() => regionalPk('SOMETHING#x', 'y', '@us-west-2')).toThrow(RegionKeyError);
  });
});

describe('transfers', () => {
  test("a key window's quantity carries its limit, and reads back", () => {
    const q = { kind: 'key', keyId: 'key_a', windowSk: 'KEYWIN#key_a#2026-11~1700', limitMicros: 5_000 } as const;
    expect(quantityId(q)).toBe('KEYWIN#key_a#2026-11~1700~L5000');
    expect(quantityOf(quantityId(q), 'key_a')).toEqual(q);
    expect(quantityOf('CREDIT', undefined)).toEqual({ kind: 'credit' });
    expect(quantityOf('KEYWIN#key_a#2026-11', 'key_a')).toBeUndefined();
  });

  test("a member month's and the workspace month's quantities carry their limit and read back (a member's with the member stamped on its item); one without its stamp is not known", () => {
    const q = { kind: 'member', memberId: 'mem_a', windowSk: 'MEMBERMONTH#mem_a#2026-11~1700', limitMicros: 7_000 } as const;
    expect(quantityId(q)).toBe('MEMBERMONTH#mem_a#2026-11~1700~L7000');
    expect(quantityOf(quantityId(q), undefined, 'mem_a')).toEqual(q);
    // A month with no generation: the limit's marker is the last `~L`.
    const plain = { kind: 'member', memberId: 'mem_a', windowSk: 'MEMBERMONTH#mem_a#2026-11', limitMicros: 0 } as const;
    expect(quantityOf(quantityId(plain), undefined, 'mem_a')).toEqual(plain);
    // A member month's item stamped only with a key, a key window's only with a member, a limit that is no integer: unknown.
    expect(quantityOf(quantityId(q), 'key_a')).toBeUndefined();
    expect(quantityOf('KEYWIN#key_a#2026-11~L5000', undefined, 'mem_a')).toBeUndefined();
    expect(quantityOf('MEMBERMONTH#mem_a#2026-11~L5x', undefined, 'mem_a')).toBeUndefined();
    expect(quantityOf('MEMBERMONTH#mem_a#2026-11', undefined, 'mem_a')).toBeUndefined();
    // The workspace month: its month and limit, nothing stamped; a month id that is no month is not known.
    const month = { kind: 'month', month: '2026-11', limitMicros: 9_000 } as const;
    expect(quantityId(month)).toBe('MONTH#2026-11~L9000');
    expect(quantityOf(quantityId(month), undefined)).toEqual(month);
    expect(quantityOf('MONTH#2026-13~L9000', undefined)).toBeUndefined();
    expect(quantityOf('MONTH#2026-11', undefined)).toBeUndefined();
    // Key and member quantities of one window id never share a transfer item.
    expect(quantityId({ kind: 'key', keyId: 'mem_a', windowSk: 'KEYWIN#mem_a#2026-11', limitMicros: 7_000 })).not.toBe(quantityId(plain));
  });

  test("the spend-rate cap's quantity is tagged by the whole cap and reads back; a changed cap is another item", () => {
    const q = { kind: 'spend', capMicros: 50_000_000 } as const;
    expect(quantityId(q)).toBe('SPEND~L50000000');
    expect(quantityOf(quantityId(q), undefined)).toEqual(q);
    expect(quantityId({ kind: 'spend', capMicros: 40_000_000 })).not.toBe(quantityId(q));
    expect(quantityOf('SPEND~L5x', undefined)).toBeUndefined();
    expect(quantityOf('SPEND', undefined)).toBeUndefined();
  });

  test("a key's minute of requests is its counter's key under the rate, with the key stamped on its item; a changed rate is another item", () => {
    const q = { kind: 'rate', keyId: 'key_a', windowSk: 'RATE#key_a#29000000', ratePerMinute: 60 } as const;
    expect(quantityId(q)).toBe('RATE#key_a#29000000~L60');
    expect(quantityOf(quantityId(q), 'key_a')).toEqual(q);
    expect(quantityOf(quantityId(q), undefined)).toBeUndefined();
    expect(quantityId({ ...q, ratePerMinute: 61 })).not.toBe(quantityId(q));
  });

  test("a key's minute counted on its key window is the same quantity, with the window stamped on its item (another key's window is no place of this key's)", () => {
    const q = { kind: 'rate', keyId: 'key_a', windowSk: 'RATE#key_a#29000000', ratePerMinute: 60, rateWindow: 'KEYWIN#key_a#2026-11' } as const;
    expect(quantityId(q)).toBe('RATE#key_a#29000000~L60');
    expect(quantityOf(quantityId(q), 'key_a', undefined, 'KEYWIN#key_a#2026-11')).toEqual(q);
    const { rateWindow: _, ...onCounter } = q;
    expect(quantityOf(quantityId(q), 'key_a', undefined, undefined)).toEqual(onCounter);
    expect(quantityOf(quantityId(q), 'key_a', undefined, 'KEYWIN#key_b#2026-11')).toEqual(onCounter);
  });

  test('the tag rule: headroom rewritten under a cap is the share plus what moved under that cap, less what is live', () => {
    // What moved: everything credited from the others less everything given them, over every peer.
    const item = { 'recv_us-west-2': 700, 'sent_us-west-2': 200, 'recv_eu-west-1': 50, 'sent_eu-west-1': 0 };
    expect(movedIn(item, ['us-west-2', 'eu-west-1'])).toBe(550);
    expect(movedIn(undefined, ['us-west-2'])).toBe(0);
    expect(movedIn({ 'sent_us-west-2': 300 }, ['us-west-2'])).toBe(-300);
    expect(rateRoomAfterRetag(2_500, 550, 1_000)).toBe(2_050);
    expect(rateRoomAfterRetag(2_500, -300, 2_400)).toBe(-200); // owes headroom until its reservations age out
  });

  test("what a region has spare of the cap: its slices' headroom plus what aged out untidied; under another cap, its capacity less what is live", () => {
    const now = Date.UTC(2030, 10, 22, 12, 0, 0);
    const second = now / 1000;
    const month = { exists: false, settledMicros: 0, heldMicros: 0, usedMicros: 0, roomMicros: 0, limitMicros: -1 };
    const slice = (n: number, over: Partial<SliceView>): SliceView => ({ slice: n, availableMicros: 0, heldMicros: 0, spentMicros: 0, creditedMicros: 0, rateRoom: 0, rateTotal: 0, slots: [], month, ...over });
    const snap = (slices: SliceView[]): AdmissionSnapshot => ({ slices, active: slices.length, keyRequests: 0 });
    // Never written: slice 0 holds the whole share.
    expect(spendSpare(snap([slice(0, {})]), 2_500, 0, now)).toBe(2_500);
    // Under the tag: room on every slice, plus a slot that aged out and is not tidied yet.
    const tagged = snap([
      slice(0, { rateCap: 2_500, rateRoom: 900, rateTotal: 1_300, slots: [{ slot: 0, second: second - 10, micros: 1_000 }, { slot: 1, second: second - 70, micros: 300 }] }),
      slice(1, { rateCap: 2_500, rateRoom: 100, rateTotal: 0 }),
    ]);
    expect(spendSpare(tagged, 2_500, 0, now)).toBe(900 + 300 + 100);
    // Under another cap: the capacity under this one, less what is live.
    expect(spendSpare(tagged, 3_000, 400, now)).toBe(3_000 + 400 - 1_000);
    expect(spendSpare(tagged, 500, 0, now)).toBe(0);
  });

  test('receiving takes only what is new; giving answers what was asked, or more toward the asker\'s weighted part, never more than is spare', () => {
    expect(receivable(70, 50)).toBe(20);
    expect(receivable(50, 50)).toBe(0);
    expect(receivable(40, 50)).toBe(0); // a stale read is never behind what was credited in effect
    const even = { giver: 1, asker: 1 };
    // The ask when the asker is at or above its part already.
    expect(giveFor({ asked: 100, answered: 60 }, { giver: 1_000, asker: 1_000 }, even)).toBe(40);
    expect(giveFor({ asked: 100, answered: 60 }, { giver: 1_000, asker: 600 }, even)).toBe(200);
    // More, to bring the asker to its part of both spares: (1,000 + 0) / 2.
    expect(giveFor({ asked: 100, answered: 60 }, { giver: 1_000, asker: 0 }, even)).toBe(500);
    // Weighted: the asker's part is 3/4 of 1,000 + 200, less its 200.
    expect(giveFor({ asked: 10, answered: 0 }, { giver: 1_000, asker: 200 }, { giver: 1, asker: 3 })).toBe(700);
    // Never more than the giver has; nothing when nothing new is asked, whatever the balance.
    expect(giveFor({ asked: 100, answered: 60 }, { giver: 10, asker: 0 }, even)).toBe(10);
    expect(giveFor({ asked: 60, answered: 60 }, { giver: 1_000, asker: 0 }, even)).toBe(0);
    expect(giveFor({ asked: 60, answered: 0 }, { giver: -5, asker: -5 }, even)).toBe(0);
    // Exact past 2^53 / weight.
    const big = Number.MAX_SAFE_INTEGER - 1;
    expect(giveFor({ asked: 1, answered: 0 }, { giver: big, asker: 0 }, { giver: 1, asker: 1_000 })).toBe(Number((BigInt(big) * 1000n) / 1001n));
    expect(peerCounters({ 'sent_us-west-2': 5, 'recv_us-west-2': 'x', 'left_us-west-2': 9 }, 'us-west-2')).toEqual({ sent: 5, recv: 0, asked: 0, answered: 0, left: 9 });
    // Another region's spare as seen here: its replicated figure, plus what was sent it that its item does not show credited yet.
    expect(seenSpare(100, 70, 50)).toBe(120);
    expect(seenSpare(100, 50, 50)).toBe(100);
    expect(seenSpare(-3, 50, 60)).toBe(0);
  });
});

describe('stream filters', () => {
  const settled = (region?: string): DynamoDBRecord =>
    ({ eventName: 'MODIFY', dynamodb: { NewImage: { state: { S: 'settled' }, ...(region === undefined ? {} : { region: { S: region } }) } } }) as DynamoDBRecord;

  test("a region's aggregator is handed its own rows' settlements only; the home region's also rows without a region", () => {
    const home = regionUsageFilters(USAGE_STREAM_FILTERS, 'us-east-1', true);
    const west = regionUsageFilters(USAGE_STREAM_FILTERS, 'us-west-2', false);
    expect(matchesFilters(settled('us-east-1'), home)).toBe(true);
    expect(matchesFilters(settled(), home)).toBe(true);
    expect(matchesFilters(settled('us-west-2'), home)).toBe(false);
    expect(matchesFilters(settled('us-west-2'), west)).toBe(true);
    expect(matchesFilters(settled('us-east-1'), west)).toBe(false);
    expect(matchesFilters(settled(), west)).toBe(false);
    const open = { eventName: 'INSERT', dynamodb: { NewImage: { state: { S: 'open' }, region: { S: 'us-west-2' } } } };
    expect(matchesFilters(open, west)).toBe(false);
  });

  test("the transfer agent takes other regions' transfer items only", () => {
    const record = (pk: string, region: string): DynamoDBRecord =>
      ({ eventName: 'MODIFY', dynamodb: { NewImage: { pk: { S: pk }, sk: { S: 'CREDIT' }, region: { S: region }, ws: { S: 'ws_1' } } } }) as DynamoDBRecord;
    expect(noticeOf(record('XFER#ws_1@us-west-2', 'us-west-2'), 'us-east-1')).toEqual({ workspaceId: 'ws_1', quantity: { kind: 'credit' }, peer: 'us-west-2' });
    expect(noticeOf(record('XFER#ws_1', 'us-east-1'), 'us-east-1')).toBeUndefined();
    expect(noticeOf(record('WS#ws_1', 'us-west-2'), 'us-east-1')).toBeUndefined();
    const member = { eventName: 'MODIFY', dynamodb: { NewImage: { pk: { S: 'XFER#ws_1@us-west-2' }, sk: { S: 'MEMBERMONTH#mem_a#2026-11~L9000' }, region: { S: 'us-west-2' }, ws: { S: 'ws_1' }, memberId: { S: 'mem_a' } } } } as DynamoDBRecord;
    expect(noticeOf(member, 'us-east-1')).toEqual({ workspaceId: 'ws_1', quantity: { kind: 'member', memberId: 'mem_a', windowSk: 'MEMBERMONTH#mem_a#2026-11', limitMicros: 9_000 }, peer: 'us-west-2' });
    expect(noticeOf(member, 'us-west-2')).toBeUndefined();
    const spend = { eventName: 'MODIFY', dynamodb: { NewImage: { pk: { S: 'XFER#ws_1@us-west-2' }, sk: { S: 'SPEND~L50000000' }, region: { S: 'us-west-2' }, ws: { S: 'ws_1' } } } } as DynamoDBRecord;
    expect(noticeOf(spend, 'us-east-1')).toEqual({ workspaceId: 'ws_1', quantity: { kind: 'spend', capMicros: 50_000_000 }, peer: 'us-west-2' });
  });
});

describe('sluice workspace slices with several regions', () => {
  test('shows each region, what is in transit and what is stranded in a region named down', () => {
    const money = (region: string, down: boolean, available: number) => ({ region, availableMicros: available, heldMicros: 1_000_000, spentMicros: 0, creditedMicros: available + 1_000_000, sentMicros: 0, receivedMicros: 0, down });
    const lines = describeSlices({
      workspaceId: 'ws_1',
      slices: 1,
      floor: 1,
      high: 1,
      maxSlices: 48,
      changedAt: null,
      recent: { minutes: 0, admissions: 0, conflicts: 0, conflictRate: null, admissionsPerSecond: 0 },
      automatic: { growsAboveConflictRate: 0.05, wouldShrinkTo: null },
      regions: {
        regions: [money('us-east-1', true, 4_000_000), money('us-west-2', false, 2_000_000)],
        availableMicros: 6_000_000,
        heldMicros: 2_000_000,
        spentMicros: 0,
        creditedMicros: 8_000_000,
        inTransitMicros: 0,
        strandedMicros: 5_000_000,
      },
    });
    expect(lines.some((l) => l.startsWith('region us-east-1 (down: stranded)'))).toBe(true);
    expect(lines.some((l) => l.startsWith('region us-west-2:'))).toBe(true);
    expect(lines[lines.length - 1]).toMatch(/stranded in regions down: .*5/);
  });
});

describe("a region's alive mark (a top-up's spread reads it)", () => {
  const now = 1_800_000_000_000;
  it('counts a region running while its mark is fresh, and not when it is old, far in the future, or not a time', () => {
    expect(freshMark(now, now)).toBe(true);
    expect(freshMark(now - ALIVE_FRESH_MS, now)).toBe(true);
    expect(freshMark(now - ALIVE_FRESH_MS - 1, now)).toBe(false);
    // Another region's clock a little ahead is still a mark; far ahead is not trusted.
    expect(freshMark(now + 30_000, now)).toBe(true);
    expect(freshMark(now + 30_001, now)).toBe(false);
    for (const bad of [undefined, null, '1800000000000', Number.NaN, 1.5]) expect(freshMark(bad, now)).toBe(false);
  });
  it('keys each region its own item', () => {
    expect(aliveKey('us-west-2')).toEqual({ pk: 'REGION#us-west-2', sk: 'ALIVE' });
  });
});
