/**
 * Random hex digits drawn from a buffer the CSPRNG fills many draws at a time, as Node's own
 * `randomUUID` buffers its randomness: one call into OpenSSL (and its fork check, a `getpid`
 * system call) per `draws` ids instead of one per id. The digits are as random as
 * `randomBytes(bytes).toString('hex')`; every draw takes bytes no other draw took.
 */
import { randomFillSync } from 'node:crypto';

/** A function returning `2 × bytes` fresh random hex digits on each call. */
export function pooledRandomHex(bytes: number, draws = 256): () => string {
  if (!Number.isSafeInteger(bytes) || bytes < 1 || !Number.isSafeInteger(draws) || draws < 1) throw new RangeError('a random pool needs whole positive sizes');
  const pool = Buffer.alloc(bytes * draws);
  let at = pool.length;
  return () => {
    if (at === pool.length) {
      randomFillSync(pool);
      at = 0;
    }
    const hex = pool.toString('hex', at, at + bytes);
    at += bytes;
    return hex;
  };
}
