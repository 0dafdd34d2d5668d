/**
 * Upstream providers, prepared once at start-up: a connection pool per provider, the
 * dialect it speaks, its request path, and the headers every request to it carries.
 */
import { Client, Pool, type Dispatcher } from 'undici';
import type { UpstreamAttempt } from './upstream.js';
import type { IncomingHttpHeaders } from 'node:http';
import type { ProviderConfig, RouteConfig, TargetConfig, BreakerConfig } from '@sightline/config';
import type { Dialect } from '@sightline/core';
import { Breaker } from './breaker.js';

export const DEFAULT_ANTHROPIC_VERSION = '2023-06-01';

/**
 * HTTP/1.1 connections to one origin as a free list of undici Clients: a request takes
 * the most recently used idle connection (or opens one) and gives it back when undici
 * is done with it. O(1) per request at any number of connections in flight — undici's
 * Pool looks through its clients for a free one on every request, which stopped keeping
 * up at a few thousand long requests in flight (docs/benchmarks.md).
 */
export class ClientFreeList {
  readonly #idle: Client[] = [];
  readonly #all = new Set<Client>();

  constructor(
    readonly origin: string,
    readonly options: Client.Options,
    /** Idle connections kept, at most; more are closed when they come back. */
    readonly maxIdle = 4096,
  ) {}

  dispatch(opts: Dispatcher.DispatchOptions, attempt: UpstreamAttempt): void {
    let client = this.#idle.pop();
    if (client === undefined) {
      client = new Client(this.origin, this.options);
      this.#all.add(client);
    }
    const c = client;
    attempt.release = () => this.#giveBack(c);
    c.dispatch(opts, attempt);
  }

  #giveBack(c: Client): void {
    if (c.closed || c.destroyed) {
      this.#all.delete(c);
      return;
    }
    if (this.#idle.length < this.maxIdle) this.#idle.push(c);
    else {
      this.#all.delete(c);
      void c.close().catch(() => {});
    }
  }

  get connections(): number {
    return this.#all.size;
  }

  async close(): Promise<void> {
    await Promise.all([...this.#all].map((c) => c.close().catch(() => {})));
  }
}

/** An HTTP/2-capable pool (one connection multiplexes many requests) behind the same call. */
class PoolDispatcher {
  constructor(readonly pool: Pool) {}
  dispatch(opts: Dispatcher.DispatchOptions, attempt: UpstreamAttempt): void {
    this.pool.dispatch(opts, attempt);
  }
  close(): Promise<void> {
    return this.pool.close();
  }
}

export class Upstream {
  readonly pool: ClientFreeList | PoolDispatcher;
  readonly dialect: Dialect;
  readonly #path: string;
  /** Where the provider's API lives: the base path (OpenAI API), with `/v1` for Anthropic's. */
  readonly #apiBase: string;
  /** Azure's `?api-version=…`; '' for other types. */
  readonly #apiVersion: string;
  /** Headers for every request: content type, configured extras, configured key. */
  readonly baseHeaders: Record<string, string>;
  /** The same as a flat list of names and values, which `headers` starts from. */
  readonly #baseList: readonly string[];

  /**
   * @param passClientCredentials whether a caller's own provider key may be passed through
   *   when the configuration has none: only with authentication off. With it on, the caller's
   *   credential is a Sightline key, which never leaves the gateway.
   */
  constructor(
    readonly config: ProviderConfig,
    readonly passClientCredentials = true,
  ) {
    this.dialect = config.type === 'anthropic' ? 'anthropic' : 'openai';
    const https = config.origin.startsWith('https:');
    const options = {
      connect: { timeout: config.connectTimeoutMs },
      headersTimeout: config.headersTimeoutMs,
      bodyTimeout: config.bodyTimeoutMs,
      keepAliveTimeout: 30_000,
      keepAliveMaxTimeout: 600_000,
    };
    // HTTP/2 where the provider offers it (ALPN on https): thousands of requests in flight
    // share a few connections instead of one each. Plain HTTP/1.1 otherwise.
    this.pool = https && config.http2 ? new PoolDispatcher(new Pool(config.origin, { ...options, allowH2: true })) : new ClientFreeList(config.origin, options);
    const base = config.basePath;
    this.#apiBase = config.type === 'anthropic' && !base.endsWith('/v1') ? `${base}/v1` : base;
    this.#apiVersion = config.type === 'azure' ? `?api-version=${encodeURIComponent(config.apiVersion)}` : '';
    if (config.type === 'anthropic') this.#path = `${this.#apiBase}/messages`;
    else this.#path = `${base}/chat/completions`;
    const h: Record<string, string> = { 'content-type': 'application/json', ...config.headers };
    if (config.apiKey !== '') {
      if (config.type === 'anthropic') h['x-api-key'] = config.apiKey;
      else if (config.type === 'azure') h['api-key'] = config.apiKey;
      else h.authorization = `Bearer ${config.apiKey}`;
    }
    if (config.type === 'anthropic' && h['anthropic-version'] === undefined) h['anthropic-version'] = DEFAULT_ANTHROPIC_VERSION;
    this.baseHeaders = h;
    this.#baseList = Object.entries(h).flat();
  }

  /** Request path for a model (Azure puts the deployment in the path). */
  path(model: string): string {
    if (this.config.type === 'azure') {
      return `${this.config.basePath}/deployments/${encodeURIComponent(model)}/chat/completions?api-version=${encodeURIComponent(this.config.apiVersion)}`;
    }
    return this.#path;
  }

  /**
   * Request path of the other endpoints (docs/api.md): `responses` and `embeddings` (OpenAI
   * API; Azure puts an embeddings deployment in the path), `response` (a stored response by
   * id, with the client's query string `query`, '' for none), `count_tokens` (Anthropic) and
   * `models` (the provider's model list). Not on the chat path: built per request.
   */
  apiPath(endpoint: 'responses' | 'response' | 'embeddings' | 'count_tokens' | 'models', model: string, id = '', query = ''): string {
    const base = this.#apiBase;
    const v = this.#apiVersion;
    switch (endpoint) {
      case 'responses':
        return `${base}/responses${v}`;
      case 'response': {
        const path = `${base}/responses/${encodeURIComponent(id)}`;
        if (query === '') return `${path}${v}`;
        return v === '' ? `${path}?${query}` : `${path}${v}&${query}`;
      }
      case 'embeddings':
        return this.config.type === 'azure' ? `${base}/deployments/${encodeURIComponent(model)}/embeddings${v}` : `${base}/embeddings`;
      case 'count_tokens':
        return `${base}/messages/count_tokens`;
      case 'models':
        return `${base}/models${v}`;
    }
  }

  /**
   * Headers for one request: the base headers, the caller's credentials when no key is
   * configured (passed through in the form the provider expects), and vendor headers. A flat
   * list of names and values, the form undici's dispatch takes, not an object: built as
   * `{ ...base, traceparent }` plus the caller's key it cost ~2 µs a call (V8's slow path for a
   * spread followed by more keys), the list ~60 ns (issue 15). Each name once: a value set
   * here replaces a base header of the same name, as it did in the object.
   */
  headers(client: IncomingHttpHeaders, clientDialect: Dialect, traceparent: string): string[] {
    const h = this.#baseList.slice();
    setHeader(h, 'traceparent', traceparent);
    if (this.config.apiKey === '' && this.passClientCredentials) {
      const bearer = one(client.authorization);
      const xKey = one(client['x-api-key']);
      if (this.config.type === 'anthropic') {
        if (xKey !== undefined) setHeader(h, 'x-api-key', xKey);
        // An OpenAI client can only send its key as a bearer token; Anthropic takes keys as x-api-key.
        else if (bearer !== undefined && clientDialect === 'openai') setHeader(h, 'x-api-key', bearer.replace(/^Bearer\s+/i, ''));
        else if (bearer !== undefined) setHeader(h, 'authorization', bearer);
      } else if (this.config.type === 'azure') {
        const apiKey = one(client['api-key']) ?? xKey;
        if (apiKey !== undefined) setHeader(h, 'api-key', apiKey);
        else if (bearer !== undefined) setHeader(h, 'authorization', bearer);
      } else if (bearer !== undefined) setHeader(h, 'authorization', bearer);
      else if (xKey !== undefined) setHeader(h, 'authorization', `Bearer ${xKey}`);
    }
    if (this.dialect === 'anthropic' && clientDialect === 'anthropic') {
      const v = one(client['anthropic-version']);
      if (v !== undefined) setHeader(h, 'anthropic-version', v);
      const beta = one(client['anthropic-beta']);
      if (beta !== undefined) setHeader(h, 'anthropic-beta', beta);
    } else if (this.dialect === 'openai' && clientDialect === 'openai') {
      for (let i = 0; i < OPENAI_PASSED.length; i++) {
        const name = OPENAI_PASSED[i]!;
        const v = one(client[name]);
        if (v !== undefined) setHeader(h, name, v);
      }
    }
    return h;
  }
}

/** OpenAI request headers passed on from an OpenAI client to an OpenAI-API provider. */
const OPENAI_PASSED = ['openai-organization', 'openai-project', 'openai-beta'] as const;

/** Sets `name` in a flat header list: replaces its value if the list has it (a base header), else appends it. */
function setHeader(h: string[], name: string, value: string): void {
  for (let i = 0; i < h.length; i += 2) {
    if (h[i] === name) {
      h[i + 1] = value;
      return;
    }
  }
  h.push(name, value);
}

/** The first value of a request header. */
export function one(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

/** A route target with its provider's pool and its own breaker. */
export interface Target {
  upstream: Upstream;
  /** Model sent upstream; null: the client's model. */
  model: string | null;
  weight: number;
  breaker: Breaker;
}

export interface PreparedRoute {
  config: RouteConfig;
  targets: Target[];
  totalWeight: number;
}

export function prepareRoutes(routes: readonly RouteConfig[], upstreams: Map<string, Upstream>, breaker: BreakerConfig): Map<RouteConfig, PreparedRoute> {
  const out = new Map<RouteConfig, PreparedRoute>();
  for (const r of routes) {
    const targets = r.targets.map(
      (t: TargetConfig): Target => ({
        upstream: upstreams.get(t.provider.name)!,
        model: t.model,
        weight: t.weight,
        breaker: new Breaker(`${t.provider.name}/${t.model ?? '*'}`, breaker),
      }),
    );
    out.set(r, { config: r, targets, totalWeight: targets.reduce((a, t) => a + t.weight, 0) });
  }
  return out;
}

/**
 * The order in which a request tries targets: listed order, or for `weighted` a first
 * pick by weight followed by the rest in listed order.
 */
export function targetOrder(route: PreparedRoute, random: number): Target[] {
  const ts = route.targets;
  if (route.config.strategy !== 'weighted' || ts.length === 1) return ts;
  let x = random * route.totalWeight;
  let first = 0;
  for (let i = 0; i < ts.length; i++) {
    x -= ts[i]!.weight;
    if (x < 0) {
      first = i;
      break;
    }
  }
  if (first === 0) return ts;
  const order = [ts[first]!];
  for (let i = 0; i < ts.length; i++) if (i !== first) order.push(ts[i]!);
  return order;
}
