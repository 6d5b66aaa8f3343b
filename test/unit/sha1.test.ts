/**
 * `sha1Word` is SHA-1's first word exactly: every stored shard was picked by OpenSSL's SHA-1, so
 * any string, of one block or many, ASCII or not, must hash to the same word.
 */
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { sha1Word } from '../../lambdas/core/sha1';

const openssl = (text: string): number => createHash('sha1').update(text, 'utf8').digest().readUInt32BE(0);

describe('sha1Word', () => {
  it('equals OpenSSL on FIPS 180-4 examples and at every padding boundary', () => {
    expect(sha1Word('abc')).toBe(0xa9993e36);
    expect(sha1Word('')).toBe(0xda39a3ee);
    expect(sha1Word('abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq')).toBe(0x84983e44);
    // 55 bytes fit one block with the length; 56 to 63 need a second; 64 fills one exactly.
    for (let n = 0; n <= 200; n += 1) expect(sha1Word('x'.repeat(n))).toBe(openssl('x'.repeat(n)));
  });

  it('equals OpenSSL for any string, non-ASCII included', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: 'grapheme', maxLength: 300 }), fc.string({ unit: 'binary', maxLength: 300 }), fc.string({ maxLength: 300 })), (text) => {
        expect(sha1Word(text)).toBe(openssl(text));
      }),
      { numRuns: 2000 },
    );
  });

  it('does not read a longer earlier string past a shorter one', () => {
    const long = 'y'.repeat(500);
    expect(sha1Word(long)).toBe(openssl(long));
    expect(sha1Word('yy')).toBe(openssl('yy'));
    expect(sha1Word(`é${long}`)).toBe(openssl(`é${long}`));
    expect(sha1Word('ab')).toBe(openssl('ab'));
  });
});
