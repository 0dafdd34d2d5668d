// Issue 15: main-thread samples of a --cpu-prof profile by category (capture, NATS client, the rest), per request.
// usage: node loop-profile.mjs CPU.….cpuprofile REQUESTS
import { readFileSync } from 'node:fs';
const p = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const byId = new Map(p.nodes.map((n) => [n.id, n]));
const parent = new Map(); for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const cats = [
  ['capture.record (serialise, usage, detach, post)', (u, f) => /capture\/src\/capture\.ts/.test(u) && /record|sendJobs/.test(f)],
  ['content worker answer (main side)', (u, f) => /content-worker\.ts/.test(u) && f !== 'prepare'],
  ['capture timer / batch / publish', (u, f) => /capture\/src\/capture\.ts/.test(u) && /onTimer|pump|buildBatches|publishOutbox/.test(f)],
  ['nats client (socket read/acks)', (u) => /nats\/lib/.test(u)],
  ['bus package', (u) => /packages\/bus/.test(u)],
  ['metrics', (u) => /metrics\.ts/.test(u)],
  // node:internal/modules/…, not node_modules/ (every package's frames matched it before 2 December).
  ['module loading', (u) => /internal\/modules\/|bootstrap\/realm|tsx\/dist/.test(u)],
];
const tot = new Map(); let all = 0, idle = 0, gc = 0;
const cache = new Map();
function cat(id) { if (cache.has(id)) return cache.get(id); let c = id, res = 'other';
  const chain = []; while (c !== undefined) { chain.push(byId.get(c)); c = parent.get(c); }
  outer: for (const [name, test] of cats) for (const n of chain) if (test(n.callFrame.url, n.callFrame.functionName)) { res = name; break outer; }
  cache.set(id, res); return res; }
for (let i = 0; i < p.samples.length; i++) { const d = p.timeDeltas[i] ?? 0; const n = byId.get(p.samples[i]); all += d;
  if (n.callFrame.functionName === '(idle)') { idle += d; continue; }
  if (n.callFrame.functionName === '(garbage collector)') gc += d;
  const k = cat(p.samples[i]); tot.set(k, (tot.get(k) ?? 0) + d); }
const req = Number(process.argv[3] ?? 1);
console.log(`busy ${((all - idle) / 1000).toFixed(0)} ms; gc ${(gc/1000).toFixed(0)} ms; per request µs:`);
for (const [k, t] of [...tot].sort((a, b) => b[1] - a[1])) console.log(`  ${(t / req).toFixed(1).padStart(8)}  ${k}`);
