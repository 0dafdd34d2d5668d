/**
 * Process-level helpers shared by the apps: an instance id, a one-time shutdown, the
 * local data directory and integer settings from the environment.
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';

/**
 * `host-pid-nonce`. The nonce keeps ids unique across restarts that reuse a pid, which
 * matters because batch message ids (instance/batch number) restart at 1 and JetStream
 * would drop a reused id inside its dedup window as a duplicate.
 */
export function instanceId(prefix: string): string {
  const env = process.env.SIGHTLINE_INSTANCE;
  const base = env !== undefined && env !== '' ? env : `${prefix}-${hostname()}-${process.pid}`;
  return `${base}-${randomBytes(3).toString('hex')}`;
}

/**
 * Runs `fn` once on the first SIGTERM or SIGINT, then exits with 0 (or 1 if it threw).
 * A second signal while shutting down exits at once.
 */
export function onShutdown(fn: () => Promise<void>): void {
  let started = false;
  const handler = (signal: NodeJS.Signals) => {
    if (started) {
      process.exit(1);
    }
    started = true;
    fn().then(
      () => process.exit(0),
      (e: unknown) => {
        console.error(`shutdown after ${signal} failed:`, e);
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
}

/** Reads an integer environment variable, or the fallback when unset. */
export function envInt(name: string, fallback: number): number {
  const v = process.env[name];
  if (v === undefined || v === '') return fallback;
  const n = Number(v);
  if (!Number.isInteger(n)) throw new Error(`environment variable ${name} must be an integer, got "${v}"`);
  return n;
}

/**
 * The directory for local data (SIGHTLINE_DATA_DIR, default ./data): the embedded
 * ClickHouse engine's files and the gateways' capture spools. Here rather than in the
 * store so that the gateway, which never opens a store, can place its spool.
 */
export function dataDir(): string {
  const d = process.env.SIGHTLINE_DATA_DIR;
  return resolve(d !== undefined && d !== '' ? d : 'data');
}
