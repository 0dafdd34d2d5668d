/**
 * `npm start`: the whole product on one machine, with one command.
 *
 * Two processes (issue 15, item 2): this one serves requests — the gateway, its capture
 * publisher, the in-process bus, the key directory, limits and the response cache — and a
 * child it forks (child.ts) owns the in-process ClickHouse engine (chdb): the ingester, the
 * store and the query API. chdb's inserts and merges and the span building no longer share
 * the event loop that serves requests. The child is restarted with backoff when it dies;
 * the bus stays here, so what it had not written is redelivered to the next one
 * (supervisor.ts). SIGHTLINE_EMBEDDED_SINGLE_PROCESS=1 runs everything in this process.
 *
 * Embedded stand-ins where no servers are named: without NATS_URL the in-process bus carries
 * the request records; without CLICKHOUSE_URL chdb stores them under SIGHTLINE_DATA_DIR
 * (default ./data). With those variables set, the same command uses the real servers.
 */
import { ConfigError, loadConfigFromEnv } from '@sightline/config';
import { MemoryBus, ResilientNatsPublisher, type BusPublisher } from '@sightline/bus';
import { dataDir, instanceId, onShutdown, redactUrlCredentials } from '@sightline/core';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startGateway } from '@sightline/app-gateway';
import { authFromEnv } from '@sightline/directory';
import { MemoryResponseCache, NatsResponseCache } from '@sightline/cache';
import { MemoryGovernor, NatsGovernor } from '@sightline/controls';
import { logger } from './log.js';
import { runSingleProcess } from './single.js';
import { ChildSupervisor } from './supervisor.js';
import { spoolLeftovers } from './leftovers.js';

async function main(): Promise<void> {
  // The spool lives with the rest of the local data unless told otherwise.
  process.env.SIGHTLINE_SPOOL_DIR ||= join(dataDir(), 'spool', `port-${process.env.GATEWAY_PORT || '8080'}`);
  if (process.env.SIGHTLINE_EMBEDDED_SINGLE_PROCESS === '1') return runSingleProcess();
  const log = logger('sightline');
  const config = loadConfigFromEnv();
  const instance = instanceId('gw');
  const natsUrl = process.env.NATS_URL;
  const nats = natsUrl !== undefined && natsUrl !== '';

  let publisher: BusPublisher;
  let bus: MemoryBus | null = null;
  if (nats) {
    publisher = new ResilientNatsPublisher(natsUrl, instance);
    log(`bus: NATS JetStream at ${redactUrlCredentials(natsUrl)}`);
  } else {
    const b = new MemoryBus();
    bus = b;
    // The gateway closes its publisher on shutdown; the bus must outlive it until the
    // store process has written what the gateway flushed.
    publisher = { publish: (d, id) => b.publish(d, id), close: async () => {} };
    log('bus: in-process, consumed by the store process (set NATS_URL to use NATS JetStream)');
  }

  // The key directory and the limits live here, beside the gateway that reads them on every
  // request. Without NATS the store process's query API mirrors this directory and asks
  // this process for limits usage (remote.ts); the file $SIGHTLINE_DATA_DIR/directory.json
  // has one writer, this process. With NATS both processes watch the shared buckets.
  const auth = authFromEnv({ natsUrl, snapshotFile: join(dataDir(), nats ? join('directory', 'sightline.json') : 'directory.json'), log });
  await auth?.directory.ready;
  if (auth === null) log('WARNING: authentication is off (SIGHTLINE_ADMIN_TOKEN is not set): the gateway and query API are open to whoever reaches them (loopback by default)');
  const governor = auth === null ? null : nats ? new NatsGovernor({ url: natsUrl, log }) : new MemoryGovernor({ file: join(dataDir(), 'limits.json') });
  await governor?.ready;
  const wantsCache = config.routes.some((r) => r.cacheTtlMs > 0);
  const cache = !wantsCache
    ? null
    : nats
      ? new NatsResponseCache({ url: natsUrl, maxBytes: config.cache.maxBytes, maxEntryBytes: config.cache.maxEntryBytes, bucketMaxBytes: config.cache.maxBytes, log })
      : new MemoryResponseCache({ maxBytes: config.cache.maxBytes, maxEntryBytes: config.cache.maxEntryBytes });
  await cache?.ready;

  // child.ts beside this file (child.js when built).
  const here = fileURLToPath(import.meta.url);
  const supervisor = new ChildSupervisor({
    entry: join(here, '..', `child${extname(here)}`),
    bus,
    directory: nats ? null : (auth?.directory ?? null),
    governor: nats ? null : governor,
    log,
  });
  supervisor.start();

  const gateway = await startGateway({ config, publisher, instance, log: logger('gateway'), captureOff: process.env.SIGHTLINE_BENCH_CAPTURE_OFF === '1', directory: auth?.directory ?? null, cache, governor });
  log(`gateway  ${gateway.url}  (OpenAI: POST /v1/chat/completions)`);

  onShutdown(async () => {
    log('shutting down');
    // Stop accepting, finish requests, flush capture into the bus.
    await gateway.close(10_000);
    // Let the store process write what the gateway flushed, within a deadline (it may be
    // restarting: the supervisor keeps it running until stop()).
    const deadline = Date.now() + 10_000;
    while (bus !== null && bus.pending > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    await supervisor.stop(15_000);
    // What it did not write goes to the spool, for the next start.
    if (bus !== null) await spoolLeftovers(bus, config.capture.spoolDir, config.capture.spoolMaxBytes, log);
    await auth?.directory.close();
    await cache?.close();
    await governor?.close();
    await bus?.close();
  });
}

main().catch((e: unknown) => {
  if (e instanceof ConfigError) console.error(`invalid configuration: ${e.message}`);
  else console.error(redactUrlCredentials(e instanceof Error ? (e.stack ?? e.message) : String(e)));
  process.exit(1);
});
