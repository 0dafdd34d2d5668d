/**
 * Requests that wait for a lease (a key's first request on this process, with limits or a
 * budget shared over a real nats-server): after the wait, the route goes on in a promise
 * callback, outside the code that answers what the route throws on the way in. A fault there
 * must still be answered in the client's dialect, captured, and leave the gateway serving;
 * an unhandled rejection would end the process (Node's default). The faults are injected
 * into the running gateway's own router and governor, which have no input that throws.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { parseConfig } from '@sightline/config';
import { KeyHasher, MemoryDirectory } from '@sightline/directory';
import { NatsGovernor, type Admission, type Verdict } from '@sightline/controls';
import { startGateway, type GatewayHandle } from '@sightline/app-gateway';
import { startMock, type MockServer } from '../../../bench/mock/server.js';
import { CapturedBus } from '../../../test/support/captured.js';
import { NatsServer } from '../../../test/support/servers.js';
import { LoggedErrors, routerFault } from '../../../test/support/gateway-faults.js';
import { gatewayKey } from '../../../test/support/keys.js';

let nats: NatsServer;
let mock: MockServer;
let gw: GatewayHandle;
let governor: NatsGovernor;
const cap = new CapturedBus();
const directory = new MemoryDirectory({ hasher: new KeyHasher('lease-wait-test-hashing-secret') });
const errors = new LoggedErrors();
const key = (team: string, extra: Record<string, unknown>): Promise<string> => gatewayKey(directory, team, extra);

before(async () => {
  nats = await NatsServer.start();
  mock = await startMock({ chunks: 3 });
  governor = new NatsGovernor({ url: nats.url });
  await governor.ready;
  assert.equal(governor.status().synced, true);
  const config = parseConfig(
    `
gateway: { host: 127.0.0.1, port: 0, default_max_tokens: 100 }
providers:
  mock: { type: openai-compatible, base_url: "${mock.url}/v1", api_key: sk-x }
  claude: { type: anthropic, base_url: "${mock.url}", api_key: sk-ant-x }
routes:
  - { match: "gpt-*", provider: mock }
  - { match: "claude-*", provider: claude }
capture: { flush_interval_ms: 5 }
`,
    'lease-wait.yaml',
  );
  gw = await startGateway({ config, publisher: cap.bus, instance: 'gw-lease-wait', directory, governor, log: () => {}, logger: errors.logger });
});

after(async () => {
  await gw.close(2000);
  await governor.close();
  await mock.close();
  await nats.dispose();
});

test('limits: a fault in the route after the wait for a lease is a 500 in the OpenAI shape, captured and logged; the gateway goes on serving', async () => {
  const undo = routerFault(gw, 'gpt-fault', 'a fault injected by the test');
  try {
    const k = await key('lease-limits', { limits: { requests_per_minute: 100 } });
    const waits = governor.status().waits;
    const r = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${k}` },
      body: JSON.stringify({ model: 'gpt-fault', messages: [{ role: 'user', content: 'x' }] }),
      signal: AbortSignal.timeout(10_000),
    });
    assert.ok(governor.status().waits - waits >= 1, 'the request waited for a lease');
    assert.equal(r.status, 500);
    const body = (await r.json()) as { error: { type: string; code: string; message: string } };
    assert.equal(body.error.type, 'api_error');
    assert.equal(body.error.code, 'internal_error');
    const traceId = r.headers.get('x-sightline-trace-id')!;
    const rec = await cap.record(traceId);
    assert.equal(rec.status, 500);
    assert.equal(rec.errorType, 'internal_error');
    assert.ok(errors.fault('a fault injected by the test', traceId) !== undefined, JSON.stringify(errors.entries));

    // The same key, its lease now in hand, and a model the router knows: served.
    const ok = await new OpenAI({ apiKey: k, baseURL: `${gw.url}/v1`, maxRetries: 0 }).chat.completions.create({ model: 'gpt-4.1', messages: [{ role: 'user', content: 'y' }] });
    assert.equal(ok.object, 'chat.completion');
  } finally {
    undo();
  }
});

test('budget: a fault in the governor when asked again after the wait is a 500 in the Anthropic shape, captured; the gateway goes on serving', async () => {
  const admit = governor.admit;
  let faults = 0;
  // The first ask of a request passes two arguments; the ask after a wait passes three.
  governor.admit = function (a: Admission, nowMs: number, mayWait?: boolean): Verdict {
    if (mayWait !== undefined && faults === 0) {
      faults++;
      throw new Error('a fault injected by the test into the governor');
    }
    return admit.call(this, a, nowMs, mayWait);
  };
  try {
    const k = await key('lease-budget', { budget: { usd: 5, period: 'day' } });
    const an = new Anthropic({ apiKey: k, baseURL: gw.url, maxRetries: 0 });
    const waits = governor.status().waits;
    let caught: unknown = null;
    try {
      await an.messages.create({ model: 'claude-sonnet-4-6', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] });
    } catch (e) {
      caught = e;
    }
    assert.equal(faults, 1, 'the fault was reached');
    assert.ok(governor.status().waits - waits >= 1, 'the request waited for a lease');
    assert.ok(caught instanceof Anthropic.InternalServerError, String(caught));
    assert.equal(caught.status, 500);
    assert.equal((caught.error as { type: string; error: { type: string } }).type, 'error');
    assert.equal((caught.error as { type: string; error: { type: string } }).error.type, 'api_error');
    const rec = await cap.record(caught.headers.get('x-sightline-trace-id')!);
    assert.equal(rec.status, 500);
    assert.equal(rec.errorType, 'internal_error');

    const ok = await an.messages.create({ model: 'claude-sonnet-4-6', max_tokens: 5, messages: [{ role: 'user', content: 'y' }] });
    assert.equal(ok.type, 'message');
  } finally {
    governor.admit = admit;
  }
});
