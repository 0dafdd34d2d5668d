/**
 * Runs Sightline's apps as separate processes, the way docker-compose.yml does, with the
 * same environment variables. Each is stopped by its process id.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { waitFor } from './servers.js';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export class AppProcess {
  output = '';
  readonly exited: Promise<number | null>;
  constructor(
    readonly name: string,
    readonly child: ChildProcess,
  ) {
    const keep = (b: Buffer) => {
      this.output = (this.output + b.toString()).slice(-20_000);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    this.exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Sends SIGTERM and waits for the exit code (SIGKILL after the timeout; 0: at once). */
  async stop(timeoutMs = 20_000): Promise<number | null> {
    if (!this.running) return this.child.exitCode;
    this.child.kill(timeoutMs === 0 ? 'SIGKILL' : 'SIGTERM');
    const t = setTimeout(() => this.child.kill('SIGKILL'), timeoutMs);
    const code = await this.exited;
    clearTimeout(t);
    return code;
  }
}

/** Starts `node --import tsx [nodeArgs] <entry>` from the repository root with `env` added. */
export function startApp(name: string, entry: string, env: Record<string, string>, nodeArgs: readonly string[] = []): AppProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', ...nodeArgs, entry], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return new AppProcess(name, child);
}

/** Waits until `url` answers 200, failing early with the app's output if it exits. */
export async function waitHealthy(app: AppProcess, url: string, timeoutMs = 60_000): Promise<void> {
  await waitFor(
    `${app.name} at ${url}`,
    async () => {
      if (!app.running) throw new Error(`${app.name} exited: ${app.output}`);
      const res = await fetch(url).catch(() => null);
      return res !== null && res.status === 200;
    },
    timeoutMs,
    100,
  );
}
