/**
 * The parent's side of the embedded mode's two processes: it forks the child that owns chdb
 * (child.ts), answers its calls (ipc.ts) from the in-process bus, the key directory and the
 * limits, and restarts it with backoff when it dies.
 *
 * Nothing is lost when the child dies: the bus stays here. A message the child fetched and
 * did not acknowledge is tracked by tag and handed back for redelivery (`nak(0)`) the moment
 * the child's exit is seen, so the next child writes it; one it had written but not yet
 * acknowledged is written twice, which the tables collapse (docs/schema.md), as after an
 * ingester crash with NATS. While no child runs, the bus holds what the gateway publishes
 * up to its bounds (MemoryBusOptions: messages and bytes); past them it refuses, and the
 * gateway's capture keeps the batches in its queue and its disk spool and replays them.
 */
import { fork, type ChildProcess } from 'node:child_process';
import type { BusMessage, MemoryBus } from '@sightline/bus';
import type { Directory, KeyInput, TeamSettings } from '@sightline/directory';
import type { Governor, UsageQuery } from '@sightline/controls';
import { toWireError, type Call, type DirectoryDump, type ToChild, type ToParent, type WireMessage } from './ipc.js';

/**
 * Bytes of batches one fetch answer carries at most (one batch always goes, however large:
 * capture's are up to 512 KiB). The answer is serialized on the gateway's event loop; a
 * backlog after a restart (64 messages of 512 KiB, the ingester's fetch) would otherwise be
 * a 32 MiB copy between two requests.
 */
const FETCH_MAX_BYTES = 1024 * 1024;

export function directoryDump(d: Directory): DirectoryDump {
  return { keys: d.keys({ revoked: true }), teams: d.teams() };
}

/** One child's link: the messages lent to it, its calls. Detached when it exits. */
class ChildLink {
  readonly #lent = new Map<number, BusMessage>();
  #nextTag = 1;
  #alive = true;

  constructor(
    readonly child: ChildProcess,
    readonly deps: SupervisorDeps,
  ) {
    child.on('message', (m: ToParent) => this.#onMessage(m));
  }

  /** The child is gone: what it had fetched and not acknowledged goes back to the bus now. */
  detach(): number {
    this.#alive = false;
    const n = this.#lent.size;
    for (const m of this.#lent.values()) m.nak(0);
    this.#lent.clear();
    return n;
  }

  send(m: ToChild): void {
    if (!this.#alive || !this.child.connected) return;
    // A send to a child that just died fails asynchronously: its lent messages are in
    // #lent and go back to the bus in detach().
    this.child.send(m, (e) => {
      if (e !== null && e !== undefined && this.#alive) this.deps.log(`child channel: ${e.message}`);
    });
  }

  #onMessage(m: ToParent): void {
    if (m.t === 'call') {
      this.#call(m.call).then(
        (value) => this.send({ t: 'reply', id: m.id, ok: true, value }),
        (e: unknown) => this.send({ t: 'reply', id: m.id, ok: false, error: toWireError(e) }),
      );
    } else if (m.t === 'nak') {
      const msg = this.#lent.get(m.tag);
      if (msg !== undefined) {
        this.#lent.delete(m.tag);
        msg.nak(m.delayMs);
      }
    } else if (m.t === 'ready') {
      this.deps.onReady?.();
    }
  }

  async #call(c: Call): Promise<unknown> {
    const { bus, directory, governor } = this.deps;
    switch (c.op) {
      case 'fetch': {
        if (bus === null) throw new Error('no in-process bus in this process (NATS_URL is set)');
        const msgs = await bus.fetch(c.max, c.expiresMs, FETCH_MAX_BYTES);
        if (!this.#alive) {
          for (const m of msgs) m.nak(0);
          return [];
        }
        const out: WireMessage[] = [];
        for (const m of msgs) {
          const tag = this.#nextTag++;
          this.#lent.set(tag, m);
          out.push({ tag, data: m.data, msgId: m.msgId, deliveries: m.deliveries });
        }
        return out;
      }
      case 'ack': {
        const m = this.#lent.get(c.tag);
        if (m === undefined) return null; // already handed back: it will be written again
        this.#lent.delete(c.tag);
        await m.ack();
        return null;
      }
      case 'deadLetter': {
        const m = this.#lent.get(c.tag);
        if (m === undefined || bus === null) return null;
        this.#lent.delete(c.tag);
        await bus.deadLetter(m, c.reason);
        return null;
      }
      case 'usage':
        if (governor === null) throw new Error('no limits in this process');
        return governor.usage(c.query as UsageQuery, c.nowMs);
      case 'directoryState':
        if (directory === null) throw new Error('no directory in this process');
        return directoryDump(directory);
      case 'directoryWrite': {
        if (directory === null) throw new Error('no directory in this process');
        const w = c.write;
        let result: unknown;
        if (w.op === 'createKey') result = await directory.createKey(w.args[0] as KeyInput, w.args[1]);
        else if (w.op === 'revokeKey') result = await directory.revokeKey(w.args[0], w.args[1]);
        else if (w.op === 'rotateKey') result = await directory.rotateKey(w.args[0], w.args[1], w.args[2]);
        else result = await directory.putTeam(w.args[0], w.args[1] as TeamSettings, w.args[2]);
        // The new state travels with the answer: the child's mirror holds it before the
        // admin endpoint answers, so a key it just created authenticates at once.
        return { result, state: directoryDump(directory) };
      }
    }
  }
}

export interface SupervisorDeps {
  /** The in-process bus the child consumes; null when the child consumes NATS itself. */
  bus: MemoryBus | null;
  /** The directory the child mirrors (in-process mode); null: none or the child has its own. */
  directory: Directory | null;
  /** Answers the child's query API's usage reads; null: none or the child has its own. */
  governor: Governor | null;
  log: (msg: string) => void;
  onReady?: () => void;
}

export interface SupervisorOptions extends SupervisorDeps {
  /** The child's entry module (child.ts, or child.js when built). */
  entry: string;
  /** First restart delay; doubled per quick death up to `maxBackoffMs`. Default 250. */
  minBackoffMs?: number;
  /** Default 10 000. */
  maxBackoffMs?: number;
  /** A child that lived this long resets the backoff. Default 30 000. */
  stableMs?: number;
}

export class ChildSupervisor {
  readonly #opts: SupervisorOptions;
  #link: ChildLink | null = null;
  #restartTimer: NodeJS.Timeout | null = null;
  #backoff: number;
  #stopping = false;
  #exited: Promise<void> = Promise.resolve();
  /** Children started so far (the first one included). */
  starts = 0;

  constructor(opts: SupervisorOptions) {
    this.#opts = opts;
    this.#backoff = opts.minBackoffMs ?? 250;
  }

  /** The running child's process id, or null between a death and its restart. */
  get pid(): number | null {
    return this.#link?.child.pid ?? null;
  }

  start(): void {
    if (this.#stopping) return;
    const o = this.#opts;
    // The parent's own flags (`--import tsx` under `npm start`, `--conditions=production`
    // when built) so the child loads the same way. stdio inherited: one stdout, one stderr.
    const child = fork(o.entry, [], { execArgv: process.execArgv, serialization: 'advanced', stdio: 'inherit' });
    this.starts++;
    const startedAt = Date.now();
    const link = new ChildLink(child, o);
    this.#link = link;
    o.log(`store process started (pid ${child.pid ?? '?'}): ingester, chdb, query API`);
    this.#exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        const handedBack = link.detach();
        if (this.#link === link) this.#link = null;
        resolve();
        if (this.#stopping) return;
        if (Date.now() - startedAt >= (o.stableMs ?? 30_000)) this.#backoff = o.minBackoffMs ?? 250;
        const delay = this.#backoff;
        this.#backoff = Math.min(o.maxBackoffMs ?? 10_000, this.#backoff * 2);
        o.log(`store process ${child.pid ?? '?'} exited (${signal ?? `code ${code}`}); ${handedBack} unacknowledged batch(es) handed back to the bus; restarting in ${delay} ms`);
        this.#restartTimer = setTimeout(() => {
          this.#restartTimer = null;
          this.start();
        }, delay);
      });
    });
  }

  /**
   * Stops the child once: asks it to close (ingester, query API, store) and waits up to
   * `timeoutMs` for its exit, then kills it. No restart after this.
   */
  async stop(timeoutMs: number): Promise<void> {
    this.#stopping = true;
    if (this.#restartTimer !== null) clearTimeout(this.#restartTimer);
    const link = this.#link;
    if (link === null) return;
    link.send({ t: 'shutdown' });
    let timer: NodeJS.Timeout | null = null;
    const timedOut = await Promise.race([
      this.#exited.then(() => false),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(true), timeoutMs);
      }),
    ]);
    if (timer !== null) clearTimeout(timer);
    if (timedOut) {
      this.#opts.log(`store process ${link.child.pid ?? '?'} did not exit within ${timeoutMs} ms: killing it`);
      link.child.kill('SIGKILL');
      await this.#exited;
    }
  }
}
