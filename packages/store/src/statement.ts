/**
 * SQL a person wrote (`POST /v1/sql`, `npm run sql`), checked before it runs: one read-only
 * statement, nothing that changes settings, writes files or reaches outside the database.
 *
 * This check is one of two guards. The other is ClickHouse's own `readonly = 1`, with which
 * every such statement runs (store.ts `select`): it refuses writes, DDL, `SET` and table
 * functions on ClickHouse 18.16 and on chdb (26.x). Neither is enough alone:
 * - `readonly` lets through `KILL QUERY` (both engines), `SELECT … INTO OUTFILE` and the
 *   scalar `file('/any/path')` (chdb: the embedded engine is clickhouse-local, whose files
 *   are the host's), and on chdb a `SETTINGS` clause in a subquery can lower `readonly` and
 *   the limits for that subquery (all checked on chdb 3.4 / ClickHouse 26.7).
 * - A check of text alone is a string filter; this one tokenizes the statement the way
 *   ClickHouse's lexer does (strings, quoted identifiers, comments), and refuses anything
 *   where two ClickHouse versions could split the text differently (nested comments, `#`
 *   comments and `$$` strings of newer versions), so that the keywords it sees are the ones
 *   the engine sees.
 *
 * What it accepts: a single `SELECT` (or `WITH … SELECT`, or a parenthesised one, UNION
 * included), optionally followed by `;`, without `SETTINGS`, `FORMAT` or `INTO` clauses
 * anywhere, without the functions in OUTSIDE_FUNCTIONS, using ASCII outside strings and
 * quoted identifiers.
 */
import { StatementRefusedError } from './errors.js';

/** A statement `readOnlyStatement` accepted. Only this module makes one. */
class ReadOnlyStatement {
  readonly #text: string;
  constructor(text: string) {
    this.#text = text;
  }
  /** The statement as it will run: comments and spacing kept, a final `;` and trailing comments removed. */
  get text(): string {
    return this.#text;
  }
}

export type { ReadOnlyStatement };

type TokenKind = 'word' | 'quoted' | 'string' | 'number' | 'op';

interface Token {
  kind: TokenKind;
  /** A word in upper case; a quoted identifier unquoted (lower case kept); an operator as written. */
  value: string;
  end: number;
}

/** Longest statement accepted, in UTF-16 units. */
export const MAX_STATEMENT_LENGTH = 100_000;

/**
 * Functions and table functions that read or write outside the database (host files,
 * URLs, other servers, programs). `readonly = 1` already refuses the table functions on
 * both engines (tested); they are refused here as well, by name, bare or quoted.
 */
const OUTSIDE_FUNCTIONS: ReadonlySet<string> = new Set(
  [
    'file', 'fileCluster', 'url', 'urlCluster', 'remote', 'remoteSecure', 'cluster', 'clusterAllReplicas',
    's3', 's3Cluster', 'gcs', 'oss', 'cosn', 'azureBlobStorage', 'azureBlobStorageCluster', 'hdfs', 'hdfsCluster',
    'mysql', 'postgresql', 'mongodb', 'redis', 'sqlite', 'jdbc', 'odbc', 'executable', 'input',
    'deltaLake', 'deltaLakeCluster', 'hudi', 'hudiCluster', 'iceberg', 'icebergS3', 'icebergAzure', 'icebergHDFS', 'icebergLocal',
    'catboostEvaluate', 'modelEvaluate', 'arrowFlight', 'ytsaurus', 'prometheusQuery', 'timeSeriesData',
  ].map((n) => n.toLowerCase()),
);

const OPERATORS = '()[]{},;.+-*/%<>=!?:|&^~@';

function isWordStart(c: string): boolean {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c === '_';
}
function isWordChar(c: string): boolean {
  return isWordStart(c) || (c >= '0' && c <= '9');
}

function refuse(reason: string): never {
  throw new StatementRefusedError(reason);
}

/**
 * The statement's tokens, comments left out. Throws StatementRefusedError for what it
 * cannot be sure ClickHouse reads the same way.
 */
function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text[i]!;
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '\f' || c === '\v') {
      i++;
      continue;
    }
    // `--` comment: to the end of the line, as ClickHouse's lexer (only `\n` ends it).
    if (c === '-' && text[i + 1] === '-') {
      const nl = text.indexOf('\n', i + 2);
      i = nl === -1 ? n : nl + 1;
      continue;
    }
    if (c === '/' && text[i + 1] === '*') {
      const close = text.indexOf('*/', i + 2);
      if (close === -1) refuse('a /* comment is not closed');
      // ClickHouse 18.16 ends a comment at the first `*/`; newer versions nest them. A
      // comment inside a comment would be read two ways: refused.
      if (text.indexOf('/*', i + 2) !== -1 && text.indexOf('/*', i + 2) < close) refuse('comments inside comments are not accepted');
      i = close + 2;
      continue;
    }
    if (c === "'" || c === '"' || c === '`') {
      // A string or a quoted identifier: a backslash takes the next character as it is, and
      // a doubled quote is one quote (both as ClickHouse reads them).
      let j = i + 1;
      let value = '';
      for (;;) {
        if (j >= n) refuse(c === "'" ? 'a string is not closed' : 'a quoted identifier is not closed');
        const d = text[j]!;
        if (d === '\\') {
          if (j + 1 >= n) refuse('a string is not closed');
          value += text[j + 1]!;
          j += 2;
          continue;
        }
        if (d === c) {
          if (text[j + 1] === c) {
            value += c;
            j += 2;
            continue;
          }
          j++;
          break;
        }
        value += d;
        j++;
      }
      tokens.push({ kind: c === "'" ? 'string' : 'quoted', value, end: j });
      i = j;
      continue;
    }
    if (isWordStart(c)) {
      let j = i + 1;
      while (j < n && isWordChar(text[j]!)) j++;
      tokens.push({ kind: 'word', value: text.slice(i, j).toUpperCase(), end: j });
      i = j;
      continue;
    }
    if (c >= '0' && c <= '9') {
      // Digits, letters and dots: 1, 1.5, 1e5, 0x1F. Signs of exponents are operators here,
      // which changes nothing about where strings and comments are.
      let j = i + 1;
      while (j < n && (isWordChar(text[j]!) || text[j] === '.')) j++;
      tokens.push({ kind: 'number', value: text.slice(i, j), end: j });
      i = j;
      continue;
    }
    if (OPERATORS.includes(c)) {
      tokens.push({ kind: 'op', value: c, end: i + 1 });
      i++;
      continue;
    }
    // `#` and `#!` comments and `$$` strings exist in newer versions only; `\`, non-ASCII
    // and control characters have no meaning outside strings. Read two ways, or not at all:
    // refused.
    const code = c.codePointAt(0)!;
    const shown = code >= 0x21 && code <= 0x7e ? `\`${c}\`` : `U+${code.toString(16).toUpperCase().padStart(4, '0')}`;
    refuse(`the character ${shown} is only accepted inside strings and quoted identifiers`);
  }
  return tokens;
}

/**
 * Checks that `text` is one read-only statement as the module comment describes, and
 * returns it ready to run; throws StatementRefusedError saying why not.
 */
export function readOnlyStatement(text: string): ReadOnlyStatement {
  if (text.length > MAX_STATEMENT_LENGTH) refuse(`the statement is longer than ${MAX_STATEMENT_LENGTH} characters`);
  const tokens = tokenize(text);
  // A final `;` is allowed (people type it); any other ends one statement and starts another.
  let last = tokens.length;
  if (last > 0 && tokens[last - 1]!.kind === 'op' && tokens[last - 1]!.value === ';') last--;
  if (last === 0) refuse('the statement is empty');
  const first = tokens.find((t) => t.kind !== 'op' || t.value !== '(');
  if (first === undefined || first.kind !== 'word' || (first.value !== 'SELECT' && first.value !== 'WITH')) {
    refuse('only SELECT statements (WITH … SELECT, UNION included) are accepted');
  }
  for (let k = 0; k < last; k++) {
    const t = tokens[k]!;
    const prev = k > 0 ? tokens[k - 1]! : null;
    const next = k + 1 < last ? tokens[k + 1]! : null;
    const afterDot = prev !== null && prev.kind === 'op' && prev.value === '.';
    if (t.kind === 'op' && t.value === ';') refuse('one statement at a time');
    if (t.kind === 'word' && !afterDot) {
      // A column or table of these names can still be written quoted ("settings").
      if (t.value === 'SETTINGS') refuse('SETTINGS clauses are not accepted: the limits are fixed by the server');
      if (t.value === 'INTO') refuse('INTO is not accepted (INSERT INTO, INTO OUTFILE)');
      if (t.value === 'FORMAT' && !(next !== null && next.kind === 'op' && next.value === '(')) refuse('FORMAT clauses are not accepted: the answer is JSON');
    }
    if ((t.kind === 'word' || t.kind === 'quoted') && !afterDot && next !== null && next.kind === 'op' && next.value === '(' && OUTSIDE_FUNCTIONS.has(t.value.toLowerCase())) {
      refuse(`the function ${t.kind === 'quoted' ? t.value : t.value.toLowerCase()}() reads or writes outside the database and is not accepted`);
    }
  }
  // Up to the last token kept: drops the final `;` and comments after it, so nothing the
  // engine appends (FORMAT, SETTINGS) can end up inside a trailing comment.
  return new ReadOnlyStatement(text.slice(0, tokens[last - 1]!.end));
}
