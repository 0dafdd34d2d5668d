/**
 * One client request's journey upstream: attempts, retries, fallbacks, timeouts, and the
 * relay of the chosen response to the client.
 *
 * Policy (docs/api.md, "Routing"):
 * - A provider failure — a 5xx (but 501), a timeout, a refused or reset connection — is
 *   retried on the same target up to `retries` times with exponential backoff and jitter,
 *   then falls back to the next target.
 * - A 429 falls back to the next target at once (retrying a rate-limited target is futile).
 * - Nothing is retried once a byte of the response has reached the client.
 * - Each target's breaker hears of provider failures only; a 4xx never counts.
 * Every attempt is recorded, and becomes its own span.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import { now, type StageName } from '@sightline/core';
import { hasTokenDelta, keepContent, keepResponseChunk, type RequestRecord } from '@sightline/capture';
import { isTranslationError } from '@sightline/translate';
import { GatewayError, streamErrorEvent } from './errors.js';
import type { PreparedRoute, Target } from './providers.js';
import { chooseRelay, type Relay, type RelayLimits, type RelayPlan } from './relay.js';
import { errorCode, UpstreamAttempt, type AttemptOwner } from './upstream.js';
import type { CacheFill } from './cache.js';

/** The parts of a server response (HTTP/1.1 or HTTP/2 compatibility API) the relay uses. */
export interface ClientResponse {
  writeHead(status: number, headers: OutgoingHttpHeaders): unknown;
  write(chunk: Buffer | string): boolean;
  end(chunk?: Buffer | string): unknown;
  destroy(err?: Error): unknown;
  once(event: 'drain', fn: () => void): unknown;
  readonly headersSent: boolean;
}

/** What a request to one target consists of: built by the route handler per target. */
export interface PreparedRequest {
  /** `POST`, but for reading (`GET`) or deleting (`DELETE`) a stored response. */
  method: 'POST' | 'GET' | 'DELETE';
  path: string;
  /** Names and values in one flat list, as undici's dispatch takes them (Upstream.headers). */
  headers: string[];
  /** null: no body (GET, DELETE). */
  body: Buffer | null;
  /** What the response needs; the relay itself is chosen when the status is known. */
  relay: RelayPlan;
  upstreamModel: string;
}

export type Prepare = (target: Target) => PreparedRequest;
export type Fail = (err: GatewayError) => void;

/** Provider response headers that reach the client. */
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
]);

function passes(name: string): boolean {
  return PASS_RESPONSE_HEADERS.has(name) || name.startsWith('x-ratelimit-') || name.startsWith('anthropic-ratelimit-');
}

function retryableStatus(status: number): boolean {
  return status === 429 || (status >= 500 && status !== 501);
}

type FailureKind = 'rate_limited' | 'provider';

export class Exchange implements AttemptOwner {
  #targetIdx = 0;
  #retries = 0;
  #attempt: UpstreamAttempt | null = null;
  #target: Target | null = null;
  #attemptStart = 0;
  #plan: RelayPlan | null = null;
  #relay: Relay | null = null;
  /** The client's status and headers, kept until the end when the relay holds the body. */
  #held: { status: number; headers: OutgoingHttpHeaders } | null = null;
  /** The current attempt has been counted as a failure by its target's breaker. */
  #failureCounted = false;
  #committed = false;
  /** The answer is collected here to be cached once complete (a cacheable miss); else null. */
  cacheFill: CacheFill | null = null;
  /** The gateway's own rate limits apply: the provider's `x-ratelimit-*` headers are not passed on. */
  ownRateLimitHeaders = false;
  #contentType = '';
  /** The current attempt's response is being read and dropped (it will be retried). */
  #discarding = false;
  #finished = false;
  #timer: NodeJS.Timeout | null = null;
  #deadline: NodeJS.Timeout | null = null;
  #lastError: GatewayError | null = null;
  readonly #onDrain = (): void => {
    this.#attempt?.resume();
  };
  /**
   * Builds the request for a target; null once the last target has its request. It holds the
   * parsed body (and with it the prompt's text): a request in flight keeps it no longer than
   * it can be needed, so thousands in flight do not carry it through every collection (issue 15).
   */
  #prepare: Prepare | null;
  /** The request last built, for `#preparedFor`: a retry on the same target sends it again. */
  #prepared: PreparedRequest | null = null;
  #preparedFor: Target | null = null;

  constructor(
    readonly rec: RequestRecord,
    readonly res: ClientResponse,
    readonly route: PreparedRoute,
    readonly order: Target[],
    prepare: Prepare,
    readonly fail: Fail,
    readonly limits: RelayLimits,
  ) {
    this.#prepare = prepare;
  }

  start(): void {
    const t = this.route.config.timeoutMs;
    if (t > 0) {
      this.#deadline = setTimeout(this.#onDeadline, t);
    }
    this.#startAttempt(true);
  }

  /** The client went away: stop everything upstream. */
  clientGone(): void {
    if (this.#finished) return;
    this.#finished = true;
    this.#clearTimers();
    this.#target?.breaker.release();
    this.#attempt?.abort(new Error('client closed the connection'));
    if (this.rec.tFirstByte > 0) this.rec.partial = true;
  }

  #startAttempt(first: boolean): void {
    if (this.#finished) return;
    const rec = this.rec;
    // Skip targets whose breaker is open.
    const nowMs = Date.now();
    let target: Target | null = null;
    while (this.#targetIdx < this.order.length) {
      const t = this.order[this.#targetIdx]!;
      if (t.breaker.allow(nowMs)) {
        target = t;
        break;
      }
      this.#targetIdx++;
      this.#retries = 0;
    }
    if (target === null) {
      this.#finish(this.#lastError ?? new GatewayError('no_healthy_target', `every provider for the model \`${rec.model}\` is failing; retry later`));
      return;
    }
    let prepared: PreparedRequest;
    if (target === this.#preparedFor && this.#prepared !== null) prepared = this.#prepared;
    else {
      try {
        if (this.#prepare === null) throw new Error('no request builder left for a target not tried yet');
        prepared = this.#prepare(target);
      } catch (e) {
        target.breaker.release();
        this.#finish(e instanceof GatewayError ? e : new GatewayError('internal_error', 'could not prepare the upstream request', null, { cause: e }));
        return;
      }
      this.#prepared = prepared;
      this.#preparedFor = target;
    }
    // The last target has its request: nothing needs the builder (and the parsed body) again.
    if (this.#targetIdx === this.order.length - 1) this.#prepare = null;
    const t = now();
    if (first) {
      rec.tBuilt = t;
    } else {
      rec.tAttempt = t;
      rec.tConnected = 0;
      rec.tSent = 0;
      rec.tFirstByte = 0;
      rec.upstreamStatus = 0;
      rec.newConnection = false;
    }
    this.#attemptStart = t;
    this.#target = target;
    this.#plan = prepared.relay;
    this.#discarding = false;
    this.#failureCounted = false;
    rec.provider = target.upstream.config.name;
    rec.upstreamModel = prepared.upstreamModel;
    rec.upstreamHost = target.upstream.config.origin;
    const attempt = new UpstreamAttempt(this);
    this.#attempt = attempt;
    target.upstream.pool.dispatch({ path: prepared.path, method: prepared.method, headers: prepared.headers, body: prepared.body }, attempt);
  }

  attemptConnected(a: UpstreamAttempt): void {
    if (a === this.#attempt) this.rec.tConnected = now();
  }

  attemptSent(a: UpstreamAttempt): void {
    if (a === this.#attempt) this.rec.tSent = now();
  }

  attemptHeaders(a: UpstreamAttempt, status: number, raw: Buffer[]): void {
    if (a !== this.#attempt || this.#finished) return;
    const rec = this.rec;
    rec.tFirstByte = now();
    rec.upstreamStatus = status;
    if (a.newConnection) rec.newConnection = true;
    if (status >= 500) this.#providerFailure();
    else if (status === 429) this.#target!.breaker.release();
    else this.#target!.breaker.success();

    if (retryableStatus(status) && this.#hasNext(status === 429 ? 'rate_limited' : 'provider')) {
      this.#discarding = true;
      this.#lastError = new GatewayError(status === 429 ? 'upstream_rate_limited' : 'upstream_error', `provider ${rec.provider} answered ${status}`);
      return;
    }
    // Commit: this response goes to the client; no more retries.
    this.#committed = true;
    rec.status = status;
    const headers: OutgoingHttpHeaders = {};
    for (let i = 0; i + 1 < raw.length; i += 2) {
      const name = raw[i]!.toString('latin1').toLowerCase();
      if (passes(name) && !(this.ownRateLimitHeaders && name.startsWith('x-ratelimit-'))) headers[name] = raw[i + 1]!.toString('latin1');
    }
    const relay = chooseRelay(this.#plan!, status, this.limits);
    this.#relay = relay;
    const head = relay.head(status, headers);
    rec.status = head.status;
    const ct = head.headers['content-type'];
    this.#contentType = typeof ct === 'string' ? ct : 'application/json';
    if (relay.holds) this.#held = head;
    else this.res.writeHead(head.status, head.headers);
  }

  attemptData(a: UpstreamAttempt, chunk: Buffer): boolean {
    if (a !== this.#attempt || this.#finished) return false;
    if (this.#discarding) return true;
    const rec = this.rec;
    if (rec.stream && rec.tFirstToken === 0 && hasTokenDelta(chunk)) rec.tFirstToken = now();
    keepResponseChunk(rec, chunk);
    let out: Buffer | string | null;
    try {
      out = this.#relay!.data(chunk);
    } catch (e) {
      a.abort(e as Error);
      this.#relayFailed(e);
      return false;
    }
    if (out === null || out.length === 0) return true;
    keepContent(rec, out, this.limits.contentBytes);
    this.cacheFill?.add(out);
    if (rec.tFirstWrite === 0) rec.tFirstWrite = now();
    if (this.res.write(out)) return true;
    // The client reads slower than the provider writes: pause upstream until it drains.
    this.res.once('drain', this.#onDrain);
    return false;
  }

  attemptComplete(a: UpstreamAttempt): void {
    if (a !== this.#attempt || this.#finished) return;
    const rec = this.rec;
    if (this.#discarding) {
      this.#failedAttempt(rec.upstreamStatus, this.#lastError!);
      this.#next(rec.upstreamStatus === 429 ? 'rate_limited' : 'provider');
      return;
    }
    rec.tLastByte = now();
    let out: Buffer | string | null;
    try {
      out = this.#relay!.end();
    } catch (e) {
      this.#relayFailed(e);
      return;
    }
    this.#finished = true;
    this.#clearTimers();
    const held = this.#held;
    if (held !== null) {
      const body = out ?? '';
      held.headers['content-length'] = Buffer.byteLength(body);
      this.res.writeHead(held.status, held.headers);
    }
    if (out !== null && out.length > 0) {
      keepContent(rec, out, this.limits.contentBytes);
      this.cacheFill?.add(out);
      if (rec.tFirstWrite === 0) rec.tFirstWrite = now();
      rec.tEnd = now();
      this.res.end(out);
    } else {
      rec.tEnd = now();
      this.res.end();
    }
    // A complete answer: stored for the next identical request (a 200 only; see cache.ts).
    this.cacheFill?.done(rec.status, this.#contentType, rec.stream);
  }

  /**
   * The relay could not go on: the provider sent more than a bound allows, or what cannot be
   * translated. Both are the provider's fault (502 upstream_error). A relay that holds has
   * written nothing: the client gets a clean error. A streaming relay has written whole
   * events only: the stream ends with an error event in the client's dialect.
   */
  #relayFailed(e: unknown): void {
    const tooLarge = isTranslationError(e) && e.code === 'upstream_too_large';
    const message = tooLarge ? (e as Error).message : `could not translate the provider's response: ${(e as Error).message}`;
    const err = new GatewayError('upstream_error', message, null, { cause: e, stage: tooLarge ? 'upstream.stream' : 'translate.response' });
    if (this.#held !== null) {
      this.#finish(err);
      return;
    }
    const rec = this.rec;
    this.#finished = true;
    this.#clearTimers();
    rec.failedStage = err.stage;
    rec.partial = true;
    rec.errorType = err.code;
    rec.errorMessage = err.message;
    rec.tEnd = now();
    if (rec.tFirstWrite === 0) rec.tFirstWrite = rec.tEnd;
    const last = streamErrorEvent(err, rec.dialect, this.#plan!.api === 'responses');
    keepContent(rec, last, this.limits.contentBytes);
    this.res.end(last);
  }

  /** Counts the current attempt against its target's breaker, once. */
  #providerFailure(): void {
    if (this.#failureCounted) return;
    this.#failureCounted = true;
    this.#target!.breaker.failure(Date.now());
  }

  attemptError(a: UpstreamAttempt, err: Error): void {
    if (a !== this.#attempt || this.#finished) return;
    const rec = this.rec;
    const code = errorCode(err);
    this.#providerFailure();
    if (this.#committed) {
      const type = code === 'UND_ERR_BODY_TIMEOUT' ? 'upstream_idle_timeout' : 'upstream_error';
      const message = `upstream response failed: ${code === '' ? err.message : code}`;
      if (this.#held !== null) {
        // Nothing was written yet: a clean error.
        this.#finish(new GatewayError('upstream_error', message, null, { cause: err, stage: 'upstream.stream' }));
        return;
      }
      // The status line is gone: the client sees the response cut short.
      this.#cut('upstream.stream', type, message);
      return;
    }
    if (this.#discarding) {
      // A retryable status whose body then failed: the attempt already failed at its status.
      this.#failedAttempt(rec.upstreamStatus, this.#lastError!);
      this.#next(rec.upstreamStatus === 429 ? 'rate_limited' : 'provider');
      return;
    }
    const ge = upstreamError(err, rec);
    this.#lastError = ge;
    if (this.#hasNext('provider')) {
      this.#failedAttempt(0, ge);
      this.#next('provider');
      return;
    }
    this.#finish(ge);
  }

  /** Whether another attempt is possible after a failure of this kind. */
  #hasNext(kind: FailureKind): boolean {
    if (kind === 'provider' && this.#retries < this.route.config.retries) return true;
    return this.#targetIdx + 1 < this.order.length;
  }

  #next(kind: FailureKind): void {
    if (kind === 'provider' && this.#retries < this.route.config.retries) {
      this.#retries++;
      // Exponential backoff with jitter (half to full), so replicas do not retry in step.
      const base = this.route.config.retryBackoffMs * 2 ** (this.#retries - 1);
      const delay = base * (0.5 + Math.random() / 2);
      this.#timer = setTimeout(this.#retryNow, delay);
      return;
    }
    this.#targetIdx++;
    this.#retries = 0;
    this.#startAttempt(false);
  }

  readonly #retryNow = (): void => {
    this.#timer = null;
    this.#startAttempt(false);
  };

  #failedAttempt(status: number, err: GatewayError): void {
    const rec = this.rec;
    const info = {
      provider: rec.provider,
      model: rec.upstreamModel,
      upstreamHost: rec.upstreamHost,
      start: this.#attemptStart,
      end: now(),
      status,
      errorType: err.code,
      errorMessage: err.message,
    };
    if (rec.attempts === null) rec.attempts = [info];
    else rec.attempts.push(info);
  }

  readonly #onDeadline = (): void => {
    this.#deadline = null;
    if (this.#finished) return;
    const rec = this.rec;
    const err = new GatewayError('upstream_timeout', `no complete answer within the route's ${this.route.config.timeoutMs} ms`);
    // Blame the target only if an attempt was in flight, not while waiting to retry.
    if (this.#timer === null && this.#attempt !== null && !this.#attempt.done) this.#providerFailure();
    else this.#target?.breaker.release();
    this.#attempt?.abort(err);
    if (this.#committed && this.#held === null) {
      this.#cut('upstream.stream', err.code, err.message);
      return;
    }
    if (this.#committed) {
      this.#finish(new GatewayError('upstream_timeout', err.message, null, { stage: 'upstream.stream' }));
      return;
    }
    if (rec.tSent === 0) rec.failedStage = rec.tConnected === 0 ? 'upstream.connect' : 'upstream.send';
    else rec.failedStage = 'upstream.wait';
    this.#finish(err);
  };

  /** Ends a response that has already started: the client sees it cut short; the record says why. */
  #cut(stage: StageName, errorType: string, message: string): void {
    const rec = this.rec;
    this.#finished = true;
    this.#clearTimers();
    rec.failedStage = stage;
    rec.partial = true;
    rec.errorType = errorType;
    rec.errorMessage = message;
    this.res.destroy();
  }

  #finish(err: GatewayError): void {
    if (this.#finished) return;
    this.#finished = true;
    this.#clearTimers();
    this.fail(err);
  }

  #clearTimers(): void {
    if (this.#timer !== null) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
    if (this.#deadline !== null) {
      clearTimeout(this.#deadline);
      this.#deadline = null;
    }
  }
}

/**
 * Maps an undici failure before the response started to a client-facing error and the stage
 * it failed in. Pure: the record is read, never written; the stage becomes the request's
 * failed stage only if the request ends with this error (a retry may still succeed).
 */
export function upstreamError(err: Error, rec: Pick<RequestRecord, 'provider' | 'tConnected' | 'tSent'>): GatewayError {
  const code = errorCode(err);
  if (code === 'UND_ERR_HEADERS_TIMEOUT') {
    return new GatewayError('upstream_timeout', `provider ${rec.provider} did not answer in time`, null, { cause: err, stage: 'upstream.wait' });
  }
  if (code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EHOSTUNREACH' || rec.tConnected === 0) {
    return new GatewayError('upstream_unreachable', `cannot reach provider ${rec.provider} (${code === '' ? err.message : code})`, null, { cause: err, stage: 'upstream.connect' });
  }
  const stage = rec.tSent === 0 ? 'upstream.send' : 'upstream.wait';
  return new GatewayError('upstream_error', `provider ${rec.provider} failed: ${code === '' ? err.message : code}`, null, { cause: err, stage });
}
