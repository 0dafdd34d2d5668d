/**
 * `npm run sql -- "SELECT …"`: runs one read-only SELECT and prints a table (issue 13, item 5).
 *
 * With `npm start` running, the embedded engine (chdb) holds its data directory: no other
 * process can open it. So this goes through the running process's query API first
 * (`POST /v1/sql` with the admin token from SIGHTLINE_ADMIN_TOKEN), at SIGHTLINE_QUERY_URL or
 * else `http://127.0.0.1:<query port>` (QUERY_PORT or the configuration file's query.port,
 * default 8081). Only when nothing listens there does it open the store itself — chdb under
 * SIGHTLINE_DATA_DIR, or the ClickHouse server of CLICKHOUSE_URL — with the same statement
 * check and limits as the API (docs/api.md, "POST /v1/sql").
 *
 *   npm run sql -- "SELECT model, count() AS n FROM sightline.requests FINAL GROUP BY model"
 *   npm run sql -- --json "SELECT 1"        the API's JSON answer instead of a table
 *   echo "SELECT 1" | npm run sql           the statement from standard input
 *
 * Exit status: 0 answered, 1 refused or failed, 2 usage.
 */
import { loadConfigFromEnv } from '@sightline/config';
import { dataDir } from '@sightline/core';
import { readOnlyStatement, StatementRefusedError, storeFromEnv, StoreError, type SqlAnswer } from '@sightline/store';
import { sqlLimitsFromEnv } from './limits.js';

/** The answer as `POST /v1/sql` gives it. */
interface Answer extends SqlAnswer {
  row_count: number;
  elapsed_ms: number;
  engine: string;
}

class CliError extends Error {}

const USAGE = 'usage: npm run sql -- [--json] [--wide] "SELECT …"   (or the statement on standard input)';

/** Widest cell printed, in characters, unless --wide. */
const MAX_CELL = 60;

function queryUrl(): string {
  const explicit = process.env.SIGHTLINE_QUERY_URL;
  if (explicit !== undefined && explicit !== '') return explicit.replace(/\/+$/, '');
  let port = Number(process.env.QUERY_PORT || 8081);
  let host = process.env.QUERY_HOST || '127.0.0.1';
  try {
    const c = loadConfigFromEnv();
    port = c.query.port;
    host = c.query.host;
  } catch {
    // A configuration this tool cannot read (providers' variables unset, say): the defaults.
  }
  if (host === '0.0.0.0' || host === '::') host = '127.0.0.1';
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** Whether a fetch failed because nothing listens at the address (no server running). */
function nothingListens(e: unknown): boolean {
  const cause = (e as { cause?: { code?: unknown } }).cause;
  return cause !== undefined && cause.code === 'ECONNREFUSED';
}

/** The answer through a running query API; null when none runs at `url`. */
async function viaApi(url: string, query: string): Promise<Answer | null> {
  const token = process.env.SIGHTLINE_ADMIN_TOKEN ?? '';
  let res: Response;
  try {
    res = await fetch(`${url}/v1/sql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token === '' ? {} : { authorization: `Bearer ${token}` }) },
      body: JSON.stringify({ query }),
    });
  } catch (e) {
    if (nothingListens(e)) return null;
    const cause = (e as { cause?: unknown }).cause;
    throw new CliError(`the query API at ${url} did not answer: ${(e as Error).message}${cause instanceof Error ? ` (${cause.message})` : ''}`);
  }
  const text = await res.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new CliError(`${url} answered ${res.status} with something that is not the query API's JSON: ${text.slice(0, 200)}`);
  }
  if (res.status === 200) return body as Answer;
  const err = (body as { error?: { code?: string; message?: string } }).error;
  let hint = '';
  if (res.status === 401) hint = token === '' ? ' (set SIGHTLINE_ADMIN_TOKEN to the admin token of the running process)' : ' (SIGHTLINE_ADMIN_TOKEN is not the admin token of the running process)';
  if (res.status === 404) hint = ` (is ${url} Sightline's query API? set SIGHTLINE_QUERY_URL)`;
  throw new CliError(`${res.status} ${err?.code ?? ''}: ${err?.message ?? text.slice(0, 200)}${hint}`);
}

/** The answer from the store itself, when no query API runs. */
async function direct(query: string, url: string): Promise<Answer> {
  const statement = readOnlyStatement(query);
  const limits = sqlLimitsFromEnv();
  const embedded = (process.env.CLICKHOUSE_URL ?? '') === '';
  let store;
  try {
    store = await storeFromEnv();
  } catch (e) {
    // chdb refuses a data directory another process holds: `npm start` on another port.
    const hint = embedded ? `; if \`npm start\` is running with another query port, set SIGHTLINE_QUERY_URL to its query API (nothing answered at ${url})` : '';
    throw new CliError(`cannot open ${embedded ? `the embedded engine under ${dataDir()}` : 'the ClickHouse server'}: ${(e as Error).message}${hint}`);
  }
  try {
    const t0 = performance.now();
    const a = await store.select(statement, limits);
    return { ...a, row_count: a.rows.length, elapsed_ms: Math.round((performance.now() - t0) * 1000) / 1000, engine: store.kind };
  } finally {
    await store.close();
  }
}

function cellText(v: unknown, wide: boolean): string {
  let s = v === null ? 'NULL' : typeof v === 'string' ? v : JSON.stringify(v);
  // One line per row: control characters shown as escapes.
  s = s.replace(/[\n\r\t]/g, (c) => (c === '\n' ? '\\n' : c === '\r' ? '\\r' : '\\t'));
  return !wide && s.length > MAX_CELL ? `${s.slice(0, MAX_CELL - 1)}…` : s;
}

const NUMERIC = /^(Nullable\()?(U?Int\d+|Float\d+|Decimal)/;

/** The answer as an aligned text table, numbers right-aligned. */
function renderTable(a: SqlAnswer, wide = false): string {
  const head = a.columns.map((c) => c.name);
  const body = a.rows.map((r) => r.map((v) => cellText(v, wide)));
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((r) => (r[i] ?? '').length)));
  const right = a.columns.map((c) => NUMERIC.test(c.type));
  const line = (cells: string[]) => cells.map((c, i) => (right[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join(' | ').trimEnd();
  return [line(head), widths.map((w) => '-'.repeat(w)).join('-+-'), ...body.map(line)].join('\n') + '\n';
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  const json = args.includes('--json');
  const wide = args.includes('--wide');
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const unknown = args.find((a) => a.startsWith('--') && a !== '--json' && a !== '--wide');
  if (unknown !== undefined) {
    process.stderr.write(`unknown option ${unknown}\n${USAGE}\n`);
    return 2;
  }
  let query = args.filter((a) => a !== '--json' && a !== '--wide').join(' ');
  if (query.trim() === '' && !process.stdin.isTTY) query = await readStdin();
  if (query.trim() === '') {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  const url = queryUrl();
  let answer: Answer;
  try {
    answer = (await viaApi(url, query)) ?? (await direct(query, url));
  } catch (e) {
    if (e instanceof CliError) process.stderr.write(`${e.message}\n`);
    else if (e instanceof StatementRefusedError) process.stderr.write(`query refused: ${e.message}\n`);
    else if (e instanceof StoreError) process.stderr.write(`${e.message.split('\n')[0]}\n`);
    else throw e;
    return 1;
  }
  if (json) process.stdout.write(`${JSON.stringify(answer)}\n`);
  else {
    process.stdout.write(renderTable(answer, wide));
    process.stderr.write(`(${answer.row_count} ${answer.row_count === 1 ? 'row' : 'rows'}, ${answer.elapsed_ms} ms, ${answer.engine})\n`);
  }
  return 0;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    process.stderr.write(`${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exitCode = 1;
  },
);
