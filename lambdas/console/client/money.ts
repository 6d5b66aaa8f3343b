/**
 * Major units as typed into a form (`12.50`, `12`) to whole minor units, exactly: no floating
 * point touches the amount. Shared by the page script; the server validates again.
 */

/** `12.50` → 1250; throws on anything that is not an amount with at most two decimals. */
export function minorFromMajor(text: string): number {
  const m = /^\$?\s*(\d{1,12})(?:\.(\d{1,2}))?$/.exec(text.trim());
  if (m === null) throw new Error(`${JSON.stringify(text)} is not an amount: write 20 or 20.50`);
  return Number(m[1]) * 100 + Number((m[2] ?? '').padEnd(2, '0'));
}
