/**
 * The dataset benchmark's generator (bench/src/dataset): the catalogue and the hour plan
 * without a server, then a small dataset generated in a real clickhouse-server and checked
 * the way the product reads it — every request has its root span, its stage spans add up to
 * its total, stage_spans was filled by the materialized view, the mix is what the docs say,
 * and the ingester's reconcile rolls it up exactly.
 */
import { after, before, describe, it } from 'node:test';
import { strict as assert } from 'node:assert';
import { Rollup } from '@sightline/app-ingester';
import { STAGES } from '@sightline/core';
import { ClickHouseServerStore, sql, type Store } from '@sightline/store';
import { ClickHouseServer } from '../../test/support/servers.js';
import { catalogue, hours, KEY_SLOTS, MODELS, rate, slotTable, TEAM_SLOTS } from '../src/dataset/catalogue.js';
import { ERROR_KINDS } from '../src/dataset/generate.js';
import { applyMigrations, generate } from '../src/dataset/load.js';
import { usersWithQueryLog } from '../src/dataset/server.js';

describe('dataset catalogue', () => {
  it('slotTable gives every index at least one slot and the rest by weight', () => {
    const t = slotTable([100, 10, 1, 0.001], 64);
    assert.equal(t.length, 64);
    const counts = [0, 1, 2, 3].map((i) => t.filter((x) => x === i).length);
    assert.ok(counts.every((c) => c >= 1), `every index has a slot: ${counts.join(',')}`);
    assert.ok(counts[0]! > 5 * counts[1]!, `the heaviest weight has most slots: ${counts.join(',')}`);
    assert.throws(() => slotTable([1, 2, 3], 2), RangeError);
  });

  it('has 20 skewed teams, 200 keys with unique ids, and tables that index them', () => {
    const c = catalogue(7);
    assert.equal(c.teams.length, 20);
    assert.equal(c.keys.length, 200);
    assert.equal(new Set(c.keys.map((k) => k.id)).size, 200);
    for (const k of c.keys) {
      assert.match(k.id, /^key_[a-z0-9]{16}$/);
      assert.ok(k.team >= 0 && k.team < 20 && k.primaryModel >= 0 && k.primaryModel < MODELS.length);
    }
    assert.ok(c.teams[0]!.share > 10 * c.teams[19]!.share, 'the largest team sends far more than the smallest');
    assert.equal(c.teamTable.length, TEAM_SLOTS);
    assert.equal(c.keyTable.length, 20 * KEY_SLOTS);
    // A team's slots name only that team's keys.
    for (let team = 0; team < 20; team++) {
      for (const k of c.keyTable.slice(team * KEY_SLOTS, (team + 1) * KEY_SLOTS)) assert.equal(c.keys[k]!.team, team);
    }
    assert.deepEqual(catalogue(7), c, 'the same seed gives the same catalogue');
  });

  it('spreads requests over hours exactly, busier on weekday afternoons', () => {
    const toS = Date.UTC(2026, 10, 30, 12, 7) / 1000;
    const h = hours(1_234_567, 30, toS);
    assert.equal(h.length, 720);
    assert.equal(h.reduce((a, x) => a + x.count, 0), 1_234_567);
    assert.equal(h[h.length - 1]!.startS + 3600, toS);
    for (let i = 1; i < h.length; i++) assert.equal(h[i]!.first, h[i - 1]!.first + h[i - 1]!.count);
    const tuesday = (hour: number) => rate(Date.UTC(2026, 10, 24, hour) / 1000, toS - 30 * 86_400, toS);
    assert.ok(tuesday(15) > 3 * tuesday(3), 'afternoon peak over the night');
    assert.ok(rate(Date.UTC(2026, 10, 28, 15) / 1000, toS - 30 * 86_400, toS) < tuesday(15) / 2, 'quieter Saturday');
  });

  it('turns on the query log in the Debian users file', () => {
    const text = '<yandex>\n  <profiles>\n    <!-- Default settings. -->\n    <default>\n      <max_memory_usage>1</max_memory_usage>\n    </default>\n  </profiles>\n</yandex>';
    const out = usersWithQueryLog(text);
    assert.ok(out !== null && /<default>\s*<log_queries>1<\/log_queries>/.test(out), String(out));
    assert.equal(usersWithQueryLog('<yandex></yandex>'), null);
  });
});

describe('dataset generated in clickhouse-server', () => {
  const N = 4_000;
  const toS = Math.floor(Date.now() / 60_000) * 60;
  let ch: ClickHouseServer;
  let store: Store;
  const one = async (q: ReturnType<typeof sql>): Promise<number> => {
    const [r] = await store.query<{ n: string | number }>(q);
    return Number(r?.n);
  };

  before(async () => {
    ch = await ClickHouseServer.start();
    store = new ClickHouseServerStore({ url: ch.url, requestTimeoutMs: 120_000 });
    await applyMigrations(store);
    await generate(store, catalogue(3), 3, hours(N, 2, toS), () => {});
  });

  after(async () => {
    await store?.close();
    await ch?.dispose();
  });

  it('writes every request once, with its root span, inside the range', async () => {
    assert.equal(await one(sql`SELECT count() AS n FROM sightline.requests`), N);
    assert.equal(await one(sql`SELECT uniqExact(trace_id) AS n FROM sightline.requests`), N);
    assert.equal(await one(sql`SELECT count() AS n FROM sightline.spans WHERE is_root = 1`), N);
    assert.equal(await one(sql`SELECT count() AS n FROM sightline.requests WHERE start_time < toDateTime(${toS - 2 * 86_400}, 'UTC') OR start_time >= toDateTime(${toS}, 'UTC')`), 0);
    assert.equal(await one(sql`SELECT count() AS n FROM sightline.requests WHERE gateway_ns + upstream_ns != total_ns OR ttft_ns > total_ns OR ttfb_ns > total_ns`), 0);
  });

  it("gives each request stage spans that add up to its total, the failed stage last", async () => {
    const mismatched = await one(sql`SELECT count() AS n FROM (
  SELECT trace_id, sum(duration_ns) AS stages, max(start_time_unix_nano + duration_ns) AS last_end, argMax(status_code, start_time_unix_nano) AS last_status, countIf(status_code = 'ERROR') AS failed
  FROM sightline.spans WHERE is_root = 0 AND name != 'upstream.attempt' GROUP BY trace_id
) s ANY INNER JOIN (SELECT trace_id, total_ns, start_time_unix_nano + total_ns AS end_ns, error_type, aborted, http_status FROM sightline.requests) r USING trace_id
WHERE stages != total_ns OR last_end != end_ns OR (error_type != '' AND (failed != 1 OR last_status != 'ERROR')) OR (error_type = '' AND failed != 0)`);
    assert.equal(mismatched, 0);
    const names = await store.query<{ name: string }>(sql`SELECT DISTINCT name FROM sightline.spans WHERE is_root = 0 AND name != 'upstream.attempt'`);
    for (const { name } of names) assert.ok((STAGES as readonly string[]).includes(name), name);
    // Every request that got past routing has its final upstream attempt (the retried ones a failed first one too).
    const roots = await one(sql`SELECT count() AS n FROM sightline.requests WHERE error_type NOT IN ('invalid_request', 'invalid_api_key', 'model_not_found')`);
    const finals = await one(sql`SELECT count() AS n FROM sightline.spans WHERE name = 'upstream.attempt' AND NOT (status_message = 'provider error (503)')`);
    assert.equal(finals, roots);
  });

  it('fills stage_spans through the materialized view', async () => {
    const stageSpans = await one(sql`SELECT count() AS n FROM sightline.spans WHERE is_root = 0 AND name != 'upstream.attempt'`);
    assert.ok(stageSpans > 8 * N, `about ten stages per request: ${stageSpans}`);
    assert.equal(await one(sql`SELECT count() AS n FROM sightline.stage_spans`), stageSpans);
  });

  it('has the documented mix: about 2 % errors, 20 % streams, both dialects, three providers', async () => {
    const [mix] = await store.query<Record<string, string | number>>(
      sql`SELECT countIf(http_status >= 400) / count() AS errors, avg(stream) AS streams, avg(dialect = 'anthropic') AS anthropic, uniqExact(provider) AS providers, uniqExact(team) AS teams FROM sightline.requests`,
    );
    const errorShare = ERROR_KINDS.reduce((a, e) => a + e.share, 0);
    assert.ok(Math.abs(Number(mix!.errors) - errorShare) < 0.012, `errors ${mix!.errors}`);
    assert.ok(Math.abs(Number(mix!.streams) - 0.2) < 0.03, `streams ${mix!.streams}`);
    assert.ok(Number(mix!.anthropic) > 0.1 && Number(mix!.anthropic) < 0.5, `anthropic dialect ${mix!.anthropic}`);
    assert.equal(Number(mix!.providers), 4, "three providers and '' (refused before routing)");
    assert.ok(Number(mix!.teams) >= 15, `teams ${mix!.teams}`);
  });

  it("is rolled up exactly by the ingester's reconcile", async () => {
    const r = await new Rollup(store).reconcile();
    assert.ok(r.requestDays.length >= 2, `recomputed ${r.requestDays.join(',')}`);
    assert.equal(await one(sql`SELECT sum(requests) AS n FROM sightline.requests_agg_1m FINAL`), N);
    assert.equal(await one(sql`SELECT sum(requests) AS n FROM sightline.requests_agg_1h FINAL`), N);
    assert.equal(await one(sql`SELECT sum(spans) AS n FROM sightline.stages_agg_1m FINAL`), await one(sql`SELECT count() AS n FROM sightline.stage_spans FINAL`));
    // The key-less twins (migration 008), which the dashboard reads, the same.
    assert.equal(await one(sql`SELECT sum(requests) AS n FROM sightline.requests_team_agg_1m FINAL`), N);
    assert.equal(await one(sql`SELECT sum(requests) AS n FROM sightline.requests_team_agg_1h FINAL`), N);
    assert.equal(await one(sql`SELECT sum(spans) AS n FROM sightline.stages_team_agg_1h FINAL`), await one(sql`SELECT count() AS n FROM sightline.stage_spans FINAL`));
    // Fewer rows than the per-key rollup: that is their point.
    assert.ok(
      (await one(sql`SELECT count() AS n FROM sightline.stages_team_agg_1h FINAL`)) < (await one(sql`SELECT count() AS n FROM sightline.stages_agg_1h FINAL`)),
      'the key-less stage hours have fewer rows than the per-key ones',
    );
  });
});
