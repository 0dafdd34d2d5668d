/**
 * The `portkey` arm: the Portkey AI gateway from npm (`@portkey-ai/gateway`), started the way
 * its package's `start:node` script does: `node build/start-server.js --port=P --headless`.
 *
 * It listens on all interfaces (hono's node server with no hostname) and has no option to bind
 * loopback, which is why the whole benchmark runs inside a network namespace that has only
 * `lo` (main.ts): there, "all interfaces" is loopback. Without the namespace the arm is not run.
 *
 * Routing: Portkey picks the provider from request headers. `x-portkey-provider: openai` (or
 * `anthropic`) plus `x-portkey-custom-host: http://127.0.0.1:MOCK/v1` sends the request to the
 * mock; 127.0.0.1 is in Portkey's default TRUSTED_CUSTOM_HOSTS, so no setting is needed.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Proc, spawnProc, waitHttp } from '../procs.js';

const require = createRequire(import.meta.url);

/** The installed package's directory, or undefined when `npm --prefix bench install` was not run. */
export function portkeyDir(): string | undefined {
  try {
    return dirname(require.resolve('@portkey-ai/gateway/package.json'));
  } catch {
    return undefined;
  }
}

export function portkeyVersion(): string | undefined {
  const dir = portkeyDir();
  if (dir === undefined) return undefined;
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { version?: unknown };
  return typeof pkg.version === 'string' ? pkg.version : undefined;
}

/** Headers that route a request through Portkey to the mock in `dialect`. */
export function portkeyHeaders(provider: 'openai' | 'anthropic', mockUrl: string): Record<string, string> {
  return { 'x-portkey-provider': provider, 'x-portkey-custom-host': `${mockUrl}/v1` };
}

export class Portkey {
  private constructor(
    readonly proc: Proc,
    readonly url: string,
  ) {}

  static async start(port: number, cpu: number | undefined): Promise<Portkey> {
    const dir = portkeyDir();
    if (dir === undefined) throw new Error('@portkey-ai/gateway is not installed: run `npm --prefix bench install`');
    const proc = spawnProc('portkey', process.execPath, [join(dir, 'build', 'start-server.js'), `--port=${port}`, '--headless'], { cwd: dir, cpu });
    const portkey = new Portkey(proc, `http://127.0.0.1:${port}`);
    try {
      // GET / answers 200 ("AI Gateway says hey!") once the server listens.
      await waitHttp(proc, `${portkey.url}/`, 30_000, 200);
    } catch (err) {
      await proc.stop();
      throw err;
    }
    return portkey;
  }

  async stop(): Promise<void> {
    await this.proc.stop();
  }
}
