/**
 * Prompts and answers (issue 11): the `content` table (migrations/006_content.sql) read for
 * `GET /v1/requests/{traceId}` and searched by `GET /v1/requests?q=`.
 *
 * `content` is ordered by (team, start_time, trace_id, span_id) and partitioned by day, so
 * one request's row is a key lookup once its team and start time are known — and they are,
 * from its `requests` row. Rows are not read with FINAL: a batch written twice has written
 * identical copies, and one of each is kept here (FINAL would merge wide rows to no end).
 */
import { join, sql, table, type Sql, type Store } from '@sightline/store';
import type { Num } from './common.js';

/** A request's content as the API answers it. */
export interface ContentView {
  /** The request body as the client sent it (text, cut at `capture.content_max_bytes`). */
  request: string;
  /** The answer as the client received it: the JSON body, or a stream assembled into one JSON message. */
  response: string;
  /** Full sizes in bytes, also past the cut. */
  request_bytes: number;
  response_bytes: number;
  request_truncated: boolean;
  response_truncated: boolean;
  /** The stream did not reach its end: `response` is what had arrived. */
  partial: boolean;
  policy: 'full' | 'redacted';
  /** Replacements by type (`email`: 2), secrets and personal data. */
  redactions: Record<string, number>;
}

interface ContentDbRow {
  trace_id: string;
  span_id: string;
  team: string;
  policy: string;
  request: string;
  response: string;
  request_bytes: Num;
  response_bytes: Num;
  request_truncated: Num;
  response_truncated: Num;
  response_partial: Num;
  redaction_keys: string[];
  redaction_counts: Num[];
}

/** What locates one request's content row: its identity, team and start. */
export interface ContentKey {
  trace_id: string;
  span_id: string;
  team: string;
  start_time_unix_nano: bigint;
}

const NS_PER_S = 1_000_000_000n;

/**
 * The content of `requests` (requests of one trace), by span id. Reads only the keys'
 * teams and the seconds they started in: partitions and granules of other days and teams
 * are skipped through the primary key.
 */
export async function contentOf(store: Store, traceId: string, requests: readonly ContentKey[]): Promise<Map<string, ContentView>> {
  const out = new Map<string, ContentView>();
  if (requests.length === 0) return out;
  const teams = [...new Set(requests.map((r) => r.team))];
  const spans = [...new Set(requests.map((r) => r.span_id))];
  let lo = requests[0]!.start_time_unix_nano;
  let hi = lo;
  for (const r of requests) {
    if (r.start_time_unix_nano < lo) lo = r.start_time_unix_nano;
    if (r.start_time_unix_nano > hi) hi = r.start_time_unix_nano;
  }
  const rows = await store.query<ContentDbRow>(
    sql`SELECT trace_id, span_id, team, policy, request, response, request_bytes, response_bytes, request_truncated, response_truncated, response_partial, redaction_keys, redaction_counts
FROM ${table(store.database, 'content')}
WHERE team IN (${join(teams.map((t) => sql`${t}`), sql`, `)})
  AND start_time >= toDateTime(${Number(lo / NS_PER_S)}, 'UTC') AND start_time <= toDateTime(${Number(hi / NS_PER_S)}, 'UTC')
  AND trace_id = ${traceId} AND span_id IN (${join(spans.map((s) => sql`${s}`), sql`, `)})`,
  );
  const teamOf = new Map(requests.map((r) => [r.span_id, r.team]));
  for (const r of rows) {
    // Each request is matched to a row of its own team only.
    if (teamOf.get(r.span_id) !== r.team) continue;
    const redactions: Record<string, number> = {};
    r.redaction_keys.forEach((k, i) => (redactions[k] = Number(r.redaction_counts[i] ?? 0)));
    out.set(r.span_id, {
      request: r.request,
      response: r.response,
      request_bytes: Number(r.request_bytes),
      response_bytes: Number(r.response_bytes),
      request_truncated: Number(r.request_truncated) === 1,
      response_truncated: Number(r.response_truncated) === 1,
      partial: Number(r.response_partial) === 1,
      policy: r.policy === 'redacted' ? 'redacted' : 'full',
      redactions,
    });
  }
  return out;
}

/** The longest phrase `q` takes, in characters. */
export const MAX_PHRASE_LENGTH = 256;

/**
 * The forms a phrase can take in stored JSON text: as typed, JSON-escaped (quotes,
 * backslashes, control characters), and with non-ASCII characters as `\uXXXX` escapes
 * (what clients that encode with ensure_ascii send, e.g. Python's json.dumps by default).
 */
export function phraseForms(phrase: string): string[] {
  const escaped = JSON.stringify(phrase).slice(1, -1);
  const ascii = escaped.replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return [...new Set([phrase, escaped, ascii])];
}

/**
 * The condition "the phrase is in the request or the response", case-insensitive
 * (positionCaseInsensitiveUTF8: ClickHouse 18.16 and 26.x), for any of its forms.
 */
export function phraseCondition(phrase: string): Sql {
  const parts: Sql[] = [];
  for (const form of phraseForms(phrase)) {
    parts.push(sql`positionCaseInsensitiveUTF8(request, ${form}) > 0`, sql`positionCaseInsensitiveUTF8(response, ${form}) > 0`);
  }
  return sql`(${join(parts, sql` OR `)})`;
}
