/**
 * The ledger's key layout (`lambdas/store/keys.ts`): shards and a request row's sort key are
 * stored in every table, so their spelling may never drift when the code computing them changes.
 */
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { EXPIRY_SHARDS, USAGE_SHARDS, expiryShard, isoMillis, shardOf, usagePk, usageSk } from '../../lambdas/store/keys';

describe('shardOf', () => {
  it('is the first four bytes of the id SHA-1, modulo the shards (the layout every stored row has)', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 80 }), fc.integer({ min: 1, max: 1024 }), (id, shards) => {
        expect(shardOf(id, shards)).toBe(createHash('sha1').update(id).digest().readUInt32BE(0) % shards);
      }),
      { numRuns: 500 },
    );
  });

  it('puts known ids where the stored rows have them', () => {
    expect(expiryShard('req_1a21e03b91fa3d840bf28a01')).toBe('X133');
    expect(usagePk('ws_2bb8c7d675d31f0a3477', 'req_1a21e03b91fa3d840bf28a01')).toBe('ws_2bb8c7d675d31f0a3477#U5');
    expect(shardOf('', EXPIRY_SHARDS)).toBe(238);
    expect(shardOf('ws_2bb8c7d675d31f0a3477', USAGE_SHARDS)).toBe(15);
  });
});

describe('isoMillis and usageSk', () => {
  it('spell a time as toISOString does, whatever the order of the times asked', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.integer({ min: Date.UTC(1970, 0, 1), max: Date.UTC(2100, 0, 1) }),
            // Around second boundaries, where the kept prefix changes.
            fc.integer({ min: 1_795_799_889_990, max: 1_795_799_890_010 }),
            // Years that do not have four digits: spelled whole, never from the kept prefix.
            fc.integer({ min: -8.64e15, max: 8.64e15 }),
            // A fraction of a millisecond, which toISOString drops.
            fc.double({ min: 0, max: 4.1e12, noNaN: true }),
          ),
          { minLength: 1, maxLength: 40 },
        ),
        (times) => {
          for (const at of times) expect(isoMillis(at)).toBe(new Date(at).toISOString());
        },
      ),
      { numRuns: 300 },
    );
  });

  it('refuses what toISOString refuses', () => {
    for (const at of [Number.NaN, Number.POSITIVE_INFINITY, 8.64e15 + 1]) expect(() => isoMillis(at)).toThrow(RangeError);
  });

  it('names a request row by its start and id', () => {
    expect(usageSk(1_795_799_890_207, 'req_1')).toBe('2026-11-27T17:18:10.207Z#req_1');
    expect(usageSk(1_795_799_890_007, 'req_2')).toBe('2026-11-27T17:18:10.007Z#req_2');
    expect(usageSk(1_795_799_891_070, 'req_3')).toBe('2026-11-27T17:18:11.070Z#req_3');
  });
});
