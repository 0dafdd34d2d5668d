/**
 * cacheKey: every part of the request that the issue names changes the key, the team above
 * all; no two different requests can build the same hash input (seeded random splits).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cacheKey, KEY_PATTERN, type CacheKeyParts } from '@sightline/cache';
import { seeded } from '../../../test/support/seeded.js';

const base: CacheKeyParts = {
  team: 'alpha',
  dialect: 'openai',
  path: '/v1/chat/completions',
  provider: 'openai',
  model: 'gpt-4o-mini',
  stream: false,
  body: Buffer.from('{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}'),
};

test('the same request gives the same key: 43 base64url characters, a valid NATS KV key', () => {
  const k = cacheKey(base);
  assert.equal(k, cacheKey({ ...base, body: Buffer.from(base.body) }));
  assert.equal(k.length, 43);
  assert.match(k, KEY_PATTERN);
  assert.equal(cacheKey({ ...base, vary: [] }), k, 'an empty vary list is no vary list');
});

test('each part changes the key: team, dialect, path, provider, model, stream flag, any body byte, vary', () => {
  const k = cacheKey(base);
  const variants: CacheKeyParts[] = [
    { ...base, team: 'beta' },
    { ...base, team: 'Alpha' },
    { ...base, dialect: 'anthropic' },
    { ...base, path: '/v1/messages' },
    { ...base, provider: 'azure' },
    { ...base, model: 'gpt-4o' },
    { ...base, stream: true },
    { ...base, body: Buffer.from(base.body.toString().replace('hi', 'hI')) },
    { ...base, body: Buffer.from(base.body.toString().replace(':', ': ')) }, // exact bytes, not the same JSON
    { ...base, body: Buffer.concat([base.body, Buffer.from('\n')]) },
    { ...base, vary: ['2023-06-01'] },
    { ...base, vary: ['2023-06-01', ''] },
  ];
  const keys = new Set(variants.map(cacheKey));
  assert.equal(keys.size, variants.length, 'two variants share a key');
  assert.ok(!keys.has(k), 'a variant has the base key');
  // Every single-bit change of the body changes the key.
  for (let i = 0; i < base.body.length; i++) {
    const b = Buffer.from(base.body);
    b[i]! ^= 1 << i % 8;
    assert.notEqual(cacheKey({ ...base, body: b }), k, `flipping a bit of byte ${i}`);
  }
});

test('fields cannot run into each other or into the body (seeded random splits of the same characters)', () => {
  // Seeded: the same splits on every run.
  const random = seeded(12);
  const rnd = (n: number) => (random() * n) | 0;
  // One string of characters (field separators and digits included) cut at random into the
  // five fields and the body: different cuts are different requests and must give different keys.
  const text = 'a|3:b|c:12|j"x"|b{}';
  const seen = new Map<string, string>();
  for (let round = 0; round < 2000; round++) {
    const cuts = Array.from({ length: 5 }, () => rnd(text.length + 1)).sort((x, y) => x - y);
    const parts = [0, ...cuts, text.length].slice(0, 7);
    const piece = (i: number) => text.slice(parts[i], parts[i + 1]);
    const p: CacheKeyParts = { team: piece(0), dialect: 'openai', path: piece(1), provider: piece(2), model: piece(3), stream: false, body: Buffer.from(piece(4) + piece(5)), vary: [] };
    const id = JSON.stringify([p.team, p.path, p.provider, p.model, p.body.toString()]);
    const k = cacheKey(p);
    const before = seen.get(k);
    assert.ok(before === undefined || before === id, `${before} and ${id} share a key`);
    seen.set(k, id);
  }
  assert.ok(seen.size > 1000, `only ${seen.size} distinct splits were tried`);
});

test('a lone surrogate does not collide with U+FFFD (which is what UTF-8 would turn it into)', () => {
  assert.notEqual(cacheKey({ ...base, path: '/v1/x\uD800' }), cacheKey({ ...base, path: '/v1/x\uFFFD' }));
  assert.notEqual(cacheKey({ ...base, team: '\uDC00' }), cacheKey({ ...base, team: '\uFFFD' }));
  // A well-formed pair is hashed as itself.
  assert.equal(cacheKey({ ...base, model: 'm\uD83D\uDE00' }), cacheKey({ ...base, model: 'm😀' }));
});
