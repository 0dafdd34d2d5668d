/**
 * A bounded open-loop load for fault tests: `rps` requests per second for `durationMs`,
 * at most `maxInFlight` at once, to one loopback URL. Every request's outcome is kept.
 */
export interface LoadResult {
  status: number;
  traceId: string;
  error: string;
}

export interface LoadOptions {
  url: string;
  rps: number;
  durationMs: number;
  maxInFlight?: number;
  body?: string;
}

export async function runLoad(opts: LoadOptions): Promise<LoadResult[]> {
  const total = Math.floor((opts.rps * opts.durationMs) / 1000);
  const maxInFlight = opts.maxInFlight ?? 64;
  const body = opts.body ?? JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'fault test' }] });
  const results: LoadResult[] = [];
  const inFlight = new Set<Promise<void>>();
  const start = Date.now();
  for (let i = 0; i < total; i++) {
    const due = start + (i * 1000) / opts.rps;
    const wait = due - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    while (inFlight.size >= maxInFlight) await Promise.race(inFlight);
    const p = (async () => {
      try {
        const res = await fetch(opts.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body, signal: AbortSignal.timeout(30_000) });
        await res.arrayBuffer();
        results.push({ status: res.status, traceId: res.headers.get('x-sightline-trace-id') ?? '', error: '' });
      } catch (e) {
        results.push({ status: 0, traceId: '', error: String((e as Error).cause ?? e) });
      }
    })();
    inFlight.add(p);
    void p.finally(() => inFlight.delete(p));
  }
  await Promise.all(inFlight);
  return results;
}
