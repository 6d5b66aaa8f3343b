/**
 * A request's id: `req_` and 24 lowercase hex digits, the first 11 the epoch milliseconds at which
 * the request started (enough until the year 2527), the other 13 random (52 bits, so two requests of
 * one millisecond share an id with odds of about one in 10^15). The time lets the store find a
 * request's row from its workspace and id alone (the row's sort key starts with it), so no index
 * is written for the lookup. Pure: the clock's reading and the random digits are parameters.
 */

const TIME_DIGITS = 11;
const RANDOM_DIGITS = 13;
const SHAPE = /^req_([0-9a-f]{11})[0-9a-f]{13}$/;

/**
 * The 24 hex digits after `req_` of a request that started at `startedAt` (epoch ms), with random
 * hex digits (13 or more; the first 13 are used).
 */
export function requestIdDigits(startedAt: number, randomHex: string): string {
  if (!Number.isSafeInteger(startedAt) || startedAt < 0 || startedAt >= 16 ** TIME_DIGITS) throw new RangeError(`a request's start must be epoch ms, got ${startedAt}`);
  if (!/^[0-9a-f]+$/.test(randomHex) || randomHex.length < RANDOM_DIGITS) throw new RangeError(`a request id needs ${RANDOM_DIGITS} random hex digits`);
  return `${startedAt.toString(16).padStart(TIME_DIGITS, '0')}${randomHex.slice(0, RANDOM_DIGITS)}`;
}

/** The epoch ms a request id carries, or undefined for an id of another shape. */
export function requestIdTime(id: string): number | undefined {
  const m = SHAPE.exec(id);
  return m === null ? undefined : parseInt(m[1] as string, 16);
}
