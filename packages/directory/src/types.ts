/**
 * Keys, teams and their settings: what every gateway replica and the query API share.
 *
 * A key belongs to one team and carries scopes. Its secret (`sl-…`) is shown once, when it
 * is created or rotated; the directory stores only a keyed hash of it (HMAC-SHA-256 with a
 * server secret, secrets.ts), so a dump of the store reveals no usable key.
 */

import type { ContentPolicy } from '@sightline/core';

/**
 * What a key may do. `gateway`: send LLM requests. `read`: the team's metrics and
 * requests. `content`: prompts and completions. There is no `admin` scope on a team key:
 * administration takes the admin token (SIGHTLINE_ADMIN_TOKEN).
 */
export type Scope = 'gateway' | 'read' | 'content';
export const SCOPES: readonly Scope[] = ['gateway', 'read', 'content'];

/** Rate limits of a key or a team, per UTC minute (docs/governance.md). */
export interface Limits {
  requests_per_minute?: number;
  /** Input plus output tokens. */
  tokens_per_minute?: number;
}

/** A spending limit in US dollars per UTC calendar day or month, at the configured prices. */
export interface Budget {
  usd: number;
  period: 'day' | 'month';
}

/** A key as stored (the shared key-value store holds this JSON; no secret in it). */
export interface KeyRecord {
  /** `key_` and 16 letters or digits; public, appears in captured data as `key_id`. */
  id: string;
  team: string;
  /** A label for people (`ci`, `alice-laptop`). */
  name: string;
  scopes: Scope[];
  /** Model name globs (`gpt-*`) the key may ask for; empty: every model. */
  models: string[];
  /** RFC 3339. */
  created_at: string;
  /** RFC 3339, or null: never expires. */
  expires_at: string | null;
  /** RFC 3339 when revoked, or null. */
  revoked_at: string | null;
  /** Hex HMAC-SHA-256 of the secret under the server's hashing secret. */
  hash: string;
  /** How people recognise the key without its secret: `sl-…` and its last four characters. */
  hint: string;
  /** After a rotation: the previous secret's hash, valid until `until` (RFC 3339). */
  previous: { hash: string; hint: string; until: string } | null;
  /** Rate limits of this key (its team's apply too); null: none. Absent in records before v0.2. */
  limits?: Limits | null;
  /** Budget of this key (its team's applies too); null: none. */
  budget?: Budget | null;
}

/** A key as the admin API shows it: everything but hashes. */
export interface KeyView {
  id: string;
  team: string;
  name: string;
  scopes: Scope[];
  models: string[];
  created_at: string;
  expires_at: string | null;
  revoked_at: string | null;
  hint: string;
  /** RFC 3339 end of the previous secret's grace period after a rotation, or null. */
  previous_valid_until: string | null;
  limits: Limits | null;
  budget: Budget | null;
}

/** Settings of a team; later issues add content capture, limits and budgets here. */
export interface TeamSettings {
  /** Free text for people. */
  description?: string;
  /**
   * What is kept of the team's prompts and completions (issue 11): `full` (secrets replaced),
   * `redacted` (secrets and personal data replaced before storage), `none` (nothing leaves the
   * gateway). Absent: the configuration's `capture.content` (default `full`).
   */
  content_capture?: ContentPolicy;
  /** Rate limits shared by every key of the team. */
  limits?: Limits;
  /** Budget shared by every key of the team. */
  budget?: Budget;
  /**
   * While the limits store (NATS) is unreachable and this process's leases are used up:
   * `fail_open` admits, `fail_closed` refuses (docs/governance.md). Default: rate limits
   * open, budgets closed.
   */
  limits_when_unavailable?: { limits?: 'fail_open' | 'fail_closed'; budget?: 'fail_open' | 'fail_closed' };
}

export interface TeamRecord {
  /** Letters, digits, `.`, `_`, `-`; 1 to 64 characters. */
  name: string;
  created_at: string;
  updated_at: string;
  settings: TeamSettings;
}

/** What the admin API takes to create a key (validated by `parseKeyInput`). */
export interface KeyInput {
  team: string;
  name: string;
  scopes: Scope[];
  models: string[];
  expires_at: string | null;
  limits: Limits | null;
  budget: Budget | null;
}

export interface KeyFilter {
  team?: string;
  /** Include revoked keys. Default false. */
  revoked?: boolean;
  name?: string;
}

/** Why a key was refused at the gateway (or by the query API). */
export type KeyRefusal = 'missing' | 'unknown' | 'revoked' | 'expired' | 'scope' | 'model';

export type KeyCheck = { ok: true; key: KeyRecord } | { ok: false; reason: KeyRefusal; message: string };

export interface DirectoryStatus {
  /** `nats`: watched from the key-value bucket; `memory`: in-process (embedded mode). */
  source: 'nats' | 'memory';
  /** False while the shared store is unreachable: lookups answer from the last state seen. */
  synced: boolean;
  /** Where the state now in memory came from at start: the live store, a local snapshot, or nothing yet. */
  loadedFrom: 'store' | 'snapshot' | 'empty';
  keys: number;
  teams: number;
  /** RFC 3339 of the last change applied, or null. */
  updatedAt: string | null;
  /** The last error talking to the shared store, or null. */
  error: string | null;
}

/**
 * The directory: synchronous lookups from memory (the gateway's `auth` stage is a map
 * lookup), asynchronous writes (the query API's admin endpoints) to the shared store, which
 * every replica watches back into memory.
 */
export interface Directory {
  /** Resolves once the first state is in memory (from the store or a snapshot). */
  readonly ready: Promise<void>;
  /** The key a secret belongs to, checked for revocation, expiry and `scope`. */
  check(secret: string, scope: Scope, nowMs: number): KeyCheck;
  /** Whether the key may ask for this model (its globs; none: any). */
  modelAllowed(key: KeyRecord, model: string): boolean;
  key(id: string): KeyRecord | null;
  keys(filter?: KeyFilter): KeyRecord[];
  team(name: string): TeamRecord | null;
  teams(): TeamRecord[];
  /** Creates a key; the secret is returned once and never stored. */
  createKey(input: KeyInput, nowMs: number): Promise<{ record: KeyRecord; secret: string }>;
  /** Revokes a key (idempotent); null when there is no such key. */
  revokeKey(id: string, nowMs: number): Promise<KeyRecord | null>;
  /** A new secret; the previous one stays valid for `graceSeconds`. Null when there is no such key (or it is revoked). */
  rotateKey(id: string, graceSeconds: number, nowMs: number): Promise<{ record: KeyRecord; secret: string } | null>;
  /** Creates or replaces a team's settings. */
  putTeam(name: string, settings: TeamSettings, nowMs: number): Promise<TeamRecord>;
  status(): DirectoryStatus;
  close(): Promise<void>;
}
