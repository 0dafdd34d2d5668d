import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Capture, RequestRecord, Spool } from '@sightline/capture';
import { MemoryBus, type BusPublisher } from '@sightline/bus';
import type { CaptureConfig } from '@sightline/config';
import { messageRecords } from '@sightline/core';
import { waitFor } from '../../../test/support/servers.js';
import { captureConfig, refusedRecord } from '../../../test/support/records.js';

const cfg: CaptureConfig = captureConfig({ batchMaxRequests: 5, queueMaxRequests: 1000, publishTimeoutMs: 500, spoolMaxBytes: 1 << 30 });

const rec = (seq: number): RequestRecord => refusedRecord({ seq });

/** A publisher over a MemoryBus that can be switched off and on, like NATS going away. */
class Switchable implements BusPublisher {
  up = false;
  constructor(readonly bus: MemoryBus) {}
  async publish(d: Uint8Array, id: string): Promise<void> {
    if (!this.up) throw new Error('NATS unreachable');
    await this.bus.publish(d, id);
  }
  isConnected(): boolean {
    return this.up;
  }
  async close(): Promise<void> {}
}

async function seqsOn(bus: MemoryBus): Promise<{ seqs: number[]; ids: string[] }> {
  const seqs: number[] = [];
  const ids: string[] = [];
  for (const m of await bus.fetch(1000, 50)) {
    ids.push(m.msgId);
    for (const r of messageRecords(m.data)) seqs.push(r.seq);
    await m.ack();
  }
  return { seqs, ids };
}

test('while NATS is away batches go to disk, and are replayed in order when it is back', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sl-spool-'));
  const bus = new MemoryBus();
  const pub = new Switchable(bus);
  const cap = new Capture({ instance: 'gw-s', config: cfg, publisher: pub, spoolDir: dir });
  for (let i = 1; i <= 23; i++) cap.record(rec(i));
  await waitFor('all 23 requests spooled', () => cap.stats.spooled === 23);
  assert.equal(readdirSync(dir).filter((f) => f.endsWith('.batch')).length, 5);
  assert.equal(cap.stats.spoolBatches, 5);
  assert.equal(cap.stats.queued, 0);
  pub.up = true;
  await waitFor('replay', () => cap.stats.replayed === 23, 10_000);
  const { seqs } = await seqsOn(bus);
  assert.deepEqual(seqs, Array.from({ length: 23 }, (_, i) => i + 1), 'every request once, in order');
  assert.equal(readdirSync(dir).length, 0);
  assert.equal(cap.stats.dropped, 0);
  await cap.close(1000);
  rmSync(dir, { recursive: true, force: true });
});

test('a new process replays what an earlier one left in the spool, ignoring torn writes', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sl-spool-'));
  const down = new Switchable(new MemoryBus());
  const first = new Capture({ instance: 'gw-old', config: cfg, publisher: down, spoolDir: dir });
  for (let i = 1; i <= 7; i++) first.record(rec(i));
  await waitFor('spooled', () => first.stats.spooled === 7);
  await first.close(200);
  writeFileSync(join(dir, '999999999999999-000000000.batch.tmp'), 'torn');
  // "Restart": a new instance on the same directory, NATS now up.
  const bus = new MemoryBus();
  const up = new Switchable(bus);
  up.up = true;
  const second = new Capture({ instance: 'gw-new', config: cfg, publisher: up, spoolDir: dir });
  assert.equal(second.stats.spoolBatches, 2);
  await waitFor('replayed after restart', () => second.stats.replayed === 7, 10_000);
  const { seqs, ids } = await seqsOn(bus);
  assert.deepEqual(seqs, [1, 2, 3, 4, 5, 6, 7]);
  assert.ok(ids.every((id) => id.startsWith('gw-old/')), 'replayed batches keep their message ids');
  assert.deepEqual(readdirSync(dir), []);
  await second.close(200);
  rmSync(dir, { recursive: true, force: true });
});

test('when the spool is full, capture drops and counts', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sl-spool-'));
  const cap = new Capture({ instance: 'gw-f', config: { ...cfg, queueMaxRequests: 5 }, publisher: new Switchable(new MemoryBus()), spoolDir: dir, spoolMaxBytes: 4000 });
  for (let i = 1; i <= 40; i++) cap.record(rec(i));
  await waitFor('every request accounted for', () => cap.stats.spooled + cap.stats.dropped + cap.stats.queued === 40 && cap.stats.dropped > 0, 5000);
  assert.ok(cap.stats.spoolBytes <= 4000);
  assert.equal(cap.stats.recorded, 40);
  await cap.close(100);
  rmSync(dir, { recursive: true, force: true });
});

test('a publisher that fails without saying so: batches spill after the failure, nothing lost', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sl-spool-'));
  const bus = new MemoryBus();
  let fail = true;
  const silent: BusPublisher = {
    publish: async (d, id) => {
      if (fail) throw new Error('timeout');
      await bus.publish(d, id);
    },
    close: async () => {},
  };
  const cap = new Capture({ instance: 'gw-t', config: cfg, publisher: silent, spoolDir: dir });
  for (let i = 1; i <= 12; i++) cap.record(rec(i));
  await waitFor('spooled after failures', () => cap.stats.spooled === 12);
  fail = false;
  await waitFor('replayed', () => cap.stats.replayed === 12, 10_000);
  const { seqs } = await seqsOn(bus);
  assert.deepEqual([...seqs].sort((x, y) => x - y), Array.from({ length: 12 }, (_, i) => i + 1));
  await cap.close(200);
  rmSync(dir, { recursive: true, force: true });
});

test('with a real NATS server, hundreds of requests per batch stay under its 1 MiB max_payload', async () => {
  const { NatsServer } = await import('../../../test/support/servers.js');
  const { ResilientNatsPublisher, NatsConsumer, connectNats } = await import('@sightline/bus');
  const nats = await NatsServer.start();
  const pub = new ResilientNatsPublisher(nats.url, 'gw-big');
  try {
    await pub.ready;
    const cap = new Capture({ instance: 'gw-big', config: { ...cfg, batchMaxRequests: 10_000, flushIntervalMs: 1000, batchMaxBytes: 512 * 1024 }, publisher: pub });
    const padded = () => {
      // A long error message travels in the record: ~3 KB each, 2.4 MB for 800.
      const r = rec(1);
      r.errorMessage = 'x'.repeat(2000);
      return r;
    };
    for (let i = 0; i < 800; i++) cap.record(padded());
    const left = await cap.flush(10_000);
    assert.equal(left, 0);
    assert.equal(cap.stats.published, 800);
    assert.equal(cap.stats.refused, 0);
    assert.ok(cap.stats.publishedBatches >= 4, `${cap.stats.publishedBatches} batches`);
    const con = await NatsConsumer.open(await connectNats(nats.url, 'c'));
    const got = await con.fetch(100, 1000);
    assert.equal(got.reduce((n, m) => n + messageRecords(m.data).length, 0), 800);
    assert.ok(got.every((m) => m.data.length <= 512 * 1024));
    await cap.close(100);
    await con.close();
  } finally {
    await pub.close();
    await nats.dispose();
  }
});

test('a spool directory held by another live process is refused; a stale claim is taken over', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sl-spool-'));
  writeFileSync(join(dir, '.lock'), String(process.ppid));
  assert.throws(() => Spool.claim(dir), /in use by process/);
  writeFileSync(join(dir, '.lock'), '999999999');
  Spool.claim(dir);
  Spool.claim(dir); // this process again: fine
  Spool.release(dir);
  assert.deepEqual(readdirSync(dir), []);
  rmSync(dir, { recursive: true, force: true });
});

test('spool files are readable by the gateway\'s user only (0600), in a directory created 0700: they may hold prompts (issue 11)', async () => {
  const parent = mkdtempSync(join(tmpdir(), 'sl-spool-mode-'));
  const dir = join(parent, 'spool');
  // A permissive umask must not widen them.
  const old = process.umask(0o000);
  try {
    const spool = new Spool(dir, 1 << 20);
    assert.equal(await spool.append('gw/1', Buffer.from('{"records":[]}')), true);
    const names = readdirSync(dir).filter((n) => n.endsWith('.batch'));
    assert.equal(names.length, 1);
    assert.equal(statSync(join(dir, names[0]!)).mode & 0o777, 0o600);
    assert.equal(statSync(dir).mode & 0o777, 0o700);
  } finally {
    process.umask(old);
    rmSync(parent, { recursive: true, force: true });
  }
});
