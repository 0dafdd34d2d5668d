/**
 * Content fixtures (issue 11) shared by the span and ingester tests: SSE texts in both
 * dialects, the bad input the issue lists (non-UTF-8, a 10 MiB body cut by the gateway,
 * 5,000 messages, a stream cut half-way, tool arguments that are not JSON), and a stand-in
 * for the personal-data redactor (`@sightline/redact` is injected by the product; unit
 * tests only need something that replaces e-mail addresses and counts them).
 */
import type { WireRecord } from '@sightline/core';
import type { RedactText } from '@sightline/spans';
import { contentOf, servedRecord, withContent, type RecordOptions } from './records.js';

/** OpenAI Chat Completions chunks streaming `deltas`, then `finish`, usage and [DONE] (unless `cut`). */
export function openaiSse(deltas: string[], finish = 'stop'): string {
  const ev = (o: object): string => `data: ${JSON.stringify(o)}\n\n`;
  let s = ev({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o', choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] });
  for (const d of deltas) s += ev({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o', choices: [{ index: 0, delta: { content: d }, finish_reason: null }] });
  s += ev({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o', choices: [{ index: 0, delta: {}, finish_reason: finish }] });
  s += ev({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o', choices: [], usage: { prompt_tokens: 3, completion_tokens: deltas.length, total_tokens: 3 + deltas.length } });
  return s + 'data: [DONE]\n\n';
}

/** Anthropic Messages events for one tool_use block whose input arrives as `jsonParts`. */
export function anthropicToolSse(jsonParts: string[]): string {
  const ev = (type: string, o: object): string => `event: ${type}\ndata: ${JSON.stringify({ type, ...o })}\n\n`;
  let s = ev('message_start', { message: { id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-x', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 5, output_tokens: 1 } } });
  s += ev('content_block_start', { index: 0, content_block: { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: {} } });
  for (const p of jsonParts) s += ev('content_block_delta', { index: 0, delta: { type: 'input_json_delta', partial_json: p } });
  s += ev('content_block_stop', { index: 0 });
  s += ev('message_delta', { delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { output_tokens: 7 } });
  return s + ev('message_stop', {});
}

const EMAIL = /[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}/g;

/** Test stand-in for the personal-data redactor: e-mail addresses → `[EMAIL]`, counted as `email`. */
export const redactEmails: RedactText = (text) => {
  let n = 0;
  const out = text.replace(EMAIL, () => {
    n++;
    return '[EMAIL]';
  });
  const counts: Record<string, number> = {};
  if (n > 0) counts.email = n;
  return { text: out, counts };
};

/** The capture bound the gateway cuts at by default (capture.content_max_bytes). */
export const CONTENT_MAX_BYTES = 256 * 1024;

export interface BadContent {
  name: string;
  record: WireRecord;
  /** What the stored request text must be (the input, lone surrogates as U+FFFD). */
  request: string;
  requestTruncated: boolean;
  responsePartial: boolean;
}

/**
 * One record per kind of bad input the issue lists, each a served request of `o.team`.
 * Every one must be stored, none may throw.
 */
export function badContentRecords(o: RecordOptions = {}): BadContent[] {
  const out: BadContent[] = [];
  const add = (name: string, stream: boolean, dialect: 'openai' | 'anthropic', c: Parameters<typeof contentOf>[0], expect: Partial<BadContent> = {}): void => {
    // The first one also names an end user with a lone surrogate (a JSON `\ud800` escape in the body).
    const r = servedRecord({ ...o, seq: (o.seq ?? 100) + out.length, endUser: out.length === 0 ? 'user \uD800' : o.endUser });
    r.stream = stream;
    r.dialect = dialect;
    if (dialect === 'anthropic') r.route = '/v1/messages';
    out.push({
      name,
      record: withContent(r, contentOf(c)),
      request: expect.request ?? c.request,
      requestTruncated: c.requestTruncated ?? false,
      responsePartial: expect.responsePartial ?? false,
    });
  };
  // Invalid UTF-8 arrives as U+FFFD; a string cut inside a surrogate pair is mended the same way.
  const fffd = '{"model":"gpt-4o","messages":[{"role":"user","content":"caf\uFFFD\uFFFD au lait \uD83D"}]}';
  add('non-UTF-8 bytes', false, 'openai', { request: fffd, response: '{"choices":[{"message":{"role":"assistant","content":"ok \uDE00"},"finish_reason":"stop"}]}' }, {
    request: fffd.replace('\uD83D', '\uFFFD'),
  });
  // A 10 MiB prompt, cut by the gateway at the bound: the stored text is the first 256 KiB.
  const big = ('{"model":"gpt-4o","messages":[{"role":"user","content":"' + 'lorem ipsum '.repeat(30_000)).slice(0, CONTENT_MAX_BYTES);
  add('10 MiB prompt cut at the bound', false, 'openai', { request: big, requestBytes: 10 * 1024 * 1024, requestTruncated: true, response: '{"choices":[{"message":{"role":"assistant","content":"long"},"finish_reason":"stop"}]}' });
  // 5,000 messages.
  const many = JSON.stringify({ model: 'gpt-4o', messages: Array.from({ length: 5000 }, (_, i) => ({ role: i % 2 === 0 ? 'user' : 'assistant', content: `message ${i}` })) });
  add('5,000 messages', false, 'openai', { request: many, response: '{"choices":[{"message":{"role":"assistant","content":"many"},"finish_reason":"stop"}]}' });
  // A stream the client left half-way.
  const sse = openaiSse(['half', ' of', ' an', ' answer', ' never', ' finished']);
  add('stream cut half-way', true, 'openai', { request: '{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"go"}]}', response: sse.slice(0, Math.floor(sse.length / 2)) }, { responsePartial: true });
  // Tool arguments that are not JSON, in the request's history and in the streamed answer.
  const badTools = '{"model":"claude-x","max_tokens":9,"messages":[{"role":"user","content":"weather?"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_0","name":"get_weather","input":"{not json"}]}]}';
  add('tool arguments that are not JSON', true, 'anthropic', { request: badTools, response: anthropicToolSse(['{"city": ', 'Par', 'is']) });
  return out;
}
