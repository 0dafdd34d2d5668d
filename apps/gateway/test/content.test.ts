/**
 * Content capture at the gateway (issue 11): what each request's record carries on the bus —
 * the request as sent and the answer as received, secrets replaced, images as placeholders,
 * nothing at all for a team whose policy is `none` — and the attribution fields. A real mock
 * provider; records read from the in-process bus.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { parseConfig } from '@sightline/config';
import { KeyHasher, MemoryDirectory, parseKeyInput } from '@sightline/directory';
import { startGateway, type GatewayHandle } from '@sightline/app-gateway';
import { startMock, type MockServer } from '../../../bench/mock/server.js';
import { CapturedBus } from '../../../test/support/captured.js';

let mock: MockServer;
let gw: GatewayHandle;
const cap = new CapturedBus();
const directory = new MemoryDirectory({ hasher: new KeyHasher('content-test-hashing-secret') });
const keys: Record<string, string> = {};
/** A key shaped like a real OpenAI project key (the redactor looks for generated-looking keys). */
const LEAKED = 'sk-proj-' + 'Zx8kQ2vLm9TpR4wYb7NcJ1hG5sDf3aUe0iOq6'.repeat(2);

before(async () => {
  mock = await startMock({ chunks: 4 });
  const now = Date.now();
  for (const team of ['full', 'redacted', 'none'] as const) {
    await directory.putTeam(team, { content_capture: team }, now);
    keys[team] = (await directory.createKey(parseKeyInput({ team, name: 't', scopes: ['gateway'] }, now), now)).secret;
  }
  keys.default = (await directory.createKey(parseKeyInput({ team: 'plain', name: 't', scopes: ['gateway'] }, now), now)).secret;
  const config = parseConfig(
    `
gateway: { host: 127.0.0.1, port: 0 }
providers:
  mock: { type: openai-compatible, base_url: "${mock.url}/v1", api_key: sk-configured }
  claude: { type: anthropic, base_url: "${mock.url}", api_key: sk-ant-configured }
routes:
  - { match: "gpt-*", provider: mock }
  - { match: "claude-*", provider: claude }
capture: { flush_interval_ms: 5, content_max_bytes: 64kb }
`,
    'content.yaml',
  );
  gw = await startGateway({ config, publisher: cap.bus, instance: 'gw-content', directory });
});

after(async () => {
  await gw.close(2000);
  await mock.close();
});

const oa = (key: string) => new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
const an = (key: string) => new Anthropic({ apiKey: key, baseURL: gw.url, maxRetries: 0 });

test('JSON in the same dialect: the request as sent and the answer as received, with the end user, session and tags', async () => {
  const phrase = `phrase-${Date.now()}`;
  const { data, response } = await oa(keys.default!)
    .chat.completions.create({ model: 'gpt-4o-mini', user: 'user-42', messages: [{ role: 'user', content: `say ${phrase}` }] }, { headers: { 'x-sightline-session-id': 'sess-1', 'x-sightline-tag-feature': 'search', 'x-sightline-tag-env': 'prod' } })
    .withResponse();
  const rec = await cap.record(response.headers.get('x-sightline-trace-id')!);
  assert.ok(rec.content !== null);
  assert.equal(rec.content.policy, 'full');
  assert.ok(rec.content.request.includes(phrase));
  assert.deepEqual(JSON.parse(rec.content.response), JSON.parse(JSON.stringify(data)));
  assert.equal(rec.content.requestTruncated, false);
  assert.equal(rec.endUser, 'user-42');
  assert.equal(rec.sessionId, 'sess-1');
  assert.deepEqual(Object.fromEntries(rec.tagKeys.map((k, i) => [k, rec.tagValues[i]])), { feature: 'search', env: 'prod' });
});

test('a translated stream: the SSE text the client received, in its dialect; metadata.user_id is the end user', async () => {
  const stream = await an(keys.default!).messages.create({ model: 'gpt-4o-mini', max_tokens: 20, stream: true, metadata: { user_id: 'anthropic-user' }, messages: [{ role: 'user', content: 'hi' }] }).withResponse();
  let text = '';
  for await (const ev of stream.data) if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') text += ev.delta.text;
  const rec = await cap.record(stream.response.headers.get('x-sightline-trace-id')!);
  assert.equal(rec.endUser, 'anthropic-user');
  const sse = rec.content!.response;
  assert.match(sse, /^event: message_start\n/);
  assert.match(sse, /event: message_stop/);
  const deltas = [...sse.matchAll(/"text":"((?:[^"\\]|\\.)*)"/g)].map((m) => JSON.parse(`"${m[1]}"`) as string).join('');
  assert.equal(deltas, text);
});

test('secrets never leave the gateway in clear, whatever the policy; images travel as placeholders', async () => {
  const image = `data:image/png;base64,iVBORw0KGgo${'A'.repeat(20_000)}`;
  const { response } = await oa(keys.full!)
    .chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: [{ type: 'text', text: `my key is ${LEAKED}` }, { type: 'image_url', image_url: { url: image } }] }] })
    .withResponse();
  const rec = await cap.record(response.headers.get('x-sightline-trace-id')!);
  assert.ok(!rec.content!.request.includes(LEAKED));
  assert.match(rec.content!.request, /\[SECRET:openai\]/);
  assert.equal(rec.content!.redactions['secret:openai'], 1);
  assert.match(rec.content!.request, /\[base64 image\/png 15008 bytes\]/);
  assert.ok(!cap.messages.some((m) => m.includes(LEAKED)), 'no bus message holds the key');
});

test('policy none: no content and nothing of the prompt on the bus; redacted: content travels for the ingester to redact', async () => {
  const phrase = `private-${Date.now()}`;
  const none = await oa(keys.none!).chat.completions.create({ model: 'gpt-4o-mini', user: 'u', messages: [{ role: 'user', content: phrase }] }).withResponse();
  const red = await oa(keys.redacted!).chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `${phrase}-r mail me at a.b@example.com` }] }).withResponse();
  const rn = await cap.record(none.response.headers.get('x-sightline-trace-id')!);
  const rr = await cap.record(red.response.headers.get('x-sightline-trace-id')!);
  assert.equal(rn.content, null);
  assert.equal(rr.content?.policy, 'redacted');
  assert.ok(rr.content.request.includes(`${phrase}-r`));
  assert.ok(!cap.messages.some((m) => m.includes(`${phrase}"`) || m.includes(`${phrase}\\"`)), 'the none team\'s prompt is on no bus message');
});

test('a refused request keeps its body as far as it was read', async () => {
  const r = await fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${keys.default}` }, body: '{"model":"gpt-4o-mini","messages": [ {"oops"' });
  assert.equal(r.status, 400);
  const rec = await cap.record(r.headers.get('x-sightline-trace-id')!);
  assert.equal(rec.content?.request, '{"model":"gpt-4o-mini","messages": [ {"oops"');
  assert.match(rec.content.response, /not valid JSON/);
});
