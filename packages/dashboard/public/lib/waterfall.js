// A request's waterfall laid out to scale: each stage and each upstream attempt as a bar
// whose left edge and width are its offset and duration as shares of the request's total.
// Pure (no DOM): pages/request.js draws it, the tests check the numbers.

/**
 * @typedef {{
 *   kind: 'request' | 'stage' | 'attempt',
 *   label: string,
 *   detail: string,
 *   offsetMs: number,
 *   durationMs: number,
 *   left: number,
 *   width: number,
 *   tone: 'total' | 'gateway' | 'provider' | 'retry' | 'control' | 'attempt-ok' | 'attempt-failed',
 *   error: boolean,
 * }} Bar
 */

/** Stages spent waiting on or talking to the provider; the rest is the gateway's own time. */
const PROVIDER = new Set(['upstream.connect', 'upstream.send', 'upstream.wait', 'upstream.stream']);
/** Governance stages (docs/governance.md, docs/cache.md). */
const CONTROL = new Set(['limits', 'budget', 'cache']);

/** @param {string} stage */
export function toneOf(stage) {
  if (stage === 'upstream.retry') return 'retry';
  if (PROVIDER.has(stage)) return 'provider';
  if (CONTROL.has(stage)) return 'control';
  return 'gateway';
}

/**
 * @param {Pick<import('./types.js').RequestView, 'total_ns' | 'waterfall' | 'attempts' | 'http_status'>} r
 * @returns {{ totalMs: number, bars: Bar[], ticks: { left: number, label: number }[] }}
 */
export function layout(r) {
  // The total, or the last bar's end if a stage ran past it (clock granularity): every bar fits.
  let totalNs = r.total_ns;
  for (const s of r.waterfall) totalNs = Math.max(totalNs, s.offset_ns + s.duration_ns);
  for (const a of r.attempts) totalNs = Math.max(totalNs, a.offset_ns + a.duration_ns);
  const totalMs = totalNs / 1e6;
  const share = (/** @type {number} */ ns) => (totalNs > 0 ? ns / totalNs : 0);
  /** @type {(Bar & { order: number })[]} */
  const rows = [];
  r.waterfall.forEach((s, i) => {
    rows.push({
      kind: 'stage',
      label: s.stage,
      detail: s.status === 'ERROR' ? (s.status_message === '' ? 'failed' : s.status_message) : '',
      offsetMs: s.offset_ns / 1e6,
      durationMs: s.duration_ns / 1e6,
      left: share(s.offset_ns),
      width: share(s.duration_ns),
      tone: toneOf(s.stage),
      error: s.status === 'ERROR',
      order: s.offset_ns * 2 + i * 1e-6,
    });
  });
  for (const a of r.attempts) {
    const what = [a.provider, a.model].filter((x) => x !== '').join(' ');
    const outcome = a.status === 0 ? (a.error_type === '' ? 'no answer' : a.error_type) : `${a.status}${a.error_type === '' ? '' : ` ${a.error_type}`}`;
    rows.push({
      kind: 'attempt',
      label: `attempt ${a.attempt}`,
      detail: `${what} → ${outcome}`,
      offsetMs: a.offset_ns / 1e6,
      durationMs: a.duration_ns / 1e6,
      left: share(a.offset_ns),
      width: share(a.duration_ns),
      tone: a.ok ? 'attempt-ok' : 'attempt-failed',
      error: !a.ok,
      // After the stage that starts with it (an attempt belongs under its upstream stage).
      order: a.offset_ns * 2 + 1,
    });
  }
  rows.sort((x, y) => x.order - y.order);
  /** @type {Bar[]} */
  const bars = [
    { kind: 'request', label: 'request', detail: `HTTP ${r.http_status}`, offsetMs: 0, durationMs: r.total_ns / 1e6, left: 0, width: share(r.total_ns), tone: 'total', error: r.http_status >= 400 },
    ...rows.map(({ order: _order, ...bar }) => bar),
  ];
  return { totalMs, bars, ticks: ticks(totalMs) };
}

/**
 * Round tick marks across [0, totalMs]: steps of 1, 2 or 5 × 10^k ms, at most 6 of them.
 * @param {number} totalMs
 * @returns {{ left: number, label: number }[]}
 */
export function ticks(totalMs) {
  if (!(totalMs > 0)) return [{ left: 0, label: 0 }];
  const raw = totalMs / 5;
  const pow = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * pow).find((s) => s >= raw) ?? 10 * pow;
  const out = [];
  for (let t = 0; t <= totalMs + 1e-9; t += step) out.push({ left: t / totalMs, label: Number(t.toPrecision(6)) });
  return out;
}
