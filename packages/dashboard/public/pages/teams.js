// Teams (admin): list, create or update a team's description and content policy
// (GET, PUT /v1/admin/teams). Limits and budgets: docs/governance.md.
import { api } from '../lib/api.js';
import { h, replace, table } from '../lib/dom.js';
import { clock } from '../lib/format.js';
import { errorBox, section } from '../lib/page.js';

/** @type {import('../lib/page.js').Page} */
export default {
  title: 'Teams',
  usesRange: false,
  adminOnly: true,
  async render(ctx) {
    const list = /** @type {{ data: import('../lib/types.js').TeamView[] }} */ (await api('v1/admin/teams', { signal: ctx.signal }));
    const name = h('input', { name: 'name', required: true, placeholder: 'search', pattern: '[A-Za-z0-9._\\-]{1,64}', 'data-testid': 'team-name' });
    const description = h('input', { name: 'description', placeholder: 'What the team does', 'data-testid': 'team-description' });
    const policy = h('select', { name: 'content_capture', class: 'auto', 'data-testid': 'team-policy' }, h('option', { value: '' }, 'unchanged (a new team: full)'), ['full', 'redacted', 'none'].map((p) => h('option', { value: p }, p)));
    const status = h('div', {});
    const form = h(
      'form',
      { class: 'create', 'data-testid': 'save-team' },
      h('label', { class: 'field' }, h('span', {}, 'Team'), name),
      h('label', { class: 'field wide' }, h('span', {}, 'Description'), description),
      h('label', { class: 'field' }, h('span', {}, 'Prompts and answers'), policy),
      h('button', { type: 'submit', class: 'primary' }, 'Save team'),
    );
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      /** @type {Record<string, string>} */
      const body = {};
      if (description.value.trim() !== '') body.description = description.value.trim();
      if (policy.value !== '') body.content_capture = policy.value;
      api(`v1/admin/teams/${encodeURIComponent(name.value.trim())}`, { method: 'PUT', body })
        .then(ctx.rerender)
        .catch((/** @type {unknown} */ e) => replace(status, errorBox(e)));
    });
    const edit = (/** @type {import('../lib/types.js').TeamView} */ t) => {
      name.value = t.name;
      description.value = t.settings.description ?? '';
      policy.value = t.settings.content_capture ?? '';
      name.focus();
    };
    const rows = table(
      [
        { label: 'Team', cell: (t) => h('strong', {}, t.name) },
        { label: 'Description', cell: (t) => t.settings.description ?? '' },
        { label: 'Prompts and answers', cell: (t) => t.settings.content_capture ?? 'full' },
        { label: 'Limits', cell: (t) => [t.settings.limits?.requests_per_minute === undefined ? '' : `${t.settings.limits.requests_per_minute} req/min `, t.settings.limits?.tokens_per_minute === undefined ? '' : `${t.settings.limits.tokens_per_minute} tok/min`].join('') },
        { label: 'Budget', cell: (t) => (t.settings.budget === undefined ? '' : `$${t.settings.budget.usd} per ${t.settings.budget.period}`) },
        { label: 'Keys', num: true, cell: (t) => h('a', { href: ctx.link('keys', null, { team: t.name }) }, String(t.keys ?? 0)) },
        { label: 'Updated', cell: (t) => clock(t.updated_at) },
        { label: '', cell: (t) => h('button', { type: 'button', class: 'small', onclick: () => edit(t) }, 'Edit') },
      ],
      list.data,
      { empty: 'No teams yet: creating a key creates its team.', cls: 'teams', rowAttrs: (t) => ({ 'data-team': t.name }) },
    );
    replace(ctx.main, h('div', { class: 'toolbar' }, h('h1', {}, 'Teams')), status, section('Create or update a team', form), section(`${list.data.length} team${list.data.length === 1 ? '' : 's'}`, rows));
  },
};
