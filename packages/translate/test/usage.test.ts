import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { SseParser, clientRequestedUsage, formatSse, isUsageOnlyChunk, usageOnlyChunk, withStreamUsage, withStreamUsageBytes } from '../src/index.js';
import type { OpenAIChatRequest, SseEvent } from '../src/index.js';

const USAGE_CHUNK =
  '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":30,"completion_tokens":5,"total_tokens":35,"prompt_tokens_details":{"cached_tokens":16,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":2}}}';

function ev(data: string): SseEvent {
  return { event: null, data };
}

describe('usage-only chunk', () => {
  test('recognised and read', () => {
    assert.ok(isUsageOnlyChunk(ev(USAGE_CHUNK)));
    assert.deepEqual(usageOnlyChunk(ev(USAGE_CHUNK)), {
      prompt_tokens: 30,
      completion_tokens: 5,
      total_tokens: 35,
      prompt_tokens_details: { cached_tokens: 16 },
      completion_tokens_details: { reasoning_tokens: 2 },
    });
  });

  test('whitespace variants are recognised; total computed when missing', () => {
    const spaced = '{ "choices" : [ ], "usage": { "prompt_tokens": 1, "completion_tokens": 2 } }';
    assert.deepEqual(usageOnlyChunk(ev(spaced)), { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 });
  });

  test('not usage-only: content chunks, usage:null chunks, finish chunks, [DONE], garbage', () => {
    const others = [
      '{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}],"usage":null}',
      '{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}',
      '{"id":"c","choices":[],"usage":null}',
      '{"id":"c","choices":[]}',
      '{"id":"c","delta":{"content":"\\"choices\\":[]"},"choices":[{"index":0}],"usage":{}}',
      '{"id":"c","meta":{"choices":[]},"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":1}}',
      '[DONE]',
      '{"choices":[], broken',
      '',
    ];
    for (const data of others) {
      assert.equal(isUsageOnlyChunk(ev(data)), false, data);
      assert.equal(usageOnlyChunk(ev(data)), null, data);
    }
  });

  test('dropping it from a same-dialect stream leaves the rest intact', () => {
    const upstream =
      formatSse(null, '{"id":"c","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}],"usage":null}') +
      formatSse(null, '{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}') +
      formatSse(null, USAGE_CHUNK) +
      formatSse(null, '[DONE]');
    const p = new SseParser();
    const events = [...p.push(Buffer.from(upstream)), ...p.end()];
    let captured = null;
    const kept: string[] = [];
    for (const e of events) {
      const u = usageOnlyChunk(e);
      if (u !== null) captured = u;
      else kept.push(e.data);
    }
    assert.equal(kept.length, 3);
    assert.equal(kept[2], '[DONE]');
    assert.deepEqual(captured, usageOnlyChunk(ev(USAGE_CHUNK)));
  });
});

describe('stream_options.include_usage helpers', () => {
  test('clientRequestedUsage', () => {
    assert.equal(clientRequestedUsage({ stream_options: { include_usage: true } }), true);
    assert.equal(clientRequestedUsage({ stream_options: { include_usage: false } }), false);
    assert.equal(clientRequestedUsage({ stream_options: null }), false);
    assert.equal(clientRequestedUsage({}), false);
  });

  test('withStreamUsage adds the option without mutating, and says so', () => {
    const req: OpenAIChatRequest = { model: 'm', messages: [{ role: 'user', content: 'x' }], stream: true, stream_options: { include_obfuscation: false } };
    const { request, added } = withStreamUsage(req);
    assert.equal(added, true);
    assert.deepEqual(request.stream_options, { include_obfuscation: false, include_usage: true });
    assert.deepEqual(req.stream_options, { include_obfuscation: false }, 'input untouched');
    assert.equal(request.messages, req.messages);

    const asked = { ...req, stream_options: { include_usage: true } };
    assert.deepEqual(withStreamUsage(asked), { request: asked, added: false });
    const notStreaming = { model: 'm', messages: [], stream: false };
    assert.deepEqual(withStreamUsage(notStreaming), { request: notStreaming, added: false });
  });

  test('withStreamUsageBytes splices the option into the bytes: same request, option first', () => {
    for (const text of ['{"model":"m","stream":true,"messages":[{"role":"user","content":"é {x}"}]}', ' \r\n\t{ "model" : "m", "stream": true, "messages": [] }\n']) {
      const out = withStreamUsageBytes(Buffer.from(text));
      assert.ok(out !== null);
      const parsed = JSON.parse(out.toString('utf8')) as Record<string, unknown>;
      assert.deepEqual(parsed, { stream_options: { include_usage: true }, ...(JSON.parse(text) as object) });
      assert.equal(Object.keys(parsed)[0], 'stream_options');
    }
    assert.equal(withStreamUsageBytes(Buffer.from('[1,2]')), null);
    assert.equal(withStreamUsageBytes(Buffer.from('')), null);
  });
});
