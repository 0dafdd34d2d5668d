// Capture health (admin): per gateway instance and minute, requests served against
// requests in ClickHouse, and the ingest lag (GET /v1/capture).
import { api } from '../lib/api.js';
import { timeChart } from '../lib/chart.js';
import { h, replace, table, tile } from '../lib/dom.js';
import { count, duration } from '../lib/format.js';
import { section } from '../lib/page.js';
import { apiRange } from '../lib/state.js';

/** Instances drawn one chart each; the table lists them all. */
const CHARTS = 6;

/**
 * Served, captured and missing per minute of the range (quiet minutes are 0), as chart columns.
 * @param {import('../lib/types.js').CaptureMinute[]} minutes
 * @param {import('../lib/state.js').Range} range
 */
function columns(minutes, range) {
  /** @type {Map<number, { served: number, captured: number, missing: number }>} */
  const by = new Map();
  for (const m of minutes) {
    const t = Date.parse(m.minute) / 1000;
    const c = by.get(t) ?? { served: 0, captured: 0, missing: 0 };
    c.served += m.served;
    c.captured += m.captured;
    c.missing += m.missing;
    by.set(t, c);
  }
  /** @type {number[]} */
  const x = [];
  for (let t = Math.floor(range.fromMs / 60_000) * 60; t < range.toMs / 1000; t += 60) x.push(t);
  const col = (/** @type {'served' | 'captured' | 'missing'} */ k) => x.map((t) => by.get(t)?.[k] ?? 0);
  return {
    x,
    series: [
      { label: 'served', values: col('served'), color: '#9cbbe0', width: 4 },
      { label: 'captured', values: col('captured'), color: '#2e8540', dash: [5, 3] },
      { label: 'missing', values: col('missing'), color: '#e15759', fill: true },
    ],
  };
}

/** @type {import('../lib/page.js').Page} */
export default {
  title: 'Capture',
  usesRange: true,
  adminOnly: true,
  async render(ctx) {
    const q = new URLSearchParams(apiRange(ctx.range));
    const c = /** @type {import('../lib/types.js').CaptureAnswer} */ (await api(`v1/capture?${q}`, { signal: ctx.signal }));
    const sum = (/** @type {'served' | 'captured' | 'missing'} */ k) => c.instances.reduce((a, i) => a + i[k], 0);
    const served = sum('served');
    const missing = sum('missing');
    const tiles = h(
      'div',
      { class: 'tiles' },
      tile('Served', count(served), `by ${c.instances.length} gateway instance${c.instances.length === 1 ? '' : 's'}`, 'tile-served'),
      tile('Captured', count(sum('captured')), served === 0 ? undefined : `${((sum('captured') / served) * 100).toFixed(2)} %`, 'tile-captured'),
      tile('Missing', count(missing), missing === 0 ? 'nothing lost' : 'served but not in ClickHouse', 'tile-missing'),
      tile('Ingest lag p50', duration(c.lag.p50_ms), `${count(c.lag.batches)} batches`, 'tile-lag-p50'),
      tile('Ingest lag p99', duration(c.lag.p99_ms), 'gateway publish → written', 'tile-lag-p99'),
      tile('Ingest lag max', duration(c.lag.max_ms), undefined, 'tile-lag-max'),
    );
    const sel = (/** @type {number} */ a, /** @type {number} */ b) => ctx.setRange(a * 1000, b * 1000);
    /** @type {[number, number]} */
    const xRange = [ctx.range.fromMs / 1000, ctx.range.toMs / 1000];
    const charts = h(
      'div',
      { class: 'charts' },
      timeChart({ title: 'All instances: served and captured per minute', ...columns(c.instances.flatMap((i) => i.minutes), ctx.range), format: count, onSelect: sel, testid: 'chart-capture', xRange }, ctx.cleanup),
      c.instances.slice(0, CHARTS).map((i) => timeChart({ title: `Instance ${i.instance}`, ...columns(i.minutes, ctx.range), format: count, onSelect: sel, xRange }, ctx.cleanup)),
    );
    const rows = table(
      [
        { label: 'Gateway instance', cell: (i) => h('span', { class: 'mono' }, i.instance) },
        { label: 'Served', num: true, cell: (i) => count(i.served) },
        { label: 'Captured', num: true, cell: (i) => count(i.captured) },
        { label: 'Missing', num: true, cell: (i) => h('span', { class: i.missing > 0 ? 'up' : '' }, count(i.missing)) },
        { label: 'Minutes with traffic', num: true, cell: (i) => count(i.minutes.filter((m) => m.served > 0).length) },
      ],
      c.instances,
      { empty: 'No gateway instance reported in this range.', cls: 'instances' },
    );
    replace(ctx.main, h('div', { class: 'toolbar' }, h('h1', {}, 'Capture health')), tiles, charts, section('Per gateway instance', rows));
  },
};
