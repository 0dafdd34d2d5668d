// Prompts and answers as people read them: the conversation a request carried and the
// answer it got, from the stored bodies (OpenAI Chat Completions or Anthropic Messages, in
// the client's API). Pure (no DOM). Anything unrecognised falls back to the raw text.

/** @typedef {{ role: string, text: string }} Turn */

/**
 * @param {unknown} v
 * @returns {v is Record<string, unknown>}
 */
function isObject(v) {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Text of a message's content: a string, or parts/blocks (text kept; others named).
 * @param {unknown} c
 * @returns {string}
 */
export function textOf(c) {
  if (typeof c === 'string') return c;
  if (!Array.isArray(c)) return c === null || c === undefined ? '' : JSON.stringify(c);
  return c
    .map((p) => {
      if (!isObject(p)) return String(p);
      const type = typeof p.type === 'string' ? p.type : 'part';
      if (typeof p.text === 'string') return p.text;
      if (type === 'tool_use') return `[tool call ${String(p.name ?? '')} ${JSON.stringify(p.input ?? {})}]`;
      if (type === 'tool_result') return `[tool result] ${textOf(p.content)}`;
      return `[${type}]`;
    })
    .join('\n');
}

/**
 * @param {unknown} calls OpenAI `tool_calls`
 * @returns {string[]}
 */
function toolCalls(calls) {
  if (!Array.isArray(calls)) return [];
  return calls.map((c) => {
    const f = isObject(c) && isObject(c.function) ? c.function : {};
    return `[tool call ${String(f.name ?? '')} ${typeof f.arguments === 'string' ? f.arguments : ''}]`;
  });
}

/**
 * The conversation of a request body, or null when it is not one we know.
 * @param {string} body
 * @returns {Turn[] | null}
 */
export function conversation(body) {
  /** @type {unknown} */
  let j;
  try {
    j = JSON.parse(body);
  } catch {
    return null;
  }
  if (!isObject(j) || !Array.isArray(j.messages)) return null;
  /** @type {Turn[]} */
  const out = [];
  if (j.system !== undefined) out.push({ role: 'system', text: textOf(j.system) });
  for (const m of j.messages) {
    if (!isObject(m)) continue;
    const role = typeof m.role === 'string' ? m.role : '?';
    const text = [textOf(m.content), ...toolCalls(m.tool_calls)].filter((t) => t !== '').join('\n');
    out.push({ role, text });
  }
  return out;
}

/**
 * The answer in a response body (JSON, or a stream assembled into one message), or null.
 * @param {string} body
 * @returns {{ text: string, finish: string } | null}
 */
export function answer(body) {
  /** @type {unknown} */
  let j;
  try {
    j = JSON.parse(body);
  } catch {
    return null;
  }
  if (!isObject(j)) return null;
  if (Array.isArray(j.choices)) {
    const c = j.choices[0];
    if (!isObject(c)) return { text: '', finish: '' };
    const m = isObject(c.message) ? c.message : {};
    const text = [textOf(m.content), typeof m.refusal === 'string' ? `[refusal] ${m.refusal}` : '', ...toolCalls(m.tool_calls)].filter((t) => t !== '').join('\n');
    return { text, finish: typeof c.finish_reason === 'string' ? c.finish_reason : '' };
  }
  if (Array.isArray(j.content)) return { text: textOf(j.content), finish: typeof j.stop_reason === 'string' ? j.stop_reason : '' };
  if (isObject(j.error)) return { text: `[error] ${String(j.error.message ?? JSON.stringify(j.error))}`, finish: 'error' };
  return null;
}

/**
 * JSON pretty-printed when it parses, else the text as stored.
 * @param {string} body
 */
export function pretty(body) {
  try {
    return JSON.stringify(JSON.parse(body), null, 2);
  } catch {
    return body;
  }
}
