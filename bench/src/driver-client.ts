/**
 * The orchestrator's side of the driver process: forks driver-process.ts (with tsx, like every
 * other TypeScript process here) and sends it one block at a time over IPC.
 */
import { fork } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { BlockResult, BlockSpec, FromDriver, ToDriver } from './types.js';

const ENTRY = fileURLToPath(new URL('./driver-process.ts', import.meta.url));
const BENCH_DIR = fileURLToPath(new URL('../', import.meta.url));

export class DriverClient {
  private seq = 0;
  private readonly waiting = new Map<number, { resolve: (m: FromDriver) => void; reject: (e: Error) => void }>();
  private exitError: Error | null = null;

  private constructor(readonly child: ChildProcess) {
    child.on('message', (raw: unknown) => {
      const msg = raw as FromDriver;
      if (msg.type === 'ready') return;
      const w = this.waiting.get(msg.seq);
      if (w === undefined) return;
      this.waiting.delete(msg.seq);
      w.resolve(msg);
    });
    child.once('exit', (code, signal) => {
      this.exitError = new Error(`driver process exited (code ${String(code)}, signal ${String(signal)})`);
      for (const w of this.waiting.values()) w.reject(this.exitError);
      this.waiting.clear();
    });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  static async start(): Promise<DriverClient> {
    const child = fork(ENTRY, [], {
      cwd: BENCH_DIR,
      // --expose-gc: the driver collects garbage between blocks (driver-process.ts).
      execArgv: ['--import', 'tsx', '--expose-gc'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const client = new DriverClient(child);
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('driver process did not start within 30 s')), 30_000);
      child.once('message', () => {
        clearTimeout(timer);
        resolve();
      });
      child.once('exit', () => {
        clearTimeout(timer);
        reject(new Error('driver process exited during start-up'));
      });
    });
    return client;
  }

  private call(msg: ToDriver & { seq: number }): Promise<FromDriver> {
    if (this.exitError !== null) return Promise.reject(this.exitError);
    return new Promise<FromDriver>((resolve, reject) => {
      this.waiting.set(msg.seq, { resolve, reject });
      this.child.send(msg);
    });
  }

  async run(spec: BlockSpec): Promise<BlockResult> {
    const out = await this.call({ type: 'run', seq: ++this.seq, spec });
    if (out.type === 'result') return out.result;
    throw new Error(`driver: ${out.type === 'error' ? out.message : `unexpected ${out.type}`}`);
  }

  /** Drops the driver's pools to `origin` (after an open-loop step with thousands of sockets). */
  async release(origin: string): Promise<void> {
    const out = await this.call({ type: 'release', seq: ++this.seq, origin });
    if (out.type === 'error') throw new Error(`driver: ${out.message}`);
  }

  async stop(): Promise<void> {
    if (this.exitError !== null) return;
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.send({ type: 'exit' } satisfies ToDriver);
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  }
}
