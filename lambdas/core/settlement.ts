/**
 * Settlement decisions, pure: what a finished request is charged and what returns to its slice.
 */

/** What one settlement moves, in micro-units. */
export interface SettlementAmounts {
  /** Charged to the balance (spent). */
  readonly chargeMicros: number;
  /** Charged but not collectable: the balance had nothing left to take it from. */
  readonly uncollectedMicros: number;
  /** Returned to available: the hold less the charge (negative when the charge exceeds the hold). */
  readonly releaseMicros: number;
  /** What available must hold for the charge above the hold to be taken from it. */
  readonly deficitMicros: number;
}

/**
 * The charge, capped at what the hold and the slice's available balance can pay: the balance
 * never goes below zero, and what could not be collected is recorded, not lost.
 * `availableMicros` undefined means not known yet (the first attempt assumes it suffices).
 */
export function settlementAmounts(holdMicros: number, wantedMicros: number, availableMicros?: number): SettlementAmounts {
  const wanted = Math.max(0, wantedMicros);
  const collectable = availableMicros === undefined ? wanted : Math.min(wanted, holdMicros + Math.max(0, availableMicros));
  const release = holdMicros - collectable;
  return { chargeMicros: collectable, uncollectedMicros: wanted - collectable, releaseMicros: release, deficitMicros: Math.max(0, -release) };
}
