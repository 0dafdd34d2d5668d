import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AnthropicStreamToOpenAI, OpenAIStreamToAnthropic, TranslationError } from '../src/index.js';
import type { SseEvent } from '../src/index.js';
import { accumulateAnthropic, accumulateOpenAI, parseSseText, runStream, toSseText } from './helpers.js';
import type { InputEvent } from './helpers.js';

// ---------------------------------------------------------------- builders

function ev(data: unknown, event: string | null = null): SseEvent {
  return { event, data: typeof data === 'string' ? data : JSON.stringify(data) };
}

/** Anthropic event with `event:` = type. */
function aev(data: { type: string } & Record<string, unknown>): SseEvent {
  return ev(data, data.type);
}

function messageStart(usage: Record<string, unknown> = { input_tokens: 10, output_tokens: 1 }): SseEvent {
  return aev({ type: 'message_start', message: { id: 'msg_s', type: 'message', role: 'assistant', content: [], model: 'claude', stop_reason: null, stop_sequence: null, usage } });
}

function splitEvery(s: string, n: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < s.length; i += n) out.push(s.slice(i, i + n));
  return out;
}

/** A full Anthropic stream: text blocks and tool blocks, tool input split in `pieceLen`-char pieces. */
function anthropicStream(blocks: Array<{ text: string } | { id: string; name: string; input: unknown }>, pieceLen: number, stop = 'end_turn'): InputEvent[] {
  const out: InputEvent[] = [{ event: 'message_start', data: JSON.parse(messageStart().data) as unknown }];
  blocks.forEach((b, index) => {
    if ('text' in b) {
      out.push({ event: 'content_block_start', data: { type: 'content_block_start', index, content_block: { type: 'text', text: '' } } });
      for (const t of splitEvery(b.text, pieceLen)) out.push({ event: 'content_block_delta', data: { type: 'content_block_delta', index, delta: { type: 'text_delta', text: t } } });
    } else {
      out.push({ event: 'content_block_start', data: { type: 'content_block_start', index, content_block: { type: 'tool_use', id: b.id, name: b.name, input: {} } } });
      out.push({ event: 'content_block_delta', data: { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: '' } } });
      for (const p of splitEvery(JSON.stringify(b.input), pieceLen)) {
        out.push({ event: 'content_block_delta', data: { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: p } } });
      }
    }
    out.push({ event: 'content_block_stop', data: { type: 'content_block_stop', index } });
  });
  out.push({ event: 'message_delta', data: { type: 'message_delta', delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: 42 } } });
  out.push({ event: 'message_stop', data: { type: 'message_stop' } });
  return out;
}

function chunk(delta: Record<string, unknown>, finish: string | null = null, extra: Record<string, unknown> = {}): SseEvent {
  return ev({ id: 'chatcmpl-s', object: 'chat.completion.chunk', created: 1, model: 'gpt', choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], ...extra });
}

function usageChunk(prompt: number, completion: number, cached = 0): SseEvent {
  return ev({
    id: 'chatcmpl-s',
    object: 'chat.completion.chunk',
    created: 1,
    model: 'gpt',
    choices: [],
    usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion, prompt_tokens_details: { cached_tokens: cached } },
  });
}

/** A full OpenAI stream: optional text, then tool calls with arguments split in `pieceLen`-char pieces. */
function openaiStream(text: string, tools: Array<{ id: string; name: string; input: unknown }>, pieceLen: number): InputEvent[] {
  const data = (e: SseEvent): unknown => JSON.parse(e.data) as unknown;
  const out: InputEvent[] = [{ data: data(chunk({ role: 'assistant', content: '' })) }];
  for (const t of splitEvery(text, pieceLen)) out.push({ data: data(chunk({ content: t })) });
  tools.forEach((tc, index) => {
    out.push({ data: data(chunk({ tool_calls: [{ index, id: tc.id, type: 'function', function: { name: tc.name, arguments: '' } }] })) });
    for (const p of splitEvery(JSON.stringify(tc.input), pieceLen)) out.push({ data: data(chunk({ tool_calls: [{ index, function: { arguments: p } }] })) });
  });
  out.push({ data: data(chunk({}, tools.length > 0 ? 'tool_calls' : 'stop')) });
  out.push({ data: data(usageChunk(100, 20, 64)) });
  out.push({ data: '[DONE]' });
  return out;
}

const TOOL_INPUTS = [
  { id: 'toolu_a', name: 'search', input: { query: 'café "quoted" \\ back', limit: 5, filters: { lang: ['fr', 'zh'], text: '你好 🙂' } } },
  { id: 'toolu_b', name: 'noop', input: {} },
  { id: 'toolu_c', name: 'calc', input: { expr: '1+2', nested: [[1], [2, [3, { deep: true }]]], n: null } },
];

function throwsStreamError(fn: () => unknown): void {
  assert.throws(fn, (e: unknown) => e instanceof TranslationError && e.code === 'invalid_stream_event');
}

// ---------------------------------------------------------------- Anthropic -> OpenAI

describe('AnthropicStreamToOpenAI', () => {
  const opts = { responseModel: 'gpt-4o', created: 1, includeUsage: true };

  test('multi-tool stream with arguments split into 1..7-char pieces reassembles to the original inputs', () => {
    for (const pieceLen of [1, 2, 3, 7]) {
      const input = anthropicStream([{ text: 'Looking 🙂 ' }, TOOL_INPUTS[0]!, { text: 'and' }, TOOL_INPUTS[1]!, TOOL_INPUTS[2]!], pieceLen, 'tool_use');
      const { output } = runStream(new AnthropicStreamToOpenAI(opts), toSseText(input), 5);
      const acc = accumulateOpenAI(parseSseText(output));
      assert.equal(acc.role, 'assistant');
      assert.equal(acc.content, 'Looking 🙂 and');
      assert.deepEqual(
        acc.toolCalls.map((t) => ({ id: t.id, name: t.name, input: JSON.parse(t.arguments) as unknown })),
        TOOL_INPUTS,
        `piece length ${pieceLen}`,
      );
      assert.equal(acc.finishReason, 'tool_calls');
      assert.ok(acc.done);
    }
  });

  test('include_usage off: no usage field anywhere, no usage chunk', () => {
    const input = anthropicStream([{ text: 'hi' }], 1);
    const { output } = runStream(new AnthropicStreamToOpenAI({ ...opts, includeUsage: false }), toSseText(input));
    const events = parseSseText(output);
    for (const e of events) if (typeof e.data === 'object') assert.equal('usage' in (e.data as object), false);
    assert.equal(events.at(-1)!.data, '[DONE]');
    assert.equal((events.at(-2)!.data as { choices: Array<{ finish_reason: string }> }).choices[0]!.finish_reason, 'stop');
  });

  test('usage getter and finish reason while streaming (cancelled-stream capture), cache tokens included', () => {
    const t = new AnthropicStreamToOpenAI(opts);
    assert.equal(t.usage, null);
    assert.equal(t.finishReason, null);
    t.push(messageStart({ input_tokens: 7, cache_read_input_tokens: 100, cache_creation_input_tokens: 50, output_tokens: 1 }));
    assert.deepEqual(t.usage, { prompt_tokens: 157, completion_tokens: 1, total_tokens: 158, prompt_tokens_details: { cached_tokens: 100 } });
    t.push(aev({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }));
    t.push(aev({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'x' } }));
    const fin = t.push(aev({ type: 'message_delta', delta: { stop_reason: 'max_tokens', stop_sequence: null }, usage: { output_tokens: 30, input_tokens: 8 } }));
    assert.match(fin, /"finish_reason":"length"/);
    assert.equal(t.finishReason, 'length');
    assert.deepEqual(t.usage, { prompt_tokens: 158, completion_tokens: 30, total_tokens: 188, prompt_tokens_details: { cached_tokens: 100 } });
    const stop = parseSseText(t.push(aev({ type: 'message_stop' })));
    assert.deepEqual(stop.map((e) => (typeof e.data === 'string' ? e.data : (e.data as { usage: unknown }).usage)), [
      { prompt_tokens: 158, completion_tokens: 30, total_tokens: 188, prompt_tokens_details: { cached_tokens: 100 } },
      '[DONE]',
    ]);
    assert.equal(t.done, true);
    assert.equal(t.end(), '');
  });

  test('error event: OpenAI error in the stream, then nothing more (no [DONE])', () => {
    const t = new AnthropicStreamToOpenAI(opts);
    t.push(messageStart());
    const out = t.push(aev({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded (key sk-ant-api03-abcdefghijklmnop)' } }));
    assert.deepEqual(parseSseText(out), [
      { event: null, data: { error: { message: 'Overloaded (key [redacted])', type: 'server_error', param: null, code: 'overloaded_error' } } },
    ]);
    assert.equal(t.push(aev({ type: 'message_stop' })), '');
    assert.equal(t.end(), '');
  });

  test('end() before message_delta reports a cut stream; end() after message_delta completes it', () => {
    const cut = new AnthropicStreamToOpenAI(opts);
    cut.push(messageStart());
    const out = parseSseText(cut.end());
    assert.equal(out.length, 1);
    assert.equal((out[0]!.data as { error: { type: string } }).error.type, 'server_error');

    const almost = new AnthropicStreamToOpenAI({ ...opts, includeUsage: false });
    almost.push(messageStart());
    almost.push(aev({ type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 3 } }));
    assert.equal(almost.end(), 'data: [DONE]\n\n');
  });

  test('message_stop without message_delta still sends a finish_reason', () => {
    const t = new AnthropicStreamToOpenAI({ ...opts, includeUsage: false });
    t.push(messageStart());
    const out = parseSseText(t.push(aev({ type: 'message_stop' })));
    assert.equal((out[0]!.data as { choices: Array<{ finish_reason: string }> }).choices[0]!.finish_reason, 'stop');
    assert.equal(out[1]!.data, '[DONE]');
  });

  test('ping, thinking, signature and unknown events produce nothing', () => {
    const t = new AnthropicStreamToOpenAI(opts);
    t.push(messageStart());
    assert.equal(t.push(aev({ type: 'ping' })), '');
    assert.equal(t.push(aev({ type: 'content_block_start', index: 0, content_block: { type: 'thinking', thinking: '', signature: '' } })), '');
    assert.equal(t.push(aev({ type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 'hmm' } })), '');
    assert.equal(t.push(aev({ type: 'content_block_delta', index: 0, delta: { type: 'signature_delta', signature: 'sig' } })), '');
    assert.equal(t.push(aev({ type: 'content_block_stop', index: 0 })), '');
    assert.equal(t.push(aev({ type: 'brand_new_event' })), '');
  });

  test('type is read from data when the event: field is missing', () => {
    const t = new AnthropicStreamToOpenAI(opts);
    assert.match(t.push(ev(JSON.parse(messageStart().data) as unknown)), /"role":"assistant"/);
  });

  test('malformed input raises invalid_stream_event', () => {
    const t = new AnthropicStreamToOpenAI(opts);
    throwsStreamError(() => t.push(ev('{not json', 'message_start')));
    throwsStreamError(() => t.push(ev('[1,2]', 'message_start')));
    const u = new AnthropicStreamToOpenAI(opts);
    u.push(messageStart());
    u.push(aev({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }));
    throwsStreamError(() => u.push(aev({ type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: '{' } })));
  });
});

// ---------------------------------------------------------------- OpenAI -> Anthropic

describe('OpenAIStreamToAnthropic', () => {
  const opts = { responseModel: 'claude-sonnet-4-5' };

  test('multi-tool stream with arguments split into 1..7-char pieces reassembles, grammar valid', () => {
    for (const pieceLen of [1, 2, 3, 7]) {
      const { output } = runStream(new OpenAIStreamToAnthropic(opts), toSseText(openaiStream('Sure, 你好 🙂', TOOL_INPUTS, pieceLen)), 3);
      const acc = accumulateAnthropic(parseSseText(output));
      assert.equal(acc.blocks[0]!.type, 'text');
      assert.equal(acc.blocks[0]!.text, 'Sure, 你好 🙂');
      assert.deepEqual(
        acc.blocks.slice(1).map((b) => ({ id: b.id, name: b.name, input: JSON.parse(b.json ?? '') as unknown })),
        TOOL_INPUTS,
        `piece length ${pieceLen}`,
      );
      assert.equal(acc.stopReason, 'tool_use');
      assert.deepEqual(acc.deltaUsage, { output_tokens: 20, input_tokens: 36, cache_read_input_tokens: 64 });
      assert.equal(acc.message!.model, 'claude-sonnet-4-5');
      assert.ok(acc.stopped);
    }
  });

  test('held back: finish_reason closes the block; message_delta waits for the usage chunk', () => {
    const t = new OpenAIStreamToAnthropic(opts);
    const first = parseSseText(t.push(chunk({ role: 'assistant', content: 'Hi' })));
    assert.deepEqual(first.map((e) => e.event), ['message_start', 'content_block_start', 'content_block_delta']);
    const fin = parseSseText(t.push(chunk({}, 'length')));
    assert.deepEqual(fin, [{ event: 'content_block_stop', data: { type: 'content_block_stop', index: 0 } }]);
    assert.equal(t.stopReason, 'max_tokens');
    const done = parseSseText(t.push(usageChunk(50, 8, 10)));
    assert.deepEqual(done, [
      { event: 'message_delta', data: { type: 'message_delta', delta: { stop_reason: 'max_tokens', stop_sequence: null }, usage: { output_tokens: 8, input_tokens: 40, cache_read_input_tokens: 10 } } },
      { event: 'message_stop', data: { type: 'message_stop' } },
    ]);
    assert.equal(t.push(ev('[DONE]')), '');
    assert.equal(t.end(), '');
    assert.deepEqual(t.usage, { input_tokens: 40, output_tokens: 8, cache_creation_input_tokens: 0, cache_read_input_tokens: 10 });
  });

  test('usage on the finish chunk itself completes immediately', () => {
    const t = new OpenAIStreamToAnthropic(opts);
    t.push(chunk({ content: 'x' }));
    const out = parseSseText(t.push(chunk({}, 'stop', { usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } })));
    assert.deepEqual(out.map((e) => e.event), ['content_block_stop', 'message_delta', 'message_stop']);
    assert.equal(t.done, true);
  });

  test('[DONE] without usage completes; end() after finish without [DONE] completes; end() without finish is an error', () => {
    const a = new OpenAIStreamToAnthropic(opts);
    a.push(chunk({ content: 'x' }));
    a.push(chunk({}, 'stop'));
    assert.deepEqual(parseSseText(a.push(ev('[DONE]'))).map((e) => e.event), ['message_delta', 'message_stop']);
    assert.equal(a.usage, null);

    const b = new OpenAIStreamToAnthropic(opts);
    b.push(chunk({ content: 'x' }));
    b.push(chunk({}, 'stop'));
    assert.deepEqual(parseSseText(b.end()).map((e) => e.event), ['message_delta', 'message_stop']);

    const c = new OpenAIStreamToAnthropic(opts);
    c.push(chunk({ content: 'x' }));
    const cut = parseSseText(c.end());
    assert.deepEqual(cut, [{ event: 'error', data: { type: 'error', error: { type: 'api_error', message: 'upstream stream ended before the message was complete' } } }]);
    assert.equal(c.done, true);
  });

  test('error chunk -> Anthropic error event, secrets scrubbed, then nothing more', () => {
    const t = new OpenAIStreamToAnthropic(opts);
    t.push(chunk({ content: 'x' }));
    const out = parseSseText(t.push(ev({ error: { message: 'Rate limit for key sk-proj-AbCdEfGhIjKlMnOp', type: 'rate_limit_error', code: 'rate_limit_exceeded', param: null } })));
    assert.deepEqual(out, [{ event: 'error', data: { type: 'error', error: { type: 'rate_limit_error', message: 'Rate limit for key [redacted]' } } }]);
    assert.equal(t.push(chunk({ content: 'more' })), '');
    assert.equal(t.push(ev('[DONE]')), '');
    assert.equal(t.end(), '');
  });

  test('text after a tool call opens a new text block', () => {
    const t = new OpenAIStreamToAnthropic(opts);
    let out = t.push(chunk({ tool_calls: [{ index: 0, id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] }));
    out += t.push(chunk({ content: 'after' }));
    out += t.push(chunk({}, 'tool_calls'));
    out += t.push(ev('[DONE]'));
    const acc = accumulateAnthropic(parseSseText(out));
    assert.deepEqual(acc.blocks, [
      { type: 'tool_use', id: 'c1', name: 'f', json: '{}' },
      { type: 'text', text: 'after' },
    ]);
  });

  test("'stop' after tool calls -> tool_use; refusal deltas -> text and stop_reason refusal", () => {
    const a = new OpenAIStreamToAnthropic(opts);
    let out = a.push(chunk({ tool_calls: [{ index: 0, id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] }));
    out += a.push(chunk({}, 'stop')) + a.push(ev('[DONE]'));
    assert.equal(accumulateAnthropic(parseSseText(out)).stopReason, 'tool_use');

    const b = new OpenAIStreamToAnthropic(opts);
    out = b.push(chunk({ refusal: "I can't" })) + b.push(chunk({ refusal: ' help.' })) + b.push(chunk({}, 'stop')) + b.push(ev('[DONE]'));
    const acc = accumulateAnthropic(parseSseText(out));
    assert.deepEqual(acc.blocks, [{ type: 'text', text: "I can't help." }]);
    assert.equal(acc.stopReason, 'refusal');
  });

  test('held back (case 2): a tool call whose first delta lacks the name waits for it', () => {
    const t = new OpenAIStreamToAnthropic(opts);
    t.push(chunk({ role: 'assistant' }));
    assert.equal(t.push(chunk({ tool_calls: [{ index: 0, id: 'c1', function: { arguments: '{"a"' } }] })), '');
    const out = parseSseText(t.push(chunk({ tool_calls: [{ index: 0, function: { name: 'late', arguments: ':1}' } }] })));
    assert.deepEqual(out, [
      { event: 'content_block_start', data: { type: 'content_block_start', index: 0, content_block: { type: 'tool_use', id: 'c1', name: 'late', input: {} } } },
      { event: 'content_block_delta', data: { type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: '{"a"' } } },
      { event: 'content_block_delta', data: { type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: ':1}' } } },
    ]);
  });

  test('tool deltas without index (distinct ids) become separate blocks', () => {
    const t = new OpenAIStreamToAnthropic(opts);
    let out = t.push(chunk({ tool_calls: [{ id: 'g1', type: 'function', function: { name: 'f', arguments: '{"x":1}' } }] }));
    out += t.push(chunk({ tool_calls: [{ id: 'g2', type: 'function', function: { name: 'g', arguments: '{"y":2}' } }] }));
    out += t.push(chunk({}, 'tool_calls')) + t.push(ev('[DONE]'));
    const acc = accumulateAnthropic(parseSseText(out));
    assert.deepEqual(acc.blocks, [
      { type: 'tool_use', id: 'g1', name: 'f', json: '{"x":1}' },
      { type: 'tool_use', id: 'g2', name: 'g', json: '{"y":2}' },
    ]);
  });

  test('interleaved tool-call arguments cannot be expressed and raise invalid_stream_event', () => {
    const t = new OpenAIStreamToAnthropic(opts);
    t.push(chunk({ tool_calls: [{ index: 0, id: 'a', type: 'function', function: { name: 'f', arguments: '{' } }] }));
    t.push(chunk({ tool_calls: [{ index: 1, id: 'b', type: 'function', function: { name: 'g', arguments: '{' } }] }));
    throwsStreamError(() => t.push(chunk({ tool_calls: [{ index: 0, function: { arguments: '}' } }] })));
  });

  test('malformed chunks raise invalid_stream_event; other choices are ignored', () => {
    throwsStreamError(() => new OpenAIStreamToAnthropic(opts).push(ev('{"choices":')));
    throwsStreamError(() => new OpenAIStreamToAnthropic(opts).push(ev('"text"')));
    const t = new OpenAIStreamToAnthropic(opts);
    const out = t.push(ev({ id: 'x', choices: [{ index: 1, delta: { content: 'other choice' }, finish_reason: null }] }));
    assert.deepEqual(parseSseText(out).map((e) => e.event), ['message_start']);
  });

  test('[DONE] as the very first event yields a complete empty message', () => {
    const t = new OpenAIStreamToAnthropic(opts);
    const acc = accumulateAnthropic(parseSseText(t.push(ev('[DONE]'))));
    assert.deepEqual(acc.blocks, []);
    assert.equal(acc.stopReason, 'end_turn');
    assert.ok(acc.stopped);
  });
});

// ---------------------------------------------------------------- both directions chained

describe('chained streams', () => {
  test('Anthropic -> OpenAI -> Anthropic keeps text, tool inputs, stop reason and usage', () => {
    const input = anthropicStream([{ text: 'Début é ' }, TOOL_INPUTS[0]!, TOOL_INPUTS[2]!], 4, 'tool_use');
    const openaiText = runStream(new AnthropicStreamToOpenAI({ responseModel: 'gpt', created: 1, includeUsage: true }), toSseText(input), 7).output;
    const anthropicText = runStream(new OpenAIStreamToAnthropic({ responseModel: 'claude' }), openaiText, 11).output;
    const acc = accumulateAnthropic(parseSseText(anthropicText));
    assert.equal(acc.blocks[0]!.text, 'Début é ');
    assert.deepEqual(acc.blocks.slice(1).map((b) => JSON.parse(b.json ?? '') as unknown), [TOOL_INPUTS[0]!.input, TOOL_INPUTS[2]!.input]);
    assert.deepEqual(acc.blocks.slice(1).map((b) => b.id), ['toolu_a', 'toolu_c']);
    assert.equal(acc.stopReason, 'tool_use');
    assert.deepEqual(acc.deltaUsage, { output_tokens: 42, input_tokens: 10, cache_read_input_tokens: 0 });
  });

  test('OpenAI -> Anthropic -> OpenAI keeps text, tool calls and finish reason', () => {
    const openaiText = runStream(new OpenAIStreamToAnthropic({ responseModel: 'claude' }), toSseText(openaiStream('héllo', TOOL_INPUTS, 5)), 13).output;
    const back = runStream(new AnthropicStreamToOpenAI({ responseModel: 'gpt', created: 1, includeUsage: true }), openaiText, 17).output;
    const acc = accumulateOpenAI(parseSseText(back));
    assert.equal(acc.content, 'héllo');
    assert.deepEqual(acc.toolCalls.map((t) => ({ id: t.id, name: t.name, input: JSON.parse(t.arguments) as unknown })), TOOL_INPUTS);
    assert.equal(acc.finishReason, 'tool_calls');
    assert.deepEqual(acc.usage, { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120, prompt_tokens_details: { cached_tokens: 64 } });
  });
});
