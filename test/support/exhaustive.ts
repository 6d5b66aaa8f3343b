/**
 * The slowest property suites run a deterministic sample by default and every case when
 * `SLUICE_EXHAUSTIVE=1` is set, so `npm test` stays quick while the full sweep is one variable away.
 */

/** True when the exhaustive cases were asked for. */
export const EXHAUSTIVE = process.env.SLUICE_EXHAUSTIVE === '1';

/**
 * Whether position `index` of the `round`th input is checked: every position when exhaustive,
 * else one in `stride`, starting at an offset that rotates with `round` so that across inputs
 * every residue is covered.
 */
export function sampled(index: number, round: number, stride: number): boolean {
  return EXHAUSTIVE || (index + round) % stride === 0;
}
