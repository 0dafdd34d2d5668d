// Issue 15 measurement aid: CPU time per request of each process of the rig (loop-rig.sh), from
// /proc/PID/stat around a fixed load. node loop-cpu.mjs oai|anth|json N [CONCURRENCY=16]; ONLY=proxy,off,on
// limits the targets. Counts every thread of a process (the content worker too), the serving (main) thread alone, and
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
for (const [name, pidf] of [['proxy', 'proxy'], ['off', 'gw-off'], ['on', 'gw-a']].filter(([n]) => !process.env.ONLY || process.env.ONLY.split(',').includes(n))) {
  const port = name === 'proxy' ? ports.PROXY : name === 'off' ? ports.OFF : ports.ON ?? ports.AFTER;
  const pid = readFileSync(`${D}/${pidf}.pid`, 'utf8').trim();
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: Number(conc) });
  const run = async (n) => { let left = n; await Promise.all(Array.from({ length: Number(conc) }, async () => { while (left-- > 0) { const r = await pool.request({ path: S.path, method: 'POST', headers: S.headers, body: S.body }); await r.body.text(); } })); };
  await run(100);
  const mpid = readFileSync(`${D}/mock.pid`, 'utf8').trim();
  const t0 = ticks(pid), s0 = ticks(pid, pid), m0 = ticks(mpid), w0 = Date.now(); await run(N); const t1 = ticks(pid), s1 = ticks(pid, pid), m1 = ticks(mpid);
  console.log(`${name.padEnd(6)} cpu/req ${((t1 - t0) * 10000 / N).toFixed(0)} µs (serving thread ${((s1 - s0) * 10000 / N).toFixed(0)})  mock cpu/req ${((m1 - m0) * 10000 / N).toFixed(0)} µs  wall ${Date.now() - w0} ms`);
  await pool.close();
}
