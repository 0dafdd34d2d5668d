// Issue 15 measurement aid (not the bench): what fastify costs a request before the gateway's own code runs,
// against a bare node:http server, on this machine. Both servers read a 1 KiB JSON body as bytes (fastify: one
// catch-all buffer parser, as apps/gateway/src/server.ts registers; node:http: 'data' and 'end') and answer `{}`.
//   - wait: server-side time from the 'request' event to the whole body in hand (fastify: its parser called),
//     median over SEQ sequential requests (one connection);
//   - CPU: the server process's CPU per request (/proc utime+stime) over CONC-concurrent requests.
// Servers on CPU 1, this client on CPU 0 (the bench's layout), alternated ROUNDS times. Loopback only; every loop
// is bounded by its request count.
// usage: node apps/gateway/scripts/fastify-cost.mjs   (ROUNDS=2 SEQ=3000 CONC=8 REQS=30000 KINDS=node,fastify[,fastify-json])
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

const [role, kind] = process.argv.slice(2);
const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];

if (role === 'server') {
  // Answers `GET /waits` with the waits since the last such request (µs), then forgets them.
  const waits = [];
  const answer = (res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': 2 });
    res.end('{}');
  };
  const report = (res) => {
    const body = JSON.stringify(waits.splice(0));
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  };
  let port;
  if (kind === 'node') {
    const server = createServer((req, res) => {
      if (req.method === 'GET') return report(res);
      const t = performance.now();
      const chunks = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        Buffer.concat(chunks);
        waits.push((performance.now() - t) * 1000);
        answer(res);
      });
    });
    await new Promise((r) => server.listen(0, '127.0.0.1', r));
    port = server.address().port;
  } else {
    const { default: Fastify } = await import('fastify');
    const app = Fastify({ logger: false });
    let t = 0;
    app.server.prependListener('request', () => {
      t = performance.now();
    });
    app.removeAllContentTypeParsers();
    const parser = (_req, body, done) => {
      waits.push((performance.now() - t) * 1000);
      done(null, body);
    };
    app.addContentTypeParser('*', { parseAs: 'buffer' }, parser);
    // fastify-json: the same parser named for application/json too, which fastify then finds
    // by the header's string; for the catch-all alone it parses the header every request.
    if (kind === 'fastify-json') app.addContentTypeParser('application/json', { parseAs: 'buffer' }, parser);
    app.post('/v1/chat/completions', (_req, reply) => answer(reply.raw));
    app.get('/waits', (_req, reply) => report(reply.raw));
    await app.listen({ port: 0, host: '127.0.0.1' });
    port = app.server.address().port;
  }
  process.stdout.write(`${port}\n`);
} else {
  const { Pool } = await import('undici');
  const ROUNDS = Number(process.env.ROUNDS ?? 2);
  const SEQ = Number(process.env.SEQ ?? 3000);
  const CONC = Number(process.env.CONC ?? 8);
  const REQS = Number(process.env.REQS ?? 30000);
  const body = '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"' + 'the quick brown fox jumps over the lazy dog. '.repeat(22).slice(0, 960) + '"}]}';
  const cpuMs = (pid) => {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(f[11]) + Number(f[12])) * 10;
  };
  const kinds = (process.env.KINDS ?? 'node,fastify').split(',');
  for (let r = 0; r < ROUNDS; r++) {
    for (const k of r % 2 === 0 ? kinds : [...kinds].reverse()) {
      const child = spawn('taskset', ['-c', '1', process.execPath, fileURLToPath(import.meta.url), 'server', k], { stdio: ['ignore', 'pipe', 'inherit'] });
      const port = await new Promise((resolve, reject) => {
        child.stdout.once('data', (d) => resolve(Number(String(d).trim())));
        child.once('exit', (c) => reject(new Error(`server ${k} exited (${c})`)));
      });
      const one = async (pool) => {
        const res = await pool.request({ path: '/v1/chat/completions', method: 'POST', headers: { 'content-type': 'application/json' }, body });
        await res.body.text();
      };
      const seq = new Pool(`http://127.0.0.1:${port}`, { connections: 1 });
      for (let i = 0; i < 1000; i++) await one(seq); // warm
      await (await seq.request({ path: '/waits', method: 'GET' })).body.text();
      const client = [];
      for (let i = 0; i < SEQ; i++) {
        const t = performance.now();
        await one(seq);
        client.push((performance.now() - t) * 1000);
      }
      const waits = JSON.parse(await (await seq.request({ path: '/waits', method: 'GET' })).body.text());
      await seq.close();
      const pool = new Pool(`http://127.0.0.1:${port}`, { connections: CONC });
      const c0 = cpuMs(child.pid);
      let sent = 0;
      await Promise.all(Array.from({ length: CONC }, async () => {
        while (sent < REQS) {
          sent++;
          await one(pool);
        }
      }));
      const cpu = ((cpuMs(child.pid) - c0) * 1000) / REQS;
      await pool.close();
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
      console.log(`${k.padEnd(8)} round ${r + 1}: request -> body p50 ${median(waits).toFixed(1)} µs, client round trip p50 ${median(client).toFixed(1)} µs, server CPU ${cpu.toFixed(1)} µs/request (${CONC} concurrent)`);
    }
  }
}
