// The Sightline dashboard: a single-page app over the query API (docs/dashboard.md).
// Every view is a URL (`#/<page>[/<arg>]?<params>`); the time range is in it too.
import { api, ApiError, clearToken, getToken, setToken } from './lib/api.js';
import { h, replace } from './lib/dom.js';
import { fromLocalInput, minute, toLocalInput } from './lib/format.js';
import { errorBox, isAdmin } from './lib/page.js';
import { hashOf, parseHash, PRESETS, rangeOnly, resolveRange } from './lib/state.js';
import overview from './pages/overview.js';
import requests from './pages/requests.js';
import request from './pages/request.js';
import stages from './pages/stages.js';
import capture from './pages/capture.js';
import keys from './pages/keys.js';
import teams from './pages/teams.js';

/** @type {Record<string, import('./lib/page.js').Page>} */
const PAGES = { overview, requests, request, stages, capture, keys, teams };
/** The navigation, in order. */
const NAV = ['overview', 'requests', 'stages', 'capture', 'keys', 'teams'];

const root = /** @type {HTMLElement} */ (document.getElementById('app'));

/** @type {import('./lib/types.js').Whoami | null} */
let who = null;
/** The page on screen: aborted (its requests) and cleaned up (its charts) when it is left. */
/** @type {{ abort: AbortController, cleanups: (() => void)[] } | null} */
let current = null;
let generation = 0;

function teardown() {
  if (current === null) return;
  current.abort.abort();
  for (const fn of current.cleanups) {
    try {
      fn();
    } catch {
      // A chart already gone: nothing to do.
    }
  }
  current = null;
}

/**
 * Who the stored credential is; with none, whether the API is open (no admin token set).
 * @returns {Promise<import('./lib/types.js').Whoami | null>}
 */
async function identify() {
  const token = getToken();
  try {
    const w = /** @type {import('./lib/types.js').Whoami} */ (await api('v1/whoami', { token }));
    if (token === null && w.authentication) return null;
    return w;
  } catch (e) {
    if (e instanceof ApiError && (e.status === 401 || e.status === 403)) {
      if (token !== null) clearToken();
      return null;
    }
    throw e;
  }
}

function signOut() {
  clearToken();
  who = null;
  location.hash = '#/signin';
}

/** @param {import('./lib/state.js').Route} r */
function renderSignin(r, message = '') {
  const next = r.params.get('next') ?? '';
  const input = h('input', { type: 'password', name: 'token', id: 'token', autocomplete: 'off', placeholder: 'sl-… or the admin token', required: true, 'data-testid': 'token' });
  const status = h('div', { class: 'signin-status' }, message === '' ? null : h('div', { class: 'error', role: 'alert' }, message));
  const form = h(
    'form',
    { class: 'signin', 'data-testid': 'signin' },
    h('h1', {}, 'Sightline'),
    h('p', {}, 'Sign in with a Sightline key that has the ', h('code', {}, 'read'), ' scope, or with the admin token. It is kept in this browser tab only (session storage) and sent to the query API as ', h('code', {}, 'Authorization: Bearer …'), '.'),
    h('label', { for: 'token' }, 'Key or admin token'),
    input,
    h('button', { type: 'submit', class: 'primary' }, 'Sign in'),
    status,
  );
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const token = input.value.trim();
    if (token === '') return;
    replace(status, h('div', { class: 'muted' }, 'Checking…'));
    api('v1/whoami', { token })
      .then((w) => {
        setToken(token);
        who = /** @type {import('./lib/types.js').Whoami} */ (w);
        location.hash = next !== '' && !next.startsWith('#/signin') ? next : '#/overview';
      })
      .catch((/** @type {unknown} */ e) => {
        replace(status, e instanceof ApiError && e.status === 401 ? h('div', { class: 'error', role: 'alert' }, `Not accepted: ${e.message}`) : e instanceof ApiError && e.status === 403 ? h('div', { class: 'error', role: 'alert' }, `This key may not read: ${e.message}`) : errorBox(e));
      });
  });
  document.title = 'Sign in · Sightline';
  replace(root, h('div', { class: 'signin-page' }, form));
  input.focus();
}

/**
 * @param {import('./lib/state.js').Route} r
 * @param {import('./lib/state.js').Range} range
 * @param {boolean} usesRange
 * @param {() => void} rerender
 */
function rangePicker(r, range, usesRange, rerender) {
  const custom = range.preset === null;
  const select = h('select', { 'data-testid': 'range', 'aria-label': 'Time range' }, ...PRESETS.map((p) => h('option', { value: p.id, selected: !custom && range.preset?.id === p.id }, p.label)), h('option', { value: 'custom', selected: custom }, 'Custom range…'));
  const from = h('input', { type: 'datetime-local', 'data-testid': 'range-from', value: toLocalInput(range.fromMs), 'aria-label': 'From' });
  const to = h('input', { type: 'datetime-local', 'data-testid': 'range-to', value: toLocalInput(range.toMs), 'aria-label': 'To' });
  const apply = h('button', { type: 'submit', class: 'small', 'data-testid': 'range-apply' }, 'Apply');
  const customForm = h('form', { class: `custom-range${custom ? '' : ' hidden'}` }, from, '–', to, apply);
  customForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const f = fromLocalInput(from.value);
    const t = fromLocalInput(to.value);
    if (f !== null && t !== null && t > f) setRange(r, f, t);
  });
  select.addEventListener('change', () => {
    if (select.value === 'custom') customForm.classList.remove('hidden');
    else navigate(r, { range: select.value, from: null, to: null, cursor: null });
  });
  const refresh = h('button', { type: 'button', class: 'small', title: 'Reload this view', onclick: rerender }, '↻');
  // A page without a time range (one request, keys, teams) keeps the range in its links only.
  if (!usesRange) return h('div', { class: 'range' }, refresh);
  return h('div', { class: 'range' }, select, customForm, custom ? null : h('span', { class: 'range-text', 'data-testid': 'range-text' }, `${minute(range.fromMs)} – ${minute(range.toMs)}`), refresh);
}

/**
 * @param {import('./lib/state.js').Route} r
 * @param {Record<string, string | null>} patch
 */
function navigate(r, patch) {
  const p = new URLSearchParams(r.params);
  for (const [k, v] of Object.entries(patch)) {
    if (v === null || v === '') p.delete(k);
    else p.set(k, v);
  }
  location.hash = hashOf(r.page, r.arg, p);
}

/**
 * @param {import('./lib/state.js').Route} r
 * @param {number} fromMs
 * @param {number} toMs
 */
function setRange(r, fromMs, toMs) {
  navigate(r, { range: null, from: new Date(fromMs).toISOString(), to: new Date(toMs).toISOString(), cursor: null });
}

async function route() {
  const r = parseHash(location.hash);
  teardown();
  const gen = ++generation;
  if (r.page === 'signin') {
    renderSignin(r);
    return;
  }
  if (who === null) {
    replace(root, h('p', { class: 'muted pad' }, 'Loading…'));
    try {
      who = await identify();
    } catch (e) {
      replace(root, h('div', { class: 'pad' }, errorBox(e)));
      return;
    }
    if (gen !== generation) return;
    if (who === null) {
      location.replace(hashOf('signin', null, { next: location.hash }));
      return;
    }
  }
  const me = who;
  const page = PAGES[r.page];
  const range = resolveRange(r.params, Date.now());
  const keep = rangeOnly(r.params);
  const link = (/** @type {string} */ p, /** @type {string | null} */ arg, /** @type {Record<string, string | null | undefined>} */ params = {}) => hashOf(p, arg, { ...keep, ...params });
  const nav = h(
    'nav',
    {},
    NAV.filter((p) => PAGES[p]?.adminOnly !== true || isAdmin(me)).map((p) => h('a', { href: link(p, null), class: r.page === p || (r.page === 'request' && p === 'requests') ? 'active' : null, 'data-testid': `nav-${p}` }, PAGES[p]?.title ?? p)),
  );
  const whoText = me.kind === 'admin' ? (me.authentication ? 'admin' : 'admin (authentication off)') : `${me.team ?? ''} · ${me.name ?? me.key_id ?? 'key'}`;
  const main = h('main', { id: 'main' });
  const rerender = () => void route();
  replace(
    root,
    h(
      'header',
      { class: 'top' },
      h('a', { class: 'brand', href: link('overview', null) }, 'Sightline'),
      nav,
      rangePicker(r, range, page?.usesRange ?? false, rerender),
      h('div', { class: 'who', 'data-testid': 'who' }, whoText, me.authentication ? h('button', { type: 'button', class: 'small link', onclick: signOut, 'data-testid': 'signout' }, 'Sign out') : null),
    ),
    main,
  );
  if (page === undefined) {
    replace(main, h('div', { class: 'notice' }, `No page "${r.page}". `, h('a', { href: link('overview', null) }, 'Overview')));
    return;
  }
  document.title = `${page.title} · Sightline`;
  if (page.adminOnly === true && !isAdmin(me)) {
    replace(main, h('div', { class: 'notice', 'data-testid': 'admin-only' }, `${page.title} takes the admin token: this key reads its own team's data only.`));
    return;
  }
  const abort = new AbortController();
  /** @type {(() => void)[]} */
  const cleanups = [];
  current = { abort, cleanups };
  replace(main, h('p', { class: 'muted' }, 'Loading…'));
  try {
    await page.render({
      main,
      route: r,
      range,
      who: me,
      signal: abort.signal,
      cleanup: (fn) => cleanups.push(fn),
      setParams: (patch, opts) => navigate(r, opts?.keepCursor === true ? patch : { cursor: null, ...patch }),
      setRange: (f, t) => setRange(r, f, t),
      link,
      rerender,
    });
  } catch (e) {
    if (abort.signal.aborted) return;
    if (e instanceof ApiError && e.status === 401) {
      // The key was revoked or expired meanwhile.
      clearToken();
      who = null;
      renderSignin({ page: 'signin', arg: null, params: new URLSearchParams({ next: location.hash }) }, `Signed out: ${e.message}`);
      return;
    }
    replace(main, errorBox(e));
  }
}

window.addEventListener('hashchange', () => void route());
void route();
