/**
 * `npm run start:ingester`: the ingester alone, configured by environment.
 *   NATS_URL (required; comma-separated in a cluster), SIGHTLINE_NATS_REPLICAS (default 1),
 *   CLICKHOUSE_URL / CLICKHOUSE_USER / CLICKHOUSE_PASSWORD /
 *   CLICKHOUSE_DATABASE (see env.ts), INGESTER_PORT for /healthz and /metrics (default 8082),
 *   SIGHTLINE_RETENTION_DAYS and SIGHTLINE_CONTENT_RETENTION_DAYS (docs/configuration.md),
 *   OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_HEADERS / OTEL_EXPORTER_OTLP_PROTOCOL to
 *   export the spans to an OpenTelemetry backend as well (otlp.ts).
 */
import { connectNats, natsReplicasFromEnv, NatsConsumer } from '@sightline/bus';
import { envInt, instanceId, onShutdown, redactUrlCredentials } from '@sightline/core';
import { startIngester } from './start.js';
import { storeFromEnv } from '@sightline/store';

function log(msg: string): void {
  process.stderr.write(`${new Date().toISOString()} ingester ${msg}\n`);
}

async function main(): Promise<void> {
  const natsUrl = process.env.NATS_URL;
  if (natsUrl === undefined || natsUrl === '') throw new Error('NATS_URL is required (e.g. nats://127.0.0.1:4222)');
  const store = await storeFromEnv();
  // Wait for NATS as long as it takes to come up the first time, then reconnect forever.
  const name = instanceId('ingester');
  const nc = await connectNats(natsUrl, name, { waitOnFirstConnect: true });
  const consumer = await NatsConsumer.open(nc, { ackWaitMs: envInt('INGESTER_ACK_WAIT_MS', 30_000), replicas: natsReplicasFromEnv() });
  const retentionDays = envInt('SIGHTLINE_RETENTION_DAYS', 0);
  const handle = await startIngester({
    consumer,
    store,
    port: envInt('INGESTER_PORT', 8082),
    host: process.env.INGESTER_HOST || '0.0.0.0',
    log,
    name,
    retentionDays,
    contentRetentionDays: envInt('SIGHTLINE_CONTENT_RETENTION_DAYS', retentionDays),
  });
  log(`consuming from ${redactUrlCredentials(natsUrl)}, writing to ${store.kind} database ${store.database}; health on ${handle.url}`);
  onShutdown(async () => {
    log('shutting down');
    await handle.close();
    await consumer.close();
    await store.close();
  });
}

main().catch((e: unknown) => {
  console.error(redactUrlCredentials(e instanceof Error ? (e.stack ?? e.message) : String(e)));
  process.exit(1);
});
