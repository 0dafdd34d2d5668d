// What every page gets, and the pieces they share.
import { ApiError } from './api.js';
import { h } from './dom.js';

/**
 * @typedef {{
 *   main: HTMLElement,
 *   route: import('./state.js').Route,
 *   range: import('./state.js').Range,
 *   who: import('./types.js').Whoami,
 *   signal: AbortSignal,
 *   cleanup: (fn: () => void) => void,
 *   setParams: (patch: Record<string, string | null>, opts?: { keepCursor?: boolean }) => void,
 *   setRange: (fromMs: number, toMs: number) => void,
 *   link: (page: string, arg: string | null, params?: Record<string, string | null | undefined>) => string,
 *   rerender: () => void,
 * }} PageContext
 *
 * @typedef {{
 *   title: string,
 *   usesRange: boolean,
 *   adminOnly?: boolean,
 *   render: (ctx: PageContext) => Promise<void>,
 * }} Page
 */

/** @param {import('./types.js').Whoami} who */
export function isAdmin(who) {
  return who.kind === 'admin';
}

/** @param {import('./types.js').Whoami} who */
export function mayReadContent(who) {
  return who.kind === 'admin' || who.scopes.includes('content');
}

/**
 * A message box for an error the API gave (its code and message, and the field at fault).
 * @param {unknown} e
 */
export function errorBox(e) {
  if (e instanceof ApiError) {
    return h('div', { class: 'error', role: 'alert', 'data-testid': 'error' }, h('strong', {}, `${e.status} ${e.code}`), ': ', e.message, e.field === null ? null : h('span', { class: 'muted' }, ` (${e.field})`));
  }
  return h('div', { class: 'error', role: 'alert', 'data-testid': 'error' }, e instanceof Error ? e.message : String(e));
}

/** @param {string} text */
export function notice(text) {
  return h('div', { class: 'notice' }, text);
}

/**
 * A section with a heading.
 * @param {string} title
 * @param {...(import('./dom.js').Child | import('./dom.js').Child[])} children
 */
export function section(title, ...children) {
  return h('section', { class: 'panel' }, h('h2', {}, title), ...children);
}

/**
 * A status code as a coloured badge.
 * @param {number} status
 */
export function statusBadge(status) {
  const cls = status >= 500 ? 's5' : status >= 400 ? 's4' : status >= 200 && status < 300 ? 's2' : 's0';
  return h('span', { class: `badge ${cls}` }, status === 0 ? '—' : String(status));
}

/**
 * The team or key label of a group value ('' is "none").
 * @param {string} v
 */
export function orNone(v) {
  return v === '' ? '(none)' : v;
}
