/**
 * Usage of the shapes issue 16 adds: the OpenAI Responses API (JSON, typed stream events,
 * a long stream whose last event was kept only in part) and embeddings; the first token of
 * a Responses stream; the shared no-usage value.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NO_USAGE, RequestRecord, extractUsage, hasTokenDelta, keepResponseChunk, recordUsage } from '@sightline/capture';

const usage = { input_tokens: 120, input_tokens_details: { cached_tokens: 100 }, output_tokens: 30, output_tokens_details: { reasoning_tokens: 10 }, total_tokens: 150 };

function response(text: string, u: unknown): Record<string, unknown> {
  return {
    id: 'resp_1',
    object: 'response',
    status: 'completed',
    instructions: 'say "model": "fake" and "usage": {"input_tokens": 999}',
    model: 'gpt-4o-mini-2024-07-18',
    output: [{ type: 'message', role: 'assistant', content: [{ type: 'output_text', text }] }],
    tools: [{ type: 'function', name: 'f', parameters: { type: 'object', properties: { model: { type: 'string' } } } }],
    usage: u,
    user: null,
    metadata: {},
  };
}

function event(type: string, fields: Record<string, unknown>, seq: number): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq, ...fields })}\n\n`;
}

test('Responses API JSON: input includes the cached tokens (as chat\'s prompt_tokens), not counted twice; Anthropic is told apart', () => {
  const u = extractUsage([Buffer.from(JSON.stringify(response('hi', usage)))], false);
  assert.deepEqual(u, { responseModel: 'gpt-4o-mini-2024-07-18', inputTokens: 120, outputTokens: 30, cacheReadTokens: 100, cacheWriteTokens: 0, found: true, deltas: 0, anthropic: false });
  // An Anthropic body with the same names but none of the Responses API's detail fields: its input excludes cache reads.
  const a = extractUsage([Buffer.from(JSON.stringify({ model: 'claude-x', usage: { input_tokens: 20, output_tokens: 5, cache_read_input_tokens: 100 } }))], false);
  assert.deepEqual([a.inputTokens, a.cacheReadTokens, a.anthropic], [120, 100, true]);
});

test('Responses API stream: the model from response.created, the usage from response.completed, deltas counted', () => {
  const created = event('response.created', { response: response('', null) }, 0);
  const deltas = ['Hel', 'lo'].map((d, i) => event('response.output_text.delta', { item_id: 'msg_1', output_index: 0, content_index: 0, delta: d }, i + 1));
  const args = event('response.function_call_arguments.delta', { item_id: 'fc_1', output_index: 1, delta: '{"a":1}' }, 3);
  const done = event('response.completed', { response: response('Hello', usage) }, 4);
  const u = extractUsage([created, ...deltas, args, done].map((s) => Buffer.from(s)), true);
  assert.deepEqual([u.responseModel, u.inputTokens, u.outputTokens, u.cacheReadTokens, u.found, u.deltas], ['gpt-4o-mini-2024-07-18', 120, 30, 100, true, 3]);
  // response.incomplete carries the usage the same way.
  const incomplete = extractUsage([Buffer.from(created + event('response.incomplete', { response: { ...response('Hel', usage), status: 'incomplete' } }, 1))], true);
  assert.equal(incomplete.outputTokens, 30);
});

test('a long Responses stream: response.completed repeats the whole output, so its start may not be kept; its usage still is', () => {
  const long = 'x'.repeat(150_000);
  const stream = event('response.created', { response: response('', null) }, 0) + event('response.output_text.delta', { item_id: 'm', output_index: 0, content_index: 0, delta: long }, 1) + event('response.completed', { response: response(long, usage) }, 2);
  const bytes = Buffer.from(stream);
  const r = new RequestRecord();
  r.stream = true;
  for (let i = 0; i < bytes.length; i += 4096) keepResponseChunk(r, bytes.subarray(i, i + 4096));
  assert.ok(r.responseKept < bytes.length, 'the middle was dropped');
  const u = extractUsage(r.responseChunks, true);
  assert.deepEqual([u.responseModel, u.inputTokens, u.outputTokens, u.cacheReadTokens, u.found], ['gpt-4o-mini-2024-07-18', 120, 30, 100, true]);
});

test('embeddings: prompt tokens, no output; a long answer cut in the middle still has its model and usage', () => {
  const body = JSON.stringify({ object: 'list', data: Array.from({ length: 40 }, (_, index) => ({ object: 'embedding', index, embedding: Array.from({ length: 300 }, (_, i) => Math.sin(i + index)) })), model: 'text-embedding-3-small', usage: { prompt_tokens: 77, total_tokens: 77 } });
  const bytes = Buffer.from(body);
  const r = new RequestRecord();
  for (let i = 0; i < bytes.length; i += 8192) keepResponseChunk(r, bytes.subarray(i, i + 8192));
  assert.ok(r.responseKept < bytes.length);
  const u = extractUsage(r.responseChunks, false);
  assert.deepEqual([u.responseModel, u.inputTokens, u.outputTokens, u.found], ['text-embedding-3-small', 77, 0, true]);
});

test('the first token of a Responses stream is an output-text or function-argument delta, not the lifecycle events', () => {
  assert.equal(hasTokenDelta(Buffer.from(event('response.created', { response: response('', null) }, 0))), false);
  assert.equal(hasTokenDelta(Buffer.from(event('response.output_item.added', { output_index: 0, item: { type: 'message', content: [] } }, 1))), false);
  assert.equal(hasTokenDelta(Buffer.from(event('response.output_text.delta', { delta: 'a' }, 2))), true);
  assert.equal(hasTokenDelta(Buffer.from(event('response.function_call_arguments.delta', { delta: '{' }, 2))), true);
});

test('NO_USAGE: a record given it reports no tokens, whatever its answer says', () => {
  const r = new RequestRecord();
  r.responseChunks = [Buffer.from(JSON.stringify(response('stored', usage)))];
  r.usage = NO_USAGE;
  assert.equal(recordUsage(r).inputTokens, 0);
  assert.equal(recordUsage(r).found, false);
  assert.ok(Object.isFrozen(NO_USAGE));
});
