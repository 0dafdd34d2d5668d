/**
 * The in-process governor's file: a budget survives a restart, and a process SIGKILLed while
 * holding leases leaves them in the file, where they expire like a crashed replica's —
 * counted as spent, never handed out twice.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { MemoryGovernor, admitOrWait, type Admitted } from '@sightline/controls';
import { TestClock, admission, perDay, uid } from './support/governors.js';

const dir = mkdtempSync(join(tmpdir(), 'sightline-controls-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('a budget survives a restart of the in-process governor (close, then open the same file)', async () => {
  const clock = new TestClock(1);
  const file = join(dir, 'clean.json');
  const keyId = uid('key');
  const budget = perDay(0.01);
  const a = admission({ keyId, keyBudget: budget, costUsd: 0.004 });
  const g1 = new MemoryGovernor({ clock: clock.now, file });
  const v = (await admitOrWait(g1, a, clock.now)) as Admitted;
  assert.equal(v.ok, true);
  g1.settle(v.ticket, { tokens: 1, costUsd: 0.003 }, clock.now());
  await g1.close();
  assert.equal(statSync(file).mode & 0o777, 0o600);

  const g2 = new MemoryGovernor({ clock: clock.now, file });
  const u = (await g2.usage({ key: { id: keyId, limits: null, budget } }, clock.now()))[0]!;
  assert.ok(Math.abs(u.used - 0.003) < 1e-12, `used ${u.used}`);
  assert.equal(u.reserved, 0, 'close gave the lease back');
  assert.equal((await admitOrWait(g2, a, clock.now)).ok, true);
  assert.equal((await admitOrWait(g2, a, clock.now)).ok, false, '0.003 + 0.004 + 0.004 > 0.01');
  await g2.close();
});

test('a process SIGKILLed holding leases: they are on disk, unusable until they expire, then counted as spent', async () => {
  const clock = new TestClock(1);
  const file = join(dir, 'crash.json');
  const keyId = uid('key');
  const budget = perDay(0.01);
  const a = admission({ keyId, keyBudget: budget, costUsd: 0.001 });
  const script = fileURLToPath(new URL('./support/holder.ts', import.meta.url));
  const cfg = { url: null, file, holderId: 'dead-process', offsetMs: clock.now() - Date.now(), leaseTtlMs: 60_000, admission: a, count: 3 };
  const child = spawn(process.execPath, ['--import', 'tsx', script, JSON.stringify(cfg)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const line = await new Promise<string>((resolve) => createInterface({ input: child.stdout! }).once('line', resolve));
  assert.equal((JSON.parse(line) as { admitted: number }).admitted, 3);
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await exited;

  const saved = JSON.parse(readFileSync(file, 'utf8')) as { entries: Record<string, { holders: Record<string, { lease: number }> }> };
  const lease = Object.values(saved.entries)[0]!.holders['dead-process']!.lease;
  assert.ok(lease >= 3_000_000, `the three reservations were leased before use (${lease})`);

  const g = new MemoryGovernor({ clock: clock.now, file });
  let admitted = 0;
  while ((await admitOrWait(g, a, clock.now)).ok) admitted++;
  assert.equal(admitted, Math.floor((10_000_000 - lease) / 1_000_000), 'the dead lease is not handed out again');
  clock.advance(61_000);
  const u = (await g.usage({ key: { id: keyId, limits: null, budget } }, clock.now()))[0]!;
  assert.ok(Math.abs(u.presumed - lease / 1e9) < 1e-12, `presumed ${u.presumed}`);
  assert.equal((await admitOrWait(g, a, clock.now)).ok, false, 'expired, and counted as spent: still no capacity');
  clock.toNext('day');
  assert.equal((await admitOrWait(g, a, clock.now)).ok, true, 'the next day starts whole');
  await g.close();
});
