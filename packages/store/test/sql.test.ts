import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sql, literal, ident, table, join, type Sql, type Store } from '@sightline/store';

test('strings are quoted with every special character escaped', () => {
  assert.equal(literal("it's"), "'it\\'s'");
  assert.equal(literal('a\\b'), "'a\\\\b'");
  assert.equal(literal("x' OR 1=1 --"), "'x\\' OR 1=1 --'");
  assert.equal(literal('l1\nl2\r\t\0'), "'l1\\nl2\\r\\t\\0'");
  assert.equal(literal('héllo 你好'), "'héllo 你好'");
  assert.equal(literal("\\'"), "'\\\\\\''");
});

test('numbers, bigints, booleans, null, dates and arrays', () => {
  assert.equal(literal(42), '42');
  assert.equal(literal(-1.5), '-1.5');
  assert.equal(literal(18446744073709551615n), '18446744073709551615');
  assert.equal(literal(true), '1');
  assert.equal(literal(null), 'NULL');
  assert.equal(literal(new Date(1732900000123)), "toDateTime(1732900000, 'UTC')");
  assert.equal(literal(['a', 1]), "['a', 1]");
  assert.throws(() => literal(Number.NaN), TypeError);
  assert.throws(() => literal(Infinity), TypeError);
  assert.throws(() => literal(new Date('nope')), TypeError);
});

test('identifiers are checked, fragments are inserted verbatim', () => {
  assert.equal(ident('spans').text, 'spans');
  assert.throws(() => ident('spans; DROP TABLE x'), TypeError);
  assert.throws(() => ident('1abc'), TypeError);
  assert.throws(() => table('db', 'a.b'), TypeError);
  assert.equal(table('sightline', 'spans').text, 'sightline.spans');
  assert.equal(literal(sql`now()`), 'now()');
});

test('the sql tag binds every interpolated value', () => {
  const id = "abc' OR '1'='1";
  assert.equal(
    sql`SELECT * FROM ${table('db', 'spans')} WHERE trace_id = ${id} AND n > ${3}`.text,
    "SELECT * FROM db.spans WHERE trace_id = 'abc\\' OR \\'1\\'=\\'1' AND n > 3",
  );
  assert.equal(sql`SELECT 1`.text, 'SELECT 1');
});

test('join puts the separator between fragments, and their values stay bound', () => {
  const conds = [sql`a = ${1}`, sql`b = ${"x' OR 1=1"}`, sql`c IS NULL`];
  assert.equal(join(conds, sql` AND `).text, "a = 1 AND b = 'x\\' OR 1=1' AND c IS NULL");
  assert.equal(join([sql`only`], sql`, `).text, 'only');
  assert.equal(join([], sql`, `).text, '');
  assert.equal(sql`SELECT x WHERE ${join(conds.slice(0, 2), sql` OR `)}`.text, "SELECT x WHERE a = 1 OR b = 'x\\' OR 1=1'");
});

test('text that went through a string is a value again, never SQL', () => {
  const frag = sql`name = ${'n'}`;
  // A fragment turned into a string (by a template or `+`) is bound as a string literal.
  const asString: string = `${frag}`;
  assert.equal(sql`WHERE ${asString}`.text, "WHERE 'name = \\'n\\''");
  assert.equal(sql`WHERE ${frag}`.text, "WHERE name = 'n'");
});

/**
 * Compile-time checks: tsconfig.tests.json type-checks this file, and every
 * `@ts-expect-error` below fails the typecheck if the line compiles. Never called.
 */
export function refusedByTheCompiler(store: Store, userInput: string): void {
  // @ts-expect-error a plain string is not SQL
  void store.query('SELECT 1');
  // @ts-expect-error a plain string is not SQL
  void store.command(`ALTER TABLE t DROP PARTITION ${userInput}`);
  // @ts-expect-error an object shaped like a fragment is not one (the brand is nominal)
  void store.query({ text: 'SELECT 1' });
  let where: Sql = sql`a = ${1}`;
  // @ts-expect-error concatenating fragments gives a string, not SQL
  where = where + sql` AND b = ${userInput}`;
  // @ts-expect-error same with a template string
  where = `${where} AND b = ${userInput}`;
  // @ts-expect-error the separator of join must be SQL too
  void join([where], ' AND ');
  void store.query(join([where, sql`b = ${userInput}`], sql` AND `));
}
