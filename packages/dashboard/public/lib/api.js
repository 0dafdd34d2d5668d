// The query API, called with the key or token the user signed in with. The credential
// lives in sessionStorage (this tab, until it closes) and travels only as
// `Authorization: Bearer …`, never in a URL.

const TOKEN = 'sightline.token';

/** @returns {string | null} */
export function getToken() {
  return sessionStorage.getItem(TOKEN);
}

/** @param {string} t */
export function setToken(t) {
  sessionStorage.setItem(TOKEN, t);
}

export function clearToken() {
  sessionStorage.removeItem(TOKEN);
}

/** An answer other than 2xx, with the API's error code and message. */
export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {string} code
   * @param {string} message
   * @param {string | null} field
   */
  constructor(status, code, message, field) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.field = field;
  }
}

/**
 * Calls the API (paths relative to the page, so the dashboard also works behind a proxy
 * under a prefix) and returns the JSON answer.
 * @template T
 * @param {string} path `v1/requests?…`
 * @param {{ method?: string, body?: unknown, signal?: AbortSignal, token?: string | null }} [opts]
 * @returns {Promise<T>}
 */
export async function api(path, opts = {}) {
  /** @type {Record<string, string>} */
  const headers = { accept: 'application/json' };
  const token = opts.token === undefined ? getToken() : opts.token;
  if (token !== null && token !== '') headers.authorization = `Bearer ${token}`;
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(new URL(path, document.baseURI), {
    method: opts.method ?? (opts.body === undefined ? 'GET' : 'POST'),
    headers,
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
    signal: opts.signal,
    cache: 'no-store',
  });
  const text = await res.text();
  /** @type {unknown} */
  let json = null;
  try {
    json = text === '' ? null : JSON.parse(text);
  } catch {
    json = null;
  }
  if (!res.ok) {
    const e = /** @type {Partial<import('./types.js').ApiErrorBody> | null} */ (json)?.error;
    throw new ApiError(res.status, e?.code ?? 'http_error', e?.message ?? `${res.status} ${res.statusText}`, e?.field ?? null);
  }
  return /** @type {T} */ (json);
}

/**
 * POST /v1/metrics.
 * @param {Record<string, unknown>} body
 * @param {AbortSignal} [signal]
 * @returns {Promise<import('./types.js').MetricsAnswer>}
 */
export function metrics(body, signal) {
  return api('v1/metrics', { body, signal });
}
