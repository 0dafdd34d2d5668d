/**
 * Prompts and answers end to end (issue 11), every part real and separate: nats-server,
 * clickhouse-server, the mock provider (both APIs), a gateway, an ingester and the query
 * API, each its own process with authentication on; team policies set through the admin API.
 *
 * - `full`: the phrase of each prompt is in `content.request`, the answer the client
 *   received in `content.response`, for JSON and streams in both dialects and across
 *   translation; a `read` key does not see it; `q=` finds it.
 * - `redacted`: an e-mail address, a card number and an OpenAI-shaped key are nowhere in
 *   ClickHouse (every text column of every table searched), their placeholders are.
 * - `none`: the phrase is nowhere in ClickHouse, in any NATS stream, or in the gateway's
 *   spool (NATS is stopped so that batches are spooled); spool files are 0600.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { connectNats } from '@sightline/bus';
import { ClickHouseServerStore } from '@sightline/store';
import { ClickHouseServer, NatsServer, freePort, waitFor } from './support/servers.js';
import { startApp, waitHealthy, type AppProcess } from './support/apps.js';
import { capturedRequest, checkContent, reader, searchEveryTable, sendContentMatrix, uniquePhrase } from './support/content-e2e.js';
import { startMock, type MockServer } from '../bench/mock/server.js';

const ADMIN = 'e2e-content-admin-token-0123456789';
/** Shaped like an OpenAI project key (what the secret redactor recognises). */
const LEAKED_KEY = 'sk-proj-' + 'Zx8kQ2vLm9TpR4wYb7NcJ1hG5sDf3aUe0iOq6'.repeat(2);
const EMAIL = 'ada.lovelace@example.org';
/** A Visa test number: passes the Luhn check. */
const CARD = '4111 1111 1111 1111';

let nats: NatsServer;
let ch: ClickHouseServer;
let mock: MockServer;
let dataDir: string;
let spoolDir: string;
const apps: AppProcess[] = [];
let gatewayUrl = '';
let queryUrl = '';
let appEnv: Record<string, string> = {};
/** Keys by team: `gw` (gateway, read, content) and `read` (read only). */
const keys: Record<string, { gw: string; read: string }> = {};

async function admin(method: string, path: string, body?: unknown): Promise<Response> {
  return fetch(`${queryUrl}${path}`, { method, headers: { authorization: `Bearer ${ADMIN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) }, body: body === undefined ? null : JSON.stringify(body) });
}

async function createKey(team: string, scopes: string[]): Promise<string> {
  const r = await admin('POST', '/v1/admin/keys', { team, name: `${team}-${scopes.join('-')}`, scopes });
  assert.equal(r.status, 201, await r.clone().text());
  return ((await r.json()) as { key: string }).key;
}

async function gatewayMetric(name: string): Promise<number> {
  const text = await (await fetch(`${gatewayUrl}/metrics`)).text();
  const m = new RegExp(`^${name} (\\d+)$`, 'm').exec(text);
  return m === null ? 0 : Number(m[1]);
}

before(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'sightline-e2e-content-'));
  spoolDir = join(dataDir, 'spool-gw');
  [nats, ch, mock] = await Promise.all([NatsServer.start(), ClickHouseServer.start(), startMock({ chunks: 4 })]);
  const [gp, qp, ip] = [await freePort(), await freePort(), await freePort()];
  const env = {
    NATS_URL: nats.url,
    CLICKHOUSE_URL: ch.url,
    CLICKHOUSE_USER: 'default',
    CLICKHOUSE_PASSWORD: '',
    CLICKHOUSE_DATABASE: 'sightline',
    QUERY_PORT: String(qp),
    INGESTER_PORT: String(ip),
    OPENAI_BASE_URL: `${mock.url}/v1`,
    OPENAI_API_KEY: 'sk-configured-provider-key',
    ANTHROPIC_BASE_URL: mock.url,
    ANTHROPIC_API_KEY: 'sk-ant-configured-provider-key',
    SIGHTLINE_ADMIN_TOKEN: ADMIN,
    SIGHTLINE_DATA_DIR: dataDir,
  };
  gatewayUrl = `http://127.0.0.1:${gp}`;
  queryUrl = `http://127.0.0.1:${qp}`;
  appEnv = env;
  const ingester = startApp('ingester', 'apps/ingester/src/main.ts', env);
  const query = startApp('query', 'apps/query/src/main.ts', env);
  const gateway = startApp('gateway', 'apps/gateway/src/main.ts', { ...env, GATEWAY_PORT: String(gp), SIGHTLINE_SPOOL_DIR: spoolDir });
  apps.push(ingester, query, gateway);
  await Promise.all([waitHealthy(ingester, `http://127.0.0.1:${ip}/healthz`), waitHealthy(query, `${queryUrl}/healthz`), waitHealthy(gateway, `${gatewayUrl}/healthz`)]);
  // Started without V8's single-threaded GC while its content thread is on: the gateway says so.
  assert.match(gateway.output, /started without --single-threaded-gc/);
  // Policies first: they reach the gateway through the same watched bucket as the keys, in order.
  for (const [team, policy] of [['open', 'full'], ['private', 'redacted'], ['silent', 'none']] as const) {
    const r = await admin('PUT', `/v1/admin/teams/${team}`, { content_capture: policy });
    assert.equal(r.status, 200, await r.clone().text());
    keys[team] = { gw: await createKey(team, ['gateway', 'read', 'content']), read: await createKey(team, ['read']) };
  }
  // Every key works on the gateway (so the policies are there too).
  const probe = (key: string) =>
    fetch(`${gatewayUrl}/v1/models`, { headers: { authorization: `Bearer ${key}` } }).then(async (r) => {
      await r.arrayBuffer();
      return r.status === 200;
    });
  await waitFor('keys on the gateway', async () => (await Promise.all(Object.values(keys).map((k) => probe(k.gw)))).every((x) => x), 10_000);
});

after(async () => {
  for (const a of apps) await a.stop();
  await Promise.all([nats?.dispose(), ch?.dispose(), mock?.close()]);
  rmSync(dataDir, { recursive: true, force: true });
});

test('policy full: each prompt and answer stored and served — JSON and streams, both dialects, translated both ways; hidden from a read key; found by q', async () => {
  const sent = await sendContentMatrix(gatewayUrl, keys.open!.gw);
  assert.equal(sent.length, 8);
  await checkContent(queryUrl, keys.open!.gw, keys.open!.read, sent);
  // Another team's content key finds none of them.
  const other = reader(queryUrl, keys.private!.gw);
  const res = await other(`/v1/requests?q=${encodeURIComponent(sent[0]!.phrase)}`);
  assert.deepEqual(((await res.json()) as { data: unknown[] }).data, []);
});

test('policies redacted and none: personal data and secrets nowhere in ClickHouse, the none team\'s prompts nowhere in ClickHouse, NATS or the spool; spool files 0600', async () => {
  const oa = (key: string) => new OpenAI({ apiKey: key, baseURL: `${gatewayUrl}/v1`, maxRetries: 0 });
  const an = (key: string) => new Anthropic({ apiKey: key, baseURL: gatewayUrl, maxRetries: 0 });
  const silent = uniquePhrase('silent');
  const control = uniquePhrase('control');
  const personal = `Write to ${EMAIL}, charge card ${CARD}, and use my key ${LEAKED_KEY} for it.`;
  const traces: { team: string; traceId: string }[] = [];
  const traceOf = (h: Headers) => h.get('x-sightline-trace-id')!;

  // NATS up: a JSON request and a stream of each team.
  {
    const r1 = await oa(keys.private!.gw).chat.completions.create({ model: 'gpt-4o-mini', user: EMAIL, messages: [{ role: 'user', content: personal }] }).withResponse();
    traces.push({ team: 'private', traceId: traceOf(r1.response.headers) });
    const r2 = await an(keys.private!.gw).messages.create({ model: 'claude-3-5-haiku-latest', max_tokens: 50, stream: true, messages: [{ role: 'user', content: personal }] }).withResponse();
    for await (const ev of r2.data) void ev;
    traces.push({ team: 'private', traceId: traceOf(r2.response.headers) });
    const s1 = await oa(keys.silent!.gw).chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `Keep ${silent} to yourself` }] }).withResponse();
    traces.push({ team: 'silent', traceId: traceOf(s1.response.headers) });
    const s2 = await an(keys.silent!.gw).messages.create({ model: 'gpt-4o-mini', max_tokens: 50, stream: true, messages: [{ role: 'user', content: `Keep ${silent} to yourself` }] }).withResponse();
    for await (const ev of s2.data) void ev;
    traces.push({ team: 'silent', traceId: traceOf(s2.response.headers) });
  }
  for (const t of traces) await capturedRequest(reader(queryUrl, ADMIN), t.traceId);

  // NATS down: batches go to the spool. A full team's prompt is there (the control); the
  // none team's is not, nor is a secret of any team.
  const spooledBefore = await gatewayMetric('sightline_capture_spooled_total');
  await nats.stop();
  const outage: string[] = [];
  {
    const s = await oa(keys.silent!.gw).chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `Keep ${silent} to yourself, again` }] }).withResponse();
    outage.push(traceOf(s.response.headers));
    const c = await oa(keys.open!.gw).chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `Spool ${control} please` }] }).withResponse();
    outage.push(traceOf(c.response.headers));
    const p = await oa(keys.private!.gw).chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: personal }] }).withResponse();
    outage.push(traceOf(p.response.headers));
  }
  await waitFor('the outage\'s requests in the spool', async () => (await gatewayMetric('sightline_capture_spooled_total')) - spooledBefore >= outage.length, 30_000, 100);
  const files = readdirSync(spoolDir).filter((n) => n.endsWith('.batch'));
  assert.ok(files.length > 0, 'batches wait in the spool');
  const spooled = files.map((n) => readFileSync(join(spoolDir, n), 'utf8')).join('\n');
  assert.ok(spooled.includes(control), 'the control prompt (policy full) is in the spool');
  assert.ok(outage.every((id) => spooled.includes(id)), 'every outage request is in the spool');
  assert.ok(!spooled.includes(silent), 'the none team\'s prompt is not in the spool');
  assert.ok(!spooled.includes(LEAKED_KEY), 'no secret in the spool');
  for (const n of files) assert.equal(statSync(join(spoolDir, n)).mode & 0o777, 0o600, `${n} is the gateway user's only`);
  assert.equal(statSync(spoolDir).mode & 0o777, 0o700);

  await nats.start();
  for (const id of outage) await capturedRequest(reader(queryUrl, ADMIN), id, 60_000);
  await waitFor('the spool empties', async () => (await gatewayMetric('sightline_capture_spool_batches')) === 0, 30_000, 100);

  // The none team: metadata captured, content null; the redacted team: placeholders.
  for (const t of traces) {
    const v = await capturedRequest(reader(queryUrl, keys[t.team]!.gw), t.traceId);
    if (t.team === 'silent') assert.equal(v.content, null, 'policy none: no content');
    else {
      assert.equal(v.content?.policy, 'redacted');
      assert.match(v.content!.request, /\[EMAIL\]/);
      assert.match(v.content!.request, /\[CARD\]/);
      assert.match(v.content!.request, /\[SECRET:openai\]/);
    }
  }

  // What NATS holds. A batch waits in the capture stream until the ingester takes it (a work
  // queue), so stop the ingester, send a request of the full team (the control) and one of the
  // none team, and read every stream (capture batches, the directory, dead letters) while they
  // wait there; then start an ingester again and see both captured.
  const ingester = apps.find((a) => a.name === 'ingester')!;
  assert.equal(await ingester.stop(), 0);
  const publishedBefore = await gatewayMetric('sightline_capture_published_total');
  const waiting: string[] = [];
  {
    const c = await oa(keys.open!.gw).chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `Queue ${control} please` }] }).withResponse();
    waiting.push(traceOf(c.response.headers));
    const s = await oa(keys.silent!.gw).chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `Keep ${silent} to yourself, once more` }] }).withResponse();
    waiting.push(traceOf(s.response.headers));
  }
  await waitFor('both requests published', async () => (await gatewayMetric('sightline_capture_published_total')) - publishedBefore >= waiting.length, 30_000, 100);
  const nc = await connectNats(nats.url, 'e2e-content-reader');
  let streamText = '';
  let messages = 0;
  try {
    const jsm = await nc.jetstreamManager();
    for await (const si of jsm.streams.list()) {
      for (let seq = si.state.first_seq; seq <= si.state.last_seq && si.state.messages > 0; seq++) {
        const m = await jsm.streams.getMessage(si.config.name, { seq }).catch(() => null);
        if (m === null) continue;
        streamText += Buffer.from(m.data).toString('utf8') + '\n';
        messages++;
      }
    }
  } finally {
    await nc.close();
  }
  assert.ok(messages > 0 && streamText.includes(control), `the control prompt is in the stream (${messages} messages read)`);
  assert.ok(!streamText.includes(silent), 'the none team\'s prompt is in no NATS stream');
  assert.ok(!streamText.includes(LEAKED_KEY), 'no secret in NATS');
  const again = startApp('ingester', 'apps/ingester/src/main.ts', appEnv);
  apps.push(again);
  for (const id of waiting) await capturedRequest(reader(queryUrl, ADMIN), id, 60_000);

  // Every text column of every table in ClickHouse.
  const store = new ClickHouseServerStore({ url: ch.url, database: 'sightline' });
  try {
    const found = await searchEveryTable(store, 'sightline', [silent, EMAIL, CARD, CARD.replaceAll(' ', ''), LEAKED_KEY, control, '[EMAIL]', '[CARD]', '[SECRET:openai]']);
    const where = (needle: string) => found.filter((f) => f.needle === needle).map((f) => f.where);
    assert.deepEqual(where(silent), [], 'the none team\'s phrase is nowhere in ClickHouse');
    for (const needle of [EMAIL, CARD, CARD.replaceAll(' ', ''), LEAKED_KEY]) assert.deepEqual(where(needle), [], `${needle.slice(0, 24)}… is nowhere in ClickHouse`);
    assert.ok(where(control).includes('content.request'), 'the search finds what is there (the control prompt)');
    for (const placeholder of ['[EMAIL]', '[CARD]', '[SECRET:openai]']) assert.ok(where(placeholder).includes('content.request'), `${placeholder} in content.request`);
    assert.ok(where('[EMAIL]').includes('requests.end_user'), 'the end user (an e-mail address) redacted too');
  } finally {
    await store.close();
  }
});
