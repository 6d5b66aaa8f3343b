/**
 * Limit windows on UTC calendars. A window id names the period an amount counts in, so a new
 * period is simply a new ledger item and nothing needs resetting.
 */
import type { WindowCadence } from '../shared/records';

const pad = (n: number, width = 2): string => String(n).padStart(width, '0');

/** `2026-11` for the UTC calendar month containing `epochMs`. */
export function monthId(epochMs: number): string {
  const d = new Date(epochMs);
  return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}`;
}

/** `2026-11-22` for the UTC day containing `epochMs`. */
export function dayId(epochMs: number): string {
  const d = new Date(epochMs);
  return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}`;
}

/** Monday (UTC) of the ISO week containing `epochMs`, as `W2026-11-16`. */
export function weekId(epochMs: number): string {
  const d = new Date(epochMs);
  const daysSinceMonday = (d.getUTCDay() + 6) % 7;
  const monday = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() - daysSinceMonday);
  return `W${dayId(monday)}`;
}

/** The id of the window of a cadence containing `epochMs`. */
export function windowId(cadence: WindowCadence, epochMs: number): string {
  switch (cadence) {
    case 'daily':
      return `D${dayId(epochMs)}`;
    case 'weekly':
      return weekId(epochMs);
    case 'monthly':
      return `M${monthId(epochMs)}`;
    case 'never':
      return 'ALL';
  }
}

/** Epoch ms at which the window containing `epochMs` ends; undefined for `never`. */
export function windowEnd(cadence: WindowCadence, epochMs: number): number | undefined {
  const d = new Date(epochMs);
  const y = d.getUTCFullYear();
  const m = d.getUTCMonth();
  const day = d.getUTCDate();
  switch (cadence) {
    case 'daily':
      return Date.UTC(y, m, day + 1);
    case 'weekly':
      return Date.UTC(y, m, day - ((d.getUTCDay() + 6) % 7) + 7);
    case 'monthly':
      return Date.UTC(y, m + 1, 1);
    case 'never':
      return undefined;
  }
}

/** `202611` for the UTC calendar month containing `epochMs`: the workspace month as a slice item stores it. */
export function monthNumber(epochMs: number): number {
  const d = new Date(epochMs);
  return d.getUTCFullYear() * 100 + d.getUTCMonth() + 1;
}

/** The month number of a month id (`2026-11` → `202611`). */
export function monthNumberOf(id: string): number {
  return Number(id.slice(0, 4)) * 100 + Number(id.slice(5, 7));
}

/** The month id of a month number (`202611` → `2026-11`). */
export function monthIdOf(month: number): string {
  return `${Math.floor(month / 100)}-${pad(month % 100)}`;
}

/** Epoch ms at which the window containing `epochMs` began; 0 for `never` (the key's whole life). */
export function windowStart(cadence: WindowCadence, epochMs: number): number {
  const d = new Date(epochMs);
  const y = d.getUTCFullYear();
  const m = d.getUTCMonth();
  const day = d.getUTCDate();
  switch (cadence) {
    case 'daily':
      return Date.UTC(y, m, day);
    case 'weekly':
      return Date.UTC(y, m, day - ((d.getUTCDay() + 6) % 7));
    case 'monthly':
      return Date.UTC(y, m, 1);
    case 'never':
      return 0;
  }
}

/**
 * Ledger sort keys of the windows a request occupies. A key window and a member month are
 * written only while their limit is tracked; `generation`, when given, is the instant tracking
 * began (a limit set on a window that was not tracked, see `core/limit-arming.ts`): each arming
 * starts its own items, so what an earlier, removed limit left is never counted twice.
 */
export const windowKeys = {
  key: (keyId: string, cadence: WindowCadence, epochMs: number, generation?: number): string =>
    `KEYWIN#${keyId}#${windowId(cadence, epochMs)}${generation === undefined ? '' : `~${generation}`}`,
  member: (memberId: string, epochMs: number, generation?: number): string =>
    `MEMBERMONTH#${memberId}#${monthId(epochMs)}${generation === undefined ? '' : `~${generation}`}`,
  workspace: (epochMs: number): string => `MONTH#${monthId(epochMs)}`,
  rate: (keyId: string, epochMs: number): string => `RATE#${keyId}#${Math.floor(epochMs / 60_000)}`,
};

/** Whole seconds until the per-minute request window containing `epochMs` ends (at least 1). */
export function secondsToNextMinute(epochMs: number): number {
  return Math.max(1, Math.ceil((60_000 - (epochMs % 60_000)) / 1000));
}

/** A window a removed or re-armed key limit counted the key's requests on, and until when. */
export interface KeyCountWindow {
  readonly cadence: WindowCadence;
  /** Its generation (that limit's `creditTrackFrom`), when it had one. */
  readonly generation?: number;
  /** A minute's start: the minutes before it (from the generation on) still count there. */
  readonly until: number;
}

/**
 * The credit-limit fields of a key record that decide where its requests of a minute are counted
 * (`KeyRecord`): the limit and its window, and the windows removed or re-armed limits were
 * counting on, newest first, until the gateways' caches have all let go of them.
 */
export interface KeyRateRecord {
  readonly creditLimitMicros?: number;
  readonly creditWindow?: WindowCadence;
  readonly creditTrackFrom?: number;
  readonly creditCountWindows?: readonly KeyCountWindow[];
}

/**
 * The key window whose item counts the key's requests of the minute containing `epochMs`
 * (undefined: the minute's own request counter, `RATE#…`). Every writer of a minute (an
 * admission, BYOK or not, and the door's count of a request refused before admission) must
 * count on the same item, or the rate would be enforced twice over, so the rule depends only on
 * the minute and on what every gateway's record says by then:
 *
 * - a limit tracked for the whole minute (tracked all along, or its minute starts at or after
 *   `trackFrom`, by which every gateway has the record) counts on its window;
 * - else the newest window a removed or re-armed limit counted on that covers the minute (from
 *   its generation, before its `until`: the change plus the gateways' cache lifetime, rounded up
 *   to a minute, so every gateway still holding the old record counts there too);
 * - else the minute's counter.
 */
export function keyRateWindow(keyId: string, record: KeyRateRecord, epochMs: number): string | undefined {
  const minuteStart = Math.floor(epochMs / 60_000) * 60_000;
  if (record.creditLimitMicros !== undefined && (record.creditTrackFrom === undefined || minuteStart >= record.creditTrackFrom)) {
    return windowKeys.key(keyId, record.creditWindow ?? 'monthly', minuteStart, record.creditTrackFrom);
  }
  const old = (record.creditCountWindows ?? []).find((w) => minuteStart < w.until && (w.generation === undefined || minuteStart >= w.generation));
  return old === undefined ? undefined : windowKeys.key(keyId, old.cadence, minuteStart, old.generation);
}

/** The first minute's start at or after `epochMs`: where a changed record's old counting place ends. */
export function minuteCeil(epochMs: number): number {
  return Math.ceil(epochMs / 60_000) * 60_000;
}
