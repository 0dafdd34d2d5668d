/**
 * The shapes that travel from the gateway through the bus to ClickHouse.
 *
 * Field names are ClickHouse column names (migrations/), so a batch's rows are written
 * as JSONEachRow without renaming. 64-bit nanosecond values travel as decimal strings:
 * they exceed a JS number's exact range, and ClickHouse accepts quoted integers in
 * JSONEachRow from 18.16 on.
 */

/**
 * Stage names: a public contract. They are the `name` of stage spans in SQL and in the
 * query API; keep them stable once shipped (docs/schema.md lists them).
 * In request order; together they partition a request's total time.
 */
export const STAGES = [
  'ingress.read',
  'parse',
  'auth',
  'limits',
  'route',
  'cache',
  'budget',
  'translate.request',
  'upstream.retry',
  'upstream.connect',
  'upstream.send',
  'upstream.wait',
  'upstream.stream',
  'translate.response',
  'egress.write',
] as const;

export type StageName = (typeof STAGES)[number];

/**
 * Name of the span of one upstream attempt (child of the root, beside the stages). A
 * request has one per attempt: retries and fallbacks are visible one by one.
 */
export const ATTEMPT_SPAN = 'upstream.attempt';

export type SpanStatus = 'UNSET' | 'OK' | 'ERROR';

/** One row of `spans`. */
export interface SpanRow {
  trace_id: string;
  span_id: string;
  parent_span_id: string;
  name: string;
  kind: string;
  is_root: 0 | 1;
  /** Unix seconds of the start, for partitioning and time filters. */
  start_time: number;
  start_time_unix_nano: string;
  duration_ns: string;
  status_code: SpanStatus;
  status_message: string;
  model: string;
  provider: string;
  team: string;
  /** The caller's key id (`key_…`); '' when authentication is off. */
  key_id: string;
  instance: string;
  attr_keys: string[];
  attr_values: string[];
}

/** One row of `requests`: the summary of one request served by a gateway. */
export interface RequestRow {
  trace_id: string;
  span_id: string;
  instance: string;
  seq: string;
  start_time: number;
  start_time_unix_nano: string;
  method: string;
  route: string;
  dialect: string;
  model: string;
  response_model: string;
  provider: string;
  upstream_model: string;
  team: string;
  /** The caller's key id (`key_…`); '' when authentication is off. */
  key_id: string;
  stream: 0 | 1;
  http_status: number;
  upstream_status: number;
  error_type: string;
  aborted: 0 | 1;
  total_ns: string;
  gateway_ns: string;
  upstream_ns: string;
  ttfb_ns: string;
  ttft_ns: string;
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens: number;
  cache_write_tokens: number;
  request_bytes: number;
  response_bytes: number;
  /** 1 when the stream was cut short and the token counts are what had been seen. */
  usage_partial: 0 | 1;
  /** Answered from the exact cache (issue 12); absent in rows of earlier versions. */
  cache_hit?: 0 | 1;
  /**
   * Attribution (issue 11, migration 006): the end user, session and tags the caller named.
   * Absent in v1 rows (ClickHouse fills '' and []).
   */
  end_user?: string;
  session_id?: string;
  tag_keys?: string[];
  tag_values?: string[];
}

/**
 * A bus message of format v1: prebuilt rows, as gateways before the v2 record format
 * published them (a gateway's disk spool may still hold some). Current gateways publish
 * v2, finished request records the ingester builds spans from (wire.ts).
 */
export interface CaptureBatchV1 {
  v: 1;
  instance: string;
  /** Per-instance batch number; with `instance` it is the message id (dedup key). */
  batch: string;
  /** Number of requests, first in the message so counters can read it without parsing. */
  requests_count: number;
  published_at_unix_nano: string;
  requests: RequestRow[];
  spans: SpanRow[];
}

/** One row of `ingest_batches`: a capture batch as written by an ingester. */
export interface IngestBatchRow {
  instance: string;
  batch: string;
  ingester: string;
  published_at_unix_nano: string;
  written_at_unix_nano: string;
  written_at: number;
  requests: number;
  spans: number;
}
