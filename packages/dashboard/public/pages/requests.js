// Requests: the captured requests of the range, newest first, with filters, a phrase search
// in prompts and answers, and paging by cursor (GET /v1/requests).
import { api } from '../lib/api.js';
import { h, replace, table } from '../lib/dom.js';
import { clock, count, duration, money } from '../lib/format.js';
import { isAdmin, mayReadContent, orNone, statusBadge } from '../lib/page.js';
import { apiRange } from '../lib/state.js';

/** The listing's filters, as URL and API parameters alike (docs/api.md). */
const FILTERS = [
  { name: 'model', label: 'Model', placeholder: 'gpt-4o' },
  { name: 'provider', label: 'Provider', placeholder: 'openai' },
  { name: 'status', label: 'Status', placeholder: '5xx or 429' },
  { name: 'error_type', label: 'Error type', placeholder: 'upstream_timeout' },
  { name: 'min_total_ms', label: 'Min total ms', placeholder: '1000' },
  { name: 'team', label: 'Team', placeholder: 'search', admin: true },
  { name: 'key', label: 'Key id', placeholder: 'key_…' },
  { name: 'end_user', label: 'End user', placeholder: 'user-42' },
  { name: 'session', label: 'Session', placeholder: 'sess-7' },
  { name: 'tag', label: 'Tag', placeholder: 'env:prod' },
];
const PAGE_SIZE = 50;

/** @type {import('../lib/page.js').Page} */
export default {
  title: 'Requests',
  usesRange: true,
  async render(ctx) {
    const p = ctx.route.params;
    const admin = isAdmin(ctx.who);
    const canSearch = mayReadContent(ctx.who);
    const q = new URLSearchParams(apiRange(ctx.range));
    for (const f of FILTERS) {
      const v = p.get(f.name);
      if (v !== null && v !== '') q.set(f.name, v);
    }
    const stream = p.get('stream');
    if (stream === 'true' || stream === 'false') q.set('stream', stream);
    const phrase = p.get('q');
    if (phrase !== null && phrase !== '' && canSearch) q.set('q', phrase);
    q.set('limit', String(PAGE_SIZE));
    const cursor = p.get('cursor');
    if (cursor !== null && cursor !== '') q.set('cursor', cursor);

    // The form is drawn before the answer, so a refused filter can be corrected in place.
    /** @type {Record<string, HTMLInputElement>} */
    const inputs = {};
    const fields = FILTERS.filter((f) => f.admin !== true || admin).map((f) => {
      const input = h('input', { name: f.name, value: p.get(f.name) ?? '', placeholder: f.placeholder, 'data-testid': `filter-${f.name}` });
      inputs[f.name] = input;
      return h('label', { class: 'field' }, h('span', {}, f.label), input);
    });
    const streamSel = h('select', { name: 'stream', 'data-testid': 'filter-stream' }, h('option', { value: '' }, 'any'), h('option', { value: 'true', selected: stream === 'true' }, 'streamed'), h('option', { value: 'false', selected: stream === 'false' }, 'not streamed'));
    const search = h('input', {
      name: 'q',
      type: 'search',
      value: phrase ?? '',
      placeholder: canSearch ? 'Search prompts and answers' : 'Content search takes the content scope',
      disabled: !canSearch,
      'data-testid': 'search',
      class: 'search',
    });
    const form = h(
      'form',
      { class: 'filters', 'data-testid': 'filters' },
      h('div', { class: 'search-row' }, search, h('button', { type: 'submit', class: 'primary' }, 'Apply'), h('a', { href: ctx.link('requests', null), class: 'button small' }, 'Clear')),
      h('div', { class: 'field-row' }, fields, h('label', { class: 'field' }, h('span', {}, 'Stream'), streamSel)),
    );
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      /** @type {Record<string, string | null>} */
      const patch = { q: canSearch ? search.value.trim() : null, stream: streamSel.value };
      for (const [name, input] of Object.entries(inputs)) patch[name] = input.value.trim();
      ctx.setParams(patch);
    });
    const results = h('div', { class: 'results' }, h('p', { class: 'muted' }, 'Loading…'));
    replace(ctx.main, h('div', { class: 'toolbar' }, h('h1', {}, 'Requests')), form, results);

    const list = /** @type {import('../lib/types.js').RequestList} */ (await api(`v1/requests?${q}`, { signal: ctx.signal }));
    const rangeParams = { from: null, to: null, range: null };
    const open = (/** @type {string} */ trace) => ctx.link('request', trace);
    const rows = table(
      [
        { label: 'Time', cell: (r) => h('a', { href: open(r.trace_id), 'data-testid': 'open' }, clock(r.start_time)) },
        { label: 'Status', cell: (r) => [statusBadge(r.status), r.error_type === '' ? null : h('span', { class: 'muted small' }, ` ${r.error_type}`)] },
        { label: 'Model', cell: (r) => r.model },
        { label: 'Provider', cell: (r) => r.provider },
        { label: 'Team', cell: (r) => r.team },
        { label: 'Key', cell: (r) => h('span', { class: 'mono small' }, orNone(r.key_id)) },
        { label: 'Stream', cell: (r) => (r.stream ? 'yes' : '') },
        { label: 'Total', num: true, cell: (r) => duration(r.total_ms) },
        { label: 'Gateway', num: true, title: 'The gateway’s own time: total minus waiting on the provider', cell: (r) => duration(r.gateway_ms) },
        { label: 'TTFT', num: true, cell: (r) => (r.stream ? duration(r.ttft_ms) : '') },
        { label: 'Tokens in / out', num: true, cell: (r) => `${count(r.tokens.input)} / ${count(r.tokens.output)}` },
        { label: 'Cost', num: true, cell: (r) => money(r.cost_usd) },
        { label: 'Trace', cell: (r) => h('a', { href: open(r.trace_id), class: 'mono small' }, r.trace_id.slice(0, 12), '…') },
      ],
      list.data,
      {
        empty: phrase !== null && phrase !== '' ? `No request in this range contains “${phrase}”.` : 'No requests in this range with these filters.',
        cls: 'requests',
        rowAttrs: (r) => ({ 'data-trace': r.trace_id, class: r.status >= 400 ? 'failed' : null }),
      },
    );
    // The next page must repeat the first page's range exactly (the cursor is bound to it):
    // a relative range ("last hour") is pinned to the times it resolved to.
    const pinned = { ...rangeParams, from: new Date(ctx.range.fromMs).toISOString(), to: new Date(ctx.range.toMs).toISOString() };
    const paging = h(
      'div',
      { class: 'paging' },
      h('span', { class: 'muted', 'data-testid': 'count' }, `${list.data.length} request${list.data.length === 1 ? '' : 's'}${cursor !== null ? ' (a later page)' : ''}, newest first`),
      cursor !== null ? h('a', { href: ctx.link('requests', null, Object.fromEntries([...p].filter(([k]) => k !== 'cursor'))), class: 'button small' }, '⇤ Newest') : null,
      list.next_cursor !== null
        ? h(
            'button',
            {
              type: 'button',
              class: 'small',
              'data-testid': 'older',
              onclick: () => ctx.setParams({ ...pinned, cursor: list.next_cursor }, { keepCursor: true }),
            },
            'Older →',
          )
        : null,
    );
    replace(results, rows, paging);
  },
};
