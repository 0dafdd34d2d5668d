/**
 * The resolved configuration: what the YAML file (docs/configuration.md) becomes after
 * `${ENV}` expansion, defaults and validation. Resolved once at start-up; nothing on the
 * request path reads the file or the environment again.
 */

/** Which API a provider speaks upstream. */
export type ProviderType = 'openai' | 'anthropic' | 'openai-compatible' | 'azure';

export interface ProviderConfig {
  /** The key under `providers:`; appears as `provider` in spans and SQL. */
  name: string;
  type: ProviderType;
  /**
   * Base URL including any path prefix, without a trailing slash, e.g.
   * `https://api.openai.com/v1`. Chat completions go to `${baseUrl}/chat/completions`.
   */
  baseUrl: string;
  /** `scheme://host:port` of baseUrl: the connection pool key. */
  origin: string;
  /** Path part of baseUrl, without trailing slash ('' or '/v1'). */
  basePath: string;
  /**
   * The key sent upstream. Empty: the client's own `Authorization` (OpenAI) or
   * `x-api-key` (Anthropic) header is passed through instead.
   */
  apiKey: string;
  /** Extra headers sent upstream with every request. Default: none. */
  headers: Record<string, string>;
  /** Milliseconds to open a connection. Default 10 000. */
  connectTimeoutMs: number;
  /** Milliseconds from request sent to response headers. Default 600 000 (long generations). */
  headersTimeoutMs: number;
  /** Milliseconds of silence allowed between body chunks (idle stream). Default 300 000. */
  bodyTimeoutMs: number;
  /** Azure OpenAI only: the `api-version` query parameter. Default `2024-10-21`. */
  apiVersion: string;
  /** Try HTTP/2 (ALPN, https only) to this provider. Default true. */
  http2: boolean;
}

export interface TargetConfig {
  provider: ProviderConfig;
  /** Model name sent upstream (Azure: the deployment); null: the client's model. */
  model: string | null;
  /** Share of traffic with `strategy: weighted`. Default 1. */
  weight: number;
}

export interface BreakerConfig {
  /** Consecutive provider failures (5xx, timeouts, connection errors) that open it. Default 5. */
  failureThreshold: number;
  /** Milliseconds an open breaker waits before letting one probe through. Default 30 000. */
  cooldownMs: number;
}

export interface RouteConfig {
  /** Model names or `*` glob patterns, as written. */
  match: string[];
  /**
   * Where requests go, in fallback order. `provider`/`model` on the route is shorthand
   * for a single target.
   */
  targets: TargetConfig[];
  /**
   * `ordered` (default): the first available target, then the next on failure.
   * `weighted`: the first attempt picks by weight, fallbacks go in listed order.
   */
  strategy: 'ordered' | 'weighted';
  /** Extra attempts on the same target after a provider failure, before falling back. Default 1. */
  retries: number;
  /** First retry delay in ms; doubles each retry, with jitter. Default 100. */
  retryBackoffMs: number;
  /** Milliseconds for the whole request across attempts (0: none). Default 0. */
  timeoutMs: number;
  /**
   * Exact cache (issue 12): answers of this route are kept this long (`cache: { ttl: 10m }`)
   * and a repeated request is answered from the cache. 0: no cache. Default 0.
   */
  cacheTtlMs: number;
}

export interface CaptureConfig {
  /** Always on in production; the only off switch is the benchmark flag. Default true. */
  enabled: boolean;
  /** Requests per published batch, at most. Default 256. */
  batchMaxRequests: number;
  /**
   * Bytes of a published batch, at most; keep it under the NATS server's max_payload
   * (1 MiB by default). Default 512 KiB.
   */
  batchMaxBytes: number;
  /** Milliseconds a partial batch waits before it is published. Default 50. */
  flushIntervalMs: number;
  /** Captured requests held in memory waiting to be published, at most. Default 20 000. */
  queueMaxRequests: number;
  /** Batch publishes awaiting a JetStream acknowledgement, at most. Default 4. */
  maxInFlight: number;
  /** Milliseconds to wait for a publish acknowledgement. Default 5 000. */
  publishTimeoutMs: number;
  /**
   * Directory of the disk spool for batches NATS cannot take; null: none (batches wait in
   * memory). One directory per gateway replica. Shipped file: `${SIGHTLINE_SPOOL_DIR:-data/spool}`.
   */
  spoolDir: string | null;
  /** Bytes the spool may hold before capture drops (and counts). Default 1 GiB. */
  spoolMaxBytes: number;
  /**
   * Content capture for teams without their own setting (and for requests refused before
   * their team is known): `full`, `redacted` or `none` (issue 11). Default `full`.
   */
  content: 'full' | 'redacted' | 'none';
  /** Bytes of each side (request, response) kept per request; beyond, cut and flagged. Default 256 KiB. */
  contentMaxBytes: number;
  /** Keep base64 payloads (images, audio, files) instead of a placeholder with their type and size. Default false. */
  contentKeepBase64: boolean;
}

/** Prices for cost figures, in US dollars per million tokens. */
export interface PriceConfig {
  /**
   * Model names or `*` globs (the model the client asked for); the first matching entry wins,
   * configuration entries before the shipped table.
   */
  match: string[];
  inputPerMTok: number;
  outputPerMTok: number;
  /** Default: the input price. */
  cacheReadPerMTok: number;
  /** Default: the input price. */
  cacheWritePerMTok: number;
}

export interface Config {
  /** Absolute path of the file this came from (or '<default>'). */
  file: string;
  gateway: {
    host: string;
    /** Default 8080; `GATEWAY_PORT` in the shipped file. */
    port: number;
    /** Largest request body accepted, in bytes. Default 10 MiB. */
    bodyLimitBytes: number;
    /** Request header naming the caller's team when no key maps to one. Default `x-sightline-team`. */
    teamHeader: string;
    /**
     * Largest provider body the gateway holds in memory, in bytes: error bodies (scrubbed or
     * translated) and JSON answers translated to the other dialect. Past it the request fails
     * as `upstream_error`. Bodies relayed as they arrive are not held and not limited. Default 8 MiB.
     */
    upstreamBodyLimitBytes: number;
    /**
     * Largest server-sent event (one line, or the lines of one event) read from a provider
     * stream that the gateway parses, in bytes. Past it the stream ends with an error event in
     * the client's dialect. Default 1 MiB.
     */
    sseEventLimitBytes: number;
    /**
     * Deepest nesting of objects and arrays accepted in a request body; deeper is a 400 in the
     * client's dialect (translating or re-encoding deeper JSON would exhaust the stack). Default 128.
     */
    jsonDepthLimit: number;
    /**
     * Output tokens a request may use when it sets no bound and a budget or a token limit
     * applies: injected as its max tokens, so the reservation is an upper bound (issue 12).
     * Default 4096.
     */
    defaultMaxTokens: number;
    /** Port of an extra HTTP/2 cleartext (prior knowledge) listener; null: none. Default null. */
    h2cPort: number | null;
  };
  query: {
    /** Default 127.0.0.1: the query API has no authentication yet (issue 9); `QUERY_HOST` in the shipped file. */
    host: string;
    /** Default 8081; `QUERY_PORT` in the shipped file. */
    port: number;
  };
  providers: Map<string, ProviderConfig>;
  routes: RouteConfig[];
  breaker: BreakerConfig;
  /**
   * Prices from the configuration, in its order (default: none). They come before the shipped
   * table (SHIPPED_PRICES in pricing.ts), so an entry here overrides a shipped price.
   */
  pricing: PriceConfig[];
  /**
   * Whether the shipped price table is used after `pricing` (YAML `pricing_defaults`).
   * Default true; false leaves only `pricing`, and cost is null for any other model.
   * Pass it on: `priceLookup(config.pricing, { shipped: config.pricingDefaults })`.
   */
  pricingDefaults: boolean;
  capture: CaptureConfig;
  /** The exact response cache shared by every replica (routes opt in with `cache: { ttl }`). */
  cache: {
    /** Bytes of cached answers each process holds (and the shared bucket keeps). Default 256 MiB. */
    maxBytes: number;
    /** Largest answer cached; larger ones are not. Default 1000 KiB (under NATS's 1 MiB message limit). */
    maxEntryBytes: number;
  };
}
