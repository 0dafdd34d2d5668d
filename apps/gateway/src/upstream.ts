/**
 * The upstream call: undici's dispatch API with a handler that relays bytes to the
 * client as they arrive and writes stage marks as it goes. No promise, no stream object
 * per request; backpressure from the client pauses the upstream read.
 *
 * Connection reuse: undici reports a new connection on `undici:client:connected` and the
 * request it carries on `undici:client:sendHeaders`, in the same tick as the handler's
 * onConnect (client-h1.js writeH1), so a module variable links the two without a map.
 */
import type { ServerResponse, OutgoingHttpHeaders } from 'node:http';
import { subscribe } from 'node:diagnostics_channel';
import type { Socket } from 'node:net';
import { Pool, type Dispatcher } from 'undici';
import { now } from '@sightline/core';
import { hasTokenDelta, keepResponseChunk, type RequestRecord } from '@sightline/capture';
import type { ProviderConfig } from '@sightline/config';
import { GatewayError } from './errors.js';

/** Response headers from the provider that reach the client unchanged. */
const PASS_RESPONSE_HEADERS = new Set([
  'content-type',
  'content-length',
  'cache-control',
  'retry-after',
  'x-request-id',
  'request-id',
  'openai-processing-ms',
  'openai-version',
  'openai-organization',
  'anthropic-ratelimit-requests-limit',
  'anthropic-ratelimit-requests-remaining',
  'anthropic-ratelimit-requests-reset',
  'anthropic-ratelimit-tokens-limit',
  'anthropic-ratelimit-tokens-remaining',
  'anthropic-ratelimit-tokens-reset',
]);

let handing: UpstreamCall | null = null;
const seenSockets = new WeakSet<Socket>();

subscribe('undici:client:sendHeaders', (msg) => {
  const { socket } = msg as { socket: Socket };
  const call = handing;
  handing = null;
  if (call !== null && !seenSockets.has(socket)) {
    seenSockets.add(socket);
    call.rec.newConnection = true;
  }
});

export function createPool(p: ProviderConfig): Pool {
  return new Pool(p.origin, {
    connect: { timeout: p.connectTimeoutMs },
    headersTimeout: p.headersTimeoutMs,
    bodyTimeout: p.bodyTimeoutMs,
    keepAliveTimeout: 30_000,
    keepAliveMaxTimeout: 600_000,
  });
}

export type FailHandler = (rec: RequestRecord, res: ServerResponse, err: GatewayError) => void;

/**
 * One upstream request, relayed to one client response. Uses undici's handler methods
 * (onConnect … onComplete), which include onRequestSent: the `upstream.send` mark.
 */
export class UpstreamCall implements Dispatcher.DispatchHandler {
  #abort: ((err?: Error) => void) | null = null;
  #resume: (() => void) | null = null;
  #done = false;
  readonly #onDrain = (): void => {
    const r = this.#resume;
    if (r !== null) r();
  };

  constructor(
    readonly rec: RequestRecord,
    readonly res: ServerResponse,
    readonly extraHeaders: OutgoingHttpHeaders,
    readonly fail: FailHandler,
  ) {}

  /** Aborts the upstream request (the client went away). */
  abort(reason: string): void {
    if (this.#done) return;
    this.#done = true;
    const a = this.#abort;
    if (a !== null) a(new Error(reason));
  }

  onConnect(abort: (err?: Error) => void): void {
    this.rec.tConnected = now();
    this.#abort = abort;
    handing = this;
  }

  onRequestSent(): void {
    this.rec.tSent = now();
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean {
    if (statusCode < 200) return true; // 1xx informational
    const rec = this.rec;
    rec.tFirstByte = now();
    rec.upstreamStatus = statusCode;
    rec.status = statusCode;
    this.#resume = resume;
    const res = this.res;
    if (res.destroyed) return false;
    const headers: OutgoingHttpHeaders = { ...this.extraHeaders };
    for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
      const name = rawHeaders[i]!.toString('latin1').toLowerCase();
      if (PASS_RESPONSE_HEADERS.has(name) || name.startsWith('x-ratelimit-')) headers[name] = rawHeaders[i + 1]!.toString('latin1');
    }
    res.writeHead(statusCode, headers);
    return true;
  }

  onData(chunk: Buffer): boolean {
    const rec = this.rec;
    if (rec.tFirstWrite === 0) rec.tFirstWrite = now();
    if (rec.stream && rec.tFirstToken === 0 && hasTokenDelta(chunk)) rec.tFirstToken = now();
    keepResponseChunk(rec, chunk);
    if (this.res.write(chunk)) return true;
    // The client reads slower than the provider writes: pause upstream until it drains.
    this.res.once('drain', this.#onDrain);
    return false;
  }

  onComplete(): void {
    const rec = this.rec;
    rec.tLastByte = now();
    this.#done = true;
    rec.tEnd = now();
    this.res.end();
  }

  onError(err: Error): void {
    const wasDone = this.#done;
    this.#done = true;
    const rec = this.rec;
    if (wasDone && rec.aborted) return; // we aborted it because the client left
    if (rec.tFirstByte !== 0) {
      // Mid-response failure: the status line is gone, so the client sees the stream cut.
      rec.failedStage = 'upstream.stream';
      rec.errorType = errorCode(err) === 'UND_ERR_BODY_TIMEOUT' ? 'upstream_timeout' : 'upstream_error';
      rec.errorMessage = `upstream response failed: ${err.message}`;
      this.res.destroy();
      return;
    }
    this.fail(rec, this.res, upstreamError(err, rec));
  }
}

function errorCode(err: Error): string {
  return (err as { code?: string }).code ?? '';
}

/** Maps an undici failure before the response started to a client-facing error. */
function upstreamError(err: Error, rec: RequestRecord): GatewayError {
  const code = errorCode(err);
  if (code === 'UND_ERR_HEADERS_TIMEOUT') {
    return new GatewayError('upstream_timeout', `provider ${rec.provider} did not answer in time`, null, { cause: err });
  }
  if (code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EHOSTUNREACH' || rec.tConnected === 0) {
    rec.failedStage = 'upstream.connect';
    return new GatewayError('upstream_unreachable', `cannot reach provider ${rec.provider} (${code === '' ? err.message : code})`, null, { cause: err });
  }
  rec.failedStage = rec.tSent === 0 ? 'upstream.send' : 'upstream.wait';
  return new GatewayError('upstream_error', `provider ${rec.provider} failed: ${code === '' ? err.message : code}`, null, { cause: err });
}
