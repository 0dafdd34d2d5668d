import type { FastifyInstance } from 'fastify';
import type { ReadLimits, Store } from '@sightline/store';
import type { PriceOf } from '@sightline/config';
import { buildQueryServer } from './server.js';
import { readLimitsFromEnv, searchMaxBytesFromEnv, sqlMaxResultBytesFromEnv } from './limits.js';
import type { QueryAuth } from './auth.js';
import type { Governor } from '@sightline/controls';

export interface StartQueryOptions {
  store: Store;
  port: number;
  /** Listening address; default 127.0.0.1. */
  host?: string;
  log?: (msg: string) => void;
  priceOf?: PriceOf;
  /** Default: from QUERY_MAX_EXECUTION_TIME_S, QUERY_MAX_MEMORY_BYTES, QUERY_MAX_RESULT_ROWS (limits.ts). */
  limits?: ReadLimits;
  /** Default: from QUERY_SEARCH_MAX_BYTES (limits.ts). */
  searchMaxBytes?: number;
  /** Default: from QUERY_SQL_MAX_RESULT_BYTES (limits.ts). */
  sqlMaxResultBytes?: number;
  /** Authentication; null or absent: open (every caller is the admin). */
  auth?: QueryAuth | null;
  /** Rate limits and budgets (GET /v1/budget; only `usage` is read). */
  governor?: Pick<Governor, 'usage'> | null;
  /** Signs `GET /v1/requests` cursors (server.ts); default derived from the admin token, else random. */
  cursorSecret?: string | Uint8Array;
}

export interface QueryHandle {
  app: FastifyInstance;
  url: string;
  close(): Promise<void>;
}

export async function startQuery(opts: StartQueryOptions): Promise<QueryHandle> {
  const app = buildQueryServer({ store: opts.store, log: opts.log, priceOf: opts.priceOf, limits: opts.limits ?? readLimitsFromEnv(), searchMaxBytes: opts.searchMaxBytes ?? searchMaxBytesFromEnv(), sqlMaxResultBytes: opts.sqlMaxResultBytes ?? sqlMaxResultBytesFromEnv(), auth: opts.auth ?? null, cursorSecret: opts.cursorSecret, governor: opts.governor ?? null });
  // Loopback unless told otherwise (QUERY_HOST in the shipped file).
  const host = opts.host ?? '127.0.0.1';
  await app.listen({ port: opts.port, host });
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
  return { app, url: `http://${host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host}:${port}`, close: () => app.close() };
}
