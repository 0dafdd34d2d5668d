/**
 * The dataset benchmark's clickhouse-server: the same process as test/support/servers.ts
 * starts (Debian's config, loopback, free ports), but on a data directory the run chooses —
 * so that a loaded dataset can be measured again with `--reuse DIR` instead of being
 * generated again — and with query logging on (`log_queries = 1` in a copy of the users
 * file), so that each measured request's statements can be read back from
 * `system.query_log` (rows read, server time).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, waitFor } from '../../../test/support/servers.js';

const CONFIG = '/etc/clickhouse-server/config.xml';
const USERS = '/etc/clickhouse-server/users.xml';

function binary(): string {
  for (const dir of ['/usr/sbin', '/usr/bin', '/usr/local/bin', ...(process.env.PATH ?? '').split(':')]) {
    const p = join(dir, 'clickhouse-server');
    if (dir !== '' && existsSync(p)) return p;
  }
  throw new Error('clickhouse-server is not installed: apt-get install -y clickhouse-server');
}

/** Debian's users file with `log_queries` on in the default profile; null if its shape is not recognised. */
export function usersWithQueryLog(text: string): string | null {
  const m = /<profiles>(?:\s|<!--[\s\S]*?-->)*<default>/.exec(text);
  if (m === null) return null;
  const at = m.index + m[0].length;
  return `${text.slice(0, at)}\n            <log_queries>1</log_queries>${text.slice(at)}`;
}

export class DatasetClickHouse {
  #child: ChildProcess | null = null;
  #output = '';
  httpPort = 0;
  /** False when the users file could not be patched: no query log, no read counts. */
  queryLog = false;

  private constructor(readonly dir: string) {}

  get url(): string {
    return `http://127.0.0.1:${this.httpPort}`;
  }

  get pid(): number | undefined {
    return this.#child?.pid;
  }

  static async start(dir: string): Promise<DatasetClickHouse> {
    const s = new DatasetClickHouse(dir);
    await s.#start();
    return s;
  }

  async #start(): Promise<void> {
    for (const d of ['tmp', 'user_files', 'format_schemas']) mkdirSync(join(this.dir, d), { recursive: true });
    const users = usersWithQueryLog(readFileSync(USERS, 'utf8'));
    this.queryLog = users !== null;
    const usersFile = join(this.dir, 'users.xml');
    if (users !== null) writeFileSync(usersFile, users);
    this.httpPort = await freePort();
    const args = [
      `--config-file=${CONFIG}`,
      '--',
      `--path=${this.dir}/`,
      `--tmp_path=${this.dir}/tmp/`,
      `--user_files_path=${this.dir}/user_files/`,
      `--format_schema_path=${this.dir}/format_schemas/`,
      ...(users !== null ? [`--users_config=${usersFile}`] : []),
      `--http_port=${this.httpPort}`,
      `--tcp_port=${await freePort()}`,
      `--interserver_http_port=${await freePort()}`,
      '--listen_host=127.0.0.1',
      `--logger.log=${this.dir}/clickhouse.log`,
      `--logger.errorlog=${this.dir}/clickhouse.err.log`,
      '--logger.level=warning',
    ];
    const child = spawn(binary(), args, { stdio: ['ignore', 'pipe', 'pipe'], cwd: this.dir });
    const keep = (b: Buffer) => {
      this.#output = (this.#output + b.toString()).slice(-4000);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    this.#child = child;
    await waitFor(
      `clickhouse-server on port ${this.httpPort}`,
      async () => {
        if (child.exitCode !== null || child.signalCode !== null) throw new Error(`clickhouse-server exited: ${this.#output}`);
        const res = await fetch(`${this.url}/ping`).catch(() => null);
        return res !== null && res.ok;
      },
      // Opening a directory with a loaded dataset takes longer than an empty one.
      180_000,
      200,
    );
  }

  /** SIGTERM, SIGKILL after 60 s (a server with large tables may take a while to close them). */
  async stop(): Promise<void> {
    const child = this.#child;
    this.#child = null;
    if (child === null || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    await exited;
    clearTimeout(timer);
  }
}
