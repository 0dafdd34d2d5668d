import { test } from 'node:test';
import { strict as assert } from 'node:assert';
import { fileURLToPath } from 'node:url';
import { startMock } from '../mock/server.js';
import type { MockServer } from '../mock/server.js';
import { spawnProc, waitHttp } from '../src/procs.js';
import { freePort } from '../../test/support/servers.js';

const BENCH = fileURLToPath(new URL('..', import.meta.url));

/** node-proxy in front of `mock`, started as the bench's stack.ts starts it, with `args` added. */
async function nodeProxy(mock: MockServer, args: string[]): Promise<{ url: string; stop: () => Promise<void> }> {
  const port = await freePort();
  const proc = spawnProc('node-proxy', process.execPath, ['--import', 'tsx', 'src/peers/node-proxy.ts', '--port', String(port), '--upstream', mock.url, ...args], { cwd: BENCH });
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitHttp(proc, `${url}/healthz`, 30_000, 200);
  } catch (e) {
    await proc.stop();
    throw e;
  }
  return { url, stop: () => proc.stop() };
}

test('node-proxy --read-body forwards the body it read and refuses a body without a model', async () => {
  const mock = await startMock();
  const p = await nodeProxy(mock, ['--read-body']);
  try {
    mock.reset();
    const body = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'héllo '.repeat(400) }] });
    const ok = await fetch(`${p.url}/v1/chat/completions?x=1`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    assert.equal(ok.status, 200);
    assert.equal(((await ok.json()) as { object: string }).object, 'chat.completion');
    const seen = mock.lastRequests();
    assert.equal(seen.length, 1);
    assert.equal(seen[0]!.path, '/v1/chat/completions?x=1');
    assert.deepEqual(seen[0]!.body, JSON.parse(body));
    assert.equal(seen[0]!.headers['content-length'], String(Buffer.byteLength(body)));

    for (const bad of ['{"model":', '[1,2]', '{"messages":[]}', '{"model":42}']) {
      const res = await fetch(`${p.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: bad });
      assert.equal(res.status, 400, bad);
      const err = (await res.json()) as { error: { type: string } };
      assert.equal(err.error.type, 'invalid_request_error');
    }
    assert.equal(mock.lastRequests().length, 1, 'a refused body never reaches the upstream');
  } finally {
    await p.stop();
    await mock.close();
  }
});

test('node-proxy without --read-body streams any body upstream unread', async () => {
  const mock = await startMock();
  const p = await nodeProxy(mock, []);
  try {
    mock.reset();
    const res = await fetch(`${p.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'not json at all' });
    await res.arrayBuffer();
    // The mock judges the body (it is not JSON), not the proxy: it reached the mock as sent.
    assert.equal(mock.lastRequests().at(-1)!.body, 'not json at all');
  } finally {
    await p.stop();
    await mock.close();
  }
});
