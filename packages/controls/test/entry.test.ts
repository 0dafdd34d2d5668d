/**
 * The pure parts: UTC windows and their slots, the KV key of a limit, nano-USD rounding, and
 * what a writer does with an entry (expired leases counted as spent; malformed entries refused).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeEntry, kvKey, nanoDown, nanoUp, windowEnd, windowStart, type LimitEntry } from '@sightline/controls';
import { sweepExpired } from '../src/entry.js';
import { windowSlot } from '../src/windows.js';

test('windows are UTC minutes, days and calendar months; the reset is the next window; consecutive windows alternate slots', () => {
  const t = Date.UTC(2027, 1, 28, 23, 59, 59, 999); // the last millisecond of February 2027
  assert.equal(windowStart('minute', t), Date.UTC(2027, 1, 28, 23, 59));
  assert.equal(windowEnd('minute', windowStart('minute', t)), Date.UTC(2027, 2, 1, 0, 0));
  assert.equal(windowStart('day', t), Date.UTC(2027, 1, 28));
  assert.equal(windowEnd('day', windowStart('day', t)), Date.UTC(2027, 2, 1));
  assert.equal(windowStart('month', t), Date.UTC(2027, 1, 1));
  assert.equal(windowEnd('month', Date.UTC(2027, 1, 1)), Date.UTC(2027, 2, 1));
  assert.equal(windowEnd('month', Date.UTC(2027, 11, 1)), Date.UTC(2028, 0, 1), 'December rolls into the next year');
  assert.equal(windowStart('month', t + 1), Date.UTC(2027, 2, 1));
  for (const p of ['minute', 'day', 'month'] as const) {
    let s = windowStart(p, t);
    const slots: number[] = [];
    for (let i = 0; i < 4; i++) {
      slots.push(windowSlot(p, s));
      s = windowEnd(p, s);
    }
    assert.ok(slots[0] !== slots[1] && slots[1] !== slots[2] && slots[2] !== slots[3], `${p}: ${slots.join('')}`);
  }
});

test('KV keys: one per kind, scope, id and slot; ids outside [A-Za-z0-9_-] (team names with dots) are escaped reversibly', () => {
  assert.equal(kvKey('requests', 'key', 'key_AbC123', 0), 'req.key.key_AbC123.0');
  assert.equal(kvKey('tokens', 'team', 'research', 1), 'tok.team.research.1');
  assert.equal(kvKey('budget', 'team', 'a.b', 0), 'usd.team.a=002Eb.0');
  assert.notEqual(kvKey('budget', 'team', 'a.b', 0), kvKey('budget', 'team', 'a=002Eb', 0), '"=" is escaped too');
  assert.match(kvKey('budget', 'team', 'é x', 1), /^usd\.team\.=00E9=0020x\.1$/);
});

test('nano-USD: costs round up, budgets round down, float noise absorbed', () => {
  assert.equal(nanoUp(0.0003), 300_000);
  assert.equal(nanoUp(0.000_000_000_1), 1);
  assert.equal(nanoUp(0), 0);
  assert.equal(nanoDown(0.05), 50_000_000);
  assert.equal(nanoDown(0.1 + 0.2), 300_000_000);
  assert.equal(nanoDown(1e12), Number.MAX_SAFE_INTEGER, 'capped where integers stop being exact');
});

test('a writer counts expired leases of other holders as spent, keeps its own and live ones', () => {
  const e: LimitEntry = {
    v: 1,
    period: 'day',
    start: 0,
    limit: 100,
    used: 10,
    presumed: 0,
    updated: 0,
    holders: { me: { lease: 5, expires: 1 }, dead: { lease: 7, expires: 1000 }, live: { lease: 3, expires: 5000 }, debtor: { lease: -2, expires: 1000 } },
  };
  assert.equal(sweepExpired(e, 2000, 'me'), 2);
  assert.equal(e.used, 17, 'the dead lease is spent; a negative one is dropped (its excess is in used already)');
  assert.equal(e.presumed, 7);
  assert.deepEqual(Object.keys(e.holders).sort(), ['live', 'me']);
});

test('decodeEntry refuses what is not an entry', () => {
  const ok = { v: 1, period: 'minute', start: 0, limit: 1, used: 0, presumed: 0, updated: 0, holders: { a: { lease: 1, expires: 2, busy: 0, seq: 3 } } };
  const enc = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));
  assert.deepEqual(decodeEntry(enc(ok)), ok);
  assert.equal(decodeEntry(enc({ ...ok, v: 2 })), null);
  assert.equal(decodeEntry(enc({ ...ok, period: 'week' })), null);
  assert.equal(decodeEntry(enc({ ...ok, holders: { a: { lease: '1', expires: 2 } } })), null);
  assert.equal(decodeEntry(enc({ ...ok, holders: { a: { lease: 1, expires: 2, busy: 'x' } } })), null);
  assert.equal(decodeEntry(new TextEncoder().encode('{not json')), null);
});
