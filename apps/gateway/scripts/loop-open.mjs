// Issue 15 measurement aid (not the bench): one open-loop step against a target of loop-rig.sh, as the
// bench's ladder runs it (bench/src/ladder.ts), with the CPU each process spent per request.
// usage: LOOP_DIR=… [PIDS=pid,pid] node loop-open.mjs TARGET RATE SECONDS
//   TARGET: a name in $LOOP_DIR/ports, lower-case (on, off, proxy, before, after, mock).
//   PIDS: processes whose threads' CPU over the step is printed, µs per request by thread id.
// The mock answers after 1,500 ms during the step. Connections are opened first, by a burst as wide as
// the step's requests in flight with the mock answering at once (as the bench does), and are not counted.
// Requests past 9,000 in flight are not sent (the bench's bound). Every loop is bounded: RATE x SECONDS
// requests, each with a 20 s timeout.
import { Pool } from 'undici';
import { readFileSync, readdirSync } from 'node:fs';

const D = process.env.LOOP_DIR ?? '/tmp/loop/run';
const ports = Object.fromEntries(readFileSync(`${D}/ports`, 'utf8').trim().split(' ').map((kv) => { const [k, v] = kv.split('='); return [k.toLowerCase(), v]; }));
const [target = 'on', rateArg = '2000', secsArg = '10'] = process.argv.slice(2);
const port = ports[target];
if (port === undefined) throw new Error(`no target ${target} in ${D}/ports (${Object.keys(ports).join(', ')})`);
const rate = Number(rateArg);
const total = rate * Number(secsArg);
const LATENCY_MS = 1500;
const MAX_IN_FLIGHT = 9000;
const PIDS = (process.env.PIDS ?? '').split(',').filter(Boolean).map(Number);

/** utime + stime in ms of each thread of `pid`, by thread id. */
function threads(pid) {
  const out = {};
  for (const t of readdirSync(`/proc/${pid}/task`)) {
    try {
      const r = readFileSync(`/proc/${pid}/task/${t}/stat`, 'utf8');
      const f = r.slice(r.lastIndexOf(') ') + 2).split(' ');
      out[t] = (Number(f[11]) + Number(f[12])) * 10;
    } catch {
      // The thread ended.
    }
  }
  return out;
}

const body = '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"' + 'the quick brown fox jumps over the lazy dog. '.repeat(21).slice(0, 960) + '"}]}';
const headers = { 'content-type': 'application/json', authorization: 'Bearer sk-x' };
const pool = new Pool(`http://127.0.0.1:${port}`, { connections: Math.ceil((rate * LATENCY_MS * 1.2) / 1000) + 64, pipelining: 1, headersTimeout: 20_000, bodyTimeout: 20_000 });
const mock = (knobs) => fetch(`http://127.0.0.1:${ports.mock}/_mock/config`, { method: 'POST', body: JSON.stringify(knobs), headers: { 'content-type': 'application/json' } }).then((r) => r.arrayBuffer());
/** One request: its latency in ms, or -1 when it failed. */
const one = () => {
  const t0 = performance.now();
  return pool.request({ path: '/v1/chat/completions', method: 'POST', headers, body }).then(
    async (r) => {
      await r.body.dump();
      return r.statusCode === 200 ? performance.now() - t0 : -1;
    },
    () => -1,
  );
};

await mock({ latencyMs: 0 });
await Promise.all(Array.from({ length: Math.ceil((rate * LATENCY_MS) / 1000) }, one));
await mock({ latencyMs: LATENCY_MS });
await new Promise((r) => setTimeout(r, 500));

const before = PIDS.map(threads);
const lat = [];
const pending = [];
let failed = 0;
let notSent = 0;
let inFlight = 0;
let sent = 0;
const start = performance.now();
await new Promise((done) => {
  const tick = () => {
    const due = Math.min(total, Math.floor(((performance.now() - start) / 1000) * rate));
    while (sent < due) {
      sent++;
      if (inFlight >= MAX_IN_FLIGHT) {
        notSent++;
        continue;
      }
      inFlight++;
      pending.push(one().then((ms) => { inFlight--; if (ms < 0) failed++; else lat.push(ms); }));
    }
    if (sent >= total) done();
    else setTimeout(tick, 1);
  };
  tick();
});
await Promise.all(pending);
const after = PIDS.map(threads);
const wall = (performance.now() - start) / 1000;
lat.sort((a, b) => a - b);
const q = (p) => (lat.length === 0 ? '-' : lat[Math.min(lat.length - 1, Math.floor(p * lat.length))].toFixed(0));
console.log(`${target} ${rate}/s: answered ${lat.length}/${total}, failed ${failed}, not sent ${notSent}, p50 ${q(0.5)} ms, p99 ${q(0.99)} ms, wall ${wall.toFixed(1)} s`);
for (const [i, pid] of PIDS.entries()) {
  const used = Object.entries(after[i]).map(([t, ms]) => [t, ms - (before[i][t] ?? 0)]).filter(([, ms]) => ms > 0).sort((a, b) => b[1] - a[1]);
  const us = (ms) => Math.round((ms * 1000) / Math.max(1, lat.length));
  console.log(`  pid ${pid}: ${us(used.reduce((a, [, ms]) => a + ms, 0))} µs CPU per answered request; by thread: ${used.map(([t, ms]) => `${t} ${us(ms)}`).join(', ')}`);
}
await mock({ latencyMs: 0 });
await pool.close();
