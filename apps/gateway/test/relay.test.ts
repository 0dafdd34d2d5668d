import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ScrubErrorRelay, UsageStripRelay } from '../src/relay.js';

test('provider error bodies relayed in the same dialect lose anything key-like', () => {
  const r = new ScrubErrorRelay();
  const head = r.head(401, { 'content-type': 'application/json', 'content-length': '120' });
  assert.equal(head.status, 401);
  assert.equal(head.headers['content-length'], undefined);
  assert.equal(r.data(Buffer.from('{"error":{"message":"Incorrect API key provided: sk-proj-abcdefghijklmnop1234. You can')), null);
  const out = r.end();
  assert.ok(!out.includes('sk-proj-abcdefghijklmnop1234'), out);
  assert.match(out, /\[redacted\]/);
});

test('the usage-only chunk is removed and every other event passes, split anywhere', () => {
  const stream =
    'data: {"choices":[{"index":0,"delta":{"content":"héllo"}}],"usage":null}\n\n' +
    'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}\n\n' +
    'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}\n\n' +
    'data: [DONE]\n\n';
  const bytes = Buffer.from(stream);
  for (let cut = 1; cut < bytes.length; cut += 7) {
    const r = new UsageStripRelay();
    r.head(200, {});
    const out = [r.data(bytes.subarray(0, cut)), r.data(bytes.subarray(cut)), r.end()].filter((x) => x !== null).join('');
    assert.ok(!out.includes('prompt_tokens'), `cut ${cut}`);
    assert.ok(out.includes('héllo') && out.includes('"finish_reason":"stop"') && out.endsWith('data: [DONE]\n\n'), `cut ${cut}: ${out}`);
  }
});
