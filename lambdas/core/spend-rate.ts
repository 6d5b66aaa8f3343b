/**
 * The spend rate cap over a rolling 60 seconds. Reservations are kept in per-second buckets on
 * the balance item; a bucket counts until 60 s after the END of its second, so a reservation
 * counts for at least 60 s (SPEC) and at most 61 s. Pure arithmetic over the buckets.
 */

export const SPEND_WINDOW_MS = 60_000;

/** The bucket (epoch second) a reservation made at `now` falls in. */
export function bucketOf(now: number): number {
  return Math.floor(now / 1000);
}

/** Epoch ms at which a bucket stops counting. */
export function bucketExpiry(second: number): number {
  return (second + 1) * 1000 + SPEND_WINDOW_MS;
}

/** Splits buckets into what still counts and what has aged out. */
export function partitionBuckets(
  buckets: Readonly<Record<string, number>>,
  now: number,
): { readonly liveMicros: number; readonly expired: readonly (readonly [string, number])[]; readonly earliestLive?: number } {
  let liveMicros = 0;
  let earliestLive: number | undefined;
  const expired: (readonly [string, number])[] = [];
  for (const [key, value] of Object.entries(buckets)) {
    const second = Number(key);
    if (bucketExpiry(second) <= now) {
      expired.push([key, value]);
    } else {
      liveMicros += value;
      if (earliestLive === undefined || second < earliestLive) earliestLive = second;
    }
  }
  return earliestLive === undefined ? { liveMicros, expired } : { liveMicros, expired, earliestLive };
}

/** SPEC: the refusal clears 60 s after the earliest counted reservation; whole seconds, at least 1. */
export function spendRetryAfterSeconds(earliestLive: number | undefined, now: number): number {
  if (earliestLive === undefined) return 1;
  return Math.max(1, Math.ceil((bucketExpiry(earliestLive) - now) / 1000));
}
