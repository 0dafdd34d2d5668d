/**
 * `GET /metrics` in Prometheus text format (https://prometheus.io/docs/instrumenting/exposition_formats/).
 * Counters are plain numbers updated when a request ends; the text is made on scrape.
 */
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { markDiffNs } from '@sightline/core';
import type { CaptureSink, RequestRecord } from '@sightline/capture';
import type { Breaker } from './breaker.js';

/** How often the event loop's delay is sampled (`monitorEventLoopDelay`'s resolution). */
const LOOP_DELAY_RESOLUTION_MS = 10;

/**
 * How late a sample of the event loop ran, in seconds, from what Node's histogram holds for it
 * (nanoseconds between two samples, the sampling interval included). A sample that came early
 * reads 0; 0 samples read 0.
 */
export function loopDelaySeconds(intervalNs: number): number {
  return Math.max(0, intervalNs - LOOP_DELAY_RESOLUTION_MS * 1e6) / 1e9;
}

/** Upper bounds of the latency histograms, in seconds. */
const BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

class Histogram {
  readonly counts = new Array<number>(BUCKETS.length + 1).fill(0);
  sum = 0;
  count = 0;
  observe(seconds: number): void {
    let i = 0;
    while (i < BUCKETS.length && seconds > BUCKETS[i]!) i++;
    this.counts[i]!++;
    this.sum += seconds;
    this.count++;
  }
  render(name: string, help: string): string {
    let out = `# HELP ${name} ${help}\n# TYPE ${name} histogram\n`;
    let acc = 0;
    for (let i = 0; i < BUCKETS.length; i++) {
      acc += this.counts[i]!;
      out += `${name}_bucket{le="${BUCKETS[i]}"} ${acc}\n`;
    }
    out += `${name}_bucket{le="+Inf"} ${this.count}\n${name}_sum ${this.sum}\n${name}_count ${this.count}\n`;
    return out;
  }
}

export class Metrics {
  readonly #byStatus = new Map<string, number>();
  readonly #byError = new Map<string, number>();
  readonly #total = new Histogram();
  readonly #gateway = new Histogram();
  aborted = 0;
  /**
   * How late the event loop runs (issue 15): a request that arrives while the loop is busy
   * waits that long before the gateway even sees it. Sampled every 10 ms by libuv's timer
   * (perf_hooks.monitorEventLoopDelay); reported as quantiles since start. Node's histogram
   * holds the time between two samples, the 10 ms included: an idle loop reads about 10.1 ms.
   * What is reported is that time minus the 10 ms (`loopDelaySeconds`).
   */
  readonly #loopDelay: IntervalHistogram = monitorEventLoopDelay({ resolution: LOOP_DELAY_RESOLUTION_MS });
  /** The capture's content worker thread, when there is one (start.ts): its late batches. */
  contentThread: { late: number; answeredByMessage: number; policy: string | null } | null = null;

  constructor(
    readonly capture: CaptureSink | null,
    readonly breakers: readonly Breaker[] = [],
  ) {
    this.#loopDelay.enable();
  }

  /** Stops the event-loop sampling (at shutdown). */
  close(): void {
    this.#loopDelay.disable();
  }

  observe(r: RequestRecord): void {
    const cls = r.status === 0 ? 'unknown' : `${Math.floor(r.status / 100)}xx`;
    this.#byStatus.set(cls, (this.#byStatus.get(cls) ?? 0) + 1);
    if (r.aborted) this.aborted++;
    if (r.errorType !== '') this.#byError.set(r.errorType, (this.#byError.get(r.errorType) ?? 0) + 1);
    const total = markDiffNs(r.t0, r.tFinish);
    const upstream = r.tSent > 0 && r.tFirstByte > 0 ? markDiffNs(r.tSent, r.tLastByte > 0 ? r.tLastByte : r.tFinish) : 0;
    this.#total.observe(total / 1e9);
    this.#gateway.observe((total - upstream) / 1e9);
  }

  render(): string {
    let out = '# HELP sightline_gateway_requests_total Requests served, by status class.\n# TYPE sightline_gateway_requests_total counter\n';
    for (const [cls, n] of this.#byStatus) out += `sightline_gateway_requests_total{status="${cls}"} ${n}\n`;
    out += '# HELP sightline_gateway_errors_total Requests that failed, by error type (the `error_type` column).\n# TYPE sightline_gateway_errors_total counter\n';
    for (const [type, n] of this.#byError) out += `sightline_gateway_errors_total{type="${type}"} ${n}\n`;
    out += `# HELP sightline_gateway_requests_aborted_total Requests whose client went away first.\n# TYPE sightline_gateway_requests_aborted_total counter\nsightline_gateway_requests_aborted_total ${this.aborted}\n`;
    out += this.#total.render('sightline_gateway_request_duration_seconds', 'Time from request headers to the end of the response.');
    out += this.#gateway.render('sightline_gateway_own_duration_seconds', 'Request time minus time waiting on the provider.');
    const d = this.#loopDelay;
    out += '# HELP sightline_gateway_event_loop_delay_seconds How late the event loop ran a timer it sets every 10 ms (the 10 ms not counted), since start, by quantile.\n# TYPE sightline_gateway_event_loop_delay_seconds summary\n';
    for (const q of [0.5, 0.9, 0.99, 0.999]) out += `sightline_gateway_event_loop_delay_seconds{quantile="${q}"} ${loopDelaySeconds(d.percentile(q * 100))}\n`;
    out += `sightline_gateway_event_loop_delay_seconds_count ${d.count}\n`;
    out += `# HELP sightline_gateway_event_loop_delay_max_seconds Longest event-loop delay seen since start.\n# TYPE sightline_gateway_event_loop_delay_max_seconds gauge\nsightline_gateway_event_loop_delay_max_seconds ${loopDelaySeconds(d.max)}\n`;
    if (this.breakers.length > 0) {
      out += '# HELP sightline_gateway_breaker_open Whether a target\'s circuit breaker is open (1) or half-open (0.5).\n# TYPE sightline_gateway_breaker_open gauge\n';
      for (const b of this.breakers) out += `sightline_gateway_breaker_open{target="${b.name}"} ${b.state === 'open' ? 1 : b.state === 'half-open' ? 0.5 : 0}\n`;
      out += '# HELP sightline_gateway_breaker_opens_total Times a target\'s circuit breaker opened.\n# TYPE sightline_gateway_breaker_opens_total counter\n';
      for (const b of this.breakers) out += `sightline_gateway_breaker_opens_total{target="${b.name}"} ${b.opens}\n`;
    }
    const c = this.capture;
    if (c !== null) {
      const s = c.stats;
      out += counter('sightline_capture_recorded_total', 'Requests handed to capture.', s.recorded);
      out += counter('sightline_capture_published_total', 'Requests in batches JetStream acknowledged.', s.published);
      out += counter('sightline_capture_published_batches_total', 'Batches JetStream acknowledged.', s.publishedBatches);
      out += counter('sightline_capture_publish_failures_total', 'Failed or timed-out batch publishes (each retried).', s.publishFailures);
      out += counter('sightline_capture_spooled_total', 'Requests written to the disk spool.', s.spooled);
      out += counter('sightline_capture_replayed_total', 'Requests published from the disk spool.', s.replayed);
      out += counter('sightline_capture_dropped_total', 'Requests whose capture was dropped.', s.dropped);
      out += counter('sightline_capture_refused_batches_total', 'Batches NATS refused for good (over its max payload), dropped.', s.refused);
      out += `# HELP sightline_capture_spool_batches Batches in the disk spool.\n# TYPE sightline_capture_spool_batches gauge\nsightline_capture_spool_batches ${s.spoolBatches}\n`;
      out += `# HELP sightline_capture_spool_bytes Bytes in the disk spool.\n# TYPE sightline_capture_spool_bytes gauge\nsightline_capture_spool_bytes ${s.spoolBytes}\n`;
      out += counter('sightline_capture_content_made_here_batches_total', 'Batches whose usage and content the serving thread made itself, not the content thread: it failed, answered nothing for 60 s, or was given up on at shutdown.', s.contentMadeHere);
      out += counter('sightline_capture_content_made_here_total', 'Requests whose usage and content the serving thread made itself although there is a content thread: while the thread held 4 MiB of unanswered work, one by one as they ended, and those of the batches above.', s.contentMadeHereRequests);
      out += `# HELP sightline_capture_queue_depth Requests waiting to be published.\n# TYPE sightline_capture_queue_depth gauge\nsightline_capture_queue_depth ${s.queued}\n`;
    }
    const t = this.contentThread;
    if (t !== null) {
      out += counter('sightline_capture_content_late_total', 'Batches the content thread answered more than 1 s after they were posted (it runs at the lowest priority and had little CPU).', t.late);
      if (t.policy !== null) {
        out += `# HELP sightline_capture_content_thread_info The content thread's scheduling: policy idle (SCHED_IDLE), nice (nice 19) or normal.\n# TYPE sightline_capture_content_thread_info gauge\nsightline_capture_content_thread_info{policy="${t.policy}"} 1\n`;
      }
      out += counter('sightline_capture_content_answered_by_message_total', 'Batches the content thread answered by message, not in their shared answer area: their records did not fit it (content that grew to more than 1.125 times its bytes: invalid UTF-8, placeholders longer than what they replace), or the thread failed on them.', t.answeredByMessage);
    }
    return out;
  }
}

function counter(name: string, help: string, v: number): string {
  return `# HELP ${name} ${help}\n# TYPE ${name} counter\n${name} ${v}\n`;
}
