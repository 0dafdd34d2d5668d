import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sql, literal, ident, table, SqlFragment } from '@sightline/store';

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
  assert.equal(literal(new SqlFragment('now()')), 'now()');
});

test('the sql tag binds every interpolated value', () => {
  const id = "abc' OR '1'='1";
  assert.equal(
    sql`SELECT * FROM ${table('db', 'spans')} WHERE trace_id = ${id} AND n > ${3}`,
    "SELECT * FROM db.spans WHERE trace_id = 'abc\\' OR \\'1\\'=\\'1' AND n > 3",
  );
  assert.equal(sql`SELECT 1`, 'SELECT 1');
});
