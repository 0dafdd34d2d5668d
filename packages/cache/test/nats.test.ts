/**
 * The NATS cache against a real nats-server: an answer cached by one replica is a hit on
 * another, from memory; expiry and the background delete; the byte bounds (memory and
 * bucket); oversize entries; streams byte for byte; team isolation; a server restart; no NATS.
 */
import { after, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { DiscardPolicy, type KV, type NatsConnection } from 'nats';
import { connectNats } from '@sightline/bus';
import { CACHE_BUCKET, CacheError, NatsResponseCache, type NatsResponseCacheOptions } from '@sightline/cache';
import { NatsServer, freePort, waitFor } from '../../../test/support/servers.js';
import { keyOf, response, sse } from './support.js';

const open: NatsResponseCache[] = [];
const servers: NatsServer[] = [];
const conns: NatsConnection[] = [];
after(async () => {
  for (const c of open) await c.close();
  for (const nc of conns) await nc.close();
  for (const s of servers) await s.dispose();
});

function cache(url: string, opts: Partial<NatsResponseCacheOptions> = {}): NatsResponseCache {
  const c = new NatsResponseCache({ url, ...opts });
  open.push(c);
  return c;
}

async function server(): Promise<NatsServer> {
  const s = await NatsServer.start();
  servers.push(s);
  return s;
}

/** A plain client on the bucket, to see what it holds. */
async function bucket(url: string): Promise<{ kv: KV; nc: NatsConnection }> {
  const nc = await connectNats(url, 'test-inspect');
  conns.push(nc);
  return { kv: await nc.jetstream().views.kv(CACHE_BUCKET), nc };
}

/** Milliseconds until `cond` holds, polled every millisecond; fails past `limitMs`. */
async function within(what: string, cond: () => boolean, limitMs: number): Promise<number> {
  const t0 = performance.now();
  await waitFor(what, cond, limitMs, 1);
  return performance.now() - t0;
}

test('two replicas: a put on one is a hit on the other within 2 s, answered from memory; JSON and streams byte for byte; never across teams', async (t: TestContext) => {
  const s = await server();
  const a = cache(s.url);
  const b = cache(s.url);
  await Promise.all([a.ready, b.ready]);
  assert.equal(a.status().synced, true);

  const json = Buffer.from('{"id":"chatcmpl-1","choices":[{"message":{"content":"é€😀"}}]}');
  const kJson = keyOf('alpha', Buffer.from('{"messages":"json"}'));
  const t0 = performance.now();
  a.put(kJson, { ...response(json), headers: { 'content-type': 'application/json', 'x-request-model': 'gpt-4o-mini' } });
  assert.ok(a.get(kJson, Date.now()) !== null, 'the writer hits at once');
  await waitFor('b hits the JSON answer', () => b.get(kJson, Date.now()) !== null, 2000, 1);
  const jsonMs = performance.now() - t0;
  const got = b.get(kJson, Date.now())!;
  assert.ok(got.body.equals(json));
  assert.deepEqual(got.headers, { 'content-type': 'application/json', 'x-request-model': 'gpt-4o-mini' });
  assert.equal(got.status, 200);
  assert.equal(got.stream, false);

  // A stream: multibyte text and, to be sure nothing is treated as text, random bytes too.
  const stream = Buffer.concat([sse(300), randomBytes(4096)]);
  const kStream = keyOf('alpha', Buffer.from('{"messages":"stream","stream":true}'), true);
  a.put(kStream, response(stream, { stream: true }));
  const streamMs = await within('b hits the stream', () => b.get(kStream, Date.now()) !== null, 2000);
  const back = b.get(kStream, Date.now())!;
  assert.equal(back.stream, true);
  assert.equal(back.body.length, stream.length);
  assert.ok(back.body.equals(stream), 'the stream is the same, byte for byte');

  // The same request from another team has another key: never a hit, on either replica.
  const kBeta = keyOf('beta', Buffer.from('{"messages":"json"}'));
  assert.notEqual(kBeta, kJson);
  assert.equal(a.get(kBeta, Date.now()), null);
  assert.equal(b.get(kBeta, Date.now()), null);

  // A get is a plain result (no promise): nothing on the request path waits.
  const r = b.get(kJson, Date.now());
  assert.equal(typeof (r as { then?: unknown }).then, 'undefined');
  await waitFor('both writes acknowledged', () => a.status().published === 2, 2000, 1);
  assert.equal(a.status().dropped, 0);
  t.diagnostic(`put on a → hit on b: JSON ${jsonMs.toFixed(1)} ms, 16 KiB stream ${streamMs.toFixed(1)} ms`);
});

test('writes in flight are bounded: puts past maxInFlight stay local and are counted as dropped', async () => {
  const s = await server();
  const a = cache(s.url, { maxInFlight: 10 });
  const b = cache(s.url);
  await Promise.all([a.ready, b.ready]);
  const keys = Array.from({ length: 25 }, (_, i) => keyOf('alpha', Buffer.from(`burst ${i}`)));
  for (const k of keys) a.put(k, response(Buffer.from(k)));
  assert.deepEqual([a.status().stored, a.status().dropped], [25, 15]);
  await waitFor('the first 10 are acknowledged', () => a.status().published === 10, 2000, 1);
  await waitFor('b holds them', () => b.status().entries === 10, 2000, 1);
  for (const k of keys.slice(0, 10)) assert.ok(b.get(k, Date.now()) !== null);
  for (const k of keys.slice(10)) assert.equal(b.get(k, Date.now()), null);
  for (const k of keys) assert.ok(a.get(k, Date.now()) !== null, 'every answer is a hit where it was stored');
  // Once acknowledged, the bound is free again.
  const k = keyOf('alpha', Buffer.from('after the burst'));
  a.put(k, response(Buffer.from('x')));
  await waitFor('b hits', () => b.get(k, Date.now()) !== null, 2000, 1);
});

test('writes wait writeDelayMs to go out with the ones after them; a burst of half of maxInFlight goes at once', async () => {
  const s = await server();
  const a = cache(s.url, { writeDelayMs: 300 });
  const b = cache(s.url);
  const c = cache(s.url, { writeDelayMs: 60_000, maxInFlight: 4 });
  await Promise.all([a.ready, b.ready, c.ready]);
  const k1 = keyOf('alpha', Buffer.from('delayed 1'));
  const k2 = keyOf('alpha', Buffer.from('delayed 2'));
  const t0 = performance.now();
  a.put(k1, response(Buffer.from('one')));
  await new Promise((r) => setTimeout(r, 100));
  a.put(k2, response(Buffer.from('two')));
  assert.equal(a.get(k1, Date.now())?.body.toString(), 'one', 'a hit where it was stored, at once');
  assert.deepEqual([a.status().published, b.get(k1, Date.now())], [0, null], 'nothing published within the delay');
  await waitFor('both acknowledged', () => a.status().published === 2, 3000, 1);
  const waited = performance.now() - t0;
  assert.ok(waited >= 250, `published after ${waited.toFixed(0)} ms`);
  await waitFor('b holds both', () => b.get(k1, Date.now()) !== null && b.get(k2, Date.now()) !== null, 2000, 1);
  // c waits a minute, unless its queue reaches half its in-flight bound.
  c.put(keyOf('alpha', Buffer.from('burst a')), response(Buffer.from('a')));
  c.put(keyOf('alpha', Buffer.from('burst b')), response(Buffer.from('b')));
  await waitFor('the burst acknowledged without the minute', () => c.status().published === 2, 3000, 1);
  assert.equal(c.status().dropped, 0);
  assert.throws(() => new NatsResponseCache({ url: 'nats://h', writeDelayMs: -1 }), (e: unknown) => e instanceof CacheError && e.field === 'writeDelayMs');
});

test('a replica started later reads the bucket before it is ready', async () => {
  const s = await server();
  const a = cache(s.url);
  await a.ready;
  const keys = Array.from({ length: 50 }, (_, i) => keyOf('alpha', Buffer.from(`request ${i}`)));
  for (const k of keys) a.put(k, response(Buffer.from(`answer for ${k}`)));
  await waitFor('all published', () => a.status().published === keys.length, 5000, 1);
  const c = cache(s.url);
  await c.ready;
  assert.equal(c.status().synced, true);
  for (const k of keys) assert.equal(c.get(k, Date.now())?.body.toString(), `answer for ${k}`);
  assert.equal(c.status().entries, keys.length);
});

test('expiry: checked on get on every replica; the expired entry is deleted from the bucket in the background, a newer answer is not', async () => {
  const s = await server();
  const a = cache(s.url, { sweepIntervalMs: 20 });
  const b = cache(s.url, { sweepIntervalMs: 20 });
  await Promise.all([a.ready, b.ready]);
  const { kv } = await bucket(s.url);

  const k = keyOf('alpha', Buffer.from('expiring'));
  const now = Date.now();
  a.put(k, response(Buffer.from('soon gone'), { storedAtMs: now, ttlMs: 800 }));
  await waitFor('b hits', () => b.get(k, now) !== null, 2000, 1);
  // Both replicas find it expired at once, so both want to delete it from the bucket.
  assert.equal(a.get(k, now + 800), null, 'past expiresAtMs: a miss, whatever the bucket holds');
  assert.equal(b.get(k, now + 800), null);
  assert.equal(b.status().expired, 1);

  await waitFor('the bucket no longer holds the entry', async () => {
    const e = await kv.get(k);
    return e === null || e.operation !== 'PUT';
  }, 5000, 20);
  await waitFor('both replicas dropped it from memory', () => a.status().entries === 0 && b.status().entries === 0, 2000, 5);
  const purged = a.status().purged + b.status().purged;
  assert.equal(purged, 1, 'one replica deleted it; the other delete lost on the revision check');

  // A new answer for the same key, stored after the old one expired, survives the sweeps.
  a.put(k, response(Buffer.from('fresh'), { ttlMs: 60_000 }));
  await waitFor('b hits the fresh answer', () => b.get(k, Date.now())?.body.toString() === 'fresh', 2000, 1);
  // Proof that sweeps ran since: a short-lived entry stored after it is deleted from the bucket.
  const kShort = keyOf('alpha', Buffer.from('short'));
  a.put(kShort, response(Buffer.from('x'), { ttlMs: 100 }));
  await waitFor('the short-lived entry is deleted from the bucket', async () => {
    const x = await kv.get(kShort);
    return x !== null && x.operation !== 'PUT';
  }, 5000, 20);
  const e = await kv.get(k);
  assert.equal(e?.operation, 'PUT');
  assert.equal(b.get(k, Date.now())?.body.toString(), 'fresh');
  // An entry already expired when a replica reads the bucket is neither held nor returned.
  const k2 = keyOf('alpha', Buffer.from('expired on arrival'));
  a.put(k2, response(Buffer.from('x'), { storedAtMs: Date.now() - 10_000, ttlMs: 5000 }));
  await waitFor('the stale entry is deleted from the bucket', async () => {
    const x = await kv.get(k2);
    return x !== null && x.operation !== 'PUT';
  }, 5000, 20);
  assert.equal(b.get(k2, Date.now()), null);
});

test('bounds: memory per replica (least recently used first) and the bucket (oldest dropped, new answers still accepted)', async () => {
  const s = await server();
  const entry = 24 + JSON.stringify({ 'content-type': 'application/json' }).length + 8000 + 43 + 256;
  const a = cache(s.url, { maxBytes: entry * 4, bucketMaxBytes: 64 * 1024 });
  const b = cache(s.url, { maxBytes: entry * 4, bucketMaxBytes: 64 * 1024 });
  await Promise.all([a.ready, b.ready]);
  const { nc } = await bucket(s.url);
  const jsm = await nc.jetstreamManager();
  const info = await jsm.streams.info(`KV_${CACHE_BUCKET}`);
  assert.equal(info.config.discard, DiscardPolicy.Old, 'a full bucket drops its oldest entries instead of refusing new ones');
  assert.equal(info.config.max_bytes, 64 * 1024);
  assert.equal(info.config.max_msgs_per_subject, 1, 'history 1');

  const keys = Array.from({ length: 30 }, (_, i) => keyOf('alpha', Buffer.from(`bounded ${i}`)));
  for (const k of keys) {
    a.put(k, response(Buffer.alloc(8000, k.charCodeAt(0))));
    await waitFor('published', () => a.status().published + a.status().dropped === keys.indexOf(k) + 1, 2000, 1);
  }
  assert.equal(a.status().dropped, 0, 'every answer was accepted by the bucket, full or not');
  await waitFor('b saw the last one', () => b.get(keys[29]!, Date.now()) !== null, 2000, 1);
  for (const c of [a, b]) {
    const st = c.status();
    assert.ok(st.bytes <= st.maxBytes, `${st.bytes} bytes held, bound ${st.maxBytes}`);
    assert.equal(st.entries, 4);
    assert.ok(st.evicted >= 26);
  }
  assert.equal(b.get(keys[0]!, Date.now()), null, 'the oldest is gone from memory');
  const after = await jsm.streams.info(`KV_${CACHE_BUCKET}`);
  assert.ok(after.state.bytes <= 64 * 1024, `the bucket holds ${after.state.bytes} bytes`);
  assert.ok(after.state.messages < 30 && after.state.messages >= 6, `${after.state.messages} entries in the bucket`);

  // A replica started now holds what the bucket kept, within its own bound.
  const c = cache(s.url, { maxBytes: entry * 100 });
  await c.ready;
  assert.equal(c.status().entries, after.state.messages);
  assert.ok(c.get(keys[29]!, Date.now()) !== null);
  assert.equal(c.get(keys[0]!, Date.now()), null);
});

test('entries larger than the server max_payload (1 MiB) are not cached, and counted; one that just fits is shared', async () => {
  const s = await server();
  const a = cache(s.url);
  const b = cache(s.url);
  await Promise.all([a.ready, b.ready]);
  assert.equal(a.status().maxEntryBytes, 1024 * 1024, "the server's max_payload");
  const fits = 1024 * 1024 - 24 - JSON.stringify({ 'content-type': 'application/json' }).length;
  const kBig = keyOf('alpha', Buffer.from('big'));
  a.put(kBig, response(randomBytes(fits + 1)));
  assert.equal(a.get(kBig, Date.now()), null, 'not in memory either');
  assert.deepEqual([a.status().oversize, a.status().stored], [1, 0]);

  const kFits = keyOf('alpha', Buffer.from('fits'));
  const body = randomBytes(fits);
  a.put(kFits, response(body));
  await waitFor('b hits the largest entry', () => b.get(kFits, Date.now()) !== null, 5000, 1);
  assert.ok(b.get(kFits, Date.now())!.body.equals(body));
  // `published` counts JetStream's acknowledgement, which may come after b saw the entry on its watch.
  await waitFor("a's write acknowledged or dropped", () => a.status().published + a.status().dropped > 0, 5000, 1);
  assert.deepEqual([a.status().published, a.status().dropped], [1, 0]);

  // A smaller bound of our own applies below the server's.
  const small = cache(s.url, { maxEntryBytes: 10_000 });
  await small.ready;
  small.put(keyOf('alpha', Buffer.from('m')), response(Buffer.alloc(10_000)));
  assert.deepEqual([small.status().maxEntryBytes, small.status().oversize], [10_000, 1]);
});

test('NATS restart: gets answer from memory while it is down, puts stay local and are counted, the watch resumes after', async (t: TestContext) => {
  const s = await server();
  const logs: string[] = [];
  const a = cache(s.url, { log: (m) => logs.push(m) });
  const b = cache(s.url);
  await Promise.all([a.ready, b.ready]);
  const k1 = keyOf('alpha', Buffer.from('before'));
  a.put(k1, response(Buffer.from('one')));
  await waitFor('b hits', () => b.get(k1, Date.now()) !== null, 2000, 1);

  await s.stop();
  await waitFor('both notice', () => !a.status().synced && !b.status().synced, 5000);
  assert.notEqual(a.status().error, null, 'status says NATS is away');
  assert.equal(b.get(k1, Date.now())?.body.toString(), 'one', 'gets answer from memory');
  const k2 = keyOf('alpha', Buffer.from('during'));
  a.put(k2, response(Buffer.from('two')));
  assert.equal(a.status().dropped, 1, 'not published: counted');
  assert.equal(a.get(k2, Date.now())?.body.toString(), 'two', 'kept in the process that stored it');
  assert.equal(b.get(k2, Date.now()), null);
  assert.ok(logs.some((m) => m.includes('disconnected')));

  const restarted = performance.now();
  await s.start();
  await waitFor('both sync again', () => a.status().synced && b.status().synced, 15_000);
  t.diagnostic(`both replicas re-synced ${(performance.now() - restarted).toFixed(0)} ms after nats-server was started again (start-up included)`);
  assert.equal(a.status().error, null);
  const k3 = keyOf('alpha', Buffer.from('after'));
  const ms = performance.now();
  a.put(k3, response(Buffer.from('three')));
  await waitFor('b hits an answer cached after the restart', () => b.get(k3, Date.now()) !== null, 2000, 1);
  t.diagnostic(`put → hit after the restart: ${(performance.now() - ms).toFixed(1)} ms`);
  assert.equal(b.get(k1, Date.now())?.body.toString(), 'one', 'entries from before the restart are still answered');
});

test('no NATS: ready after the start timeout, not synced, answers stored here only; options checked', async () => {
  const port = await freePort();
  const c = cache(`nats://127.0.0.1:${port}`, { startTimeoutMs: 300 });
  const t0 = performance.now();
  await c.ready;
  assert.ok(performance.now() - t0 < 2000);
  const st = c.status();
  assert.deepEqual([st.source, st.synced], ['nats', false]);
  assert.notEqual(st.error, null, 'the connection error is reported');
  const k = keyOf('alpha', Buffer.from('x'));
  c.put(k, response(Buffer.from('local')));
  assert.equal(c.get(k, Date.now())?.body.toString(), 'local');
  assert.deepEqual([c.status().stored, c.status().dropped, c.status().published], [1, 1, 0]);
  assert.throws(() => new NatsResponseCache({ url: 'nats://a:b@h1,nats://c:d@h2' }), (e: unknown) => e instanceof CacheError && e.field === 'url');
  assert.throws(() => new NatsResponseCache({ url: 'nats://h', bucketMaxBytes: -1 }), (e: unknown) => e instanceof CacheError && e.field === 'bucketMaxBytes');
});
