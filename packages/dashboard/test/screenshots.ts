/**
 * `npm run screenshots [-- --minutes N]`: regenerates docs/screenshots/*.png, one per page
 * of the dashboard, with real data: the one-process product (authentication on) in front of
 * the mock provider, traffic from three teams sent with the official SDKs for N minutes
 * (default 8; the charts' finest bucket is a minute), the provider slower in the second
 * half (so the stages page has a stage that moved), a few provider failures (retries, a
 * 503 that reaches the client) and refused requests. Then Chromium takes the pictures.
 *
 * Bounded: about 3 requests a second to loopback, stopped after N minutes.
 */
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { Page } from 'playwright-core';
import { ADMIN_TOKEN, chromiumPath, collectErrors, createKey, launchChromium, sendAnthropic, sendOpenAI, startStack, waitCaptured, adminCall, type Sent } from './harness.js';

const { values } = parseArgs({ options: { minutes: { type: 'string', default: '8' }, out: { type: 'string' } } });
const MINUTES = Math.max(2, Number(values.minutes));
const OUT = values.out ?? fileURLToPath(new URL('../../../docs/screenshots/', import.meta.url));
const RATE_PER_S = 3;

const PROMPTS = [
  'Summarise this support ticket in two sentences',
  'Classify the sentiment of: the new release is fast',
  'Draft a polite reply declining the meeting',
  'Extract the invoice number and total from the email below',
  'Translate to French: the build is green again',
  'Suggest three names for an internal search tool',
];

function log(msg: string): void {
  process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${msg}\n`);
}

const chromium = chromiumPath();
if (chromium === null) {
  console.error('Chromium is not installed: apt-get install -y chromium');
  process.exit(1);
}
mkdirSync(OUT, { recursive: true });
const stack = await startStack({ latencyMs: 60, ttftMs: 40, gapMs: 15, chunks: 6, responseBytes: 160 });
try {
  const start = Date.now();
  await adminCall(stack.queryUrl, 'PUT', '/v1/admin/teams/search', { description: 'Search and answers in the product', content_capture: 'full' });
  await adminCall(stack.queryUrl, 'PUT', '/v1/admin/teams/support', { description: 'Support assistant', content_capture: 'redacted' });
  await adminCall(stack.queryUrl, 'PUT', '/v1/admin/teams/batch', { description: 'Nightly enrichment jobs', content_capture: 'none' });
  const search = await createKey(stack.queryUrl, 'search', 'search-api', ['gateway', 'read', 'content']);
  const support = await createKey(stack.queryUrl, 'support', 'support-bot', ['gateway', 'read', 'content']);
  const batch = await createKey(stack.queryUrl, 'batch', 'nightly-enrichment', ['gateway', 'read']);
  await createKey(stack.queryUrl, 'search', 'dashboard-viewer', ['read']);

  let n = 0;
  let failed = 0;
  const traces: string[] = [];
  const one = async (i: number): Promise<void> => {
    const prompt = `${PROMPTS[i % PROMPTS.length]} (#${i})`;
    const pick = i % 20;
    let s: Sent;
    if (i % 97 === 0) stack.mock.failNext(2, 503); // both attempts fail: a 503 reaches the client
    else if (i % 31 === 0) stack.mock.failNext(1, 500); // retried, then answered
    try {
      if (pick < 8) s = await sendOpenAI(stack.gatewayUrl, search.key, 'gpt-4o-mini', prompt, { headers: { 'x-sightline-tag-feature': 'answers' } });
      else if (pick < 11) s = await sendOpenAI(stack.gatewayUrl, search.key, 'gpt-4o', prompt, { stream: true });
      else if (pick < 15) s = await sendAnthropic(stack.gatewayUrl, support.key, 'claude-haiku-4-5', prompt, { stream: true });
      else if (pick < 16) s = await sendOpenAI(stack.gatewayUrl, support.key, 'claude-sonnet-4-5', prompt);
      else s = await sendOpenAI(stack.gatewayUrl, batch.key, 'gpt-4o-mini', prompt, { headers: { 'x-sightline-session-id': `job-${Math.floor(i / 50)}` } });
      traces.push(s.traceId);
    } catch {
      failed++;
    }
    n++;
  };
  // Open loop at RATE_PER_S, for MINUTES; the provider slows down half-way.
  const end = start + MINUTES * 60_000;
  const inFlight = new Set<Promise<void>>();
  let i = 0;
  let slowed = false;
  while (Date.now() < end) {
    if (!slowed && Date.now() > start + (MINUTES * 60_000) / 2) {
      stack.mock.configure({ latencyMs: 140, ttftMs: 90 });
      slowed = true;
      log('provider slower from now on');
    }
    // A refused request now and then (no messages): a 400 in the gateway's parse stage.
    if (i % 53 === 0) void fetch(`${stack.gatewayUrl}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${search.key}`, 'content-type': 'application/json' }, body: '{"model":"gpt-4o-mini"}' }).then((r) => r.text());
    const p = one(i++).finally(() => inFlight.delete(p));
    inFlight.add(p);
    if (i % 200 === 0) log(`${n} sent, ${failed} failed`);
    await new Promise((r) => setTimeout(r, 1000 / RATE_PER_S));
  }
  await Promise.all(inFlight);
  // The request the single-request page shows: retried, streamed, with content.
  stack.mock.failNext(1, 500);
  const shown = await sendOpenAI(stack.gatewayUrl, search.key, 'gpt-4o', 'Summarise the incident report for the on-call channel in three bullet points', { stream: true });
  log(`${n + 1} requests sent (${failed} answered with an error); waiting for capture`);
  await waitCaptured(stack.queryUrl, [shown.traceId], traces.length + 1, new Date(start - 60_000).toISOString());

  const browser = await launchChromium(chromium);
  const ctx = await browser.newContext({ viewport: { width: 1440, height: 900 }, deviceScaleFactor: 1 });
  const page = await ctx.newPage();
  const errors = collectErrors(page);
  const shot = async (name: string, fullPage = true): Promise<void> => {
    // Charts draw once laid out: wait for every chart figure to hold a canvas or its empty note.
    // (A string: it runs in the page, and this file's types know no DOM.)
    await page.waitForFunction("[...document.querySelectorAll('figure.chart .chart-box')].every((b) => b.querySelector('canvas, .empty') !== null)");
    await page.screenshot({ path: `${OUT}/${name}.png`, fullPage });
    log(`${name}.png`);
  };
  const go = async (hash: string, ready: string, p: Page = page): Promise<void> => {
    await p.goto(`${stack.queryUrl}/${hash}`);
    await p.locator(ready).first().waitFor();
  };
  // The whole run, from a minute before the first request to a minute after the last.
  const range = `from=${new Date(start - 60_000).toISOString()}&to=${new Date(Date.now() + 60_000).toISOString()}`;
  const secondHalf = `from=${new Date(start + (MINUTES * 60_000) / 2).toISOString()}&to=${new Date(Date.now() + 60_000).toISOString()}`;

  await page.goto(`${stack.queryUrl}/`);
  await page.getByTestId('signin').waitFor();
  await page.getByTestId('token').fill('sl-••••••••••••••••••••••••••••••••');
  await page.screenshot({ path: `${OUT}/signin.png` });
  log('signin.png');
  await page.getByTestId('token').fill(ADMIN_TOKEN);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByTestId('who').waitFor();

  await go(`#/overview?${range}`, '[data-testid=tile-requests]');
  await shot('overview');
  await go(`#/overview?${range}&by=team`, '[data-testid=tile-requests]');
  await shot('overview-by-team');
  await go(`#/requests?${range}`, 'table.requests tbody tr');
  await shot('requests', false);
  await go(`#/requests?${range}&q=incident`, 'table.requests tbody tr');
  await shot('requests-search', false);
  await go(`#/request/${shown.traceId}`, '[data-testid=waterfall]');
  await shot('request');
  await go(`#/stages?${secondHalf}`, 'table.stages');
  await shot('stages');
  await go(`#/capture?${range}`, 'table.instances');
  await shot('capture');
  await go('#/keys', 'table.keys');
  await shot('keys', false);
  await go('#/teams', 'table.teams');
  await shot('teams', false);
  if (errors.length > 0) log(`page errors: ${errors.join('; ')}`);
  await browser.close();
} catch (e) {
  console.error(`the product's log:\n${stack.app.output.slice(-4000)}`);
  throw e;
} finally {
  await stack.stop();
}
