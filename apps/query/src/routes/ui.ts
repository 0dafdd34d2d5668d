/**
 * The dashboard (packages/dashboard, docs/dashboard.md): `GET /` is its page and
 * `GET /ui/*` its files, served from memory (read once at start). Anyone may load them
 * (auth.ts lets `/` and `/ui/` through): they hold no data, and every data call the page
 * makes carries the key or token the user signed in with.
 *
 * Not in the OpenAPI document (`hide`): they are a page, not part of the API.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { SECURITY_HEADERS, type Asset } from '@sightline/dashboard';
import { QueryError } from '../errors.js';

function acceptsGzip(req: FastifyRequest): boolean {
  const ae = req.headers['accept-encoding'];
  return typeof ae === 'string' && /\bgzip\b/.test(ae);
}

function send(req: FastifyRequest, reply: FastifyReply, a: Asset): FastifyReply {
  void reply.headers(SECURITY_HEADERS).header('content-type', a.contentType).header('etag', a.etag).header('vary', 'accept-encoding');
  // Revalidated on every load (a 304 costs a few bytes), so an upgrade is seen at once.
  void reply.header('cache-control', 'no-cache');
  const inm = req.headers['if-none-match'];
  if (typeof inm === 'string' && inm.split(',').some((t) => t.trim() === a.etag)) return reply.code(304).send();
  if (a.gzip !== null && acceptsGzip(req)) return reply.header('content-encoding', 'gzip').send(a.gzip);
  return reply.send(a.body);
}

export function registerUiRoutes(app: FastifyInstance, assets: ReadonlyMap<string, Asset>): void {
  const index = assets.get('index.html');
  if (index === undefined) throw new Error('the dashboard has no index.html');
  app.get('/', { schema: { hide: true } }, async (req, reply) => send(req, reply, index));
  app.get<{ Params: { '*': string } }>('/ui/*', { schema: { hide: true } }, async (req, reply) => {
    // Only the names in the map: `../`, encoded or not, names nothing.
    const a = assets.get(req.params['*']);
    if (a === undefined) throw new QueryError('not_found', `no dashboard file ${(req.raw.url ?? '').split('?', 1)[0]!.slice(0, 200)}`);
    return send(req, reply, a);
  });
}
