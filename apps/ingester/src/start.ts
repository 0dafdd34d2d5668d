/**
 * Starting an ingester: used by `main.ts` and by the one-command launcher.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import type { BusConsumer } from '@sightline/bus';
import { migrate, type Store } from '@sightline/store';
import type { RedactText } from '@sightline/spans';
import { Ingester } from './ingester.js';
import { Rollup } from './rollup.js';
import { Retention } from './retention.js';
import { renderIngesterMetrics } from './metrics.js';
import { redactPersonal } from '@sightline/redact';
import { redactUrlCredentials } from '@sightline/core';
import { OtlpExport, otlpOptionsFromEnv, type OtlpExportOptions } from './otlp.js';

export interface StartIngesterOptions {
  consumer: BusConsumer;
  store: Store;
  /** Port for /healthz and /metrics; null: no HTTP server (the launcher serves its own). */
  port: number | null;
  host?: string;
  /** Apply migrations before consuming. Default true. */
  migrate?: boolean;
  /** Name in `ingest_batches`. */
  name?: string;
  /** Days of data to keep (daily partitions older are dropped); 0: keep everything. Default 0. */
  retentionDays?: number;
  /** Days of content (prompts and answers) to keep; 0: keep everything. Default `retentionDays`. */
  contentRetentionDays?: number;
  /**
   * Replaces personal data in content of policy `redacted` (IngesterOptions.redactPersonal).
   * Default: @sightline/redact's `redactPersonal`; null: such content is withheld (counted).
   */
  redactPersonal?: RedactText | null;
  /**
   * Export the spans over OTLP too (otlp.ts). Default: from the environment
   * (OTEL_EXPORTER_OTLP_ENDPOINT and the variables beside it; none set: no export);
   * null: no export.
   */
  otlp?: OtlpExportOptions | null;
  log?: (msg: string) => void;
}

export interface IngesterHandle {
  ingester: Ingester;
  app: FastifyInstance | null;
  url: string;
  close(): Promise<void>;
}

/** Applies migrations, retrying while ClickHouse is unreachable (it may start after us). */
export async function migrateWithRetry(store: Store, log: (msg: string) => void, deadlineMs = 120_000): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  let delay = 250;
  for (;;) {
    try {
      const r = await migrate(store);
      if (r.applied.length > 0) log(`migrations applied: ${r.applied.join(', ')}`);
      return;
    } catch (e) {
      if ((e as { code?: string }).code === 'SL_STORE_MIGRATION' || Date.now() > deadline) throw e;
      log(`ClickHouse not ready (${(e as Error).message.split('\n')[0]}); retrying`);
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(5_000, delay * 2);
    }
  }
}

export async function startIngester(opts: StartIngesterOptions): Promise<IngesterHandle> {
  const log = opts.log ?? (() => {});
  const otlpOptions = opts.otlp === undefined ? otlpOptionsFromEnv() : opts.otlp;
  const otlp = otlpOptions === null ? null : await OtlpExport.create({ log, ...otlpOptions });
  if (otlp !== null) {
    const to = otlpOptions?.url ?? ((process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? '') || (process.env.OTEL_EXPORTER_OTLP_ENDPOINT ?? ''));
    log(`exporting spans over OTLP (${otlp.protocol}) to ${redactUrlCredentials(to)}`);
  }
  if (opts.migrate !== false) await migrateWithRetry(opts.store, log);
  // On a cluster, minutes are recomputed again as replicas catch up (Rollup.settleMs).
  const rollup = new Rollup(opts.store, 2_000, log, Date.now, (opts.store.cluster ?? null) === null ? [] : [5_000, 30_000, 120_000]);
  const ingester = new Ingester({ consumer: opts.consumer, store: opts.store, log, name: opts.name, rollup, redactPersonal: opts.redactPersonal === undefined ? redactPersonal : opts.redactPersonal, otlp });
  ingester.start();
  // Rollups of data older than migration 005, and minutes a crashed ingester left dirty.
  void rollup.reconcile().catch((e: unknown) => log(`rollup reconciliation failed (retried at the next start): ${(e as Error).message.split('\n')[0]}`));
  const retention = new Retention(opts.store, opts.retentionDays ?? 0, log, opts.contentRetentionDays ?? opts.retentionDays ?? 0);
  retention.start();
  let app: FastifyInstance | null = null;
  let url = '';
  if (opts.port !== null) {
    app = Fastify({ logger: false });
    app.get('/healthz', async () => ({ ok: true, ...ingester.stats }));
    app.get('/metrics', async (_req, reply) => {
      reply.header('content-type', 'text/plain; version=0.0.4');
      return renderIngesterMetrics(ingester);
    });
    const host = opts.host ?? '0.0.0.0';
    await app.listen({ port: opts.port, host });
    const addr = app.server.address();
    url = `http://127.0.0.1:${typeof addr === 'object' && addr !== null ? addr.port : 0}`;
  }
  let closing: Promise<void> | null = null;
  return {
    ingester,
    app,
    url,
    close() {
      closing ??= (async () => {
        if (app !== null) await app.close();
        retention.stop();
        await ingester.stop();
        // After the last write: what it handed over is exported within the deadline.
        await otlp?.close();
      })();
      return closing;
    },
  };
}
