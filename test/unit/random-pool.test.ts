/**
 * The request id's random digits come from a pooled buffer: every draw is fresh bytes of the
 * CSPRNG, none shared with another draw, and the pool is refilled exactly when it runs out.
 */
const fills: Buffer[] = [];
let next = 0;
jest.mock('node:crypto', () => {
  const actual = jest.requireActual<typeof import('node:crypto')>('node:crypto');
  return {
    ...actual,
    // Counting bytes instead of random ones, so each draw's position in the pool is visible.
    randomFillSync: (buf: Buffer) => {
      for (let i = 0; i < buf.length; i += 1) buf[i] = (next += 1) % 256;
      fills.push(Buffer.from(buf));
      return buf;
    },
  };
});

import { pooledRandomHex } from '../../lambdas/adapters/random-pool';

describe('pooledRandomHex', () => {
  beforeEach(() => {
    fills.length = 0;
    next = 0;
  });

  it('draws consecutive, never reused slices and refills only when the pool is spent', () => {
    const draw = pooledRandomHex(7, 3);
    expect(fills).toHaveLength(0); // nothing drawn, nothing asked of the CSPRNG
    const ids = Array.from({ length: 7 }, () => draw());
    expect(fills).toHaveLength(3); // draws 1, 4 and 7 found the pool spent
    const stream = fills.map((b) => b.toString('hex')).join('');
    expect(ids.join('')).toBe(stream.slice(0, 7 * 14));
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{14}$/);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('refuses sizes that are not whole and positive', () => {
    expect(() => pooledRandomHex(0)).toThrow(RangeError);
    expect(() => pooledRandomHex(7, 0)).toThrow(RangeError);
    expect(() => pooledRandomHex(1.5)).toThrow(RangeError);
  });
});
