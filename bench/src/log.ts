/** The orchestrator's progress lines on stderr, timed from the start of the run. */

const t0 = Date.now();

export function log(msg: string): void {
  process.stderr.write(`[${((Date.now() - t0) / 1000).toFixed(1).padStart(6)} s] ${msg}\n`);
}

export function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
