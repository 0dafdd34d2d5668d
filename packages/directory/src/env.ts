/**
 * The directory the apps run, chosen from their environment: the NATS key-value one when
 * NATS_URL is set (every replica shares it), the in-process one persisted to a local file
 * otherwise (the embedded mode of `npm start`).
 */
import { natsReplicasFromEnv } from '@sightline/bus';
import { DirectoryError } from './errors.js';
import { MemoryDirectory } from './memory.js';
import { NatsDirectory } from './nats.js';
import { KeyHasher } from './secrets.js';
import type { Directory } from './types.js';

export interface DirectoryEnvOptions {
  /** NATS_URL; unset or empty: the in-process directory. */
  natsUrl: string | undefined;
  /**
   * Local JSON file of the state (mode 0600): the NATS directory's snapshot, served when it
   * starts without NATS; the in-process directory's only store.
   */
  snapshotFile: string;
  /** SIGHTLINE_ADMIN_TOKEN: the key hashing secret is derived from it unless `keyHashSecret` is set. */
  adminToken: string;
  /** SIGHTLINE_KEY_HASH_SECRET (at least 16 bytes); unset or empty: derived from the admin token. */
  keyHashSecret?: string;
  /** Replicas of the bucket when it is created (SIGHTLINE_NATS_REPLICAS). Default 1. */
  replicas?: number;
  log?: (message: string) => void;
}

/**
 * The key hasher every process sharing a directory must agree on: from
 * SIGHTLINE_KEY_HASH_SECRET when set, else derived from the admin token (changing that token
 * then invalidates every key).
 */
export function hasherFromEnv(adminToken: string, keyHashSecret?: string): KeyHasher {
  if (keyHashSecret !== undefined && keyHashSecret !== '') {
    if (Buffer.byteLength(keyHashSecret, 'utf8') < 16) {
      throw new DirectoryError('SL_DIR_INVALID', 'SIGHTLINE_KEY_HASH_SECRET: must be at least 16 bytes', 'SIGHTLINE_KEY_HASH_SECRET');
    }
    return new KeyHasher(keyHashSecret);
  }
  return KeyHasher.fromAdminToken(adminToken);
}

export function directoryFromEnv(opts: DirectoryEnvOptions): Directory {
  const hasher = hasherFromEnv(opts.adminToken, opts.keyHashSecret);
  if (opts.natsUrl === undefined || opts.natsUrl.trim() === '') return new MemoryDirectory({ hasher, file: opts.snapshotFile });
  return new NatsDirectory({
    url: opts.natsUrl,
    hasher,
    snapshotFile: opts.snapshotFile,
    ...(opts.replicas !== undefined ? { replicas: opts.replicas } : {}),
    ...(opts.log !== undefined ? { log: opts.log } : {}),
  });
}

export interface AuthFromEnvOptions {
  /** NATS_URL of the app (unset: the in-process directory). */
  natsUrl: string | undefined;
  /** Where this process keeps its copy of the directory. */
  snapshotFile: string;
  log?: (message: string) => void;
  /** Default process.env. */
  env?: NodeJS.ProcessEnv;
}

/**
 * Authentication as the environment asks for it: off (null) without SIGHTLINE_ADMIN_TOKEN;
 * with it, the admin token and the directory (NATS when NATS_URL is set). Throws when the
 * token is too short to be a secret.
 */
export function authFromEnv(opts: AuthFromEnvOptions): { adminToken: string; directory: Directory } | null {
  const env = opts.env ?? process.env;
  const adminToken = (env.SIGHTLINE_ADMIN_TOKEN ?? '').trim();
  if (adminToken === '') return null;
  if (adminToken.length < 16) throw new DirectoryError('SL_DIR_INVALID', 'SIGHTLINE_ADMIN_TOKEN: must be at least 16 characters (e.g. `openssl rand -hex 32`)', 'SIGHTLINE_ADMIN_TOKEN');
  const directory = directoryFromEnv({
    natsUrl: opts.natsUrl,
    snapshotFile: opts.snapshotFile,
    adminToken,
    ...(env.SIGHTLINE_KEY_HASH_SECRET !== undefined ? { keyHashSecret: env.SIGHTLINE_KEY_HASH_SECRET } : {}),
    replicas: natsReplicasFromEnv(env),
    ...(opts.log !== undefined ? { log: opts.log } : {}),
  });
  return { adminToken, directory };
}
