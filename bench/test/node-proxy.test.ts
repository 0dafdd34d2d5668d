import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import type { IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';

const PROXY = fileURLToPath(new URL('../src/peers/node-proxy.ts', import.meta.url));

/** A real upstream on loopback that records what it was sent and answers with its own body. */
async function upstream(): Promise<{ url: string; seen: { path: string; headers: IncomingHttpHeaders; body: string }[]; close: () => Promise<void> }> {
  const seen: { path: string; headers: IncomingHttpHeaders; body: string }[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(200, { 'content-type': 'application/json', 'x-upstream': 'yes' });
      res.end('{"id":"up-1"}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, close: () => new Promise((r) => server.close(() => r())) };
}

/** node-proxy as the bench starts it, with `args`; resolves with its URL once it listens. */
async function proxy(args: string[]): Promise<{ url: string; stop: () => Promise<void> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', PROXY, '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`node-proxy did not start: ${out}`)), 30_000);
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m !== null) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`node-proxy exited (${code}): ${out}`));
    });
  });
  return {
    url,
    stop: () =>
      new Promise<void>((r) => {
        child.once('exit', () => r());
        child.kill('SIGTERM');
      }),
  };
}

test('node-proxy --read-body forwards the body it read and refuses a body without a model', async () => {
  const up = await upstream();
  const p = await proxy(['--upstream', up.url, '--read-body']);
  try {
    const body = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'héllo '.repeat(400) }] });
    const ok = await fetch(`${p.url}/v1/chat/completions?x=1`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    assert.equal(ok.status, 200);
    assert.equal(ok.headers.get('x-upstream'), 'yes');
    assert.equal(await ok.text(), '{"id":"up-1"}');
    assert.equal(up.seen.length, 1);
    assert.equal(up.seen[0]!.path, '/v1/chat/completions?x=1');
    assert.equal(up.seen[0]!.body, body);
    assert.equal(up.seen[0]!.headers['content-length'], String(Buffer.byteLength(body)));

    for (const bad of ['{"model":', '[1,2]', '{"messages":[]}', '{"model":42}']) {
      const res = await fetch(`${p.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: bad });
      assert.equal(res.status, 400, bad);
      const err = (await res.json()) as { error: { type: string } };
      assert.equal(err.error.type, 'invalid_request_error');
    }
    assert.equal(up.seen.length, 1, 'a refused body never reaches the upstream');
  } finally {
    await p.stop();
    await up.close();
  }
});

test('node-proxy without --read-body streams any body upstream unread', async () => {
  const up = await upstream();
  const p = await proxy(['--upstream', up.url]);
  try {
    const res = await fetch(`${p.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'not json at all' });
    assert.equal(res.status, 200);
    assert.equal(await res.text(), '{"id":"up-1"}');
    assert.equal(up.seen[0]!.body, 'not json at all');
  } finally {
    await p.stop();
    await up.close();
  }
});
