/**
 * The gateway's HTTP server: fastify in front, undici behind. The proxy routes' common
 * requests take a fast path past fastify's request lifecycle (buildGateway's fastPath).
 *
 * Per request: one RequestRecord (fixed shape, declared up front with
 * decorateRequest), one close listener that hands it to capture once the response is
 * over, and stage marks written as numbers. Routes, headers, pools and breakers are
 * prepared once at start-up, in GatewayCore, and shared by the HTTP/1.1 and the HTTP/2
 * listeners. Capture never runs before the response is complete.
 */
import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { now, newTraceId, newSpanId, parseTraceparent, type Dialect } from '@sightline/core';
import { NO_USAGE, RequestRecord, keepContent, recordUsage, type CaptureSink } from '@sightline/capture';
import { Router, costUsd, priceLookup, type Config } from '@sightline/config';
import { GatewayError, errorBody, errorHeaders } from './errors.js';
import type { GatewayLogger } from './log.js';
import type { Directory } from '@sightline/directory';
import type { CachedResponse, ResponseCache } from '@sightline/cache';
import { CacheFill, cacheDirectives, requestCacheKey } from './cache.js';
import { DEFAULT_UNAVAILABLE_POLICY, type Admission, type Admitted, type Governor, type Refused } from '@sightline/controls';
import type { KeyRecord } from '@sightline/directory';
import type { PriceOf } from '@sightline/config';
import { RequestControls, budgetAdmission, clientMaxTokens, limitsAdmission, rateLimitHeaders, refusalError, type LimitsInput } from './controls.js';
import { one, prepareRoutes, targetOrder, Upstream, type PreparedRoute, type Target } from './providers.js';
import { dialectOfApi, generates, spends, type ClientApi } from './apis.js';
import { estimateInputTokens } from './count-tokens.js';
import { ModelCatalogue, type ListedModel } from './models.js';
import { Exchange, type ClientResponse, type PreparedRequest } from './exchange.js';
import type { RelayLimits, RelayPlan } from './relay.js';
import {
  anthropicRequestToOpenAI,
  clientRequestedUsage,
  isTranslationError,
  openaiRequestToAnthropic,
  responsesRequestToAnthropic,
  withStreamUsage,
  withStreamUsageBytes,
  type AnthropicMessagesRequest,
  type OpenAIChatRequest,
  type ResponsesRequest,
} from '@sightline/translate';
import { Metrics } from './metrics.js';
import { validateAnthropic, validateCountTokens, validateEmbeddings, validateOpenAI, validateResponses } from './validate.js';

declare module 'fastify' {
  interface FastifyRequest {
    sl: RequestRecord | null;
    exchange: Exchange | null;
    /** Limits and budgets of the request, when any applies (controls.ts). */
    controls: RequestControls | null;
  }
}

/** State shared by every listener of one gateway process. */
export class GatewayCore {
  readonly router: Router;
  readonly upstreams = new Map<string, Upstream>();
  readonly routes: Map<import('@sightline/config').RouteConfig, PreparedRoute>;
  readonly metrics: Metrics;
  readonly limits: RelayLimits;
  /** Prices of the models clients ask for (budgets). */
  readonly priceOf: PriceOf;
  /** The providers' model lists (`GET /v1/models`); read and refreshed once started (startGateway). */
  readonly models: ModelCatalogue;
  /**
   * Where `GET` and `DELETE /v1/responses/{id}` go without `?model=`: the first route (in file
   * order) with a target that speaks the OpenAI API, and its first `match` entry (a key's
   * model globs must allow it). null: no route has one.
   */
  readonly storedResponses: { route: PreparedRoute; pattern: string } | null;
  seq = 0;
  /** Requests the HTTP/1.1 listener's fast path took (buildGateway), past fastify's request lifecycle. */
  fastPathServed = 0;

  constructor(
    readonly config: Config,
    readonly capture: CaptureSink | null,
    readonly instance: string,
    /** Where the gateway's own failures are reported (internal errors). */
    readonly logger: GatewayLogger,
    /** Keys and teams; null: authentication off (the team is the team header's). */
    readonly directory: Directory | null = null,
    /** The exact cache routes opt into (`cache: { ttl }`); null: none. */
    readonly cache: ResponseCache | null = null,
    /** Rate limits and budgets (docs/governance.md); null: none enforced. */
    readonly governor: Governor | null = null,
  ) {
    this.priceOf = priceLookup(config.pricing, { shipped: config.pricingDefaults });
    this.router = new Router(config.routes);
    for (const p of config.providers.values()) this.upstreams.set(p.name, new Upstream(p, directory === null));
    this.routes = prepareRoutes(config.routes, this.upstreams, config.breaker);
    this.models = new ModelCatalogue(this.router, this.upstreams);
    const stored = [...this.routes.values()].find((r) => r.targets.some((t) => t.upstream.dialect === 'openai'));
    this.storedResponses = stored === undefined ? null : { route: stored, pattern: stored.config.match[0] ?? '' };
    this.metrics = new Metrics(capture, [...this.routes.values()].flatMap((r) => r.targets.map((t) => t.breaker)));
    this.limits = { bodyBytes: config.gateway.upstreamBodyLimitBytes, sseEventBytes: config.gateway.sseEventLimitBytes, contentBytes: config.capture.contentMaxBytes };
  }

  async close(): Promise<void> {
    this.metrics.close();
    this.models.close();
    await Promise.all([...this.upstreams.values()].map((u) => u.pool.close()));
  }
}

const JSON_HEADERS = { 'content-type': 'application/json' } as const;
/** The body of a request that has none (GET, DELETE). */
const EMPTY_BODY = Buffer.alloc(0);
/** The captured `route` of `GET` and `DELETE /v1/responses/{id}`. */
const STORED_RESPONSE_ROUTE = '/v1/responses/{id}';

function dialectOfUrl(url: string): Dialect {
  return url.startsWith('/v1/messages') ? 'anthropic' : 'openai';
}

/** Builds one listener (HTTP/1.1, or HTTP/2 cleartext with `http2`) over a shared core. */
export function buildGateway(core: GatewayCore, listener: { http2?: boolean } = {}): FastifyInstance {
  const { config, capture, instance, metrics } = core;
  const teamHeader = config.gateway.teamHeader;
  const jsonDepthLimit = config.gateway.jsonDepthLimit;
  const contentDefault = config.capture.content;
  const cacheMaxEntry = config.cache.maxEntryBytes;
  const defaultMaxTokens = config.gateway.defaultMaxTokens;
  const contentMax = config.capture.contentMaxBytes;
  const directory = core.directory;
  const bodyLimit = config.gateway.bodyLimitBytes;
  /**
   * Set once fastify starts closing. A request that still comes (on a connection already open)
   * is then answered 503 `shutting_down` in its dialect and captured, by the `onRequest` hook;
   * the fast path leaves it to fastify for that. Fastify's own 503 (`return503OnClosing`) would
   * answer in neither dialect and before any hook, so without a record.
   */
  let closing = false;

  const app = (
    listener.http2 === true
      ? Fastify({ logger: false, http2: true, bodyLimit, requestIdHeader: false, return503OnClosing: false })
      : Fastify({ logger: false, bodyLimit, keepAliveTimeout: 72_000, requestIdHeader: false, return503OnClosing: false, forceCloseConnections: 'idle' })
  ) as unknown as FastifyInstance;
  app.decorateRequest('sl', null);
  app.decorateRequest('exchange', null);
  app.decorateRequest('controls', null);
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  if (listener.http2 !== true) {
    // The fast path goes in front of fastify's handler, the one `request` listener of the
    // server fastify made (with fastify's own settings; not a serverFactory, with which fastify
    // would bind only one address of `localhost`). Were fastify to attach its handler otherwise,
    // every request would go through fastify, as before (`core.fastPathServed` stays 0).
    const server = app.server;
    const handlers = server.listeners('request');
    if (handlers.length === 1) {
      const viaFastify = handlers[0] as (req: IncomingMessage, res: ServerResponse) => void;
      server.removeListener('request', viaFastify);
      server.on('request', (req: IncomingMessage, res: ServerResponse) => {
        if (!fastPath(req, res)) viaFastify(req, res);
      });
    }
  }

  app.addHook('onRequest', (req, reply, done) => {
    const url = req.raw.url ?? '';
    if (!url.startsWith('/v1/') || url.startsWith('/v1/models')) return done();
    begin(req, reply.raw, url);
    // Answered here, so `done` is not called: fastify then runs nothing more for it.
    if (closing) return replyError(req, reply, new GatewayError('shutting_down', 'This gateway is shutting down: retry the request on a new connection.'));
    done();
  });

  /**
   * The proxy routes' common requests, served without fastify's request lifecycle: a `POST`
   * to one of their exact paths (no query string), `Content-Type: application/json` as the
   * SDKs send it, and a `Content-Length` within the body limit. Fastify's routing, hooks,
   * request and reply objects were 3–4 % of the serving thread in a profile under load
   * (docs/benchmarks.md, "The fast path past fastify"). Everything else (another
   * content type, a chunked or too large body, a query string, a closing server, HTTP/2) goes
   * through fastify and its hooks. Both paths run the same code from the
   * record on (`begin`, `noteBody`, `serve`).
   */
  function fastPath(req: IncomingMessage, res: ServerResponse): boolean {
    if (req.method !== 'POST' || closing) return false;
    const url = req.url ?? '';
    const api = FAST_ROUTES.get(url);
    if (api === undefined) return false;
    const h = req.headers;
    if (h['content-type'] !== 'application/json' || h['transfer-encoding'] !== undefined) return false;
    const length = Number(h['content-length']);
    if (!(length <= bodyLimit)) return false;
    const call = new FastCall(req);
    core.fastPathServed++;
    begin(call, res, url);
    const chunks: Buffer[] = [];
    let got = 0;
    req.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      got += chunk.length;
    });
    req.on('end', () => {
      // A copy, as fastify makes: the record keeps the body until the content is captured.
      const body = Buffer.concat(chunks, got);
      call.body = body;
      noteBody(call, body);
      serve(call, res, api);
    });
    // The client went away mid-body: the response's close listener records it (499).
    req.on('error', noop);
    return true;
  }

  /** What every captured request starts with: its record, ids and trace header, and the close listener that hands it on. */
  function begin(req: ProxyCall, res: ServerResponse, url: string): void {
    const rec = new RequestRecord();
    rec.t0 = now();
    rec.seq = ++core.seq;
    rec.method = req.raw.method ?? '';
    // The path only: a query string may carry a key, and stays out of captured data.
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    rec.route = path.length > 200 ? path.slice(0, 200) : path;
    rec.dialect = dialectOfUrl(url);
    const tp = parseTraceparent(one(req.headers.traceparent));
    if (tp !== null) {
      rec.traceId = tp.traceId;
      rec.parentSpanId = tp.parentSpanId;
    } else {
      rec.traceId = newTraceId();
    }
    rec.rootSpanId = newSpanId();
    // Until the caller's team is known (and for requests refused before it is), the configured default.
    rec.contentPolicy = contentDefault;
    req.sl = rec;
    res.setHeader('x-sightline-trace-id', rec.traceId);
    res.once('close', () => {
      rec.tFinish = now();
      // A throw in an event listener would end the process: what this part throws is logged,
      // and the record is captured all the same (capture.record itself never throws).
      try {
        if (!res.writableFinished) {
          rec.aborted = true;
          if (rec.status === 0) rec.status = 499;
          if (rec.errorType === '') {
            rec.errorType = 'client_closed';
            rec.errorMessage = 'the client closed the connection before the response was complete';
          }
          const ex = req.exchange;
          if (ex !== null) ex.clientGone();
        }
        const ctl = req.controls;
        if (ctl !== null) settleControls(core, rec, ctl);
        metrics.observe(rec);
      } catch (e) {
        reportInternal(core.logger, rec, rec.method, new GatewayError('internal_error', 'internal error in the gateway after the response', null, { cause: e }));
      }
      if (capture !== null) capture.record(rec);
    });
  }

  /** The body as read: a reference (no copy), made into bounded text only after the response, if the policy keeps content. */
  function noteBody(req: ProxyCall, body: Buffer): void {
    const rec = req.sl;
    if (rec !== null) {
      rec.tBody = now();
      rec.requestBytes = body.length;
      rec.requestBody = body;
    }
  }

  /** Runs a proxy route; what it throws is answered in the client's dialect, never left to hang. */
  function serve(req: ProxyCall, res: ServerResponse, api: ClientApi): void {
    try {
      handle(req, res, api);
    } catch (e) {
      failed(req, res, e);
    }
  }

  /** Answers what the route code threw, in the client's dialect; used by `serve` and by the continuations after a wait for a lease. */
  function failed(req: ProxyCall, res: ServerResponse, e: unknown): void {
    const ge = e instanceof GatewayError ? e : new GatewayError('internal_error', 'internal error in the gateway', null, { cause: e });
    if (res.headersSent) return failRaw(core.logger, req.sl!, res, ge, contentMax);
    if (ge.code === 'internal_error') reportInternal(core.logger, req.sl, req.method, ge);
    if (req.exchange === null) return sendError(req, res, ge);
    // An exchange owns the response and may still write to it: the connection is ended
    // instead, and the exchange sees its client gone.
    noteError(req, ge);
    res.destroy();
  }

  // Bodies are read as bytes: same-dialect traffic is forwarded as it came, and JSON is
  // parsed by the route so a parse failure is the `parse` stage's, in the client's dialect.
  app.removeAllContentTypeParsers();
  const bodyBytes = (req: FastifyRequest, body: string | Buffer, done: (err: Error | null, body?: unknown) => void): void => {
    noteBody(req, body as Buffer);
    done(null, body);
  };
  app.addContentTypeParser('*', { parseAs: 'buffer' }, bodyBytes);
  // The same parser named for the type nearly every request has: fastify finds a named type by
  // the header's string, but for the catch-all alone it parses the header on every request
  // (0.68 µs against 0.06 a lookup, warm; docs/benchmarks.md).
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, bodyBytes);

  app.setErrorHandler((err: Error & { code?: string; statusCode?: number }, req, reply) => {
    let ge: GatewayError;
    if (err instanceof GatewayError) ge = err;
    else if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') ge = new GatewayError('body_too_large', `request body is larger than the limit of ${config.gateway.bodyLimitBytes} bytes`);
    else if (err.statusCode === 415) ge = new GatewayError('unsupported_media_type', err.message);
    else if (err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500) ge = new GatewayError('invalid_request', err.message);
    else ge = new GatewayError('internal_error', 'internal error in the gateway', null, { cause: err });
    if (ge.code === 'internal_error') reportInternal(core.logger, req.sl, req.method, ge);
    replyError(req, reply, ge);
  });

  app.setNotFoundHandler((req, reply) => {
    replyError(req, reply, new GatewayError('route_not_found', `no route for ${req.method} ${(req.raw.url ?? '').split('?', 1)[0]}`));
  });

  app.get('/healthz', async (_req, reply) =>
    closing
      ? reply.code(503).send({ ok: false, instance, closing: true })
      : directory === null
      ? { ok: true, instance, authentication: 'off', warning: 'authentication is off (SIGHTLINE_ADMIN_TOKEN is not set): anyone who can reach this port sends requests on the configured provider keys' }
      : { ok: true, instance, authentication: 'on', directory: directory.status(), limits: core.governor?.status() ?? null, cache: core.cache?.status() ?? null },
  );
  app.get('/metrics', async (_req, reply) => {
    reply.header('content-type', 'text/plain; version=0.0.4');
    return metrics.render();
  });

  app.get('/v1/models', (req, reply) => serveModels(req, reply, null));
  app.get('/v1/models/*', (req, reply) => serveModels(req, reply, (req.params as { '*': string })['*']));

  // The proxy routes answer on the raw response (reply.hijack), as the fast path does.
  const proxy =
    (api: ClientApi) =>
    (req: FastifyRequest, reply: FastifyReply): void => {
      reply.hijack();
      serve(req, reply.raw, api);
    };
  app.post('/v1/chat/completions', proxy('chat'));
  app.post('/v1/messages', proxy('messages'));
  app.post('/v1/responses', proxy('responses'));
  app.get('/v1/responses/:id', proxy('response'));
  app.delete('/v1/responses/:id', proxy('response'));
  app.post('/v1/embeddings', proxy('embeddings'));
  app.post('/v1/messages/count_tokens', proxy('count_tokens'));

  return app;

  function handle(req: ProxyCall, res: ServerResponse, api: ClientApi): void {
    const rec = req.sl!;
    const raw = req.body as Buffer | undefined;
    if (rec.tBody === 0) rec.tBody = now(); // no body at all
    const dialect = dialectOfApi(api);

    // parse
    let body: Record<string, unknown>;
    try {
      body = parse(api, raw, req);
    } catch (e) {
      return sendError(req, res, e as GatewayError);
    }
    rec.model = body.model as string;
    rec.stream = body.stream === true;
    attribute(rec, body, req.headers);
    // Counting tokens and reading or deleting a stored response spend none: a stored
    // response repeats the usage of the request that made it, which must not count twice.
    if (api === 'response' || api === 'count_tokens') rec.usage = NO_USAGE;
    // The route template, as OpenTelemetry's `http.route` means it: one value for every id.
    if (api === 'response') rec.route = STORED_RESPONSE_ROUTE;
    rec.tParsed = now();

    // auth: with keys, the caller's key decides the team, the scope and the models; without,
    // the team header names the team and provider credentials may be the caller's.
    let key: KeyRecord | null = null;
    if (directory !== null) {
      const check = directory.check(callerKey(req.headers), 'gateway', Date.now());
      if (!check.ok) {
        const code = check.reason === 'scope' ? 'permission_denied' : 'invalid_api_key';
        return sendError(req, res, new GatewayError(code, check.message));
      }
      key = check.key;
      rec.team = key.team;
      rec.keyId = key.id;
      rec.contentPolicy = directory.team(key.team)?.settings.content_capture ?? contentDefault;
      if (!directory.modelAllowed(key, rec.model)) {
        // A stored response read without `?model=` goes to the default route: its first pattern must be allowed.
        const byDefault = api === 'response' && rec.model === '';
        const pattern = core.storedResponses?.pattern ?? '';
        if (!byDefault) {
          return sendError(req, res, new GatewayError('permission_denied', `The API key ${key.hint} (${key.id}) may not use the model \`${rec.model}\` (allowed: ${key.models.join(', ')}).`, 'model'));
        }
        if (pattern !== '' && !directory.modelAllowed(key, pattern)) {
          return sendError(req, res, new GatewayError('permission_denied', `The API key ${key.hint} (${key.id}) may not use the models \`${pattern}\` whose provider keeps responses (allowed: ${key.models.join(', ')}); name the model the response was made with: ?model=…`, 'model'));
        }
      }
    } else {
      const team = one(req.headers[teamHeader]);
      rec.team = team === undefined || team === '' ? 'default' : team.length > 128 ? team.slice(0, 128) : team;
    }
    rec.tAuth = now();

    // limits: requests and tokens per minute of the key and its team, admitted in memory.
    const governor = core.governor;
    if (governor !== null && key !== null) {
      const settings = directory!.team(key.team)?.settings;
      const input: LimitsInput = {
        keyId: key.id,
        team: key.team,
        keyLimits: key.limits ?? null,
        teamLimits: settings?.limits ?? null,
        keyBudget: key.budget ?? null,
        teamBudget: settings?.budget ?? null,
        requestBytes: rec.requestBytes,
        maxOutput: 0,
        policy: settings?.limits_when_unavailable === undefined ? null : { ...DEFAULT_UNAVAILABLE_POLICY, ...settings.limits_when_unavailable },
      };
      if (input.keyLimits !== null || input.teamLimits !== null || input.keyBudget !== null || input.teamBudget !== null) {
        const ctl = new RequestControls();
        req.controls = ctl;
        // Embeddings, token counts and stored responses have no output tokens: their bound is 0.
        const gen = generates(api);
        const own = gen ? clientMaxTokens(body) : 0;
        input.maxOutput = !gen ? 0 : own > 0 ? own : defaultMaxTokens;
        ctl.maxOutput = input.maxOutput;
        // Without the client's bound the output could be unbounded: cap it, so the reservation is an upper bound.
        ctl.injectMaxTokens = gen && own === 0 && (input.keyBudget !== null || input.teamBudget !== null || input.keyLimits?.tokens_per_minute !== undefined || input.teamLimits?.tokens_per_minute !== undefined);
        if (input.keyLimits !== null || input.teamLimits !== null) {
          return admitThen(req, res, governor, limitsAdmission(input), (v) => {
            if (v.ok === false) {
              ctl.headers = rateLimitHeaders(v.headers, Date.now());
              return sendError(req, res, refusalError(v));
            }
            ctl.limits = v.ticket;
            ctl.headers = rateLimitHeaders(v.ticket.headers, Date.now());
            rec.tLimits = now();
            routeStage(req, res, api, dialect, body, raw ?? EMPTY_BODY, ctl, input);
          });
        }
        return routeStage(req, res, api, dialect, body, raw ?? EMPTY_BODY, ctl, input);
      }
    }
    routeStage(req, res, api, dialect, body, raw ?? EMPTY_BODY, null, null);
  }

  /** The body of a request of this API, validated (`parse` stage); for a stored response, its `?model=`. */
  function parse(api: ClientApi, raw: Buffer | undefined, req: ProxyCall): Record<string, unknown> {
    switch (api) {
      case 'chat':
        return validateOpenAI(raw, jsonDepthLimit);
      case 'messages':
        return validateAnthropic(raw, jsonDepthLimit);
      case 'responses':
        return validateResponses(raw, jsonDepthLimit);
      case 'embeddings':
        return validateEmbeddings(raw, jsonDepthLimit);
      case 'count_tokens':
        return validateCountTokens(raw, jsonDepthLimit);
      case 'response': {
        const q = req.query as Record<string, unknown>;
        const model = typeof q.model === 'string' ? q.model : '';
        return { model: model.length > 256 ? model.slice(0, 256) : model, stream: q.stream === 'true' };
      }
    }
  }

  /**
   * Runs `then` with the governor's verdict: at once when it decides in memory, else once the
   * lease it asked for has arrived (a key's first request on this process in a while). A
   * client gone meanwhile is not served. After a wait, `then` runs in a promise callback,
   * outside `serve`: what it throws is answered here, not left an unhandled rejection (which
   * would end the process).
   */
  function admitThen(req: ProxyCall, res: ServerResponse, governor: Governor, a: Admission, then: (v: Admitted | Refused) => void): void {
    const v = governor.admit(a, Date.now());
    if (v.ok !== 'wait') return then(v);
    // A lease is on its way. Other requests may take it first: ask again, waiting again if
    // need be, and let the team's policy decide only when waiting no longer helps.
    const rec = req.sl!;
    let rounds = 0;
    const again = (): void => {
      if (rec.aborted) return;
      try {
        const w = governor.admit(a, Date.now(), ++rounds < 64);
        if (w.ok !== 'wait') return then(w);
        w.ready.then(again, again);
      } catch (e) {
        failed(req, res, e);
      }
    };
    v.ready.then(again, again);
  }

  function routeStage(req: ProxyCall, res: ServerResponse, api: ClientApi, dialect: Dialect, body: Record<string, unknown>, raw: Buffer, ctl: RequestControls | null, input: LimitsInput | null): void {
    const rec = req.sl!;
    let route: PreparedRoute;
    if (api === 'response' && rec.model === '') {
      const stored = core.storedResponses;
      if (stored === null) return sendError(req, res, new GatewayError('unsupported_route', 'No route of this gateway sends requests to an OpenAI-API provider, so no provider keeps responses to read or delete.'));
      route = stored.route;
    } else {
      const match = core.router.match(rec.model);
      if (match === null) {
        const msg = `The model \`${rec.model}\` is not served by this gateway: no route matches it.`;
        return sendError(req, res, new GatewayError('model_not_found', msg, 'model'));
      }
      route = core.routes.get(match.route)!;
    }
    let order = targetOrder(route, Math.random());
    if (api !== 'chat' && api !== 'messages' && api !== 'responses') {
      // Endpoints only one API has: embeddings and stored responses are OpenAI's, token
      // counting Anthropic's (an OpenAI-API route gets the gateway's estimate instead).
      const want = api === 'count_tokens' ? 'anthropic' : 'openai';
      const able = order.every((t) => t.upstream.dialect === want) ? order : order.filter((t) => t.upstream.dialect === want);
      if (able.length === 0) {
        if (api === 'count_tokens') {
          rec.tRouted = now();
          return answerEstimate(req, res, body, ctl);
        }
        const names = order.map((t) => t.upstream.config.name).join(', ');
        const what = api === 'embeddings' ? 'has no embeddings endpoint' : 'keeps no responses to read or delete';
        const model = rec.model === '' ? 'the default route' : `the model \`${rec.model}\``;
        return sendError(req, res, new GatewayError('unsupported_route', `This gateway sends ${model} to provider ${names} (Anthropic Messages API), which ${what}.`, rec.model === '' ? null : 'model'));
      }
      order = able;
    }
    rec.tRouted = now();

    // cache: a repeated request is answered from memory; a miss's answer is kept for the next.
    // Not for stored responses: reading one must see it deleted.
    let fill: CacheFill | null = null;
    const cache = core.cache;
    if (route.config.cacheTtlMs > 0 && cache !== null && api !== 'response') {
      const directives = cacheDirectives(req.headers);
      const first = order[0]!;
      const key = requestCacheKey(rec.team, dialect, rec.route, first.upstream.config.name, first.model ?? rec.model, rec.stream, raw, req.headers);
      const hit = directives.noCache ? null : cache.get(key, Date.now());
      rec.tCache = now();
      if (hit !== null) return serveCached(rec, res, hit, first, ctl);
      if (!directives.noStore) fill = new CacheFill(cache, key, route.config.cacheTtlMs, cacheMaxEntry);
      res.setHeader('x-sightline-cache', 'miss');
    }

    // budget: the request's upper-bound cost reserved from the key's and the team's budgets
    // (embeddings: input only; token counts and stored responses cost nothing and reserve nothing).
    if (ctl !== null && input !== null && (input.keyBudget !== null || input.teamBudget !== null) && spends(api)) {
      return admitThen(req, res, core.governor!, budgetAdmission(input, core.priceOf(rec.model)), (v) => {
        if (v.ok === false) return sendError(req, res, refusalError(v));
        ctl.budget = v.ticket;
        rec.tBudget = now();
        upstreamStage(req, res, api, dialect, body, raw, route, order, fill, ctl);
      });
    }
    upstreamStage(req, res, api, dialect, body, raw, route, order, fill, ctl);
  }

  function upstreamStage(req: ProxyCall, res: ServerResponse, api: ClientApi, dialect: Dialect, body: Record<string, unknown>, raw: Buffer, route: PreparedRoute, order: Target[], fill: CacheFill | null, ctl: RequestControls | null): void {
    const rec = req.sl!;
    // translate.request and the upstream attempts
    const traceparent = `00-${rec.traceId}-${rec.rootSpanId}-01`;
    const headers = req.headers;
    const maxTokens = ctl !== null && ctl.injectMaxTokens ? ctl.maxOutput : 0;
    let prepare: (target: Target) => PreparedRequest;
    if (api === 'chat' || api === 'messages') prepare = (target) => prepareFor(target, dialect, body, raw, headers, traceparent, rec, maxTokens);
    else {
      const stored = api === 'response' ? storedTarget(req) : null;
      prepare = (target) => prepareApi(target, api, body, raw, headers, traceparent, rec, maxTokens, stored);
    }
    if (ctl !== null && ctl.headers !== null) for (const h in ctl.headers) res.setHeader(h, ctl.headers[h]!);
    const ex = new Exchange(rec, res as ClientResponse, route, order, prepare, (err) => failRaw(core.logger, rec, res, err, contentMax), core.limits);
    ex.cacheFill = fill;
    ex.ownRateLimitHeaders = ctl !== null && ctl.headers !== null;
    req.exchange = ex;
    ex.start();
  }

  /**
   * `POST /v1/messages/count_tokens` for a route without an Anthropic provider: the gateway's
   * estimate (count-tokens.ts), flagged by `x-sightline-token-count: estimate`. Nothing goes
   * upstream: the upstream stages are marked absent (-1, as the optional stages are), and
   * computing the answer is the `translate.request` stage.
   */
  function answerEstimate(req: ProxyCall, res: ServerResponse, body: Record<string, unknown>, ctl: RequestControls | null): void {
    const rec = req.sl!;
    const out = `{"input_tokens":${estimateInputTokens(body)}}`;
    rec.tBuilt = now();
    rec.tSent = -1;
    rec.tFirstByte = -1;
    rec.tLastByte = -1;
    if (ctl !== null && ctl.headers !== null) for (const h in ctl.headers) res.setHeader(h, ctl.headers[h]!);
    rec.status = 200;
    rec.responseBytes = out.length;
    keepContent(rec, out, contentMax);
    rec.tFirstWrite = now();
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': out.length, 'x-sightline-token-count': 'estimate' });
    rec.tEnd = now();
    res.end(out);
  }

  /**
   * `GET /v1/models` (id null) and `GET /v1/models/{id}`: the catalogue (models.ts) as the
   * caller's key may see it, in Anthropic's shape for a client that sends `anthropic-version`,
   * else in OpenAI's. Served from memory; not captured.
   */
  function serveModels(req: FastifyRequest, reply: FastifyReply, id: string | null): void {
    const dialect: Dialect = one(req.headers['anthropic-version']) !== undefined ? 'anthropic' : 'openai';
    let key: KeyRecord | null = null;
    if (directory !== null) {
      // Listing models is a gateway request too: it takes a key, and shows what the key may use.
      const check = directory.check(callerKey(req.headers), 'gateway', Date.now());
      if (!check.ok) {
        const err = new GatewayError(check.reason === 'scope' ? 'permission_denied' : 'invalid_api_key', check.message);
        void reply.code(err.status).headers(JSON_HEADERS).send(errorBody(err, dialect));
        return;
      }
      key = check.key;
    }
    const visible = (m: ListedModel): boolean => key === null || directory!.modelAllowed(key, m.id);
    if (id !== null) {
      const m = core.models.lookup(id);
      if (m === null || !visible(m)) {
        const err = new GatewayError('model_not_found', `The model \`${id}\` does not exist or you do not have access to it.`, 'model');
        void reply.code(err.status).headers(JSON_HEADERS).send(errorBody(err, dialect));
        return;
      }
      void reply.code(200).headers(JSON_HEADERS).send(JSON.stringify(dialect === 'anthropic' ? anthropicModel(m) : openaiModel(m)));
      return;
    }
    const list = key === null ? core.models.list() : core.models.list().filter(visible);
    let out: unknown;
    if (dialect === 'anthropic') {
      const data = list.map(anthropicModel);
      out = { data, has_more: false, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null };
    } else out = { object: 'list', data: list.map(openaiModel) };
    void reply.code(200).headers(JSON_HEADERS).send(JSON.stringify(out));
  }

  /** A cache hit: the stored answer, byte for byte, with nothing sent upstream and no tokens spent. */
  function serveCached(rec: RequestRecord, res: ServerResponse, hit: CachedResponse, target: Target, ctl: RequestControls | null): void {
    if (ctl !== null && ctl.headers !== null) for (const h in ctl.headers) res.setHeader(h, ctl.headers[h]!);
    rec.cacheHit = true;
    rec.status = hit.status;
    rec.provider = target.upstream.config.name;
    rec.upstreamModel = target.model ?? rec.model;
    rec.responseBytes = hit.body.length;
    keepContent(rec, hit.body, contentMax);
    rec.tFirstWrite = now();
    res.writeHead(hit.status, { ...hit.headers, 'content-length': hit.body.length, 'x-sightline-cache': 'hit' });
    rec.tEnd = now();
    res.end(hit.body);
  }

  /** The error's body in the request's dialect, with the error noted in its record. */
  function noteError(req: ProxyCall, err: GatewayError): string {
    const rec = req.sl;
    const dialect = rec?.dialect ?? dialectOfUrl(req.raw.url ?? '');
    if (rec !== null) recordError(rec, err);
    const out = errorBody(err, dialect);
    if (rec !== null) keepContent(rec, out, contentMax);
    return out;
  }

  /** A proxy route's error, on the raw response. */
  function sendError(req: ProxyCall, res: ServerResponse, err: GatewayError): void {
    const out = noteError(req, err);
    const headers: OutgoingHttpHeaders = {};
    const ctl = req.controls;
    if (ctl !== null && ctl.headers !== null) Object.assign(headers, ctl.headers);
    const extra = errorHeaders(err);
    if (extra !== null) Object.assign(headers, extra);
    headers['content-type'] = 'application/json';
    headers['content-length'] = Buffer.byteLength(out);
    res.writeHead(err.status, headers);
    res.end(out);
  }

  /** An error fastify met before a route ran (body limit, media type, no route), through its reply. */
  function replyError(req: FastifyRequest, reply: FastifyReply, err: GatewayError): void {
    const out = noteError(req, err);
    const ctl = req.controls;
    if (ctl !== null && ctl.headers !== null) void reply.headers(ctl.headers);
    const extra = errorHeaders(err);
    if (extra !== null) void reply.headers(extra);
    reply.code(err.status).headers(JSON_HEADERS).send(out);
  }
}

/**
 * A request as the proxy routes read it: fastify's request, or the fast path's FastCall.
 * FastifyRequest has all of it (with the decorations above).
 */
interface ProxyCall {
  sl: RequestRecord | null;
  exchange: Exchange | null;
  controls: RequestControls | null;
  readonly raw: IncomingMessage;
  readonly headers: IncomingHttpHeaders;
  readonly body: unknown;
  readonly method: string;
  readonly query: unknown;
  readonly params: unknown;
}

/** The fast path's paths (exactly, without a query string) and their APIs. */
const FAST_ROUTES = new Map<string, ClientApi>([
  ['/v1/chat/completions', 'chat'],
  ['/v1/messages', 'messages'],
  ['/v1/responses', 'responses'],
  ['/v1/embeddings', 'embeddings'],
  ['/v1/messages/count_tokens', 'count_tokens'],
]);

const NO_PARAMS: Readonly<Record<string, never>> = Object.freeze({});

/** The request of the fast path (buildGateway's fastPath). */
class FastCall implements ProxyCall {
  sl: RequestRecord | null = null;
  exchange: Exchange | null = null;
  controls: RequestControls | null = null;
  body: Buffer | null = null;
  readonly headers: IncomingHttpHeaders;
  readonly method = 'POST';
  // Only stored responses (`GET`, `DELETE`: never the fast path) read these.
  readonly query = NO_PARAMS;
  readonly params = NO_PARAMS;
  constructor(readonly raw: IncomingMessage) {
    this.headers = raw.headers;
  }
}

function noop(): void {}

const ATTR_MAX = 256;
const TAG_PREFIX = 'x-sightline-tag-';
const TAGS_MAX = 16;

/**
 * Attribution (issue 11): the end user the caller names in the body (OpenAI `user` or
 * `safety_identifier`, Anthropic `metadata.user_id`), the session and tags from its headers.
 * Bounded: 256 characters a value, 16 tags, names of 64.
 */
function attribute(rec: RequestRecord, body: Record<string, unknown>, headers: IncomingHttpHeaders): void {
  let user: unknown = body.user ?? body.safety_identifier;
  if (user === undefined && rec.dialect === 'anthropic') {
    const md = body.metadata;
    if (typeof md === 'object' && md !== null) user = (md as { user_id?: unknown }).user_id;
  }
  if (typeof user === 'string') rec.endUser = user.length > ATTR_MAX ? user.slice(0, ATTR_MAX) : user;
  const session = one(headers['x-sightline-session-id']);
  if (session !== undefined) rec.sessionId = session.length > ATTR_MAX ? session.slice(0, ATTR_MAX) : session;
  for (const name in headers) {
    if (name.length <= TAG_PREFIX.length || !name.startsWith(TAG_PREFIX)) continue;
    const value = one(headers[name]);
    if (value === undefined) continue;
    if (rec.tagKeys === null) {
      rec.tagKeys = [];
      rec.tagValues = [];
    }
    if (rec.tagKeys.length >= TAGS_MAX) break;
    rec.tagKeys.push(name.slice(TAG_PREFIX.length, TAG_PREFIX.length + 64));
    rec.tagValues!.push(value.length > ATTR_MAX ? value.slice(0, ATTR_MAX) : value);
  }
}

/**
 * Logs a failure of the gateway's own: what failed and where, never the request body or a
 * header (they may hold prompts and keys).
 */
function reportInternal(logger: GatewayLogger, rec: RequestRecord | null, method: string, err: GatewayError): void {
  const cause = err.cause instanceof Error ? err.cause : err;
  logger.error(
    { err: { type: cause.name, message: cause.message, stack: cause.stack }, method, route: rec?.route ?? null, trace_id: rec?.traceId ?? null, model: rec?.model ?? null },
    err.message,
  );
}

/**
 * Corrects the request's reservations to what it used (controls.ts): nothing for a cache hit
 * or a request that never went upstream; its tokens and their cost otherwise; for an answer
 * whose usage could not be read, the reservation is charged in full (cost null).
 */
function settleControls(core: GatewayCore, rec: RequestRecord, ctl: RequestControls): void {
  const governor = core.governor;
  if (governor === null) return;
  let tokens = 0;
  let cost: number | null = 0;
  if (!rec.cacheHit && rec.tSent > 0) {
    const u = recordUsage(rec);
    tokens = u.inputTokens + u.outputTokens;
    if (u.found || u.outputTokens > 0) cost = costUsd(core.priceOf(rec.model), u.inputTokens, u.outputTokens, u.cacheReadTokens, u.cacheWriteTokens);
    else if (rec.upstreamStatus < 400) cost = null;
  }
  const nowMs = Date.now();
  if (ctl.limits !== null) governor.settle(ctl.limits, { tokens, costUsd: 0 }, nowMs);
  if (ctl.budget !== null) governor.settle(ctl.budget, { tokens, costUsd: cost }, nowMs);
}

/** A model in OpenAI's shape (https://platform.openai.com/docs/api-reference/models/object). */
function openaiModel(m: ListedModel): { id: string; object: 'model'; created: number; owned_by: string } {
  const created = m.created > 0 ? m.created : m.createdAt !== '' ? Math.max(0, Math.floor(Date.parse(m.createdAt) / 1000) || 0) : 0;
  return { id: m.id, object: 'model', created, owned_by: m.ownedBy };
}

/** A model in Anthropic's shape (https://docs.anthropic.com/en/api/models). */
function anthropicModel(m: ListedModel): { type: 'model'; id: string; display_name: string; created_at: string } {
  const createdAt = m.createdAt !== '' ? m.createdAt : new Date(m.created * 1000).toISOString().replace('.000Z', 'Z');
  return { type: 'model', id: m.id, display_name: m.displayName !== '' ? m.displayName : m.id, created_at: createdAt };
}

/** Where a stored-response request goes: its id, and the client's query string without `model` (the gateway's). */
interface StoredTarget {
  id: string;
  query: string;
}

function storedTarget(req: ProxyCall): StoredTarget {
  const id = (req.params as { id: string }).id;
  const url = req.raw.url ?? '';
  const q = url.indexOf('?');
  if (q === -1) return { id, query: '' };
  const params = new URLSearchParams(url.slice(q + 1));
  params.delete('model');
  return { id, query: params.toString() };
}

/** JSON object bytes with `"field":value,` inserted as its first member (the object is not empty). */
export function withFirstField(raw: Buffer, field: string, value: number): Buffer {
  const open = raw.indexOf(0x7b /* { */);
  if (open === -1) return raw;
  return Buffer.concat([raw.subarray(0, open + 1), Buffer.from(`"${field}":${value},`), raw.subarray(open + 1)]);
}

/** The caller's key: `Authorization: Bearer …` (OpenAI SDKs) or `x-api-key` (Anthropic SDKs). */
function callerKey(headers: IncomingHttpHeaders): string {
  const auth = headers.authorization;
  if (auth !== undefined && auth.length > 7 && (auth.startsWith('Bearer ') || auth.slice(0, 7).toLowerCase() === 'bearer ')) return trimmed(auth.slice(7));
  const x = one(headers['x-api-key']);
  return x === undefined ? '' : trimmed(x);
}

/** The value without surrounding spaces; the value itself (no new string) when it has none, as keys do. */
function trimmed(s: string): string {
  return s.length > 0 && s.charCodeAt(0) > 0x20 && s.charCodeAt(s.length - 1) > 0x20 ? s : s.trim();
}

/** The error in the request's record: its status and code, the failed stage, and the answer's end. */
function recordError(rec: RequestRecord, err: GatewayError): void {
  rec.status = err.status;
  rec.errorType = err.code;
  rec.errorMessage = err.message;
  if (rec.failedStage === null) rec.failedStage = err.stage;
  rec.tEnd = now();
  if (rec.tFirstWrite === 0) rec.tFirstWrite = rec.tEnd;
}

function failRaw(logger: GatewayLogger, rec: RequestRecord, res: ClientResponse, err: GatewayError, contentMax: number): void {
  if (err.code === 'internal_error') reportInternal(logger, rec, rec.method, err);
  recordError(rec, err);
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = errorBody(err, rec.dialect);
  keepContent(rec, body, contentMax);
  res.writeHead(err.status, { ...errorHeaders(err), 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/**
 * Builds the upstream request for one target. Same dialect: the client's bytes as they
 * came (re-encoded only to rename the model or to ask an OpenAI stream for usage).
 * Other dialect: translated (packages/translate), with a relay that translates back.
 */
function prepareFor(
  target: Target,
  dialect: Dialect,
  body: Record<string, unknown>,
  raw: Buffer,
  clientHeaders: IncomingHttpHeaders,
  traceparent: string,
  rec: RequestRecord,
  maxTokens: number,
): PreparedRequest {
  const up = target.upstream;
  if (maxTokens > 0 && dialect === 'openai') {
    // A budget or token limit needs an output bound the client did not set (controls.ts):
    // inject it, in the field this provider reads.
    const field = up.dialect === 'anthropic' || up.config.type === 'openai-compatible' ? 'max_tokens' : 'max_completion_tokens';
    body = { ...body, [field]: maxTokens };
    raw = withFirstField(raw, field, maxTokens);
  }
  const upstreamModel = target.model ?? rec.model;
  const path = up.path(upstreamModel);
  const headers = up.headers(clientHeaders, dialect, traceparent);
  if (up.dialect === dialect) {
    // Azure takes the deployment from the path; the body's model is left as the client sent it.
    const rename = upstreamModel !== rec.model && up.config.type !== 'azure';
    if (dialect === 'openai' && rec.stream && !clientRequestedUsage(body)) {
      // Usage is captured for every stream: ask for it, and take the extra chunk out again.
      // Without a model to rename or stream_options to merge into, the option is spliced
      // into the client's bytes rather than re-serialising the request.
      const relay: RelayPlan = { api: dialect === 'openai' ? 'chat' : 'messages', client: dialect, sameDialect: true, stream: true, stripUsage: true, includeUsage: false, responseModel: upstreamModel, request: null };
      const spliced = rename || 'stream_options' in body ? null : withStreamUsageBytes(raw);
      if (spliced !== null) return { method: 'POST', path, headers, body: spliced, relay, upstreamModel };
      const { request } = withStreamUsage(body);
      const out = rename ? { ...request, model: upstreamModel } : request;
      return { method: 'POST', path, headers, body: Buffer.from(JSON.stringify(out)), relay, upstreamModel };
    }
    const out = rename ? Buffer.from(JSON.stringify({ ...body, model: upstreamModel })) : raw;
    return { method: 'POST', path, headers, body: out, relay: { api: dialect === 'openai' ? 'chat' : 'messages', client: dialect, sameDialect: true, stream: rec.stream, stripUsage: false, includeUsage: false, responseModel: upstreamModel, request: null }, upstreamModel };
  }
  let translated: unknown;
  try {
    translated =
      dialect === 'openai'
        ? openaiRequestToAnthropic(body as unknown as OpenAIChatRequest, { model: upstreamModel })
        : anthropicRequestToOpenAI(body as unknown as AnthropicMessagesRequest, { model: upstreamModel });
  } catch (e) {
    if (isTranslationError(e)) throw new GatewayError('translation_failed', e.message, e.param, { cause: e });
    throw e;
  }
  const relay: RelayPlan = { api: dialect === 'openai' ? 'chat' : 'messages', client: dialect, sameDialect: false, stream: rec.stream, stripUsage: false, includeUsage: dialect === 'openai' && clientRequestedUsage(body), responseModel: upstreamModel, request: null };
  return { method: 'POST', path, headers, body: Buffer.from(JSON.stringify(translated)), relay, upstreamModel };
}

/**
 * Builds the upstream request of the endpoints besides chat and messages (docs/api.md), for
 * a target the route stage kept for it (routeStage: embeddings and stored responses go to
 * OpenAI-API providers, token counts to Anthropic ones):
 * - `responses`: the client's bytes to an OpenAI-API provider (re-encoded only to rename the
 *   model or to add an output bound); translated to the Messages API for an Anthropic one.
 * - `embeddings`, `count_tokens`: the client's bytes (the model renamed if the route says so;
 *   Azure's embeddings deployment is in the path).
 * - `response`: `GET` or `DELETE` of the stored response, with the client's query string.
 */
function prepareApi(
  target: Target,
  api: ClientApi,
  body: Record<string, unknown>,
  raw: Buffer,
  clientHeaders: IncomingHttpHeaders,
  traceparent: string,
  rec: RequestRecord,
  maxTokens: number,
  stored: StoredTarget | null,
): PreparedRequest {
  const up = target.upstream;
  const upstreamModel = target.model ?? rec.model;
  const client = dialectOfApi(api);
  const headers = up.headers(clientHeaders, client, traceparent);
  const same = (responseModel: string): RelayPlan => ({ api, client, sameDialect: true, stream: rec.stream, stripUsage: false, includeUsage: false, responseModel, request: null });
  const renamed = (): Buffer => (upstreamModel !== rec.model ? Buffer.from(JSON.stringify({ ...body, model: upstreamModel })) : raw);
  switch (api) {
    case 'response': {
      const method = rec.method === 'DELETE' ? 'DELETE' : 'GET';
      return { method, path: up.apiPath('response', upstreamModel, stored?.id ?? '', stored?.query ?? ''), headers, body: null, relay: same(upstreamModel), upstreamModel };
    }
    case 'embeddings': {
      // Azure takes the deployment from the path; the body's model is left as the client sent it.
      const out = up.config.type === 'azure' ? raw : renamed();
      return { method: 'POST', path: up.apiPath('embeddings', upstreamModel), headers, body: out, relay: same(upstreamModel), upstreamModel };
    }
    case 'count_tokens':
      return { method: 'POST', path: up.apiPath('count_tokens', upstreamModel), headers, body: renamed(), relay: same(upstreamModel), upstreamModel };
    default:
      break;
  }
  // responses
  if (maxTokens > 0) {
    // A budget or token limit needs an output bound the client did not set (controls.ts).
    body = { ...body, max_output_tokens: maxTokens };
    raw = withFirstField(raw, 'max_output_tokens', maxTokens);
  }
  if (up.dialect === 'openai') {
    // Azure's Responses API takes the deployment as the body's model, so it is renamed too.
    const out = upstreamModel !== rec.model ? Buffer.from(JSON.stringify({ ...body, model: upstreamModel })) : raw;
    return { method: 'POST', path: up.apiPath('responses', upstreamModel), headers, body: out, relay: same(upstreamModel), upstreamModel };
  }
  const request = body as unknown as ResponsesRequest;
  let translated: unknown;
  try {
    translated = responsesRequestToAnthropic(request, { model: upstreamModel });
  } catch (e) {
    if (isTranslationError(e)) throw new GatewayError('translation_failed', e.message, e.param, { cause: e });
    throw e;
  }
  const relay: RelayPlan = { api, client, sameDialect: false, stream: rec.stream, stripUsage: false, includeUsage: false, responseModel: upstreamModel, request };
  return { method: 'POST', path: up.path(upstreamModel), headers, body: Buffer.from(JSON.stringify(translated)), relay, upstreamModel };
}
