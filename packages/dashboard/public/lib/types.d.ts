// The query API's answers as the dashboard reads them (docs/api.md; GET /openapi.json).

export interface Whoami {
  kind: 'admin' | 'key';
  team: string | null;
  key_id: string | null;
  name?: string;
  scopes: string[];
  /** False: the API is open and answers everyone as the admin. */
  authentication: boolean;
}

export interface Tokens {
  input: number;
  output: number;
  cache_read: number;
  cache_write: number;
}

export interface RequestSummary {
  trace_id: string;
  span_id: string;
  start_time: string;
  team: string;
  key_id: string;
  model: string;
  provider: string;
  dialect: string;
  stream: boolean;
  status: number;
  error_type: string;
  total_ms: number;
  gateway_ms: number;
  ttft_ms: number;
  tokens: Tokens;
  cost_usd: number | null;
  end_user: string;
  session_id: string;
  tags: Record<string, string>;
}

export interface RequestList {
  data: RequestSummary[];
  next_cursor: string | null;
}

export interface WaterfallEntry {
  stage: string;
  span_id: string;
  offset_ns: number;
  duration_ns: number;
  offset_ms: number;
  duration_ms: number;
  status: 'UNSET' | 'OK' | 'ERROR';
  status_message: string;
}

export interface AttemptView {
  attempt: number;
  span_id: string;
  provider: string;
  model: string;
  status: number;
  error_type: string;
  offset_ns: number;
  duration_ns: number;
  offset_ms: number;
  duration_ms: number;
  ok: boolean;
}

export interface ContentView {
  request: string;
  response: string;
  request_bytes: number;
  response_bytes: number;
  request_truncated: boolean;
  response_truncated: boolean;
  partial: boolean;
  policy: string;
  redactions: Record<string, number>;
}

export interface RequestView {
  trace_id: string;
  span_id: string;
  parent_span_id: string;
  instance: string;
  seq: number;
  start_time: string;
  method: string;
  route: string;
  dialect: string;
  model: string;
  response_model: string;
  provider: string;
  upstream_model: string;
  team: string;
  stream: boolean;
  http_status: number;
  upstream_status: number;
  error_type: string;
  aborted: boolean;
  total_ns: number;
  gateway_ns: number;
  upstream_ns: number;
  ttfb_ns: number;
  ttft_ns: number;
  usage: { input_tokens: number; output_tokens: number; cache_read_tokens: number; cache_write_tokens: number; partial: boolean };
  request_bytes: number;
  response_bytes: number;
  end_user: string;
  session_id: string;
  tags: Record<string, string>;
  attributes: Record<string, string>;
  waterfall: WaterfallEntry[];
  attempts: AttemptView[];
  /** Absent: the caller may not read content; null: nothing stored. */
  content?: ContentView | null;
}

export interface TraceView {
  trace_id: string;
  total: number;
  omitted: number;
  requests: RequestView[];
}

/** One row of POST /v1/metrics: `time` with an interval, the group's dimensions, the metrics. */
export type MetricsRow = Record<string, string | number | null>;

export interface MetricsAnswer {
  rows: MetricsRow[];
  truncated: boolean;
}

export interface CaptureMinute {
  minute: string;
  served: number;
  captured: number;
  missing: number;
}

export interface CaptureInstance {
  instance: string;
  served: number;
  captured: number;
  missing: number;
  minutes: CaptureMinute[];
}

export interface CaptureAnswer {
  from: string;
  to: string;
  instances: CaptureInstance[];
  lag: { batches: number; p50_ms: number; p99_ms: number; max_ms: number };
}

export interface Limits {
  requests_per_minute?: number;
  tokens_per_minute?: number;
}

export interface Budget {
  usd: number;
  period: 'day' | 'month';
}

export interface KeyView {
  id: string;
  team: string;
  name: string;
  scopes: string[];
  models: string[];
  created_at: string;
  expires_at: string | null;
  revoked_at: string | null;
  hint: string;
  previous_valid_until: string | null;
  limits: Limits | null;
  budget: Budget | null;
  /** Only in the answer that created or rotated it. */
  key?: string;
}

export interface TeamView {
  name: string;
  created_at: string;
  updated_at: string;
  settings: { description?: string; content_capture?: 'full' | 'redacted' | 'none'; limits?: Limits; budget?: Budget };
  keys?: number;
}

export interface ApiErrorBody {
  error: { code: string; message: string; field?: string };
}
