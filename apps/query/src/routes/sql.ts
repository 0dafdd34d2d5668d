/**
 * `POST /v1/sql` (issue 13, item 5): `{"query":"SELECT …"}` → the columns and rows, on the
 * embedded engine (chdb) and on a ClickHouse server alike, for the admin token only.
 *
 * Read-only by two guards (packages/store statement.ts): the statement must be one SELECT
 * without SETTINGS, FORMAT, INTO or functions that reach outside the database, checked on
 * its tokens; and it runs with ClickHouse's `readonly = 1` and the query API's limits (time,
 * memory, rows, bytes of answer). A refusal is a 400 saying why; a limit, a 422.
 *
 * Team keys get a 501: Sightline cannot make it impossible for a team's SQL to read another
 * team's rows. ClickHouse 18.16, the oldest engine it supports, has no row policies
 * (`CREATE ROW POLICY` arrived in 20.x), and restricting every table reference of an
 * arbitrary statement needs a full ClickHouse SQL parser and an adversarial suite that proves
 * it (subqueries, joins, UNION, table functions, system tables, dictionaries, views) — which
 * we do not have. Teams read their rows through the other endpoints, which are scoped.
 */
import type { FastifyInstance } from 'fastify';
import { readOnlyStatement, StatementRefusedError, StoreError, type ReadLimits, type Store } from '@sightline/store';
import { QueryError } from '../errors.js';
import { ERRORS } from '../schemas.js';
import { MAX_STATEMENT_LENGTH } from '@sightline/store';

/** ClickHouse's READONLY (164): the statement tried what `readonly = 1` forbids. */
const READONLY = 164;

export interface SqlRouteOptions {
  /** The query API's store (read-limited). */
  store: Store;
  /** Limits of one statement: the query API's, and a bound on the answer's bytes (limits.ts `sqlLimitsFromEnv`). */
  limits: ReadLimits;
}

const BODY = {
  type: 'object',
  additionalProperties: false,
  required: ['query'],
  properties: {
    query: { type: 'string', minLength: 1, maxLength: MAX_STATEMENT_LENGTH, description: 'One SELECT statement (WITH … SELECT and UNION included); no SETTINGS, FORMAT or INTO' },
  },
} as const;

const ANSWER = {
  type: 'object',
  additionalProperties: false,
  required: ['columns', 'rows', 'row_count', 'elapsed_ms', 'engine'],
  properties: {
    columns: {
      type: 'array',
      items: { type: 'object', additionalProperties: false, required: ['name', 'type'], properties: { name: { type: 'string' }, type: { type: 'string', description: 'ClickHouse type, e.g. `UInt64`, `Array(String)`' } } },
    },
    rows: { type: 'array', description: 'One array per row, in column order; 64-bit integers as strings', items: { type: 'array', items: {} } },
    row_count: { type: 'integer' },
    elapsed_ms: { type: 'number' },
    engine: { type: 'string', enum: ['clickhouse', 'chdb'] },
  },
} as const;

/** The first line of ClickHouse's message, without the client's prefix, cut to a readable length. */
function engineMessage(e: StoreError): string {
  const text = e.message.replace(/^(ClickHouse|chdb) query failed: /, '').split('\n')[0] ?? '';
  return text.length > 500 ? `${text.slice(0, 500)}…` : text;
}

export function registerSqlRoutes(app: FastifyInstance, opts: SqlRouteOptions): void {
  app.post(
    '/v1/sql',
    {
      schema: {
        summary: 'Run one read-only SELECT (admin token only): columns and rows as JSON',
        tags: ['sql'],
        body: BODY,
        response: { 200: ANSWER, ...ERRORS },
      },
    },
    async (req) => {
      const c = req.caller;
      if (c !== null && c.kind === 'key') {
        throw new QueryError(
          'not_implemented',
          'SQL with a team key is not available: this deployment cannot guarantee that a statement reads only its team\'s rows (ClickHouse 18.16 has no row policies and Sightline does not rewrite queries). Use the other endpoints, which are scoped to the team, or ask an admin (docs/api.md, "POST /v1/sql")',
        );
      }
      const { query } = req.body as { query: string };
      let statement;
      try {
        statement = readOnlyStatement(query);
      } catch (e) {
        if (e instanceof StatementRefusedError) throw new QueryError('bad_parameter', `query refused: ${e.message}`, { field: 'query' });
        throw e;
      }
      const t0 = performance.now();
      try {
        const answer = await opts.store.select(statement, opts.limits);
        return { columns: answer.columns, rows: answer.rows, row_count: answer.rows.length, elapsed_ms: Math.round((performance.now() - t0) * 1000) / 1000, engine: opts.store.kind };
      } catch (e) {
        // A limit is the error handler's 422; an engine that did not answer, its 503. An
        // exception ClickHouse raised about the statement (syntax, unknown column, READONLY)
        // is the caller's to fix.
        if (e instanceof StoreError && e.limit === null && (e.rejected || e.clickhouseCode === READONLY)) {
          throw new QueryError('bad_parameter', `ClickHouse refused the query: ${engineMessage(e)}`, { field: 'query', cause: e });
        }
        throw e;
      }
    },
  );
}
