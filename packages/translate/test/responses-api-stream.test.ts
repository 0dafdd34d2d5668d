/** Anthropic Messages SSE -> OpenAI Responses SSE (AnthropicStreamToResponses). */

import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, test } from 'node:test';
import OpenAI from 'openai';
import { AnthropicStreamToResponses, SseParser, TranslationError, anthropicResponseToResponses } from '../src/index.js';
import type { AnthropicMessage, AnthropicStreamToResponsesOptions, SseEvent } from '../src/index.js';
import { accumulateResponses, loadGolden, parseSseText, runStream, toSseText } from './helpers.js';
import type { InputEvent } from './helpers.js';

const OPTS: AnthropicStreamToResponsesOptions = {
  responseModel: 'gpt-4o',
  createdAt: 1760000000,
  request: { model: 'gpt-4o', input: 'hi', instructions: 'Be brief.', tools: [{ type: 'function', name: 'search' }], temperature: 0.3 },
};

// ---------------------------------------------------------------- builders

type Block =
  | { text: string }
  | { thinking: string }
  | { redacted: string }
  | { id: string; name: string; input: Record<string, unknown> };

function splitEvery(s: string, n: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < s.length; i += n) out.push(s.slice(i, i + n));
  return out;
}

const USAGE = { input_tokens: 21, cache_read_input_tokens: 300, cache_creation_input_tokens: 40, output_tokens: 1 };

/** The Anthropic stream of a message made of `blocks`, its text split in `pieceLen`-char pieces, and the same message as JSON. */
function anthropicStream(blocks: Block[], pieceLen: number, stop = 'end_turn', id = 'msg_S1'): { events: InputEvent[]; message: AnthropicMessage } {
  const e = (data: { type: string } & Record<string, unknown>): InputEvent => ({ event: data.type, data });
  const events: InputEvent[] = [
    e({ type: 'message_start', message: { id, type: 'message', role: 'assistant', content: [], model: 'claude', stop_reason: null, stop_sequence: null, usage: USAGE } }),
    e({ type: 'ping' }),
  ];
  const content: unknown[] = [];
  blocks.forEach((b, index) => {
    const delta = (d: Record<string, unknown>): InputEvent => e({ type: 'content_block_delta', index, delta: d });
    if ('text' in b) {
      events.push(e({ type: 'content_block_start', index, content_block: { type: 'text', text: '' } }));
      for (const t of splitEvery(b.text, pieceLen)) events.push(delta({ type: 'text_delta', text: t }));
      content.push({ type: 'text', text: b.text });
    } else if ('thinking' in b) {
      events.push(e({ type: 'content_block_start', index, content_block: { type: 'thinking', thinking: '', signature: '' } }));
      for (const t of splitEvery(b.thinking, pieceLen)) events.push(delta({ type: 'thinking_delta', thinking: t }));
      events.push(delta({ type: 'signature_delta', signature: 'sig' }));
      content.push({ type: 'thinking', thinking: b.thinking, signature: 'sig' });
    } else if ('redacted' in b) {
      events.push(e({ type: 'content_block_start', index, content_block: { type: 'redacted_thinking', data: b.redacted } }));
      content.push({ type: 'redacted_thinking', data: b.redacted });
    } else {
      events.push(e({ type: 'content_block_start', index, content_block: { type: 'tool_use', id: b.id, name: b.name, input: {} } }));
      events.push(delta({ type: 'input_json_delta', partial_json: '' }));
      const json = JSON.stringify(b.input);
      if (json !== '{}') for (const p of splitEvery(json, pieceLen)) events.push(delta({ type: 'input_json_delta', partial_json: p }));
      content.push({ type: 'tool_use', id: b.id, name: b.name, input: b.input });
    }
    events.push(e({ type: 'content_block_stop', index }));
  });
  events.push(e({ type: 'message_delta', delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: 42 } }));
  events.push(e({ type: 'message_stop' }));
  const message = { id, type: 'message', role: 'assistant', model: 'claude', content, stop_reason: stop, stop_sequence: null, usage: { ...USAGE, output_tokens: 42 } };
  return { events, message: message as unknown as AnthropicMessage };
}

function ev(data: { type: string } & Record<string, unknown>, event: string | null = data.type): SseEvent {
  return { event, data: JSON.stringify(data) };
}

const BLOCKS: Block[] = [
  { thinking: 'Plan: search, then answer. 🤔' },
  { redacted: 'opaque' },
  { text: 'Je cherche « café » 🙂 你好. ' },
  { id: 'toolu_a', name: 'search', input: { query: 'café "quoted" \\ back', filters: { lang: ['fr', 'zh'], text: '你好 🙂' } } },
  { id: 'toolu_b', name: 'noop', input: {} },
  { text: 'Done.' },
];

/** Runs SSE bytes cut at the given offsets through SseParser and the translator. */
function runCut(bytes: Buffer, cuts: readonly number[], options = OPTS): string {
  const parser = new SseParser();
  const t = new AnthropicStreamToResponses(options);
  let out = '';
  let from = 0;
  for (const at of [...cuts, bytes.length]) {
    for (const e of parser.push(bytes.subarray(from, at))) out += t.push(e);
    from = at;
  }
  for (const e of parser.end()) out += t.push(e);
  return out + t.end();
}

function throwsStreamError(fn: () => unknown): void {
  assert.throws(fn, (e: unknown) => e instanceof TranslationError && e.code === 'invalid_stream_event');
}

// ---------------------------------------------------------------- tests

describe('AnthropicStreamToResponses', () => {
  test('the final response equals the JSON translation of the same message, for text split into 1..7-char pieces', () => {
    for (const pieceLen of [1, 2, 3, 7]) {
      const { events, message } = anthropicStream(BLOCKS, pieceLen, 'tool_use');
      const { output } = runStream(new AnthropicStreamToResponses(OPTS), toSseText(events), 5);
      const acc = accumulateResponses(parseSseText(output));
      assert.equal(acc.terminal, 'response.completed');
      assert.deepEqual(acc.final, anthropicResponseToResponses(message, OPTS), `piece length ${pieceLen}`);
      assert.deepEqual(
        acc.items.map((i) => i.type),
        ['reasoning', 'message', 'function_call', 'function_call', 'message'],
        'the redacted thinking block takes no output index',
      );
    }
  });

  test('the SSE cut at every byte offset gives the same events (golden streams)', () => {
    for (const name of ['responses-stream-text', 'responses-stream-tools']) {
      const g = loadGolden(name);
      const options = g.options as unknown as AnthropicStreamToResponsesOptions;
      const bytes = Buffer.from(toSseText(g.input as InputEvent[]), 'utf8');
      const whole = runCut(bytes, [], options);
      assert.deepEqual(parseSseText(whole), g.expected);
      for (let k = 0; k <= bytes.length; k++) assert.equal(runCut(bytes, [k], options), whole, `${name}: cut at byte ${k}`);
    }
  });

  test('the SSE cut at random places, many times (seeded), gives the same events', () => {
    const { events } = anthropicStream(BLOCKS, 3, 'max_tokens');
    const bytes = Buffer.from(toSseText(events), 'utf8');
    const whole = runCut(bytes, []);
    assert.equal(accumulateResponses(parseSseText(whole)).terminal, 'response.incomplete');
    let seed = 16;
    const rnd = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    for (let round = 0; round < 300; round++) {
      const cuts = new Set<number>();
      for (let k = 1 + rnd(12); k > 0; k--) cuts.add(1 + rnd(bytes.length - 1));
      const points = [...cuts].sort((a, b) => a - b);
      assert.equal(runCut(bytes, points), whole, `round ${round}, cuts ${points.join(',')}`);
    }
  });

  test('held back: a block closes with the next event; max_tokens makes the last item and the response incomplete', () => {
    const t = new AnthropicStreamToResponses(OPTS);
    const { events, message } = anthropicStream([{ text: 'One.' }, { text: 'Two, cut' }], 100, 'max_tokens');
    const statuses: Array<string | null> = [];
    const outs = events.map((e) => {
      const out = t.push({ event: e.event ?? null, data: JSON.stringify(e.data) });
      statuses.push(t.status);
      return out;
    });
    const types = (s: string): Array<string | null> => parseSseText(s).map((e) => e.event);
    const at = (type: string, from = 0): number => events.findIndex((e, i) => i >= from && (e.data as { type: string }).type === type);
    const firstStop = at('content_block_stop');
    assert.equal(outs[firstStop], '', 'content_block_stop writes nothing by itself');
    assert.deepEqual(types(outs[firstStop + 1]!), [
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.output_item.added',
      'response.content_part.added',
    ]);
    assert.equal(statuses[at('message_delta') - 1], null, 'no status before message_delta');
    const delta = parseSseText(outs[at('message_delta')]!);
    assert.deepEqual(delta.map((e) => e.event), ['response.output_text.done', 'response.content_part.done', 'response.output_item.done']);
    assert.equal((delta[2]!.data as { item: { status: string } }).item.status, 'incomplete');
    assert.equal(statuses[at('message_delta')], 'incomplete');
    const last = parseSseText(outs[at('message_stop')]!);
    assert.deepEqual(last.map((e) => e.event), ['response.incomplete']);
    const final = (last[0]!.data as { response: unknown }).response;
    assert.deepEqual(final, anthropicResponseToResponses(message, OPTS));
    assert.deepEqual((final as { incomplete_details: unknown }).incomplete_details, { reason: 'max_output_tokens' });
    assert.equal(t.done, true);
    assert.equal(t.end(), '');
  });

  test('refusal -> response.incomplete with content_filter', () => {
    const { events } = anthropicStream([{ text: 'I will not' }], 4, 'refusal');
    const acc = accumulateResponses(parseSseText(runStream(new AnthropicStreamToResponses(OPTS), toSseText(events)).output));
    assert.equal(acc.terminal, 'response.incomplete');
    assert.deepEqual(acc.final?.incomplete_details, { reason: 'content_filter' });
  });

  test('usage, status and response id while streaming (cancelled-stream capture)', () => {
    const t = new AnthropicStreamToResponses(OPTS);
    assert.deepEqual([t.usage, t.status], [null, null]);
    t.push(ev({ type: 'message_start', message: { id: 'msg_U', usage: { input_tokens: 7, cache_read_input_tokens: 100, cache_creation_input_tokens: 50, output_tokens: 1 } } }));
    assert.equal(t.responseId, 'resp_U');
    assert.deepEqual(t.usage, {
      input_tokens: 157,
      input_tokens_details: { cached_tokens: 100, cache_write_tokens: 50 },
      output_tokens: 1,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 158,
    });
    t.push(ev({ type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 30 } }));
    assert.equal(t.usage?.output_tokens, 30);
    assert.equal(t.status, 'completed');
    const done = parseSseText(t.push(ev({ type: 'message_stop' })));
    assert.equal((done[0]!.data as { response: { usage: { total_tokens: number } } }).response.usage.total_tokens, 187);
  });

  test('an upstream error event -> an `error` event with the secret scrubbed, then nothing more', () => {
    const t = new AnthropicStreamToResponses(OPTS);
    t.push(ev({ type: 'message_start', message: { id: 'msg_E', usage: USAGE } }));
    t.push(ev({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }));
    const out = parseSseText(t.push(ev({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded (key sk-ant-api03-abcdefghijklmnop)' } })));
    assert.deepEqual(out, [{ event: 'error', data: { type: 'error', sequence_number: 4, code: 'overloaded_error', message: 'Overloaded (key [redacted])', param: null } }]);
    assert.equal(t.done, true);
    assert.equal(t.push(ev({ type: 'message_stop' })), '');
    assert.equal(t.end(), '');
    const rate = parseSseText(new AnthropicStreamToResponses(OPTS).push(ev({ type: 'error', error: { type: 'rate_limit_error', message: 'slow down' } })));
    assert.deepEqual(rate.map((e) => e.event), ['response.created', 'response.in_progress', 'error']);
    assert.equal((rate[2]!.data as { code: string }).code, 'rate_limit_error');
  });

  test('end() before message_delta reports a cut stream; after it, the response completes', () => {
    const cut = new AnthropicStreamToResponses(OPTS);
    cut.push(ev({ type: 'message_start', message: { id: 'msg_C', usage: USAGE } }));
    cut.push(ev({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }));
    cut.push(ev({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'par' } }));
    const out = parseSseText(cut.end());
    assert.deepEqual(out, [
      { event: 'error', data: { type: 'error', sequence_number: 5, code: 'server_error', message: 'upstream stream ended before the response was complete', param: null } },
    ]);
    assert.equal(cut.done, true);

    const almost = new AnthropicStreamToResponses(OPTS);
    almost.push(ev({ type: 'message_start', message: { id: 'msg_C', usage: USAGE } }));
    almost.push(ev({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }));
    almost.push(ev({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'all' } }));
    almost.push(ev({ type: 'content_block_stop', index: 0 }));
    almost.push(ev({ type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 1 } }));
    assert.deepEqual(parseSseText(almost.end()).map((e) => e.event), ['response.completed']);
  });

  test('message_stop without message_delta (or a block left open) still completes the response', () => {
    const t = new AnthropicStreamToResponses(OPTS);
    let out = t.push(ev({ type: 'message_start', message: { id: 'msg_M', usage: USAGE } }));
    out += t.push(ev({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: 'pre' } }));
    out += t.push(ev({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'fix' } }));
    out += t.push(ev({ type: 'message_stop' }));
    const acc = accumulateResponses(parseSseText(out));
    assert.equal(acc.terminal, 'response.completed');
    assert.deepEqual(acc.items.map((i) => (i.content as Array<{ text: string }>)[0]!.text), ['prefix']);
  });

  test('ping, signature and citation deltas, skipped blocks and unknown events produce nothing', () => {
    const t = new AnthropicStreamToResponses(OPTS);
    t.push(ev({ type: 'message_start', message: { id: 'msg_P', usage: USAGE } }));
    assert.equal(t.push(ev({ type: 'ping' })), '');
    assert.equal(t.push(ev({ type: 'content_block_start', index: 0, content_block: { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: {} } })), '');
    assert.equal(t.push(ev({ type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: '' } })), '');
    assert.equal(t.push(ev({ type: 'content_block_stop', index: 0 })), '');
    assert.equal(t.push(ev({ type: 'content_block_delta', index: 0, delta: { type: 'citations_delta', citation: {} } })), '');
    assert.equal(t.push(ev({ type: 'brand_new_event' })), '');
    // The next real block takes output index 0.
    const added = parseSseText(t.push(ev({ type: 'content_block_start', index: 1, content_block: { type: 'text', text: '' } })));
    assert.equal((added[0]!.data as { output_index: number }).output_index, 0);
  });

  test('the type is read from data when the event: field is missing; a stream without message_start still opens', () => {
    const a = new AnthropicStreamToResponses(OPTS);
    assert.deepEqual(parseSseText(a.push(ev({ type: 'message_start', message: { id: 'msg_N' } }, null))).map((e) => e.event), ['response.created', 'response.in_progress']);
    const b = new AnthropicStreamToResponses(OPTS);
    const out = parseSseText(b.push(ev({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } })));
    assert.deepEqual(out.map((e) => e.event), ['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added']);
  });

  test('malformed input raises invalid_stream_event', () => {
    const t = new AnthropicStreamToResponses(OPTS);
    throwsStreamError(() => t.push({ event: 'message_start', data: '{not json' }));
    throwsStreamError(() => t.push({ event: 'message_start', data: '[1,2]' }));
    const u = new AnthropicStreamToResponses(OPTS);
    u.push(ev({ type: 'message_start', message: { id: 'msg_X' } }));
    u.push(ev({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }));
    throwsStreamError(() => u.push(ev({ type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: '{' } })));
  });
});

describe('AnthropicStreamToResponses read by the official openai SDK', () => {
  test('client.responses.stream() accepts the translated events and yields the same final response', async () => {
    const streams = [anthropicStream(BLOCKS, 4, 'tool_use'), anthropicStream([{ text: 'cut shor' }], 3, 'max_tokens')];
    const bodies = streams.map((s) => runStream(new AnthropicStreamToResponses(OPTS), toSseText(s.events), 9).output);
    let next = 0;
    const server = createServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(bodies[next++]);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const client = new OpenAI({ apiKey: 'test', baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, maxRetries: 0 });
      for (let i = 0; i < streams.length; i++) {
        const stream = client.responses.stream({ model: 'gpt-4o', input: 'hi' });
        let deltas = '';
        stream.on('response.output_text.delta', (e) => (deltas += e.delta));
        const final = await stream.finalResponse();
        const expected = anthropicResponseToResponses(streams[i]!.message, OPTS);
        // The SDK adds output_text, and `parsed` / `parsed_arguments` / `output_parsed` (null without a schema or a parse helper).
        const { output_text: text, ...rest } = JSON.parse(JSON.stringify(final, (k, v: unknown) => (k === 'parsed' || k === 'parsed_arguments' || k === 'output_parsed' ? undefined : v))) as Record<string, unknown>;
        assert.deepEqual(rest, expected, `stream ${i}`);
        const wantText = expected.output.flatMap((o) => (o.type === 'message' ? o.content.map((c) => (c.type === 'output_text' ? c.text : '')) : [])).join('');
        assert.equal(text, wantText);
        assert.equal(deltas, wantText);
      }
    } finally {
      server.close();
    }
  });
});
