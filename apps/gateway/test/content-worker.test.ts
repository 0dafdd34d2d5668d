/**
 * Content prepared in a worker thread (issue 15): the same content as in the serving thread,
 * and the capture falls back to preparing it itself when the worker cannot.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryBus } from '@sightline/bus';
import { Capture, RequestRecord, contentOf, detachedInput, contentInputOf, keepContent } from '@sightline/capture';
import type { CaptureBatchV2 } from '@sightline/core';
import { redactSecrets } from '@sightline/redact';
import { ContentWorker } from '../src/content-worker.js';
import { captureConfig, servedRecord } from '../../../test/support/records.js';
import { waitFor } from '../../../test/support/servers.js';

const LEAKED = 'sk-proj-' + 'Zx8kQ2vLm9TpR4wYb7NcJ1hG5sDf3aUe0iOq6'.repeat(2);

function record(kb: number): RequestRecord {
  const r = servedRecord();
  r.contentPolicy = 'full';
  r.requestBody = Buffer.from(JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: `key ${LEAKED} ` + 'word '.repeat(kb * 200) }] }));
  keepContent(r, Buffer.from('{"choices":[{"message":{"content":"ok"}}]}'), 256 * 1024);
  return r;
}

test('the worker prepares exactly what the serving thread would', async () => {
  const w = new ContentWorker();
  try {
    for (const kb of [1, 64]) {
      const r = record(kb);
      const here = contentOf(r, { maxBytes: 256 * 1024, keepBase64: false, redactSecrets })!;
      const { input } = detachedInput(contentInputOf(r)!, 256 * 1024);
      const there = await w.prepare(input, 256 * 1024, false);
      assert.deepEqual(JSON.parse(there.json), JSON.parse(JSON.stringify(here)));
      assert.equal(there.bytes, Buffer.byteLength(there.json));
      assert.ok(!there.json.includes(LEAKED));
    }
  } finally {
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
  let batches: CaptureBatchV2[] = [];
  await waitFor('the batch', async () => {
    batches = (await bus.fetch(10, 10)).map((m) => JSON.parse(Buffer.from(m.data).toString('utf8')) as CaptureBatchV2);
    return batches.length === 1;
  });
  const rec = batches[0]!.records[0]!;
  assert.ok(rec.content !== null && rec.content.request.includes('[SECRET:openai]'));
  assert.ok(!JSON.stringify(batches).includes(LEAKED));
});
