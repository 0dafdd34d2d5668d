import { test } from 'node:test';
import assert from 'node:assert/strict';
import { jsonEachRow } from '../src/rows.js';

const joined = (rows: object[]): string => rows.map((r) => `${JSON.stringify(r)}\n`).join('');

test('jsonEachRow is each row as JSON and a newline, in UTF-8, across chunk boundaries', () => {
  const rows = Array.from({ length: 20_000 }, (_, i) => ({ i, s: i % 7 === 0 ? `你好 🙂 ${i} "q" \\ \n` : `row ${i}`, lone: i === 42 ? '\ud800' : '' }));
  const chunks = jsonEachRow(rows);
  assert.ok(chunks.length > 1, `${chunks.length} chunk(s)`);
  assert.equal(Buffer.concat(chunks).toString('utf8'), joined(rows));
});

test('a row longer than a chunk gets a chunk of its own; no chunk is empty', () => {
  const rows = [{ a: 'small' }, { a: '🙂'.repeat(200_000) }, { a: 'after' }];
  const chunks = jsonEachRow(rows);
  assert.equal(Buffer.concat(chunks).toString('utf8'), joined(rows));
  assert.ok(chunks.every((c) => c.length > 0));
  assert.ok(chunks.some((c) => c.length > 256 * 1024));
  assert.deepEqual(jsonEachRow([]), []);
});
