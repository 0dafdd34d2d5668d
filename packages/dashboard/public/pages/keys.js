// Keys (admin): list, create (the secret is shown once), revoke (GET, POST, DELETE
// /v1/admin/keys).
import { api } from '../lib/api.js';
import { copyButton, h, replace, table } from '../lib/dom.js';
import { clock } from '../lib/format.js';
import { errorBox, section } from '../lib/page.js';

const SCOPES = ['gateway', 'read', 'content'];

/**
 * A revoke button that asks once more in place (no browser dialog).
 * @param {import('../lib/types.js').KeyView} k
 * @param {() => void} done
 * @param {HTMLElement} status
 */
function revokeButton(k, done, status) {
  const b = h('button', { type: 'button', class: 'small danger', 'data-testid': `revoke-${k.id}` }, 'Revoke');
  let armed = false;
  b.addEventListener('click', () => {
    if (!armed) {
      armed = true;
      b.textContent = 'Confirm revoke';
      b.classList.add('armed');
      return;
    }
    b.disabled = true;
    api(`v1/admin/keys/${k.id}`, { method: 'DELETE' })
      .then(done)
      .catch((/** @type {unknown} */ e) => replace(status, errorBox(e)));
  });
  return b;
}

/** @type {import('../lib/page.js').Page} */
export default {
  title: 'Keys',
  usesRange: false,
  adminOnly: true,
  async render(ctx) {
    const p = ctx.route.params;
    const showRevoked = p.get('revoked') === 'true';
    const team = p.get('team') ?? '';
    const q = new URLSearchParams();
    if (showRevoked) q.set('revoked', 'true');
    if (team !== '') q.set('team', team);
    const list = /** @type {{ data: import('../lib/types.js').KeyView[] }} */ (await api(`v1/admin/keys?${q}`, { signal: ctx.signal }));
    const status = h('div', {});

    // Create: the answer holds the secret, shown here once.
    const f = {
      team: h('input', { name: 'team', required: true, placeholder: 'search', 'data-testid': 'new-team', value: team }),
      name: h('input', { name: 'name', required: true, placeholder: 'ci', 'data-testid': 'new-name' }),
      models: h('input', { name: 'models', placeholder: 'gpt-*, claude-* (empty: every model)', 'data-testid': 'new-models' }),
      expires: h('input', { name: 'expires', type: 'datetime-local', 'data-testid': 'new-expires' }),
    };
    const scopeBoxes = SCOPES.map((s) => h('input', { type: 'checkbox', name: 'scope', value: s, checked: s !== 'content', 'data-testid': `new-scope-${s}` }));
    const created = h('div', { 'data-testid': 'created' });
    const form = h(
      'form',
      { class: 'create', 'data-testid': 'create-key' },
      h('label', { class: 'field' }, h('span', {}, 'Team'), f.team),
      h('label', { class: 'field' }, h('span', {}, 'Name'), f.name),
      h('fieldset', { class: 'field' }, h('legend', {}, 'Scopes'), scopeBoxes.map((b, i) => h('label', { class: 'check' }, b, ` ${SCOPES[i]}`))),
      h('label', { class: 'field wide' }, h('span', {}, 'Models'), f.models),
      h('label', { class: 'field' }, h('span', {}, 'Expires (optional)'), f.expires),
      h('button', { type: 'submit', class: 'primary' }, 'Create key'),
    );
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const models = f.models.value.split(',').map((m) => m.trim()).filter((m) => m !== '');
      const expires = f.expires.value === '' ? null : new Date(f.expires.value).toISOString();
      const body = { team: f.team.value.trim(), name: f.name.value.trim(), scopes: scopeBoxes.filter((b) => b.checked).map((b) => b.value), models, expires_at: expires };
      api('v1/admin/keys', { body })
        .then((k) => {
          const key = /** @type {import('../lib/types.js').KeyView} */ (k);
          replace(
            created,
            h(
              'div',
              { class: 'secret' },
              h('p', {}, `Key ${key.id} for team ${key.team} created. Copy its secret now: it is not stored and is shown only this once.`),
              h('code', { 'data-testid': 'secret' }, key.key ?? ''),
              ' ',
              copyButton(key.key ?? '', 'Copy secret'),
              ' ',
              h('button', { type: 'button', class: 'small', onclick: ctx.rerender }, 'Done'),
            ),
          );
        })
        .catch((/** @type {unknown} */ e) => replace(created, errorBox(e)));
    });

    const rows = table(
      [
        { label: 'Id', cell: (k) => h('span', { class: 'mono' }, k.id) },
        { label: 'Name', cell: (k) => k.name },
        { label: 'Team', cell: (k) => h('a', { href: ctx.link('keys', null, { team: k.team, revoked: showRevoked ? 'true' : null }) }, k.team) },
        { label: 'Scopes', cell: (k) => k.scopes.join(', ') },
        { label: 'Models', cell: (k) => (k.models.length === 0 ? 'all' : k.models.join(', ')) },
        { label: 'Secret', cell: (k) => h('span', { class: 'mono' }, k.hint) },
        { label: 'Created', cell: (k) => clock(k.created_at) },
        { label: 'Expires', cell: (k) => (k.expires_at === null ? '' : clock(k.expires_at)) },
        { label: 'Limits', cell: (k) => [k.limits?.requests_per_minute === undefined ? '' : `${k.limits.requests_per_minute} req/min `, k.limits?.tokens_per_minute === undefined ? '' : `${k.limits.tokens_per_minute} tok/min `, k.budget === null ? '' : `$${k.budget.usd}/${k.budget.period}`].join('') },
        { label: '', cell: (k) => (k.revoked_at === null ? revokeButton(k, ctx.rerender, status) : h('span', { class: 'badge s5', 'data-testid': 'revoked' }, `revoked ${clock(k.revoked_at)}`)) },
      ],
      list.data,
      { empty: 'No keys.', cls: 'keys', rowAttrs: (k) => ({ 'data-key': k.id, class: k.revoked_at === null ? null : 'revoked' }) },
    );
    const toggles = h(
      'div',
      { class: 'segmented' },
      h('a', { href: ctx.link('keys', null, { team: team || null }), class: showRevoked ? null : 'active' }, 'Active'),
      h('a', { href: ctx.link('keys', null, { team: team || null, revoked: 'true' }), class: showRevoked ? 'active' : null, 'data-testid': 'show-revoked' }, 'With revoked'),
      team === '' ? null : h('a', { href: ctx.link('keys', null, { revoked: showRevoked ? 'true' : null }) }, `✕ team ${team}`),
    );
    replace(ctx.main, h('div', { class: 'toolbar' }, h('h1', {}, 'Keys'), toggles), status, section('New key', form, created), section(`${list.data.length} key${list.data.length === 1 ? '' : 's'}`, rows));
  },
};
