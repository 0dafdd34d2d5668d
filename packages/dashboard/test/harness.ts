/**
 * The dashboard's test rig, shared by the browser test and the screenshot script: the whole
 * product as `npm start` runs it (one process: gateway, ingester, query API, the in-process
 * bus and chdb) with authentication on, against the mock provider (bench/mock), and
 * Debian's Chromium driven by playwright-core.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { chromium, type Browser, type Page } from 'playwright-core';
import { freePort, waitFor } from '../../../test/support/servers.js';
import { startApp, waitHealthy, type AppProcess } from '../../../test/support/apps.js';
import { startMock, type MockOptions, type MockServer } from '../../../bench/mock/server.js';

export const ADMIN_TOKEN = 'dashboard-test-admin-token-0123456789';

/**
 * Chromium as Debian installs it (`apt-get install chromium`), or CHROMIUM_PATH; null when
 * there is none. Never a browser download: this machine reaches no browser CDN.
 */
export function chromiumPath(): string | null {
  const candidates = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].filter((p): p is string => p !== undefined && p !== '');
  for (const p of candidates) if (existsSync(p)) return p;
  try {
    const found = execFileSync('sh', ['-c', 'command -v chromium || command -v chromium-browser'], { encoding: 'utf8' }).trim();
    return found === '' ? null : found;
  } catch {
    return null;
  }
}

/**
 * Headless Chromium with the flags this machine needs: no sandbox (root), no GPU, and none
 * of the background connections to Google's hosts, which the closed network refuses.
 * playwright-core gives it a new empty profile directory.
 */
export async function launchChromium(executablePath: string): Promise<Browser> {
  return chromium.launch({
    executablePath,
    headless: true,
    chromiumSandbox: false,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

export interface Stack {
  mock: MockServer;
  app: AppProcess;
  gatewayUrl: string;
  queryUrl: string;
  ingesterUrl: string;
  stop(): Promise<void>;
}

/** Starts the mock provider and the one-process product on free ports, data in a temporary directory. */
export async function startStack(mockOptions: MockOptions = {}): Promise<Stack> {
  const mock = await startMock({ chunks: 4, ...mockOptions });
  const dir = mkdtempSync(join(tmpdir(), 'sightline-dashboard-'));
  const [gp, qp, ip] = [await freePort(), await freePort(), await freePort()];
  const app = startApp('sightline', 'apps/sightline/src/main.ts', {
    GATEWAY_PORT: String(gp),
    QUERY_PORT: String(qp),
    INGESTER_PORT: String(ip),
    OPENAI_BASE_URL: `${mock.url}/v1`,
    OPENAI_API_KEY: 'sk-mock-provider-key',
    ANTHROPIC_BASE_URL: mock.url,
    ANTHROPIC_API_KEY: 'sk-ant-mock-provider-key',
    SIGHTLINE_ADMIN_TOKEN: ADMIN_TOKEN,
    SIGHTLINE_DATA_DIR: dir,
    NATS_URL: '',
    CLICKHOUSE_URL: '',
  });
  const gatewayUrl = `http://127.0.0.1:${gp}`;
  const queryUrl = `http://127.0.0.1:${qp}`;
  try {
    await waitHealthy(app, `${gatewayUrl}/healthz`, 120_000);
    await waitHealthy(app, `${queryUrl}/healthz`, 120_000);
  } catch (e) {
    await app.stop();
    await mock.close();
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  return {
    mock,
    app,
    gatewayUrl,
    queryUrl,
    ingesterUrl: `http://127.0.0.1:${ip}`,
    async stop() {
      await app.stop();
      await mock.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Calls the query API with the admin token. */
export async function adminCall(queryUrl: string, method: string, path: string, body?: unknown): Promise<Response> {
  return fetch(`${queryUrl}${path}`, { method, headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) }, body: body === undefined ? undefined : JSON.stringify(body) });
}

/** Creates a key (and its team); returns its id and secret. */
export async function createKey(queryUrl: string, team: string, name: string, scopes: string[]): Promise<{ id: string; key: string }> {
  const r = await adminCall(queryUrl, 'POST', '/v1/admin/keys', { team, name, scopes });
  if (r.status !== 201) throw new Error(`creating a key: ${r.status} ${await r.text()}`);
  return (await r.json()) as { id: string; key: string };
}

export interface Sent {
  traceId: string;
  model: string;
  stream: boolean;
  /** The prompt's text, unique to the request. */
  prompt: string;
  /** The answer's text as the client received it. */
  answer: string;
}

function traceOf(h: Headers): string {
  const id = h.get('x-sightline-trace-id');
  if (id === null || !/^[0-9a-f]{32}$/.test(id)) throw new Error(`no trace id in the answer (${String(id)})`);
  return id;
}

/** One chat request through the gateway with the OpenAI SDK, JSON or streamed. */
export async function sendOpenAI(gatewayUrl: string, key: string, model: string, prompt: string, opts: { stream?: boolean; headers?: Record<string, string> } = {}): Promise<Sent> {
  const client = new OpenAI({ apiKey: key, baseURL: `${gatewayUrl}/v1`, maxRetries: 0, defaultHeaders: opts.headers });
  if (opts.stream === true) {
    const s = await client.chat.completions.create({ model, messages: [{ role: 'user', content: prompt }], stream: true }).withResponse();
    let answer = '';
    for await (const c of s.data) answer += c.choices[0]?.delta.content ?? '';
    return { traceId: traceOf(s.response.headers), model, stream: true, prompt, answer };
  }
  const { data, response } = await client.chat.completions.create({ model, messages: [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: prompt }] }).withResponse();
  return { traceId: traceOf(response.headers), model, stream: false, prompt, answer: data.choices[0]?.message.content ?? '' };
}

/** One request through the gateway with the Anthropic SDK, JSON or streamed. */
export async function sendAnthropic(gatewayUrl: string, key: string, model: string, prompt: string, opts: { stream?: boolean; headers?: Record<string, string> } = {}): Promise<Sent> {
  const client = new Anthropic({ apiKey: key, baseURL: gatewayUrl, maxRetries: 0, defaultHeaders: opts.headers });
  if (opts.stream === true) {
    const s = await client.messages.create({ model, max_tokens: 64, stream: true, messages: [{ role: 'user', content: prompt }] }).withResponse();
    let answer = '';
    for await (const ev of s.data) if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') answer += ev.delta.text;
    return { traceId: traceOf(s.response.headers), model, stream: true, prompt, answer };
  }
  const { data, response } = await client.messages.create({ model, max_tokens: 64, messages: [{ role: 'user', content: prompt }] }).withResponse();
  const block = data.content[0];
  return { traceId: traceOf(response.headers), model, stream: false, prompt, answer: block?.type === 'text' ? block.text : '' };
}

/**
 * Waits until every trace is in the query API, and until the per-minute rollups count
 * `total` requests in the range (the charts read the rollups, written within seconds).
 */
export async function waitCaptured(queryUrl: string, traceIds: readonly string[], total: number, fromIso: string): Promise<void> {
  for (const t of traceIds) {
    await waitFor(`request ${t} captured`, async () => (await adminCall(queryUrl, 'GET', `/v1/requests/${t}`)).status === 200, 30_000, 100);
  }
  let seen = 0;
  await waitFor(
    `${total} requests in the rollups`,
    async () => {
      const r = await adminCall(queryUrl, 'POST', '/v1/metrics', { from: fromIso, to: new Date(Date.now() + 120_000).toISOString(), metrics: ['requests'] });
      const body = (await r.json()) as { rows: { requests: number }[] };
      seen = body.rows[0]?.requests ?? 0;
      if (seen >= total) return true;
      throw new Error(`${seen} so far`);
    },
    60_000,
    200,
  );
}

/** Page errors and console errors (a refused script, a policy violation, a failed call) of a page. */
export function collectErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(`console: ${m.text()}`);
  });
  return errors;
}
