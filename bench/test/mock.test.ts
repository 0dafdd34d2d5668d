import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { Agent, request as httpRequest } from 'node:http';
import type { IncomingMessage } from 'node:http';
import { fileURLToPath } from 'node:url';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { startMock } from '../mock/server.js';
import type { MockOptions, MockServer } from '../mock/server.js';

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TOOL_INPUT = { location: 'Paris', unit: 'celsius' };
const OPENAI_TOOLS = [
  { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: {} } } },
];
const ANTHROPIC_TOOLS = [{ name: 'lookup_weather', input_schema: { type: 'object', properties: {} } }];
const RESPONSES_TOOLS = [{ type: 'function', name: 'find_weather', parameters: { type: 'object', properties: {} } }];

// ---------------------------------------------------------------------------------------------
// Helpers.

async function withMock(opts: MockOptions, fn: (mock: MockServer) => Promise<void>): Promise<void> {
  const mock = await startMock(opts);
  try {
    await fn(mock);
  } finally {
    await mock.close();
  }
}

function post(url: string, body: unknown, init: RequestInit = {}): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    ...init,
  });
}

function openaiBody(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { model: 'gpt-test', messages: [{ role: 'user', content: 'hello' }], ...extra };
}

function anthropicBody(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { model: 'claude-test', max_tokens: 100, messages: [{ role: 'user', content: 'hello' }], ...extra };
}

/** Polls until `cond` holds; fails with `what` after the deadline. */
async function waitFor(what: string, cond: () => boolean, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

interface OpenAIDelta {
  role?: string;
  content?: string | null;
  refusal?: null;
  tool_calls?: { index: number; id?: string; type?: string; function: { name?: string; arguments: string } }[];
}
interface OpenAIChunk {
  id: string;
  object: string;
  created: number;
  model: string;
  system_fingerprint: null;
  choices: { index: number; delta: OpenAIDelta; logprobs: null; finish_reason: string | null }[];
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null;
}
interface OpenAICompletion {
  id: string;
  object: string;
  created: number;
  model: string;
  choices: {
    index: number;
    message: {
      role: string;
      content: string | null;
      refusal: null;
      tool_calls?: { id: string; type: string; function: { name: string; arguments: string } }[];
    };
    logprobs: null;
    finish_reason: string;
  }[];
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
  system_fingerprint: null;
}
interface AnthropicMessage {
  id: string;
  type: string;
  role: string;
  model: string;
  content: ({ type: 'text'; text: string } | { type: 'tool_use'; id: string; name: string; input: unknown })[];
  stop_reason: string | null;
  stop_sequence: null;
  usage: { input_tokens: number; output_tokens: number; cache_creation_input_tokens: number; cache_read_input_tokens: number };
}
interface AnthropicEvent {
  event: string;
  data: {
    type: string;
    index?: number;
    message?: AnthropicMessage;
    content_block?: { type: string; id?: string; name?: string; text?: string; input?: unknown };
    delta?: { type?: string; text?: string; partial_json?: string; stop_reason?: string; stop_sequence?: null };
    usage?: { output_tokens: number };
  };
}

/** OpenAI SSE: every event is exactly `data: <payload>\n\n`; returns the payloads. */
function openaiEvents(text: string): string[] {
  assert.ok(text.endsWith('\n\n'), 'stream ends with a blank line');
  return text
    .slice(0, -2)
    .split('\n\n')
    .map((block) => {
      assert.ok(block.startsWith('data: ') && !block.includes('\n'), `well-formed event: ${block}`);
      return block.slice('data: '.length);
    });
}

function openaiChunks(text: string): OpenAIChunk[] {
  const events = openaiEvents(text);
  assert.equal(events.at(-1), '[DONE]');
  return events.slice(0, -1).map((e) => JSON.parse(e) as OpenAIChunk);
}

/** Anthropic SSE: every event is exactly `event: <type>\ndata: <json>\n\n`. */
function anthropicEvents(text: string): AnthropicEvent[] {
  assert.ok(text.endsWith('\n\n'), 'stream ends with a blank line');
  return text
    .slice(0, -2)
    .split('\n\n')
    .map((block) => {
      const match = /^event: ([a-z_]+)\ndata: (.*)$/.exec(block);
      assert.ok(match !== null, `well-formed event: ${block}`);
      const event: AnthropicEvent = { event: match[1] ?? '', data: JSON.parse(match[2] ?? '') as AnthropicEvent['data'] };
      assert.equal(event.data.type, event.event, 'data.type matches the event name');
      return event;
    });
}

function contentOf(chunks: OpenAIChunk[]): string[] {
  return chunks.flatMap((c) => {
    const content = c.choices[0]?.delta.content;
    return typeof content === 'string' && content !== '' ? [content] : [];
  });
}

function activeTimeouts(): number {
  return process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
}

function hasMultibyte(text: string): boolean {
  return Buffer.byteLength(text) > text.length;
}

// ---------------------------------------------------------------------------------------------

describe('OpenAI chat completions', () => {
  it('returns the exact JSON shape with deterministic usage', async () => {
    await withMock({}, async (mock) => {
      const res = await post(`${mock.url}/v1/chat/completions`, {
        model: 'gpt-test',
        messages: [
          { role: 'system', content: 'abcdefgh' },
          { role: 'user', content: [{ type: 'text', text: '你好' }] },
        ],
      });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'application/json');
      const body = (await res.json()) as OpenAICompletion;
      assert.deepEqual(Object.keys(body), ['id', 'object', 'created', 'model', 'choices', 'usage', 'system_fingerprint']);
      assert.match(body.id, /^chatcmpl-[A-Za-z0-9]{29}$/);
      assert.ok(Math.abs(body.created - Date.now() / 1000) < 5);
      const text = body.choices[0]?.message.content ?? '';
      assert.ok(Buffer.byteLength(text) >= 64, 'about responseBytes of text');
      assert.ok(hasMultibyte(text), 'text contains multibyte characters');
      const words = text.split(' ').length;
      // 8 + 6 bytes of message text -> ceil(14 / 4) = 4 prompt tokens.
      assert.deepEqual(body, {
        id: body.id,
        object: 'chat.completion',
        created: body.created,
        model: 'gpt-test',
        choices: [{ index: 0, message: { role: 'assistant', content: text, refusal: null }, logprobs: null, finish_reason: 'stop' }],
        usage: { prompt_tokens: 4, completion_tokens: words, total_tokens: 4 + words },
        system_fingerprint: null,
      });
    });
  });

  it('serves the path without the /v1 prefix and gives fresh ids', async () => {
    await withMock({}, async (mock) => {
      const a = (await (await post(`${mock.url}/chat/completions`, openaiBody())).json()) as OpenAICompletion;
      const b = (await (await post(`${mock.url}/v1/chat/completions`, openaiBody())).json()) as OpenAICompletion;
      assert.equal(a.object, 'chat.completion');
      assert.notEqual(a.id, b.id);
      assert.equal(a.choices[0]?.message.content, b.choices[0]?.message.content);
    });
  });

  it('answers with a tool call when tools are given and the user says "use tool"', async () => {
    await withMock({}, async (mock) => {
      const res = await post(
        `${mock.url}/v1/chat/completions`,
        openaiBody({ tools: OPENAI_TOOLS, messages: [{ role: 'user', content: 'Please use tool now' }] }),
      );
      const body = (await res.json()) as OpenAICompletion;
      const choice = body.choices[0];
      assert.equal(choice?.finish_reason, 'tool_calls');
      assert.equal(choice.message.content, null);
      const call = choice.message.tool_calls?.[0];
      assert.match(call?.id ?? '', /^call_[A-Za-z0-9]+$/);
      assert.equal(call?.type, 'function');
      assert.equal(call?.function.name, 'get_weather');
      assert.deepEqual(JSON.parse(call?.function.arguments ?? ''), TOOL_INPUT);

      // Without the trigger phrase, or when the last message is not from the user: plain text.
      for (const messages of [
        [{ role: 'user', content: 'hello' }],
        [
          { role: 'user', content: 'use tool' },
          { role: 'assistant', content: 'use tool' },
        ],
      ]) {
        const plain = (await (await post(`${mock.url}/v1/chat/completions`, openaiBody({ tools: OPENAI_TOOLS, messages }))).json()) as OpenAICompletion;
        assert.equal(plain.choices[0]?.finish_reason, 'stop');
        assert.equal(plain.choices[0]?.message.tool_calls, undefined);
      }
    });
  });

  it('streams the OpenAI chunk sequence without usage by default', async () => {
    await withMock({}, async (mock) => {
      const json = (await (await post(`${mock.url}/v1/chat/completions`, openaiBody())).json()) as OpenAICompletion;
      const res = await post(`${mock.url}/v1/chat/completions`, openaiBody({ stream: true }));
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'text/event-stream');
      assert.equal(res.headers.get('cache-control'), 'no-cache');
      const chunks = openaiChunks(await res.text());
      assert.equal(chunks.length, 1 + 5 + 1, 'role, 5 content chunks, finish');
      const first = chunks[0];
      assert.deepEqual(Object.keys(first ?? {}), ['id', 'object', 'created', 'model', 'system_fingerprint', 'choices']);
      assert.deepEqual(first?.choices, [
        { index: 0, delta: { role: 'assistant', content: '', refusal: null }, logprobs: null, finish_reason: null },
      ]);
      for (const chunk of chunks) {
        assert.equal(chunk.id, first?.id);
        assert.match(chunk.id, /^chatcmpl-/);
        assert.equal(chunk.object, 'chat.completion.chunk');
        assert.equal(chunk.model, 'gpt-test');
        assert.equal(chunk.system_fingerprint, null);
        assert.equal('usage' in chunk, false);
      }
      for (const chunk of chunks.slice(1, 6)) {
        assert.deepEqual(Object.keys(chunk.choices[0]?.delta ?? {}), ['content']);
        assert.equal(chunk.choices[0]?.finish_reason, null);
      }
      assert.deepEqual(chunks[6]?.choices, [{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }]);
      assert.equal(contentOf(chunks).join(''), json.choices[0]?.message.content);
    });
  });

  it('adds usage: null to every chunk and a final usage chunk with include_usage', async () => {
    await withMock({ chunks: 3 }, async (mock) => {
      const res = await post(
        `${mock.url}/v1/chat/completions`,
        openaiBody({ stream: true, stream_options: { include_usage: true } }),
      );
      const chunks = openaiChunks(await res.text());
      assert.equal(chunks.length, 1 + 3 + 1 + 1);
      for (const chunk of chunks.slice(0, -1)) assert.equal(chunk.usage, null);
      const last = chunks.at(-1);
      assert.deepEqual(last?.choices, []);
      const words = contentOf(chunks).join('').split(' ').length;
      assert.deepEqual(last?.usage, { prompt_tokens: 2, completion_tokens: words, total_tokens: 2 + words });
    });
  });

  it('streams tool calls as a header chunk then argument pieces', async () => {
    await withMock({ chunks: 4 }, async (mock) => {
      const res = await post(
        `${mock.url}/v1/chat/completions`,
        openaiBody({ stream: true, tools: OPENAI_TOOLS, messages: [{ role: 'user', content: 'use tool please' }] }),
      );
      const chunks = openaiChunks(await res.text());
      assert.equal(chunks.length, 1 + 1 + 4 + 1);
      assert.deepEqual(chunks[0]?.choices[0]?.delta, { role: 'assistant', content: '', refusal: null });
      const header = chunks[1]?.choices[0]?.delta.tool_calls?.[0];
      assert.match(header?.id ?? '', /^call_/);
      assert.deepEqual({ ...header, id: 'x' }, {
        index: 0,
        id: 'x',
        type: 'function',
        function: { name: 'get_weather', arguments: '' },
      });
      let args = '';
      for (const chunk of chunks.slice(2, 6)) {
        const calls = chunk.choices[0]?.delta.tool_calls;
        assert.equal(calls?.length, 1);
        assert.deepEqual(Object.keys(calls?.[0] ?? {}), ['index', 'function']);
        args += calls?.[0]?.function.arguments ?? '';
      }
      assert.deepEqual(JSON.parse(args), TOOL_INPUT);
      assert.equal(chunks[6]?.choices[0]?.finish_reason, 'tool_calls');
    });
  });
});

describe('Anthropic messages', () => {
  it('returns the exact JSON shape with deterministic usage', async () => {
    await withMock({}, async (mock) => {
      const res = await post(`${mock.url}/v1/messages`, {
        model: 'claude-test',
        max_tokens: 50,
        system: 'abcdefgh',
        messages: [{ role: 'user', content: [{ type: 'text', text: 'héllo' }] }],
      });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'application/json');
      const body = (await res.json()) as AnthropicMessage;
      assert.deepEqual(Object.keys(body), ['id', 'type', 'role', 'model', 'content', 'stop_reason', 'stop_sequence', 'usage']);
      assert.match(body.id, /^msg_[A-Za-z0-9]{24}$/);
      const block = body.content[0];
      assert.equal(block?.type, 'text');
      const text = block.type === 'text' ? block.text : '';
      assert.ok(hasMultibyte(text));
      // 8 (system) + 6 bytes -> ceil(14 / 4) = 4 input tokens.
      assert.deepEqual(body, {
        id: body.id,
        type: 'message',
        role: 'assistant',
        model: 'claude-test',
        content: [{ type: 'text', text }],
        stop_reason: 'end_turn',
        stop_sequence: null,
        usage: { input_tokens: 4, output_tokens: text.split(' ').length, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
      });
    });
  });

  it('answers with tool_use when tools are given and the user says "use tool"', async () => {
    await withMock({}, async (mock) => {
      const res = await post(
        `${mock.url}/messages`,
        anthropicBody({ tools: ANTHROPIC_TOOLS, messages: [{ role: 'user', content: [{ type: 'text', text: 'use tool' }] }] }),
      );
      const body = (await res.json()) as AnthropicMessage;
      assert.equal(body.stop_reason, 'tool_use');
      assert.equal(body.content.length, 1);
      const block = body.content[0];
      assert.ok(block?.type === 'tool_use');
      assert.match(block.id, /^toolu_[A-Za-z0-9]+$/);
      assert.equal(block.name, 'lookup_weather');
      assert.deepEqual(block.input, TOOL_INPUT);
    });
  });

  it('streams the exact Anthropic event grammar', async () => {
    await withMock({}, async (mock) => {
      const json = (await (await post(`${mock.url}/v1/messages`, anthropicBody())).json()) as AnthropicMessage;
      const res = await post(`${mock.url}/v1/messages`, anthropicBody({ stream: true }));
      assert.equal(res.headers.get('content-type'), 'text/event-stream');
      const events = anthropicEvents(await res.text());
      assert.deepEqual(
        events.map((e) => e.event),
        ['message_start', 'content_block_start', 'ping', ...Array<string>(5).fill('content_block_delta'), 'content_block_stop', 'message_delta', 'message_stop'],
      );
      const start = events[0]?.data.message;
      assert.match(start?.id ?? '', /^msg_/);
      assert.deepEqual({ ...start, id: 'x' }, {
        id: 'x',
        type: 'message',
        role: 'assistant',
        model: 'claude-test',
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: 2, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 1 },
      });
      assert.deepEqual(events[1]?.data, { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } });
      let text = '';
      for (const e of events.slice(3, 8)) {
        assert.equal(e.data.index, 0);
        assert.equal(e.data.delta?.type, 'text_delta');
        text += e.data.delta.text ?? '';
      }
      const expected = json.content[0];
      assert.equal(text, expected?.type === 'text' ? expected.text : undefined);
      assert.deepEqual(events[8]?.data, { type: 'content_block_stop', index: 0 });
      assert.deepEqual(events[9]?.data, {
        type: 'message_delta',
        delta: { stop_reason: 'end_turn', stop_sequence: null },
        usage: { output_tokens: text.split(' ').length },
      });
      assert.deepEqual(events[10]?.data, { type: 'message_stop' });
    });
  });

  it('streams tool_use with input_json_delta pieces', async () => {
    await withMock({ chunks: 3 }, async (mock) => {
      const res = await post(
        `${mock.url}/v1/messages`,
        anthropicBody({ stream: true, tools: ANTHROPIC_TOOLS, messages: [{ role: 'user', content: 'use tool' }] }),
      );
      const events = anthropicEvents(await res.text());
      const block = events[1]?.data.content_block;
      assert.equal(block?.type, 'tool_use');
      assert.match(block.id ?? '', /^toolu_/);
      assert.equal(block.name, 'lookup_weather');
      assert.deepEqual(block.input, {});
      const deltas = events.filter((e) => e.event === 'content_block_delta');
      assert.equal(deltas.length, 3);
      assert.ok(deltas.every((e) => e.data.delta?.type === 'input_json_delta'));
      assert.deepEqual(JSON.parse(deltas.map((e) => e.data.delta?.partial_json ?? '').join('')), TOOL_INPUT);
      assert.equal(events.find((e) => e.event === 'message_delta')?.data.delta?.stop_reason, 'tool_use');
    });
  });
});

describe('errors', () => {
  it('rejects bad OpenAI requests with the OpenAI error shape', async () => {
    await withMock({}, async (mock) => {
      for (const body of ['{not json', { messages: [] }, { model: 'gpt-test' }]) {
        const res = await post(`${mock.url}/v1/chat/completions`, body);
        assert.equal(res.status, 400);
        const err = (await res.json()) as { error: { message: unknown } };
        assert.equal(typeof err.error.message, 'string');
        assert.deepEqual(err, { error: { message: err.error.message, type: 'invalid_request_error', param: null, code: null } });
      }
    });
  });

  it('rejects bad Anthropic requests with the Anthropic error shape', async () => {
    await withMock({}, async (mock) => {
      for (const body of ['[1,2', { model: 'c', messages: [] }, { max_tokens: 5, messages: [] }, { model: 'c', max_tokens: 5 }]) {
        const res = await post(`${mock.url}/v1/messages`, body);
        assert.equal(res.status, 400);
        const err = (await res.json()) as { error: { message: unknown } };
        assert.equal(typeof err.error.message, 'string');
        assert.deepEqual(err, { type: 'error', error: { type: 'invalid_request_error', message: err.error.message } });
      }
    });
  });

  it('forces a status with dialect-correct error bodies and counts the requests', async () => {
    await withMock({ status: 429 }, async (mock) => {
      const oa = await post(`${mock.url}/v1/chat/completions`, openaiBody({ stream: true }));
      assert.equal(oa.status, 429);
      const oaBody = (await oa.json()) as { error: { message: string; type: string; param: null; code: string } };
      assert.deepEqual(oaBody, { error: { message: oaBody.error.message, type: 'requests', param: null, code: 'rate_limit_exceeded' } });

      const expected: [number, string][] = [
        [401, 'authentication_error'],
        [403, 'permission_error'],
        [404, 'not_found_error'],
        [429, 'rate_limit_error'],
        [500, 'api_error'],
        [529, 'overloaded_error'],
      ];
      for (const [status, type] of expected) {
        mock.configure({ status });
        const res = await post(`${mock.url}/v1/messages`, anthropicBody());
        assert.equal(res.status, status);
        const body = (await res.json()) as { type: string; error: { type: string; message: string } };
        assert.deepEqual(body, { type: 'error', error: { type, message: body.error.message } });
      }

      mock.configure({ status: 500 });
      const server = (await (await post(`${mock.url}/chat/completions`, openaiBody())).json()) as { error: { type: string } };
      assert.equal(server.error.type, 'server_error');

      await waitFor('completed to reach 8', () => mock.stats().completed === 8);
      assert.deepEqual(mock.stats(), { requests: 8, openai: 2, anthropic: 6, responses: 0, embeddings: 0, models: 0, countTokens: 0, streams: 0, aborted: 0, completed: 8, inFlight: 0 });

      mock.configure({ status: undefined });
      assert.equal((await post(`${mock.url}/v1/messages`, anthropicBody())).status, 200);
    });
  });
});

describe('knobs', () => {
  it('emits the configured number of content chunks in both dialects', async () => {
    await withMock({ chunks: 12 }, async (mock) => {
      const oa = openaiChunks(await (await post(`${mock.url}/v1/chat/completions`, openaiBody({ stream: true }))).text());
      assert.equal(contentOf(oa).length, 12);
      const an = anthropicEvents(await (await post(`${mock.url}/v1/messages`, anthropicBody({ stream: true }))).text());
      assert.equal(an.filter((e) => e.event === 'content_block_delta').length, 12);
      mock.configure({ chunks: 1 });
      const one = openaiChunks(await (await post(`${mock.url}/v1/chat/completions`, openaiBody({ stream: true }))).text());
      assert.equal(contentOf(one).length, 1);
    });
  });

  it('sizes the text by responseBytes', async () => {
    await withMock({ responseBytes: 5000, chunks: 7 }, async (mock) => {
      const json = (await (await post(`${mock.url}/v1/chat/completions`, openaiBody())).json()) as OpenAICompletion;
      const bytes = Buffer.byteLength(json.choices[0]?.message.content ?? '');
      assert.ok(bytes >= 5000 && bytes < 5020, `text is about 5000 bytes, got ${bytes}`);
      const streamed = contentOf(openaiChunks(await (await post(`${mock.url}/v1/chat/completions`, openaiBody({ stream: true }))).text()));
      assert.equal(streamed.length, 7);
      assert.equal(streamed.join(''), json.choices[0]?.message.content);
    });
  });

  it('waits latencyMs before responding (JSON and stream)', async () => {
    await withMock({ latencyMs: 150 }, async (mock) => {
      let t0 = performance.now();
      const json = await post(`${mock.url}/v1/chat/completions`, openaiBody());
      assert.equal(json.status, 200);
      assert.ok(performance.now() - t0 >= 145, 'JSON headers after latencyMs');
      await json.arrayBuffer();

      t0 = performance.now();
      const stream = await post(`${mock.url}/v1/messages`, anthropicBody({ stream: true }));
      assert.ok(performance.now() - t0 >= 145, 'stream headers after latencyMs');
      assert.equal(anthropicEvents(await stream.text()).length, 11);
    });
  });

  it('paces stream chunks by ttftMs and gapMs and keeps the same events', async () => {
    await withMock({ ttftMs: 100, gapMs: 40, chunks: 4 }, async (mock) => {
      const res = await post(`${mock.url}/v1/chat/completions`, openaiBody({ stream: true }));
      const headersAt = performance.now();
      assert.ok(res.body !== null);
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      let text = '';
      let firstContentAt = 0;
      let roleSeenBeforeContent = false;
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        text += decoder.decode(value, { stream: true });
        if (firstContentAt === 0 && text.includes('"delta":{"content"')) firstContentAt = performance.now();
        if (firstContentAt === 0 && text.includes('"role":"assistant"')) roleSeenBeforeContent = true;
      }
      const doneAt = performance.now();
      assert.ok(roleSeenBeforeContent, 'role chunk arrives with the headers, before the first content');
      assert.ok(firstContentAt - headersAt >= 95, `first content after ttftMs (${firstContentAt - headersAt}ms)`);
      assert.ok(doneAt - headersAt >= 100 + 3 * 40 - 5, `whole stream takes ttft + 3 gaps (${doneAt - headersAt}ms)`);

      const timed = openaiChunks(text);
      mock.configure({ ttftMs: 0, gapMs: 0 });
      const fast = openaiChunks(await (await post(`${mock.url}/v1/chat/completions`, openaiBody({ stream: true }))).text());
      assert.deepEqual(
        timed.map((c) => c.choices),
        fast.map((c) => c.choices),
      );
    });
  });

  it('validates knobs', async () => {
    await assert.rejects(startMock({ chunks: 0 }), RangeError);
    await withMock({}, async (mock) => {
      assert.throws(() => mock.configure({ latencyMs: -1 }), RangeError);
      assert.throws(() => mock.configure({ gapMs: 1.5 }), RangeError);
      assert.throws(() => mock.configure({ status: 200 }), RangeError);
      assert.throws(() => mock.configure({ port: mock.port + 1 }), /port/);
      mock.configure({ port: mock.port, chunks: 2 });
      const chunks = openaiChunks(await (await post(`${mock.url}/v1/chat/completions`, openaiBody({ stream: true }))).text());
      assert.equal(contentOf(chunks).length, 2);
    });
  });
});

describe('stats and lifecycle', () => {
  it('counts requests per dialect, streams and completions', async () => {
    await withMock({}, async (mock) => {
      await (await post(`${mock.url}/v1/chat/completions`, openaiBody())).text();
      await (await post(`${mock.url}/v1/chat/completions`, openaiBody({ stream: true }))).text();
      await (await post(`${mock.url}/chat/completions`, '{oops')).text();
      await (await post(`${mock.url}/v1/messages`, anthropicBody({ stream: true }))).text();
      await (await post(`${mock.url}/messages`, anthropicBody())).text();
      await (await fetch(`${mock.url}/healthz`)).text();
      await waitFor('5 completed', () => mock.stats().completed === 5);
      assert.deepEqual(mock.stats(), { requests: 5, openai: 3, anthropic: 2, responses: 0, embeddings: 0, models: 0, countTokens: 0, streams: 2, aborted: 0, completed: 5, inFlight: 0 });
      mock.reset();
      assert.deepEqual(mock.stats(), { requests: 0, openai: 0, anthropic: 0, responses: 0, embeddings: 0, models: 0, countTokens: 0, streams: 0, aborted: 0, completed: 0, inFlight: 0 });
      assert.deepEqual(mock.lastRequests(), []);
    });
  });

  it('counts a stream the client aborts mid-way as aborted', async () => {
    await withMock({ gapMs: 10_000 }, async (mock) => {
      const controller = new AbortController();
      const res = await post(`${mock.url}/v1/chat/completions`, openaiBody({ stream: true }), { signal: controller.signal });
      assert.ok(res.body !== null);
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      let text = '';
      while (!text.includes('"delta":{"content"')) {
        const { done, value } = await reader.read();
        assert.equal(done, false, 'stream still open');
        text += decoder.decode(value, { stream: true });
      }
      assert.deepEqual(mock.stats(), { requests: 1, openai: 1, anthropic: 0, responses: 0, embeddings: 0, models: 0, countTokens: 0, streams: 1, aborted: 0, completed: 0, inFlight: 1 });
      const timersWhileOpen = activeTimeouts();
      controller.abort();
      await waitFor('the abort to be counted', () => mock.stats().aborted === 1);
      assert.deepEqual(mock.stats(), { requests: 1, openai: 1, anthropic: 0, responses: 0, embeddings: 0, models: 0, countTokens: 0, streams: 1, aborted: 1, completed: 0, inFlight: 0 });
      // The pending 10 s gap timer is cleared rather than left to fire.
      await waitFor('the gap timer to be cleared', () => activeTimeouts() < timersWhileOpen);
    });
  });

  it('counts a request aborted during latencyMs as aborted', async () => {
    await withMock({ latencyMs: 10_000 }, async (mock) => {
      const controller = new AbortController();
      const pending = post(`${mock.url}/v1/messages`, anthropicBody(), { signal: controller.signal });
      await waitFor('the request to arrive', () => mock.lastRequests().length === 1);
      controller.abort();
      await assert.rejects(pending);
      await waitFor('the abort to be counted', () => mock.stats().aborted === 1);
      assert.equal(mock.stats().inFlight, 0);
      assert.equal(mock.stats().completed, 0);
    });
  });

  it('keeps connections alive', async () => {
    await withMock({}, async (mock) => {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      try {
        const send = (): Promise<{ res: IncomingMessage; reused: boolean; body: string }> =>
          new Promise((resolve, reject) => {
            const req = httpRequest(
              `${mock.url}/v1/chat/completions`,
              { method: 'POST', agent, headers: { 'content-type': 'application/json' } },
              (res) => {
                let body = '';
                res.setEncoding('utf8');
                res.on('data', (c: string) => (body += c));
                res.on('end', () => resolve({ res, reused: req.reusedSocket, body }));
              },
            );
            req.on('error', reject);
            req.end(JSON.stringify(openaiBody()));
          });
        const first = await send();
        assert.equal(first.reused, false);
        assert.match(String(first.res.headers['keep-alive']), /timeout=65/);
        const second = await send();
        assert.equal(second.reused, true, 'second request reuses the socket');
        assert.equal(second.res.statusCode, 200);
        assert.equal((JSON.parse(second.body) as OpenAICompletion).object, 'chat.completion');
      } finally {
        agent.destroy();
      }
    });
  });

  it('close() resolves while a stream is open and ends it', async () => {
    const mock = await startMock({ gapMs: 10_000 });
    const res = await post(`${mock.url}/v1/messages`, anthropicBody({ stream: true }));
    assert.ok(res.body !== null);
    const reader = res.body.getReader();
    await reader.read();
    const t0 = performance.now();
    await mock.close();
    assert.ok(performance.now() - t0 < 1000, 'close does not wait for the stream');
    await assert.rejects(async () => {
      for (;;) if ((await reader.read()).done) return;
    });
    await waitFor('the abort to be counted', () => mock.stats().aborted === 1);
    await assert.rejects(fetch(`${mock.url}/healthz`));
  });
});

describe('admin endpoints', () => {
  it('serves stats, config, requests, reset, healthz and 404', async () => {
    await withMock({}, async (mock) => {
      const health = await fetch(`${mock.url}/healthz`);
      assert.equal(health.status, 200);
      assert.deepEqual(await health.json(), { ok: true });

      await (await post(`${mock.url}/v1/chat/completions?trace=1`, openaiBody(), {
        headers: { 'content-type': 'application/json', 'x-test': 'yes' },
      })).text();
      await (await post(`${mock.url}/v1/messages`, 'not json at all')).text();
      await waitFor('2 completed', () => mock.stats().completed === 2);

      const stats = await fetch(`${mock.url}/_mock/stats`);
      assert.deepEqual(await stats.json(), mock.stats());
      assert.equal(mock.stats().requests, 2, 'admin calls are not counted');

      const recorded = (await (await fetch(`${mock.url}/_mock/requests`)).json()) as { method: string; path: string; headers: Record<string, string>; body: unknown }[];
      assert.equal(recorded.length, 2);
      assert.equal(recorded[0]?.method, 'POST');
      assert.equal(recorded[0]?.path, '/v1/chat/completions?trace=1');
      assert.equal(recorded[0]?.headers['x-test'], 'yes');
      assert.deepEqual(recorded[0]?.body, openaiBody());
      assert.equal(recorded[1]?.body, 'not json at all');
      assert.deepEqual(mock.lastRequests()[0]?.body, openaiBody());

      const config = await post(`${mock.url}/_mock/config`, { chunks: 3, status: 503 });
      assert.equal(config.status, 200);
      const applied = (await config.json()) as { ok: boolean; options: MockOptions };
      assert.equal(applied.options.chunks, 3);
      assert.equal(applied.options.status, 503);
      assert.equal((await post(`${mock.url}/v1/chat/completions`, openaiBody())).status, 503);
      await post(`${mock.url}/_mock/config`, { status: null });
      const chunks = openaiChunks(await (await post(`${mock.url}/v1/chat/completions`, openaiBody({ stream: true }))).text());
      assert.equal(contentOf(chunks).length, 3);

      for (const bad of [{ chunks: 0 }, { bogus: 1 }, { port: 1 }, '[]', '{no']) {
        const res = await post(`${mock.url}/_mock/config`, bad);
        assert.equal(res.status, 400, `config ${JSON.stringify(bad)} rejected`);
        assert.equal(typeof ((await res.json()) as { error: { message: unknown } }).error.message, 'string');
      }
      assert.equal((await fetch(`${mock.url}/_mock/reset`)).status, 405);

      const reset = await post(`${mock.url}/_mock/reset`, '');
      assert.deepEqual(await reset.json(), { ok: true });
      assert.equal(mock.stats().requests, 0);
      assert.deepEqual(await (await fetch(`${mock.url}/_mock/requests`)).json(), []);

      const missing = await post(`${mock.url}/v1/audio/speech`, { input: 'x' });
      assert.equal(missing.status, 404);
      assert.equal(missing.headers.get('content-type'), 'application/json');
      assert.match(((await missing.json()) as { error: { message: string } }).error.message, /\/v1\/audio\/speech/);
    });
  });

  it('keeps only the last 100 requests', async () => {
    await withMock({}, async (mock) => {
      for (let i = 0; i < 105; i++) {
        await (await post(`${mock.url}/v1/chat/completions`, openaiBody({ n: i }))).text();
      }
      const recorded = mock.lastRequests();
      assert.equal(recorded.length, 100);
      assert.deepEqual(recorded[0]?.body, openaiBody({ n: 5 }));
      assert.deepEqual(recorded[99]?.body, openaiBody({ n: 104 }));
    });
  });
});

describe('CLI', () => {
  it('prints the URL, serves, and exits cleanly on SIGTERM', { timeout: 20_000 }, async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'bench/mock/main.ts', '--port', '0', '--chunks', '2', '--status', '401'], {
      cwd: REPO_ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      let out = '';
      child.stdout.setEncoding('utf8');
      child.stdout.on('data', (c: string) => (out += c));
      const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
      await waitFor('the listening line', () => out.includes('\n'), 15_000);
      const match = /^mock provider listening on (http:\/\/127\.0\.0\.1:\d+)\n$/.exec(out);
      assert.ok(match !== null, `unexpected output: ${out}`);
      const url = match[1] ?? '';
      const res = await post(`${url}/v1/messages`, anthropicBody());
      assert.equal(res.status, 401);
      assert.equal(((await res.json()) as { error: { type: string } }).error.type, 'authentication_error');
      child.kill('SIGTERM');
      assert.equal(await exited, 0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });

  it('rejects bad flags', { timeout: 20_000 }, async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'bench/mock/main.ts', '--chunks', 'many'], {
      cwd: REPO_ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let err = '';
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (c: string) => (err += c));
    const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
    assert.equal(code, 2);
    assert.match(err, /--chunks/);
  });
});

// ---------------------------------------------------------------------------------------------
// OpenAI Responses API, embeddings, model lookup, token counting.

interface ResponsesItem {
  id: string;
  type: string;
  status: string;
  role?: string;
  content?: { type: string; annotations: unknown[]; logprobs: unknown[]; text: string }[];
  arguments?: string;
  call_id?: string;
  name?: string;
}
interface ResponsesObject {
  id: string;
  object: string;
  created_at: number;
  status: string;
  output: ResponsesItem[];
  usage: { input_tokens: number; input_tokens_details: { cached_tokens: number }; output_tokens: number; output_tokens_details: { reasoning_tokens: number }; total_tokens: number } | null;
  [key: string]: unknown;
}
interface ResponsesEvent {
  event: string;
  data: { type: string; sequence_number: number; delta?: string; response?: ResponsesObject; item?: ResponsesItem; [key: string]: unknown };
}

function responsesBody(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { model: 'gpt-test', input: 'hello', ...extra };
}

/** Responses SSE: every event is exactly `event: <type>\ndata: <json>\n\n`, sequence numbers counting from 0. */
function responsesEvents(text: string): ResponsesEvent[] {
  assert.ok(text.endsWith('\n\n'), 'stream ends with a blank line');
  return text
    .slice(0, -2)
    .split('\n\n')
    .map((block, i) => {
      const match = /^event: ([a-z_.]+)\ndata: (.*)$/.exec(block);
      assert.ok(match !== null, `well-formed event: ${block}`);
      const event: ResponsesEvent = { event: match[1] ?? '', data: JSON.parse(match[2] ?? '') as ResponsesEvent['data'] };
      assert.equal(event.data.type, event.event, 'data.type matches the event name');
      assert.equal(event.data.sequence_number, i, 'sequence_number counts events from 0');
      return event;
    });
}

describe('OpenAI Responses API', () => {
  it('returns the response object with deterministic usage and the request settings repeated', async () => {
    await withMock({}, async (mock) => {
      const request = {
        model: 'gpt-test',
        instructions: 'abcd',
        input: [
          { role: 'user', content: [{ type: 'input_text', text: 'héllo' }] },
          { type: 'function_call_output', call_id: 'c', output: 'xyz' },
        ],
        temperature: 0.5,
        metadata: { team: 'a' },
        user: 'u1',
      };
      const res = await post(`${mock.url}/v1/responses`, request);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'application/json');
      const body = (await res.json()) as ResponsesObject;
      assert.match(body.id, /^resp_[A-Za-z0-9]{32}$/);
      assert.ok(Math.abs(body.created_at - Date.now() / 1000) < 5);
      const item = body.output[0];
      assert.match(item?.id ?? '', /^msg_[A-Za-z0-9]{32}$/);
      const text = item?.content?.[0]?.text ?? '';
      assert.ok(hasMultibyte(text) && Buffer.byteLength(text) >= 64);
      const words = text.split(' ').length;
      // 4 (instructions) + 6 + 3 bytes -> ceil(13 / 4) = 4 input tokens.
      assert.deepEqual(body, {
        id: body.id,
        object: 'response',
        created_at: body.created_at,
        status: 'completed',
        background: false,
        error: null,
        incomplete_details: null,
        instructions: 'abcd',
        max_output_tokens: null,
        model: 'gpt-test',
        output: [{ id: item?.id, type: 'message', status: 'completed', content: [{ type: 'output_text', annotations: [], logprobs: [], text }], role: 'assistant' }],
        parallel_tool_calls: true,
        previous_response_id: null,
        reasoning: { effort: null, summary: null },
        store: true,
        temperature: 0.5,
        text: { format: { type: 'text' } },
        tool_choice: 'auto',
        tools: [],
        top_p: 1,
        truncation: 'disabled',
        usage: { input_tokens: 4, input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 }, output_tokens: words, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 4 + words },
        user: 'u1',
        metadata: { team: 'a' },
      });
      // The same text as the chat answer.
      const chat = (await (await post(`${mock.url}/v1/chat/completions`, openaiBody())).json()) as OpenAICompletion;
      assert.equal(text, chat.choices[0]?.message.content);
    });
  });

  it('answers with a function_call when tools are given and the last user message says "use tool", then with text after the output', async () => {
    await withMock({}, async (mock) => {
      const first = (await (await post(`${mock.url}/responses`, responsesBody({ tools: RESPONSES_TOOLS, input: 'please USE TOOL' }))).json()) as ResponsesObject;
      const call = first.output[0];
      assert.equal(first.output.length, 1);
      assert.equal(call?.type, 'function_call');
      assert.match(call.id, /^fc_/);
      assert.match(call.call_id ?? '', /^call_[A-Za-z0-9]{24}$/);
      assert.equal(call.name, 'find_weather');
      assert.equal(call.status, 'completed');
      assert.deepEqual(JSON.parse(call.arguments ?? ''), TOOL_INPUT);
      assert.equal(first.usage?.output_tokens, Math.ceil(Buffer.byteLength(JSON.stringify(TOOL_INPUT)) / 4));
      // The tool loop's next turn (the call and its output replayed) gets a text answer.
      const input = [{ role: 'user', content: 'use tool' }, call, { type: 'function_call_output', call_id: call.call_id, output: '18 °C' }];
      const second = (await (await post(`${mock.url}/v1/responses`, responsesBody({ tools: RESPONSES_TOOLS, input }))).json()) as ResponsesObject;
      assert.equal(second.output[0]?.type, 'message');
      // Without tools, no call.
      const plain = (await (await post(`${mock.url}/v1/responses`, responsesBody({ input: 'use tool' }))).json()) as ResponsesObject;
      assert.equal(plain.output[0]?.type, 'message');
    });
  });

  it('streams the typed events, which the official openai SDK accepts, for text and for a tool call', async () => {
    await withMock({ chunks: 3 }, async (mock) => {
      const res = await post(`${mock.url}/v1/responses`, responsesBody({ stream: true }));
      assert.equal(res.headers.get('content-type'), 'text/event-stream');
      const events = responsesEvents(await res.text());
      assert.deepEqual(events.map((e) => e.event), [
        'response.created',
        'response.in_progress',
        'response.output_item.added',
        'response.content_part.added',
        'response.output_text.delta',
        'response.output_text.delta',
        'response.output_text.delta',
        'response.output_text.done',
        'response.content_part.done',
        'response.output_item.done',
        'response.completed',
      ]);
      const created = events[0]?.data.response;
      assert.equal(created?.status, 'in_progress');
      assert.deepEqual([created?.output, created?.usage], [[], null]);
      const final = events.at(-1)?.data.response;
      assert.equal(final?.id, created?.id);
      assert.equal(events.slice(4, 7).map((e) => e.data.delta).join(''), final?.output[0]?.content?.[0]?.text);
      assert.equal(events[7]?.data['text'], final?.output[0]?.content?.[0]?.text);

      const tool = responsesEvents(await (await post(`${mock.url}/v1/responses`, responsesBody({ stream: true, tools: RESPONSES_TOOLS, input: 'use tool' }))).text());
      assert.deepEqual(tool.map((e) => e.event), [
        'response.created',
        'response.in_progress',
        'response.output_item.added',
        'response.function_call_arguments.delta',
        'response.function_call_arguments.delta',
        'response.function_call_arguments.delta',
        'response.function_call_arguments.done',
        'response.output_item.done',
        'response.completed',
      ]);
      assert.deepEqual(JSON.parse(tool.slice(3, 6).map((e) => e.data.delta).join('')), TOOL_INPUT);

      // The official SDK's stream helper validates the event grammar and rebuilds the response.
      const client = new OpenAI({ apiKey: 'test', baseURL: `${mock.url}/v1`, maxRetries: 0 });
      const text = await client.responses.stream({ model: 'gpt-test', input: 'hello' }).finalResponse();
      const json = (await (await post(`${mock.url}/v1/responses`, responsesBody())).json()) as ResponsesObject;
      assert.equal(text.output_text, json.output[0]?.content?.[0]?.text);
      assert.deepEqual(text.usage, json.usage);
      const called = await client.responses.stream({ model: 'gpt-test', input: 'use tool', tools: [{ type: 'function', name: 'find_weather', parameters: {}, strict: false }] }).finalResponse();
      const out = called.output[0];
      assert.ok(out?.type === 'function_call');
      assert.deepEqual([out.name, JSON.parse(out.arguments) as unknown], ['find_weather', TOOL_INPUT]);
      assert.equal(mock.stats().responses, 5);
      assert.equal(mock.stats().streams, 4);
    });
  });

  it('keeps stored responses for GET and DELETE, and checks previous_response_id against them', async () => {
    await withMock({}, async (mock) => {
      const stored = (await (await post(`${mock.url}/v1/responses`, responsesBody())).json()) as ResponsesObject;
      const streamed = responsesEvents(await (await post(`${mock.url}/v1/responses`, responsesBody({ stream: true }))).text()).at(-1)?.data.response;
      const unstored = (await (await post(`${mock.url}/v1/responses`, responsesBody({ store: false }))).json()) as ResponsesObject;
      assert.equal(unstored.store, false);

      const got = await fetch(`${mock.url}/v1/responses/${stored.id}`);
      assert.equal(got.status, 200);
      assert.deepEqual(await got.json(), stored);
      assert.deepEqual(await (await fetch(`${mock.url}/v1/responses/${streamed?.id ?? ''}`)).json(), streamed);
      const missing = await fetch(`${mock.url}/v1/responses/${unstored.id}`);
      assert.equal(missing.status, 404);
      assert.deepEqual(await missing.json(), { error: { message: `Response with id '${unstored.id}' not found.`, type: 'invalid_request_error', param: null, code: null } });

      const next = await post(`${mock.url}/v1/responses`, responsesBody({ previous_response_id: stored.id }));
      assert.equal(next.status, 200);
      assert.equal(((await next.json()) as ResponsesObject).previous_response_id, stored.id);
      const unknown = await post(`${mock.url}/v1/responses`, responsesBody({ previous_response_id: 'resp_nope' }));
      assert.equal(unknown.status, 400);
      assert.deepEqual(await unknown.json(), { error: { message: "Previous response with id 'resp_nope' not found.", type: 'invalid_request_error', param: 'previous_response_id', code: null } });

      const deleted = await fetch(`${mock.url}/v1/responses/${stored.id}`, { method: 'DELETE' });
      assert.deepEqual(await deleted.json(), { id: stored.id, object: 'response', deleted: true });
      assert.equal((await fetch(`${mock.url}/v1/responses/${stored.id}`)).status, 404);
      assert.equal((await fetch(`${mock.url}/v1/responses/${stored.id}`, { method: 'DELETE' })).status, 404);
      assert.equal((await post(`${mock.url}/v1/responses/${streamed?.id ?? ''}`, {})).status, 405);
    });
  });

  it('rejects bad requests with the OpenAI error shape naming the parameter', async () => {
    await withMock({}, async (mock) => {
      const cases: [unknown, string | null][] = [
        ['{not json', null],
        [{ input: 'x' }, 'model'],
        [{ model: 'gpt-test' }, 'input'],
        [{ model: 'gpt-test', input: 5 }, 'input'],
      ];
      for (const [body, param] of cases) {
        const res = await post(`${mock.url}/v1/responses`, body);
        assert.equal(res.status, 400);
        const err = (await res.json()) as { error: { message: unknown; param: unknown } };
        assert.equal(typeof err.error.message, 'string');
        assert.deepEqual(err, { error: { message: err.error.message, type: 'invalid_request_error', param, code: null } });
      }
    });
  });
});

interface EmbeddingList {
  object: string;
  data: { object: string; index: number; embedding: number[] | string }[];
  model: string;
  usage: { prompt_tokens: number; total_tokens: number };
}

function decodeFloats(b64: string): number[] {
  const bytes = Buffer.from(b64, 'base64');
  const out: number[] = [];
  for (let i = 0; i < bytes.length; i += 4) out.push(bytes.readFloatLE(i));
  return out;
}

describe('embeddings', () => {
  it('returns deterministic unit vectors with prompt_tokens usage, as floats or base64 of the same float32 values', async () => {
    await withMock({}, async (mock) => {
      const float = (await (await post(`${mock.url}/v1/embeddings`, { model: 'text-embedding-3-small', input: 'héllo wörld' })).json()) as EmbeddingList;
      const vector = float.data[0]?.embedding;
      assert.ok(Array.isArray(vector));
      assert.equal(vector.length, 1536);
      assert.ok(Math.abs(Math.hypot(...vector) - 1) < 1e-5, 'unit length');
      assert.deepEqual({ ...float, data: float.data.map((d) => ({ ...d, embedding: 'v' })) }, {
        object: 'list',
        data: [{ object: 'embedding', index: 0, embedding: 'v' }],
        model: 'text-embedding-3-small',
        // 13 bytes -> ceil(13 / 4) = 4 tokens.
        usage: { prompt_tokens: 4, total_tokens: 4 },
      });
      const again = (await (await post(`${mock.url}/embeddings`, { model: 'text-embedding-3-small', input: 'héllo wörld', encoding_format: 'float' })).json()) as EmbeddingList;
      assert.deepEqual(again.data[0]?.embedding, vector, 'same input, same vector');
      const b64 = (await (await post(`${mock.url}/v1/embeddings`, { model: 'text-embedding-3-small', input: 'héllo wörld', encoding_format: 'base64' })).json()) as EmbeddingList;
      const encoded = b64.data[0]?.embedding;
      assert.equal(typeof encoded, 'string');
      assert.deepEqual(decodeFloats(encoded as string), vector, 'base64 carries the same float32 values');
      assert.deepEqual(b64.usage, float.usage);
      // The official SDK asks for base64 by default and decodes it.
      const client = new OpenAI({ apiKey: 'test', baseURL: `${mock.url}/v1`, maxRetries: 0 });
      const viaSdk = await client.embeddings.create({ model: 'text-embedding-3-small', input: 'héllo wörld' });
      assert.deepEqual(Array.from(viaSdk.data[0]?.embedding ?? []), vector);
      assert.equal((mock.lastRequests().at(-1)?.body as { encoding_format?: string }).encoding_format, 'base64');
    });
  });

  it('takes strings, string arrays, token arrays and arrays of them, and honours dimensions', async () => {
    await withMock({}, async (mock) => {
      const many = (await (await post(`${mock.url}/v1/embeddings`, { model: 'e', input: ['a', 'bcdefghij', [1, 2, 3]], dimensions: 8 })).json()) as EmbeddingList;
      assert.deepEqual(many.data.map((d) => [d.index, (d.embedding as number[]).length]), [[0, 8], [1, 8], [2, 8]]);
      assert.notDeepEqual(many.data[0]?.embedding, many.data[1]?.embedding);
      // 1 + ceil(9 / 4) + 3 tokens.
      assert.deepEqual(many.usage, { prompt_tokens: 1 + 3 + 3, total_tokens: 7 });
      const tokens = (await (await post(`${mock.url}/v1/embeddings`, { model: 'e', input: [5, 6, 7, 8], dimensions: 4 })).json()) as EmbeddingList;
      assert.equal(tokens.data.length, 1);
      assert.equal(tokens.usage.prompt_tokens, 4);
      assert.equal(mock.stats().embeddings, 2);
    });
  });

  it('rejects bad requests with the OpenAI error shape naming the parameter', async () => {
    await withMock({}, async (mock) => {
      const cases: [unknown, string | null][] = [
        ['nope', null],
        [{ input: 'x' }, 'model'],
        [{ model: 'e' }, 'input'],
        [{ model: 'e', input: '' }, 'input'],
        [{ model: 'e', input: [] }, 'input'],
        [{ model: 'e', input: ['a', { text: 'b' }] }, 'input'],
        [{ model: 'e', input: [1.5] }, 'input'],
        [{ model: 'e', input: 'x', encoding_format: 'hex' }, 'encoding_format'],
        [{ model: 'e', input: 'x', dimensions: 0 }, 'dimensions'],
      ];
      for (const [body, param] of cases) {
        const res = await post(`${mock.url}/v1/embeddings`, body);
        assert.equal(res.status, 400, JSON.stringify(body));
        const err = (await res.json()) as { error: { message: unknown; param: unknown; type: unknown } };
        assert.equal(typeof err.error.message, 'string');
        assert.deepEqual([err.error.type, err.error.param], ['invalid_request_error', param], JSON.stringify(body));
      }
    });
  });
});

describe('model lookup', () => {
  it('lists and retrieves models in the OpenAI shape, 404 for unknown ids', async () => {
    await withMock({}, async (mock) => {
      const list = (await (await fetch(`${mock.url}/v1/models`)).json()) as { object: string; data: { id: string; object: string; created: number; owned_by: string }[] };
      assert.equal(list.object, 'list');
      assert.ok(list.data.some((m) => m.id === 'gpt-4o-mini') && list.data.some((m) => m.id === 'text-embedding-3-small'));
      assert.ok(list.data.every((m) => m.object === 'model' && Number.isInteger(m.created) && typeof m.owned_by === 'string'));
      const client = new OpenAI({ apiKey: 'test', baseURL: `${mock.url}/v1`, maxRetries: 0 });
      const one = await client.models.retrieve('gpt-4o-mini');
      assert.deepEqual({ ...one }, list.data.find((m) => m.id === 'gpt-4o-mini'));
      const missing = await fetch(`${mock.url}/models/${encodeURIComponent('ft:gpt-4o:acme:x')}`);
      assert.equal(missing.status, 404);
      assert.deepEqual(await missing.json(), {
        error: { message: "The model 'ft:gpt-4o:acme:x' does not exist or you do not have access to it.", type: 'invalid_request_error', param: 'model', code: 'model_not_found' },
      });
      assert.equal((await post(`${mock.url}/v1/models`, {})).status, 405);
    });
  });

  it('answers in the Anthropic shape when anthropic-version is sent', async () => {
    await withMock({}, async (mock) => {
      const headers = { 'anthropic-version': '2023-06-01' };
      const list = (await (await fetch(`${mock.url}/v1/models`, { headers })).json()) as { data: { type: string; id: string; display_name: string; created_at: string }[]; has_more: boolean; first_id: string; last_id: string };
      assert.ok(list.data.length > 0 && list.data.every((m) => m.type === 'model' && m.id.startsWith('claude-') && !Number.isNaN(Date.parse(m.created_at))));
      assert.deepEqual([list.has_more, list.first_id, list.last_id], [false, list.data[0]?.id, list.data.at(-1)?.id]);
      const client = new Anthropic({ apiKey: 'test', baseURL: mock.url, maxRetries: 0 });
      const one = await client.models.retrieve('claude-sonnet-4-5');
      assert.deepEqual({ ...one }, list.data.find((m) => m.id === 'claude-sonnet-4-5'));
      const missing = await fetch(`${mock.url}/v1/models/gpt-4o`, { headers });
      assert.equal(missing.status, 404);
      assert.deepEqual(await missing.json(), { type: 'error', error: { type: 'not_found_error', message: 'model: gpt-4o' } });
      await waitFor('3 completed', () => mock.stats().completed === 3);
      assert.deepEqual(mock.stats(), { requests: 3, openai: 0, anthropic: 3, responses: 0, embeddings: 0, models: 3, countTokens: 0, streams: 0, aborted: 0, completed: 3, inFlight: 0 });
    });
  });
});

describe('Anthropic token counting', () => {
  it('counts exactly the input_tokens /v1/messages reports for the same body', async () => {
    await withMock({}, async (mock) => {
      const body = { model: 'claude-test', system: 'abcdefgh', messages: [{ role: 'user', content: [{ type: 'text', text: 'héllo wörld, ça va ?' }] }] };
      const counted = await post(`${mock.url}/v1/messages/count_tokens`, body);
      assert.equal(counted.status, 200);
      const { input_tokens } = (await counted.json()) as { input_tokens: number };
      const message = (await (await post(`${mock.url}/v1/messages`, { ...body, max_tokens: 10 })).json()) as AnthropicMessage;
      assert.equal(input_tokens, message.usage.input_tokens);
      assert.equal(input_tokens, Math.ceil((8 + Buffer.byteLength('héllo wörld, ça va ?')) / 4));
      const client = new Anthropic({ apiKey: 'test', baseURL: mock.url, maxRetries: 0 });
      assert.deepEqual(await client.messages.countTokens({ model: 'claude-test', system: 'abcdefgh', messages: [{ role: 'user', content: 'héllo wörld, ça va ?' }] }), { input_tokens });
      const bad = await post(`${mock.url}/messages/count_tokens`, { model: 'claude-test' });
      assert.equal(bad.status, 400);
      assert.deepEqual(await bad.json(), { type: 'error', error: { type: 'invalid_request_error', message: 'messages: Field required' } });
      assert.equal(mock.stats().countTokens, 3);
    });
  });

  it('new endpoints follow the forced status in their own API shape, and are counted', async () => {
    await withMock({ status: 429 }, async (mock) => {
      const oa = await post(`${mock.url}/v1/responses`, responsesBody());
      assert.equal(oa.status, 429);
      assert.equal(((await oa.json()) as { error: { code: string } }).error.code, 'rate_limit_exceeded');
      const an = await fetch(`${mock.url}/v1/models`, { headers: { 'anthropic-version': '2023-06-01' } });
      assert.equal(an.status, 429);
      assert.equal(((await an.json()) as { error: { type: string } }).error.type, 'rate_limit_error');
      mock.configure({ status: undefined });
      mock.failNext(1, 503);
      assert.equal((await post(`${mock.url}/v1/embeddings`, { model: 'e', input: 'x' })).status, 503);
      assert.equal((await post(`${mock.url}/v1/embeddings`, { model: 'e', input: 'x' })).status, 200);
      await (await post(`${mock.url}/v1/messages/count_tokens`, { model: 'c', messages: [] })).text();
      await waitFor('5 completed', () => mock.stats().completed === 5);
      assert.deepEqual(mock.stats(), { requests: 5, openai: 3, anthropic: 2, responses: 1, embeddings: 2, models: 1, countTokens: 1, streams: 0, aborted: 0, completed: 5, inFlight: 0 });
    });
  });
});
