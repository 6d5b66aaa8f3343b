/**
 * Faults are logged by kind before they become SPEC refusals: a `TypeError` in the ledger must
 * show up in the logs, not only as `503 balance_unavailable`. Only the error's kind is written
 * (its class name and, for AWS-shaped errors, its `$fault` side), never its message, which could
 * quote a body fragment, a prompt or a key.
 */
import { SluiceError } from '../core/errors';

/** The phase of the request in which a port failed (the log line's `phase`). */
export type FaultPhase =
  | 'authenticate'
  | 'rate'
  | 'resolve'
  | 'provider_key'
  | 'limits'
  | 'admit'
  | 'release'
  | 'extend'
  | 'upstream'
  | 'relay'
  | 'settle'
  | 'models'
  | 'serve';

/**
 * The term a failed settlement's line carries: the stage's `SettlementFailures` alarm counts the
 * gateway's log lines containing it (`lib/alarms.ts`).
 */
export const SETTLE_FAILED_EVENT = 'settle_failed';

/** The kind of an error: its class name, with `$fault` for the SDK's errors. Never its message. */
export function faultKind(err: unknown): string {
  if (!(err instanceof Error)) return typeof err;
  const side = (err as { $fault?: unknown }).$fault;
  return typeof side === 'string' ? `${err.name}:${side}` : err.name;
}

/** Writes one error line for a fault: request id, phase and kind (and the alarm's term for a settlement). */
export function logFault(requestId: string, phase: FaultPhase, err: unknown): void {
  const event = phase === 'settle' ? { event: SETTLE_FAILED_EVENT } : {};
  console.error(JSON.stringify({ level: 'error', requestId, phase, ...event, fault: faultKind(err) }));
}

/**
 * Runs one port call. A `SluiceError` passes as it is (it is already SPEC's answer); any other
 * fault is logged by kind, then becomes `refusal()`.
 */
export function guarded<T>(requestId: string, phase: FaultPhase, call: () => Promise<T>, refusal: () => SluiceError): Promise<T> {
  // A rejection handler rather than an async function: no extra promise on the common path. A
  // port that throws instead of rejecting is a fault like any other.
  let pending: Promise<T>;
  try {
    pending = call();
  } catch (err) {
    pending = Promise.reject(err);
  }
  return pending.then(undefined, (err: unknown) => {
    if (err instanceof SluiceError) throw err;
    logFault(requestId, phase, err);
    throw refusal();
  });
}
