/**
 * A background loop for local mode's pollers: run a step, sleep, run it again, until stopped. A
 * stop wakes the sleep at once and waits for the step under way, so nothing runs after it.
 */

/** A running loop. */
export interface Repeating {
  /** Ends the loop; resolves once the step under way (if any) has finished. Idempotent. */
  stop(): Promise<void>;
}

/**
 * Runs `step` now and then `intervalMs` after each run ends. A step that throws is reported to
 * `onError` and the loop goes on.
 */
export function repeat(intervalMs: number, step: () => Promise<unknown>, onError: (err: unknown) => void): Repeating {
  let stopped = false;
  let wake: (() => void) | undefined;
  const running = (async (): Promise<void> => {
    while (!stopped) {
      try {
        await step();
      } catch (err) {
        onError(err);
      }
      if (stopped) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, intervalMs);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = undefined;
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      wake?.();
      await running;
    },
  };
}
