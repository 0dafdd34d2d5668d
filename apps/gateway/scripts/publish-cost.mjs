// Issue 15 measurement aid: the serving thread's share of one capture publish (the synchronous
// part of NatsPublisher.publish and the microtasks it queues: the client's queueing, its flush and
// the socket write), with and without writeWithoutCopy. node publish-cost.mjs NATS_PORT [KIB=200] [N=300]
// Alternates the two ways per publish on two connections; prints p50/p90/p99/max in µs. Purges the
// stream at the end: only for a rig's own nats-server (loop-rig.sh), never a real one.
import { connect } from 'nats';
import { NatsPublisher, ensureStream, STREAM_NAME } from '@sightline/bus';
const [port, kib = '200', n = '300'] = process.argv.slice(2);
const mk = async () => connect({ servers: `127.0.0.1:${port}`, noAsyncTraces: true });
const a = await mk(); const b = await mk();
const jsm = await a.jetstreamManager();
await ensureStream(jsm);
const pa = new NatsPublisher(a); // installs writeWithoutCopy
const proto = b.protocol; const saved = proto.flushPending;
const pb = new NatsPublisher(b); proto.flushPending = saved; // the client's own flush (pack + write)
const area = new Uint8Array(new SharedArrayBuffer(Number(kib) * 1024));
for (let i = 0; i < area.length; i++) area[i] = 97 + (i % 26);
const t = { copyFree: [], packing: [] };
for (let i = 0; i < Number(n); i++) {
  for (const [name, p] of i % 2 ? [['copyFree', pa], ['packing', pb]] : [['packing', pb], ['copyFree', pa]]) {
    // Until the next check phase: the call and every microtask it queued (the client flushes
    // in one when less than 32 KiB was pending).
    const t0 = process.hrtime.bigint();
    const done = p.publish(area, `cost-${process.pid}-${name}-${i}`, 5000);
    await new Promise((r) => setImmediate(r));
    t[name].push(Number(process.hrtime.bigint() - t0) / 1000);
    await done;
  }
}
const q = (x, f) => { const s = [...x].sort((m, k) => m - k); return s[Math.min(s.length - 1, Math.floor(f * s.length))].toFixed(0); };
for (const [k, v] of Object.entries(t)) console.log(`${k.padEnd(9)} ${kib} KiB: p50 ${q(v, .5)} p90 ${q(v, .9)} p99 ${q(v, .99)} max ${q(v, 1)} µs (n ${v.length})`);
// The rig has no ingester: empty its stream so it does not fill and its gateways keep publishing.
await jsm.streams.purge(STREAM_NAME);
await a.close(); await b.close();
