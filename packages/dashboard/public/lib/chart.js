// Time-series charts with uPlot (https://github.com/leeoniya/uPlot): canvas, fast with
// thousands of points, a live legend, drag across a chart to zoom the page's time range.
import uPlot from '../vendor/uPlot.esm.js';
import { h } from './dom.js';

/** Tableau 10: distinct and readable on white. */
export const PALETTE = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#bab0ac'];

/**
 * @typedef {{ label: string, values: (number | null)[], color?: string, axis?: 'y' | 'y2', dash?: number[], fill?: boolean, width?: number }} Series
 * @typedef {{
 *   title: string,
 *   x: number[],
 *   series: Series[],
 *   format: (v: number) => string,
 *   format2?: (v: number) => string,
 *   log?: boolean,
 *   height?: number,
 *   onSelect?: (fromS: number, toS: number) => void,
 *   testid?: string,
 *   note?: string,
 *   xRange?: [number, number],
 * }} ChartSpec
 */

/**
 * A figure with a title and a chart that fills its width. The chart is created once the
 * figure is in the page and has a width, resized with it, and destroyed by `cleanup`.
 * @param {ChartSpec} spec
 * @param {(fn: () => void) => void} cleanup
 * @returns {HTMLElement}
 */
export function timeChart(spec, cleanup) {
  const box = h('div', { class: 'chart-box' });
  const fig = h('figure', { class: 'chart', 'data-testid': spec.testid ?? null }, h('figcaption', {}, spec.title, spec.note === undefined ? null : h('span', { class: 'note' }, spec.note)), box);
  if (spec.x.length === 0 || spec.series.length === 0) {
    box.appendChild(h('p', { class: 'empty' }, 'No data in this range'));
    return fig;
  }
  const height = spec.height ?? 200;
  const clean = (/** @type {number | null} */ v) => (v === null || (spec.log === true && v <= 0) ? null : v);
  /** @type {uPlot.AlignedData} */
  const data = [spec.x, ...spec.series.map((s) => s.values.map(clean))];
  const twoAxes = spec.series.some((s) => s.axis === 'y2');
  /** @type {uPlot.Series[]} */
  const series = [
    {},
    ...spec.series.map((s, i) => {
      const color = s.color ?? PALETTE[i % PALETTE.length] ?? '#333';
      const fmt = s.axis === 'y2' ? (spec.format2 ?? spec.format) : spec.format;
      // A value with no neighbour draws no line: show the points of a sparse series.
      const vals = s.values;
      const isolated = vals.some((v, k) => v !== null && (vals[k - 1] ?? null) === null && (vals[k + 1] ?? null) === null);
      /** @type {uPlot.Series} */
      const out = {
        label: s.label,
        stroke: color,
        width: s.width ?? 1.5,
        scale: s.axis ?? 'y',
        points: { show: isolated || spec.x.length < 40, size: 5 },
        value: (_u, v) => (v === null || v === undefined ? '–' : fmt(v)),
      };
      if (s.dash !== undefined) out.dash = s.dash;
      if (s.fill === true) out.fill = `${color}22`;
      return out;
    }),
  ];
  const fromZero = (/** @type {uPlot} */ _u, /** @type {number | null} */ _min, /** @type {number | null} */ max) => /** @type {uPlot.Range.MinMax} */ ([0, max !== null && max > 0 ? max * 1.08 : 1]);
  const xRange = spec.xRange;
  /** @type {uPlot.Scales} */
  const scales = { x: xRange === undefined ? { time: true } : { time: true, range: () => /** @type {uPlot.Range.MinMax} */ ([xRange[0], xRange[1]]) }, y: spec.log === true ? { distr: 3, log: 10 } : { range: fromZero } };
  if (twoAxes) scales.y2 = { range: fromZero };
  const decades = spec.log === true ? (/** @type {uPlot} */ _u, /** @type {number[]} */ splits) => splits.map((v) => (v > 0 && Math.abs(Math.log10(v) - Math.round(Math.log10(v))) < 1e-9 ? v : null)) : undefined;
  /** @type {uPlot.Axis[]} */
  const axes = [
    { stroke: '#555', grid: { stroke: '#eee' }, ticks: { stroke: '#ddd' } },
    { stroke: '#555', grid: { stroke: '#eee' }, ticks: { stroke: '#ddd' }, size: 64, values: (_u, splits) => splits.map((v) => (v === null ? '' : spec.format(v))) },
  ];
  if (decades !== undefined) {
    // A log axis: lines and labels at the powers of ten only. (Set only here: an explicit
    // `undefined` would replace uPlot's default filter.)
    const y = /** @type {uPlot.Axis} */ (axes[1]);
    y.filter = decades;
    y.grid = { stroke: '#eee', filter: decades };
    y.ticks = { stroke: '#ddd', filter: decades };
  }
  if (twoAxes) axes.push({ scale: 'y2', side: 1, stroke: '#555', grid: { show: false }, size: 64, values: (_u, splits) => splits.map((v) => (v === null ? '' : (spec.format2 ?? spec.format)(v))) });
  /** @type {uPlot.Hooks.Arrays} */
  const hooks = {};
  if (spec.onSelect !== undefined) {
    const onSelect = spec.onSelect;
    hooks.setSelect = [
      (u) => {
        if (u.select.width < 4) return;
        const a = u.posToVal(u.select.left, 'x');
        const b = u.posToVal(u.select.left + u.select.width, 'x');
        u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
        onSelect(Math.floor(a), Math.ceil(b));
      },
    ];
  }
  /** @type {uPlot | null} */
  let plot = null;
  const ro = new ResizeObserver(() => {
    const width = Math.floor(box.clientWidth);
    if (width <= 0) return;
    if (plot === null) {
      plot = new uPlot({ width, height, series, scales, axes, hooks, cursor: { drag: { x: true, y: false, setScale: false } }, legend: { live: true } }, data, box);
    } else if (Math.abs(plot.width - width) > 1) plot.setSize({ width, height });
  });
  ro.observe(box);
  cleanup(() => {
    ro.disconnect();
    plot?.destroy();
  });
  return fig;
}
