/**
 * Checking what the admin API receives. Every failure is a DirectoryError `SL_DIR_INVALID`
 * naming the field, so the client learns what to fix.
 */
import { globToRegExp } from '@sightline/config';
import { CONTENT_POLICIES, type ContentPolicy } from '@sightline/core';
import { DirectoryError } from './errors.js';
import { SCOPES, type Budget, type KeyInput, type Limits, type Scope, type TeamSettings } from './types.js';

const TEAM_RE = /^[A-Za-z0-9._-]{1,64}$/;
const MODEL_GLOB_RE = /^[A-Za-z0-9._:/@*-]{1,128}$/;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function invalid(field: string, message: string): never {
  throw new DirectoryError('SL_DIR_INVALID', `${field}: ${message}`, field);
}

function known(o: Record<string, unknown>, fields: readonly string[], where: string): void {
  for (const k of Object.keys(o)) if (!fields.includes(k)) invalid(where === '' ? k : `${where}.${k}`, `unknown field (expected one of: ${fields.join(', ')})`);
}

export function checkTeamName(v: unknown, field = 'team'): string {
  if (typeof v !== 'string' || !TEAM_RE.test(v)) invalid(field, 'must be 1 to 64 letters, digits, ".", "_" or "-"');
  return v;
}

function time(v: unknown, field: string): string | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string' || !/^\d{4}-\d{2}-\d{2}T/.test(v) || Number.isNaN(Date.parse(v))) invalid(field, 'must be an RFC 3339 time such as 2027-01-31T00:00:00Z, or null');
  return new Date(Date.parse(v)).toISOString();
}

export function parseKeyInput(body: unknown, nowMs: number): KeyInput {
  if (!isObject(body)) invalid('body', 'must be a JSON object');
  known(body, ['team', 'name', 'scopes', 'models', 'expires_at', 'limits', 'budget'], '');
  const team = checkTeamName(body.team);
  const name = body.name;
  if (typeof name !== 'string' || name.length < 1 || name.length > 128 || /[\u0000-\u001f]/.test(name)) invalid('name', 'must be 1 to 128 printable characters');
  if (!Array.isArray(body.scopes) || body.scopes.length === 0) invalid('scopes', `must be a non-empty list of ${SCOPES.join(', ')}`);
  const scopes: Scope[] = [];
  body.scopes.forEach((s: unknown, i: number) => {
    if (s === 'admin') invalid(`scopes[${i}]`, 'a team key cannot have the admin scope; administration takes the admin token');
    if (typeof s !== 'string' || !(SCOPES as readonly string[]).includes(s)) invalid(`scopes[${i}]`, `must be one of ${SCOPES.join(', ')}`);
    if (!scopes.includes(s as Scope)) scopes.push(s as Scope);
  });
  let models: string[] = [];
  if (body.models !== undefined && body.models !== null) {
    if (!Array.isArray(body.models) || body.models.length > 100) invalid('models', 'must be a list of at most 100 model names or globs such as "gpt-*"');
    models = body.models.map((m: unknown, i: number) => {
      if (typeof m !== 'string' || !MODEL_GLOB_RE.test(m)) invalid(`models[${i}]`, 'must be a model name or a glob such as "gpt-*"');
      return m;
    });
  }
  const expires = time(body.expires_at, 'expires_at');
  if (expires !== null && Date.parse(expires) <= nowMs) invalid('expires_at', 'must be in the future');
  return { team, name, scopes, models, expires_at: expires, limits: parseLimits(body.limits, 'limits'), budget: parseBudget(body.budget, 'budget') };
}

function positiveInt(v: unknown, field: string, max: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > max) invalid(field, `must be a whole number from 1 to ${max}`);
  return v;
}

/** `{"requests_per_minute":…,"tokens_per_minute":…}`; null or absent: no limits. */
export function parseLimits(v: unknown, field: string): Limits | null {
  if (v === undefined || v === null) return null;
  if (!isObject(v)) invalid(field, 'must be an object such as {"requests_per_minute":60,"tokens_per_minute":100000}');
  known(v, ['requests_per_minute', 'tokens_per_minute'], field);
  const out: Limits = {};
  if (v.requests_per_minute !== undefined && v.requests_per_minute !== null) out.requests_per_minute = positiveInt(v.requests_per_minute, `${field}.requests_per_minute`, 1e9);
  if (v.tokens_per_minute !== undefined && v.tokens_per_minute !== null) out.tokens_per_minute = positiveInt(v.tokens_per_minute, `${field}.tokens_per_minute`, 1e12);
  return out.requests_per_minute === undefined && out.tokens_per_minute === undefined ? null : out;
}

/** `{"usd":…,"period":"day"|"month"}`; null or absent: no budget. */
export function parseBudget(v: unknown, field: string): Budget | null {
  if (v === undefined || v === null) return null;
  if (!isObject(v)) invalid(field, 'must be an object such as {"usd":25,"period":"month"}');
  known(v, ['usd', 'period'], field);
  if (typeof v.usd !== 'number' || !Number.isFinite(v.usd) || v.usd <= 0 || v.usd > 1e9) invalid(`${field}.usd`, 'must be a positive number of US dollars');
  if (v.period !== 'day' && v.period !== 'month') invalid(`${field}.period`, 'must be "day" or "month" (UTC calendar periods)');
  return { usd: v.usd, period: v.period };
}

export function parseTeamSettings(body: unknown): TeamSettings {
  if (!isObject(body)) invalid('body', 'must be a JSON object of team settings');
  known(body, ['description', 'content_capture', 'limits', 'budget', 'limits_when_unavailable'], '');
  const out: TeamSettings = {};
  if (body.description !== undefined && body.description !== null) {
    if (typeof body.description !== 'string' || body.description.length > 1000) invalid('description', 'must be a string of at most 1000 characters');
    out.description = body.description;
  }
  if (body.content_capture !== undefined && body.content_capture !== null) {
    if (typeof body.content_capture !== 'string' || !(CONTENT_POLICIES as readonly string[]).includes(body.content_capture)) invalid('content_capture', `must be one of ${CONTENT_POLICIES.join(', ')}`);
    out.content_capture = body.content_capture as ContentPolicy;
  }
  const limits = parseLimits(body.limits, 'limits');
  if (limits !== null) out.limits = limits;
  const budget = parseBudget(body.budget, 'budget');
  if (budget !== null) out.budget = budget;
  const w = body.limits_when_unavailable;
  if (w !== undefined && w !== null) {
    if (!isObject(w)) invalid('limits_when_unavailable', 'must be an object such as {"limits":"fail_open","budget":"fail_closed"}');
    known(w, ['limits', 'budget'], 'limits_when_unavailable');
    const mode = (v: unknown, f: string): 'fail_open' | 'fail_closed' | undefined => {
      if (v === undefined || v === null) return undefined;
      if (v !== 'fail_open' && v !== 'fail_closed') invalid(f, 'must be fail_open or fail_closed');
      return v;
    };
    const limits = mode(w.limits, 'limits_when_unavailable.limits');
    const budgetMode = mode(w.budget, 'limits_when_unavailable.budget');
    out.limits_when_unavailable = { ...(limits === undefined ? {} : { limits }), ...(budgetMode === undefined ? {} : { budget: budgetMode }) };
  }
  return out;
}

/** Grace period of a rotation, in seconds: 0 (the old secret stops at once) to 30 days. */
export function parseGraceSeconds(body: unknown): number {
  if (body === undefined || body === null) return 0;
  if (!isObject(body)) invalid('body', 'must be a JSON object such as {"grace_seconds":3600}');
  known(body, ['grace_seconds'], '');
  const g = body.grace_seconds ?? 0;
  if (typeof g !== 'number' || !Number.isInteger(g) || g < 0 || g > 30 * 86400) invalid('grace_seconds', 'must be a whole number of seconds from 0 to 2592000 (30 days)');
  return g;
}

/** Compiled model globs of a key: null means every model. */
export function compileModels(models: readonly string[]): RegExp[] | null {
  return models.length === 0 ? null : models.map(globToRegExp);
}
