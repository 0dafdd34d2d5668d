/**
 * The governor of the embedded mode (one process, no NATS): the same engine, leases and rules
 * as the NATS governor, over an in-process store whose exchanges are synchronous — so it never
 * answers `Wait` and is never unavailable.
 *
 * With a `file`, the entries survive a restart (a monthly budget does not start over when the
 * process does). A write that hands out a lease is on disk before the lease is used (written
 * synchronously: leases are sized to about a second of demand, so this is rare); reports and
 * returns are written within `persistMs`. After a crash the dead process's leases are in the
 * file and expire like a crashed replica's: counted as spent (docs/governance.md).
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { asEntry, type LimitEntry } from './entry.js';
import { Engine, type Backend, type GovernorOptions, type Stored } from './engine.js';
import type { Actual, Admission, Governor, GovernorStatus, ScopeUsage, Ticket, UsageQuery, Verdict } from './types.js';

export interface MemoryGovernorOptions extends GovernorOptions {
  /** JSON file holding the entries across restarts (mode 0600); none: nothing persists. */
  file?: string;
  /** Reports and returns reach the file within this. Default 200 ms. */
  persistMs?: number;
}

const EMPTY: Stored = { entry: null, revision: 0 };

class MemoryStore implements Backend {
  readonly source = 'memory' as const;
  readonly sync = true;
  readonly #entries = new Map<string, Stored>();
  #revision = 0;
  readonly #file: string | null;
  readonly #persistMs: number;
  #timer: NodeJS.Timeout | null = null;
  #error: string | null = null;
  readonly #log: (m: string) => void;

  constructor(file: string | null, persistMs: number, log: (m: string) => void) {
    this.#file = file;
    this.#persistMs = persistMs;
    this.#log = log;
    if (file !== null) this.#load(file);
  }

  available(): boolean {
    return true;
  }
  error(): string | null {
    return this.#error;
  }
  getSync(key: string): Stored {
    return this.#entries.get(key) ?? EMPTY;
  }
  putSync(key: string, entry: LimitEntry, revision: number): number | null {
    const cur = this.#entries.get(key);
    if ((cur?.revision ?? 0) !== revision) return null;
    const r = ++this.#revision;
    this.#entries.set(key, { entry, revision: r });
    if (this.#file !== null) {
      if (leaseGrew(cur?.entry ?? null, entry)) this.#save();
      else this.#soon();
    }
    return r;
  }
  get(key: string): Promise<Stored> {
    return Promise.resolve(this.getSync(key));
  }
  put(key: string, entry: LimitEntry, revision: number): Promise<number | null> {
    return Promise.resolve(this.putSync(key, entry, revision));
  }

  #load(file: string): void {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      return; // first start
    }
    try {
      const data = JSON.parse(text) as { entries?: Record<string, unknown> };
      for (const [k, v] of Object.entries(data.entries ?? {})) {
        const e = asEntry(v);
        if (e !== null) this.#entries.set(k, { entry: e, revision: ++this.#revision });
      }
    } catch (e) {
      this.#log(`limits: the file ${file} cannot be read (${e instanceof Error ? e.message : String(e)}); starting empty`);
    }
  }

  #soon(): void {
    if (this.#timer !== null) return;
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.#save();
    }, this.#persistMs);
    this.#timer.unref();
  }

  /** Never throws: a failing disk is reported in status() and the log, and admission goes on. */
  #save(): void {
    const file = this.#file;
    if (file === null) return;
    if (this.#timer !== null) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
    try {
      mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
      const entries: Record<string, LimitEntry> = {};
      for (const [k, v] of this.#entries) if (v.entry !== null) entries[k] = v.entry;
      const tmp = `${file}.${process.pid}.tmp`;
      writeFileSync(tmp, JSON.stringify({ entries }), { mode: 0o600 });
      renameSync(tmp, file);
      this.#error = null;
    } catch (e) {
      const m = `cannot write ${file}: ${e instanceof Error ? e.message : String(e)}`;
      if (m !== this.#error) this.#log(`limits: ${m}`);
      this.#error = m;
    }
  }

  flush(): void {
    if (this.#timer !== null) this.#save();
  }
}

/** Whether any holder's lease is larger in `next` than in `prev`: capacity handed out, to be on disk before use. */
function leaseGrew(prev: LimitEntry | null, next: LimitEntry): boolean {
  for (const id in next.holders) {
    const before = prev !== null && prev.start === next.start ? (prev.holders[id]?.lease ?? 0) : 0;
    if (next.holders[id]!.lease > before) return true;
  }
  return false;
}

export class MemoryGovernor implements Governor {
  readonly ready: Promise<void> = Promise.resolve();
  readonly #store: MemoryStore;
  readonly #engine: Engine;

  constructor(opts: MemoryGovernorOptions = {}) {
    this.#store = new MemoryStore(opts.file ?? null, opts.persistMs ?? 200, opts.log ?? (() => {}));
    this.#engine = new Engine(this.#store, opts);
  }

  admit(a: Admission, nowMs: number, mayWait?: boolean): Verdict {
    return this.#engine.admit(a, nowMs, mayWait);
  }
  settle(t: Ticket, actual: Actual, nowMs: number): void {
    this.#engine.settle(t, actual, nowMs);
  }
  usage(q: UsageQuery, nowMs: number): Promise<ScopeUsage[]> {
    return this.#engine.usage(q, nowMs);
  }
  status(): GovernorStatus {
    return this.#engine.status();
  }
  async close(): Promise<void> {
    await this.#engine.close();
    this.#store.flush();
  }
}
