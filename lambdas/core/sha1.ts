/**
 * The first 32 bits of a string's SHA-1 (of its UTF-8), big-endian: what `shardOf` picks shards
 * with, and what every stored row's shard already is, so it must stay SHA-1 exactly.
 *
 * Why not `crypto.hash('sha1', …)`: each call goes through OpenSSL's digest lookup and context,
 * whose code and tables are out of the cache by the time a request calls it again. Timed in the
 * gateway's process (bench/cpu-breakdown.ts), a call on a 28-character id cost 10 µs, and a
 * request makes four or five; this one costs under 1 µs warm and about 4 µs with every cache
 * line cold (OpenSSL's: 2.5 and 21 µs). Not for security: a shard is public.
 *
 * Tested equal to OpenSSL's SHA-1 over any string, one block or many (test/unit/sha1.test.ts).
 */

/** The message schedule, reused: a call never yields. */
const W = new Int32Array(80);
/** A string's bytes when every character is ASCII (ids are), reused and grown as needed. */
let ascii = new Uint8Array(128);

/** The bytes SHA-1 reads: the string's UTF-8. */
function utf8Of(text: string): Uint8Array {
  const n = text.length;
  if (n > ascii.length) ascii = new Uint8Array(Math.max(n, ascii.length * 2));
  for (let i = 0; i < n; i += 1) {
    const c = text.charCodeAt(i);
    if (c > 0x7f) return Buffer.from(text, 'utf8');
    ascii[i] = c;
  }
  return ascii;
}

/** SHA-1 (FIPS 180-4) of `text`'s UTF-8; its first word (`digest.readUInt32BE(0)`). */
export function sha1Word(text: string): number {
  const bytes = utf8Of(text);
  // Only the bytes that are the text's: `ascii` may hold a longer earlier string past them.
  const n = bytes === ascii ? text.length : bytes.length;
  // The message, its 0x80 byte and its 64-bit bit length, padded to whole 64-byte blocks.
  const blocks = ((n + 8) >>> 6) + 1;
  let h0 = 0x67452301;
  let h1 = 0xefcdab89 | 0;
  let h2 = 0x98badcfe | 0;
  let h3 = 0x10325476;
  let h4 = 0xc3d2e1f0 | 0;
  for (let b = 0; b < blocks; b += 1) {
    const base = b * 64;
    for (let i = 0; i < 16; i += 1) {
      let word = 0;
      for (let k = 0; k < 4; k += 1) {
        const at = base + i * 4 + k;
        word = (word << 8) | (at < n ? (bytes[at] as number) : at === n ? 0x80 : 0);
      }
      W[i] = word;
    }
    if (b === blocks - 1) {
      W[14] = Math.floor(n / 0x20000000); // the bit length's high word: n * 8 / 2^32
      W[15] = (n * 8) | 0;
    }
    for (let i = 16; i < 80; i += 1) {
      const x = (W[i - 3] as number) ^ (W[i - 8] as number) ^ (W[i - 14] as number) ^ (W[i - 16] as number);
      W[i] = (x << 1) | (x >>> 31);
    }
    let a = h0;
    let bb = h1;
    let c = h2;
    let d = h3;
    let e = h4;
    for (let i = 0; i < 80; i += 1) {
      let f: number;
      let k: number;
      if (i < 20) {
        f = (bb & c) | (~bb & d);
        k = 0x5a827999;
      } else if (i < 40) {
        f = bb ^ c ^ d;
        k = 0x6ed9eba1;
      } else if (i < 60) {
        f = (bb & c) | (bb & d) | (c & d);
        k = 0x8f1bbcdc | 0;
      } else {
        f = bb ^ c ^ d;
        k = 0xca62c1d6 | 0;
      }
      const t = (((a << 5) | (a >>> 27)) + f + e + k + (W[i] as number)) | 0;
      e = d;
      d = c;
      c = (bb << 30) | (bb >>> 2);
      bb = a;
      a = t;
    }
    h0 = (h0 + a) | 0;
    h1 = (h1 + bb) | 0;
    h2 = (h2 + c) | 0;
    h3 = (h3 + d) | 0;
    h4 = (h4 + e) | 0;
  }
  return h0 >>> 0;
}
