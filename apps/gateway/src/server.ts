/**
 * The gateway's HTTP server: fastify in front, undici behind.
 *
 * Per request: one RequestRecord (fixed shape, declared up front with
 * decorateRequest), one close listener that hands it to capture once the response is
 * over, and stage marks written as numbers. Routes, headers and pools are prepared at
 * start-up. Capture never runs before the response is complete.
 */
import type { IncomingMessage, ServerResponse, OutgoingHttpHeaders } from 'node:http';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Pool } from 'undici';
import { now, newTraceId, newSpanId, parseTraceparent } from '@sightline/core';
import { RequestRecord, type Capture, type Dialect } from '@sightline/capture';
import { Router, type Config, type ProviderConfig } from '@sightline/config';
import { GatewayError, errorBody } from './errors.js';
import { createPool, UpstreamCall } from './upstream.js';
import { Metrics } from './metrics.js';

declare module 'fastify' {
  interface FastifyRequest {
    sl: RequestRecord | null;
    call: UpstreamCall | null;
  }
}

export interface GatewayOptions {
  config: Config;
  /** Where finished requests go; null only with the benchmark capture-off switch. */
  capture: Capture | null;
  /** Identifies this gateway process in captured data. */
  instance: string;
}

interface Upstream {
  provider: ProviderConfig;
  pool: Pool;
  chatPath: string;
  /** Headers sent with every request to this provider, built once. */
  headers: Record<string, string>;
}

/** Client request headers forwarded to OpenAI-compatible providers. */
const FORWARD_OPENAI = ['openai-organization', 'openai-project', 'openai-beta'] as const;

const JSON_HEADERS: OutgoingHttpHeaders = { 'content-type': 'application/json' };

export function buildGateway(opts: GatewayOptions): FastifyInstance {
  const { config, capture, instance } = opts;
  const router = new Router(config.routes);
  const metrics = new Metrics(capture);
  const upstreams = new Map<string, Upstream>();
  for (const p of config.providers.values()) {
    const headers: Record<string, string> = { 'content-type': 'application/json', ...p.headers };
    if (p.apiKey !== '') {
      if (p.type === 'anthropic') headers['x-api-key'] = p.apiKey;
      else headers.authorization = `Bearer ${p.apiKey}`;
    }
    upstreams.set(p.name, { provider: p, pool: createPool(p), chatPath: `${p.basePath}/chat/completions`, headers });
  }
  const teamHeader = config.gateway.teamHeader;
  let seq = 0;

  const app = Fastify({
    logger: false,
    bodyLimit: config.gateway.bodyLimitBytes,
    keepAliveTimeout: 72_000,
    requestIdHeader: false,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
  });
  app.decorateRequest('sl', null);
  app.decorateRequest('call', null);

  app.addHook('onRequest', (req, reply, done) => {
    const url = req.raw.url ?? '';
    if (!url.startsWith('/v1/')) return done();
    const rec = new RequestRecord();
    rec.t0 = now();
    rec.seq = ++seq;
    rec.method = req.raw.method ?? '';
    rec.route = url.length > 200 ? url.slice(0, 200) : url.split('?', 1)[0]!;
    const tp = parseTraceparent(headerValue(req.raw, 'traceparent'));
    if (tp !== null) {
      rec.traceId = tp.traceId;
      rec.parentSpanId = tp.parentSpanId;
    } else {
      rec.traceId = newTraceId();
    }
    rec.rootSpanId = newSpanId();
    req.sl = rec;
    const res = reply.raw;
    res.setHeader('x-sightline-trace-id', rec.traceId);
    res.once('close', () => {
      rec.tFinish = now();
      if (!res.writableFinished) {
        rec.aborted = true;
        if (rec.status === 0) rec.status = 499;
        const call = req.call;
        if (call !== null) call.abort('client closed the connection');
      }
      metrics.observe(rec);
      if (capture !== null) capture.record(rec);
    });
    done();
  });

  // Bodies are read as bytes: same-dialect traffic is forwarded as it came, and JSON is
  // parsed by the route so that a parse failure is the `parse` stage's, in OpenAI's shape.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (req, body, done) => {
    const rec = req.sl;
    if (rec !== null) {
      rec.tBody = now();
      rec.requestBytes = (body as Buffer).length;
    }
    done(null, body);
  });

  app.setErrorHandler((err: Error & { code?: string; statusCode?: number }, req, reply) => {
    let ge: GatewayError;
    if (err instanceof GatewayError) ge = err;
    else if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') ge = new GatewayError('body_too_large', `request body is larger than the limit of ${config.gateway.bodyLimitBytes} bytes`);
    else if (err.statusCode === 415) ge = new GatewayError('unsupported_media_type', err.message);
    else if (err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500) ge = new GatewayError('invalid_request', err.message);
    else ge = new GatewayError('internal_error', 'internal error in the gateway', null, { cause: err });
    sendError(req, reply, ge, 'openai');
  });

  app.setNotFoundHandler((req, reply) => {
    sendError(req, reply, new GatewayError('route_not_found', `no route for ${req.method} ${(req.raw.url ?? '').split('?', 1)[0]}`), 'openai');
  });

  app.get('/healthz', async () => ({ ok: true, instance }));
  app.get('/metrics', async (_req, reply) => {
    reply.header('content-type', 'text/plain; version=0.0.4');
    return metrics.render();
  });

  app.post('/v1/chat/completions', (req, reply) => {
    const rec = req.sl!;
    rec.dialect = 'openai';
    const raw = req.body as Buffer | undefined;
    if (rec.tBody === 0) rec.tBody = now(); // no body at all

    // parse
    let body: Record<string, unknown>;
    try {
      body = parseChatBody(raw);
    } catch (e) {
      return sendError(req, reply, e as GatewayError, 'openai');
    }
    rec.model = body.model as string;
    rec.stream = body.stream === true;
    rec.tParsed = now();

    // auth: the caller's team; upstream credentials are the provider's or the caller's.
    const team = headerValue(req.raw, teamHeader);
    rec.team = team === undefined || team === '' ? 'default' : team.length > 128 ? team.slice(0, 128) : team;
    rec.tAuth = now();

    // route
    const match = router.match(rec.model);
    if (match === null) {
      return sendError(req, reply, new GatewayError('model_not_found', `The model \`${rec.model}\` is not served by this gateway: no route matches it.`, 'model'), 'openai');
    }
    const up = upstreams.get(match.provider.name)!;
    rec.provider = up.provider.name;
    rec.upstreamModel = match.upstreamModel;
    rec.upstreamHost = up.provider.origin;
    if (up.provider.type === 'anthropic') {
      return sendError(
        req,
        reply,
        new GatewayError('unsupported_route', `The model \`${rec.model}\` routes to the Anthropic provider "${up.provider.name}"; translating OpenAI requests to Anthropic is not available yet.`, 'model'),
        'openai',
      );
    }
    rec.tRouted = now();

    // translate.request: same dialect, so the body goes as it came unless the model is renamed.
    let upstreamBody: Buffer = raw!;
    if (match.upstreamModel !== rec.model) {
      body.model = match.upstreamModel;
      upstreamBody = Buffer.from(JSON.stringify(body));
    }
    const headers: Record<string, string> = { ...up.headers, traceparent: `00-${rec.traceId}-${rec.rootSpanId}-01` };
    if (up.provider.apiKey === '') {
      const auth = headerValue(req.raw, 'authorization');
      if (auth !== undefined) headers.authorization = auth;
    }
    for (const h of FORWARD_OPENAI) {
      const v = headerValue(req.raw, h);
      if (v !== undefined) headers[h] = v;
    }
    rec.tBuilt = now();

    reply.hijack();
    const call = new UpstreamCall(rec, reply.raw, {}, failUpstream);
    req.call = call;
    up.pool.dispatch(
      {
        path: up.chatPath,
        method: 'POST',
        headers,
        body: upstreamBody,
      },
      call,
    );
  });

  app.addHook('onClose', async () => {
    await Promise.all([...upstreams.values()].map((u) => u.pool.close()));
  });

  return app;

  function sendError(req: FastifyRequest, reply: FastifyReply, err: GatewayError, dialect: Dialect): void {
    const rec = req.sl;
    if (rec !== null) {
      rec.status = err.status;
      rec.errorType = err.code;
      rec.errorMessage = err.message;
      if (rec.failedStage === null) rec.failedStage = err.stage;
      rec.tEnd = now();
      if (rec.tFirstWrite === 0) rec.tFirstWrite = rec.tEnd;
    }
    reply.code(err.status).headers(JSON_HEADERS).send(errorBody(err, dialect));
  }

  function failUpstream(rec: RequestRecord, res: ServerResponse, err: GatewayError): void {
    rec.status = err.status;
    rec.errorType = err.code;
    rec.errorMessage = err.message;
    if (rec.failedStage === null) rec.failedStage = err.stage;
    rec.tEnd = now();
    if (rec.tFirstWrite === 0) rec.tFirstWrite = rec.tEnd;
    if (res.headersSent || res.destroyed) return;
    const body = errorBody(err, rec.dialect);
    res.writeHead(err.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  }
}

function headerValue(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** Validates the parts of a chat completion request the gateway relies on. */
function parseChatBody(raw: Buffer | undefined): Record<string, unknown> {
  if (raw === undefined || raw.length === 0) {
    throw new GatewayError('invalid_json', 'The request body is empty; send a JSON object with `model` and `messages`.');
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw.toString('utf8'));
  } catch (e) {
    throw new GatewayError('invalid_json', `The request body is not valid JSON: ${(e as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new GatewayError('invalid_request', 'The request body must be a JSON object.');
  }
  const body = parsed as Record<string, unknown>;
  if (body.model === undefined) throw new GatewayError('invalid_request', 'Missing required parameter: `model`.', 'model');
  if (typeof body.model !== 'string' || body.model === '') throw new GatewayError('invalid_request', '`model` must be a non-empty string.', 'model');
  if (body.messages === undefined) throw new GatewayError('invalid_request', 'Missing required parameter: `messages`.', 'messages');
  if (!Array.isArray(body.messages)) throw new GatewayError('invalid_request', '`messages` must be an array.', 'messages');
  if (body.stream !== undefined && typeof body.stream !== 'boolean') throw new GatewayError('invalid_request', '`stream` must be a boolean.', 'stream');
  return body;
}
