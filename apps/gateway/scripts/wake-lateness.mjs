// Issue 15 measurement aid: how late a normal thread's 1 ms timers run while a low-priority thread spins
// beside it (50 ms busy, 1 ms asleep, like a content thread with batches), both on one core.
// usage: taskset -c 1 node wake-lateness.mjs none|nice|idle   (nice: nice 19; idle: SCHED_IDLE by chrt)
import { Worker } from 'node:worker_threads';
const mode = process.argv[2];
if (!['none', 'nice', 'idle'].includes(mode)) throw new Error('usage: node wake-lateness.mjs none|nice|idle');
if (mode !== 'none') {
  const w = new Worker(`
    const { parentPort, workerData } = require('node:worker_threads');
    const tid = require('node:fs').readlinkSync('/proc/thread-self').split('/').pop();
    if (workerData === 'nice') require('node:os').setPriority(19);
    else require('node:child_process').execFileSync('chrt', ['--idle', '--pid', '0', tid]);
    parentPort.postMessage('ready');
    const sleep = new Int32Array(new SharedArrayBuffer(4));
    for (;;) { const t = Date.now(); while (Date.now() - t < 50) {} Atomics.wait(sleep, 0, 0, 1); }
  `, { eval: true, workerData: mode });
  w.unref();
  await new Promise((r) => w.once('message', r));
}
const late = [];
let prev = performance.now();
await new Promise((resolve) => {
  let n = 0;
  const tick = () => { const t = performance.now(); late.push(t - prev - 1); prev = t; if (++n < 3000) setTimeout(tick, 1); else resolve(); };
  setTimeout(tick, 1);
});
late.sort((a, b) => a - b);
const q = (p) => (late[Math.floor(p * late.length)] * 1000).toFixed(0);
console.log(`${mode.padEnd(5)} timer lateness µs: p50 ${q(0.5)} p90 ${q(0.9)} p99 ${q(0.99)} max ${(late[late.length - 1] * 1000).toFixed(0)} (${late.length} timers)`);
process.exit(0);
