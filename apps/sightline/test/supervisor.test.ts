/**
 * The embedded mode's supervisor (src/supervisor.ts) with real forked processes: what a
 * store process fetched and did not acknowledge goes back to the bus the moment it dies,
 * and the restarted one writes it — well before the bus's own redelivery (120 s ack wait).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MemoryBus } from '@sightline/bus';
import { ChildSupervisor } from '../src/supervisor.js';

async function waitFor(what: string, check: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('a store process killed with batches lent: they are handed back at once and written by the next one, once', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sightline-supervisor-'));
  process.env.FIXTURE_DIR = dir;
  const bus = new MemoryBus({ ackWaitMs: 120_000 });
  const n = 20;
  for (let i = 0; i < n; i++) await bus.publish(Buffer.from(`batch ${i}`), `msg-${i}`);
  const logs: string[] = [];
  const sup = new ChildSupervisor({ entry: fileURLToPath(new URL('./fixtures/consumer-child.ts', import.meta.url)), bus, directory: null, governor: null, log: (m) => logs.push(m), minBackoffMs: 50 });
  const t0 = Date.now();
  try {
    sup.start();
    const firstPid = sup.pid;
    await waitFor('every batch acknowledged', () => bus.pending === 0, 90_000);
    assert.ok(Date.now() - t0 < 120_000, 'before the ack wait would have redelivered them');
    assert.equal(sup.starts, 2);
    assert.notEqual(sup.pid, firstPid);
    assert.ok(logs.some((l) => /exited \(SIGKILL\); 5 unacknowledged batch\(es\) handed back/.test(l)), logs.join('\n'));

    const lent = readFileSync(join(dir, 'lent'), 'utf8').split('\n');
    assert.equal(lent.length, 5);
    await waitFor('the acked file complete', () => readFileSync(join(dir, 'acked'), 'utf8').trim().split('\n').length === n, 5_000);
    const acked = readFileSync(join(dir, 'acked'), 'utf8').trim().split('\n').map((l) => l.split(' '));
    assert.deepEqual(acked.map((a) => a[0]).sort(), Array.from({ length: n }, (_, i) => `msg-${i}`).sort(), 'each batch acknowledged once');
    for (const [id, deliveries, , num] of acked) {
      assert.equal(deliveries, lent.includes(id!) ? '2' : '1', id);
      assert.equal(`msg-${num}`, id, 'the bytes crossed intact');
    }
  } finally {
    await sup.stop(5_000);
    await bus.close();
    rmSync(dir, { recursive: true, force: true });
  }
  assert.equal(sup.pid, null);
  assert.ok(!logs.some((l) => /exited/.test(l) && !/SIGKILL/.test(l)), 'the stopped child is not reported as a death');
});
