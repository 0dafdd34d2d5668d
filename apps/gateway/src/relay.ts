/**
 * How an upstream response reaches the client. A relay sees the provider's status,
 * headers and body chunks and says what to write.
 *
 * - passthrough: same dialect; bytes out as they came in.
 * - usage-strip: same-dialect OpenAI stream where the gateway asked the provider for
 *   usage (`stream_options.include_usage`) and the client did not: events are relayed one
 *   by one as they arrive, minus the usage-only chunk.
 * - translated JSON: the whole body is needed to translate it, so it is written at the end.
 * - translated stream: each upstream event is translated and written as it arrives.
 * Provider error bodies (status ≥ 400) in the other dialect are translated at the end.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import {
  AnthropicStreamToOpenAI,
  OpenAIStreamToAnthropic,
  SseParser,
  anthropicErrorToOpenAI,
  anthropicResponseToOpenAI,
  formatSse,
  isUsageOnlyChunk,
  scrubSecrets,
  openaiErrorToAnthropic,
  openaiResponseToAnthropic,
  type AnthropicMessage,
  type OpenAIChatCompletion,
} from '@sightline/translate';
import type { Dialect } from '@sightline/core';
import { valueAfterKey } from '@sightline/core';

export interface Relay {
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
  head: (status, headers) => ({ status, headers }),
  data: (chunk) => chunk,
  end: () => null,
};

/**
 * A same-dialect provider error (status ≥ 400): relayed with anything that looks like a
 * key (OpenAI echoes a masked key on 401) replaced, so keys never reach clients or logs.
 * Error bodies are small; this is the only same-dialect path that holds bytes back.
 */
export class ScrubErrorRelay implements Relay {
  readonly #chunks: Buffer[] = [];
  head(status: number, headers: OutgoingHttpHeaders): { status: number; headers: OutgoingHttpHeaders } {
    const h = { ...headers };
    delete h['content-length'];
    return { status, headers: h };
  }
  data(chunk: Buffer): null {
    this.#chunks.push(chunk);
    return null;
  }
  end(): string {
    return scrubSecrets(Buffer.concat(this.#chunks).toString('utf8'));
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
  readonly #parser = new SseParser();
  #events = true;

  head(status: number, headers: OutgoingHttpHeaders): { status: number; headers: OutgoingHttpHeaders } {
    this.#events = status < 400;
    return { status, headers };
  }

  data(chunk: Buffer): Buffer | string | null {
    if (!this.#events) return chunk;
    if (!mayHoldUsage(chunk) && this.#parser.passOver(chunk)) return chunk;
    let out = '';
    for (const ev of this.#parser.push(chunk)) {
      if (isUsageOnlyChunk(ev)) continue;
      out += formatSse(ev.event, ev.data);
    }
    return out === '' ? null : out;
  }

  end(): Buffer | string | null {
    if (!this.#events) return null;
    let out = '';
    for (const ev of this.#parser.end()) if (!isUsageOnlyChunk(ev)) out += formatSse(ev.event, ev.data);
    return out === '' ? null : out;
  }
}

function parseJson(chunks: Buffer[]): unknown {
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    return null;
  }
}

function jsonHeaders(headers: OutgoingHttpHeaders): OutgoingHttpHeaders {
  const h: OutgoingHttpHeaders = { ...headers, 'content-type': 'application/json' };
  delete h['content-length'];
  return h;
}

/** A provider error body, translated into the client's dialect (and scrubbed of secrets). */
function translateError(client: Dialect, status: number, chunks: Buffer[]): string {
  const body = parseJson(chunks);
  return client === 'openai' ? anthropicErrorToOpenAI(status, body).body : openaiErrorToAnthropic(status, body).body;
}

/** A JSON response from a provider of the other dialect. */
export class JsonTranslateRelay implements Relay {
  readonly #chunks: Buffer[] = [];
  #status = 200;

  constructor(
    readonly client: Dialect,
    readonly responseModel: string,
  ) {}

  head(status: number, headers: OutgoingHttpHeaders): { status: number; headers: OutgoingHttpHeaders } {
    this.#status = status;
    return { status, headers: jsonHeaders(headers) };
  }

  data(chunk: Buffer): null {
    this.#chunks.push(chunk);
    return null;
  }

  end(): string {
    if (this.#status >= 400) return translateError(this.client, this.#status, this.#chunks);
    const body = parseJson(this.#chunks);
    if (this.client === 'openai') {
      return JSON.stringify(anthropicResponseToOpenAI(body as AnthropicMessage, { responseModel: this.responseModel, created: Math.floor(Date.now() / 1000) }));
    }
    return JSON.stringify(openaiResponseToAnthropic(body as OpenAIChatCompletion, { responseModel: this.responseModel }).message);
  }
}

/** A stream from a provider of the other dialect, translated event by event. */
export class StreamTranslateRelay implements Relay {
  readonly #parser = new SseParser();
  readonly #translator: AnthropicStreamToOpenAI | OpenAIStreamToAnthropic;
  #error: Buffer[] | null = null;
  #status = 200;

  constructor(
    readonly client: Dialect,
    responseModel: string,
    includeUsage: boolean,
  ) {
    this.#translator =
      client === 'openai'
        ? new AnthropicStreamToOpenAI({ responseModel, created: Math.floor(Date.now() / 1000), includeUsage })
        : new OpenAIStreamToAnthropic({ responseModel });
  }

  head(status: number, headers: OutgoingHttpHeaders): { status: number; headers: OutgoingHttpHeaders } {
    this.#status = status;
    if (status >= 400) {
      this.#error = [];
      return { status, headers: jsonHeaders(headers) };
    }
    const h: OutgoingHttpHeaders = { ...headers, 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' };
    delete h['content-length'];
    return { status, headers: h };
  }

  data(chunk: Buffer): string | null {
    if (this.#error !== null) {
      this.#error.push(chunk);
      return null;
    }
    let out = '';
    for (const ev of this.#parser.push(chunk)) out += this.#translator.push(ev);
    return out === '' ? null : out;
  }

  end(): string | null {
    if (this.#error !== null) return translateError(this.client, this.#status, this.#error);
    let out = '';
    for (const ev of this.#parser.end()) out += this.#translator.push(ev);
    out += this.#translator.end();
    return out === '' ? null : out;
  }
}
