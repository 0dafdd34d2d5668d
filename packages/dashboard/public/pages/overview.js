// Overview: requests, error rate, latency (and the gateway's own p99), tokens and cost over
// time, by model, provider, team or key. Four POST /v1/metrics calls, all from the rollups:
// the cost does not grow with the number of requests in the range.
import { api, metrics } from '../lib/api.js';
import { timeChart } from '../lib/chart.js';
import { h, replace, table, tile } from '../lib/dom.js';
import { count, duration, money, percent } from '../lib/format.js';
import { isAdmin, orNone, section } from '../lib/page.js';
import { apiRange, chooseInterval, pivot } from '../lib/state.js';

const BY = ['model', 'provider', 'team', 'key'];
/** Groups drawn on a chart; the table lists up to 100. */
const SERIES = 8;

/** @type {import('../lib/page.js').Page} */
export default {
  title: 'Overview',
  usesRange: true,
  async render(ctx) {
    const byParam = ctx.route.params.get('by') ?? 'model';
    const by = BY.includes(byParam) ? byParam : 'model';
    const iv = chooseInterval(ctx.range.toMs - ctx.range.fromMs);
    const range = apiRange(ctx.range);
    const s = ctx.signal;
    /** @type {Promise<Map<string, string>>} */
    const keyNames =
      by === 'key' && isAdmin(ctx.who)
        ? api('v1/admin/keys?revoked=true', { signal: s })
            .then((r) => new Map(/** @type {{ data: import('../lib/types.js').KeyView[] }} */ (r).data.map((k) => [k.id, `${k.name} (${k.team})`])))
            .catch(() => new Map())
        : Promise.resolve(new Map());
    const [total, overall, grouped, rows, names] = await Promise.all([
      metrics({ ...range, metrics: ['requests', 'errors', 'error_rate', 'p50_ms', 'p99_ms', 'gateway_p99_ms', 'input_tokens', 'output_tokens', 'cost_usd'] }, s),
      metrics({ ...range, metrics: ['requests', 'p50_ms', 'p99_ms', 'gateway_p99_ms'], interval: iv.id }, s),
      metrics({ ...range, metrics: ['requests', 'errors', 'p99_ms', 'input_tokens', 'output_tokens', 'cost_usd'], group_by: [by], interval: iv.id, limit: SERIES }, s),
      metrics({ ...range, metrics: ['requests', 'error_rate', 'p50_ms', 'p99_ms', 'gateway_p99_ms', 'input_tokens', 'output_tokens', 'cost_usd'], group_by: [by], limit: 100 }, s),
      keyNames,
    ]);
    const label = (/** @type {string} */ v) => (by === 'key' && names.has(v) ? (names.get(v) ?? v) : orNone(v));
    const t = total.rows[0] ?? {};
    const num = (/** @type {string} */ k) => (typeof t[k] === 'number' ? /** @type {number} */ (t[k]) : 0);

    const tiles = h(
      'div',
      { class: 'tiles' },
      tile('Requests', count(num('requests')), `${count(num('errors'))} errors`, 'tile-requests'),
      tile('Error rate', percent(num('error_rate')), 'status ≥ 400', 'tile-error-rate'),
      tile('Latency p50', duration(num('p50_ms')), 'headers to last byte', 'tile-p50'),
      tile('Latency p99', duration(num('p99_ms')), undefined, 'tile-p99'),
      tile('Gateway p99', duration(num('gateway_p99_ms')), 'own time, without the provider', 'tile-gateway-p99'),
      tile('Tokens', count(num('input_tokens') + num('output_tokens')), `${count(num('input_tokens'))} in · ${count(num('output_tokens'))} out`, 'tile-tokens'),
      tile('Cost', money(/** @type {number | null} */ (t.cost_usd ?? 0)), 'at the configured prices', 'tile-cost'),
    );

    const groupOf = (/** @type {import('../lib/types.js').MetricsRow} */ r) => label(String(r[by] ?? ''));
    const series = (/** @type {string} */ m, /** @type {(v: number | null, r: number | null) => number | null} */ f = (v) => v) => {
      const p = pivot(grouped.rows, groupOf, m);
      const req = pivot(grouped.rows, groupOf, 'requests');
      return { x: p.x, series: p.groups.map((g, gi) => ({ label: g.name, values: g.values.map((v, i) => f(v, req.groups[gi]?.values[i] ?? null)) })) };
    };
    const ov = (/** @type {string} */ m) => pivot(overall.rows, () => 'all', m);
    const tokens = (() => {
      const i = pivot(grouped.rows, groupOf, 'input_tokens');
      const o = pivot(grouped.rows, groupOf, 'output_tokens');
      return { x: i.x, series: i.groups.map((g, gi) => ({ label: g.name, values: g.values.map((v, k) => (v ?? 0) + (o.groups[gi]?.values[k] ?? 0)) })) };
    })();
    const sel = (/** @type {number} */ a, /** @type {number} */ b) => ctx.setRange(a * 1000, b * 1000);
    const per = `per ${iv.id === '1m' ? 'minute' : iv.id === '5m' ? '5 minutes' : iv.id === '1h' ? 'hour' : 'day'}`;
    const top = grouped.truncated ? `top ${SERIES} by requests` : undefined;
    const lat = ov('p50_ms');
    const charts = h(
      'div',
      { class: 'charts' },
      timeChart({ title: `Requests by ${by}, ${per}`, note: top, ...series('requests'), format: count, onSelect: sel, testid: 'chart-requests' }, ctx.cleanup),
      timeChart({ title: `Error rate by ${by}`, note: top, ...series('errors', (e, r) => (r === null || r === 0 ? null : (e ?? 0) / r)), format: percent, onSelect: sel, testid: 'chart-errors' }, ctx.cleanup),
      timeChart(
        {
          title: 'Latency: p50, p99 and the gateway’s own p99',
          x: lat.x,
          series: [
            { label: 'p50', values: lat.groups[0]?.values ?? [], color: '#4e79a7' },
            { label: 'p99', values: ov('p99_ms').groups[0]?.values ?? [], color: '#e15759' },
            { label: 'gateway p99 (right axis)', values: ov('gateway_p99_ms').groups[0]?.values ?? [], color: '#59a14f', axis: 'y2', dash: [4, 3] },
          ],
          format: duration,
          format2: duration,
          onSelect: sel,
          testid: 'chart-latency',
        },
        ctx.cleanup,
      ),
      timeChart({ title: `p99 latency by ${by}`, note: top, ...series('p99_ms', (v, r) => (r === null || r === 0 ? null : v)), format: duration, onSelect: sel, testid: 'chart-p99' }, ctx.cleanup),
      timeChart({ title: `Tokens (input + output) by ${by}, ${per}`, note: top, ...tokens, format: count, onSelect: sel, testid: 'chart-tokens' }, ctx.cleanup),
      timeChart({ title: `Cost by ${by}, ${per}`, note: top, ...series('cost_usd'), format: money, onSelect: sel, testid: 'chart-cost' }, ctx.cleanup),
    );

    const filterOf = (/** @type {string} */ v) => (by === 'key' ? (v === '' ? null : { key: v }) : { [by]: v });
    const byTable = table(
      [
        {
          label: by,
          cell: (r) => {
            const v = String(r[by] ?? '');
            const f = filterOf(v);
            return f === null || v === '' ? label(v) : h('a', { href: ctx.link('requests', null, f), title: 'Requests of this group' }, label(v));
          },
        },
        { label: 'Requests', num: true, cell: (r) => count(/** @type {number} */ (r.requests)) },
        { label: 'Error rate', num: true, cell: (r) => percent(/** @type {number} */ (r.error_rate)) },
        { label: 'p50', num: true, cell: (r) => duration(/** @type {number} */ (r.p50_ms)) },
        { label: 'p99', num: true, cell: (r) => duration(/** @type {number} */ (r.p99_ms)) },
        { label: 'Gateway p99', num: true, cell: (r) => duration(/** @type {number} */ (r.gateway_p99_ms)) },
        { label: 'Input tokens', num: true, cell: (r) => count(/** @type {number} */ (r.input_tokens)) },
        { label: 'Output tokens', num: true, cell: (r) => count(/** @type {number} */ (r.output_tokens)) },
        { label: 'Cost', num: true, cell: (r) => money(/** @type {number | null} */ (r.cost_usd)) },
      ],
      rows.rows,
      { empty: 'No requests in this range.', cls: 'by-group' },
    );

    const byPicker = h(
      'div',
      { class: 'segmented', role: 'group', 'aria-label': 'Group by' },
      h('span', { class: 'muted' }, 'By '),
      BY.map((b) => h('a', { href: ctx.link('overview', null, { by: b }), class: b === by ? 'active' : null, 'data-testid': `by-${b}` }, b)),
    );
    replace(ctx.main, h('div', { class: 'toolbar' }, h('h1', {}, 'Overview'), byPicker), tiles, charts, section(`By ${by}`, byTable));
  },
};
