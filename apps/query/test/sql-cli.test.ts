/**
 * `npm run sql` (issue 13, item 5) in the embedded mode, as separate processes: while
 * `npm start` runs, chdb holds its data directory and the CLI answers through the running
 * query API with the admin token from the environment; with nothing running, it opens chdb
 * itself and gives the same table.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../../test/support/servers.js';
import { ROOT, startApp, waitHealthy, type AppProcess } from '../../../test/support/apps.js';

const ADMIN = 'sql-cli-admin-token-0123456789abcdef';
let dir: string;
let app: AppProcess | null = null;
let queryPort = 0;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `npm run sql -- …args` as a process (the script's command), with `env` added. */
function sqlCli(args: string[], env: Record<string, string>, stdin?: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'apps/query/src/sql-cli.ts', ...args], {
      cwd: ROOT,
      env: { ...process.env, SIGHTLINE_ADMIN_TOKEN: '', SIGHTLINE_QUERY_URL: '', NATS_URL: '', CLICKHOUSE_URL: '', SIGHTLINE_DATA_DIR: dir, ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(stdin ?? '');
  });
}

const TABLES = "SELECT name, engine FROM system.tables WHERE database = 'sightline' AND name IN ('spans', 'requests') ORDER BY name";
const TABLE_OUT = ['name     | engine', '---------+-------------------', 'requests | ReplacingMergeTree', 'spans    | ReplacingMergeTree', ''].join('\n');

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sightline-sql-cli-'));
  queryPort = await freePort();
  const [gp, ip] = [await freePort(), await freePort()];
  app = startApp('sightline', 'apps/sightline/src/main.ts', {
    GATEWAY_PORT: String(gp),
    QUERY_PORT: String(queryPort),
    INGESTER_PORT: String(ip),
    SIGHTLINE_DATA_DIR: dir,
    SIGHTLINE_ADMIN_TOKEN: ADMIN,
    NATS_URL: '',
    CLICKHOUSE_URL: '',
  });
  await waitHealthy(app, `http://127.0.0.1:${queryPort}/healthz`);
});

after(async () => {
  await app?.stop();
  rmSync(dir, { recursive: true, force: true });
});

test('while npm start runs: through its query API with the admin token, as a table', async () => {
  const r = await sqlCli([TABLES], { QUERY_PORT: String(queryPort), SIGHTLINE_ADMIN_TOKEN: ADMIN });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, TABLE_OUT);
  assert.match(r.stderr, /\(2 rows, [\d.]+ ms, chdb\)/);
  // The same through SIGHTLINE_QUERY_URL, as JSON, the statement on standard input.
  const j = await sqlCli(['--json'], { SIGHTLINE_QUERY_URL: `http://127.0.0.1:${queryPort}/`, SIGHTLINE_ADMIN_TOKEN: ADMIN }, "SELECT toUInt64(7) AS n, ['a', 'b'] AS tags");
  assert.equal(j.code, 0, j.stderr);
  const body = JSON.parse(j.stdout) as { columns: { name: string; type: string }[]; rows: unknown[][]; engine: string };
  assert.deepEqual(body.columns, [{ name: 'n', type: 'UInt64' }, { name: 'tags', type: 'Array(String)' }]);
  assert.deepEqual(body.rows, [['7', ['a', 'b']]]);
  assert.equal(body.engine, 'chdb');
});

test('while npm start runs: without the token it says which variable to set; refusals are explained', async () => {
  const r = await sqlCli(['SELECT 1'], { QUERY_PORT: String(queryPort) });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /^401 unauthorized: .*set SIGHTLINE_ADMIN_TOKEN/m);
  const refused = await sqlCli(['SELECT 1 SETTINGS readonly = 0'], { QUERY_PORT: String(queryPort), SIGHTLINE_ADMIN_TOKEN: ADMIN });
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /400 bad_parameter: query refused: SETTINGS clauses are not accepted/);
  const usage = await sqlCli([], { QUERY_PORT: String(queryPort) });
  assert.equal(usage.code, 2);
  assert.match(usage.stderr, /usage: npm run sql/);
});

test('while npm start runs, its data directory cannot be opened by another process: why the CLI goes through the API', async () => {
  // Nothing listens on this port, so the CLI tries chdb itself, and chdb refuses the directory.
  const r = await sqlCli([TABLES], { QUERY_PORT: String(await freePort()) });
  assert.equal(r.code, 1, r.stdout);
  assert.match(r.stderr, /cannot open the embedded engine under .*set SIGHTLINE_QUERY_URL/);
});

test('with nothing running: chdb opened directly, the same table', async () => {
  await app?.stop();
  app = null;
  const r = await sqlCli([TABLES], { QUERY_PORT: String(queryPort) });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, TABLE_OUT);
  // The same checks as the API.
  const refused = await sqlCli(['DROP TABLE sightline.requests'], { QUERY_PORT: String(queryPort) });
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /query refused: only SELECT statements/);
  const still = await sqlCli(["SELECT count() AS n FROM system.tables WHERE database = 'sightline' AND name = 'requests'"], { QUERY_PORT: String(queryPort) });
  assert.equal(still.stdout, 'n\n-\n1\n');
});
