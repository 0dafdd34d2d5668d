/**
 * `npm start` with SIGHTLINE_EMBEDDED_SINGLE_PROCESS=1: the whole product in one process
 * (the layout before issue 15; main.ts runs the ingester, chdb and the query API in a child
 * process instead, so that their work does not delay the gateway's requests).
 *
 * Gateway, ingester and query API, with embedded stand-ins where no servers are named:
 * without NATS_URL an in-process bus carries the request records; without CLICKHOUSE_URL
 * the in-process ClickHouse engine (chdb) stores them under SIGHTLINE_DATA_DIR (default
 * ./data). With those variables set, the same command uses the real servers.
 */
import { loadConfigFromEnv, priceLookup } from '@sightline/config';
import { connectNats, MemoryBus, NatsConsumer, ResilientNatsPublisher, type BusConsumer, type BusPublisher } from '@sightline/bus';
import { dataDir, envInt, instanceId, onShutdown, redactUrlCredentials } from '@sightline/core';
import { storeFromEnv } from '@sightline/store';
import { join } from 'node:path';
import { startGateway } from '@sightline/app-gateway';
import { startIngester } from '@sightline/app-ingester';
import { startQuery } from '@sightline/app-query';
import { authFromEnv } from '@sightline/directory';
import { MemoryResponseCache, NatsResponseCache } from '@sightline/cache';
import { MemoryGovernor, NatsGovernor } from '@sightline/controls';

import { logger } from './log.js';

export async function runSingleProcess(): Promise<void> {
  // The spool lives with the rest of the local data unless told otherwise.
  process.env.SIGHTLINE_SPOOL_DIR ||= join(dataDir(), 'spool', `port-${process.env.GATEWAY_PORT || '8080'}`);
  const log = logger('sightline');
  const config = loadConfigFromEnv();
  const instance = instanceId('gw');
  const natsUrl = process.env.NATS_URL;

  let publisher: BusPublisher;
  let consumer: BusConsumer;
  let closeBus: () => Promise<void>;
  if (natsUrl !== undefined && natsUrl !== '') {
    const pub = new ResilientNatsPublisher(natsUrl, instance);
    const con = await NatsConsumer.open(await connectNats(natsUrl, `${instance}-ingester`, { waitOnFirstConnect: true }));
    publisher = pub;
    consumer = con;
    closeBus = async () => {
      await con.close();
    };
    log(`bus: NATS JetStream at ${redactUrlCredentials(natsUrl)}`);
  } else {
    const bus = new MemoryBus();
    // The gateway closes its publisher on shutdown; the in-process bus must outlive it
    // until the ingester has written what the gateway flushed.
    publisher = { publish: (d, id) => bus.publish(d, id), close: async () => {} };
    consumer = bus;
    closeBus = () => bus.close();
    log('bus: in-process (set NATS_URL to use NATS JetStream); one process (SIGHTLINE_EMBEDDED_SINGLE_PROCESS=1)');
  }

  const store = await storeFromEnv();
  log(store.kind === 'chdb' ? `store: in-process ClickHouse (chdb) under ${dataDir()} (set CLICKHOUSE_URL to use a server)` : `store: ClickHouse at ${redactUrlCredentials(process.env.CLICKHOUSE_URL ?? '')}`);

  const ingester = await startIngester({ consumer, store, port: envInt('INGESTER_PORT', 8082), host: config.query.host, log: logger('ingester'), retentionDays: envInt('SIGHTLINE_RETENTION_DAYS', 0), contentRetentionDays: envInt('SIGHTLINE_CONTENT_RETENTION_DAYS', envInt('SIGHTLINE_RETENTION_DAYS', 0)) });
  // One directory for the gateway and the query API of this process: NATS key-value with
  // NATS_URL, else in process, kept in $SIGHTLINE_DATA_DIR/directory.json.
  const auth = authFromEnv({ natsUrl, snapshotFile: join(dataDir(), natsUrl !== undefined && natsUrl !== '' ? join('directory', 'sightline.json') : 'directory.json'), log });
  await auth?.directory.ready;
  if (auth === null) log('WARNING: authentication is off (SIGHTLINE_ADMIN_TOKEN is not set): the gateway and query API are open to whoever reaches them (loopback by default)');
  // Limits and budgets: enforced with authentication on (keys and teams carry them).
  const governor = auth === null ? null : natsUrl !== undefined && natsUrl !== '' ? new NatsGovernor({ url: natsUrl, log }) : new MemoryGovernor({ file: join(dataDir(), 'limits.json') });
  await governor?.ready;
  const query = await startQuery({ store, port: config.query.port, host: config.query.host, log: logger('query'), priceOf: priceLookup(config.pricing, { shipped: config.pricingDefaults }), auth, governor });
  const wantsCache = config.routes.some((r) => r.cacheTtlMs > 0);
  const cache = !wantsCache
    ? null
    : natsUrl !== undefined && natsUrl !== ''
      ? new NatsResponseCache({ url: natsUrl, maxBytes: config.cache.maxBytes, maxEntryBytes: config.cache.maxEntryBytes, bucketMaxBytes: config.cache.maxBytes, log })
      : new MemoryResponseCache({ maxBytes: config.cache.maxBytes, maxEntryBytes: config.cache.maxEntryBytes });
  await cache?.ready;
  const gateway = await startGateway({ config, publisher, instance, log: logger('gateway'), captureOff: process.env.SIGHTLINE_BENCH_CAPTURE_OFF === '1', directory: auth?.directory ?? null, cache, governor });
  log(`gateway  ${gateway.url}  (OpenAI: POST /v1/chat/completions)`);
  log(`query    ${query.url}  (GET /v1/requests/{traceId}, GET /v1/stages)`);
  log(`ingester ${ingester.url}  (/healthz, /metrics)`);

  onShutdown(async () => {
    log('shutting down');
    await gateway.close(10_000);
    // Let the ingester write what the gateway flushed, within a deadline.
    const deadline = Date.now() + 10_000;
    if (consumer instanceof MemoryBus) {
      while (consumer.pending > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    }
    await ingester.close();
    await query.close();
    await auth?.directory.close();
    await cache?.close();
    await governor?.close();
    await closeBus();
    await store.close();
  });
}
