/**
 * A pure string function, remembered by its argument: for the few dozen names and targets the
 * request path spells again on every request (an expression's placeholders, a command's JSON keys,
 * SigV4's target). At most `max` results are kept; past that all are dropped at once, so names
 * that vary without end cost memory only up to the bound.
 */
export function memoized(compute: (key: string) => string, max = 4_096): (key: string) => string {
  const known = new Map<string, string>();
  return (key) => {
    let value = known.get(key);
    if (value === undefined) {
      value = compute(key);
      if (known.size >= max) known.clear();
      known.set(key, value);
    }
    return value;
  };
}
