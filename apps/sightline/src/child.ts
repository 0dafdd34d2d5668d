/**
 * The embedded mode's store process, forked by main.ts: the ingester, the store (chdb, in
 * this process's main thread — a worker thread that loads chdb crashes the process on exit)
 * and the query API. chdb's inserts and merges and the ingester's span building run here,
 * on this process's event loop, not on the one that serves the gateway's requests (issue 15).
 *
 * Without NATS_URL it consumes the parent's in-process bus, mirrors the parent's key
 * directory and asks the parent for limits usage (remote.ts); with NATS_URL it uses NATS
 * for all three, like the separate query and ingester apps.
 *
 * Once serving, it runs at a lower scheduling priority than the gateway process (nice.ts).
 *
 * Signals: Ctrl-C reaches the whole process group, and the parent orders the shutdown (its
 * gateway flushes capture first), so SIGINT and SIGTERM are ignored here; the child stops
 * on the parent's `shutdown` message, or when the parent's channel closes (parent gone).
 */
import { loadConfigFromEnv, priceLookup } from '@sightline/config';
import { connectNats, NatsConsumer, type BusConsumer } from '@sightline/bus';
import { dataDir, envInt, instanceId, redactUrlCredentials } from '@sightline/core';
import { storeFromEnv } from '@sightline/store';
import { join } from 'node:path';
import { startIngester } from '@sightline/app-ingester';
import { startQuery } from '@sightline/app-query';
import { authFromEnv, hasherFromEnv, type Directory } from '@sightline/directory';
import { NatsGovernor, type Governor } from '@sightline/controls';
import { logger } from './log.js';
import { lowerPriority, STORE_NICENESS } from './nice.js';
import { MirrorDirectory, ParentLink, RemoteConsumer, RemoteUsage } from './remote.js';

const ignore = () => {};
process.on('SIGINT', ignore);
process.on('SIGTERM', ignore);

async function main(): Promise<void> {
  const link = new ParentLink();
  const log = logger('sightline');
  let stopping: Promise<void> | null = null;
  let close: () => Promise<void> = async () => {};
  const stop = () => {
    stopping ??= (async () => {
      const t = setTimeout(() => {
        log('store process: close took over 15 s; exiting');
        process.exit(1);
      }, 15_000);
      t.unref();
      await close();
      process.exit(0);
    })().catch((e: unknown) => {
      console.error('store process: shutdown failed:', e);
      process.exit(1);
    });
  };
  link.onShutdown = stop;

  const config = loadConfigFromEnv();
  const natsUrl = process.env.NATS_URL;
  const nats = natsUrl !== undefined && natsUrl !== '';
  let consumer: BusConsumer;
  if (nats) {
    consumer = await NatsConsumer.open(await connectNats(natsUrl, `${instanceId('gw')}-ingester`, { waitOnFirstConnect: true }));
  } else {
    consumer = new RemoteConsumer(link);
  }
  const store = await storeFromEnv();
  log(store.kind === 'chdb' ? `store: in-process ClickHouse (chdb) under ${dataDir()} in the store process (set CLICKHOUSE_URL to use a server)` : `store: ClickHouse at ${redactUrlCredentials(process.env.CLICKHOUSE_URL ?? '')}`);

  const ingester = await startIngester({ consumer, store, port: envInt('INGESTER_PORT', 8082), host: config.query.host, log: logger('ingester'), retentionDays: envInt('SIGHTLINE_RETENTION_DAYS', 0), contentRetentionDays: envInt('SIGHTLINE_CONTENT_RETENTION_DAYS', envInt('SIGHTLINE_RETENTION_DAYS', 0)) });

  let auth: { adminToken: string; directory: Directory } | null = null;
  let governor: Pick<Governor, 'usage'> | null = null;
  let ownGovernor: NatsGovernor | null = null;
  if (nats) {
    // Its own watcher of the NATS directory, with its own snapshot file (the parent's is
    // directory/sightline.json).
    auth = authFromEnv({ natsUrl, snapshotFile: join(dataDir(), 'directory', 'sightline-query.json'), log });
    ownGovernor = auth === null ? null : new NatsGovernor({ url: natsUrl, log });
    governor = ownGovernor;
  } else {
    // The parent validated SIGHTLINE_ADMIN_TOKEN; the mirror needs only the same hasher.
    const adminToken = (process.env.SIGHTLINE_ADMIN_TOKEN ?? '').trim();
    if (adminToken !== '') {
      auth = { adminToken, directory: new MirrorDirectory(link, hasherFromEnv(adminToken, process.env.SIGHTLINE_KEY_HASH_SECRET)) };
      governor = new RemoteUsage(link);
    }
  }
  await auth?.directory.ready;
  await ownGovernor?.ready;
  const query = await startQuery({ store, port: config.query.port, host: config.query.host, log: logger('query'), priceOf: priceLookup(config.pricing, { shipped: config.pricingDefaults }), auth, governor });

  close = async () => {
    // The parent asks once its gateway has flushed capture and the bus is drained.
    await ingester.close();
    await consumer.close();
    await query.close();
    await auth?.directory.close();
    await ownGovernor?.close();
    await store.close();
  };
  log(`query    ${query.url}  (GET /v1/requests/{traceId}, GET /v1/stages)`);
  log(`ingester ${ingester.url}  (/healthz, /metrics)`);
  link.send({ t: 'ready' });
  const lowered = lowerPriority();
  if (lowered > 0) log(`store process: ${lowered} threads at niceness ${STORE_NICENESS} (the gateway process goes first)`);
  if (stopping === null && !link.connected) stop();
}

main().catch((e: unknown) => {
  console.error(redactUrlCredentials(e instanceof Error ? (e.stack ?? e.message) : String(e)));
  process.exit(1);
});
