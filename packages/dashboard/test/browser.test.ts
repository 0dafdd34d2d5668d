/**
 * The dashboard in a real browser (issue 13): Debian's Chromium driven by playwright-core
 * against the whole product as `npm start` runs it (gateway, ingester, query API, chdb, the
 * in-process bus), authentication on, requests sent through the gateway to the mock
 * provider with the official SDKs. Each test opens its own browser context (its own
 * session storage) and signs in itself.
 *
 * Skipped, with the reason, only where Chromium is not installed (.ci/run installs it).
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { waitFor } from '../../../test/support/servers.js';
import { ADMIN_TOKEN, adminCall, chromiumPath, collectErrors, createKey, launchChromium, sendAnthropic, sendOpenAI, startStack, waitCaptured, type Sent, type Stack } from './harness.js';

const CHROMIUM = chromiumPath();
const SKIP = CHROMIUM === null ? 'Chromium is not installed (apt-get install -y chromium, as .ci/run does): the dashboard browser test needs it' : false;

/** Requests of the `web` team (key with the content scope). */
const WEB = 6;
/** Requests of the `bulk` team: more than one page of the listing (50). */
const BULK = 55;

let stack: Stack;
let browser: Browser;
let web: { id: string; key: string };
let readOnly: { id: string; key: string };
let bulk: { id: string; key: string };
const sent: Sent[] = [];
let retried: Sent;
let phrase = '';

/** A browser context in UTC (so typed times mean what the test means) that may use the clipboard. */
async function open(): Promise<{ ctx: BrowserContext; page: Page; errors: string[] }> {
  const ctx = await browser.newContext({ viewport: { width: 1440, height: 900 }, timezoneId: 'UTC', permissions: ['clipboard-read', 'clipboard-write'] });
  const page = await ctx.newPage();
  return { ctx, page, errors: collectErrors(page) };
}

/**
 * Console errors other than the one a visit without credentials makes on purpose: the
 * dashboard asks /v1/whoami without a key to learn whether the API is open (401 when not).
 */
function unexpected(errors: string[]): string[] {
  return errors.filter((e) => !/status of 401 \(Unauthorized\)/.test(e));
}

async function signIn(page: Page, token: string, hash = ''): Promise<void> {
  await page.goto(`${stack.queryUrl}/${hash}`);
  await page.getByTestId('token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByTestId('who').waitFor();
}

/** `2026-11-30T14:05` in UTC, as a datetime-local input takes it. */
function localInput(ms: number): string {
  return new Date(ms).toISOString().slice(0, 16);
}

describe('the dashboard in Chromium', { skip: SKIP }, () => {
  before(async () => {
    const t0 = Date.now();
    stack = await startStack({ latencyMs: 20, ttftMs: 10, gapMs: 2 });
    [web, readOnly, bulk] = [await createKey(stack.queryUrl, 'web', 'web-app', ['gateway', 'read', 'content']), await createKey(stack.queryUrl, 'web', 'viewer', ['read']), await createKey(stack.queryUrl, 'bulk', 'batch', ['gateway', 'read'])];
    phrase = `zebra-${Math.random().toString(36).slice(2, 10)}-crossing`;
    sent.push(await sendOpenAI(stack.gatewayUrl, web.key, 'gpt-4o-mini', `Tell me about the ${phrase}`));
    sent.push(await sendOpenAI(stack.gatewayUrl, web.key, 'gpt-4o-mini', 'Summarise the weather report', { stream: true }));
    sent.push(await sendAnthropic(stack.gatewayUrl, web.key, 'claude-3-5-haiku-latest', 'Write a haiku about queues'));
    sent.push(await sendAnthropic(stack.gatewayUrl, web.key, 'gpt-4o-mini', 'Translate me, streamed', { stream: true }));
    sent.push(await sendOpenAI(stack.gatewayUrl, web.key, 'claude-3-5-haiku-latest', 'Translate me, JSON'));
    // The provider fails the first attempt with a 500: the gateway retries, the second answers.
    stack.mock.failNext(1, 500);
    retried = await sendOpenAI(stack.gatewayUrl, web.key, 'gpt-4o', 'Please retry me');
    sent.push(retried);
    assert.equal(sent.length, WEB);
    const bulkSent: Sent[] = [];
    for (let i = 0; i < BULK; i++) bulkSent.push(await sendOpenAI(stack.gatewayUrl, bulk.key, 'gpt-4o-mini', `bulk ${i}`));
    await waitCaptured(stack.queryUrl, [...sent, ...bulkSent].map((s) => s.traceId), WEB + BULK, new Date(t0 - 60_000).toISOString());
    browser = await launchChromium(CHROMIUM!);
  });

  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  test('sign in with a key, see the requests just sent, open one: its waterfall drawn to scale, its prompt and answer, its trace id copied', async () => {
    const { ctx, page, errors } = await open();
    try {
      // A shared link to a view asks for a key first, then shows that view.
      await page.goto(`${stack.queryUrl}/#/requests`);
      await page.getByTestId('signin').waitFor();
      assert.match(page.url(), /#\/signin\?next=/);
      await page.getByTestId('token').fill(web.key);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.locator('table.requests').waitFor();
      assert.match(page.url(), /#\/requests$/);
      assert.equal(await page.getByTestId('who').innerText().then((t) => t.startsWith('web · web-app')), true);
      // Every request of the team, newest first; none of the other team's.
      for (const s of sent) await page.locator(`tr[data-trace="${s.traceId}"]`).waitFor();
      assert.equal(await page.locator('table.requests tbody tr').count(), WEB);
      assert.deepEqual(await page.locator('table.requests tbody tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-trace'))), [...sent].reverse().map((s) => s.traceId));
      // A key sees no admin page in the navigation.
      assert.equal(await page.getByTestId('nav-capture').count(), 0);
      assert.equal(await page.getByTestId('nav-keys').count(), 0);

      await page.locator(`tr[data-trace="${retried.traceId}"] [data-testid=open]`).click();
      await page.getByTestId('waterfall').waitFor();
      assert.ok(page.url().endsWith(`#/request/${retried.traceId}`), page.url());
      assert.equal(await page.getByTestId('trace-id').innerText(), retried.traceId);

      // The waterfall has a bar per stage and per attempt, the first attempt failed.
      const view = (await (await adminCall(stack.queryUrl, 'GET', `/v1/requests/${retried.traceId}`)).json()) as { requests: { total_ns: number; waterfall: { stage: string; offset_ns: number; duration_ns: number }[]; attempts: { ok: boolean }[] }[] };
      const r = view.requests[0]!;
      assert.deepEqual(r.attempts.map((a) => a.ok), [false, true]);
      assert.ok(r.waterfall.some((s) => s.stage === 'upstream.retry'));
      assert.deepEqual(await page.getByTestId('wf-stage').evaluateAll((rows) => rows.map((x) => x.getAttribute('data-stage'))), r.waterfall.map((s) => s.stage));
      assert.equal(await page.getByTestId('wf-attempt').count(), 2);
      assert.equal(await page.locator('[data-testid=wf-attempt].wf-error').count(), 1);
      // To scale: each bar's left edge and width, as shares of the track, are its offset and
      // duration as shares of the request (a bar is at least 2 px wide, to be seen).
      const bars = await page.getByTestId('wf-stage').evaluateAll((rows) =>
        rows.map((row) => {
          const track = row.querySelector('.wf-track')!.getBoundingClientRect();
          const bar = row.querySelector('.wf-bar')!.getBoundingClientRect();
          return { stage: row.getAttribute('data-stage'), left: bar.left - track.left, width: bar.width, track: track.width };
        }),
      );
      const total = Math.max(r.total_ns, ...r.waterfall.map((s) => s.offset_ns + s.duration_ns));
      bars.forEach((b, i) => {
        const s = r.waterfall[i]!;
        assert.ok(Math.abs(b.left - (s.offset_ns / total) * b.track) < 1.5, `${b.stage} starts at ${b.left}px of ${b.track}`);
        assert.ok(Math.abs(b.width - Math.max(2, (s.duration_ns / total) * b.track)) < 1.5, `${b.stage} is ${b.width}px of ${b.track}`);
      });
      assert.ok(bars.some((b) => b.width > b.track / 4), 'the provider wait or the retry takes a visible share');

      // Prompt and answer, as the client sent and received them.
      const content = page.getByTestId('content');
      assert.match(await content.innerText(), /Please retry me/);
      assert.equal(await page.getByTestId('answer').innerText(), retried.answer);
      assert.match(await page.getByTestId('attributes').innerText(), /sightline\.attempts\s+2/);

      await page.getByTestId('copy-trace').click();
      await waitFor('the copy button to answer', async () => (await page.getByTestId('copy-trace').innerText()) === 'Copied', 5000);
      // Run in the page (a string, as the test's own types know no DOM).
      assert.equal(await page.evaluate('navigator.clipboard.readText()'), retried.traceId);

      // A streamed answer is shown assembled, as the client received it.
      const streamed = sent[1]!;
      await page.goto(`${stack.queryUrl}/#/request/${streamed.traceId}`);
      await page.getByTestId('answer').waitFor();
      assert.equal(await page.getByTestId('answer').innerText(), streamed.answer);
      assert.deepEqual(unexpected(errors), []);
    } finally {
      await ctx.close();
    }
  });

  test('the overview counts what was sent; changing the time range changes the URL and the data, and the URL alone reproduces the view', async () => {
    const { ctx, page, errors } = await open();
    try {
      await signIn(page, web.key);
      assert.match(page.url(), /#\/overview$/);
      await waitFor('the overview tiles', async () => (await page.getByTestId('tile-requests').count()) === 1, 15_000);
      assert.match(await page.getByTestId('tile-requests').innerText(), new RegExp(`^REQUESTS\\s+${WEB}\\b`, 'i'));
      // Six charts, each drawn by uPlot on a canvas (once laid out).
      await waitFor('six charts drawn', async () => (await page.locator('figure.chart canvas').count()) === 6, 10_000);
      assert.match(await page.locator('table.by-group').innerText(), /gpt-4o-mini/);

      // A custom range yesterday: no requests there.
      const dayAgo = Date.now() - 86_400_000;
      await page.getByTestId('range').selectOption('custom');
      await page.getByTestId('range-from').fill(localInput(dayAgo - 3_600_000));
      await page.getByTestId('range-to').fill(localInput(dayAgo));
      await page.getByTestId('range-apply').click();
      await waitFor('the range in the URL', () => /[?&]from=.*&to=/.test(page.url()), 5000);
      await waitFor('no requests yesterday', async () => /^REQUESTS\s+0\b/i.test(await page.getByTestId('tile-requests').innerText()), 15_000);
      assert.equal(new URL(page.url()).hash.includes('range='), false);
      // The range goes along to the requests page.
      await page.getByTestId('nav-requests').click();
      await page.locator('table.requests').waitFor();
      assert.match(page.url(), /#\/requests\?.*from=/);
      assert.equal(await page.locator('table.requests tbody tr').count(), 0);
      assert.match(await page.locator('.results').innerText(), /No requests in this range/);

      // Back to the last 15 minutes: the requests are there again.
      await page.getByTestId('range').selectOption('15m');
      await waitFor('range=15m in the URL', () => page.url().endsWith('#/requests?range=15m'), 5000);
      await page.locator(`tr[data-trace="${sent[0]!.traceId}"]`).waitFor();
      assert.equal(await page.locator('table.requests tbody tr').count(), WEB);

      // The URL is the view: reloaded (the key stays for this tab), the same filters show.
      await page.goto(`${stack.queryUrl}/#/requests?range=15m&model=gpt-4o-mini&stream=true`);
      await page.reload();
      await page.locator(`tr[data-trace="${sent[1]!.traceId}"]`).waitFor();
      // The two streams to gpt-4o-mini: from the OpenAI SDK, and translated from the Anthropic SDK.
      assert.deepEqual(await page.locator('table.requests tbody tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-trace'))), [sent[3]!.traceId, sent[1]!.traceId]);
      assert.equal(await page.getByTestId('filter-model').inputValue(), 'gpt-4o-mini');
      assert.deepEqual(unexpected(errors), []);
    } finally {
      await ctx.close();
    }
  });

  test('search in content finds a request by its prompt; a key without the content scope sees the waterfall but neither content nor search', async () => {
    const { ctx, page, errors } = await open();
    try {
      await signIn(page, web.key, '#/requests');
      await page.getByTestId('search').fill(phrase);
      await page.getByRole('button', { name: 'Apply' }).click();
      await waitFor('the search in the URL', () => page.url().includes(`q=${phrase}`), 5000);
      await page.locator(`tr[data-trace="${sent[0]!.traceId}"]`).waitFor();
      assert.equal(await page.locator('table.requests tbody tr').count(), 1);
      await ctx.close();

      const second = await open();
      const p2 = second.page;
      try {
        await signIn(p2, readOnly.key, `#/request/${sent[0]!.traceId}`);
        await p2.getByTestId('waterfall').waitFor();
        assert.equal(await p2.getByTestId('content').count(), 0);
        assert.match(await p2.locator('main').innerText(), /may not read prompts and answers/);
        assert.ok(!(await p2.locator('main').innerText()).includes(phrase));
        await p2.getByTestId('nav-requests').click();
        await p2.locator('table.requests').waitFor();
        assert.equal(await p2.getByTestId('search').isDisabled(), true);
        assert.deepEqual(unexpected(second.errors), []);
      } finally {
        await second.ctx.close();
      }
      assert.deepEqual(unexpected(errors), []);
    } finally {
      await ctx.close();
    }
  });

  test('paging: the next page of a relative range continues where the first ended, each request once', async () => {
    const { ctx, page, errors } = await open();
    try {
      await signIn(page, bulk.key, '#/requests?range=1h');
      await page.locator('table.requests tbody tr').first().waitFor();
      const first = await page.locator('table.requests tbody tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-trace')));
      assert.equal(first.length, 50);
      await page.getByTestId('older').click();
      await waitFor('the second page', async () => page.url().includes('cursor=') && (await page.getByTestId('count').innerText()).includes('later page'), 10_000);
      const second = await page.locator('table.requests tbody tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-trace')));
      assert.equal(second.length, BULK - 50);
      assert.equal(new Set([...first, ...second]).size, BULK);
      assert.equal(await page.getByTestId('older').count(), 0);
      // Back: the first page again.
      await page.goBack();
      await waitFor('the first page again', async () => (await page.locator('table.requests tbody tr').count()) === 50, 10_000);
      assert.deepEqual(unexpected(errors), []);
    } finally {
      await ctx.close();
    }
  });

  test('the admin: capture health counts every request served, stages list every stage, keys are created and revoked', async () => {
    const { ctx, page, errors } = await open();
    try {
      await signIn(page, ADMIN_TOKEN, '#/capture');
      await page.getByTestId('tile-served').waitFor();
      assert.match(await page.getByTestId('tile-served').innerText(), new RegExp(`^SERVED\\s+${WEB + BULK}\\b`, 'i'));
      assert.match(await page.getByTestId('tile-missing').innerText(), /^MISSING\s+0\b/i);
      assert.equal(await page.locator('table.instances tbody tr').count(), 1);

      await page.getByTestId('nav-stages').click();
      await page.locator('table.stages').waitFor();
      for (const stage of ['ingress.read', 'auth', 'upstream.wait', 'upstream.retry', 'egress.write']) assert.equal(await page.locator(`table.stages tr[data-stage="${stage}"]`).count(), 1, stage);
      await waitFor('two charts drawn', async () => (await page.locator('figure.chart canvas').count()) === 2, 10_000);
      // Nothing ran in the hour before: no stage to compare with, and the page says so.
      assert.match(await page.getByTestId('moved-text').innerText(), /No stage to compare/);

      await page.getByTestId('nav-keys').click();
      await page.getByTestId('create-key').waitFor();
      await page.getByTestId('new-team').fill('ui');
      await page.getByTestId('new-name').fill('made-in-the-browser');
      await page.getByRole('button', { name: 'Create key' }).click();
      const secret = await page.getByTestId('secret').innerText();
      assert.match(secret, /^sl-[A-Za-z0-9_-]{43}$/);
      await page.getByRole('button', { name: 'Done' }).click();
      const listed = (await (await adminCall(stack.queryUrl, 'GET', '/v1/admin/keys?team=ui')).json()) as { data: { id: string; name: string; revoked_at: string | null }[] };
      const made = listed.data.find((k) => k.name === 'made-in-the-browser');
      assert.ok(made !== undefined);
      // The new key works in the gateway.
      await sendOpenAI(stack.gatewayUrl, secret, 'gpt-4o-mini', 'hello from the new key');
      await page.getByTestId(`revoke-${made.id}`).click();
      await page.getByTestId(`revoke-${made.id}`).click();
      await waitFor('the key revoked', async () => ((await (await adminCall(stack.queryUrl, 'GET', `/v1/admin/keys/${made.id}`)).json()) as { revoked_at: string | null }).revoked_at !== null, 10_000);
      await page.getByTestId('show-revoked').click();
      await page.locator(`tr[data-key="${made.id}"] [data-testid=revoked]`).waitFor();

      await page.getByTestId('nav-teams').click();
      await page.locator('tr[data-team="web"]').waitFor();
      assert.equal(await page.locator('tr[data-team="ui"]').count(), 1);
      assert.deepEqual(unexpected(errors), []);
    } finally {
      await ctx.close();
    }
  });
});
