// Issue 15 measurement aid: the rest of the capture pipeline for a rig started by loop-rig.sh — a
// clickhouse-server (free ports, temporary directory) and the ingester, reading the rig's NATS — so
// that the rig's records land in ClickHouse and their stages can be queried (e.g. p50 of each
// stage from sightline.stage_spans), and so that the pipeline's CPU is on the machine as in the bench.
// usage: node --import tsx apps/gateway/scripts/loop-pipeline.ts &  (LOOP_DIR as for loop-rig.sh)
// Writes $LOOP_DIR/pipeline (clickhouse pid, ingester pid, ingester port, ClickHouse URL) once
// ready; on SIGTERM (loop-stop.sh) it stops both.
import { readFileSync, writeFileSync } from 'node:fs';
import { ClickHouseServer, freePort } from '../../../test/support/servers.js';
import { startApp, waitHealthy } from '../../../test/support/apps.js';

const dir = process.env.LOOP_DIR ?? '/tmp/loop/run';
const ports = Object.fromEntries(readFileSync(`${dir}/ports`, 'utf8').trim().split(' ').map((kv) => kv.split('=')));
const ch = await ClickHouseServer.start();
const port = await freePort();
const ingester = startApp('ingester', 'apps/ingester/src/main.ts', {
  NATS_URL: `nats://127.0.0.1:${ports.NATS}`,
  CLICKHOUSE_URL: ch.url,
  CLICKHOUSE_USER: 'default',
  CLICKHOUSE_PASSWORD: '',
  CLICKHOUSE_DATABASE: 'sightline',
  INGESTER_HOST: '127.0.0.1',
  INGESTER_PORT: String(port),
});
const stop = async (): Promise<void> => {
  await ingester.stop();
  await ch.stop();
  process.exit(0);
};
process.once('SIGTERM', () => void stop());
await waitHealthy(ingester, `http://127.0.0.1:${port}/healthz`, 90_000);
writeFileSync(`${dir}/pipeline`, `${ch.pid ?? ''} ${ingester.child.pid ?? ''} ${port} ${ch.url}\n`);
console.log(`pipeline ready: clickhouse ${ch.url}, ingester http://127.0.0.1:${port}`);
setInterval(() => {}, 1 << 30);
