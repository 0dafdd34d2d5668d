// One request: its stage waterfall to scale (stages, upstream attempts and retries), its
// attributes, and its prompt and answer when the caller may read them
// (GET /v1/requests/{traceId}).
import { api, ApiError } from '../lib/api.js';
import { answer, conversation, pretty } from '../lib/content.js';
import { copyButton, h, replace, table } from '../lib/dom.js';
import { bytes, clock, count, duration } from '../lib/format.js';
import { notice, section, statusBadge } from '../lib/page.js';
import { layout } from '../lib/waterfall.js';

/**
 * Where a bar's duration is written: after the bar; before it when the bar ends near the
 * right edge; inside it when it is that wide.
 * @param {import('../lib/waterfall.js').Bar} b
 * @returns {Record<string, string>}
 */
function timeLabel(b) {
  const pct = (/** @type {number} */ x) => `${(x * 100).toFixed(3)}%`;
  if (b.left + b.width <= 0.85) return { class: 'wf-time', style: `left:calc(${pct(b.left + b.width)} + 4px)` };
  if (b.left >= 0.15) return { class: 'wf-time', style: `right:calc(${pct(1 - b.left)} + 4px)` };
  return { class: 'wf-time inside', style: `right:calc(${pct(1 - b.left - b.width)} + 4px)` };
}

/**
 * @param {import('../lib/types.js').RequestView} r
 */
function waterfall(r) {
  const { totalMs, bars, ticks } = layout(r);
  const axis = h(
    'div',
    { class: 'wf-axis' },
    ticks.map((t) => h('span', { class: 'wf-tick', style: `left:${(t.left * 100).toFixed(3)}%` }, duration(t.label))),
  );
  const rows = bars.map((b) =>
    h(
      'div',
      { class: `wf-row wf-${b.kind}${b.error ? ' wf-error' : ''}`, 'data-testid': `wf-${b.kind}`, 'data-stage': b.label, 'data-offset-ms': b.offsetMs, 'data-duration-ms': b.durationMs },
      h('div', { class: 'wf-label', title: b.detail === '' ? b.label : `${b.label}: ${b.detail}` }, h('span', { class: 'wf-name' }, b.label), b.detail === '' ? null : h('span', { class: 'wf-detail' }, b.detail)),
      h(
        'div',
        { class: 'wf-track' },
        ticks.map((t) => h('span', { class: 'wf-grid', style: `left:${(t.left * 100).toFixed(3)}%` })),
        h('div', { class: `wf-bar tone-${b.tone}`, style: `left:${(b.left * 100).toFixed(4)}%;width:${(b.width * 100).toFixed(4)}%`, title: `${b.label}: starts at ${duration(b.offsetMs)}, takes ${duration(b.durationMs)}` }),
        h('span', timeLabel(b), duration(b.durationMs)),
      ),
    ),
  );
  const legend = h(
    'div',
    { class: 'wf-legend' },
    [
      ['gateway', 'gateway'],
      ['provider', 'provider (connect, send, wait, stream)'],
      ['retry', 'failed attempts and backoff'],
      ['control', 'limits, budget, cache'],
      ['attempt-ok', 'upstream attempt'],
      ['attempt-failed', 'failed attempt'],
    ].map(([tone, text]) => h('span', {}, h('i', { class: `tone-${tone}` }), text)),
  );
  return h('div', { class: 'waterfall', 'data-testid': 'waterfall', 'data-total-ms': totalMs }, h('div', { class: 'wf-row wf-head' }, h('div', { class: 'wf-label' }, 'stage'), axis), rows, legend);
}

/**
 * @param {string} title
 * @param {import('../lib/content.js').Turn[] | null} turns
 * @param {string} raw
 */
function conversationBlock(title, turns, raw) {
  return h(
    'div',
    { class: 'convo' },
    h('h3', {}, title),
    turns === null ? h('pre', { class: 'raw' }, raw) : turns.map((t) => h('div', { class: `turn role-${t.role}` }, h('div', { class: 'role' }, t.role), h('pre', { class: 'text' }, t.text))),
  );
}

/** @param {import('../lib/types.js').RequestView} r */
function contentPanel(r) {
  if (r.content === undefined) return section('Prompt and answer', notice('This key may not read prompts and answers: that takes the content scope (or the admin token).'));
  if (r.content === null) return section('Prompt and answer', notice('Nothing was stored for this request: the team’s content policy is “none”, or the content was withheld.'));
  const c = r.content;
  const a = answer(c.response);
  const flags = [
    `policy ${c.policy}`,
    `request ${bytes(c.request_bytes)}${c.request_truncated ? ' (cut)' : ''}`,
    `answer ${bytes(c.response_bytes)}${c.response_truncated ? ' (cut)' : ''}`,
    c.partial ? 'the stream did not finish: this is what arrived' : '',
    Object.keys(c.redactions).length > 0 ? `redacted: ${Object.entries(c.redactions).map(([k, v]) => `${k} ×${v}`).join(', ')}` : '',
  ].filter((f) => f !== '');
  return section(
    'Prompt and answer',
    h('p', { class: 'muted small' }, flags.join(' · ')),
    h(
      'div',
      { class: 'content', 'data-testid': 'content' },
      conversationBlock('Prompt', conversation(c.request), c.request),
      h('div', { class: 'convo' }, h('h3', {}, 'Answer', a !== null && a.finish !== '' ? h('span', { class: 'muted small' }, ` (${a.finish})`) : null), a === null ? h('pre', { class: 'raw' }, c.response) : h('div', { class: 'turn role-assistant' }, h('div', { class: 'role' }, 'assistant'), h('pre', { class: 'text', 'data-testid': 'answer' }, a.text))),
    ),
    h('details', {}, h('summary', {}, 'Raw request and answer'), h('div', { class: 'content' }, h('pre', { class: 'raw' }, pretty(c.request)), h('pre', { class: 'raw' }, pretty(c.response)))),
  );
}

/**
 * @param {import('../lib/types.js').RequestView} r
 */
function attributes(r) {
  /** @type {[string, string][]} */
  const main = [
    ['start', `${clock(r.start_time)} (${r.start_time})`],
    ['route', `${r.method} ${r.route} (${r.dialect} API)`],
    ['model', r.model === r.response_model || r.response_model === '' ? r.model : `${r.model} → answered by ${r.response_model}`],
    ['provider', `${r.provider}${r.upstream_model !== '' && r.upstream_model !== r.model ? ` (as ${r.upstream_model})` : ''}`],
    ['team', r.team],
    ['status', `${r.http_status}${r.upstream_status !== 0 && r.upstream_status !== r.http_status ? ` (provider ${r.upstream_status})` : ''}${r.error_type === '' ? '' : ` ${r.error_type}`}${r.aborted ? ' · client left' : ''}`],
    ['total', duration(r.total_ns / 1e6)],
    ['gateway’s own time', duration(r.gateway_ns / 1e6)],
    ['waiting on the provider', duration(r.upstream_ns / 1e6)],
    ['first byte', duration(r.ttfb_ns / 1e6)],
    ['first token', r.stream ? duration(r.ttft_ns / 1e6) : '(not a stream)'],
    ['tokens', `${count(r.usage.input_tokens)} in · ${count(r.usage.output_tokens)} out · ${count(r.usage.cache_read_tokens)} cache read · ${count(r.usage.cache_write_tokens)} cache write${r.usage.partial ? ' (partial)' : ''}`],
    ['bytes', `${bytes(r.request_bytes)} in · ${bytes(r.response_bytes)} out`],
    ['gateway instance', `${r.instance} #${r.seq}`],
    ['span', r.span_id],
  ];
  if (r.end_user !== '') main.push(['end user', r.end_user]);
  if (r.session_id !== '') main.push(['session', r.session_id]);
  for (const [k, v] of Object.entries(r.tags)) main.push([`tag ${k}`, v]);
  const attrs = Object.entries(r.attributes).sort(([a], [b]) => a.localeCompare(b));
  const kv = (/** @type {[string, string][]} */ rows, /** @type {string} */ testid) => table([{ label: 'name', cell: (x) => h('span', { class: 'mono' }, x[0]) }, { label: 'value', cell: (x) => h('span', { class: 'mono wrap' }, x[1]) }], rows, { cls: `kv ${testid}` });
  return h('div', { class: 'two' }, section('Summary', kv(main, 'summary')), section('Span attributes', h('div', { 'data-testid': 'attributes' }, kv(attrs, 'attrs'))));
}

/** @type {import('../lib/page.js').Page} */
export default {
  title: 'Request',
  usesRange: false,
  async render(ctx) {
    const trace = ctx.route.arg ?? '';
    const back = h('a', { href: ctx.link('requests', null), class: 'button small' }, '← Requests');
    if (!/^[0-9a-f]{32}$/.test(trace)) {
      replace(ctx.main, back, notice(`“${trace}” is not a trace id (32 hexadecimal characters).`));
      return;
    }
    /** @type {import('../lib/types.js').TraceView} */
    let view;
    try {
      view = await api(`v1/requests/${trace}`, { signal: ctx.signal });
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) {
        replace(ctx.main, h('div', { class: 'toolbar' }, back, h('h1', {}, 'Request')), notice(`No captured request has trace id ${trace} in what this key may read. A request is queryable within about a second after its response; try again.`), h('button', { type: 'button', onclick: ctx.rerender }, 'Try again'));
        return;
      }
      throw e;
    }
    const head = h(
      'div',
      { class: 'toolbar' },
      back,
      h('h1', {}, 'Request'),
      h('code', { class: 'trace', 'data-testid': 'trace-id' }, view.trace_id),
      copyButton(view.trace_id, 'Copy trace id', 'copy-trace'),
      view.total > 1 ? h('span', { class: 'muted' }, `${view.total} requests share this trace${view.omitted > 0 ? `; the first ${view.requests.length} are shown` : ''}`) : null,
    );
    replace(
      ctx.main,
      head,
      view.requests.map((r, i) =>
        h(
          'article',
          { class: 'request', 'data-span': r.span_id },
          h(
            'div',
            { class: 'req-head' },
            view.requests.length > 1 ? h('strong', {}, `#${i + 1} `) : null,
            statusBadge(r.http_status),
            h('span', { class: 'big' }, ` ${r.model || '(no model)'}`),
            h('span', { class: 'muted' }, ` via ${r.provider || '—'} · ${r.stream ? 'streamed' : 'JSON'} · team ${r.team} · ${clock(r.start_time)} · ${duration(r.total_ns / 1e6)} total, ${duration(r.gateway_ns / 1e6)} in the gateway`),
            r.attempts.length > 1 ? h('span', { class: 'badge s4' }, `${r.attempts.length} attempts`) : null,
          ),
          section('Waterfall', waterfall(r)),
          contentPanel(r),
          attributes(r),
        ),
      ),
    );
  },
};
