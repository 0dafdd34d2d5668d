import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DirectoryError, KeyHasher, MemoryDirectory, keyView, looksLikeKey, parseKeyInput, parseTeamSettings } from '@sightline/directory';

const hasher = new KeyHasher('a-server-secret-of-enough-bytes');
const T0 = Date.UTC(2026, 11, 1);

test('a created key works for its scopes and models, and stops when revoked, expired or rotated past its grace', async () => {
  const dir = new MemoryDirectory({ hasher });
  const { record, secret } = await dir.createKey(parseKeyInput({ team: 'alpha', name: 'ci', scopes: ['gateway', 'read'], models: ['gpt-*'], expires_at: '2027-01-01T00:00:00Z' }, T0), T0);
  assert.ok(looksLikeKey(secret), secret);
  assert.equal(record.team, 'alpha');
  assert.equal(dir.team('alpha')?.name, 'alpha', 'the team exists once it has a key');
  const ok = dir.check(secret, 'gateway', T0);
  assert.ok(ok.ok);
  assert.ok(dir.modelAllowed(ok.key, 'gpt-4o') && !dir.modelAllowed(ok.key, 'claude-3'));
  assert.deepEqual(dir.check(secret, 'content', T0), { ok: false, reason: 'scope', message: `The API key ${record.hint} (${record.id}) does not have the \`content\` scope.` });
  assert.equal((dir.check(secret + 'x', 'gateway', T0) as { reason: string }).reason, 'unknown');
  assert.equal((dir.check('', 'gateway', T0) as { reason: string }).reason, 'missing');
  assert.equal((dir.check(secret, 'gateway', Date.UTC(2027, 0, 1)) as { reason: string }).reason, 'expired');

  const rotated = await dir.rotateKey(record.id, 60, T0);
  assert.ok(rotated !== null && rotated.secret !== secret);
  assert.ok(dir.check(rotated.secret, 'gateway', T0).ok);
  assert.ok(dir.check(secret, 'gateway', T0 + 59_000).ok, 'the old secret works during the grace period');
  assert.equal((dir.check(secret, 'gateway', T0 + 60_000) as { reason: string }).reason, 'revoked');

  await dir.revokeKey(record.id, T0 + 1000);
  assert.equal((dir.check(rotated.secret, 'gateway', T0 + 2000) as { reason: string }).reason, 'revoked');
  assert.equal(await dir.rotateKey(record.id, 0, T0), null, 'a revoked key cannot be rotated');
});

test('list filters combine with AND; revoked keys only when asked', async () => {
  const dir = new MemoryDirectory({ hasher });
  const make = (team: string, name: string) => dir.createKey(parseKeyInput({ team, name, scopes: ['read'] }, T0), T0);
  const a1 = await make('alpha', 'ci');
  await make('alpha', 'dev');
  await make('beta', 'ci');
  assert.equal(dir.keys({ team: 'alpha' }).length, 2);
  assert.equal(dir.keys({ team: 'alpha', name: 'ci' }).length, 1);
  assert.equal(dir.keys({ name: 'ci' }).length, 2);
  await dir.revokeKey(a1.record.id, T0);
  assert.equal(dir.keys({ team: 'alpha' }).length, 1);
  assert.equal(dir.keys({ team: 'alpha', revoked: true }).length, 2);
  assert.ok(!('hash' in keyView(a1.record)));
});

test('input is checked field by field', () => {
  const bad = (body: unknown, field: string) => assert.throws(() => parseKeyInput(body, T0), (e: unknown) => e instanceof DirectoryError && e.field === field, field);
  bad({ team: 'a b', name: 'x', scopes: ['read'] }, 'team');
  bad({ team: 'a', name: '', scopes: ['read'] }, 'name');
  bad({ team: 'a', name: 'x', scopes: [] }, 'scopes');
  bad({ team: 'a', name: 'x', scopes: ['admin'] }, 'scopes[0]');
  bad({ team: 'a', name: 'x', scopes: ['read', 'write'] }, 'scopes[1]');
  bad({ team: 'a', name: 'x', scopes: ['read'], models: ['gpt 4'] }, 'models[0]');
  bad({ team: 'a', name: 'x', scopes: ['read'], expires_at: '2020-01-01T00:00:00Z' }, 'expires_at');
  bad({ team: 'a', name: 'x', scopes: ['read'], colour: 'red' }, 'colour');
  assert.throws(() => parseTeamSettings({ budget: 1 }), (e: unknown) => e instanceof DirectoryError && e.field === 'budget');
});

test('the embedded directory persists to a file readable by its owner only, with hashes and no secrets', async () => {
  const d = mkdtempSync(join(tmpdir(), 'sightline-dir-'));
  try {
    const file = join(d, 'directory.json');
    const dir = new MemoryDirectory({ hasher, file });
    const { secret } = await dir.createKey(parseKeyInput({ team: 'alpha', name: 'ci', scopes: ['gateway'] }, T0), T0);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.ok(!readFileSync(file, 'utf8').includes(secret.slice(3)));
    const again = new MemoryDirectory({ hasher, file });
    assert.ok(again.check(secret, 'gateway', T0).ok);
    assert.equal(again.status().loadedFrom, 'snapshot');
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
});

test('limits and budgets on keys and teams are checked field by field and kept', async () => {
  const dir = new MemoryDirectory({ hasher });
  const { record } = await dir.createKey(parseKeyInput({ team: 'a', name: 'x', scopes: ['gateway'], limits: { requests_per_minute: 60, tokens_per_minute: 1000 }, budget: { usd: 0.05, period: 'day' } }, T0), T0);
  assert.deepEqual([keyView(record).limits, keyView(record).budget], [{ requests_per_minute: 60, tokens_per_minute: 1000 }, { usd: 0.05, period: 'day' }]);
  const bad = (body: Record<string, unknown>, field: string) => assert.throws(() => parseKeyInput({ team: 'a', name: 'x', scopes: ['gateway'], ...body }, T0), (e: unknown) => e instanceof DirectoryError && e.field === field, field);
  bad({ limits: { requests_per_minute: 0 } }, 'limits.requests_per_minute');
  bad({ limits: { requests_per_minute: 1.5 } }, 'limits.requests_per_minute');
  bad({ limits: { rpm: 5 } }, 'limits.rpm');
  bad({ budget: { usd: -1, period: 'day' } }, 'budget.usd');
  bad({ budget: { usd: 1, period: 'week' } }, 'budget.period');
  assert.deepEqual(parseTeamSettings({ limits: { tokens_per_minute: 5 }, budget: { usd: 10, period: 'month' }, content_capture: 'none' }), { limits: { tokens_per_minute: 5 }, budget: { usd: 10, period: 'month' }, content_capture: 'none' });
});
