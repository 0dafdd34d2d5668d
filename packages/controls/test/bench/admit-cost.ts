/**
 * What `admit` and `settle` cost on the request path: a micro-benchmark, not a test (timings
 * are never asserted). Run it with
 *
 *   node --import tsx packages/controls/test/bench/admit-cost.ts [--ops 200000]
 *
 * For each governor (in process; NATS with its leases warm, on a real nats-server started on a
 * free port) and each set of limits, it times `admit` and `settle` call by call
 * (process.hrtime.bigint, whose own cost — measured and printed — is included) in batches of
 * 1000, yielding to the event loop between batches so the background refills run as they
 * would between requests. Limits are set high enough never to refuse: this is the cost of the
 * common case. Admissions that had to wait for a lease are counted and left out.
 */
import { parseArgs } from 'node:util';
import { MemoryGovernor, NatsGovernor, type Admission, type Governor, type Ticket } from '@sightline/controls';
import { NatsServer } from '../../../../test/support/servers.js';

const { values } = parseArgs({ options: { ops: { type: 'string', default: '200000' } } });
const OPS = Number(values.ops);
const BATCH = 1000;

const big = { requests_per_minute: 1e9, tokens_per_minute: 1e12 };
const budget = { usd: 1e6, period: 'day' as const };
const cases: { name: string; a: Admission }[] = [
  { name: 'no limits', a: { keyId: 'k', team: 't', keyLimits: null, teamLimits: null, keyBudget: null, teamBudget: null, tokens: 1200, costUsd: 0.002 } },
  { name: 'key rpm + tpm', a: { keyId: 'k', team: 't', keyLimits: big, teamLimits: null, keyBudget: null, teamBudget: null, tokens: 1200, costUsd: 0.002 } },
  { name: 'key budget', a: { keyId: 'k', team: 't', keyLimits: null, teamLimits: null, keyBudget: budget, teamBudget: null, tokens: 1200, costUsd: 0.002 } },
  { name: 'key + team: rpm, tpm, budget (6 limits)', a: { keyId: 'k', team: 't', keyLimits: big, teamLimits: big, keyBudget: budget, teamBudget: budget, tokens: 1200, costUsd: 0.002 } },
];

function pct(sorted: Float64Array, p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
}

const tick = () => new Promise<void>((r) => setImmediate(r));

async function measure(g: Governor, a: Admission): Promise<{ admit: Float64Array; settle: Float64Array; waits: number }> {
  const admitNs = new Float64Array(OPS);
  const settleNs = new Float64Array(OPS);
  let n = 0;
  let waits = 0;
  const tickets: Ticket[] = new Array<Ticket>(BATCH);
  // Warm-up: leases taken, code optimised.
  for (let i = 0; i < 20_000; i++) {
    const v = g.admit(a, Date.now());
    if (v.ok === true) g.settle(v.ticket, { tokens: 900, costUsd: 0.0015 }, Date.now());
    else if (v.ok === 'wait') await v.ready;
    if (i % BATCH === 0) await tick();
  }
  while (n < OPS) {
    const now = Date.now();
    let k = 0;
    for (let i = 0; i < BATCH && n + k < OPS; i++) {
      const t0 = process.hrtime.bigint();
      const v = g.admit(a, now);
      const t1 = process.hrtime.bigint();
      if (v.ok === true) {
        admitNs[n + k] = Number(t1 - t0);
        tickets[k++] = v.ticket;
      } else waits++;
    }
    for (let i = 0; i < k; i++) {
      const t0 = process.hrtime.bigint();
      g.settle(tickets[i]!, { tokens: 900, costUsd: 0.0015 }, now);
      settleNs[n + i] = Number(process.hrtime.bigint() - t0);
    }
    n += k;
    await tick();
  }
  return { admit: admitNs.sort(), settle: settleNs.sort(), waits };
}

function clockCost(): number {
  const a = new Float64Array(100_000);
  for (let i = 0; i < a.length; i++) {
    const t0 = process.hrtime.bigint();
    a[i] = Number(process.hrtime.bigint() - t0);
  }
  return pct(a.sort(), 0.5);
}

const nats = await NatsServer.start();
try {
  const rows: string[] = [];
  const floor = clockCost();
  for (const [name, make] of [
    ['MemoryGovernor', () => new MemoryGovernor()],
    ['NatsGovernor', () => new NatsGovernor({ url: nats.url })],
  ] as const) {
    for (const c of cases) {
      const g: Governor = make();
      await g.ready;
      const r = await measure(g, c.a);
      await g.close();
      const us = (ns: number) => (ns / 1000).toFixed(2);
      rows.push(`| ${name} | ${c.name} | ${us(pct(r.admit, 0.5))} | ${us(pct(r.admit, 0.99))} | ${us(pct(r.settle, 0.5))} | ${us(pct(r.settle, 0.99))} | ${r.waits} |`);
    }
  }
  console.log(`node ${process.version}, ${OPS} admissions per row, timer floor (hrtime pair) p50 ${(floor / 1000).toFixed(3)} µs (included below)\n`);
  console.log('| governor | limits | admit p50 µs | admit p99 µs | settle p50 µs | settle p99 µs | waited |');
  console.log('| --- | --- | ---: | ---: | ---: | ---: | ---: |');
  for (const r of rows) console.log(r);
} finally {
  await nats.dispose();
}
