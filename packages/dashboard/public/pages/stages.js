// Stages: each stage's p50/p95/p99 over time, and which stage moved against the period
// before (POST /v1/metrics grouped by stage, from the per-stage rollup).
import { metrics } from '../lib/api.js';
import { timeChart } from '../lib/chart.js';
import { h, replace, table } from '../lib/dom.js';
import { change, count, duration } from '../lib/format.js';
import { isAdmin, section } from '../lib/page.js';
import { apiRange, chooseInterval, mostMoved, pivot } from '../lib/state.js';

/** The order of a request's life (docs/architecture.md, "Stages"); others after, by name. */
const ORDER = ['ingress.read', 'parse', 'auth', 'route', 'limits', 'cache', 'budget', 'translate.request', 'upstream.retry', 'upstream.connect', 'upstream.send', 'upstream.wait', 'upstream.stream', 'translate.response', 'egress.write'];
const PCTS = ['p50', 'p95', 'p99'];
const FILTERS = ['model', 'provider', 'team'];

/** @param {string} s */
function rank(s) {
  const i = ORDER.indexOf(s);
  return i === -1 ? ORDER.length : i;
}

/**
 * @typedef {{ stage: string, requests: number, p50_ms: number, p95_ms: number, p99_ms: number }} StageRow
 * @param {import('../lib/types.js').MetricsRow[]} rows
 * @returns {StageRow[]}
 */
function stageRows(rows) {
  return rows
    .map((r) => ({ stage: String(r.stage ?? ''), requests: Number(r.requests ?? 0), p50_ms: Number(r.p50_ms ?? 0), p95_ms: Number(r.p95_ms ?? 0), p99_ms: Number(r.p99_ms ?? 0) }))
    .sort((a, b) => rank(a.stage) - rank(b.stage) || a.stage.localeCompare(b.stage));
}

/** @type {import('../lib/page.js').Page} */
export default {
  title: 'Stages',
  usesRange: true,
  async render(ctx) {
    const p = ctx.route.params;
    const pct = PCTS.includes(p.get('pct') ?? '') ? /** @type {string} */ (p.get('pct')) : 'p99';
    /** @type {Record<string, string[]>} */
    const filters = {};
    for (const f of FILTERS) {
      const v = p.get(f);
      if (v !== null && v !== '') filters[f] = [v];
    }
    const span = ctx.range.toMs - ctx.range.fromMs;
    const iv = chooseInterval(span);
    const range = apiRange(ctx.range);
    const before = apiRange({ fromMs: ctx.range.fromMs - span, toMs: ctx.range.fromMs, preset: null });
    const m = ['requests', 'p50_ms', 'p95_ms', 'p99_ms'];
    const [series, nowAns, beforeAns] = await Promise.all([
      metrics({ ...range, metrics: m, group_by: ['stage'], interval: iv.id, filters }, ctx.signal),
      metrics({ ...range, metrics: m, group_by: ['stage'], filters }, ctx.signal),
      metrics({ ...before, metrics: m, group_by: ['stage'], filters }, ctx.signal),
    ]);
    const now = stageRows(nowAns.rows);
    const prev = new Map(stageRows(beforeAns.rows).map((r) => [r.stage, r]));
    const moved = mostMoved(now, [...prev.values()]);
    const chosen = p.get('stage') ?? moved?.stage ?? now.find((r) => r.stage === 'upstream.wait')?.stage ?? now[0]?.stage ?? '';

    const form = h(
      'form',
      { class: 'filters inline' },
      FILTERS.filter((f) => f !== 'team' || isAdmin(ctx.who)).map((f) => h('label', { class: 'field' }, h('span', {}, f), h('input', { name: f, value: p.get(f) ?? '', placeholder: 'any' }))),
      h('button', { type: 'submit', class: 'small' }, 'Apply'),
    );
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const fd = new FormData(form);
      ctx.setParams(Object.fromEntries(FILTERS.map((f) => [f, String(fd.get(f) ?? '').trim()])));
    });

    const sel = (/** @type {number} */ a, /** @type {number} */ b) => ctx.setRange(a * 1000, b * 1000);
    const byStage = (/** @type {string} */ metric) => {
      const pv = pivot(series.rows, (r) => String(r.stage ?? ''), metric);
      const req = pivot(series.rows, (r) => String(r.stage ?? ''), 'requests');
      const groups = pv.groups
        .map((g, gi) => ({ label: g.name, values: g.values.map((v, i) => ((req.groups[gi]?.values[i] ?? 0) === 0 ? null : v)) }))
        .sort((a, b) => rank(a.label) - rank(b.label));
      return { x: pv.x, groups };
    };
    const all = byStage(`${pct}_ms`);
    const one = (/** @type {string} */ q) => byStage(`${q}_ms`).groups.find((g) => g.label === chosen)?.values ?? [];
    const pctPicker = h('span', { class: 'segmented' }, PCTS.map((q) => h('a', { href: ctx.link('stages', null, { ...Object.fromEntries(p), pct: q }), class: q === pct ? 'active' : null }, q)));
    const charts = h(
      'div',
      { class: 'charts' },
      timeChart({ title: `${pct} of every stage (log scale)`, x: all.x, series: all.groups.map((g) => ({ label: g.label, values: g.values })), format: duration, log: true, onSelect: sel, testid: 'chart-stages' }, ctx.cleanup),
      timeChart(
        {
          title: chosen === '' ? 'No stage in range' : `${chosen}: p50, p95, p99`,
          x: all.x,
          series:
            chosen === ''
              ? []
              : [
                  { label: 'p50', values: one('p50'), color: '#4e79a7' },
                  { label: 'p95', values: one('p95'), color: '#f28e2b' },
                  { label: 'p99', values: one('p99'), color: '#e15759' },
                ],
          format: duration,
          onSelect: sel,
          testid: 'chart-stage',
        },
        ctx.cleanup,
      ),
    );
    const delta = (/** @type {StageRow} */ r, /** @type {'p50_ms' | 'p95_ms'} */ k) => {
      const b = prev.get(r.stage);
      if (b === undefined || b.requests === 0) return '–';
      const d = r[k] - b[k];
      return h('span', { class: d > 0 ? 'up' : d < 0 ? 'down' : '' }, `${d > 0 ? '+' : d < 0 ? '−' : ''}${duration(Math.abs(d))} (${change(r[k], b[k])})`);
    };
    const link = (/** @type {string} */ stage) => ctx.link('stages', null, { ...Object.fromEntries(p), stage });
    const rows = table(
      [
        { label: 'Stage', cell: (r) => [h('a', { href: link(r.stage) }, r.stage), moved?.stage === r.stage ? h('span', { class: 'badge moved', 'data-testid': 'moved' }, 'moved most') : null] },
        { label: 'Requests', num: true, cell: (r) => count(r.requests) },
        { label: 'p50', num: true, cell: (r) => duration(r.p50_ms) },
        { label: 'p95', num: true, cell: (r) => duration(r.p95_ms) },
        { label: 'p99', num: true, cell: (r) => duration(r.p99_ms) },
        { label: 'Requests before', num: true, title: 'Over the period of the same length just before', cell: (r) => count(prev.get(r.stage)?.requests ?? 0) },
        { label: 'Δ p50', num: true, title: 'Against the period of the same length just before', cell: (r) => delta(r, 'p50_ms') },
        { label: 'Δ p95', num: true, title: 'Against the period of the same length just before', cell: (r) => delta(r, 'p95_ms') },
      ],
      now,
      { empty: 'No stage spans in this range.', cls: 'stages', rowAttrs: (r) => ({ class: r.stage === chosen ? 'selected' : null, 'data-stage': r.stage }) },
    );
    const movedText =
      moved === null
        ? 'No stage to compare with the period before.'
        : `Against the ${duration(span)} before: ${moved.stage} moved most, p95 ${moved.deltaMs >= 0 ? 'up' : 'down'} ${duration(Math.abs(moved.deltaMs))}.`;
    replace(
      ctx.main,
      h('div', { class: 'toolbar' }, h('h1', {}, 'Stages'), form, pctPicker),
      h('p', { class: 'lead', 'data-testid': 'moved-text' }, movedText),
      charts,
      section('Per stage, this range against the one before', rows),
    );
  },
};
