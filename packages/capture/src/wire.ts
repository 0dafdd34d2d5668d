/**
 * Encoding the capture message (format v2, @sightline/core wire.ts): a finished
 * RequestRecord becomes a WireRecord — its fields, and the usage read from its kept
 * response tail — and a batch of them gets a header. Decoding, and building spans from
 * the records, is the ingester's (@sightline/spans).
 */
import type { WireRecord } from '@sightline/core';
import type { RequestRecord } from './record.js';
import { extractUsage, type Usage } from './usage.js';
import { contentOf, type ContentOptions } from './content.js';

/** The record to publish for a finished request: its fields, and the usage read from its response. */
/**
 * The usage of a finished request, read once from its kept response (and kept on the record:
 * budgets settle with it, capture publishes it). A stream cut short counts what was seen: at
 * least one output token per delta received.
 */
export function recordUsage(r: RequestRecord): Usage {
  if (r.usage !== null) return r.usage;
  const u = usageOfKept(r.responseChunks, r.stream, r.partial);
  r.usage = u;
  return u;
}

/** The usage read from kept response bytes (recordUsage; the content worker runs it on a copy). */
export function usageOfKept(chunks: readonly Buffer[] | null, stream: boolean, partial: boolean): Usage {
  const u = extractUsage(chunks, stream);
  if (partial && stream && u.deltas > u.outputTokens) u.outputTokens = u.deltas;
  return u;
}

/**
 * What a record's head is made of: a RequestRecord, or the same fields as the content thread
 * gets them (job.ts, JobBatch). Every field wireFields reads is named here.
 */
export type HeadSource = Pick<
  RequestRecord,
  | 'seq' | 'traceId' | 'parentSpanId' | 'rootSpanId' | 't0' | 'tBody' | 'tParsed' | 'tAuth' | 'tLimits' | 'tCache' | 'tBudget'
  | 'cacheHit' | 'tRouted' | 'tBuilt' | 'tAttempt' | 'tConnected' | 'tSent' | 'tFirstByte' | 'tFirstToken' | 'tLastByte'
  | 'tEnd' | 'tFirstWrite' | 'tFinish' | 'newConnection' | 'failedStage' | 'attempts' | 'partial' | 'method' | 'route'
  | 'dialect' | 'model' | 'upstreamModel' | 'provider' | 'upstreamHost' | 'team' | 'keyId' | 'stream' | 'status'
  | 'upstreamStatus' | 'errorType' | 'errorMessage' | 'aborted' | 'requestBytes' | 'responseBytes' | 'endUser'
  | 'sessionId' | 'tagKeys' | 'tagValues'
>;

/** The record's fields and marks: everything of its WireRecord but the usage and the content. */
function wireFields(r: HeadSource): Omit<WireRecord, 'responseModel' | 'inputTokens' | 'outputTokens' | 'cacheReadTokens' | 'cacheWriteTokens' | 'usageFound' | 'content'> {
  return {
    seq: r.seq,
    traceId: r.traceId,
    parentSpanId: r.parentSpanId,
    rootSpanId: r.rootSpanId,
    t0: r.t0,
    tBody: r.tBody,
    tParsed: r.tParsed,
    tAuth: r.tAuth,
    tLimits: r.tLimits,
    tCache: r.tCache,
    tBudget: r.tBudget,
    cacheHit: r.cacheHit,
    tRouted: r.tRouted,
    tBuilt: r.tBuilt,
    tAttempt: r.tAttempt,
    tConnected: r.tConnected,
    tSent: r.tSent,
    tFirstByte: r.tFirstByte,
    tFirstToken: r.tFirstToken,
    tLastByte: r.tLastByte,
    tEnd: r.tEnd,
    tFirstWrite: r.tFirstWrite,
    tFinish: r.tFinish,
    newConnection: r.newConnection,
    failedStage: r.failedStage,
    attempts: r.attempts,
    partial: r.partial,
    method: r.method,
    route: r.route,
    dialect: r.dialect,
    model: r.model,
    upstreamModel: r.upstreamModel,
    provider: r.provider,
    upstreamHost: r.upstreamHost,
    team: r.team,
    keyId: r.keyId,
    stream: r.stream,
    status: r.status,
    upstreamStatus: r.upstreamStatus,
    errorType: r.errorType,
    errorMessage: r.errorMessage,
    aborted: r.aborted,
    requestBytes: r.requestBytes,
    responseBytes: r.responseBytes,
    endUser: r.endUser,
    sessionId: r.sessionId,
    tagKeys: r.tagKeys ?? [],
    tagValues: r.tagValues ?? [],
  };
}

/**
 * The usage fields of a WireRecord as JSON members (no braces), in toWire's order: what is
 * appended to `wireHead` once the usage is known (capture.ts, issue 15).
 */
export function usageMembers(u: Usage): string {
  return `"responseModel":${JSON.stringify(u.responseModel)},"inputTokens":${u.inputTokens},"outputTokens":${u.outputTokens},"cacheReadTokens":${u.cacheReadTokens},"cacheWriteTokens":${u.cacheWriteTokens},"usageFound":${u.found || u.outputTokens > 0}`;
}

/**
 * The record's JSON up to its usage: `{…fields…` without the closing brace. With
 * `usageMembers` and `"content":…}` after it, the same JSON as `JSON.stringify(toWire(r, …))`.
 * Reads neither the kept response nor the content. With a content thread it is made there,
 * from the fields JobBatch hands over (job.ts).
 */
export function wireHead(r: HeadSource): string {
  return JSON.stringify(wireFields(r)).slice(0, -1);
}

export function toWire(r: RequestRecord, content?: ContentOptions): WireRecord {
  const u = recordUsage(r);
  return {
    ...wireFields(r),
    // The usage and the content last: capture.ts appends them to wireHead off the serving thread.
    responseModel: u.responseModel,
    inputTokens: u.inputTokens,
    outputTokens: u.outputTokens,
    cacheReadTokens: u.cacheReadTokens,
    cacheWriteTokens: u.cacheWriteTokens,
    usageFound: u.found || u.outputTokens > 0,
    content: content === undefined ? null : contentOf(r, content),
  };
}

/** The header of a v2 message, up to (not including) its records. */
export function batchHead(instance: string, batch: string, requests: number, publishedAtUnixNano: bigint, originUnixNano: bigint): string {
  return `{"v":2,"instance":${JSON.stringify(instance)},"batch":${JSON.stringify(batch)},"requests_count":${requests},"published_at_unix_nano":"${publishedAtUnixNano}","origin_unix_nano":"${originUnixNano}"`;
}
