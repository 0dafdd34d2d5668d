/**
 * Exporting the spans the ingester builds to an OpenTelemetry backend over OTLP (issue 13,
 * item 4), beside ClickHouse and never in its way:
 *
 * - Spans are handed over only after ClickHouse acknowledged their write and the bus
 *   messages were acknowledged: the export never delays an acknowledgement, and a batch
 *   that fails to write (and comes back) is not exported before it is stored.
 * - They go through the SDK's BatchSpanProcessor, whose queue is bounded
 *   (`maxQueueSize`); past it, spans are dropped and counted, so a backend that is down or
 *   slow costs a bounded amount of memory and nothing else. Failed exports are counted and
 *   not retried beyond the exporter's own retries (within its `timeoutMillis`).
 * - Configured by the variables the OpenTelemetry specification names
 *   (https://opentelemetry.io/docs/specs/otel/protocol/exporter/ and
 *   https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/):
 *   OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) turns it on,
 *   OTEL_EXPORTER_OTLP_PROTOCOL (or …_TRACES_PROTOCOL) picks `http/protobuf` (the default),
 *   `http/json` or `grpc`, and the official exporters read OTEL_EXPORTER_OTLP_HEADERS,
 *   …_TIMEOUT, …_COMPRESSION and the certificate variables themselves.
 *
 * Delivery is at least once: a batch written again after a lost acknowledgement is
 * exported again, with the same trace and span ids (spans.ts derives them from the record).
 */
import type { Context } from '@opentelemetry/api';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { envDetector, detectResources, resourceFromAttributes, type Resource } from '@opentelemetry/resources';
import { BatchSpanProcessor, type ReadableSpan, type Span, type SpanExporter, type SpanProcessor } from '@opentelemetry/sdk-trace-base';

export type OtlpProtocol = 'http/protobuf' | 'http/json' | 'grpc';

export const OTLP_PROTOCOLS: readonly OtlpProtocol[] = ['http/protobuf', 'http/json', 'grpc'];

export interface OtlpExportOptions {
  /** Wire protocol. */
  protocol: OtlpProtocol;
  /**
   * The full URL spans are sent to (`http://collector:4318/v1/traces`; for gRPC
   * `http://collector:4317`). Default: from OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or
   * OTEL_EXPORTER_OTLP_ENDPOINT with `/v1/traces` appended for HTTP (the exporters do it).
   */
  url?: string;
  /** Request headers (HTTP protocols only). Default: from OTEL_EXPORTER_OTLP_HEADERS. */
  headers?: Record<string, string>;
  /**
   * Spans waiting for export, at most; past it they are dropped and counted. Default 2048
   * (the SDK's default), or OTEL_BSP_MAX_QUEUE_SIZE.
   */
  maxQueueSize?: number;
  /** Spans per export request, at most. Default 512, or OTEL_BSP_MAX_EXPORT_BATCH_SIZE. */
  maxExportBatchSize?: number;
  /** Milliseconds a span may wait for a fuller batch. Default 5000, or OTEL_BSP_SCHEDULE_DELAY. */
  scheduledDelayMillis?: number;
  /**
   * Milliseconds one export request may take, retries included. Default 10 000, or
   * OTEL_EXPORTER_OTLP_TIMEOUT.
   */
  timeoutMillis?: number;
  /** `service.name` of the exported spans unless OTEL_SERVICE_NAME says otherwise. Default `sightline-gateway`. */
  serviceName?: string;
  log?: (msg: string) => void;
}

export interface OtlpExportStats {
  /** Spans the backend accepted. */
  exported: number;
  /** Spans in export requests that failed (backend down, refused, timed out), after the exporter's retries. */
  failed: number;
  /** Spans dropped because the queue was full (the backend too slow or down for too long). */
  dropped: number;
  /** Spans handed over and not yet exported, failed or dropped: queued or in an export request. */
  pending: number;
}

function positiveInt(env: NodeJS.ProcessEnv, name: string): number | undefined {
  const v = env[name];
  if (v === undefined || v.trim() === '') return undefined;
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`environment variable ${name} must be a positive integer, got ${JSON.stringify(v)}`);
  return n;
}

/**
 * OTLP export settings from the environment; null when no endpoint is set, or when
 * OTEL_TRACES_EXPORTER is `none`. Throws at start for a protocol it does not know.
 */
export function otlpOptionsFromEnv(env: NodeJS.ProcessEnv = process.env): OtlpExportOptions | null {
  const endpoint = (env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? '') || (env.OTEL_EXPORTER_OTLP_ENDPOINT ?? '');
  if (endpoint.trim() === '') return null;
  const exporters = (env.OTEL_TRACES_EXPORTER ?? '').split(',').map((s) => s.trim());
  if (exporters.includes('none')) return null;
  const raw = ((env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? '') || (env.OTEL_EXPORTER_OTLP_PROTOCOL ?? '') || 'http/protobuf').trim();
  const protocol = OTLP_PROTOCOLS.find((p) => p === raw);
  if (protocol === undefined) throw new Error(`OTEL_EXPORTER_OTLP_PROTOCOL must be one of ${OTLP_PROTOCOLS.join(', ')}, got ${JSON.stringify(raw)}`);
  return { protocol, maxQueueSize: positiveInt(env, 'OTEL_BSP_MAX_QUEUE_SIZE') };
}

/**
 * Holds the spans the SpanBuilder makes (it is one of its `spanProcessors`) until the
 * ingester knows whether their batch was stored: `take()` after each decode.
 */
class HoldingProcessor implements SpanProcessor {
  #spans: ReadableSpan[] = [];
  onStart(_span: Span, _ctx: Context): void {}
  onEnd(span: ReadableSpan): void {
    this.#spans.push(span);
  }
  take(): ReadableSpan[] {
    const out = this.#spans;
    this.#spans = [];
    return out;
  }
  async forceFlush(): Promise<void> {}
  async shutdown(): Promise<void> {}
}

/** Counts what the exporter did with the spans the BatchSpanProcessor gave it. */
class CountingExporter implements SpanExporter {
  /** Spans given to `export` (they left the processor's queue). */
  sent = 0;
  exported = 0;
  failed = 0;
  #lastLog = 0;
  constructor(
    readonly inner: SpanExporter,
    readonly log: (msg: string) => void,
  ) {}
  export(spans: ReadableSpan[], done: (r: ExportResult) => void): void {
    const n = spans.length;
    this.sent += n;
    this.inner.export(spans, (r) => {
      if (r.code === ExportResultCode.SUCCESS) this.exported += n;
      else {
        this.failed += n;
        // A backend that stays down fails every few seconds: say so once a minute.
        const now = Date.now();
        if (now - this.#lastLog > 60_000) {
          this.#lastLog = now;
          this.log(`OTLP export of ${n} spans failed (counted in sightline_ingest_otlp_spans_failed_total): ${(r.error?.message ?? 'unknown error').split('\n')[0]}`);
        }
      }
      done(r);
    });
  }
  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }
  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}

async function createExporter(opts: OtlpExportOptions): Promise<SpanExporter> {
  const common = {
    ...(opts.url === undefined ? {} : { url: opts.url }),
    ...(opts.timeoutMillis === undefined ? {} : { timeoutMillis: opts.timeoutMillis }),
  };
  const headers = opts.headers === undefined ? {} : { headers: opts.headers };
  // Loaded on demand: a process that does not export never loads them (gRPC is the heaviest).
  switch (opts.protocol) {
    case 'http/json': {
      const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-http');
      return new OTLPTraceExporter({ ...common, ...headers });
    }
    case 'http/protobuf': {
      const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-proto');
      return new OTLPTraceExporter({ ...common, ...headers });
    }
    case 'grpc': {
      if (opts.headers !== undefined) throw new Error('OTLP over gRPC takes its headers from OTEL_EXPORTER_OTLP_HEADERS');
      const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-grpc');
      return new OTLPTraceExporter(common);
    }
  }
}

/**
 * The export side of the ingester: a processor for the SpanBuilder that holds spans, and
 * `offer()` to pass the spans of stored batches on to the BatchSpanProcessor.
 */
export class OtlpExport {
  readonly protocol: OtlpProtocol;
  /** For the SpanBuilder's `spanProcessors`. */
  readonly holder = new HoldingProcessor();
  /** For the SpanBuilder's `resource`. */
  readonly resource: Resource;
  readonly #exporter: CountingExporter;
  readonly #bsp: BatchSpanProcessor;
  readonly #maxQueue: number;
  readonly #log: (msg: string) => void;
  /** Spans accepted into the processor's queue (not dropped). */
  #accepted = 0;
  #dropped = 0;
  #closed = false;
  #warnedDrop = false;

  private constructor(opts: OtlpExportOptions, exporter: SpanExporter) {
    this.protocol = opts.protocol;
    this.#log = opts.log ?? (() => {});
    this.#maxQueue = opts.maxQueueSize ?? 2048;
    this.#exporter = new CountingExporter(exporter, this.#log);
    this.#bsp = new BatchSpanProcessor(this.#exporter, {
      maxQueueSize: this.#maxQueue,
      maxExportBatchSize: Math.min(opts.maxExportBatchSize ?? 512, this.#maxQueue),
      ...(opts.scheduledDelayMillis === undefined ? {} : { scheduledDelayMillis: opts.scheduledDelayMillis }),
    });
    // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (envDetector) win over our default name.
    this.resource = resourceFromAttributes({ 'service.name': opts.serviceName ?? 'sightline-gateway' }).merge(detectResources({ detectors: [envDetector] }));
  }

  static async create(opts: OtlpExportOptions): Promise<OtlpExport> {
    return new OtlpExport(opts, await createExporter(opts));
  }

  /** Spans held for the record(s) just decoded (HoldingProcessor). */
  take(): ReadableSpan[] {
    return this.holder.take();
  }

  /**
   * Passes spans of stored batches on for export. Never waits: a span that does not fit in
   * the queue is dropped and counted.
   */
  offer(spans: readonly ReadableSpan[]): void {
    if (this.#closed) return;
    for (const s of spans) {
      // The processor's queue holds exactly the spans accepted and not yet given to the
      // exporter; the same bound is checked here, so every span it would drop is counted
      // (its own count is not exposed) and it never has to drop one itself.
      if (this.#accepted - this.#exporter.sent >= this.#maxQueue) {
        this.#dropped++;
        continue;
      }
      this.#accepted++;
      this.#bsp.onEnd(s);
    }
    if (this.#dropped > 0 && !this.#warnedDrop) {
      this.#warnedDrop = true;
      this.#log(`OTLP export queue full (${this.#maxQueue} spans): dropping spans, counted in sightline_ingest_otlp_spans_dropped_total`);
    }
  }

  get stats(): OtlpExportStats {
    const e = this.#exporter;
    return { exported: e.exported, failed: e.failed, dropped: this.#dropped, pending: this.#accepted - e.exported - e.failed };
  }

  /** Exports what is queued, within `deadlineMs`; what is left after it is not exported. */
  async close(deadlineMs = 5_000): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), deadlineMs);
      timer.unref();
    });
    const r = await Promise.race([this.#bsp.shutdown().then(() => 'done' as const, () => 'done' as const), late]);
    clearTimeout(timer);
    if (r === 'late') this.#log(`OTLP export: ${this.stats.pending} spans not exported within ${deadlineMs} ms of shutdown`);
  }
}
