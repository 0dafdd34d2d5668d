/** `GET /metrics` for the ingester, Prometheus text format. */
import type { Ingester } from './ingester.js';

const LAG_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300];

/** Cumulative lag histogram, fed from the ingester's recent observations on each scrape. */
class LagHistogram {
  readonly counts = new Array<number>(LAG_BUCKETS.length + 1).fill(0);
  sum = 0;
  count = 0;
  take(obs: number[]): void {
    for (const ms of obs.splice(0)) {
      const s = ms / 1000;
      let i = 0;
      while (i < LAG_BUCKETS.length && s > LAG_BUCKETS[i]!) i++;
      this.counts[i]!++;
      this.sum += s;
      this.count++;
    }
  }
  render(): string {
    const n = 'sightline_ingest_lag_seconds_histogram';
    let out = `# HELP ${n} Publish-to-written lag of capture batches.\n# TYPE ${n} histogram\n`;
    let acc = 0;
    LAG_BUCKETS.forEach((b, i) => {
      acc += this.counts[i]!;
      out += `${n}_bucket{le="${b}"} ${acc}\n`;
    });
    return out + `${n}_bucket{le="+Inf"} ${this.count}\n${n}_sum ${this.sum}\n${n}_count ${this.count}\n`;
  }
}

const histograms = new WeakMap<Ingester, LagHistogram>();

export function renderIngesterMetrics(ingester: Ingester): string {
  let h = histograms.get(ingester);
  if (h === undefined) histograms.set(ingester, (h = new LagHistogram()));
  h.take(ingester.lagObservations);
  const s = ingester.stats;
  // Zero while no OTLP endpoint is configured, so the page has one shape.
  const o = ingester.otlp?.stats ?? { exported: 0, failed: 0, dropped: 0, pending: 0 };
  const lines: [string, string, 'counter' | 'gauge', number][] = [
    ['sightline_ingest_batches_total', 'Capture batches written and acknowledged.', 'counter', s.batches],
    ['sightline_ingest_requests_total', 'Request rows written.', 'counter', s.requests],
    ['sightline_ingest_spans_total', 'Span rows written.', 'counter', s.spans],
    ['sightline_ingest_content_total', 'Content rows written (prompts and answers).', 'counter', s.content],
    ['sightline_ingest_content_withheld_total', 'Requests whose content was not stored: policy redacted without a personal-data redactor, or content that could not be prepared.', 'counter', s.contentWithheld],
    ['sightline_ingest_write_failures_total', 'ClickHouse writes that failed and were retried.', 'counter', s.writeFailures],
    ['sightline_ingest_inserts_resent_total', 'ClickHouse inserts sent once more at once because the connection broke under them (a write that then failed counts in write_failures too).', 'counter', ingester.insertsResent],
    ['sightline_ingest_dead_lettered_total', 'Messages moved to the dead-letter subject.', 'counter', s.deadLettered],
    ['sightline_ingest_redelivered_total', 'Messages received again after an earlier delivery was not acknowledged.', 'counter', s.redelivered],
    ['sightline_ingest_given_back_total', 'Messages this ingester gave back (nak) to be delivered again, after a failed write or a failed dead-lettering.', 'counter', s.givenBack],
    ['sightline_ingest_lag_seconds', 'Publish-to-written lag of the last batch.', 'gauge', s.lastLagMs / 1000],
    ['sightline_ingest_otlp_spans_exported_total', 'Spans an OTLP backend accepted (OTEL_EXPORTER_OTLP_ENDPOINT).', 'counter', o.exported],
    ['sightline_ingest_otlp_spans_failed_total', 'Spans in OTLP export requests that failed after the exporter\'s retries (backend down, refusing or timing out).', 'counter', o.failed],
    ['sightline_ingest_otlp_spans_dropped_total', 'Spans not exported because the OTLP export queue was full (backend down or slow).', 'counter', o.dropped],
    ['sightline_ingest_otlp_spans_pending', 'Spans waiting in the OTLP export queue or in an export request.', 'gauge', o.pending],
    ['sightline_ingest_lag_observations_dropped_total', 'Lag observations left out of the lag histogram because too many waited for a scrape.', 'counter', s.lagObservationsDropped],
  ];
  return lines.map(([n, help, t, v]) => `# HELP ${n} ${help}\n# TYPE ${n} ${t}\n${n} ${v}\n`).join('') + h.render();
}
