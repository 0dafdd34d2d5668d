// What the URL says: every view is `#/<page>[/<arg>]?<params>`, so it can be shared and
// reloaded. Pure functions (no DOM): the tests run them in Node too.

/** @typedef {{ id: string, label: string, ms: number }} Preset */

/** The time ranges offered; `1h` is the default. The longest fits every endpoint (31 days). */
/** @type {Preset[]} */
export const PRESETS = [
  { id: '15m', label: 'Last 15 minutes', ms: 15 * 60_000 },
  { id: '1h', label: 'Last hour', ms: 3_600_000 },
  { id: '6h', label: 'Last 6 hours', ms: 6 * 3_600_000 },
  { id: '24h', label: 'Last 24 hours', ms: 86_400_000 },
  { id: '7d', label: 'Last 7 days', ms: 7 * 86_400_000 },
  { id: '30d', label: 'Last 30 days', ms: 30 * 86_400_000 },
];
export const DEFAULT_PRESET = '1h';

/** Parameters that say the time range; they follow the user from page to page. */
export const RANGE_PARAMS = ['range', 'from', 'to'];

/**
 * @typedef {{ page: string, arg: string | null, params: URLSearchParams }} Route
 */

/**
 * `#/request/abc?range=1h` → { page: 'request', arg: 'abc', params }.
 * @param {string} hash
 * @returns {Route}
 */
export function parseHash(hash) {
  const h = hash.replace(/^#\/?/, '');
  const q = h.indexOf('?');
  const path = q === -1 ? h : h.slice(0, q);
  const params = new URLSearchParams(q === -1 ? '' : h.slice(q + 1));
  const slash = path.indexOf('/');
  const page = (slash === -1 ? path : path.slice(0, slash)) || 'overview';
  const arg = slash === -1 ? null : decodeURIComponent(path.slice(slash + 1)) || null;
  return { page, arg, params };
}

/**
 * The hash of a view; empty parameters are left out.
 * @param {string} page
 * @param {string | null} arg
 * @param {URLSearchParams | Record<string, string | null | undefined>} [params]
 */
export function hashOf(page, arg, params = {}) {
  const p = new URLSearchParams();
  const entries = params instanceof URLSearchParams ? [...params] : Object.entries(params);
  for (const [k, v] of entries) if (v !== null && v !== undefined && v !== '') p.append(k, v);
  const qs = p.toString();
  return `#/${page}${arg === null ? '' : `/${encodeURIComponent(arg)}`}${qs === '' ? '' : `?${qs}`}`;
}

/**
 * Only the range parameters of `params`.
 * @param {URLSearchParams} params
 */
export function rangeOnly(params) {
  /** @type {Record<string, string>} */
  const out = {};
  for (const k of RANGE_PARAMS) {
    const v = params.get(k);
    if (v !== null && v !== '') out[k] = v;
  }
  return out;
}

/**
 * @typedef {{ fromMs: number, toMs: number, preset: Preset | null }} Range
 */

/**
 * The range a view shows: `from`/`to` (RFC 3339 or milliseconds) when both are given and
 * valid, else a preset (`range=6h`) ending now.
 * @param {URLSearchParams} params
 * @param {number} nowMs
 * @returns {Range}
 */
export function resolveRange(params, nowMs) {
  const from = timeOf(params.get('from'));
  const to = timeOf(params.get('to'));
  if (from !== null && to !== null && to > from) return { fromMs: from, toMs: to, preset: null };
  const preset = PRESETS.find((p) => p.id === params.get('range')) ?? PRESETS.find((p) => p.id === DEFAULT_PRESET);
  if (preset === undefined) throw new Error('no default preset');
  return { fromMs: nowMs - preset.ms, toMs: nowMs, preset };
}

/**
 * @param {string | null} v
 * @returns {number | null}
 */
function timeOf(v) {
  if (v === null || v === '') return null;
  const ms = /^\d+$/.test(v) ? Number(v) : Date.parse(v);
  return Number.isFinite(ms) ? ms : null;
}

/** The metrics API's bucket sizes (docs/api.md, POST /v1/metrics `interval`). */
export const INTERVALS = [
  { id: '1m', ms: 60_000 },
  { id: '5m', ms: 300_000 },
  { id: '1h', ms: 3_600_000 },
  { id: '1d', ms: 86_400_000 },
];

/**
 * The finest bucket that keeps a chart at most `maxBuckets` points wide (the API allows
 * 1500; a chart on a laptop screen is about 700 pixels wide): 1 minute up to 12.5 hours,
 * 5 minutes up to 62.5 hours, 1 hour up to 31 days, else 1 day.
 * @param {number} spanMs
 * @param {number} [maxBuckets]
 */
export function chooseInterval(spanMs, maxBuckets = 750) {
  for (const i of INTERVALS) if (spanMs / i.ms <= maxBuckets) return i;
  return /** @type {{ id: string, ms: number }} */ (INTERVALS[INTERVALS.length - 1]);
}

/**
 * The time range as the API takes it (RFC 3339).
 * @param {Range} r
 */
export function apiRange(r) {
  return { from: new Date(r.fromMs).toISOString(), to: new Date(r.toMs).toISOString() };
}

/**
 * Series for a chart from metric rows with `time` (every bucket of every group, as the API
 * returns them with an interval): x in Unix seconds, one array of values per group.
 * @param {import('./types.js').MetricsRow[]} rows
 * @param {(row: import('./types.js').MetricsRow) => string} groupOf
 * @param {string} metric
 * @returns {{ x: number[], groups: { name: string, values: (number | null)[] }[] }}
 */
export function pivot(rows, groupOf, metric) {
  /** @type {Set<number>} */
  const times = new Set();
  /** @type {Map<string, Map<number, number | null>>} */
  const byGroup = new Map();
  for (const r of rows) {
    const t = Date.parse(String(r.time)) / 1000;
    times.add(t);
    const g = groupOf(r);
    let m = byGroup.get(g);
    if (m === undefined) byGroup.set(g, (m = new Map()));
    const v = r[metric];
    m.set(t, typeof v === 'number' ? v : null);
  }
  const x = [...times].sort((a, b) => a - b);
  const groups = [...byGroup].map(([name, m]) => ({ name, values: x.map((t) => (m.has(t) ? (m.get(t) ?? null) : null)) }));
  return { x, groups };
}

/**
 * The stage that moved most between two periods, among stages seen in both: the largest
 * change of p95 in milliseconds, weighted by the share of requests that went through the
 * stage (a stage every request passes counts whole; `upstream.retry`, which only retried
 * requests have, counts for their share) — what the change did to requests in general.
 * @param {{ stage: string, p95_ms: number, requests: number }[]} now
 * @param {{ stage: string, p95_ms: number, requests: number }[]} before
 * @returns {{ stage: string, deltaMs: number } | null}
 */
export function mostMoved(now, before) {
  const prev = new Map(before.map((b) => [b.stage, b]));
  const most = Math.max(0, ...now.map((n) => n.requests));
  /** @type {{ stage: string, deltaMs: number, weighted: number } | null} */
  let best = null;
  for (const n of now) {
    const b = prev.get(n.stage);
    if (b === undefined || b.requests === 0 || n.requests === 0) continue;
    const d = n.p95_ms - b.p95_ms;
    const weighted = Math.abs(d) * (n.requests / most);
    if (best === null || weighted > best.weighted) best = { stage: n.stage, deltaMs: d, weighted };
  }
  return best === null ? null : { stage: best.stage, deltaMs: best.deltaMs };
}
