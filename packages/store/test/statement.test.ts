/**
 * The statement check of `POST /v1/sql` (statement.ts): what it accepts and how it passes it
 * on, and what it refuses — statements that are not one SELECT, SETTINGS, FORMAT and INTO at
 * any depth, functions that reach outside the database, and text two ClickHouse versions
 * could read two ways. The engines' side (readonly = 1, the same answers) is in
 * apps/query/test/sql.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readOnlyStatement, StatementRefusedError, MAX_STATEMENT_LENGTH } from '../src/index.js';

const accepted: [string, string][] = [
  ['SELECT 1', 'SELECT 1'],
  ['  select 1 ;  ', '  select 1'],
  ['SELECT 1; -- trailing comment', 'SELECT 1'],
  ['SELECT 1 -- to the end of the line', 'SELECT 1'],
  ['WITH 2 AS k SELECT k * 21 AS answer', 'WITH 2 AS k SELECT k * 21 AS answer'],
  ['((SELECT 1) UNION ALL (SELECT 2))', '((SELECT 1) UNION ALL (SELECT 2))'],
  ['SELECT name FROM system.settings', 'SELECT name FROM system.settings'],
  ['SELECT dummy AS "settings", dummy AS `format`, \'SETTINGS readonly = 0\' AS s FROM system.one', 'SELECT dummy AS "settings", dummy AS `format`, \'SETTINGS readonly = 0\' AS s FROM system.one'],
  ["SELECT format('{}-{}', 'a', 'b'), formatReadableSize(1024)", "SELECT format('{}-{}', 'a', 'b'), formatReadableSize(1024)"],
  // A doubled quote and an escaped one stay inside the string: the SETTINGS here is text.
  ["SELECT 'a'' SETTINGS readonly = 0 --'", "SELECT 'a'' SETTINGS readonly = 0 --'"],
  ["SELECT 'a\\' SETTINGS readonly = 0 --'", "SELECT 'a\\' SETTINGS readonly = 0 --'"],
  // A line comment ends at \n only (ClickHouse's lexer): all of this is comment.
  ['SELECT 1 -- \r SETTINGS readonly = 0', 'SELECT 1'],
  ['SELECT /* a comment with SETTINGS and INTO */ 1', 'SELECT /* a comment with SETTINGS and INTO */ 1'],
  ["SELECT 'ünïcödé 你好 🙂' AS s", "SELECT 'ünïcödé 你好 🙂' AS s"],
  ['SELECT file_name, url_path FROM t', 'SELECT file_name, url_path FROM t'],
  ['SELECT t.file FROM t', 'SELECT t.file FROM t'],
  ['SELECT 1.5e-3, 0x1F, .5', 'SELECT 1.5e-3, 0x1F, .5'],
];

for (const [text, runs] of accepted) {
  test(`accepted: ${JSON.stringify(text)}`, () => {
    assert.equal(readOnlyStatement(text).text, runs);
  });
}

const refused: [string, RegExp][] = [
  ['', /empty/],
  ['   -- only a comment', /empty/],
  [';', /empty/],
  ['DROP TABLE sightline.requests', /only SELECT/],
  ['CREATE TABLE x (a UInt8) ENGINE = Memory', /only SELECT/],
  ['ALTER TABLE sightline.requests DELETE WHERE 1', /only SELECT/],
  ['TRUNCATE TABLE sightline.requests', /only SELECT/],
  ['RENAME TABLE sightline.requests TO sightline.r', /only SELECT/],
  ["INSERT INTO sightline.requests (trace_id) VALUES ('x')", /only SELECT/],
  ['SET readonly = 0', /only SELECT/],
  ['KILL QUERY WHERE 1', /only SELECT/],
  ['SYSTEM SHUTDOWN', /only SELECT/],
  ['OPTIMIZE TABLE sightline.requests FINAL', /only SELECT/],
  ['DESCRIBE TABLE sightline.requests', /only SELECT/],
  ['EXPLAIN SELECT 1', /only SELECT/],
  ['(INSERT INTO t VALUES (1))', /only SELECT/],
  ['/* SELECT */ DROP TABLE sightline.requests', /only SELECT/],
  ['-- SELECT\nDROP TABLE sightline.requests', /only SELECT/],
  ['SELECT 1; DROP TABLE sightline.requests', /one statement/],
  ['SELECT 1; SELECT 2', /one statement/],
  ['SELECT 1;;', /one statement/],
  ['SELECT 1 SETTINGS readonly = 0', /SETTINGS/],
  ['select 1 settings max_execution_time = 1000', /SETTINGS/],
  ['SELECT * FROM (SELECT 1 SETTINGS readonly = 0)', /SETTINGS/],
  ["SELECT (SELECT getSetting('readonly') SETTINGS readonly = 0)", /SETTINGS/],
  ['SELECT 1 /* c */ SETTINGS readonly = 0', /SETTINGS/],
  ["SELECT '\\'' SETTINGS readonly = 0 --'", /SETTINGS/],
  ['WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x', /INTO/],
  ["SELECT 1 INTO OUTFILE '/tmp/x'", /INTO/],
  ['SELECT 1 FORMAT TSV', /FORMAT/],
  ['SELECT 1 FORMAT', /FORMAT/],
  ["SELECT file('/etc/passwd')", /file\(\) reads or writes outside/],
  ["SELECT FILE ('/etc/passwd')", /file\(\)/],
  ["SELECT `file`('/etc/passwd')", /file\(\)/],
  ["SELECT \"file\"('/etc/passwd')", /file\(\)/],
  ["SELECT * FROM file('/etc/passwd', 'LineAsString')", /file\(\)/],
  ["SELECT * FROM url('http://127.0.0.1:1/', 'TSV', 'x String')", /url\(\)/],
  ["SELECT * FROM remote('127.0.0.1:9000', system.one)", /remote\(\)/],
  ["SELECT * FROM remoteSecure('127.0.0.1:9440', system.one)", /remotesecure\(\)/],
  ["SELECT * FROM executable('x.sh', 'TSV', 'x String')", /executable\(\)/],
  ["SELECT * FROM s3('http://x/y.csv')", /s3\(\)/],
  ["SELECT * FROM mysql('h:3306', 'd', 't', 'u', 'p')", /mysql\(\)/],
  ['SELECT 1 /* unterminated', /comment is not closed/],
  ['SELECT 1 /* a /* nested */ SETTINGS readonly = 0 */', /comments inside comments/],
  ["SELECT 1 /* /* */ ' */ SETTINGS readonly = 0 -- '", /comments inside comments/],
  ["SELECT 'unterminated", /string is not closed/],
  ["SELECT 'ends with a backslash\\", /string is not closed/],
  ['SELECT "unterminated', /quoted identifier is not closed/],
  // `#` comments and `$$` strings of newer versions: refused rather than read one way.
  ["SELECT 1 # '\n SETTINGS readonly = 0 -- '", /character `#`/],
  ['SELECT $$ SETTINGS $$', /character `\$`/],
  ['SELECT 1 \\ 2', /character `\\`/],
  ['SELECT 1 \u00a0SETTINGS readonly = 0', /U\+00A0/],
  ['SELECT ünïcödé FROM t', /U\+00FC/],
  ['SELECT 1\u0000', /U\+0000/],
  [`SELECT '${'x'.repeat(MAX_STATEMENT_LENGTH)}'`, /longer than/],
];

for (const [text, reason] of refused) {
  test(`refused: ${JSON.stringify(text.slice(0, 80))}`, () => {
    assert.throws(() => readOnlyStatement(text), (e: unknown) => e instanceof StatementRefusedError && reason.test(e.message));
  });
}
