/**
 * Capture batches published from the content thread on a NATS connection of its own (issue 15),
 * with the serving thread's publisher as the fallback: a real nats-server, real JetStream.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type NatsConnection } from 'nats';
import { ResilientNatsPublisher, STREAM_NAME } from '@sightline/bus';
import { Capture, RequestRecord, keepContent } from '@sightline/capture';
import type { CaptureBatchV2 } from '@sightline/core';
import { redactSecrets } from '@sightline/redact';
import { ContentWorker, ThreadPublisher } from '../src/content-worker.js';
import { captureConfig, servedRecord } from '../../../test/support/records.js';
import { NatsServer, waitFor } from '../../../test/support/servers.js';

const LEAKED = 'sk-proj-' + 'Zx8kQ2vLm9TpR4wYb7NcJ1hG5sDf3aUe0iOq6'.repeat(2);
const CONTENT = { maxBytes: 256 * 1024, keepBase64: false, redactSecrets };

let nats: NatsServer;
let nc: NatsConnection;
let serving: ResilientNatsPublisher;

before(async () => {
  nats = await NatsServer.start(null, { monitor: true });
  // The serving thread's publisher creates the stream, as the gateway's does at start.
  serving = new ResilientNatsPublisher(nats.url, 'gw-test');
  await serving.ready;
  nc = await connect({ servers: nats.url });
});

after(async () => {
  await nc?.close();
  await serving?.close();
  await nats?.dispose();
});

function bus(name: string): { url: string; name: string; stream: Record<string, never> } {
  return { url: nats.url, name, stream: {} };
}

/** Every message now in the capture stream. */
async function streamed(): Promise<Uint8Array[]> {
  const jsm = await nc.jetstreamManager();
  const { first_seq, last_seq, messages } = (await jsm.streams.info(STREAM_NAME)).state;
  const out: Uint8Array[] = [];
  if (messages === 0) return out;
  for (let seq = first_seq; seq <= last_seq; seq++) {
    const m = await jsm.streams.getMessage(STREAM_NAME, { seq }).catch(() => null);
    if (m !== null) out.push(m.data);
  }
  return out;
}

async function purge(): Promise<void> {
  await (await nc.jetstreamManager()).streams.purge(STREAM_NAME);
}

/** A batch-sized probe in shared memory, as the worker's answers are. */
function probe(text: string): Uint8Array {
  const b = new Uint8Array(new SharedArrayBuffer(Buffer.byteLength(text)));
  b.set(Buffer.from(text));
  return b;
}

/** Publishes probes until one goes through the thread (its connection is up), at most 20 s. */
async function threadUp(w: ContentWorker, tag: string): Promise<number> {
  let n = 0;
  await waitFor(`${tag}: a publish through the content thread`, async () => {
    await w.publish(probe(`probe ${tag} ${n}`), `probe-${tag}-${n}`, 5000, serving);
    n++;
    return w.publishes.thread > 0;
  });
  return n;
}

test('the content thread publishes on its own connection; a message id already stored is not stored again', async () => {
  await purge();
  const w = new ContentWorker(undefined, 1000, bus('gw-test-capture'));
  try {
    w.warm();
    const probes = await threadUp(w, 'own');
    const before = w.publishes.thread;
    for (let i = 0; i < 5; i++) await w.publish(probe(`batch ${i}`), `own/${i}`, 5000, serving);
    // The same id again (as the fallback sends a batch the thread may have stored): stored once.
    await w.publish(probe('batch 0 again'), 'own/0', 5000, serving);
    assert.equal(w.publishes.thread - before, 6);
    const texts = (await streamed()).map((d) => Buffer.from(d).toString('utf8'));
    assert.equal(texts.length, probes + 5);
    assert.deepEqual(texts.slice(-5), ['batch 0', 'batch 1', 'batch 2', 'batch 3', 'batch 4']);
    // The thread has a connection of its own: the server lists it by name, beside the serving thread's.
    const connz = (await (await fetch(`http://127.0.0.1:${nats.monitorPort}/connz`)).json()) as { connections: { name?: string }[] };
    const names = connz.connections.map((c) => c.name);
    assert.ok(names.includes('gw-test-capture') && names.includes('gw-test'), names.join(', '));
    assert.ok(!w.starved);
  } finally {
    await w.close();
  }
});

test('a publish the thread does not take up in time is made by the serving thread; then the thread is left alone', async () => {
  await purge();
  // 1 ms: the thread's start alone takes longer.
  const w = new ContentWorker(undefined, 1, bus('gw-test-late'));
  try {
    await w.publish(probe('first'), 'late/1', 5000, serving);
    assert.equal(w.publishes.servingThread, 1);
    assert.ok(w.starved, 'starved after an unanswered publish');
    // Starved: straight to the serving thread, no second wait.
    await w.publish(probe('second'), 'late/2', 5000, serving);
    assert.equal(w.publishes.servingThread, 2);
    // The thread, once started, skips what it was given up on: nothing from it, nothing twice.
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(w.publishes.thread, 0);
    assert.deepEqual((await streamed()).map((d) => Buffer.from(d).toString('utf8')), ['first', 'second']);
  } finally {
    await w.close();
  }
});

test('a thread that cannot reach NATS hands each batch back at once: the serving thread publishes it', async () => {
  await purge();
  // Nothing listens on port 1: the thread's publisher never connects.
  const w = new ContentWorker(undefined, 5000, { url: 'nats://127.0.0.1:1', name: 'gw-test-away', stream: {} });
  try {
    w.warm();
    const t0 = Date.now();
    for (let i = 0; i < 3; i++) await w.publish(probe(`away ${i}`), `away/${i}`, 5000, serving);
    assert.equal(w.publishes.servingThread, 3);
    assert.equal(w.publishes.thread, 0);
    // Handed back, not timed out: well under the 5 s answer timeout each.
    assert.ok(Date.now() - t0 < 5000, `${Date.now() - t0} ms`);
    assert.equal((await streamed()).length, 3);
  } finally {
    await w.close();
  }
});

function record(i: number): RequestRecord {
  const r = servedRecord();
  r.seq = i;
  r.contentPolicy = 'full';
  r.requestBody = Buffer.from(JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: `key ${LEAKED} ` + 'word '.repeat(400) }] }));
  keepContent(r, Buffer.from('{"choices":[{"message":{"content":"ok"}}]}'), 256 * 1024);
  return r;
}

test('a capture publishing through the thread: every record stored once, secrets replaced, in batches where the worker laid them', async () => {
  await purge();
  const w = new ContentWorker(undefined, 1000, bus('gw-test-capture2'));
  const capture = new Capture({
    instance: 'gw-thread',
    config: captureConfig({ flushIntervalMs: 20, batchMaxRequests: 16 }),
    publisher: new ThreadPublisher(w, serving),
    content: CONTENT,
    contentPreparer: w,
  });
  try {
    w.warm();
    const probes = await threadUp(w, 'capture');
    const threadBefore = w.publishes.thread;
    const servingBefore = w.publishes.servingThread;
    for (let i = 0; i < 200; i++) {
      capture.record(record(i));
      if (i % 25 === 24) await new Promise((r) => setTimeout(r, 30));
    }
    assert.equal(await capture.close(20_000), 0);
    assert.equal(capture.stats.dropped, 0);
    assert.equal(capture.stats.published, 200);
    const batches = (await streamed()).slice(probes).map((d) => JSON.parse(Buffer.from(d).toString('utf8')) as CaptureBatchV2);
    const recs = batches.flatMap((b) => b.records);
    assert.deepEqual(recs.map((r) => r.seq).sort((a, b) => a - b), [...Array(200).keys()]);
    assert.ok(batches.every((b) => b.records.length <= 16));
    assert.ok(recs.every((r) => r.content !== null && r.content.request.includes('[SECRET:openai]')));
    assert.ok(!recs.some((r) => JSON.stringify(r).includes(LEAKED)));
    // Every batch went through the thread (none was late on an idle machine, or the count says so).
    assert.equal(w.publishes.thread - threadBefore + w.publishes.servingThread - servingBefore, batches.length);
    assert.ok(w.publishes.thread - threadBefore > 0);
  } finally {
    await w.close();
  }
});

test('while the worker is starved, the capture makes each record itself as it comes: one late batch, not one per flush', async () => {
  await purge();
  // 1 ms: the first batch is late (the thread is still starting); the worker is then starved.
  const w = new ContentWorker(undefined, 1, bus('gw-test-starved'));
  const capture = new Capture({ instance: 'gw-starved', config: captureConfig({ flushIntervalMs: 10 }), publisher: new ThreadPublisher(w, serving), content: CONTENT, contentPreparer: w });
  try {
    for (let i = 0; i < 5; i++) capture.record(record(i));
    await waitFor('the late batch', () => w.late === 1);
    assert.ok(w.starved);
    for (let i = 5; i < 30; i++) {
      capture.record(record(i));
      await new Promise((r) => setTimeout(r, 15));
    }
    assert.equal(await capture.close(10_000), 0);
    assert.equal(w.late, 1, 'records made in the serving thread while starved were never handed over');
    const recs = (await streamed()).map((d) => JSON.parse(Buffer.from(d).toString('utf8')) as CaptureBatchV2).flatMap((b) => b.records);
    assert.deepEqual(recs.map((r) => r.seq).sort((a, b) => a - b), [...Array(30).keys()]);
    assert.ok(recs.every((r) => r.content !== null && r.content.request.includes('[SECRET:openai]')));
    assert.equal(capture.stats.dropped, 0);
  } finally {
    await w.close();
  }
});
