/** `GET /metrics` for the ingester, Prometheus text format. */
import type { IngesterStats } from './ingester.js';

export function renderIngesterMetrics(s: IngesterStats): string {
  const lines: [string, string, 'counter' | 'gauge', number][] = [
    ['sightline_ingest_batches_total', 'Capture batches written and acknowledged.', 'counter', s.batches],
    ['sightline_ingest_requests_total', 'Request rows written.', 'counter', s.requests],
    ['sightline_ingest_spans_total', 'Span rows written.', 'counter', s.spans],
    ['sightline_ingest_write_failures_total', 'ClickHouse writes that failed and were retried.', 'counter', s.writeFailures],
    ['sightline_ingest_invalid_messages_total', 'Bus messages that were not capture batches.', 'counter', s.invalid],
    ['sightline_ingest_lag_seconds', 'Publish-to-written lag of the last batch.', 'gauge', s.lastLagMs / 1000],
  ];
  return lines.map(([n, h, t, v]) => `# HELP ${n} ${h}\n# TYPE ${n} ${t}\n${n} ${v}\n`).join('');
}
