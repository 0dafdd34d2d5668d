import { Pool } from 'undici';
const url = process.argv[2]; const n = Number(process.argv[3] ?? 5000);
const pool = new Pool(url, { connections: 1 });
const body = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'x'.repeat(900) }] });
const lat = [];
for (let i = 0; i < n + 2000; i++) {
  const t = process.hrtime.bigint();
  const r = await pool.request({ path: '/v1/chat/completions', method: 'POST', headers: { 'content-type': 'application/json' }, body });
  await r.body.arrayBuffer();
  if (i >= 2000) lat.push(Number(process.hrtime.bigint() - t) / 1000);
}
lat.sort((a, b) => a - b);
console.log(process.argv[4] ?? url, 'p50', lat[Math.floor(n * 0.5)].toFixed(0), 'p99', lat[Math.floor(n * 0.99)].toFixed(0));
await pool.close();
