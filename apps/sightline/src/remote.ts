/**
 * The child's side of the embedded mode's channel (ipc.ts): the bus consumer, the key
 * directory and the limits usage the ingester and the query API use, answered by the parent.
 */
import type { BusConsumer, BusMessage } from '@sightline/bus';
import { DirectoryError, DirectoryState, type Directory, type DirectoryErrorCode, type DirectoryStatus, type KeyCheck, type KeyFilter, type KeyHasher, type KeyInput, type KeyRecord, type Scope, type TeamRecord, type TeamSettings } from '@sightline/directory';
import type { Governor, ScopeUsage, UsageQuery } from '@sightline/controls';
import type { Call, DirectoryDump, DirectoryWrite, ToChild, ToParent, WireError, WireMessage } from './ipc.js';

function fromWire(e: WireError): Error {
  if (e.name === 'DirectoryError' && e.code !== undefined) return new DirectoryError(e.code as DirectoryErrorCode, e.message, e.field ?? null);
  const err = new Error(e.message);
  err.name = e.name;
  return err;
}

/** Calls to the parent over this process's IPC channel. */
export class ParentLink {
  readonly #pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  #nextId = 1;
  #closed = false;
  onShutdown: (() => void) | null = null;

  constructor() {
    if (process.send === undefined) throw new Error('the store process must be started by the embedded launcher (main.ts), with an IPC channel');
    process.on('message', (m: ToChild) => {
      if (m.t === 'reply') {
        const p = this.#pending.get(m.id);
        if (p === undefined) return;
        this.#pending.delete(m.id);
        if (m.ok) p.resolve(m.value);
        else p.reject(fromWire(m.error));
      } else if (m.t === 'shutdown') {
        this.onShutdown?.();
      }
    });
    // The parent is gone (killed, or exited without asking): no one answers any more.
    process.on('disconnect', () => {
      this.#closed = true;
      for (const p of this.#pending.values()) p.reject(new Error('the gateway process is gone'));
      this.#pending.clear();
      this.onShutdown?.();
    });
  }

  get connected(): boolean {
    return !this.#closed && process.connected === true;
  }

  call<T>(call: Call): Promise<T> {
    if (!this.connected) return Promise.reject(new Error('the gateway process is gone'));
    const id = this.#nextId++;
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.send({ t: 'call', id, call });
    });
  }

  send(m: ToParent): void {
    if (!this.connected) return;
    process.send!(m, undefined, undefined, (e: Error | null) => {
      if (e === null) return;
      // The channel closed under us: 'disconnect' rejects what waits.
    });
  }
}

/**
 * The in-process bus, consumed from the child: fetch, ack and deadLetter are calls, nak a
 * one-way message. Acknowledgement resolves once the parent's bus dropped the message.
 */
export class RemoteConsumer implements BusConsumer {
  readonly #link: ParentLink;
  readonly #tags = new WeakMap<BusMessage, number>();
  readonly #waiting = new Set<() => void>();
  #closed = false;

  constructor(link: ParentLink) {
    this.#link = link;
  }

  async fetch(max: number, expiresMs: number): Promise<BusMessage[]> {
    if (this.#closed) return [];
    // On close, a pending long poll ends at once (the parent hands back what it answers late:
    // it is lent to this child until its exit).
    let done: () => void = () => {};
    const closed = new Promise<WireMessage[]>((resolve) => {
      done = () => resolve([]);
      this.#waiting.add(done);
    });
    try {
      const wire = await Promise.race([this.#link.call<WireMessage[]>({ op: 'fetch', max, expiresMs }), closed]);
      return wire.map((w) => this.#message(w));
    } finally {
      this.#waiting.delete(done);
    }
  }

  #message(w: WireMessage): BusMessage {
    const link = this.#link;
    // Structured clone delivers a Uint8Array; give the ingester a Buffer view of it (no copy).
    const data = Buffer.from(w.data.buffer, w.data.byteOffset, w.data.byteLength);
    const m: BusMessage = {
      data,
      msgId: w.msgId,
      deliveries: w.deliveries,
      ack: () => link.call<void>({ op: 'ack', tag: w.tag }),
      nak: (delayMs = 0) => link.send({ t: 'nak', tag: w.tag, delayMs }),
    };
    this.#tags.set(m, w.tag);
    return m;
  }

  async deadLetter(m: BusMessage, reason: string): Promise<void> {
    const tag = this.#tags.get(m);
    if (tag === undefined) throw new Error(`message ${m.msgId} was not fetched from this consumer`);
    await this.#link.call<void>({ op: 'deadLetter', tag, reason });
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const w of this.#waiting) w();
    this.#waiting.clear();
  }
}

/**
 * The key directory as the child's query API sees it: a mirror of the parent's, which owns
 * the state and its file ($SIGHTLINE_DATA_DIR/directory.json). Lookups answer from the
 * mirror; writes are made by the parent, and the state that results comes back with the
 * answer and replaces the mirror before the write resolves. Only this process writes the
 * in-process directory (the gateway only reads), so the mirror is never stale after its
 * own writes; it is loaded whole at start.
 */
export class MirrorDirectory implements Directory {
  readonly ready: Promise<void>;
  readonly #link: ParentLink;
  readonly #hasher: KeyHasher;
  #state: DirectoryState;

  constructor(link: ParentLink, hasher: KeyHasher) {
    this.#link = link;
    this.#hasher = hasher;
    this.#state = new DirectoryState(hasher);
    this.ready = link.call<DirectoryDump>({ op: 'directoryState' }).then((d) => this.#load(d));
  }

  #load(d: DirectoryDump): void {
    const s = new DirectoryState(this.#hasher);
    for (const t of d.teams) s.putTeam(t);
    for (const k of d.keys) s.putKey(k);
    this.#state = s;
  }

  async #write<T>(write: DirectoryWrite): Promise<T> {
    const r = await this.#link.call<{ result: T; state: DirectoryDump }>({ op: 'directoryWrite', write });
    this.#load(r.state);
    return r.result;
  }

  check(secret: string, scope: Scope, nowMs: number): KeyCheck {
    return this.#state.check(secret, scope, nowMs);
  }
  modelAllowed(key: KeyRecord, model: string): boolean {
    return this.#state.modelAllowed(key, model);
  }
  key(id: string): KeyRecord | null {
    return this.#state.key(id);
  }
  keys(filter?: KeyFilter): KeyRecord[] {
    return this.#state.keys(filter);
  }
  team(name: string): TeamRecord | null {
    return this.#state.team(name);
  }
  teams(): TeamRecord[] {
    return this.#state.teams();
  }
  createKey(input: KeyInput, nowMs: number): Promise<{ record: KeyRecord; secret: string }> {
    return this.#write({ op: 'createKey', args: [input, nowMs] });
  }
  revokeKey(id: string, nowMs: number): Promise<KeyRecord | null> {
    return this.#write({ op: 'revokeKey', args: [id, nowMs] });
  }
  rotateKey(id: string, graceSeconds: number, nowMs: number): Promise<{ record: KeyRecord; secret: string } | null> {
    return this.#write({ op: 'rotateKey', args: [id, graceSeconds, nowMs] });
  }
  putTeam(name: string, settings: TeamSettings, nowMs: number): Promise<TeamRecord> {
    return this.#write({ op: 'putTeam', args: [name, settings, nowMs] });
  }
  status(): DirectoryStatus {
    return { source: 'memory', synced: this.#link.connected, loadedFrom: 'store', keys: this.#state.keyCount, teams: this.#state.teamCount, updatedAt: this.#state.updatedAt, error: this.#link.connected ? null : 'the gateway process is gone' };
  }
  async close(): Promise<void> {}
}

/** The limits' usage as the child's query API reads it: answered by the parent's governor. */
export class RemoteUsage implements Pick<Governor, 'usage'> {
  readonly #link: ParentLink;
  constructor(link: ParentLink) {
    this.#link = link;
  }
  usage(q: UsageQuery, nowMs: number): Promise<ScopeUsage[]> {
    return this.#link.call<ScopeUsage[]>({ op: 'usage', query: q, nowMs });
  }
}
