/**
 * `GET /v1/budget` (issue 12, docs/governance.md): what a key has left — its own limits and
 * budget and its team's, in the current window or period — asked with the key itself, whatever
 * its scopes. The admin token sees every key and team that has a limit or a budget.
 */
import type { FastifyInstance } from 'fastify';
import type { Governor, ScopeUsage } from '@sightline/controls';
import type { Directory, KeyRecord } from '@sightline/directory';
import { QueryError } from '../errors.js';
import { ERRORS } from '../schemas.js';

const USAGE = {
  type: 'object',
  additionalProperties: false,
  required: ['scope', 'id', 'kind', 'period', 'limit', 'used', 'reserved', 'remaining', 'resets_at'],
  properties: {
    scope: { type: 'string', enum: ['key', 'team'] },
    id: { type: 'string', description: 'The key id or the team name' },
    kind: { type: 'string', enum: ['requests', 'tokens', 'budget'] },
    period: { type: 'string', enum: ['minute', 'day', 'month'] },
    limit: { type: 'number', description: 'Requests, tokens, or US dollars for a budget' },
    used: { type: 'number', description: 'Admitted, used, or spent in the current window or period' },
    reserved: { type: 'number', description: 'Held by requests in flight, at their upper bound' },
    remaining: { type: 'number' },
    resets_at: { type: 'string', format: 'date-time' },
  },
} as const;

function view(u: ScopeUsage): Record<string, unknown> {
  return { scope: u.scope, id: u.id, kind: u.kind, period: u.period, limit: u.limit, used: u.used, reserved: u.reserved, remaining: u.remaining, resets_at: new Date(u.resetAtMs).toISOString() };
}

export function registerBudgetRoutes(app: FastifyInstance, directory: Directory | null, governor: Pick<Governor, 'usage'> | null): void {
  app.get('/v1/budget', {
    schema: {
      summary: 'Limits and budgets left: a key\'s own and its team\'s (any key), or every key\'s and team\'s (admin token)',
      tags: ['governance'],
      response: { 200: { type: 'object', additionalProperties: false, required: ['data'], properties: { data: { type: 'array', items: USAGE } } }, ...ERRORS },
    },
  }, async (req) => {
    if (directory === null || governor === null) throw new QueryError('not_found', 'limits and budgets need authentication on: set SIGHTLINE_ADMIN_TOKEN (docs/governance.md)');
    const now = Date.now();
    const c = req.caller;
    const keys: KeyRecord[] = c !== null && c.kind === 'key' ? [c.key] : directory.keys();
    const teams = new Set(keys.map((k) => k.team));
    const out: ScopeUsage[] = [];
    for (const k of keys) {
      if ((k.limits ?? null) === null && (k.budget ?? null) === null) continue;
      out.push(...(await governor.usage({ key: { id: k.id, limits: k.limits ?? null, budget: k.budget ?? null } }, now)));
    }
    for (const name of teams) {
      const s = directory.team(name)?.settings;
      if (s === undefined || (s.limits === undefined && s.budget === undefined)) continue;
      out.push(...(await governor.usage({ team: { name, limits: s.limits ?? null, budget: s.budget ?? null } }, now)));
    }
    return { data: out.map(view) };
  });
}
