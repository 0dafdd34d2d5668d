/**
 * Capacity figures of the capture pipeline for docs/scaling.md (issue 14): one real
 * nats-server, clickhouse-server and ingester process; this process publishes capture batches
 * of served requests (the gateway's format) as fast as the stream takes them, the ingester
 * writes them, and the CPU time each server process used over the run (from /proc) turns the
 * counts into rates per core: requests per ingester core, rows and bytes per ClickHouse core,
 * messages per NATS core.
 *
 *   node --import tsx bench/src/capacity.ts [requests=40000] [records per batch=100]
 *
 * CAPACITY_INGESTER_ARGS: Node flags for the ingester, space-separated (for example
 * `--cpu-prof --cpu-prof-dir=/tmp/prof`, which Node refuses in NODE_OPTIONS).
 *
 * Prints a JSON summary. The gateway's requests per core come from the ladder (docs/benchmarks.md).
 */
import { readFileSync } from 'node:fs';
import { connectNats, ensureStream, MemoryBus, NatsPublisher } from '@sightline/bus';
import { Capture } from '@sightline/capture';
import { ClickHouseServerStore, migrate, sql, table } from '@sightline/store';
import { ClickHouseServer, NatsServer, freePort, waitFor } from '../../test/support/servers.js';
import { startApp, waitHealthy } from '../../test/support/apps.js';
import { captureConfig, servedRecord } from '../../test/support/records.js';

const TICKS = 100; // USER_HZ on Linux
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / TICKS; // utime, stime (fields 14 and 15)
}

const total = Number(process.argv[2] ?? 40_000);
const perBatch = Number(process.argv[3] ?? 100);
const batches = Math.ceil(total / perBatch);

const [nats, ch] = await Promise.all([NatsServer.start(), ClickHouseServer.start()]);
const store = new ClickHouseServerStore({ url: ch.url, database: 'sightline' });
const port = await freePort();
const ing = startApp('ingester', 'apps/ingester/src/main.ts', { NATS_URL: nats.url, CLICKHOUSE_URL: ch.url, CLICKHOUSE_DATABASE: 'sightline', INGESTER_PORT: String(port) }, (process.env.CAPACITY_INGESTER_ARGS ?? '').split(' ').filter((a) => a !== ''));
try {
  await migrate(store);
  await waitHealthy(ing, `http://127.0.0.1:${port}/healthz`);
  const nc = await connectNats(nats.url, 'capacity');
  await ensureStream(await nc.jetstreamManager());
  const pub = new NatsPublisher(nc);
  // Encoded up front by the gateway's own capture (format v3), onto an in-process bus: the
  // publisher's work is the gateway's, not the pipeline's.
  const payloads: Uint8Array[] = [];
  const made = new MemoryBus();
  const capture = new Capture({ instance: 'cap', config: captureConfig({ batchMaxRequests: perBatch, queueMaxRequests: batches * perBatch, flushIntervalMs: 60_000 }), publisher: made });
  for (let b = 0; b < batches; b++) {
    for (let i = 0; i < perBatch; i++) capture.record(servedRecord({ seq: b * perBatch + i, usage: { prompt: 40, completion: 12 } }));
    await capture.flush(10_000);
    for (const m of await made.fetch(1000, 0)) {
      payloads.push(m.data);
      await m.ack();
    }
  }
  await capture.close(1000);
  if (payloads.length !== batches) throw new Error(`capture made ${payloads.length} batches, not ${batches}`);
  const bytes = payloads.reduce((a, p) => a + p.length, 0);
  const pids = { ingester: ing.child.pid!, clickhouse: ch.pid!, nats: nats.pid! };
  const cpu0 = Object.fromEntries(Object.entries(pids).map(([k, p]) => [k, cpuSeconds(p)]));
  const t0 = performance.now();
  for (let b = 0; b < batches; b += 32) {
    await Promise.all(payloads.slice(b, b + 32).map((p, i) => pub.publish(p, `cap-${b + i}`, 10_000)));
  }
  const published = performance.now();
  const count = async () => Number((await store.query<{ n: string }>(sql`SELECT count() AS n FROM ${table('sightline', 'requests')}`))[0]?.n ?? 0);
  const progress = setInterval(() => {
    if (process.env.CAPACITY_LOG === '1') void count().then((c) => process.stderr.write(`${((performance.now() - t0) / 1000).toFixed(1)} s: ${c} requests\n`));
  }, 2000);
  await waitFor('every request written', async () => (await count()) >= batches * perBatch, 600_000, 100);
  clearInterval(progress);
  const written = performance.now();
  // The rollups of the last minutes are recomputed within 2 s of the last write.
  await new Promise((r) => setTimeout(r, 3000));
  const cpu = Object.fromEntries(Object.entries(pids).map(([k, p]) => [k, cpuSeconds(p) - cpu0[k]!]));
  const rows = await store.query<{ t: string; rows: string; bytes: string }>(
    sql`SELECT table AS t, sum(rows) AS rows, sum(data_uncompressed_bytes) AS bytes FROM system.parts WHERE database = 'sightline' AND active GROUP BY table ORDER BY table`,
  );
  const rowsTotal = rows.reduce((a, r) => a + Number(r.rows), 0);
  const bytesTotal = rows.reduce((a, r) => a + Number(r.bytes), 0);
  const n = batches * perBatch;
  const s = (written - t0) / 1000;
  console.log(
    JSON.stringify(
      {
        requests: n,
        recordsPerBatch: perBatch,
        batchBytesAvg: Math.round(bytes / batches),
        publishSeconds: +((published - t0) / 1000).toFixed(2),
        writtenSeconds: +s.toFixed(2),
        requestsPerSecondEndToEnd: Math.round(n / s),
        cpuSeconds: cpu,
        ingesterRequestsPerCoreSecond: Math.round(n / cpu.ingester!),
        clickhouseRows: rowsTotal,
        clickhouseRowsPerCoreSecond: Math.round(rowsTotal / cpu.clickhouse!),
        clickhouseUncompressedBytesPerCoreSecond: Math.round(bytesTotal / cpu.clickhouse!),
        clickhouseRequestsPerCoreSecond: Math.round(n / cpu.clickhouse!),
        natsMessagesPerCoreSecond: Math.round(batches / cpu.nats!),
        natsRequestsPerCoreSecond: Math.round(n / cpu.nats!),
        tables: rows,
      },
      null,
      2,
    ),
  );
  await nc.close();
} finally {
  if (process.env.CAPACITY_LOG === '1') process.stderr.write(ing.output);
  await ing.stop();
  await store.close();
  await Promise.all([nats.dispose(), ch.dispose()]);
}
