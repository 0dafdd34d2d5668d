/**
 * The per-request record: a fixed-shape object whose fields the gateway writes as the
 * request moves through its stages. Recording a stage is writing `now()` into a field —
 * no await, no closure, no allocation: nothing on the request path waits for capture
 * (docs/architecture.md, "The request path"). It is serialised only after the response
 * has been sent (wire.ts); the ingester builds the spans from it (@sightline/spans).
 *
 * Every field is declared here with its initial value so V8 gives all records one
 * hidden class.
 */
import type { AttemptInfo, ContentPolicy, Dialect, StageName } from '@sightline/core';
import type { Usage } from './usage.js';

export class RequestRecord {
  /** Per-instance request number, from 1: lets readers tell a gap from a quiet minute. */
  seq = 0;
  traceId = '';
  /** Span id of the caller's span from an incoming `traceparent`, or ''. */
  parentSpanId = '';
  /** Span id of this request's root span, chosen up front so it can go upstream in `traceparent`. */
  rootSpanId = '';

  // Stage marks, monotonic milliseconds (core/clock.ts); 0 = not reached.
  /** Request headers parsed (fastify onRequest). */
  t0 = 0;
  /** Whole body read. */
  tBody = 0;
  /** Body parsed and validated. */
  tParsed = 0;
  /** Caller identified: its team read (keys are not checked yet). */
  tAuth = 0;
  /** Rate limits checked; -1: none applied (the stage is absent). */
  tLimits = -1;
  /** Provider chosen. */
  tRouted = 0;
  /** Cache looked up; -1: the route has no cache (the stage is absent). */
  tCache = -1;
  /** Budget reserved; -1: none applied (the stage is absent). */
  tBudget = -1;
  /** Answered from the cache. */
  cacheHit = false;
  /** Upstream request built (headers, body). */
  tBuilt = 0;
  /** Start of the final upstream attempt, when earlier attempts failed (else 0). */
  tAttempt = 0;
  /** A socket was ready and the request was handed to it (undici onConnect). */
  tConnected = 0;
  /** Request fully written upstream. */
  tSent = 0;
  /** Upstream response headers received. */
  tFirstByte = 0;
  /** First content delta seen in an upstream stream. */
  tFirstToken = 0;
  /** Upstream response complete. */
  tLastByte = 0;
  /** Response handed to the client socket in full (`res.end()` called). */
  tEnd = 0;
  /** First response body byte written to the client. */
  tFirstWrite = 0;
  /** Response finished or connection closed: the end of the request. */
  tFinish = 0;

  /** This request opened a new upstream connection (its wait for it is `upstream.connect`). */
  newConnection = false;
  /** The stage in which the request failed, when it failed. */
  failedStage: StageName | null = null;
  /** Attempts before the final one (retries, fallbacks); null when the first attempt was the last. */
  attempts: AttemptInfo[] | null = null;
  /** The stream was cut short (client left or provider failed); usage counts what was seen. */
  partial = false;

  method = '';
  route = '';
  dialect: Dialect = 'openai';
  model = '';
  upstreamModel = '';
  provider = '';
  /** Host of the upstream (`server.address`). */
  upstreamHost = '';
  /** The key's team with authentication on; else the team header's value or `default`. */
  team = '';
  /** The caller's key id; '' when authentication is off. */
  keyId = '';
  stream = false;
  status = 0;
  upstreamStatus = 0;
  /** Stable error code when the gateway answered with an error (`error.type`). */
  errorType = '';
  errorMessage = '';
  /** The client went away before the response was complete. */
  aborted = false;
  requestBytes = 0;
  responseBytes = 0;
  /**
   * Response body kept for usage extraction after the response: all of it up to
   * RESPONSE_KEEP_BYTES, then only the tail (usage comes last in both dialects).
   */
  responseChunks: Buffer[] | null = null;
  responseKept = 0;
  /** The usage read from the kept response, once it was read (wire.ts recordUsage). */
  usage: Usage | null = null;

  // Attribution (issue 11), read from the body and headers the route handler already has.
  endUser = '';
  sessionId = '';
  tagKeys: string[] | null = null;
  tagValues: string[] | null = null;

  // Content (issue 11): references to bytes the request already holds, bounded; turned into
  // text only after the response (wire.ts). Policy `none` keeps nothing.
  contentPolicy: ContentPolicy = 'none';
  /** The request body as received (a reference, not a copy). */
  requestBody: Buffer | null = null;
  /** What was written to the client, up to the capture bound. */
  contentOut: (Buffer | string)[] | null = null;
  /** Bytes (UTF-8) in contentOut. */
  contentOutKept = 0;
  /** Bytes written to the client in all. */
  contentOutBytes = 0;
}

/** Bytes of response body kept per request for usage extraction. */
export const RESPONSE_KEEP_BYTES = 64 * 1024;

/** Keeps a response chunk for capture; O(1) amortised, bounded memory. */
export function keepResponseChunk(rec: RequestRecord, chunk: Buffer): void {
  rec.responseBytes += chunk.length;
  let chunks = rec.responseChunks;
  if (chunks === null) {
    chunks = rec.responseChunks = [];
  }
  chunks.push(chunk);
  rec.responseKept += chunk.length;
  // Drop the oldest chunks beyond the bound, keeping the first (it names the response model).
  while (rec.responseKept > RESPONSE_KEEP_BYTES && chunks.length > 2) {
    const dropped = chunks.splice(1, 1)[0]!;
    rec.responseKept -= dropped.length;
  }
}
