/**
 * The in-process cache (embedded mode) and the pieces both caches share: the binary frame,
 * expiry on read, the byte bound (least recently used first), oversize and malformed entries.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { CacheError, cacheKey, decodeFrame, encodeFrame, MemoryResponseCache, type CachedResponse } from '@sightline/cache';
import { waitFor } from '../../../test/support/servers.js';
import { keyOf, response, sse } from './support.js';

test('binary frame: a round trip keeps every field and every body byte (random bytes, multibyte SSE, empty)', () => {
  const now = Date.now();
  const bodies = [Buffer.alloc(0), randomBytes(70_001), sse(50), Buffer.from('{"x":"é€😀"}')];
  for (const body of bodies) {
    const r: CachedResponse = { status: 201, headers: { 'content-type': 'text/event-stream; charset=utf-8', 'x-note': 'é😀' }, body, stream: true, storedAtMs: now + 0.5, expiresAtMs: now + 600_000 };
    const frame = encodeFrame(r);
    // A frame inside a larger buffer (as a message in a socket chunk): decoded from its view, copied out.
    const chunk = Buffer.concat([Buffer.from('junk'), frame, Buffer.from('more')]);
    const view = chunk.subarray(4, 4 + frame.length);
    const back = decodeFrame(view);
    assert.ok(back !== null);
    assert.deepEqual({ ...back, body: null }, { ...r, body: null });
    assert.ok(back.body.equals(body));
    chunk.fill(0);
    assert.ok(back.body.equals(body), 'the decoded body is a copy, not a view of the message buffer');
  }
  const good = encodeFrame(response(Buffer.from('x')));
  assert.equal(decodeFrame(good.subarray(0, 10)), null, 'truncated');
  assert.equal(decodeFrame(Buffer.concat([Buffer.from([9]), good.subarray(1)])), null, 'unknown version');
  const badHeaders = Buffer.from(good);
  badHeaders.writeUInt32BE(good.length, 20);
  assert.equal(decodeFrame(badHeaders), null, 'header length past the end');
  assert.equal(decodeFrame(Buffer.from('{"status":200}')), null, 'not a frame');
});

test('memory: a put is a hit at once, for the same key only; a stream body comes back byte for byte', async () => {
  const c = new MemoryResponseCache();
  const body = sse(200);
  const k = keyOf('alpha', body, true);
  c.put(k, response(body, { stream: true }));
  const got = c.get(k, Date.now());
  assert.ok(got !== null);
  assert.ok(got.body.equals(body));
  assert.equal(got.stream, true);
  assert.equal(got.headers['content-type'], 'text/event-stream');
  assert.equal(c.get(keyOf('beta', body, true), Date.now()), null, 'another team, same request: a miss');
  assert.equal(c.get(keyOf('alpha', body, false), Date.now()), null, 'the same body without stream: a miss');
  const s = c.status();
  assert.deepEqual([s.source, s.synced, s.hits, s.misses, s.stored, s.entries], ['memory', true, 1, 2, 1, 1]);
  await c.close();
});

test('memory: expiry is checked on get; the sweep removes expired entries', async () => {
  const c = new MemoryResponseCache({ sweepIntervalMs: 20 });
  const now = Date.now();
  const k = keyOf('alpha', Buffer.from('a'));
  c.put(k, response(Buffer.from('answer'), { storedAtMs: now, ttlMs: 1000 }));
  assert.ok(c.get(k, now + 999) !== null);
  assert.equal(c.get(k, now + 1000), null, 'expired at expiresAtMs');
  assert.equal(c.status().expired, 1);
  assert.equal(c.status().entries, 0, 'an expired entry found by get is removed');

  const k2 = keyOf('alpha', Buffer.from('b'));
  c.put(k2, response(Buffer.from('short-lived'), { storedAtMs: Date.now(), ttlMs: 30 }));
  assert.equal(c.status().entries, 1);
  await waitFor('the sweep removes the expired entry', () => c.status().entries === 0, 2000, 10);
  assert.equal(c.status().expired, 1, 'removed by the sweep, not by a get');
  await c.close();
});

test('memory: bounded in bytes, least recently used evicted first', async () => {
  const one = 10_000;
  // Accounted bytes per entry: frame (24 + headers JSON + body) + key (43) + 256.
  const perEntry = 24 + JSON.stringify({ 'content-type': 'application/json' }).length + one + 43 + 256;
  const c = new MemoryResponseCache({ maxBytes: perEntry * 3 });
  const keys = [0, 1, 2, 3, 4].map((i) => keyOf('alpha', Buffer.from(`request ${i}`)));
  for (const k of keys.slice(0, 3)) c.put(k, response(Buffer.alloc(one, 1)));
  assert.equal(c.status().bytes, perEntry * 3);
  assert.ok(c.get(keys[0]!, Date.now()) !== null); // 0 is now the most recently used
  c.put(keys[3]!, response(Buffer.alloc(one, 1)));
  assert.equal(c.get(keys[1]!, Date.now()), null, 'the least recently used went first');
  assert.ok(c.get(keys[0]!, Date.now()) !== null, 'the entry just read stayed');
  c.put(keys[4]!, response(Buffer.alloc(one, 1)));
  assert.equal(c.get(keys[2]!, Date.now()), null);
  const s = c.status();
  assert.equal(s.evicted, 2);
  assert.equal(s.entries, 3);
  assert.ok(s.bytes <= s.maxBytes);
  // Replacing an entry does not count it twice.
  c.put(keys[4]!, response(Buffer.alloc(one, 2)));
  assert.equal(c.status().bytes, perEntry * 3);
  assert.equal(c.get(keys[4]!, Date.now())?.body[0], 2);
  await c.close();
});

test('memory: oversize and malformed entries are refused and counted; options are checked', async () => {
  const c = new MemoryResponseCache({ maxEntryBytes: 4096 });
  const k = keyOf('alpha', Buffer.from('x'));
  c.put(k, response(Buffer.alloc(5000)));
  assert.equal(c.get(k, Date.now()), null);
  c.put(k, response(Buffer.alloc(4096 - 24 - JSON.stringify({ 'content-type': 'application/json' }).length)));
  assert.ok(c.get(k, Date.now()) !== null, 'an entry of exactly maxEntryBytes is kept');
  const now = Date.now();
  c.put('not a key!', response(Buffer.from('x')));
  c.put(k, { ...response(Buffer.from('x')), status: 99 });
  c.put(k, { ...response(Buffer.from('x')), expiresAtMs: now - 1, storedAtMs: now });
  c.put(k, { ...response(Buffer.from('x')), headers: { a: 1 } as unknown as Record<string, string> });
  const s = c.status();
  assert.deepEqual([s.oversize, s.invalid, s.stored], [1, 4, 1]);
  await c.close();
  assert.throws(() => new MemoryResponseCache({ maxBytes: 0 }), (e: unknown) => e instanceof CacheError && e.code === 'SL_CACHE_OPTION' && e.field === 'maxBytes');
  // An entry larger than the whole memory bound is refused as oversize, not stored and evicted at once.
  const small = new MemoryResponseCache({ maxBytes: 1000 });
  small.put(cacheKey({ team: 't', dialect: 'openai', path: '/', provider: 'p', model: 'm', stream: false, body: Buffer.alloc(0) }), response(Buffer.alloc(2000)));
  assert.deepEqual([small.status().oversize, small.status().entries, small.status().evicted], [1, 0, 0]);
  await small.close();
});
