/**
 * The CPU quiet wait before each ladder step: a proxy that fell behind in its own step can still
 * be working through requests the driver gave up on, on the core the next arm is measured on
 * (Portkey, seen at 3,500 req/s).
 */
import { procTicks, sleep, ticksPerSecond } from './procs.js';
import { log } from './log.js';

/** Ladder steps start once the proxies together use less than this (% of one core)... */
export const SETTLE_CPU_PCT = 10;
/** ...or after this long. */
export const SETTLE_MAX_MS = 60_000;
/** The window over which the proxies' CPU use is sampled. */
const WINDOW_MS = 500;

/** CPU ticks spent over `ms` milliseconds as a percentage of one core. */
export function pctOfCore(ticks: number, ms: number, ticksPerSec: number): number {
  return (ticks / ((ms / 1000) * ticksPerSec)) * 100;
}

/**
 * Waits (up to SETTLE_MAX_MS) until `pids` (the proxy arms) together use under SETTLE_CPU_PCT
 * of a core over half a second, so that one arm's leftover work does not land in the next
 * arm's step. Logs how long it waited when it had to.
 */
export async function settle(pids: readonly number[], scope: string): Promise<void> {
  const start = Date.now();
  for (;;) {
    const t0 = pids.reduce((a, p) => a + procTicks(p), 0);
    await sleep(WINDOW_MS);
    const pct = pctOfCore(pids.reduce((a, p) => a + procTicks(p), 0) - t0, WINDOW_MS, ticksPerSecond());
    if (pct < SETTLE_CPU_PCT) break;
    if (Date.now() - start > SETTLE_MAX_MS) {
      log(`${scope}: proxies still used ${pct.toFixed(0)} % of a core after ${SETTLE_MAX_MS / 1000} s; measuring anyway`);
      return;
    }
  }
  const waited = Date.now() - start;
  if (waited > 1_000) log(`${scope}: waited ${(waited / 1000).toFixed(1)} s for the proxies to go quiet`);
}
