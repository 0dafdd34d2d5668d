/**
 * Starting and stopping a gateway: used by `main.ts` (one app per process) and by the
 * one-command launcher (apps/sightline).
 */
import type { FastifyInstance } from 'fastify';
import { Capture, Spool, type CaptureSink } from '@sightline/capture';
import type { BusPublisher } from '@sightline/bus';
import type { Config } from '@sightline/config';
import { buildGateway, GatewayCore } from './server.js';
import { stderrLogger, type GatewayLogger } from './log.js';
import { ContentWorker } from './content-worker.js';
import type { Directory } from '@sightline/directory';
import { redactSecrets } from '@sightline/redact';
import type { ResponseCache } from '@sightline/cache';
import type { Governor } from '@sightline/controls';
import type { ModelCatalogueOptions } from './models.js';

export interface StartGatewayOptions {
  config: Config;
  /** Where capture batches are published (required unless capture is off). */
  publisher?: BusPublisher;
  instance: string;
  /**
   * Benchmark-only switch that turns capture off to price it (bench/). Production has no
   * way to disable capture; `capture.enabled: false` in the file is the same switch.
   */
  captureOff?: boolean;
  /** Override the configured port (0: any free port). */
  port?: number;
  /** Override the configured HTTP/2 cleartext port (null: none). */
  h2cPort?: number | null;
  host?: string;
  /** Progress messages (start, shutdown, capture trouble). Default: none. */
  log?: (msg: string) => void;
  /** Where internal errors are reported (pino's Logger fits). Default: JSON lines on stderr. */
  logger?: GatewayLogger;
  /** Keys and teams: authentication on. Absent or null: off (docs/api.md, "Authentication"). */
  directory?: Directory | null;
  /** The exact cache routes opt into; absent or null: none (routes with `cache` then pass through). */
  cache?: ResponseCache | null;
  /** Rate limits and budgets of keys and teams (docs/governance.md); absent or null: not enforced. */
  governor?: Governor | null;
  /** Prepare captured content in a worker thread (default true; SIGHTLINE_CONTENT_THREAD=0 in main.ts turns it off). */
  contentThread?: boolean;
  /**
   * The providers' model lists for `GET /v1/models` (models.ts): read once the gateway
   * listens (startGateway returns after that first round, each provider bounded by
   * `timeoutMs`), then every `refreshMs`. false: never read (only the routes' exact names are
   * listed). Default: on, every 10 minutes, 5 s per provider; failures go to `log`.
   */
  models?: Omit<ModelCatalogueOptions, 'log'> | false;
}

export interface GatewayHandle {
  app: FastifyInstance;
  /** The HTTP/2 cleartext listener, when configured. */
  h2c: FastifyInstance | null;
  core: GatewayCore;
  capture: CaptureSink | null;
  url: string;
  h2cUrl: string | null;
  /** Stops accepting, finishes in-flight requests, flushes capture; once. */
  close(deadlineMs?: number): Promise<void>;
}

function urlOf(app: FastifyInstance, host: string): string {
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
  return `http://${host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host}:${port}`;
}

export async function startGateway(opts: StartGatewayOptions): Promise<GatewayHandle> {
  const log = opts.log ?? (() => {});
  const enabled = opts.config.capture.enabled && opts.captureOff !== true;
  let capture: CaptureSink | null = null;
  const spoolDir = opts.config.capture.spoolDir;
  if (enabled && spoolDir !== null) Spool.claim(spoolDir);
  // Content is prepared in a worker thread unless told otherwise (SIGHTLINE_CONTENT_THREAD=0).
  const contentWorker = enabled && opts.config.capture.content !== 'none' || enabled && opts.directory != null ? (opts.contentThread === false ? null : new ContentWorker(log)) : null;
  contentWorker?.warm();
  if (contentWorker !== null && !process.execArgv.includes('--single-threaded-gc')) {
    // V8's GC helper threads run at the process's priority: they did the nice-19 content
    // thread's collections at full priority, beside this thread. Node reads V8 flags only
    // when it starts (docs/configuration.md, "V8 flags").
    log('the content thread is on and node was started without --single-threaded-gc: on a busy core, large prompts get a worse tail (docs/configuration.md, "V8 flags")');
  }
  if (enabled) {
    if (opts.publisher === undefined) throw new Error('startGateway needs a publisher when capture is on');
    capture = new Capture({
      instance: opts.instance,
      config: opts.config.capture,
      publisher: opts.publisher,
      spoolDir: opts.config.capture.spoolDir,
      spoolMaxBytes: opts.config.capture.spoolMaxBytes,
      onError: (e) => log(`capture: ${e instanceof Error ? e.message : String(e)}`),
      // Content leaves the gateway with its secrets replaced (issue 11): the bus and the
      // spool never hold a key in clear. Personal data is the ingester's to replace.
      content: { maxBytes: opts.config.capture.contentMaxBytes, keepBase64: opts.config.capture.contentKeepBase64, redactSecrets },
      ...(contentWorker === null ? {} : { contentPreparer: contentWorker }),
    });
  }
  const core = new GatewayCore(opts.config, capture, opts.instance, opts.logger ?? stderrLogger(opts.instance), opts.directory ?? null, opts.cache ?? null, opts.governor ?? null);
  core.metrics.contentThread = contentWorker;
  const app = buildGateway(core);
  const host = opts.host ?? opts.config.gateway.host;
  await app.listen({ port: opts.port ?? opts.config.gateway.port, host });
  const h2cPort = opts.h2cPort !== undefined ? opts.h2cPort : opts.config.gateway.h2cPort;
  let h2c: FastifyInstance | null = null;
  if (h2cPort !== null) {
    h2c = buildGateway(core, { http2: true });
    await h2c.listen({ port: h2cPort, host });
  }
  // Already serving: a provider that is slow or down delays only the full model list.
  if (opts.models !== false) await core.models.start({ ...opts.models, log });
  let closing: Promise<void> | null = null;
  return {
    app,
    h2c,
    core,
    capture,
    url: urlOf(app, host),
    h2cUrl: h2c === null ? null : urlOf(h2c, host),
    close(deadlineMs = 10_000) {
      closing ??= (async () => {
        const deadline = Date.now() + deadlineMs;
        await Promise.all([app.close(), h2c?.close()]);
        await core.close();
        if (capture !== null) {
          const left = await capture.close(Math.max(0, deadline - Date.now()));
          if (left > 0) log(`capture: ${left} requests were not published before the shutdown deadline`);
        }
        await opts.publisher?.close();
        await contentWorker?.close();
        if (spoolDir !== null) Spool.release(spoolDir);
      })();
      return closing;
    },
  };
}
