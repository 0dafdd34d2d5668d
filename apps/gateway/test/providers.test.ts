/**
 * The upstream request's headers (Upstream.headers): a flat name/value list, as undici's
 * dispatch takes it. The provider's base headers, then the request's own; each name once.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ProviderConfig } from '@sightline/config';
import { Upstream } from '../src/providers.js';

function provider(type: ProviderConfig['type'], extra: Partial<ProviderConfig> = {}): Upstream {
  return new Upstream({
    name: type,
    type,
    origin: 'http://127.0.0.1:9',
    basePath: '/v1',
    apiKey: '',
    headers: {},
    connectTimeoutMs: 1000,
    headersTimeoutMs: 1000,
    bodyTimeoutMs: 1000,
    http2: false,
    apiVersion: '2024-10-21',
    ...extra,
  } as ProviderConfig);
}

/** The list as pairs, checking that no name comes twice. */
function pairs(list: string[]): [string, string][] {
  assert.equal(list.length % 2, 0);
  const out: [string, string][] = [];
  for (let i = 0; i < list.length; i += 2) out.push([list[i]!, list[i + 1]!]);
  assert.equal(new Set(out.map(([n]) => n)).size, out.length, `a name twice in ${JSON.stringify(list)}`);
  return out;
}

test('OpenAI: the client bearer and OpenAI headers pass; a value set per request replaces a configured header of the same name', () => {
  const up = provider('openai', { headers: { 'x-extra': '1', authorization: 'Bearer configured-extra' } });
  const h = pairs(up.headers({ authorization: 'Bearer sk-client', 'openai-project': 'proj', 'x-other': 'dropped' }, 'openai', 'tp-1'));
  assert.deepEqual(h, [
    ['content-type', 'application/json'],
    ['x-extra', '1'],
    ['authorization', 'Bearer sk-client'],
    ['traceparent', 'tp-1'],
    ['openai-project', 'proj'],
  ]);
});

test('Anthropic: the client version replaces the default one; an OpenAI client bearer becomes x-api-key', () => {
  const up = provider('anthropic');
  assert.deepEqual(pairs(up.headers({ 'x-api-key': 'k', 'anthropic-version': '2024-01-01', 'anthropic-beta': 'b' }, 'anthropic', 'tp')), [
    ['content-type', 'application/json'],
    ['anthropic-version', '2024-01-01'],
    ['traceparent', 'tp'],
    ['x-api-key', 'k'],
    ['anthropic-beta', 'b'],
  ]);
  assert.deepEqual(pairs(up.headers({ authorization: 'Bearer k2' }, 'openai', 'tp')), [
    ['content-type', 'application/json'],
    ['anthropic-version', '2023-06-01'],
    ['traceparent', 'tp'],
    ['x-api-key', 'k2'],
  ]);
});

test('a configured key is sent and the caller\'s credentials are not; each call gets its own list', () => {
  const up = provider('openai', { apiKey: 'sk-configured' });
  const a = up.headers({ authorization: 'Bearer sk-client', 'x-api-key': 'x' }, 'openai', 'tp-a');
  const b = up.headers({}, 'openai', 'tp-b');
  assert.deepEqual(pairs(a), [
    ['content-type', 'application/json'],
    ['authorization', 'Bearer sk-configured'],
    ['traceparent', 'tp-a'],
  ]);
  assert.equal(pairs(b).find(([n]) => n === 'traceparent')![1], 'tp-b');
  // With authentication on (passClientCredentials false) the caller's credential is a Sightline key: it never goes upstream.
  const closed = new Upstream({ ...provider('openai').config }, false);
  assert.deepEqual(pairs(closed.headers({ authorization: 'Bearer sk-client' }, 'openai', 'tp')), [
    ['content-type', 'application/json'],
    ['traceparent', 'tp'],
  ]);
});
