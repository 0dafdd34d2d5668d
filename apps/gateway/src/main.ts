/**
 * `npm run start:gateway`: the gateway alone, configured by environment.
 *   SIGHTLINE_CONFIG     configuration file (default config/sightline.yaml)
 *   NATS_URL             NATS server(s), comma-separated (required)
 *   SIGHTLINE_NATS_REPLICAS  copies of the capture stream and the buckets in a NATS cluster (default 1)
 *   GATEWAY_PORT         listening port (through the shipped file's ${GATEWAY_PORT})
 *   GATEWAY_WORKERS      processes serving the port (node:cluster); default 1, `auto` = one per core
 *   SIGHTLINE_SPOOL_DIR  capture spool (default ./data/spool; one subdirectory per worker)
 *   SIGHTLINE_MODELS_REFRESH_MS  how often the providers' model lists are read again (default 600000; 0: only at start)
 *   SIGHTLINE_BENCH_CAPTURE_OFF=1  benchmark-only: serve without capture
 */
import cluster from 'node:cluster';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { ConfigError, loadConfigFromEnv } from '@sightline/config';
import { natsReplicasFromEnv, ResilientNatsPublisher } from '@sightline/bus';
import { dataDir, envInt, instanceId, onShutdown, redactUrlCredentials } from '@sightline/core';
import { authFromEnv } from '@sightline/directory';
import { NatsResponseCache } from '@sightline/cache';
import { NatsGovernor } from '@sightline/controls';
import { startGateway } from './start.js';

function log(msg: string): void {
  const who = cluster.isWorker ? `gateway[${cluster.worker?.id ?? '?'}]` : 'gateway';
  process.stderr.write(`${new Date().toISOString()} ${who} ${msg}\n`);
}

function workerCount(): number {
  const v = process.env.GATEWAY_WORKERS;
  if (v === undefined || v === '' || v === '1') return 1;
  if (v === 'auto') return availableParallelism();
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > 256) throw new Error(`GATEWAY_WORKERS must be a number from 1 to 256 or "auto", got "${v}"`);
  return n;
}

/** A worker's message to the primary once it listens. */
interface ReadyMessage {
  type: 'sightline-ready';
}

function isReady(m: unknown): m is ReadyMessage {
  return typeof m === 'object' && m !== null && (m as { type?: unknown }).type === 'sightline-ready';
}

/** Restart delays for a worker that died after serving: doubling from 0.5 s to 30 s. */
const RESTART_MIN_MS = 500;
const RESTART_MAX_MS = 30_000;
/** A worker that served this long before dying restarts at the shortest delay again. */
const STABLE_MS = 60_000;

/**
 * The primary of a multi-worker gateway: forks, restarts a worker that dies after serving
 * (with a backoff), stops them once. A worker that dies before it ever listened (a bad
 * configuration, a port in use) would die again: the primary stops every worker and exits
 * non-zero, and the process manager or container runtime decides what happens next.
 */
function runPrimary(n: number): void {
  let stopping = false;
  const fork = (slot: number, delayMs: number) => {
    const w = cluster.fork({ GATEWAY_WORKER_SLOT: String(slot) });
    let readyAt = 0;
    w.on('message', (m: unknown) => {
      if (!isReady(m) || readyAt !== 0) return;
      readyAt = Date.now();
      log(`worker ${slot} ready (pid ${w.process.pid ?? '?'})`);
    });
    w.on('exit', (code, signal) => {
      if (stopping) return;
      if (readyAt === 0) {
        log(`worker ${slot} exited (${signal ?? code}) before it was ready; stopping the gateway`);
        void stopAll().then(() => process.exit(typeof code === 'number' && code !== 0 ? code : 1));
        return;
      }
      const next = Date.now() - readyAt >= STABLE_MS ? RESTART_MIN_MS : Math.min(RESTART_MAX_MS, delayMs * 2);
      log(`worker ${slot} exited (${signal ?? code}); starting another in ${next} ms`);
      setTimeout(() => {
        if (!stopping) fork(slot, next);
      }, next);
    });
  };
  const stopAll = async (): Promise<void> => {
    stopping = true;
    const workers = Object.values(cluster.workers ?? {}).filter((w) => w !== undefined);
    await Promise.all(
      workers.map(
        (w) =>
          new Promise<void>((resolve) => {
            if (w.isDead()) return resolve();
            w.once('exit', () => resolve());
            w.process.kill('SIGTERM');
          }),
      ),
    );
  };
  for (let i = 0; i < n; i++) fork(i, RESTART_MIN_MS / 2);
  log(`${n} workers`);
  onShutdown(stopAll);
}

async function runWorker(): Promise<void> {
  // The spool lives with the rest of the local data unless told otherwise, one per port
  // (stable across restarts, distinct between gateways on one host) and one per worker,
  // since a spool is replayed by the process that owns it.
  process.env.SIGHTLINE_SPOOL_DIR ||= join(dataDir(), 'spool', `port-${process.env.GATEWAY_PORT || '8080'}`);
  const slot = process.env.GATEWAY_WORKER_SLOT;
  if (slot !== undefined) process.env.SIGHTLINE_SPOOL_DIR = join(process.env.SIGHTLINE_SPOOL_DIR, `worker-${slot}`);
  const config = loadConfigFromEnv();
  const natsUrl = process.env.NATS_URL;
  if (natsUrl === undefined || natsUrl === '') throw new Error('NATS_URL is required (e.g. nats://127.0.0.1:4222); `npm start` runs everything on one machine without it');
  const instance = instanceId('gw');
  // Capture serialises each finished record in this thread once its response is over
  // (~7 µs); the ingester builds the spans (capture/src/wire.ts).
  // SIGHTLINE_NATS_REPLICAS: copies of the stream and the buckets in a NATS cluster (docs/scaling.md).
  const replicas = natsReplicasFromEnv();
  const publisher = new ResilientNatsPublisher(natsUrl, instance, { replicas });
  // Keys are watched from NATS into memory; a local copy serves them if NATS is down at start.
  const auth = authFromEnv({ natsUrl, snapshotFile: join(dataDir(), 'directory', `gateway-port-${process.env.GATEWAY_PORT || '8080'}${slot === undefined ? '' : `-worker-${slot}`}.json`), log });
  if (auth !== null) {
    await auth.directory.ready;
    const s = auth.directory.status();
    log(`authentication on: ${s.keys} keys, ${s.teams} teams (${s.synced ? 'synced with NATS' : `NOT synced with NATS, serving the ${s.loadedFrom === 'snapshot' ? 'local copy' : 'empty directory'}`})`);
  } else {
    log('WARNING: authentication is off (SIGHTLINE_ADMIN_TOKEN is not set): anyone who can reach this port sends requests on the configured provider keys');
  }
  // The exact cache, shared through NATS, only when a route asks for one.
  const cache = config.routes.some((r) => r.cacheTtlMs > 0) ? new NatsResponseCache({ url: natsUrl, maxBytes: config.cache.maxBytes, maxEntryBytes: config.cache.maxEntryBytes, bucketMaxBytes: config.cache.maxBytes, replicas, log }) : null;
  await cache?.ready;
  // Limits and budgets of keys and teams: enforced with authentication on (keys carry them).
  const governor = auth === null ? null : new NatsGovernor({ url: natsUrl, replicas, log });
  await governor?.ready;
  const modelsRefreshMs = envInt('SIGHTLINE_MODELS_REFRESH_MS', 600_000);
  if (modelsRefreshMs < 0) throw new Error(`SIGHTLINE_MODELS_REFRESH_MS must be 0 or more, got ${modelsRefreshMs}`);
  const gw = await startGateway({ config, publisher, instance, captureOff: process.env.SIGHTLINE_BENCH_CAPTURE_OFF === '1', log, directory: auth?.directory ?? null, cache, governor, models: { refreshMs: modelsRefreshMs }, contentThread: process.env.SIGHTLINE_CONTENT_THREAD !== '0' });
  log(`listening on ${gw.url} (instance ${instance}, config ${config.file})`);
  if (cluster.isWorker) process.send?.({ type: 'sightline-ready' } satisfies ReadyMessage);
  void publisher.ready.then(() => log(`connected to NATS at ${redactUrlCredentials(natsUrl)}`));
  onShutdown(async () => {
    log('shutting down');
    await gw.close(10_000);
    await auth?.directory.close();
    await cache?.close();
    await governor?.close();
  });
}

try {
  const n = workerCount();
  if (n > 1 && cluster.isPrimary) {
    // Check the configuration once before forking: every worker would fail on it alike.
    loadConfigFromEnv();
    runPrimary(n);
  } else await runWorker();
} catch (e) {
  if (e instanceof ConfigError) console.error(`invalid configuration: ${e.message}`);
  else console.error(redactUrlCredentials(e instanceof Error ? (e.stack ?? e.message) : String(e)));
  process.exit(1);
}
