// Numbers and times as people read them.

const COUNT = new Intl.NumberFormat('en-US');
const COMPACT = new Intl.NumberFormat('en-US', { notation: 'compact', maximumFractionDigits: 1 });

/** @param {number | null | undefined} n */
export function count(n) {
  if (n === null || n === undefined || !Number.isFinite(n)) return '–';
  return Math.abs(n) >= 100_000 ? COMPACT.format(n) : COUNT.format(Math.round(n));
}

/**
 * Three significant digits.
 * @param {number} v
 */
function sig(v) {
  const a = Math.abs(v);
  if (a >= 100) return String(Math.round(v));
  if (a >= 10) return v.toFixed(1);
  return v.toFixed(2);
}

/**
 * A duration given in milliseconds, in the unit that reads best: 312 µs, 1.91 ms, 121 ms, 2.40 s.
 * @param {number | null | undefined} ms
 */
export function duration(ms) {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '–';
  const a = Math.abs(ms);
  if (a === 0) return '0';
  if (a < 1) return `${sig(ms * 1000)} µs`;
  if (a < 1000) return `${sig(ms)} ms`;
  if (a < 60_000) return `${sig(ms / 1000)} s`;
  return `${sig(ms / 60_000)} min`;
}

/** @param {number | null | undefined} rate a share, 0 to 1 */
export function percent(rate) {
  if (rate === null || rate === undefined || !Number.isFinite(rate)) return '–';
  if (rate === 0) return '0 %';
  const p = rate * 100;
  return `${p < 0.1 ? p.toFixed(3) : p < 10 ? p.toFixed(2) : p.toFixed(1)} %`;
}

/**
 * Relative change, signed: +12.5 %, −3.0 %.
 * @param {number} now
 * @param {number} before
 */
export function change(now, before) {
  if (before === 0) return now === 0 ? '0 %' : 'new';
  const r = ((now - before) / before) * 100;
  return `${r > 0 ? '+' : r < 0 ? '−' : ''}${Math.abs(r) < 10 ? Math.abs(r).toFixed(1) : Math.round(Math.abs(r))} %`;
}

/** @param {number | null | undefined} usd */
export function money(usd) {
  if (usd === null || usd === undefined) return 'no price';
  if (usd === 0) return '$0';
  if (Math.abs(usd) < 0.01) return `$${usd.toPrecision(2)}`;
  return `$${usd.toFixed(2)}`;
}

/** @param {number} n */
export function bytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 ** 2) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 ** 2).toFixed(1)} MiB`;
}

/**
 * A time in the viewer's zone: `14:03:07.251`, with the date when it is not today.
 * @param {string | number} t RFC 3339 or milliseconds
 * @param {number} [nowMs]
 */
export function clock(t, nowMs = Date.now()) {
  const d = new Date(t);
  const time = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${String(d.getMilliseconds()).padStart(3, '0')}`;
  const now = new Date(nowMs);
  const today = d.getFullYear() === now.getFullYear() && d.getMonth() === now.getMonth() && d.getDate() === now.getDate();
  return today ? time : `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${time}`;
}

/**
 * Minutes precision, for ranges: `2026-11-29 14:03`.
 * @param {number} ms
 */
export function minute(ms) {
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** @param {number} n */
function pad(n) {
  return String(n).padStart(2, '0');
}

/**
 * `datetime-local` input value (local time) for a time in ms, and back.
 * @param {number} ms
 */
export function toLocalInput(ms) {
  return minute(ms).replace(' ', 'T');
}

/**
 * @param {string} value `2026-11-29T14:03`
 * @returns {number | null}
 */
export function fromLocalInput(value) {
  if (value === '') return null;
  const ms = new Date(value).getTime();
  return Number.isFinite(ms) ? ms : null;
}
