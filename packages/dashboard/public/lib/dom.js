// Building the page: elements and text nodes only. Captured prompts and answers are
// strangers' text, so nothing here parses markup (no innerHTML): a string is always text.

/** @typedef {Node | string | number | null | undefined | false} Child */
/** @typedef {string | number | boolean | null | undefined | ((e: Event) => void)} AttrValue */

/**
 * An element with attributes (`on…` functions become listeners; false, null and undefined
 * are left out) and children (strings become text).
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Record<string, AttrValue>} [attrs]
 * @param {...(Child | Child[])} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === false || value === null || value === undefined) continue;
    if (typeof value === 'function') el.addEventListener(name.slice(2).toLowerCase(), value);
    // Through the CSS object model: the page's policy allows no inline style attributes.
    else if (name === 'style') el.style.cssText = String(value);
    else if (name === 'value' && (el instanceof HTMLInputElement || el instanceof HTMLTextAreaElement || el instanceof HTMLSelectElement)) el.value = String(value);
    else el.setAttribute(name, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

/**
 * @param {Node} el
 * @param {(Child | Child[])[]} children
 */
export function append(el, children) {
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
}

/**
 * Replaces an element's children.
 * @param {Element} el
 * @param {...(Child | Child[])} children
 */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

/**
 * A table from column definitions.
 * @template T
 * @param {{ label: string, cell: (row: T) => Child | Child[], num?: boolean, title?: string }[]} columns
 * @param {T[]} rows
 * @param {{ rowAttrs?: (row: T) => Record<string, AttrValue>, empty?: string, cls?: string }} [opts]
 */
export function table(columns, rows, opts = {}) {
  const head = h('thead', {}, h('tr', {}, columns.map((c) => h('th', { class: c.num === true ? 'num' : null, title: c.title ?? null }, c.label))));
  const body = h(
    'tbody',
    {},
    rows.map((r) => h('tr', opts.rowAttrs?.(r) ?? {}, columns.map((c) => h('td', { class: c.num === true ? 'num' : null }, c.cell(r))))),
  );
  const t = h('table', { class: `grid ${opts.cls ?? ''}` }, head, body);
  if (rows.length === 0 && opts.empty !== undefined) return h('div', {}, t, h('p', { class: 'empty' }, opts.empty));
  return t;
}

/**
 * A labelled figure tile.
 * @param {string} label
 * @param {Child} value
 * @param {string} [sub]
 * @param {string} [testid]
 */
export function tile(label, value, sub, testid) {
  return h('div', { class: 'tile', 'data-testid': testid ?? null }, h('div', { class: 'tile-label' }, label), h('div', { class: 'tile-value' }, value), sub === undefined ? null : h('div', { class: 'tile-sub' }, sub));
}

/**
 * Copies text to the clipboard: the Clipboard API where the page is a secure context
 * (https, localhost), else a selected text field and the copy command.
 * @param {string} text
 * @returns {Promise<boolean>}
 */
export async function copyText(text) {
  if (window.isSecureContext && navigator.clipboard !== undefined) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch {
      // Refused (no permission, not focused): try the old way.
    }
  }
  const ta = h('textarea', { class: 'offscreen', readonly: true });
  ta.value = text;
  document.body.appendChild(ta);
  ta.select();
  let ok = false;
  try {
    ok = document.execCommand('copy');
  } finally {
    ta.remove();
  }
  return ok;
}

/**
 * A button that copies `text` and says so.
 * @param {string} text
 * @param {string} label
 * @param {string} [testid]
 */
export function copyButton(text, label, testid) {
  const b = h('button', { type: 'button', class: 'small', 'data-testid': testid ?? null, title: `Copy ${text}` }, label);
  b.addEventListener('click', () => {
    void copyText(text).then((ok) => {
      b.textContent = ok ? 'Copied' : 'Copy failed';
      setTimeout(() => (b.textContent = label), 1500);
    });
  });
  return b;
}
