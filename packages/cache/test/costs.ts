/**
 * What the cache costs on the request path, measured in this process (not a test: nothing is
 * asserted, numbers go to docs/cache.md). Run: `node --import tsx packages/cache/test/costs.ts`.
 *
 * - cacheKey per body size (and per KiB);
 * - get: hit and miss in a map of 10,000 entries;
 * - put: the part the caller waits for (memory, and NATS with a real nats-server);
 * - the bucket's value format: the binary frame against base64 in JSON, encode + decode.
 */
import { performance } from 'node:perf_hooks';
import { cacheKey, decodeFrame, encodeFrame, MemoryResponseCache, NatsResponseCache, type CachedResponse, type ResponseCache } from '@sightline/cache';
import { NatsServer, waitFor } from '../../../test/support/servers.js';

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

/** Median over `rounds` of the mean time per call (µs) of `n` calls. */
function measure(n: number, rounds: number, f: (i: number) => unknown): number {
  let sink = 0;
  for (let i = 0; i < n; i++) sink += f(i) === null ? 0 : 1; // warm-up
  const per: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const t0 = performance.now();
    for (let i = 0; i < n; i++) sink += f(i) === null ? 0 : 1;
    per.push(((performance.now() - t0) * 1000) / n);
  }
  if (sink < 0) console.log(sink);
  return median(per);
}

const sizes = [0, 1024, 16 * 1024, 64 * 1024, 512 * 1024];
const body = (n: number) => Buffer.from('x'.repeat(n));

console.log('cacheKey (sha256 over the fields and the body)');
console.log('| body | µs per key | µs per KiB beyond an empty body |');
console.log('|---|---|---|');
const empty = body(0);
const base = measure(20_000, 7, () => cacheKey({ team: 'alpha', dialect: 'openai', path: '/v1/chat/completions', provider: 'openai', model: 'gpt-4o-mini', stream: false, body: empty }));
for (const n of sizes) {
  const b = body(n);
  const iters = n >= 64 * 1024 ? 500 : 10_000;
  const us = measure(iters, 7, () => cacheKey({ team: 'alpha', dialect: 'openai', path: '/v1/chat/completions', provider: 'openai', model: 'gpt-4o-mini', stream: false, body: b }));
  console.log(`| ${n / 1024} KiB | ${us.toFixed(2)} | ${n === 0 ? '—' : ((us - base) / (n / 1024)).toFixed(3)} |`);
}

console.log('\nget in a map of 10,000 entries (1 KiB bodies)');
const cache = new MemoryResponseCache({ maxBytes: 1024 * 1024 * 1024 });
const keys: string[] = [];
const now = Date.now();
for (let i = 0; i < 10_000; i++) {
  const key = cacheKey({ team: 'alpha', dialect: 'openai', path: '/v1/chat/completions', provider: 'openai', model: 'm', stream: false, body: Buffer.from(String(i)) });
  keys.push(key);
  cache.put(key, { status: 200, headers: { 'content-type': 'application/json' }, body: body(1024), stream: false, storedAtMs: now, expiresAtMs: now + 3600_000 });
}
const missing = keys.map((k) => k.slice(0, -2) + '__');
const hit = measure(100_000, 7, (i) => cache.get(keys[i % keys.length]!, now));
const miss = measure(100_000, 7, (i) => cache.get(missing[i % missing.length]!, now));
console.log(`| hit | ${(hit * 1000).toFixed(0)} ns |\n| miss | ${(miss * 1000).toFixed(0)} ns |`);
void cache.close();

console.log('\nbucket value format: encode + decode, µs (size on the wire)');
console.log('| body | binary frame | base64 in JSON |');
console.log('|---|---|---|');
for (const n of sizes.slice(1)) {
  const r: CachedResponse = { status: 200, headers: { 'content-type': 'text/event-stream', 'x-request-model': 'gpt-4o-mini' }, body: body(n), stream: true, storedAtMs: now, expiresAtMs: now + 600_000 };
  const iters = n >= 64 * 1024 ? 300 : 5000;
  let frameLen = 0;
  let jsonLen = 0;
  const bin = measure(iters, 7, () => {
    const f = encodeFrame(r);
    frameLen = f.length;
    return decodeFrame(f);
  });
  const json = measure(iters, 7, () => {
    const f = Buffer.from(JSON.stringify({ status: r.status, headers: r.headers, stream: r.stream, storedAtMs: r.storedAtMs, expiresAtMs: r.expiresAtMs, body: r.body.toString('base64') }));
    jsonLen = f.length;
    const o = JSON.parse(f.toString('utf8')) as { body: string };
    return Buffer.from(o.body, 'base64');
  });
  console.log(`| ${n / 1024} KiB | ${bin.toFixed(2)} (${frameLen} B) | ${json.toFixed(2)} (${jsonLen} B) |`);
}

console.log('\nput, the part the caller waits for (µs; NATS: encoding and publishing run after it, in a setImmediate)');
console.log('| body | memory p50 | NATS p50 | NATS p90 |');
console.log('|---|---|---|---|');
const server = await NatsServer.start();
const nats = new NatsResponseCache({ url: server.url, maxInFlight: 1000 });
await nats.ready;
const mem = new MemoryResponseCache();
for (const n of [1024, 16 * 1024, 64 * 1024]) {
  const b = body(n);
  const row: string[] = [];
  for (const c of [mem, nats] as ResponseCache[]) {
    const ts: number[] = [];
    for (let i = 0; i < 600; i++) {
      const k = cacheKey({ team: 't', dialect: 'openai', path: '/', provider: 'p', model: 'm', stream: false, body: Buffer.from(`${c.status().source}-${n}-${i}`) });
      const published = nats.status().published;
      const t0 = performance.now();
      c.put(k, { status: 200, headers: { 'content-type': 'application/json' }, body: b, stream: false, storedAtMs: now, expiresAtMs: now + 60_000 });
      ts.push((performance.now() - t0) * 1000);
      // Let the writes go out every 20 puts, as they would between requests.
      if (c === nats && i % 20 === 19) await waitFor('acknowledged', () => nats.status().published > published, 5000, 0);
    }
    ts.splice(0, 100);
    ts.sort((x, y) => x - y);
    row.push(ts[ts.length >> 1]!.toFixed(2));
    if (c === nats) row.push(ts[Math.floor(ts.length * 0.9)]!.toFixed(2));
  }
  console.log(`| ${n / 1024} KiB | ${row.join(' | ')} |`);
}
await nats.close();
await mem.close();
await server.dispose();
