/**
 * Key and team management (admin token only), JSON in and out (docs/api.md, "Keys and teams").
 * Writes go to the shared directory, which every gateway replica watches into memory.
 */
import type { FastifyInstance } from 'fastify';
import { checkTeamName, keyView, parseGraceSeconds, parseKeyInput, parseTeamSettings, type Directory, type KeyFilter } from '@sightline/directory';
import { requireAdmin } from '../auth.js';
import { QueryError } from '../errors.js';
import { stringParam } from '../params.js';
import { ERRORS, ISO_TIME, query } from '../schemas.js';

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

const NULLABLE_TIME = { type: ['string', 'null'], description: 'RFC 3339, or null' } as const;

/** Rate limits per UTC minute (docs/governance.md). */
const LIMITS = {
  type: 'object',
  additionalProperties: false,
  properties: {
    requests_per_minute: { type: 'integer', minimum: 1 },
    tokens_per_minute: { type: 'integer', minimum: 1, description: 'Input plus output tokens' },
  },
} as const;

/** A spending limit per UTC calendar day or month, at the configured prices. */
const BUDGET = {
  type: 'object',
  additionalProperties: false,
  required: ['usd', 'period'],
  properties: { usd: { type: 'number', exclusiveMinimum: 0 }, period: { type: 'string', enum: ['day', 'month'] } },
} as const;

const NULLABLE_LIMITS = { anyOf: [LIMITS, { type: 'null' }] } as const;
const NULLABLE_BUDGET = { anyOf: [BUDGET, { type: 'null' }] } as const;

/**
 * A key without its secret (packages/directory `keyView`). Further properties are let
 * through: the directory owns this shape.
 */
const KEY_VIEW = {
  type: 'object',
  additionalProperties: true,
  required: ['id', 'team', 'name', 'scopes', 'models', 'created_at', 'expires_at', 'revoked_at', 'hint', 'previous_valid_until', 'limits', 'budget'],
  properties: {
    id: { type: 'string', description: '`key_` and 16 letters or digits; the `key_id` of captured requests' },
    team: { type: 'string' },
    name: { type: 'string' },
    scopes: { type: 'array', items: { type: 'string', enum: ['gateway', 'read', 'content'] } },
    models: { type: 'array', items: { type: 'string' }, description: 'Model name globs the key may ask for; empty: every model' },
    created_at: ISO_TIME,
    expires_at: NULLABLE_TIME,
    revoked_at: NULLABLE_TIME,
    hint: { type: 'string', description: 'The secret\'s prefix and last four characters, to recognise it' },
    previous_valid_until: { ...NULLABLE_TIME, description: 'After a rotation: until when the previous secret still works' },
    limits: NULLABLE_LIMITS,
    budget: NULLABLE_BUDGET,
  },
} as const;

const KEY_WITH_SECRET = {
  ...KEY_VIEW,
  required: [...KEY_VIEW.required, 'key'],
  properties: { ...KEY_VIEW.properties, key: { type: 'string', description: 'The secret (`sl-…`), shown this once' } },
} as const;

/** A team; settings are the directory's (further properties are let through). */
const TEAM = {
  type: 'object',
  additionalProperties: true,
  required: ['name', 'created_at', 'updated_at', 'settings'],
  properties: {
    name: { type: 'string' },
    created_at: ISO_TIME,
    updated_at: ISO_TIME,
    settings: {
      type: 'object',
      additionalProperties: true,
      properties: { description: { type: 'string' }, content_capture: { type: 'string', enum: ['full', 'redacted', 'none'] }, limits: LIMITS, budget: BUDGET },
    },
  },
} as const;

const KEY_ID_PARAMS = { type: 'object', required: ['id'], properties: { id: { type: 'string', maxLength: 64, description: 'A key id (`key_…`)' } } } as const;
const TEAM_PARAMS = { type: 'object', required: ['team'], properties: { team: { type: 'string', maxLength: 128 } } } as const;
const TAGS = ['admin'];

export function registerAdminRoutes(app: FastifyInstance, directory: Directory | null): void {
  const dir = (): Directory => {
    if (directory === null) throw new QueryError('not_found', 'key management needs authentication on: set SIGHTLINE_ADMIN_TOKEN (docs/configuration.md)');
    return directory;
  };

  app.post('/v1/admin/keys', {
    schema: {
      summary: 'Create a key (admin token)',
      tags: TAGS,
      // Types only: the directory checks the values and names the field at fault (parseKeyInput).
      body: {
        type: 'object',
        additionalProperties: false,
        required: ['team', 'name', 'scopes'],
        properties: {
          team: { type: 'string' },
          name: { type: 'string' },
          scopes: { type: 'array', items: { type: 'string' }, description: 'Any of `gateway`, `read`, `content`' },
          models: { type: ['array', 'null'], items: { type: 'string' }, description: 'Model name globs (`gpt-*`); none or empty: every model' },
          expires_at: { type: ['string', 'null'], description: 'RFC 3339, or null: never' },
          limits: { type: ['object', 'null'], description: '`{"requests_per_minute":…,"tokens_per_minute":…}` (docs/governance.md)' },
          budget: { type: ['object', 'null'], description: '`{"usd":…,"period":"day"|"month"}` (docs/governance.md)' },
        },
      },
      response: { 201: KEY_WITH_SECRET, ...ERRORS },
    },
  }, async (req, reply) => {
    requireAdmin(req.caller, 'key management');
    const now = Date.now();
    const { record, secret } = await dir().createKey(parseKeyInput(req.body, now), now);
    void reply.code(201);
    return { ...keyView(record), key: secret };
  });

  app.get<{ Querystring: Record<string, unknown> }>('/v1/admin/keys', {
    schema: {
      summary: 'List keys, without secrets (admin token); filters combine with AND',
      tags: TAGS,
      querystring: query({ team: { type: 'string', maxLength: 128 }, name: { type: 'string', maxLength: 256 }, revoked: { type: 'string', enum: ['true', 'false', '1', '0'], description: 'Include revoked keys' } }),
      response: { 200: { type: 'object', additionalProperties: false, required: ['data'], properties: { data: { type: 'array', items: KEY_VIEW } } }, ...ERRORS },
    },
  }, async (req) => {
    requireAdmin(req.caller, 'key management');
    const q = req.query;
    const filter: KeyFilter = {};
    const team = stringParam('team', q.team);
    if (team !== null) filter.team = checkTeamName(team);
    const name = stringParam('name', q.name);
    if (name !== null) filter.name = name;
    const revoked = boolParam('revoked', q.revoked);
    if (revoked !== undefined) filter.revoked = revoked;
    return { data: dir().keys(filter).map(keyView) };
  });

  app.get<{ Params: { id: string } }>('/v1/admin/keys/:id', { schema: { summary: 'One key, without its secret (admin token)', tags: TAGS, params: KEY_ID_PARAMS, response: { 200: KEY_VIEW, ...ERRORS } } }, async (req) => {
    requireAdmin(req.caller, 'key management');
    const r = dir().key(keyIdParam(req.params.id));
    if (r === null) throw new QueryError('not_found', `no key ${req.params.id}`);
    return keyView(r);
  });

  app.delete<{ Params: { id: string } }>('/v1/admin/keys/:id', { schema: { summary: 'Revoke a key (admin token); every gateway refuses it within seconds', tags: TAGS, params: KEY_ID_PARAMS, response: { 200: KEY_VIEW, ...ERRORS } } }, async (req) => {
    requireAdmin(req.caller, 'key management');
    const r = await dir().revokeKey(keyIdParam(req.params.id), Date.now());
    if (r === null) throw new QueryError('not_found', `no key ${req.params.id}`);
    return keyView(r);
  });

  app.post<{ Params: { id: string } }>('/v1/admin/keys/:id/rotate', {
    schema: {
      summary: 'A new secret for a key; the previous one works for a grace period (admin token)',
      tags: TAGS,
      params: KEY_ID_PARAMS,
      body: { type: ['object', 'null'], additionalProperties: false, properties: { grace_seconds: { type: 'integer', minimum: 0, maximum: 2_592_000, description: 'Default 0: the previous secret stops at once' } } },
      response: { 200: KEY_WITH_SECRET, ...ERRORS },
    },
  }, async (req) => {
    requireAdmin(req.caller, 'key management');
    const id = keyIdParam(req.params.id);
    const grace = parseGraceSeconds(req.body);
    const out = await dir().rotateKey(id, grace, Date.now());
    if (out === null) throw new QueryError('not_found', `no active key ${id} (revoked keys cannot be rotated)`);
    return { ...keyView(out.record), key: out.secret };
  });

  app.get('/v1/admin/teams', {
    schema: {
      summary: 'Teams, with their number of keys (admin token)',
      tags: TAGS,
      response: { 200: { type: 'object', additionalProperties: false, required: ['data'], properties: { data: { type: 'array', items: { ...TEAM, required: [...TEAM.required, 'keys'], properties: { ...TEAM.properties, keys: { type: 'integer' } } } } } }, ...ERRORS },
    },
  }, async (req) => {
    requireAdmin(req.caller, 'team management');
    const d = dir();
    const counts = new Map<string, number>();
    for (const k of d.keys()) counts.set(k.team, (counts.get(k.team) ?? 0) + 1);
    return { data: d.teams().map((t) => ({ ...t, keys: counts.get(t.name) ?? 0 })) };
  });

  app.get<{ Params: { team: string } }>('/v1/admin/teams/:team', { schema: { summary: 'One team (admin token)', tags: TAGS, params: TEAM_PARAMS, response: { 200: TEAM, ...ERRORS } } }, async (req) => {
    requireAdmin(req.caller, 'team management');
    const t = dir().team(checkTeamName(req.params.team));
    if (t === null) throw new QueryError('not_found', `no team ${req.params.team}`);
    return t;
  });

  app.put<{ Params: { team: string } }>('/v1/admin/teams/:team', {
    schema: {
      summary: "Create or replace a team's settings (admin token)",
      tags: TAGS,
      params: TEAM_PARAMS,
      // The directory checks the settings and names an unknown one (parseTeamSettings).
      body: {
        type: 'object',
        additionalProperties: true,
        properties: {
          description: { type: ['string', 'null'] },
          content_capture: { type: ['string', 'null'], description: '`full`, `redacted` or `none` (docs/api.md, "Content")' },
          limits: { type: ['object', 'null'], description: 'Rate limits shared by every key of the team' },
          budget: { type: ['object', 'null'], description: 'Budget shared by every key of the team' },
          limits_when_unavailable: { type: ['object', 'null'], description: '`{"limits":"fail_open"|"fail_closed","budget":…}` while the limits store is unreachable (docs/governance.md)' },
        },
      },
      response: { 200: TEAM, ...ERRORS },
    },
  }, async (req) => {
    requireAdmin(req.caller, 'team management');
    return dir().putTeam(checkTeamName(req.params.team), parseTeamSettings(req.body), Date.now());
  });
}
