/**
 * The governor shared by every gateway replica and worker: the engine's leases kept in the
 * NATS JetStream key-value bucket `sightline-limits` (docs/governance.md, "The bucket"), changed
 * only by compare-and-set on the entry's revision (`Nats-Expected-Last-Subject-Sequence`, which
 * nats-server 2.9 honours; its per-key TTL and counters are not used, 2.9.10 ignores them).
 *
 * Nothing here runs on the request path: admission reads the engine's meters; this file only
 * carries the background exchanges. While the connection is down the instance keeps admitting
 * from the leases it holds; past them, the team's unavailable policy decides (types.ts).
 */
import type { KV, NatsConnection } from 'nats';
import { connectNats, ensureReplicas, natsServers } from '@sightline/bus';
import { encodeEntry, decodeEntry, type LimitEntry } from './entry.js';
import { Engine, type Backend, type GovernorOptions, type Stored } from './engine.js';
import { ControlsError } from './errors.js';
import type { Actual, Admission, Governor, GovernorStatus, ScopeUsage, Ticket, UsageQuery, Verdict } from './types.js';

export const LIMITS_BUCKET = 'sightline-limits';

/**
 * The bucket's max age: an entry untouched this long belongs to a window that ended (a month
 * is at most 31 days), so keys and teams that were deleted do not leave entries forever.
 */
const BUCKET_TTL_MS = 32 * 86_400_000;

export interface NatsGovernorOptions extends GovernorOptions {
  /** NATS_URL: comma-separated servers, credentials in the URL allowed (@sightline/bus `natsServers`). */
  url: string;
  /** Replicas of the bucket when this process creates it (a NATS cluster: 3). Default 1. */
  replicas?: number;
  /** How long `ready` waits for NATS before resolving anyway (then the unavailable policy applies past the leases). Default 2000. */
  startTimeoutMs?: number;
  /** Bound of each request to NATS. Default 1000. */
  opTimeoutMs?: number;
  /** Connection name shown by the NATS server. Default `sightline-limits`. */
  name?: string;
}

/** JetStream "wrong last sequence": the entry changed since we read it. */
const JS_WRONG_LAST_SEQUENCE = 10071;

function isConflict(e: unknown): boolean {
  const err = e as { api_error?: { err_code?: number }; message?: unknown };
  return err?.api_error?.err_code === JS_WRONG_LAST_SEQUENCE || (typeof err?.message === 'string' && /wrong last sequence/i.test(err.message));
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer from NATS within ${ms} ms`)), ms);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

class NatsStore implements Backend {
  readonly source = 'nats' as const;
  readonly sync = false;
  kv: KV | null = null;
  connected = false;
  err: string | null = 'connecting to NATS';
  constructor(readonly opTimeoutMs: number) {}

  available(): boolean {
    return this.kv !== null && this.connected;
  }
  error(): string | null {
    return this.err;
  }
  #kv(): KV {
    if (this.kv === null || !this.connected) throw new ControlsError('SL_CTL_UNAVAILABLE', `NATS is not reachable: ${this.err ?? 'not connected'}`);
    return this.kv;
  }
  async get(key: string): Promise<Stored> {
    const e = await withTimeout(this.#kv().get(key), this.opTimeoutMs, `get ${key}`);
    if (e === null) return { entry: null, revision: 0 };
    // A deleted or purged key (an operator's reset): the next write starts the window afresh on its revision.
    if (e.operation !== 'PUT') return { entry: null, revision: e.revision };
    return { entry: decodeEntry(e.value), revision: e.revision };
  }
  async put(key: string, entry: LimitEntry, revision: number): Promise<number | null> {
    try {
      return await withTimeout(this.#kv().put(key, encodeEntry(entry), { previousSeq: revision }), this.opTimeoutMs, `put ${key}`);
    } catch (e) {
      if (isConflict(e)) return null;
      throw e;
    }
  }
  getSync(): Stored {
    throw new Error('the NATS store is asynchronous');
  }
  putSync(): number | null {
    throw new Error('the NATS store is asynchronous');
  }
}

export class NatsGovernor implements Governor {
  readonly ready: Promise<void>;
  #resolveReady!: () => void;
  readonly #store: NatsStore;
  readonly #engine: Engine;
  readonly #opts: { url: string; replicas: number; startTimeoutMs: number; opTimeoutMs: number; name: string; log: (m: string) => void };
  #nc: NatsConnection | null = null;
  #closed = false;
  #wake: (() => void) | null = null;
  readonly #loop: Promise<void>;
  readonly #startTimer: NodeJS.Timeout;

  constructor(opts: NatsGovernorOptions) {
    natsServers(opts.url); // throws now on a malformed URL list, rather than in the background
    this.#opts = {
      url: opts.url,
      replicas: opts.replicas ?? 1,
      startTimeoutMs: opts.startTimeoutMs ?? 2000,
      opTimeoutMs: opts.opTimeoutMs ?? 1000,
      name: opts.name ?? 'sightline-limits',
      log: opts.log ?? (() => {}),
    };
    this.#store = new NatsStore(this.#opts.opTimeoutMs);
    this.#engine = new Engine(this.#store, opts);
    this.ready = new Promise((r) => (this.#resolveReady = r));
    this.#startTimer = setTimeout(() => {
      if (!this.#store.available()) this.#opts.log(`limits: NATS not reachable within ${this.#opts.startTimeoutMs} ms (${this.#store.err ?? 'connecting'}); admitting by the unavailable policy until it is`);
      this.#resolveReady();
    }, this.#opts.startTimeoutMs);
    this.#startTimer.unref();
    this.#loop = this.#run();
  }

  /** This instance's name in the shared entries. */
  get holderId(): string {
    return this.#engine.holderId;
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

  /** Connects (retrying), opens the bucket, and follows the connection until close. */
  async #run(): Promise<void> {
    let backoff = 250;
    while (!this.#closed) {
      try {
        const nc = await connectNats(this.#opts.url, this.#opts.name, { timeout: this.#opts.startTimeoutMs });
        if (this.#closed) {
          await nc.close();
          break;
        }
        this.#nc = nc;
        void this.#follow(nc);
        const kv = await nc.jetstream({ timeout: this.#opts.opTimeoutMs }).views.kv(LIMITS_BUCKET, { history: 1, replicas: this.#opts.replicas, ttl: BUCKET_TTL_MS });
        // nats.js leaves an existing bucket's replica count as it is (SIGHTLINE_NATS_REPLICAS).
        await ensureReplicas(await nc.jetstreamManager({ timeout: this.#opts.opTimeoutMs }), `KV_${LIMITS_BUCKET}`, this.#opts.replicas);
        this.#store.kv = kv;
        this.#store.connected = true;
        this.#store.err = null;
        clearTimeout(this.#startTimer);
        this.#resolveReady();
        backoff = 250;
        // Reconnects are unlimited; this resolves only when the connection closes for good.
        const err = await nc.closed();
        this.#store.connected = false;
        this.#store.kv = null;
        this.#nc = null;
        if (this.#closed) break;
        this.#store.err = `the NATS connection closed${err ? `: ${message(err)}` : ''}`;
        this.#opts.log(`limits: ${this.#store.err}; connecting again`);
      } catch (e) {
        if (this.#closed) break;
        const m = message(e);
        if (m !== this.#store.err) this.#opts.log(`limits: ${m}; retrying`);
        this.#store.err = m;
        this.#store.connected = false;
        this.#store.kv = null;
        const nc = this.#nc;
        this.#nc = null;
        await nc?.close().catch(() => {});
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, backoff);
          this.#wake = () => {
            clearTimeout(t);
            resolve();
          };
        });
        this.#wake = null;
        backoff = Math.min(backoff * 2, 2000);
      }
    }
  }

  /** A disconnect makes the store unavailable (leases held keep admitting); a reconnect reports at once. */
  async #follow(nc: NatsConnection): Promise<void> {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect') {
        this.#store.connected = false;
        this.#store.err = `disconnected from NATS (${String(s.data)})`;
        this.#opts.log(`limits: ${this.#store.err}; admitting from the leases held, then by the unavailable policy`);
      } else if (s.type === 'reconnect') {
        this.#store.connected = this.#store.kv !== null;
        this.#store.err = null;
        this.#opts.log('limits: reconnected to NATS');
        this.#engine.wake();
      }
    }
  }

  /** Gives the unused leases back (within 2 s), then disconnects. */
  async close(): Promise<void> {
    if (this.#closed) return;
    await this.#engine.close();
    this.#closed = true;
    clearTimeout(this.#startTimer);
    this.#resolveReady();
    this.#wake?.();
    await this.#nc?.close().catch(() => {});
    await this.#loop;
  }
}
