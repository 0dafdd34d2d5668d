/**
 * Who calls the query API, and which team's rows they may read.
 *
 * With authentication on (SIGHTLINE_ADMIN_TOKEN set), every request but `/healthz`,
 * `/metrics`, `/openapi.json` and the dashboard's static files (`/` and `/ui/…`: the page
 * holds no data; it signs in and then calls this API with the key, like any client)
 * carries the admin token or a Sightline key with the `read`
 * scope, as `Authorization: Bearer …` (or `x-api-key`). A team key reads its own team's rows
 * only, whatever it asks for; the admin token reads every team's. Off (no admin token): the
 * API answers everyone as the admin, and listens on loopback only (docs/api.md).
 *
 * Keys never travel in query strings (they end up in access logs and browser history): a
 * request with a key-shaped or token-bearing query parameter is refused before anything runs.
 */
import type { FastifyRequest } from 'fastify';
import { looksLikeKey, sameSecret, type Directory, type KeyRecord, type Scope } from '@sightline/directory';
import { QueryError } from './errors.js';

export interface QueryAuth {
  adminToken: string;
  directory: Directory;
}

export type Caller = { kind: 'admin' } | { kind: 'key'; key: KeyRecord };

const ADMIN: Caller = { kind: 'admin' };

declare module 'fastify' {
  interface FastifyRequest {
    caller: Caller | null;
  }
}

/** Paths anyone may read: health, metrics and the API description. */
const PUBLIC = new Set(['/healthz', '/metrics', '/openapi.json']);
const SECRET_PARAMS = /^(api[_-]?key|key|token|access[_-]?token|authorization)$/i;

function bearer(req: FastifyRequest): string {
  const h = req.headers.authorization;
  if (typeof h === 'string' && h.length > 7 && h.slice(0, 7).toLowerCase() === 'bearer ') return h.slice(7).trim();
  const x = req.headers['x-api-key'];
  return typeof x === 'string' ? x.trim() : '';
}

function refuseSecretsInQuery(req: FastifyRequest, auth: QueryAuth | null): void {
  const url = req.raw.url ?? '';
  const q = url.indexOf('?');
  if (q === -1) return;
  for (const [name, value] of new URLSearchParams(url.slice(q + 1))) {
    // `key` is also the key-id filter of GET /v1/requests; only a secret-shaped value is refused there.
    const secretName = SECRET_PARAMS.test(name) && name !== 'key';
    if (secretName || looksLikeKey(value) || (auth !== null && value.length >= 16 && sameSecret(value, auth.adminToken))) {
      throw new QueryError('bad_parameter', `credentials are not accepted in the query string (parameter \`${name.slice(0, 32)}\`); send them as \`Authorization: Bearer …\``, { field: name.slice(0, 32) });
    }
  }
}

/**
 * Resolves the caller of a request (fastify onRequest). Throws 401 without valid
 * credentials, 403 for a key without the scope the API needs.
 */
export function authenticate(req: FastifyRequest, auth: QueryAuth | null, nowMs: number): Caller | null {
  const path = (req.raw.url ?? '').split('?', 1)[0]!;
  refuseSecretsInQuery(req, auth);
  if (PUBLIC.has(path) || path === '/' || path.startsWith('/ui/')) return null;
  if (auth === null) return ADMIN;
  const token = bearer(req);
  if (token === '') throw new QueryError('unauthorized', 'this API needs a Sightline key with the `read` scope or the admin token, as `Authorization: Bearer …`');
  if (sameSecret(token, auth.adminToken)) return ADMIN;
  let check = auth.directory.check(token, 'read', nowMs);
  // A key asks what it has left with the key itself, whatever its scopes (GET /v1/budget).
  if (!check.ok && check.reason === 'scope' && path === '/v1/budget') check = auth.directory.check(token, 'gateway', nowMs);
  if (check.ok) return { kind: 'key', key: check.key };
  if (check.reason === 'scope') throw new QueryError('forbidden', check.message);
  throw new QueryError('unauthorized', check.message);
}

/**
 * The team whose rows a query may read: a key's own team (asking for another is a 403),
 * or, for the admin, the team asked for (null: every team).
 */
export function teamScope(caller: Caller | null, requested: string | null): string | null {
  if (caller === null || caller.kind === 'admin') return requested;
  if (requested !== null && requested !== caller.key.team) {
    throw new QueryError('forbidden', `this key belongs to team \`${caller.key.team}\` and cannot read team \`${requested.slice(0, 64)}\``, { field: 'team' });
  }
  return caller.key.team;
}

export function requireAdmin(caller: Caller | null, what: string): void {
  if (caller === null || caller.kind !== 'admin') throw new QueryError('forbidden', `${what} takes the admin token`);
}

/** Whether the caller may read content (prompts and completions). */
export function mayRead(caller: Caller | null, scope: Scope): boolean {
  return caller !== null && (caller.kind === 'admin' || caller.key.scopes.includes(scope));
}
