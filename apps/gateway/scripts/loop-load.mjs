// Issue 15 measurement aid (not the bench): interleaved blocks against the direct mock and the gateways
// started by loop-rig.sh. ROUNDS, N, SCEN (json,jsonc16,json16,json64,anth1,anth8,oai8,oai16,anth16,oai1) from the environment.
// Interleaved load: for each round, for each target (direct mock, gateway on, gateway off),
// run one block of each scenario. Prints medians over per-block p50/p99 and pooled percentiles, and for
// streams the time to the response headers (headers50): at 16 concurrent streams the requests come in
// bursts, and a request's own CPU before its upstream write delays every other request of the burst.
import { Pool } from 'undici';
import { readFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
const ports = Object.fromEntries(readFileSync(`${process.env.LOOP_DIR ?? '/tmp/loop/run'}/ports`, 'utf8').trim().split(' ').map((kv) => kv.split('=')));
const ROUNDS = Number(process.env.ROUNDS ?? 6);
const N = Number(process.env.N ?? 300);
const SCEN = (process.env.SCEN ?? 'json,anth1,anth8,oai1').split(',');
const pad = (head, tail, bytes) => head + 'x'.repeat(Math.max(0, bytes - head.length - tail.length)) + tail;
// Prose, not one long run of letters (which the capture would take for base64 data).
const prose = (head, tail, bytes) => head + 'the quick brown fox jumps over the lazy dog. '.repeat(Math.ceil(bytes / 45)).slice(0, Math.max(0, bytes - head.length - tail.length)) + tail;
const OAH = { 'content-type': 'application/json', authorization: 'Bearer sk-x' };
const ANH = { 'content-type': 'application/json', 'x-api-key': 'sk-ant-x', 'anthropic-version': '2023-06-01' };
const S = {
  json: { path: '/v1/chat/completions', headers: OAH, body: pad('{"model":"gpt-4o-mini","messages":[{"role":"user","content":"', '"}]}', 1024), conc: 1, marker: null },
  jsonc16: { path: '/v1/chat/completions', headers: OAH, body: pad('{"model":"gpt-4o-mini","messages":[{"role":"user","content":"', '"}]}', 1024), conc: 16, marker: null },
  json16: { path: '/v1/chat/completions', headers: OAH, body: prose('{"model":"gpt-4o-mini","messages":[{"role":"user","content":"', '"}]}', 16384), conc: 1, marker: null },
  json64: { path: '/v1/chat/completions', headers: OAH, body: prose('{"model":"gpt-4o-mini","messages":[{"role":"user","content":"', '"}]}', 65536), conc: 1, marker: null },
  anth1: { path: '/v1/messages', headers: ANH, body: pad('{"model":"claude-haiku-4-5","max_tokens":256,"stream":true,"messages":[{"role":"user","content":"', '"}]}', 1024), conc: 1, marker: 'text_delta' },
  anth8: { path: '/v1/messages', headers: ANH, body: pad('{"model":"claude-haiku-4-5","max_tokens":256,"stream":true,"messages":[{"role":"user","content":"', '"}]}', 1024), conc: 8, marker: 'text_delta' },
  oai8: { path: '/v1/chat/completions', headers: OAH, body: pad('{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"', '"}]}', 1024), conc: 8, marker: '"content":"h' },
  oai16: { path: '/v1/chat/completions', headers: OAH, body: pad('{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"', '"}]}', 1024), conc: 16, marker: '"content":"h' },
  anth16: { path: '/v1/messages', headers: ANH, body: pad('{"model":"claude-haiku-4-5","max_tokens":256,"stream":true,"messages":[{"role":"user","content":"', '"}]}', 1024), conc: 16, marker: 'text_delta' },
  oai1: { path: '/v1/chat/completions', headers: OAH, body: pad('{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"', '"}]}', 1024), conc: 1, marker: '"content":"h' },
};
const targets = ports.BEFORE ? { direct: Number(ports.MOCK), before: Number(ports.BEFORE), after: Number(ports.AFTER), off: Number(ports.OFF) } : { direct: Number(ports.MOCK), on: Number(ports.ON), off: Number(ports.OFF) };
if (ports.PROXY) targets.proxy = Number(ports.PROXY);
if (ports.READER) targets.reader = Number(ports.READER);
const clients = {};
for (const [k, p] of Object.entries(targets)) clients[k] = new Pool(`http://127.0.0.1:${p}`, { connections: 16, pipelining: 1 });
function one(client, s) {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    let ttft = 0n; let th = 0n; let carry = '';
    client.dispatch({ path: s.path, method: 'POST', headers: s.headers, body: s.body }, {
      onConnect() {}, onHeaders() { th = process.hrtime.bigint(); return true; }, onError: reject,
      onData(c) { if (s.marker !== null && ttft === 0n) { const t = carry + c.toString('latin1'); if (t.includes(s.marker)) ttft = process.hrtime.bigint(); else carry = t.slice(-32); } return true; },
      onComplete() { const t1 = process.hrtime.bigint(); resolve([Number(t1 - t0) / 1000, Number((ttft || t1) - t0) / 1000, Number(th - t0) / 1000]); },
    });
  });
}
const q = (a, p) => { const s = [...a].sort((x, y) => x - y); return s[Math.min(s.length - 1, Math.floor(p * s.length))]; };
async function block(tk, sk) {
  const s = S[sk]; const lat = []; const tt = []; const hd = []; let left = N;
  // The driver's own event-loop delay over the block: a driver held up (by a process beside it on
  // its core) reads every response late, which the block's figures then charge to the target.
  const eld = monitorEventLoopDelay({ resolution: 1 }); eld.enable();
  // direct mock differs in the OpenAI stream marker: content always starts with something
  const worker = async () => { while (left-- > 0) { const [l, t, h] = await one(clients[tk], s); lat.push(l); tt.push(t); hd.push(h); } };
  await Promise.all(Array.from({ length: s.conc }, worker));
  eld.disable();
  return { eld99: eld.percentile(99) / 1000, eldMean: eld.mean / 1000, p50: q(lat, 0.5), p99: q(lat, 0.99), ttft50: q(tt, 0.5), ttft99: q(tt, 0.99), th50: q(hd, 0.5), lat, tt };
}
const res = {};
// warm-up
for (const tk of Object.keys(targets)) for (const sk of SCEN) { const n = N; await block(tk, sk); }
for (let r = 0; r < ROUNDS; r++) {
  const names = Object.keys(targets); const order = r % 2 === 0 ? names : [...names].reverse();
  for (const sk of SCEN) for (const tk of order) { const b = await block(tk, sk); ((res[sk] ??= {})[tk] ??= []).push(b); }
}
const med = (a) => q(a, 0.5);
const out = {};
for (const sk of SCEN) {
  console.log(`\n${sk} (${ROUNDS} blocks x ${N}, conc ${S[sk].conc}) — µs: median of block p50 | median of block p99 | pooled p99 | ttft p50 (median of blocks)`);
  for (const tk of Object.keys(targets)) {
    const bs = res[sk][tk];
    const row = { p50: med(bs.map((b) => b.p50)), p99: med(bs.map((b) => b.p99)), pooled99: q(bs.flatMap((b) => b.lat), 0.99), ttft50: med(bs.map((b) => b.ttft50)), ttft99: med(bs.map((b) => b.ttft99)), th50: med(bs.map((b) => b.th50)), eld99: med(bs.map((b) => b.eld99)), eldMean: med(bs.map((b) => b.eldMean)) };
    (out[sk] ??= {})[tk] = row;
    console.log(`  ${tk.padEnd(6)} p50 ${row.p50.toFixed(0).padStart(6)}  p99 ${row.p99.toFixed(0).padStart(6)}  pooled99 ${row.pooled99.toFixed(0).padStart(6)}  ttft50 ${row.ttft50.toFixed(0).padStart(6)}  ttft99 ${row.ttft99.toFixed(0).padStart(6)}${S[sk].marker === null ? '' : `  headers50 ${row.th50.toFixed(0).padStart(6)}`}  driver loop delay mean ${row.eldMean.toFixed(0)} p99 ${row.eld99.toFixed(0)}`);
  }
  const d = out[sk].direct;
  console.log('  added over direct: ' + Object.keys(targets).filter((t) => t !== 'direct').map((t) => `${t} p50 ${(out[sk][t].p50 - d.p50).toFixed(0)} p99 ${(out[sk][t].p99 - d.p99).toFixed(0)} ttft50 ${(out[sk][t].ttft50 - d.ttft50).toFixed(0)}`).join(' | '));
}
if (process.env.OUT) (await import('node:fs')).writeFileSync(process.env.OUT, JSON.stringify(out, null, 1));
for (const c of Object.values(clients)) await c.close();
for (const [tk, p] of Object.entries(targets)) { if (tk === 'direct' || tk === 'proxy' || tk === 'reader') continue; const t = await (await fetch(`http://127.0.0.1:${p}/metrics`)).text(); console.log(tk, t.split('\n').filter((l) => /event_loop/.test(l) && !l.startsWith('#')).join(' | ')); }
