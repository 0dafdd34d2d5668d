/**
 * The end-to-end checks of content capture (issue 11) shared by the separate-processes and
 * the embedded setups: requests in both dialects, JSON and streamed, with and without
 * translation, each carrying a unique phrase, sent with the official clients; then each one
 * read back through the query API — the phrase in `content.request`, the answer the client
 * received in `content.response` — and found by `q=`. Also a search of every text column of
 * a ClickHouse database, for the privacy checks.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { ident, sql, table, type Store } from '@sightline/store';
import { waitFor } from './servers.js';

export interface ContentSent {
  name: string;
  traceId: string;
  /** The unique phrase the prompt carried. */
  phrase: string;
  /** The dialect of the client (and so of the stored request and answer). */
  dialect: 'openai' | 'anthropic';
  stream: boolean;
  /** The answer's text as the client received it. */
  answer: string;
}

/** A phrase no other request of the run contains. */
export function uniquePhrase(label: string): string {
  return `${label}-${randomBytes(6).toString('hex')}-phrase`;
}

/**
 * Sends eight requests with `key` (a Sightline key, or anything when authentication is off):
 * OpenAI client to a gpt-* model and Anthropic client to a claude-* model (same dialect), and
 * each client to the other's model (translated), each JSON and streamed.
 */
export async function sendContentMatrix(gatewayUrl: string, key: string, headers: Record<string, string> = {}): Promise<ContentSent[]> {
  const oa = new OpenAI({ apiKey: key, baseURL: `${gatewayUrl}/v1`, maxRetries: 0, defaultHeaders: headers });
  const an = new Anthropic({ apiKey: key, baseURL: gatewayUrl, maxRetries: 0, defaultHeaders: headers });
  const sent: ContentSent[] = [];
  const trace = (h: Headers): string => {
    const id = h.get('x-sightline-trace-id') ?? '';
    assert.match(id, /^[0-9a-f]{32}$/);
    return id;
  };
  for (const [model, label] of [['gpt-4o-mini', 'openai'], ['claude-3-5-haiku-latest', 'openai-to-anthropic']] as const) {
    const phrase = uniquePhrase(`${label}-json`);
    const { data, response } = await oa.chat.completions.create({ model, messages: [{ role: 'user', content: `Remember ${phrase} please` }] }).withResponse();
    sent.push({ name: `${label} json`, traceId: trace(response.headers), phrase, dialect: 'openai', stream: false, answer: data.choices[0]?.message.content ?? '' });
    const sphrase = uniquePhrase(`${label}-stream`);
    const s = await oa.chat.completions.create({ model, messages: [{ role: 'user', content: `Remember ${sphrase} please` }], stream: true }).withResponse();
    let text = '';
    for await (const c of s.data) text += c.choices[0]?.delta.content ?? '';
    sent.push({ name: `${label} stream`, traceId: trace(s.response.headers), phrase: sphrase, dialect: 'openai', stream: true, answer: text });
  }
  for (const [model, label] of [['claude-3-5-haiku-latest', 'anthropic'], ['gpt-4o-mini', 'anthropic-to-openai']] as const) {
    const phrase = uniquePhrase(`${label}-json`);
    const { data, response } = await an.messages.create({ model, max_tokens: 50, messages: [{ role: 'user', content: `Remember ${phrase} please` }] }).withResponse();
    const block = data.content[0];
    sent.push({ name: `${label} json`, traceId: trace(response.headers), phrase, dialect: 'anthropic', stream: false, answer: block?.type === 'text' ? block.text : '' });
    const sphrase = uniquePhrase(`${label}-stream`);
    const s = await an.messages.create({ model, max_tokens: 50, stream: true, messages: [{ role: 'user', content: `Remember ${sphrase} please` }] }).withResponse();
    let text = '';
    for await (const ev of s.data) if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') text += ev.delta.text;
    sent.push({ name: `${label} stream`, traceId: trace(s.response.headers), phrase: sphrase, dialect: 'anthropic', stream: true, answer: text });
  }
  for (const r of sent) assert.ok(r.answer.length > 0, `${r.name}: the client received an answer`);
  return sent;
}

export interface StoredContent {
  request: string;
  response: string;
  request_bytes: number;
  response_bytes: number;
  request_truncated: boolean;
  response_truncated: boolean;
  partial: boolean;
  policy: string;
  redactions: Record<string, number>;
}

export interface RequestWithContent {
  trace_id: string;
  team: string;
  content?: StoredContent | null;
}

/** GET with a bearer token. */
export function reader(queryUrl: string, token: string): (path: string) => Promise<Response> {
  return (path) => fetch(`${queryUrl}${path}`, { headers: { authorization: `Bearer ${token}` } });
}

/** Waits for the request of `traceId` to be in the store; returns its view as `read` sees it. */
export async function capturedRequest(read: (path: string) => Promise<Response>, traceId: string, timeoutMs = 30_000): Promise<RequestWithContent> {
  let view: RequestWithContent | undefined;
  await waitFor(
    `request ${traceId} in the query API`,
    async () => {
      const res = await read(`/v1/requests/${traceId}`);
      if (res.status === 404) return false;
      assert.equal(res.status, 200, await res.clone().text());
      const body = (await res.json()) as { requests: RequestWithContent[] };
      assert.equal(body.requests.length, 1);
      view = body.requests[0];
      return true;
    },
    timeoutMs,
    100,
  );
  return view!;
}

/** The text of an answer body (JSON or an assembled stream) in the client's dialect. */
export function answerText(dialect: 'openai' | 'anthropic', body: string): string {
  const parsed = JSON.parse(body) as { choices?: { message?: { content?: string | null } }[]; content?: { type: string; text?: string }[] };
  if (dialect === 'openai') return parsed.choices?.[0]?.message?.content ?? '';
  return (parsed.content ?? []).filter((b) => b.type === 'text').map((b) => b.text ?? '').join('');
}

/**
 * Checks each sent request through the query API: with `contentToken` (the `content` scope
 * or the admin token) its content holds the phrase and the answer as received; with
 * `readToken` (`read` only) the content is absent; `q=` with the phrase finds it (and
 * only it), and is refused to `readToken`.
 */
export async function checkContent(queryUrl: string, contentToken: string, readToken: string, sent: readonly ContentSent[]): Promise<void> {
  const withContent = reader(queryUrl, contentToken);
  const readOnly = reader(queryUrl, readToken);
  for (const s of sent) {
    const v = await capturedRequest(withContent, s.traceId);
    const c = v.content;
    assert.ok(c !== null && c !== undefined, `${s.name}: content stored`);
    assert.ok(c.request.includes(s.phrase), `${s.name}: the phrase is in content.request: ${c.request.slice(0, 300)}`);
    assert.equal(answerText(s.dialect, c.response), s.answer, `${s.name}: content.response is the answer in the client's dialect (${s.stream ? 'assembled' : 'as received'})`);
    assert.deepEqual([c.request_truncated, c.response_truncated, c.partial], [false, false, false], s.name);
    assert.equal(c.request_bytes, Buffer.byteLength(c.request), `${s.name}: request size`);
    if (!s.stream) assert.equal(c.response_bytes, Buffer.byteLength(c.response), `${s.name}: response size`);
    else assert.ok(c.response_bytes > Buffer.byteLength(s.answer), `${s.name}: the size of the stream as sent`);

    const hidden = await capturedRequest(readOnly, s.traceId);
    assert.ok(!('content' in hidden), `${s.name}: a read-only key does not see content`);

    const found = await withContent(`/v1/requests?q=${encodeURIComponent(s.phrase.toUpperCase())}`);
    assert.equal(found.status, 200, await found.clone().text());
    const items = ((await found.json()) as { data: { trace_id: string }[] }).data;
    assert.deepEqual(items.map((i) => i.trace_id), [s.traceId], `${s.name}: q finds the request, and only it`);
  }
  const refused = await readOnly(`/v1/requests?q=${encodeURIComponent(sent[0]!.phrase)}`);
  assert.equal(refused.status, 403);
  assert.equal(((await refused.json()) as { error: { field: string } }).error.field, 'q');
}

/** Where a needle was found: `table.column` and the number of rows. */
export interface Found {
  needle: string;
  where: string;
  rows: number;
}

/**
 * Searches every String and Array(String) column of every table of `database` (views
 * left out: they read their tables) for each needle, case-insensitively. Returns every
 * place one was found.
 */
export async function searchEveryTable(store: Store, database: string, needles: readonly string[]): Promise<Found[]> {
  const columns = await store.query<{ table: string; name: string; type: string }>(
    sql`SELECT c.table AS table, c.name AS name, c.type AS type FROM system.columns AS c
WHERE c.database = ${database} AND (c.type IN ('String', 'Nullable(String)', 'LowCardinality(String)', 'Array(String)'))
  AND c.table IN (SELECT name FROM system.tables WHERE database = ${database} AND engine NOT LIKE '%View%')
ORDER BY c.table, c.name`,
  );
  assert.ok(columns.length > 20, `${columns.length} text columns found`);
  const out: Found[] = [];
  for (const c of columns) {
    for (const needle of needles) {
      const col = ident(c.name);
      const cond = c.type.startsWith('Array') ? sql`arrayExists(x -> positionCaseInsensitive(x, ${needle}) > 0, ${col})` : sql`positionCaseInsensitive(${col}, ${needle}) > 0`;
      const rows = await store.query<{ n: number | string }>(sql`SELECT count() AS n FROM ${table(database, c.table)} WHERE ${cond}`);
      const n = Number(rows[0]?.n ?? 0);
      if (n > 0) out.push({ needle, where: `${c.table}.${c.name}`, rows: n });
    }
  }
  return out;
}
