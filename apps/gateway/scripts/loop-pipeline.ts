// Issue 15 measurement aid: the rest of the capture pipeline for a rig started by loop-rig.sh — a
// clickhouse-server (free ports, temporary directory) and the ingester, reading the rig's NATS — so
// that the rig's records land in ClickHouse and their stages can be queried (e.g. p50 of each
// stage from sightline.stage_spans), and so that the pipeline's CPU is on the machine as in the bench.
// usage: node --import tsx apps/gateway/scripts/loop-pipeline.ts &  (LOOP_DIR as for loop-rig.sh)
// Writes $LOOP_DIR/pipeline (clickhouse pid, ingester pid, ingester port, ClickHouse URL) once
// ready; on SIGTERM (loop-stop.sh) it stops both.
import { readFileSync, writeFileSync } from 'node:fs';
import { ClickHouseServer } from '../../../test/support/servers.js';
import { Deployment } from '../../../test/support/deployment.js';

const dir = process.env.LOOP_DIR ?? '/tmp/loop/run';
const ports = Object.fromEntries(readFileSync(`${dir}/ports`, 'utf8').trim().split(' ').map((kv) => kv.split('=')));
const ch = await ClickHouseServer.start();
// An ingester applies the migrations before it reports healthy.
const apps = new Deployment(() => ({ NATS_URL: `nats://127.0.0.1:${ports.NATS}`, CLICKHOUSE_URL: ch.url, CLICKHOUSE_DATABASE: 'sightline' }), 90_000);
const stop = async (): Promise<void> => {
  await apps.stop();
  await ch.stop();
  process.exit(0);
};
process.once('SIGTERM', () => void stop());
const ingester = await apps.ingester();
writeFileSync(`${dir}/pipeline`, `${ch.pid ?? ''} ${ingester.app.child.pid ?? ''} ${new URL(ingester.url).port} ${ch.url}\n`);
console.log(`pipeline ready: clickhouse ${ch.url}, ingester ${ingester.url}`);
setInterval(() => {}, 1 << 30);
