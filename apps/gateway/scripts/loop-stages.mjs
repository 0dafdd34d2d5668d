// Issue 15 measurement aid: reads every capture batch in the rig's NATS stream (loop-rig.sh) and prints,
// for the streamed requests (STREAM=0: the others), p50/p90 of each stage mark after t0 and of each step. MODEL=, LAST=N filter.
// Reads every capture format (v4 included) with @sightline/core: run it with `node --import tsx`.
import { connect } from 'nats';
import { messageRecords } from '@sightline/core';
import { readFileSync } from 'node:fs';
const ports = Object.fromEntries(readFileSync(`${process.env.LOOP_DIR}/ports`, 'utf8').trim().split(' ').map((kv) => kv.split('=')));
const nc = await connect({ servers: `127.0.0.1:${ports.NATS}` });
const jsm = await nc.jetstreamManager();
const recs = [];
const info = await jsm.streams.info('SIGHTLINE_SPANS');
for (let s = info.state.first_seq; s <= info.state.last_seq; s++) { const m = await jsm.streams.getMessage('SIGHTLINE_SPANS', { seq: s }); recs.push(...messageRecords(m.data)); }
const wantStream = process.env.STREAM !== '0';
const sel = recs.filter((r) => r.stream === wantStream && r.status === 200 && (process.env.MODEL ? r.model === process.env.MODEL : true)).slice(-Number(process.env.LAST ?? 1e9));
const marks = ['tBody', 'tParsed', 'tAuth', 'tRouted', 'tBuilt', 'tAttempt', 'tConnected', 'tSent', 'tFirstByte', 'tFirstToken', 'tFirstWrite', 'tLastByte', 'tEnd', 'tFinish'];
const q = (a, p) => { const s = [...a].sort((x, y) => x - y); return s[Math.min(s.length - 1, Math.floor(p * s.length))]; };
console.log(`${sel.length} ${wantStream ? 'stream' : 'non-stream'} records; newConnection ${sel.filter((r) => r.newConnection).length}`);
let prev = 't0';
for (const m of marks) { const v = sel.filter((r) => r[m] > 0).map((r) => (r[m] - r.t0) * 1000); const d = sel.filter((r) => r[m] > 0 && r[prev] > 0).map((r) => (r[m] - r[prev]) * 1000);
  if (v.length) console.log(`${m.padEnd(12)} n ${String(v.length).padStart(5)}  from t0 p50 ${q(v, .5).toFixed(0).padStart(6)} p90 ${q(v, .9).toFixed(0).padStart(6)}   step p50 ${q(d, .5).toFixed(0).padStart(6)} p90 ${q(d, .9).toFixed(0).padStart(6)}`); if (v.length) prev = m; }
await nc.close();
