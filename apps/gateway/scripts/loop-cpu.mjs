// Issue 15 measurement aid: CPU time per request of each process of the rig (loop-rig.sh), from
// /proc/PID/stat around a fixed load. node loop-cpu.mjs oai|anth|json N [CONCURRENCY=16]; ONLY=proxy,off,on,before
// limits the targets (before: the BEFORE_TREE gateway; on: this tree's). Counts every thread of a process (the content worker too), the serving (main) thread alone, and
// the mock's share.
import { Pool } from 'undici';
import { readFileSync } from 'node:fs';
const D = process.env.LOOP_DIR; const ports = Object.fromEntries(readFileSync(`${D}/ports`, 'utf8').trim().split(' ').map((kv) => kv.split('=')));
const [scen, nArg, conc = '16'] = process.argv.slice(2); const N = Number(nArg);
const pad = (head, tail, bytes) => head + 'x'.repeat(Math.max(0, bytes - head.length - tail.length)) + tail;
const OAH = { 'content-type': 'application/json', authorization: 'Bearer sk-x' };
const ANH = { 'content-type': 'application/json', 'x-api-key': 'sk-ant-x', 'anthropic-version': '2023-06-01' };
const S = { oai: { path: '/v1/chat/completions', headers: OAH, body: pad('{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"', '"}]}', 1024) },
 anth: { path: '/v1/messages', headers: ANH, body: pad('{"model":"claude-haiku-4-5","max_tokens":256,"stream":true,"messages":[{"role":"user","content":"', '"}]}', 1024) },
 json: { path: '/v1/chat/completions', headers: OAH, body: pad('{"model":"gpt-4o-mini","messages":[{"role":"user","content":"', '"}]}', 1024) } }[scen];
const ticks = (pid, tid = null) => { const f = readFileSync(tid === null ? `/proc/${pid}/stat` : `/proc/${pid}/task/${tid}/stat`, 'utf8').split(') ')[1].split(' '); return Number(f[11]) + Number(f[12]); };
// ROUNDS > 1: the targets take turns, N requests each per round, and each round's figures are
// also taken as differences from the first target's in the same round. This machine's speed
// moves by more than half between runs ten seconds apart; differences within a round move less.
const ROUNDS = Number(process.env.ROUNDS ?? 1);
const targets = [['proxy', 'proxy'], ['off', 'gw-off'], ['on', 'gw-a'], ['before', 'gw-b']].filter(([n]) => !process.env.ONLY || process.env.ONLY.split(',').includes(n)).map(([name, pidf]) => {
  const port = name === 'proxy' ? ports.PROXY : name === 'off' ? ports.OFF : name === 'before' ? ports.BEFORE : ports.ON ?? ports.AFTER;
  const pid = readFileSync(`${D}/${pidf}.pid`, 'utf8').trim();
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: Number(conc) });
  const run = async (n) => { let left = n; await Promise.all(Array.from({ length: Number(conc) }, async () => { while (left-- > 0) { const r = await pool.request({ path: S.path, method: 'POST', headers: S.headers, body: S.body }); await r.body.text(); } })); };
  return { name, pid, pool, run, all: [], serving: [] };
});
const mpid = readFileSync(`${D}/mock.pid`, 'utf8').trim();
for (const t of targets) await t.run(100);
for (let round = 0; round < ROUNDS; round++) {
  for (const t of targets) {
    const t0 = ticks(t.pid), s0 = ticks(t.pid, t.pid), m0 = ticks(mpid), w0 = Date.now(); await t.run(N); const t1 = ticks(t.pid), s1 = ticks(t.pid, t.pid), m1 = ticks(mpid);
    t.all.push((t1 - t0) * 10000 / N); t.serving.push((s1 - s0) * 10000 / N);
    if (ROUNDS === 1) console.log(`${t.name.padEnd(6)} cpu/req ${((t1 - t0) * 10000 / N).toFixed(0)} µs (serving thread ${((s1 - s0) * 10000 / N).toFixed(0)})  mock cpu/req ${((m1 - m0) * 10000 / N).toFixed(0)} µs  wall ${Date.now() - w0} ms`);
  }
}
if (ROUNDS > 1) {
  const med = (a) => { const s = [...a].sort((x, y) => x - y); return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2; };
  const first = targets[0];
  console.log(`${ROUNDS} rounds x ${N} requests; µs per request, median over rounds (and the range of the per-round difference from ${first.name})`);
  for (const t of targets) {
    const d = t.serving.map((v, i) => v - first.serving[i]); const da = t.all.map((v, i) => v - first.all[i]);
    console.log(`${t.name.padEnd(6)} all threads ${med(t.all).toFixed(0).padStart(5)}  serving thread ${med(t.serving).toFixed(0).padStart(5)}` + (t === first ? '' : `  serving − ${first.name} ${med(d).toFixed(0)} [${Math.min(...d).toFixed(0)}, ${Math.max(...d).toFixed(0)}]  all − ${first.name} ${med(da).toFixed(0)} [${Math.min(...da).toFixed(0)}, ${Math.max(...da).toFixed(0)}]`));
  }
}
for (const t of targets) await t.pool.close();
