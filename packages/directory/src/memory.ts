/**
 * The in-process directory of the embedded mode (`npm start` without NATS): the same state
 * and rules as the NATS one, kept in this process and, when given a file, persisted there
 * (written whole on each change, mode 0600) so keys survive a restart.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { DirectoryError } from './errors.js';
import { newKeyRecord, revokedRecord, rotatedRecord, teamRecord } from './records.js';
import type { KeyHasher } from './secrets.js';
import { DirectoryState } from './state.js';
import type { Directory, DirectoryStatus, KeyCheck, KeyFilter, KeyInput, KeyRecord, Scope, TeamRecord, TeamSettings } from './types.js';

export interface MemoryDirectoryOptions {
  hasher: KeyHasher;
  /** JSON file to load at start and rewrite on every change; none: nothing persists. */
  file?: string;
}

export class MemoryDirectory implements Directory {
  readonly ready = Promise.resolve();
  readonly #state: DirectoryState;
  readonly #file: string | null;
  #loadedFrom: DirectoryStatus['loadedFrom'] = 'empty';

  constructor(opts: MemoryDirectoryOptions) {
    this.#state = new DirectoryState(opts.hasher);
    this.#file = opts.file ?? null;
    if (this.#file !== null) this.#load(this.#file);
  }

  #load(file: string): void {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      return; // first start
    }
    const data = JSON.parse(text) as { keys: KeyRecord[]; teams: TeamRecord[] };
    for (const t of data.teams) this.#state.putTeam(t);
    for (const k of data.keys) this.#state.putKey(k);
    this.#loadedFrom = 'snapshot';
  }

  #save(): void {
    if (this.#file === null) return;
    mkdirSync(dirname(this.#file), { recursive: true, mode: 0o700 });
    const tmp = `${this.#file}.tmp`;
    writeFileSync(tmp, JSON.stringify(this.#state.dump()), { mode: 0o600 });
    renameSync(tmp, this.#file);
  }

  check(secret: string, scope: Scope, nowMs: number): KeyCheck {
    return this.#state.check(secret, scope, nowMs);
  }
  modelAllowed(key: KeyRecord, model: string): boolean {
    return this.#state.modelAllowed(key, model);
  }
  key(id: string): KeyRecord | null {
    return this.#state.key(id);
  }
  keys(filter?: KeyFilter): KeyRecord[] {
    return this.#state.keys(filter);
  }
  team(name: string): TeamRecord | null {
    return this.#state.team(name);
  }
  teams(): TeamRecord[] {
    return this.#state.teams();
  }

  async createKey(input: KeyInput, nowMs: number): Promise<{ record: KeyRecord; secret: string }> {
    const out = newKeyRecord(input, this.#state.hasher, nowMs);
    if (this.#state.team(input.team) === null) this.#state.putTeam(teamRecord(input.team, {}, null, nowMs));
    this.#state.putKey(out.record);
    this.#save();
    return out;
  }

  async revokeKey(id: string, nowMs: number): Promise<KeyRecord | null> {
    const r = this.#state.key(id);
    if (r === null) return null;
    const next = revokedRecord(r, nowMs);
    this.#state.putKey(next);
    this.#save();
    return next;
  }

  async rotateKey(id: string, graceSeconds: number, nowMs: number): Promise<{ record: KeyRecord; secret: string } | null> {
    const r = this.#state.key(id);
    if (r === null || r.revoked_at !== null) return null;
    const out = rotatedRecord(r, this.#state.hasher, graceSeconds, nowMs);
    this.#state.putKey(out.record);
    this.#save();
    return out;
  }

  async putTeam(name: string, settings: TeamSettings, nowMs: number): Promise<TeamRecord> {
    if (name === '') throw new DirectoryError('SL_DIR_INVALID', 'team: required', 'team');
    const t = teamRecord(name, settings, this.#state.team(name), nowMs);
    this.#state.putTeam(t);
    this.#save();
    return t;
  }

  status(): DirectoryStatus {
    return { source: 'memory', synced: true, loadedFrom: this.#loadedFrom, keys: this.#state.keyCount, teams: this.#state.teamCount, updatedAt: this.#state.updatedAt, error: null };
  }

  async close(): Promise<void> {}
}
