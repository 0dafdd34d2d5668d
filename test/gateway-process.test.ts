/**
 * The gateway's own process (apps/gateway/src/main.ts) with several workers: what happens
 * when a worker cannot start, when one dies after serving, and what the logs show of
 * credentials. Real processes, a real nats-server with a password.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startApp, waitHealthy } from './support/apps.js';
import { freePort, waitFor, NatsServer } from './support/servers.js';

const PASSWORD = 'Nats-Pa55word-xyz';
let nats: NatsServer;
let dir: string;

before(async () => {
  nats = await NatsServer.start({ user: 'sightline', pass: PASSWORD });
  dir = mkdtempSync(join(tmpdir(), 'sightline-gwproc-'));
});

after(async () => {
  await nats.dispose();
  rmSync(dir, { recursive: true, force: true });
});

function env(port: number, extra: Record<string, string> = {}): Record<string, string> {
  return { GATEWAY_WORKERS: '2', GATEWAY_PORT: String(port), NATS_URL: nats.url, SIGHTLINE_SPOOL_DIR: join(dir, `spool-${port}`), ...extra };
}

function count(text: string, what: string): number {
  return text.split(what).length - 1;
}

test('an invalid configuration with two workers: one error and a non-zero exit, no restart loop', async () => {
  const bad = join(dir, 'bad.yaml');
  writeFileSync(bad, 'gateway: { port: 8080 }\nproviders: {}\nroutes: []\n');
  const app = startApp('gateway', 'apps/gateway/src/main.ts', env(await freePort(), { SIGHTLINE_CONFIG: bad }));
  const code = await Promise.race([app.exited, new Promise<'running'>((r) => setTimeout(() => r('running'), 20_000))]);
  if (code === 'running') await app.stop(0);
  assert.notEqual(code, 'running', `still running after 20 s:\n${app.output}`);
  assert.notEqual(code, 0);
  assert.equal(count(app.output, 'invalid configuration'), 1, app.output);
});

test('workers that cannot listen stop the gateway with a non-zero exit', async () => {
  const blocker: Server = createServer();
  const port = await freePort();
  await new Promise<void>((r) => blocker.listen(port, '0.0.0.0', r));
  try {
    const app = startApp('gateway', 'apps/gateway/src/main.ts', env(port));
    const code = await Promise.race([app.exited, new Promise<'running'>((r) => setTimeout(() => r('running'), 30_000))]);
    if (code === 'running') await app.stop(0);
    assert.notEqual(code, 'running', `still running after 30 s:\n${app.output}`);
    assert.notEqual(code, 0);
    assert.match(app.output, /before it was ready; stopping the gateway/);
    assert.ok(count(app.output, 'starting another') === 0, app.output);
  } finally {
    blocker.close();
  }
});

test('a worker killed after serving is replaced; credentials never reach the log', async () => {
  const port = await freePort();
  const app = startApp('gateway', 'apps/gateway/src/main.ts', env(port));
  try {
    await waitHealthy(app, `http://127.0.0.1:${port}/healthz`);
    const ready = () => [...app.output.matchAll(/worker 0 ready \(pid (\d+)\)/g)].map((m) => Number(m[1]));
    await waitFor("worker 0 ready", () => ready().length === 1 && app.output.includes("connected to NATS"), 30_000).catch((e) => { throw new Error(`${e}\n${app.output}`); });
    const [first] = ready();
    process.kill(first!, 'SIGKILL');
    await waitFor('worker 0 replaced', () => ready().length === 2, 30_000);
    assert.notEqual(ready()[1], first);
    assert.match(app.output, /worker 0 exited \(SIGKILL\); starting another in \d+ ms/);
    const res = await fetch(`http://127.0.0.1:${port}/healthz`);
    assert.equal(res.status, 200);
    assert.match(app.output, /connected to NATS at nats:\/\/\*\*\*@127\.0\.0\.1/);
    assert.ok(!app.output.includes(PASSWORD), app.output);
  } finally {
    assert.equal(await app.stop(), 0);
  }
});
