/**
 * Encoding the capture message (format v3, @sightline/core wire.ts): a finished
 * RequestRecord becomes a v3 record — its fields by position, and the usage read from its
 * kept response tail — and a batch of them gets a header. Decoding, and building spans from
 * the records, is the ingester's (@sightline/spans). `toWire` gives the WireRecord a v3
 * record stands for (tests, and spans built in the process itself).
 */
import { RECORD_V3, type WireRecord } from '@sightline/core';
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

/** The record's fields and marks: everything of its WireRecord but the usage and the content. */
function wireFields(r: RequestRecord): Omit<WireRecord, 'responseModel' | 'inputTokens' | 'outputTokens' | 'cacheReadTokens' | 'cacheWriteTokens' | 'usageFound' | 'content'> {
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
 * A record's strings as one JSON array, in the order of RECORD_V3.strings (null for no tags):
 * what a v3 record carries as `s`, and what JobBatch hands over (job.ts).
 */
export function headStrings(r: RequestRecord): string {
  return JSON.stringify([
    r.traceId, r.parentSpanId, r.rootSpanId, r.failedStage, r.attempts, r.method, r.route, r.dialect, r.model,
    r.upstreamModel, r.provider, r.upstreamHost, r.team, r.keyId, r.errorType, r.errorMessage, r.endUser,
    r.sessionId, r.tagKeys, r.tagValues,
  ]);
}

/** Writes a record's numbers at out[at…], in the order of RECORD_V3.numbers (23 of them). */
export function headNumbers(r: RequestRecord, out: Float64Array, at: number): void {
  out[at] = r.seq;
  out[at + 1] = r.t0;
  out[at + 2] = r.tBody;
  out[at + 3] = r.tParsed;
  out[at + 4] = r.tAuth;
  out[at + 5] = r.tLimits;
  out[at + 6] = r.tCache;
  out[at + 7] = r.tBudget;
  out[at + 8] = r.tRouted;
  out[at + 9] = r.tBuilt;
  out[at + 10] = r.tAttempt;
  out[at + 11] = r.tConnected;
  out[at + 12] = r.tSent;
  out[at + 13] = r.tFirstByte;
  out[at + 14] = r.tFirstToken;
  out[at + 15] = r.tLastByte;
  out[at + 16] = r.tEnd;
  out[at + 17] = r.tFirstWrite;
  out[at + 18] = r.tFinish;
  out[at + 19] = r.status;
  out[at + 20] = r.upstreamStatus;
  out[at + 21] = r.requestBytes;
  out[at + 22] = r.responseBytes;
}

/** A record's flags as a v3 record's `f`: bit i for RECORD_V3.flags[i]. */
export function headFlags(r: Pick<RequestRecord, 'cacheHit' | 'newConnection' | 'partial' | 'stream' | 'aborted'>): number {
  return (r.cacheHit ? 1 : 0) | (r.newConnection ? 2 : 0) | (r.partial ? 4 : 0) | (r.stream ? 8 : 0) | (r.aborted ? 16 : 0);
}

/**
 * A v3 record's head from its parts: `{"s":<strings>,"n":"<numbers' base64>","f":<flags>`, no
 * closing brace. `numbers`: the bytes of its 23 doubles (headNumbers), little-endian as
 * Float64Array lays them out on every platform Node supports here (x64, arm64).
 */
export function headOfParts(strings: string, numbers: Uint8Array, flags: number): string {
  return `{"s":${strings},"n":"${Buffer.from(numbers.buffer, numbers.byteOffset, numbers.byteLength).toString('base64')}","f":${flags}`;
}

const scratch = new Float64Array(RECORD_V3.numbers.length);
const scratchBytes = new Uint8Array(scratch.buffer);

/**
 * The record's v3 JSON up to its usage: `{"s":…,"n":…,"f":…` without the closing brace. With
 * `usageMembers` and `"content":…}` after it, the v3 record whose WireRecord is `toWire(r, …)`
 * (core wire.ts wireRecordOfV3). Reads neither the kept response nor the content. With a
 * content thread it is made there, from the fields JobBatch hands over (job.ts). About a third
 * of the cost of the v2 head (JSON.stringify of the fields by name), most of which was writing
 * the 19 fractional marks as decimal text.
 */
export function wireHead(r: RequestRecord): string {
  headNumbers(r, scratch, 0);
  return headOfParts(headStrings(r), scratchBytes, headFlags(r));
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

/** The header of a v4 message, up to (not including) its records. */
export function batchHead(instance: string, batch: string, requests: number, publishedAtUnixNano: bigint, originUnixNano: bigint): string {
  return `{"v":4,"instance":${JSON.stringify(instance)},"batch":${JSON.stringify(batch)},"requests_count":${requests},"published_at_unix_nano":"${publishedAtUnixNano}","origin_unix_nano":"${originUnixNano}"`;
}
