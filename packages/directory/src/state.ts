/**
 * The directory's state in memory and its lookups: the part every implementation shares.
 * Updates arrive as whole records (from the key-value watch, or from in-process writes) and
 * are applied here; lookups are synchronous and allocate nothing on a cache hit.
 *
 * Lookup of a secret: HMAC (~2 µs) then a map get. The last secrets seen are cached
 * (bounded) by their text, pointing at the key id, and every hit re-reads the live record,
 * so a revocation or expiry applies at once, cache or not.
 */
import type { KeyHasher } from './secrets.js';
import { compileModels } from './validate.js';
import type { KeyCheck, KeyFilter, KeyRecord, Scope, TeamRecord } from './types.js';

interface KeyEntry {
  record: KeyRecord;
  models: RegExp[] | null;
  expiresMs: number;
  revoked: boolean;
  previousUntilMs: number;
}

/** Secrets remembered; past it the cache starts over (a burst of unknown keys cannot grow it). */
const CACHE_MAX = 10_000;

export class DirectoryState {
  readonly #keys = new Map<string, KeyEntry>();
  /** Hash of a current or previous (in grace) secret → key id. */
  readonly #byHash = new Map<string, string>();
  readonly #teams = new Map<string, TeamRecord>();
  /** Secret text → key id, for secrets that hashed to a key. */
  #cache = new Map<string, string>();
  updatedAt: string | null = null;

  constructor(readonly hasher: KeyHasher) {}

  get keyCount(): number {
    return this.#keys.size;
  }
  get teamCount(): number {
    return this.#teams.size;
  }

  putKey(record: KeyRecord): void {
    const old = this.#keys.get(record.id);
    if (old !== undefined) {
      this.#byHash.delete(old.record.hash);
      if (old.record.previous !== null) this.#byHash.delete(old.record.previous.hash);
    }
    this.#keys.set(record.id, {
      record,
      models: compileModels(record.models),
      expiresMs: record.expires_at === null ? Number.POSITIVE_INFINITY : Date.parse(record.expires_at),
      revoked: record.revoked_at !== null,
      previousUntilMs: record.previous === null ? 0 : Date.parse(record.previous.until),
    });
    this.#byHash.set(record.hash, record.id);
    if (record.previous !== null) this.#byHash.set(record.previous.hash, record.id);
    // A rotated secret may still be cached under the key id: drop the cache (rare event).
    if (old !== undefined && old.record.hash !== record.hash) this.#cache = new Map();
    this.#touch();
  }

  deleteKey(id: string): void {
    const old = this.#keys.get(id);
    if (old === undefined) return;
    this.#keys.delete(id);
    this.#byHash.delete(old.record.hash);
    if (old.record.previous !== null) this.#byHash.delete(old.record.previous.hash);
    this.#cache = new Map();
    this.#touch();
  }

  putTeam(team: TeamRecord): void {
    this.#teams.set(team.name, team);
    this.#touch();
  }

  deleteTeam(name: string): void {
    this.#teams.delete(name);
    this.#touch();
  }

  #touch(): void {
    this.updatedAt = new Date().toISOString();
  }

  /** Everything in memory, for a snapshot. */
  dump(): { keys: KeyRecord[]; teams: TeamRecord[] } {
    return { keys: [...this.#keys.values()].map((e) => e.record), teams: [...this.#teams.values()] };
  }

  #idOf(secret: string): string | undefined {
    const hit = this.#cache.get(secret);
    if (hit !== undefined) return hit;
    const id = this.#byHash.get(this.hasher.hash(secret));
    if (id !== undefined) {
      if (this.#cache.size >= CACHE_MAX) this.#cache = new Map();
      this.#cache.set(secret, id);
    }
    return id;
  }

  check(secret: string, scope: Scope, nowMs: number): KeyCheck {
    if (secret === '') return { ok: false, reason: 'missing', message: 'No API key provided: send a Sightline key (sl-…) as `Authorization: Bearer` or `x-api-key`.' };
    const id = this.#idOf(secret);
    const e = id === undefined ? undefined : this.#keys.get(id);
    if (e === undefined) return { ok: false, reason: 'unknown', message: 'Incorrect API key provided: it is not a Sightline key of this gateway.' };
    if (e.revoked) return { ok: false, reason: 'revoked', message: `The API key ${e.record.hint} (${e.record.id}) has been revoked.` };
    if (nowMs >= e.expiresMs) return { ok: false, reason: 'expired', message: `The API key ${e.record.hint} (${e.record.id}) expired at ${e.record.expires_at}.` };
    // A previous secret (after a rotation) is valid only until the end of its grace period.
    if (e.record.previous !== null && e.record.hash !== this.hasher.hash(secret) && nowMs >= e.previousUntilMs) {
      return { ok: false, reason: 'revoked', message: `The API key ${e.record.previous.hint} (${e.record.id}) was rotated; its previous secret stopped working at ${e.record.previous.until}.` };
    }
    if (!e.record.scopes.includes(scope)) return { ok: false, reason: 'scope', message: `The API key ${e.record.hint} (${e.record.id}) does not have the \`${scope}\` scope.` };
    return { ok: true, key: e.record };
  }

  modelAllowed(key: KeyRecord, model: string): boolean {
    const e = this.#keys.get(key.id);
    if (e === undefined || e.models === null) return e !== undefined;
    for (const re of e.models) if (re.test(model)) return true;
    return false;
  }

  key(id: string): KeyRecord | null {
    return this.#keys.get(id)?.record ?? null;
  }

  keys(filter: KeyFilter = {}): KeyRecord[] {
    const out: KeyRecord[] = [];
    for (const { record } of this.#keys.values()) {
      // Filters combine with AND.
      if (filter.team !== undefined && record.team !== filter.team) continue;
      if (filter.name !== undefined && record.name !== filter.name) continue;
      if (filter.revoked !== true && record.revoked_at !== null) continue;
      out.push(record);
    }
    return out.sort((a, b) => a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id));
  }

  team(name: string): TeamRecord | null {
    return this.#teams.get(name) ?? null;
  }

  teams(): TeamRecord[] {
    return [...this.#teams.values()].sort((a, b) => a.name.localeCompare(b.name));
  }
}
