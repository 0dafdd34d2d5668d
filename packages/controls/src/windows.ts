/**
 * Windows and periods, all in UTC (docs/governance.md, "Windows"):
 * - rate limits count in fixed windows aligned to the UTC minute: a request admitted at
 *   10:04:59.999 counts in the 10:04 window, and the 10:05 window starts with the whole limit;
 * - budgets count per UTC calendar day or month.
 * A window is named by its start (Unix ms); the shared store keeps two slots per limit, the
 * current window's and the next one's, chosen by the parity of the window's index.
 */
export type Period = 'minute' | 'day' | 'month';

const MINUTE = 60_000;
const DAY = 86_400_000;

export function windowStart(period: Period, nowMs: number): number {
  if (period === 'minute') return Math.floor(nowMs / MINUTE) * MINUTE;
  if (period === 'day') return Math.floor(nowMs / DAY) * DAY;
  const d = new Date(nowMs);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
}

/** The start of the window after the one starting at `start` (its reset time). */
export function windowEnd(period: Period, start: number): number {
  if (period === 'minute') return start + MINUTE;
  if (period === 'day') return start + DAY;
  const d = new Date(start);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
}

/** 0 or 1: consecutive windows alternate, so the next window's lease never overwrites the current one's. */
export function windowSlot(period: Period, start: number): 0 | 1 {
  let index: number;
  if (period === 'minute') index = start / MINUTE;
  else if (period === 'day') index = start / DAY;
  else {
    const d = new Date(start);
    index = d.getUTCFullYear() * 12 + d.getUTCMonth();
  }
  return (Math.round(index) % 2) as 0 | 1;
}
