/**
 * Content prepared in a worker thread (issue 15): the same content as in the serving thread,
 * and the capture falls back to preparing it itself when the worker cannot.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryBus } from '@sightline/bus';
import { BATCH_HEAD_ROOM, Capture, answerRecordsAt, JobBatch, PagePool, RequestRecord, jobCount, preparedViews, keepContent, keepResponseChunk, type BatchCut, type ContentPreparer, type JobsMessage, type PreparedRecords } from '@sightline/capture';
import { messageRecords, type WireRecord } from '@sightline/core';
import { redactSecrets } from '@sightline/redact';
import { ContentWorker } from '../src/content-worker.js';
import { threadId, threadScheduling } from '../src/thread-priority.js';
import { captureConfig, servedRecord, wireJson, wireOf } from '../../../test/support/records.js';
import { waitFor } from '../../../test/support/servers.js';

const CUT = { maxBytes: 512 * 1024, maxRequests: 256 };
const LEAKED = 'sk-proj-' + 'Zx8kQ2vLm9TpR4wYb7NcJ1hG5sDf3aUe0iOq6'.repeat(2);

function record(kb: number): RequestRecord {
  const r = servedRecord();
  r.contentPolicy = 'full';
  r.requestBody = Buffer.from(JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: `key ${LEAKED} ` + 'word '.repeat(kb * 200) }] }));
  keepContent(r, Buffer.from('{"choices":[{"message":{"content":"ok"}}]}'), 256 * 1024);
  return r;
}

test('the worker makes exactly the records the serving thread would', async () => {
  const w = new ContentWorker();
  try {
    const batch = new JobBatch(new PagePool());
    const here: WireRecord[] = [];
    for (const kb of [1, 64, 300]) {
      const r = record(kb);
      batch.add(r, 256 * 1024);
      here.push(wireJson(r, { maxBytes: 256 * 1024, keepBase64: false, redactSecrets }));
    }
    const there = preparedViews(await w.prepareJobs(batch.message(), 256 * 1024, false, CUT));
    assert.equal(there.length, 3);
    assert.deepEqual(there.map((b) => wireOf(b!)), here);
    assert.ok(there.every((b) => !Buffer.from(b!).toString('utf8').includes(LEAKED)));
  } finally {
    await w.close();
  }
});

test('the worker answers in a shared area, not by message; an area is reused once given back, never before; records past the area come back by message', async () => {
  const w = new ContentWorker();
  try {
    const make = async (records: RequestRecord[]): Promise<PreparedRecords> => {
      const batch = new JobBatch(new PagePool());
      const here = records.map((r) => {
        batch.add(r, 256 * 1024);
        return wireJson(r, { maxBytes: 256 * 1024, keepBase64: false, redactSecrets });
      });
      const p = await w.prepareJobs(batch.message(), 256 * 1024, false, CUT);
      assert.deepEqual(preparedViews(p).map((b) => wireOf(b!)), here);
      return p;
    };
    // One after the other, each given back: each batch takes the area the one before gave back.
    for (let i = 0; i < 4; i++) {
      const p = await make([record(1 + i), record(16 - i)]);
      assert.ok(p.buffer instanceof SharedArrayBuffer);
      p.release!();
    }
    assert.deepEqual([w.answeredByMessage, w.areasMade], [0, 1]);
    // Not given back: the next batch gets an area of its own, and the first keeps its records.
    const kept = await make([record(2)]);
    const keptText = preparedViews(kept).map((b) => Buffer.from(b!).toString('utf8'));
    await make([record(3)]);
    assert.equal(w.areasMade, 2);
    assert.deepEqual(preparedViews(kept).map((b) => Buffer.from(b!).toString('utf8')), keptText);
    // A body of invalid UTF-8: each byte becomes U+FFFD, three bytes, past the area's estimate (1.125×).
    const escaped = servedRecord();
    escaped.contentPolicy = 'full';
    escaped.requestBody = Buffer.alloc(100_000, 0xff);
    keepContent(escaped, Buffer.from('{"choices":[{"message":{"content":"ok"}}]}'), 256 * 1024);
    const p = await make([record(1), escaped, record(2)]);
    assert.ok(!(p.buffer instanceof SharedArrayBuffer));
    assert.equal(p.release, undefined);
    assert.equal(w.answeredByMessage, 1);
  } finally {
    await w.close();
  }
});

test('with a publisher that releases what it publishes, the capture gives areas back once their batches are published; never after a failed publish; every record arrives whole', async () => {
  const w = new ContentWorker();
  const bus = new MemoryBus();
  let failures = 0;
  const publisher = {
    releasesData: true,
    // Copies, as the NATS client does: the bytes published stay whole whatever the area holds later.
    publish: async (d: Uint8Array, id: string) => {
      if (failures > 0) {
        failures--;
        throw new Error('bus away');
      }
      await bus.publish(Uint8Array.from(d), id);
    },
    close: async () => {},
  };
  const capture = new Capture({ instance: 'gw-lend', config: captureConfig({ flushIntervalMs: 60_000 }), publisher, content: { maxBytes: 256 * 1024, keepBase64: false, redactSecrets }, contentPreparer: w });
  try {
    let seq = 0;
    const round = async (): Promise<void> => {
      for (let i = 0; i < 5; i++) {
        const r = record(4);
        r.seq = seq++;
        capture.record(r);
      }
      assert.equal(await capture.flush(10_000), 0);
    };
    for (let i = 0; i < 3; i++) await round();
    assert.equal(w.areasMade, 1);
    // A failed publish (retried, then published): the client may still hold the bytes, so that
    // area is not reused.
    failures = 1;
    await round();
    assert.equal(capture.stats.publishFailures, 1);
    await round();
    assert.equal(w.areasMade, 2);
    await round();
    assert.equal(w.areasMade, 2);
    const recs = (await published(bus, seq)).flatMap((b) => b.records);
    assert.deepEqual(recs.map((r) => r.seq).sort((a, b) => a - b), [...Array(seq).keys()]);
    assert.ok(recs.every((r) => r.content !== null && r.content.request.includes('[SECRET:openai]') && r.content.request.length > 4000));
  } finally {
    await capture.close(5_000);
    await w.close();
  }
});

test('a capture whose worker is gone prepares the content itself: nothing is lost, no secret leaks', async () => {
  const w = new ContentWorker();
  await w.close();
  const bus = new MemoryBus();
  const capture = new Capture({ instance: 'gw-cw', config: captureConfig(), publisher: bus, content: { maxBytes: 256 * 1024, keepBase64: false, redactSecrets }, contentPreparer: w });
  const r = record(4);
  capture.record(r);
  assert.equal(await capture.close(2000), 0);
  let batches: Uint8Array[] = [];
  await waitFor('the batch', async () => {
    batches = (await bus.fetch(10, 10)).map((m) => m.data);
    return batches.length === 1;
  });
  const rec = messageRecords(batches[0]!)[0]!;
  assert.ok(rec.content !== null && rec.content.request.includes('[SECRET:openai]'));
  // The message's bytes as they travel (format v4: the texts in them as they are).
  assert.ok(!Buffer.from(batches[0]!).toString('utf8').includes(LEAKED));
});

/** A served stream of `n` Anthropic deltas, its usage in message_start and message_delta. */
function streamed(i: number): RequestRecord {
  const r = record(1);
  r.seq = 100 + i;
  r.stream = true;
  keepResponseChunk(r, Buffer.from(`event: message_start\ndata: {"type":"message_start","message":{"model":"claude-x","usage":{"input_tokens":${10 + i},"output_tokens":1}}}\n\n`));
  keepResponseChunk(r, Buffer.from('event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}\n\n'));
  keepResponseChunk(r, Buffer.from(`event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":${20 + i}}}\n\n`));
  return r;
}

/** The batches published, their records read back as WireRecords. */
async function published(bus: MemoryBus, requests: number): Promise<{ records: WireRecord[] }[]> {
  const batches: { records: WireRecord[] }[] = [];
  await waitFor(`${requests} requests published`, async () => {
    for (const m of await bus.fetch(10, 10)) batches.push({ records: messageRecords(m.data) });
    return batches.reduce((n, b) => n + b.records.length, 0) >= requests;
  });
  return batches;
}

test('the records of a batch go to the worker in one message; their usage is read there', async () => {
  const w = new ContentWorker();
  let messages = 0;
  let jobs = 0;
  const counting: ContentPreparer = {
    prepareJobs: (js, m, k, c) => {
      messages++;
      jobs += jobCount(js);
      return w.prepareJobs(js, m, k, c);
    },
    get pending() {
      return w.pending;
    },
    reclaim: () => w.reclaim(),
    close: () => w.close(),
  };
  const bus = new MemoryBus();
  const capture = new Capture({ instance: 'gw-jobs', config: captureConfig({ flushIntervalMs: 60_000 }), publisher: bus, content: { maxBytes: 256 * 1024, keepBase64: false, redactSecrets }, contentPreparer: counting });
  try {
    for (let i = 0; i < 5; i++) capture.record(streamed(i));
    // Nothing is sent before the batch is due (here: the flush).
    assert.equal(messages, 0);
    assert.equal(await capture.close(5000), 0);
    assert.deepEqual([messages, jobs], [1, 5]);
    // The batch was written around the worker's answer where it lay, in the shared answer area
    // after its numbers: its header in the room the worker left before the first record, no copy.
    const [raw] = await bus.fetch(10, 10);
    const head = Buffer.from(raw!.data).toString('utf8').split('"records":[')[0]!.length + '"records":['.length;
    // (in the shared answer area, after its numbers).
    assert.ok(raw!.data.buffer instanceof SharedArrayBuffer);
    assert.equal(raw!.data.byteOffset, answerRecordsAt(5) + BATCH_HEAD_ROOM - head);
    assert.equal(w.answeredByMessage, 0);
    assert.ok(raw!.data.buffer.byteLength >= raw!.data.byteOffset + raw!.data.length);
    raw!.nak();
    const batches = await published(bus, 5);
    const recs = batches.flatMap((b) => b.records);
    assert.deepEqual(recs.map((r) => [r.seq, r.responseModel, r.inputTokens, r.outputTokens, r.usageFound]), [0, 1, 2, 3, 4].map((i) => [100 + i, 'claude-x', 10 + i, 20 + i, true]));
    assert.ok(recs.every((r) => r.content !== null && r.content.request.includes('[SECRET:openai]')));
    assert.ok(!JSON.stringify(batches).includes(LEAKED));
  } finally {
    await w.close();
  }
});

test('a full batch goes to the worker at once, without waiting for the flush interval', async () => {
  const w = new ContentWorker();
  const bus = new MemoryBus();
  const capture = new Capture({ instance: 'gw-full', config: captureConfig({ flushIntervalMs: 60_000, batchMaxRequests: 3 }), publisher: bus, content: { maxBytes: 256 * 1024, keepBase64: false, redactSecrets }, contentPreparer: w });
  try {
    for (let i = 0; i < 3; i++) capture.record(streamed(i));
    const batches = await published(bus, 3);
    assert.deepEqual(batches.map((b) => b.records.length), [3]);
    assert.deepEqual(batches[0]!.records.map((r) => r.outputTokens), [20, 21, 22]);
  } finally {
    await capture.close(1000);
    await w.close();
  }
});

test('records whose worker is gone get their usage read in the serving thread', async () => {
  const w = new ContentWorker();
  await w.close();
  const bus = new MemoryBus();
  const capture = new Capture({ instance: 'gw-gone', config: captureConfig(), publisher: bus, content: { maxBytes: 256 * 1024, keepBase64: false, redactSecrets }, contentPreparer: w });
  capture.record(streamed(0));
  capture.record(streamed(1));
  assert.equal(await capture.close(2000), 0);
  const recs = (await published(bus, 2)).flatMap((b) => b.records);
  assert.deepEqual(recs.map((r) => [r.inputTokens, r.outputTokens]), [[10, 20], [11, 21]]);
  assert.equal(capture.stats.dropped, 0);
});

test('records whose worker dies after it was handed them are prepared in the serving thread, none lost', async () => {
  // The failure first seen when the worker could not load its entry: the jobs were posted
  // with their buffers moved (transferred), so the fallback found them detached and dropped
  // every record. Their pages are shared memory now. Here the worker is stopped right after
  // the post, before it answers.
  const w = new ContentWorker();
  let posted = 0;
  const dying: ContentPreparer = {
    prepareJobs: (js, m, k, c) => {
      const answer = w.prepareJobs(js, m, k, c);
      posted += jobCount(js);
      void w.close();
      return answer;
    },
    get pending() {
      return w.pending;
    },
    reclaim: () => w.reclaim(),
    close: () => w.close(),
  };
  const bus = new MemoryBus();
  const capture = new Capture({ instance: 'gw-dies', config: captureConfig({ flushIntervalMs: 60_000 }), publisher: bus, content: { maxBytes: 256 * 1024, keepBase64: false, redactSecrets }, contentPreparer: dying });
  for (let i = 0; i < 4; i++) capture.record(streamed(i));
  assert.equal(await capture.close(5000), 0);
  assert.equal(posted, 4);
  const recs = (await published(bus, 4)).flatMap((b) => b.records);
  assert.deepEqual(recs.map((r) => [r.inputTokens, r.outputTokens]), [[10, 20], [11, 21], [12, 22], [13, 23]]);
  assert.ok(recs.every((r) => r.content !== null && r.content.request.includes('[SECRET:openai]')));
  assert.equal(capture.stats.dropped, 0);
});

test('a batch the thread answers late is counted late and published once, from its answer: the serving thread does not make it too', async () => {
  const logs: string[] = [];
  // 1 ms: the thread's start alone takes longer, and so does scanning 20 prompts of 300 KiB.
  const w = new ContentWorker((m) => logs.push(m), { lateMs: 1 });
  const bus = new MemoryBus();
  const capture = new Capture({ instance: 'gw-late', config: captureConfig({ flushIntervalMs: 60_000 }), publisher: bus, content: { maxBytes: 256 * 1024, keepBase64: false, redactSecrets }, contentPreparer: w });
  try {
    for (let i = 0; i < 20; i++) {
      const r = record(300);
      r.seq = i;
      capture.record(r);
    }
    assert.equal(await capture.close(10_000), 0);
    const recs = (await published(bus, 20)).flatMap((b) => b.records);
    assert.deepEqual(recs.map((r) => r.seq), [...Array(20).keys()]);
    assert.ok(recs.every((r) => r.content !== null && r.content.request.includes('[SECRET:openai]') && r.content.requestTruncated));
    assert.ok(!JSON.stringify(recs).includes(LEAKED));
    assert.deepEqual([capture.stats.dropped, capture.stats.contentMadeHere, w.late], [0, 0, 1]);
    assert.equal(logs.filter((l) => /a batch waited \d+ ms for the thread/.test(l)).length, 1);
    assert.equal((await bus.fetch(10, 10)).length, 0, 'nothing published twice');
  } finally {
    await w.close();
  }
});

/** The real worker behind a gate: its answers are held until `open()`; `reclaim` rejects the held ones. */
function gated(w: ContentWorker): ContentPreparer & { posted: number; open: () => void } {
  let opened = false;
  const held: { go: () => void; fail: (e: Error) => void }[] = [];
  const p = {
    posted: 0,
    prepareJobs: (js: JobsMessage, m: number, k: boolean, c: BatchCut): Promise<PreparedRecords> => {
      p.posted++;
      const answer = w.prepareJobs(js, m, k, c);
      if (opened) return answer;
      // Held: if the gate never opens, its rejection (the worker closed) is nobody's to handle.
      answer.catch(() => {});
      return new Promise<void>((go, fail) => held.push({ go, fail })).then(() => answer);
    },
    get pending() {
      return held.length + w.pending;
    },
    reclaim: () => {
      for (const h of held.splice(0)) h.fail(new Error('taken back'));
    },
    open: () => {
      opened = true;
      for (const h of held.splice(0)) h.go();
    },
    close: () => w.close(),
  };
  return p;
}

test('while the thread holds preparingMaxBytes of unanswered jobs, records are made in the serving thread as they are handed over; nothing is lost or doubled', async () => {
  const w = new ContentWorker();
  const g = gated(w);
  const bus = new MemoryBus();
  // One 300 KiB prompt is past a 1 KiB bound: the first batch waits for the thread; the
  // records handed over while it waits are made here, each as it comes, not at a flush.
  const capture = new Capture({ instance: 'gw-bound', config: captureConfig({ flushIntervalMs: 60_000, batchMaxRequests: 2 }), publisher: bus, content: { maxBytes: 256 * 1024, keepBase64: false, redactSecrets }, contentPreparer: g, preparingMaxBytes: 1024 });
  try {
    const seq = (i: number) => {
      const r = record(300);
      r.seq = i;
      capture.record(r);
    };
    seq(0);
    seq(1);
    await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual([g.posted, capture.stats.contentMadeHere, capture.stats.contentMadeHereRequests], [1, 0, 0]);
    seq(2);
    assert.equal(capture.stats.contentMadeHereRequests, 1, 'made when handed over, before any flush');
    assert.equal(capture.stats.queued, 1, 'made here and queued; the other two are at the thread');
    seq(3);
    await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual([g.posted, capture.stats.contentMadeHere, capture.stats.contentMadeHereRequests], [1, 0, 2], 'neither posted nor made as a batch');
    const here = (await published(bus, 2)).flatMap((b) => b.records);
    assert.deepEqual(here.map((r) => r.seq), [2, 3]);
    assert.ok(here.every((r) => r.content !== null && r.content.request.includes('[SECRET:openai]')));
    g.open();
    const recs = (await published(bus, 2)).flatMap((b) => b.records);
    assert.deepEqual(recs.map((r) => r.seq), [0, 1]);
    assert.ok(recs.every((r) => r.content !== null && r.content.request.includes('[SECRET:openai]')));
    // Answered: the next records go to the thread again.
    seq(4);
    seq(5);
    const later = (await published(bus, 2)).flatMap((b) => b.records);
    assert.deepEqual(later.map((r) => r.seq), [4, 5]);
    assert.deepEqual([g.posted, capture.stats.contentMadeHere, capture.stats.contentMadeHereRequests], [2, 0, 2]);
    assert.equal(await capture.close(10_000), 0);
    assert.equal(capture.stats.dropped, 0);
  } finally {
    await w.close();
  }
});

test('at shutdown, batches the thread has not answered by half the deadline are taken back and made in the serving thread', async () => {
  const w = new ContentWorker();
  const g = gated(w);
  const bus = new MemoryBus();
  const capture = new Capture({ instance: 'gw-shut', config: captureConfig({ flushIntervalMs: 60_000 }), publisher: bus, content: { maxBytes: 256 * 1024, keepBase64: false, redactSecrets }, contentPreparer: g });
  try {
    for (let i = 0; i < 3; i++) capture.record(streamed(i));
    const t0 = Date.now();
    assert.equal(await capture.close(1000), 0);
    const took = Date.now() - t0;
    assert.ok(took >= 450 && took < 1000, `closed after ${took} ms`);
    assert.deepEqual([g.posted, capture.stats.contentMadeHere, capture.stats.dropped], [1, 1, 0]);
    const recs = (await published(bus, 3)).flatMap((b) => b.records);
    assert.deepEqual(recs.map((r) => [r.inputTokens, r.outputTokens]), [[10, 20], [11, 21], [12, 22]]);
  } finally {
    await w.close();
  }
});

test('a thread that answers nothing for stuckMs while jobs wait is terminated: the serving thread makes them, none lost, and a new thread takes later jobs', async () => {
  const logs: string[] = [];
  // 1 ms: no thread starts and answers that fast.
  const w = new ContentWorker((m) => logs.push(m), { stuckMs: 1 });
  const bus = new MemoryBus();
  const capture = new Capture({ instance: 'gw-stuck', config: captureConfig({ flushIntervalMs: 60_000, batchMaxRequests: 2 }), publisher: bus, content: { maxBytes: 256 * 1024, keepBase64: false, redactSecrets }, contentPreparer: w });
  try {
    capture.record(streamed(0));
    capture.record(streamed(1));
    const first = (await published(bus, 2)).flatMap((b) => b.records);
    assert.deepEqual(first.map((r) => r.outputTokens), [20, 21]);
    assert.equal(capture.stats.contentMadeHere, 1);
    assert.ok(logs.some((l) => /no answer in \d+ ms; terminated/.test(l)), logs.join(' | '));
    // Later jobs go to a new thread (which is stuck too, by this bound, and terminated in turn).
    capture.record(streamed(2));
    capture.record(streamed(3));
    const second = (await published(bus, 2)).flatMap((b) => b.records);
    assert.deepEqual(second.map((r) => r.outputTokens), [22, 23]);
    assert.equal(capture.stats.contentMadeHere, 2);
    assert.equal(await capture.close(2000), 0);
    assert.equal(capture.stats.dropped, 0);
  } finally {
    await w.close();
  }
});

test('the worker thread runs at nice 19 and the serving thread keeps its priority (Linux)', { skip: process.platform !== 'linux' }, async () => {
  const { readdirSync, readFileSync } = await import('node:fs');
  // /proc/<pid>/task/<tid>/stat: the nice value is the 19th field, counted after the command's ')'.
  const nice = (tid: string): number => Number(readFileSync(`/proc/self/task/${tid}/stat`, 'utf8').split(') ')[1]!.split(' ')[16]);
  const serving = nice(String(process.pid));
  const w = new ContentWorker();
  try {
    const batch = new JobBatch(new PagePool());
    batch.add(record(1), 256 * 1024);
    // An answer means the thread has run its module, priority included.
    assert.equal(preparedViews(await w.prepareJobs(batch.message(), 256 * 1024, false, CUT)).length, 1);
    const tids = readdirSync('/proc/self/task');
    assert.equal(nice(String(process.pid)), serving);
    assert.ok(tids.some((t) => nice(t) === 19), `a thread at nice 19 among ${tids.map((t) => `${t}:${nice(t)}`).join(' ')}`);
  } finally {
    await w.close();
  }
});

test('an answer larger than a batch is published as several batches, each where its records lie', async () => {
  const w = new ContentWorker();
  const bus = new MemoryBus();
  // About 2.3 KiB a record: 16 records make batches of at most 3 requests and 6 KiB.
  const capture = new Capture({ instance: 'gw-cuts', config: captureConfig({ flushIntervalMs: 60_000, batchMaxRequests: 3, batchMaxBytes: 6000 }), publisher: bus, content: { maxBytes: 256 * 1024, keepBase64: false, redactSecrets }, contentPreparer: w });
  try {
    for (let i = 0; i < 16; i++) capture.record(streamed(i));
    assert.equal(await capture.close(5000), 0);
    const msgs = await bus.fetch(100, 10);
    assert.ok(msgs.length >= 6, `${msgs.length} batches`);
    // One worker answer, cut into batches where the capture cuts: every batch is a view of it.
    const buffers = new Set(msgs.map((m) => m.data.buffer));
    assert.equal(buffers.size, 1);
    assert.ok(msgs.every((m) => m.data.length < m.data.buffer.byteLength));
    const recs = msgs.flatMap((m) => messageRecords(m.data));
    assert.deepEqual(recs.map((r) => [r.seq, r.outputTokens]), [...Array(16).keys()].map((i) => [100 + i, 20 + i]));
    assert.ok(msgs.every((m) => messageRecords(m.data).length <= 3));
  } finally {
    await w.close();
  }
});

test('the content thread runs at SCHED_IDLE, read back from /proc; the serving thread keeps its policy', { skip: process.platform !== 'linux' }, async () => {
  const w = new ContentWorker();
  try {
    w.warm();
    await waitFor('the thread to say what it got', () => w.policy !== null, 20_000);
    assert.equal(w.policy, 'idle');
    assert.ok(w.tid > 0);
    // Its own entry under this process: policy 5 is SCHED_IDLE.
    assert.equal(threadScheduling(w.tid).policy, 5);
    // The serving thread is untouched.
    const self = threadScheduling(threadId());
    assert.equal(self.policy, 0);
  } finally {
    await w.close();
  }
});

test('without chrt a thread falls back to nice 19; the caller keeps its own priority', { skip: process.platform !== 'linux' }, async () => {
  // In a thread of its own: the fallback lowers the calling thread for good.
  // A worker thread does not inherit tsx's module hooks on Node 20 (content-thread-dev.mjs).
  const src = `
    const { parentPort, workerData } = require('node:worker_threads');
    import('tsx/esm/api').then((tsx) => { tsx.register(); return import(workerData); })
      .then((m) => parentPort.postMessage(m.lowerThisThread('/nonexistent/chrt')));
  `;
  const { Worker } = await import('node:worker_threads');
  const url = new URL('../src/thread-priority.ts', import.meta.url).href;
  const w = new Worker(src, { eval: true, workerData: url });
  const got = await new Promise<{ policy: string; tid: number }>((resolve, reject) => {
    w.once('message', resolve);
    w.once('error', reject);
  });
  await w.terminate();
  assert.equal(got.policy, 'nice');
  assert.ok(got.tid > 0);
  assert.equal(threadScheduling(threadId()).nice, 0);
});
