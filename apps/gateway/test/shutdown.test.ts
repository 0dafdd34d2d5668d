/**
 * A gateway that is shutting down: the request in flight is answered, and a request that
 * still comes on a connection already open (pipelined behind it, the one way a request can
 * reach a listener that no longer accepts connections) is answered 503 `shutting_down` in
 * its client's dialect, with `connection: close`, and captured. Its content type would
 * otherwise take the fast path; `/healthz` says the gateway is closing.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { parseConfig } from '@sightline/config';
import { startGateway, type GatewayHandle } from '@sightline/app-gateway';
import { startMock, type MockServer } from '../../../bench/mock/server.js';
import { CapturedBus } from '../../../test/support/captured.js';
import { waitFor } from '../../../test/support/servers.js';

let mock: MockServer;
let gw: GatewayHandle;
const cap = new CapturedBus();

before(async () => {
  // Slow answers keep the first request of each connection in flight while the gateway closes.
  mock = await startMock({ latencyMs: 600 });
  const config = parseConfig(
    `
gateway: { host: 127.0.0.1, port: 0 }
providers:
  mock: { type: openai-compatible, base_url: "${mock.url}/v1", api_key: sk-x }
  claude: { type: anthropic, base_url: "${mock.url}", api_key: sk-ant-x }
routes:
  - { match: "gpt-*", provider: mock }
  - { match: "claude-*", provider: claude }
capture: { flush_interval_ms: 5 }
`,
    'shutdown.yaml',
  );
  gw = await startGateway({ config, publisher: cap.bus, instance: 'gw-shutdown', log: () => {} });
});

after(async () => {
  await mock.close();
});

function post(path: string, body: unknown): string {
  const json = JSON.stringify(body);
  return `POST ${path} HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(json)}\r\n\r\n${json}`;
}

/** Everything the gateway sends on this socket until it closes it. */
function readAll(s: Socket): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = '';
    s.setEncoding('utf8');
    s.on('data', (d: string) => (out += d));
    s.on('end', () => resolve(out));
    s.on('error', reject);
    s.setTimeout(10_000, () => reject(new Error(`no end of the connection; got: ${out}`)));
  });
}

/** The responses in a connection's bytes: status, headers (lower case) and body (Content-Length framed). */
function responses(raw: string): { status: number; headers: Record<string, string>; body: string }[] {
  const out: { status: number; headers: Record<string, string>; body: string }[] = [];
  let rest = raw;
  while (rest.length > 0) {
    const end = rest.indexOf('\r\n\r\n');
    assert.ok(end > 0, `a response head in: ${rest}`);
    const [line, ...lines] = rest.slice(0, end).split('\r\n');
    const headers: Record<string, string> = {};
    for (const l of lines) {
      const i = l.indexOf(':');
      headers[l.slice(0, i).toLowerCase()] = l.slice(i + 1).trim();
    }
    const length = Number(headers['content-length']);
    assert.ok(Number.isInteger(length), `content-length in: ${line} ${JSON.stringify(headers)}`);
    const bytes = Buffer.from(rest.slice(end + 4), 'utf8');
    out.push({ status: Number(line!.split(' ')[1]), headers, body: bytes.subarray(0, length).toString('utf8') });
    rest = bytes.subarray(length).toString('utf8');
  }
  return out;
}

test('while shutting down: the request in flight is answered; one that still comes is a 503 shutting_down in its dialect, captured; /healthz is 503', async () => {
  const port = new URL(gw.url).port;
  const open = (): Promise<Socket> =>
    new Promise((resolve, reject) => {
      const s = connect(Number(port), '127.0.0.1', () => resolve(s));
      s.on('error', reject);
    });
  const [a, b, c] = await Promise.all([open(), open(), open()]);
  const [doneA, doneB, doneC] = [readAll(a), readAll(b), readAll(c)];
  a.write(post('/v1/chat/completions', { model: 'gpt-4.1', messages: [{ role: 'user', content: 'first' }] }));
  b.write(post('/v1/messages', { model: 'claude-sonnet-4-6', max_tokens: 5, messages: [{ role: 'user', content: 'first' }] }));
  c.write(post('/v1/chat/completions', { model: 'gpt-4.1', messages: [{ role: 'user', content: 'first' }] }));
  // (The gateway also reads the providers' model lists: those are not counted.)
  const proxied = (): number => mock.stats().requests - mock.stats().models;
  await waitFor('the three first requests at the provider', async () => proxied() >= 3, 5000);

  const closed = gw.close(5000);
  // Fastify closes its listener after its preClose hooks, which mark the gateway as closing:
  // once a new connection is refused, the requests below come to a closing gateway.
  const refusesConnections = (): Promise<boolean> =>
    new Promise((resolve) => {
      const s = connect(Number(port), '127.0.0.1', () => {
        s.destroy();
        resolve(false);
      });
      s.on('error', () => resolve(true));
    });
  await waitFor('the listener closed', refusesConnections, 5000, 10);
  // Behind each request in flight: a proxy request the fast path would take, or the health check.
  a.write(post('/v1/chat/completions', { model: 'gpt-4.1', messages: [{ role: 'user', content: 'second' }] }));
  b.write(post('/v1/messages', { model: 'claude-sonnet-4-6', max_tokens: 5, messages: [{ role: 'user', content: 'second' }] }));
  c.write('GET /healthz HTTP/1.1\r\nhost: gw\r\n\r\n');
  const [ra, rb, rc] = await Promise.all([doneA, doneB, doneC]);
  await closed;

  const [a1, a2, ...aMore] = responses(ra);
  assert.equal(aMore.length, 0, ra);
  assert.equal(a1!.status, 200, ra);
  assert.equal((JSON.parse(a1!.body) as { object: string }).object, 'chat.completion');
  assert.equal(a2!.status, 503, ra);
  assert.equal(a2!.headers.connection, 'close');
  assert.deepEqual(JSON.parse(a2!.body), {
    error: { message: 'This gateway is shutting down: retry the request on a new connection.', type: 'api_error', param: null, code: 'shutting_down' },
  });

  const [b1, b2, ...bMore] = responses(rb);
  assert.equal(bMore.length, 0, rb);
  assert.equal(b1!.status, 200, rb);
  assert.equal((JSON.parse(b1!.body) as { type: string }).type, 'message');
  assert.equal(b2!.status, 503, rb);
  const anthropic = JSON.parse(b2!.body) as { type: string; error: { type: string; message: string } };
  assert.equal(anthropic.type, 'error');
  assert.equal(anthropic.error.type, 'overloaded_error');

  const [c1, c2, ...cMore] = responses(rc);
  assert.equal(cMore.length, 0, rc);
  assert.equal(c1!.status, 200, rc);
  assert.equal(c2!.status, 503, rc);
  assert.equal(c2!.headers.connection, 'close');
  assert.deepEqual(JSON.parse(c2!.body), { ok: false, instance: 'gw-shutdown', closing: true });

  for (const r of [a2!, b2!]) {
    const rec = await cap.record(r.headers['x-sightline-trace-id']!);
    assert.equal(rec.status, 503);
    assert.equal(rec.errorType, 'shutting_down');
  }
  assert.equal(proxied(), 3, 'the refused requests never reached the provider');
});
