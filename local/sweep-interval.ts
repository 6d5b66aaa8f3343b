/**
 * How often local mode runs the hold sweeper: a setting, so robustness testing need not wait a
 * minute per sweep. (Deployed, an EventBridge schedule runs it every minute.)
 */

/** The variable that sets it, milliseconds. */
export const SWEEP_EVERY_ENV = 'SLUICE_LOCAL_SWEEP_EVERY_MS';
/** @default one minute, as deployed */
export const DEFAULT_SWEEP_EVERY_MS = 60_000;
const MIN_SWEEP_EVERY_MS = 100;

/** The sweeper's interval from the environment; throws on a value that is not a whole number ≥ 100. */
export function sweepEveryMs(env: Readonly<Record<string, string | undefined>>): number {
  const raw = env[SWEEP_EVERY_ENV];
  if (raw === undefined || raw === '') return DEFAULT_SWEEP_EVERY_MS;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < MIN_SWEEP_EVERY_MS) {
    throw new Error(`${SWEEP_EVERY_ENV} must be a whole number of milliseconds >= ${MIN_SWEEP_EVERY_MS}, got ${JSON.stringify(raw)}`);
  }
  return n;
}
