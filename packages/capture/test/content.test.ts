import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RequestRecord, contentOf, keepContent, placeholderBase64, type ContentOptions } from '@sightline/capture';

const noRedact: ContentOptions['redactSecrets'] = (text) => ({ text, counts: {} });
const opts = (maxBytes = 1000): ContentOptions => ({ maxBytes, keepBase64: false, redactSecrets: noRedact });

test('long base64 strings become a placeholder with their media type and size; the JSON stays valid', () => {
  const png = 'iVBORw0KGgo' + 'A'.repeat(4000);
  const body = JSON.stringify({
    model: 'm',
    messages: [
      { role: 'user', content: [{ type: 'image_url', image_url: { url: `data:image/jpeg;base64,${'B'.repeat(8000)}` } }, { type: 'text', text: 'what is this?' }] },
      { role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: png } }] },
    ],
    note: 'word '.repeat(1000),
    slashed: '/9j/' + 'C/D'.repeat(2000),
  }).replace(/C\/D/g, 'C\\/D');
  const { bytes, replaced } = placeholderBase64(Buffer.from(body));
  assert.equal(replaced, 3);
  const parsed = JSON.parse(bytes.toString('utf8')) as { messages: { content: { image_url?: { url: string }; source?: { data: string }; text?: string }[] }[]; note: string; slashed: string };
  assert.equal(parsed.messages[0]!.content[0]!.image_url!.url, '[base64 image/jpeg 6000 bytes]');
  assert.equal(parsed.messages[0]!.content[1]!.text, 'what is this?');
  assert.equal(parsed.messages[1]!.content[0]!.source!.data, `[base64 image/png ${Math.floor((png.length * 3) / 4)} bytes]`);
  assert.equal(parsed.note, 'word '.repeat(1000), 'long text that is not base64 stays');
  assert.match(parsed.slashed, /^\[base64 image\/jpeg \d+ bytes\]$/);
});

test('text, short strings and prose with spaces are kept as they are', () => {
  const body = Buffer.from(JSON.stringify({ a: 'hello world '.repeat(500), b: 'short', c: 'Zm9v' }));
  const { bytes, replaced } = placeholderBase64(body);
  assert.equal(replaced, 0);
  assert.equal(bytes, body, 'the input itself when nothing is replaced');
});

test('content is bounded per side, flagged when cut, and absent under policy none', () => {
  const r = new RequestRecord();
  r.contentPolicy = 'full';
  r.requestBody = Buffer.from(JSON.stringify({ t: 'é'.repeat(2000) }));
  for (let i = 0; i < 100; i++) keepContent(r, `data: chunk ${i}\n\n`, 1000);
  keepContent(r, Buffer.from('tail'), 1000);
  assert.ok(r.contentOutKept < 1100, `kept ${r.contentOutKept}`);
  const c = contentOf(r, opts())!;
  assert.equal(c.requestTruncated, true);
  assert.equal(c.requestBytes, r.requestBody.length);
  assert.ok(Buffer.byteLength(c.request) <= 1002, 'cut at the bound (a split character may become U+FFFD)');
  assert.equal(c.responseTruncated, true);
  assert.equal(c.responseBytes, r.contentOutBytes);
  assert.ok(c.response.startsWith('data: chunk 0\n\n'));
  const none = new RequestRecord();
  none.contentPolicy = 'none';
  none.requestBody = Buffer.from('{"secret":1}');
  keepContent(none, 'x', 1000);
  assert.equal(none.contentOut, null);
  assert.equal(contentOf(none, opts()), null);
});

test('secrets are replaced on both sides, with their counts', () => {
  const r = new RequestRecord();
  r.contentPolicy = 'redacted';
  r.requestBody = Buffer.from('{"k":"sk-proj-LEAK"}');
  keepContent(r, 'echo sk-proj-LEAK', 1000);
  const c = contentOf(r, { ...opts(), redactSecrets: (t) => ({ text: t.replaceAll('sk-proj-LEAK', '[SECRET]'), counts: { secret: t.split('sk-proj-LEAK').length - 1 } }) })!;
  assert.equal(c.policy, 'redacted');
  assert.ok(!c.request.includes('LEAK') && !c.response.includes('LEAK'));
  assert.deepEqual(c.redactions, { secret: 2 });
});
