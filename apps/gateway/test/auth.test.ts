/**
 * Authentication at the gateway (issue 10): Sightline keys from the official SDKs, refusals
 * in each dialect with a failed `auth` stage, the key's team and id captured whatever the
 * caller claims, and no Sightline key ever sent upstream. A real mock provider; the
 * in-process directory (the NATS one is tested in packages/directory and end to end).
 */
import { test, before, after, beforeEach } from 'node:test';
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
let open: GatewayHandle;
const cap = new CapturedBus();
const openCap = new CapturedBus();
const ADMIN = 'admin-token-0123456789abcdef';
const directory = new MemoryDirectory({ hasher: KeyHasher.fromAdminToken(ADMIN) });
const keys: Record<string, string> = {};
const ids: Record<string, string> = {};

before(async () => {
  mock = await startMock();
  const yaml = (apiKeys: boolean) => `
gateway: { host: 127.0.0.1, port: 0 }
providers:
  mock: { type: openai-compatible, base_url: "${mock.url}/v1" ${apiKeys ? ', api_key: sk-configured-openai' : ''} }
  claude: { type: anthropic, base_url: "${mock.url}" ${apiKeys ? ', api_key: sk-ant-configured' : ''} }
routes:
  - { match: "gpt-*", provider: mock }
  - { match: "claude-*", provider: claude }
capture: { flush_interval_ms: 5 }
`;
  const now = Date.now();
  const make = async (name: string, body: Record<string, unknown>) => {
    const { record, secret } = await directory.createKey(parseKeyInput({ name, ...body }, now), now);
    keys[name] = secret;
    ids[name] = record.id;
  };
  await make('alpha', { team: 'alpha', scopes: ['gateway'] });
  await make('gptonly', { team: 'alpha', scopes: ['gateway'], models: ['gpt-*'] });
  await make('reader', { team: 'alpha', scopes: ['read'] });
  await make('beta', { team: 'beta', scopes: ['gateway', 'read'] });
  await make('revoked', { team: 'beta', scopes: ['gateway'] });
  await directory.revokeKey(ids.revoked!, now);
  gw = await startGateway({ config: parseConfig(yaml(true), 'auth.yaml'), publisher: cap.bus, instance: 'gw-auth', directory });
  open = await startGateway({ config: parseConfig(yaml(false), 'open.yaml'), publisher: openCap.bus, instance: 'gw-open' });
});

after(async () => {
  await Promise.all([gw.close(2000), open.close(2000)]);
  await mock.close();
});

beforeEach(() => mock.reset());

const oa = (apiKey: string) => new OpenAI({ apiKey, baseURL: `${gw.url}/v1`, maxRetries: 0 });
const an = (apiKey: string) => new Anthropic({ apiKey, baseURL: gw.url, maxRetries: 0 });
const chat = (c: OpenAI, model = 'gpt-4o-mini') => c.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] });
const msg = (c: Anthropic, model = 'claude-3-5-haiku') => c.messages.create({ model, max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] });

test('a valid key is served; the captured team and key id are the key\'s, whatever the team header says; no Sightline key goes upstream', async () => {
  const { response } = await oa(keys.alpha!).chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }, { headers: { 'x-sightline-team': 'beta' } }).withResponse();
  const a = await an(keys.beta!).messages.create({ model: 'claude-3-5-haiku', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(a.type, 'message');
  const { request } = await cap.captured(response.headers.get('x-sightline-trace-id')!);
  assert.equal(request.team, 'alpha');
  assert.equal(request.key_id, ids.alpha);
  const upstream = mock.lastRequests();
  assert.equal(upstream.length, 2);
  for (const r of upstream) {
    const seen = JSON.stringify(r.headers);
    assert.ok(!seen.includes('sl-'), `a Sightline key reached the provider: ${seen}`);
  }
  assert.equal(upstream[0]!.headers.authorization, 'Bearer sk-configured-openai');
  assert.equal(upstream[1]!.headers['x-api-key'], 'sk-ant-configured');
});

test('missing, unknown, revoked keys and the admin token: 401 in each dialect, captured with a failed auth stage', async () => {
  const none = await fetch(`${gw.url}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'claude-3-5-haiku', max_tokens: 5, messages: [] }) });
  assert.equal(none.status, 401);
  assert.deepEqual(((await none.json()) as { error: { type: string } }).error.type, 'authentication_error');
  for (const key of ['sl-' + 'A'.repeat(43), keys.revoked!, ADMIN]) {
    await assert.rejects(chat(oa(key)), (e: unknown) => e instanceof OpenAI.AuthenticationError && e.status === 401, `openai ${key.slice(0, 8)}`);
    await assert.rejects(msg(an(key)), (e: unknown) => e instanceof Anthropic.AuthenticationError && e.status === 401, `anthropic ${key.slice(0, 8)}`);
  }
  assert.equal(mock.stats().requests, 0, 'nothing reached the provider');
  const r = await fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${keys.revoked}` }, body: JSON.stringify({ model: 'gpt-4o-mini', messages: [] }) });
  const body = (await r.json()) as { error: { code: string; message: string } };
  assert.equal(body.error.code, 'invalid_api_key');
  assert.match(body.error.message, /revoked/);
  const { request, spans } = await cap.captured(r.headers.get('x-sightline-trace-id')!);
  assert.equal(request.http_status, 401);
  assert.equal(request.error_type, 'invalid_api_key');
  assert.equal(spans.find((s) => s.status_code === 'ERROR' && s.is_root === 0)?.name, 'auth');
});

test('a key without the gateway scope, or asking for a model outside its globs: 403 in each dialect', async () => {
  await assert.rejects(chat(oa(keys.reader!)), (e: unknown) => e instanceof OpenAI.PermissionDeniedError);
  await assert.rejects(msg(an(keys.reader!)), (e: unknown) => e instanceof Anthropic.PermissionDeniedError);
  assert.equal((await chat(oa(keys.gptonly!))).object, 'chat.completion');
  await assert.rejects(msg(an(keys.gptonly!)), (e: unknown) => e instanceof Anthropic.PermissionDeniedError && /may not use the model/.test(e.message));
  await assert.rejects(chat(oa(keys.gptonly!), 'claude-3-5-haiku'), (e: unknown) => e instanceof OpenAI.PermissionDeniedError);
  assert.equal(mock.stats().requests, 1);
});

test('a key revoked while in use stops at once', async () => {
  const now = Date.now();
  const { record, secret } = await directory.createKey(parseKeyInput({ team: 'gamma', name: 'tmp', scopes: ['gateway'] }, now), now);
  assert.equal((await chat(oa(secret))).object, 'chat.completion');
  await directory.revokeKey(record.id, Date.now());
  await assert.rejects(chat(oa(secret)), (e: unknown) => e instanceof OpenAI.AuthenticationError);
});

test('/v1/models takes a key and lists what it may use; /healthz says whether authentication is on', async () => {
  const unauth = await fetch(`${gw.url}/v1/models`);
  assert.equal(unauth.status, 401);
  const health = (await (await fetch(`${gw.url}/healthz`)).json()) as { authentication: string; directory: { keys: number } };
  assert.equal(health.authentication, 'on');
  assert.ok(health.directory.keys >= 5);
  const openHealth = (await (await fetch(`${open.url}/healthz`)).json()) as { authentication: string; warning: string };
  assert.equal(openHealth.authentication, 'off');
  assert.match(openHealth.warning, /anyone who can reach this port/);
});

test('with authentication off, the team header names the team and the caller\'s own key is passed through', async () => {
  const c = new OpenAI({ apiKey: 'sk-callers-own', baseURL: `${open.url}/v1`, maxRetries: 0 });
  const { response } = await c.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }, { headers: { 'x-sightline-team': 'beta' } }).withResponse();
  const { request } = await openCap.captured(response.headers.get('x-sightline-trace-id')!);
  assert.equal(request.team, 'beta');
  assert.equal(request.key_id, '');
  assert.equal(mock.lastRequests()[0]!.headers.authorization, 'Bearer sk-callers-own');
});
