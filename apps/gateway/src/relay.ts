/**
 * How an upstream response reaches the client. A relay sees the provider's status,
 * headers and body chunks and says what to write. `chooseRelay` is the one place that
 * picks a relay, from the request's plan and the provider's status:
 *
 * - passthrough: same dialect; bytes out as they came in.
 * - usage-strip: same-dialect OpenAI stream where the gateway asked the provider for
 *   usage (`stream_options.include_usage`) and the client did not: events are relayed one
 *   by one as they arrive, minus the usage-only chunk.
 * - translated JSON: the whole body is needed to translate it, so it is held and written
 *   at the end.
 * - translated stream: each upstream event is translated and written as it arrives.
 * - the same two for an OpenAI Responses API client of an Anthropic provider: the Messages
 *   answer becomes a response object, its stream the Responses API's typed events.
 * - errors (status ≥ 400): held, scrubbed of secrets (same dialect) or translated (other
 *   dialect), and written at the end.
 *
 * Every byte a relay keeps is bounded (issue 9): a held body by `upstreamBodyLimitBytes`,
 * a parsed stream event by `sseEventLimitBytes`. Past a bound `data` throws a
 * TranslationError `upstream_too_large`; a relay that holds has written nothing yet, so the
 * exchange can still answer with a clean error.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import {
  AnthropicStreamToOpenAI,
  AnthropicStreamToResponses,
  anthropicResponseToResponses,
  OpenAIStreamToAnthropic,
  SseParser,
  TranslationError,
  anthropicErrorToOpenAI,
  anthropicResponseToOpenAI,
  formatSse,
  isUsageOnlyChunk,
  scrubSecrets,
  openaiErrorToAnthropic,
  openaiResponseToAnthropic,
  type AnthropicMessage,
  type OpenAIChatCompletion,
  type ResponsesRequest,
  type SseEvent,
} from '@sightline/translate';
import type { Dialect } from '@sightline/core';
import { valueAfterKey } from '@sightline/core';
import type { ClientApi } from './apis.js';

export interface Relay {
  /**
   * Whether the relay holds the body and writes it all from `end`: the exchange then sends
   * the status line with the body, so a failure before the end can still be a clean error.
   */
  readonly holds: boolean;
  /**
   * The client's status and headers for a provider response that is being relayed.
   * `headers` holds the provider's headers that may pass (lower-case names).
   */
  head(status: number, headers: OutgoingHttpHeaders): { status: number; headers: OutgoingHttpHeaders };
  /** What to write to the client for one provider chunk; null writes nothing. */
  data(chunk: Buffer): Buffer | string | null;
  /** What to write when the provider's response is complete; null writes nothing. */
  end(): Buffer | string | null;
}

export const passthroughRelay: Relay = {
  holds: false,
  head: (status, headers) => ({ status, headers }),
  data: (chunk) => chunk,
  end: () => null,
};

/** Chunks of a body held until its end, at most `limit` bytes. */
class HeldBody {
  readonly chunks: Buffer[] = [];
  #bytes = 0;
  constructor(readonly limit: number) {}
  push(chunk: Buffer): void {
    this.#bytes += chunk.length;
    if (this.#bytes > this.limit) throw new TranslationError('upstream_too_large', `the provider sent a response body larger than ${this.limit} bytes`);
    this.chunks.push(chunk);
  }
  text(): string {
    return (this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks)).toString('utf8');
  }
}

/**
 * A same-dialect provider error (status ≥ 400): relayed with anything that looks like a
 * key (OpenAI echoes a masked key on 401) replaced, so keys never reach clients or logs.
 * This is the only same-dialect path that holds bytes back.
 */
export class ScrubErrorRelay implements Relay {
  readonly holds = true;
  readonly #body: HeldBody;
  constructor(limit: number) {
    this.#body = new HeldBody(limit);
  }
  head(status: number, headers: OutgoingHttpHeaders): { status: number; headers: OutgoingHttpHeaders } {
    const h = { ...headers };
    delete h['content-length'];
    return { status, headers: h };
  }
  data(chunk: Buffer): null {
    this.#body.push(chunk);
    return null;
  }
  end(): string {
    return scrubSecrets(this.#body.text());
  }
}

const USAGE_KEY = Buffer.from('"usage"');

/**
 * Whether the bytes hold the key `"usage"` with an object value (not `null`), or end
 * before its value: a usage chunk may be in them.
 */
function mayHoldUsage(chunk: Buffer): boolean {
  let i = chunk.indexOf(USAGE_KEY);
  while (i !== -1) {
    const v = valueAfterKey(chunk, i + USAGE_KEY.length);
    if (v === chunk.length || chunk[v] === 0x7b /* { */) return true;
    i = chunk.indexOf(USAGE_KEY, i + USAGE_KEY.length);
  }
  return false;
}

/**
 * Same-dialect OpenAI stream minus the usage-only chunk the client did not ask for.
 * Chunks of whole events without a usage object (every chunk but the last, as providers
 * send them) are relayed as they came, unparsed; the rest go through the SSE parser.
 */
export class UsageStripRelay implements Relay {
  readonly holds = false;
  readonly #parser: SseParser;

  constructor(maxEventBytes?: number) {
    this.#parser = new SseParser(maxEventBytes === undefined ? {} : { maxEventBytes });
  }

  head(status: number, headers: OutgoingHttpHeaders): { status: number; headers: OutgoingHttpHeaders } {
    return { status, headers };
  }

  data(chunk: Buffer): Buffer | string | null {
    if (!mayHoldUsage(chunk) && this.#parser.passOver(chunk)) return chunk;
    let out = '';
    for (const ev of this.#parser.push(chunk)) {
      if (isUsageOnlyChunk(ev)) continue;
      out += formatSse(ev.event, ev.data);
    }
    return out === '' ? null : out;
  }

  end(): Buffer | string | null {
    let out = '';
    for (const ev of this.#parser.end()) if (!isUsageOnlyChunk(ev)) out += formatSse(ev.event, ev.data);
    return out === '' ? null : out;
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

function jsonHeaders(headers: OutgoingHttpHeaders): OutgoingHttpHeaders {
  const h: OutgoingHttpHeaders = { ...headers, 'content-type': 'application/json' };
  delete h['content-length'];
  return h;
}

/**
 * A provider body held whole (at most `limit` bytes), then parsed as JSON and written as the
 * client's translation of it: the error and answer relays below differ only in `translate`.
 */
abstract class HeldJsonRelay implements Relay {
  readonly holds = true;
  readonly #body: HeldBody;
  /** The provider's status, as head() saw it. */
  protected status = 500;

  constructor(limit: number) {
    this.#body = new HeldBody(limit);
  }

  head(status: number, headers: OutgoingHttpHeaders): { status: number; headers: OutgoingHttpHeaders } {
    this.status = status;
    return { status, headers: jsonHeaders(headers) };
  }

  data(chunk: Buffer): null {
    this.#body.push(chunk);
    return null;
  }

  end(): string {
    return this.translate(parseJson(this.#body.text()));
  }

  protected abstract translate(body: unknown): string;
}

/** A provider error body (status ≥ 400) from a provider of the other dialect, translated (and scrubbed of secrets). */
export class ErrorTranslateRelay extends HeldJsonRelay {
  constructor(
    readonly client: Dialect,
    limit: number,
  ) {
    super(limit);
  }

  protected translate(body: unknown): string {
    return this.client === 'openai' ? anthropicErrorToOpenAI(this.status, body).body : openaiErrorToAnthropic(this.status, body).body;
  }
}

/** A JSON response from a provider of the other dialect. */
export class JsonTranslateRelay extends HeldJsonRelay {
  constructor(
    readonly client: Dialect,
    readonly responseModel: string,
    limit: number,
  ) {
    super(limit);
  }

  protected translate(body: unknown): string {
    if (this.client === 'openai') {
      return JSON.stringify(anthropicResponseToOpenAI(body as AnthropicMessage, { responseModel: this.responseModel, created: Math.floor(Date.now() / 1000) }));
    }
    return JSON.stringify(openaiResponseToAnthropic(body as OpenAIChatCompletion, { responseModel: this.responseModel }).message);
  }
}

/** An Anthropic Messages answer for an OpenAI Responses API client: one response object. */
export class ResponsesJsonRelay extends HeldJsonRelay {
  constructor(
    readonly responseModel: string,
    /** The client's request: the response object repeats its settings, as OpenAI's does. */
    readonly request: ResponsesRequest,
    limit: number,
  ) {
    super(limit);
  }

  protected translate(body: unknown): string {
    return JSON.stringify(anthropicResponseToResponses(body as AnthropicMessage, { responseModel: this.responseModel, createdAt: Math.floor(Date.now() / 1000), request: this.request }));
  }
}

/** What turns one provider stream event into the client's events (packages/translate). */
interface StreamTranslator {
  push(ev: SseEvent): string;
  end(): string;
}

/** A stream from a provider of the other dialect (or API), translated event by event. */
export class StreamTranslateRelay implements Relay {
  readonly holds = false;
  readonly #parser: SseParser;
  readonly #translator: StreamTranslator;

  constructor(
    readonly client: Dialect,
    responseModel: string,
    includeUsage: boolean,
    maxEventBytes?: number,
    /** An OpenAI Responses API client's request: its stream gets the Responses API's events. */
    responses: ResponsesRequest | null = null,
  ) {
    this.#parser = new SseParser(maxEventBytes === undefined ? {} : { maxEventBytes });
    const now = Math.floor(Date.now() / 1000);
    this.#translator =
      responses !== null
        ? new AnthropicStreamToResponses({ responseModel, createdAt: now, request: responses })
        : client === 'openai'
          ? new AnthropicStreamToOpenAI({ responseModel, created: now, includeUsage })
          : new OpenAIStreamToAnthropic({ responseModel });
  }

  head(status: number, headers: OutgoingHttpHeaders): { status: number; headers: OutgoingHttpHeaders } {
    const h: OutgoingHttpHeaders = { ...headers, 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' };
    delete h['content-length'];
    return { status, headers: h };
  }

  data(chunk: Buffer): string | null {
    let out = '';
    for (const ev of this.#parser.push(chunk)) out += this.#translator.push(ev);
    return out === '' ? null : out;
  }

  end(): string | null {
    let out = '';
    for (const ev of this.#parser.end()) out += this.#translator.push(ev);
    out += this.#translator.end();
    return out === '' ? null : out;
  }
}

/** What a request's response needs from its relay; made per upstream attempt by the route handler. */
export interface RelayPlan {
  /** The client's API (the Responses API has its own answers; the others go by `client`). */
  api: ClientApi;
  /** The client's dialect. */
  client: Dialect;
  /** Whether the provider speaks the client's dialect. */
  sameDialect: boolean;
  stream: boolean;
  /** Same-dialect OpenAI stream: the gateway asked for usage the client did not; strip it. */
  stripUsage: boolean;
  /** Translated OpenAI stream: the client asked for usage. */
  includeUsage: boolean;
  /** The model name the client sees in a translated response. */
  responseModel: string;
  /** A translated Responses API request as the client sent it (its answer repeats its settings); else null. */
  request: ResponsesRequest | null;
}

/**
 * The bounds a response is read under (configuration `gateway.upstream_body_limit` and
 * `sse_event_limit`), and how much of what the client receives capture keeps
 * (`capture.content_max_bytes`).
 */
export interface RelayLimits {
  bodyBytes: number;
  sseEventBytes: number;
  contentBytes: number;
}

/** The one place a relay is chosen: from the request's plan and the provider's status. */
export function chooseRelay(plan: RelayPlan, status: number, limits: RelayLimits): Relay {
  if (status >= 400) return plan.sameDialect ? new ScrubErrorRelay(limits.bodyBytes) : new ErrorTranslateRelay(plan.client, limits.bodyBytes);
  if (plan.sameDialect) return plan.stripUsage ? new UsageStripRelay(limits.sseEventBytes) : passthroughRelay;
  const request = plan.request;
  if (plan.api === 'responses' && request !== null) {
    return plan.stream
      ? new StreamTranslateRelay(plan.client, plan.responseModel, false, limits.sseEventBytes, request)
      : new ResponsesJsonRelay(plan.responseModel, request, limits.bodyBytes);
  }
  return plan.stream
    ? new StreamTranslateRelay(plan.client, plan.responseModel, plan.includeUsage, limits.sseEventBytes)
    : new JsonTranslateRelay(plan.client, plan.responseModel, limits.bodyBytes);
}
