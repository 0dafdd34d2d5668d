/**
 * Key and team management (admin token only), JSON in and out (docs/api.md, "Keys and teams").
 * Writes go to the shared directory, which every gateway replica watches into memory.
 */
import type { FastifyInstance } from 'fastify';
import { checkTeamName, keyView, parseGraceSeconds, parseKeyInput, parseTeamSettings, type Directory, type KeyFilter } from '@sightline/directory';
import { requireAdmin } from '../auth.js';
import { QueryError } from '../errors.js';
import { stringParam } from '../params.js';

const KEY_ID = /^key_[a-z0-9]{16}$/;

function keyIdParam(v: string): string {
  if (!KEY_ID.test(v)) throw new QueryError('bad_parameter', `a key id is \`key_\` and 16 lowercase letters or digits, got "${v.slice(0, 40)}"`, { field: 'id' });
  return v;
}

function boolParam(name: string, v: unknown): boolean | undefined {
  const s = stringParam(name, v);
  if (s === null) return undefined;
  if (s === 'true' || s === '1') return true;
  if (s === 'false' || s === '0') return false;
  throw new QueryError('bad_parameter', `${name} must be true or false`, { field: name });
}

export function registerAdminRoutes(app: FastifyInstance, directory: Directory | null): void {
  const dir = (): Directory => {
    if (directory === null) throw new QueryError('not_found', 'key management needs authentication on: set SIGHTLINE_ADMIN_TOKEN (docs/configuration.md)');
    return directory;
  };

  app.post('/v1/admin/keys', async (req, reply) => {
    requireAdmin(req.caller, 'key management');
    const now = Date.now();
    const { record, secret } = await dir().createKey(parseKeyInput(req.body, now), now);
    void reply.code(201);
    return { ...keyView(record), key: secret };
  });

  app.get<{ Querystring: Record<string, unknown> }>('/v1/admin/keys', async (req) => {
    requireAdmin(req.caller, 'key management');
    const q = req.query;
    for (const k of Object.keys(q)) if (!['team', 'name', 'revoked'].includes(k)) throw new QueryError('bad_parameter', `unknown parameter \`${k.slice(0, 32)}\` (expected team, name, revoked)`, { field: k.slice(0, 32) });
    const filter: KeyFilter = {};
    const team = stringParam('team', q.team);
    if (team !== null) filter.team = checkTeamName(team);
    const name = stringParam('name', q.name);
    if (name !== null) filter.name = name;
    const revoked = boolParam('revoked', q.revoked);
    if (revoked !== undefined) filter.revoked = revoked;
    return { data: dir().keys(filter).map(keyView) };
  });

  app.get<{ Params: { id: string } }>('/v1/admin/keys/:id', async (req) => {
    requireAdmin(req.caller, 'key management');
    const r = dir().key(keyIdParam(req.params.id));
    if (r === null) throw new QueryError('not_found', `no key ${req.params.id}`);
    return keyView(r);
  });

  app.delete<{ Params: { id: string } }>('/v1/admin/keys/:id', async (req) => {
    requireAdmin(req.caller, 'key management');
    const r = await dir().revokeKey(keyIdParam(req.params.id), Date.now());
    if (r === null) throw new QueryError('not_found', `no key ${req.params.id}`);
    return keyView(r);
  });

  app.post<{ Params: { id: string } }>('/v1/admin/keys/:id/rotate', async (req) => {
    requireAdmin(req.caller, 'key management');
    const id = keyIdParam(req.params.id);
    const grace = parseGraceSeconds(req.body);
    const out = await dir().rotateKey(id, grace, Date.now());
    if (out === null) throw new QueryError('not_found', `no active key ${id} (revoked keys cannot be rotated)`);
    return { ...keyView(out.record), key: out.secret };
  });

  app.get('/v1/admin/teams', async (req) => {
    requireAdmin(req.caller, 'team management');
    const d = dir();
    const counts = new Map<string, number>();
    for (const k of d.keys()) counts.set(k.team, (counts.get(k.team) ?? 0) + 1);
    return { data: d.teams().map((t) => ({ ...t, keys: counts.get(t.name) ?? 0 })) };
  });

  app.get<{ Params: { team: string } }>('/v1/admin/teams/:team', async (req) => {
    requireAdmin(req.caller, 'team management');
    const t = dir().team(checkTeamName(req.params.team));
    if (t === null) throw new QueryError('not_found', `no team ${req.params.team}`);
    return t;
  });

  app.put<{ Params: { team: string } }>('/v1/admin/teams/:team', async (req) => {
    requireAdmin(req.caller, 'team management');
    return dir().putTeam(checkTeamName(req.params.team), parseTeamSettings(req.body), Date.now());
  });
}
