/**
 * The records admin operations produce, as pure functions: every implementation (in-process,
 * NATS key-value) writes what these return, so the rules live in one place.
 */
import { hintOf, newKeyId, newKeySecret, type KeyHasher } from './secrets.js';
import type { KeyInput, KeyRecord, KeyView, TeamRecord, TeamSettings } from './types.js';

const iso = (ms: number) => new Date(ms).toISOString();

export function newKeyRecord(input: KeyInput, hasher: KeyHasher, nowMs: number): { record: KeyRecord; secret: string } {
  const secret = newKeySecret();
  return {
    secret,
    record: {
      id: newKeyId(),
      team: input.team,
      name: input.name,
      scopes: [...input.scopes],
      models: [...input.models],
      created_at: iso(nowMs),
      expires_at: input.expires_at,
      revoked_at: null,
      hash: hasher.hash(secret),
      hint: hintOf(secret),
      previous: null,
      limits: input.limits,
      budget: input.budget,
    },
  };
}

export function revokedRecord(r: KeyRecord, nowMs: number): KeyRecord {
  return r.revoked_at !== null ? r : { ...r, revoked_at: iso(nowMs), previous: null };
}

/** A new secret for the key; the current one stays valid for `graceSeconds` (0: stops now). */
export function rotatedRecord(r: KeyRecord, hasher: KeyHasher, graceSeconds: number, nowMs: number): { record: KeyRecord; secret: string } {
  const secret = newKeySecret();
  return {
    secret,
    record: {
      ...r,
      hash: hasher.hash(secret),
      hint: hintOf(secret),
      previous: graceSeconds > 0 ? { hash: r.hash, hint: r.hint, until: iso(nowMs + graceSeconds * 1000) } : null,
    },
  };
}

export function teamRecord(name: string, settings: TeamSettings, existing: TeamRecord | null, nowMs: number): TeamRecord {
  return { name, created_at: existing?.created_at ?? iso(nowMs), updated_at: iso(nowMs), settings: { ...settings } };
}

/** A key as the admin API shows it: no hashes. */
export function keyView(r: KeyRecord): KeyView {
  return {
    id: r.id,
    team: r.team,
    name: r.name,
    scopes: r.scopes,
    models: r.models,
    created_at: r.created_at,
    expires_at: r.expires_at,
    revoked_at: r.revoked_at,
    hint: r.hint,
    previous_valid_until: r.previous?.until ?? null,
    limits: r.limits ?? null,
    budget: r.budget ?? null,
  };
}
