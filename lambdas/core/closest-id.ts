/**
 * The closest of some known ids to a mistyped one, so a refusal can say "did you mean …".
 * Pure: plain edit distance, with ties going to the id listed first.
 */

/** Levenshtein distance between two strings (insertions, deletions, substitutions cost 1). */
export function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      current[j] = Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, (previous[j - 1] ?? 0) + cost);
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}

/**
 * The known id nearest to `wanted`, or undefined when none is near enough to be a plausible
 * typo (more than half of the longer string would have to change).
 */
export function closestId(wanted: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  const lower = wanted.toLowerCase();
  for (const id of known) {
    const d = editDistance(lower, id.toLowerCase());
    if (d < bestDistance) {
      best = id;
      bestDistance = d;
    }
  }
  if (best === undefined) return undefined;
  return bestDistance <= Math.ceil(Math.max(wanted.length, best.length) / 2) ? best : undefined;
}
