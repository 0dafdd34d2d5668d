/**
 * The disk spool: where capture batches wait while NATS is slow or unreachable, so that
 * a long outage costs disk, not memory, and a gateway restart (or SIGKILL) loses nothing
 * that reached the spool. One file per batch, named so that lexical order is arrival
 * order; each file holds the batch's message id and its bytes. Replay reads the oldest
 * first and deletes a file only after JetStream acknowledged it; the message id makes a
 * replayed batch that had in fact been stored harmless (JetStream dedup, and the
 * ReplacingMergeTree tables beyond the dedup window).
 *
 * Files are written without fsync: they survive the process being killed, not the
 * machine losing power.
 *
 * Batches may hold prompts and answers (issue 11), so files are created readable by the
 * gateway's user only (0600) and a directory the spool creates is 0700.
 */
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { readFile, rm, writeFile, rename } from 'node:fs/promises';
import { join } from 'node:path';

export interface SpoolEntry {
  name: string;
  bytes: number;
  /** Written in full (renamed into place); only ready entries are replayed. */
  ready: boolean;
}

const SUFFIX = '.batch';

const LOCK = '.lock';

/** Modes of what the spool creates: its owner's only. */
const FILE_MODE = 0o600;
const DIR_MODE = 0o700;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export class Spool {
  /**
   * Claims a spool directory for this process: a spool is replayed by the process that
   * owns it, so two live gateways must never share one (each would replay, and delete,
   * the other's batches). A lock left by a process that is gone is taken over.
   */
  static claim(dir: string): void {
    mkdirSync(dir, { recursive: true, mode: DIR_MODE });
    const lock = join(dir, LOCK);
    let holder = 0;
    try {
      holder = Number(readFileSync(lock, 'utf8').trim());
    } catch {
      // no lock yet
    }
    if (Number.isInteger(holder) && holder > 0 && holder !== process.pid && alive(holder)) {
      throw new Error(`capture spool ${dir} is in use by process ${holder}; give each gateway its own SIGHTLINE_SPOOL_DIR (capture.spool_dir)`);
    }
    writeFileSync(lock, String(process.pid), { mode: FILE_MODE });
  }

  /** Releases a claim made by this process. */
  static release(dir: string): void {
    const lock = join(dir, LOCK);
    try {
      if (Number(readFileSync(lock, 'utf8').trim()) === process.pid) rmSync(lock, { force: true });
    } catch {
      // already gone
    }
  }

  readonly #dir: string;
  readonly #maxBytes: number;
  readonly #entries: SpoolEntry[] = [];
  #bytes = 0;
  #counter = 0;

  /** Opens (creating) the directory and indexes batches left by an earlier run. */
  constructor(dir: string, maxBytes: number) {
    this.#dir = dir;
    this.#maxBytes = maxBytes;
    mkdirSync(dir, { recursive: true, mode: DIR_MODE });
    for (const name of readdirSync(dir).sort()) {
      if (name.endsWith(`${SUFFIX}.tmp`)) {
        // A write cut short by a kill: its batch was also still in memory, so nothing
        // that was acknowledged to anyone is in it.
        rmSync(join(dir, name), { force: true });
        continue;
      }
      if (!name.endsWith(SUFFIX)) continue;
      const bytes = statSync(join(dir, name)).size;
      this.#entries.push({ name, bytes, ready: true });
      this.#bytes += bytes;
    }
  }

  get count(): number {
    return this.#entries.length;
  }

  get bytes(): number {
    return this.#bytes;
  }

  /** Whether `size` more bytes fit under the bound. */
  fits(size: number): boolean {
    return this.#bytes + size <= this.#maxBytes;
  }

  /**
   * Appends a batch. Written to a temporary name and renamed, so a kill mid-write never
   * leaves a torn batch behind. Returns false, writing nothing, when the spool is full.
   */
  async append(msgId: string, data: Uint8Array): Promise<boolean> {
    const header = Buffer.from(`${msgId}\n`);
    const size = header.length + data.length;
    if (!this.fits(size)) return false;
    // Zero-padded time and counter: lexical order is arrival order, also across restarts.
    const name = `${Date.now().toString().padStart(15, '0')}-${(this.#counter++).toString().padStart(9, '0')}${SUFFIX}`;
    const entry: SpoolEntry = { name, bytes: size, ready: false };
    this.#entries.push(entry);
    this.#bytes += size;
    const tmp = join(this.#dir, `${name}.tmp`);
    try {
      await writeFile(tmp, Buffer.concat([header, data]), { mode: FILE_MODE });
      await rename(tmp, join(this.#dir, name));
      entry.ready = true;
    } catch (e) {
      const i = this.#entries.indexOf(entry);
      if (i >= 0) this.#entries.splice(i, 1);
      this.#bytes -= size;
      throw e;
    }
    return true;
  }

  /** The oldest fully written entries, up to `n`, in order. */
  oldest(n: number): SpoolEntry[] {
    const out: SpoolEntry[] = [];
    for (const e of this.#entries) {
      if (out.length >= n || !e.ready) break;
      out.push(e);
    }
    return out;
  }

  async read(e: SpoolEntry): Promise<{ msgId: string; data: Buffer }> {
    const buf = await readFile(join(this.#dir, e.name));
    const nl = buf.indexOf(0x0a);
    return { msgId: buf.subarray(0, nl).toString('utf8'), data: buf.subarray(nl + 1) };
  }

  async remove(e: SpoolEntry): Promise<void> {
    const i = this.#entries.indexOf(e);
    if (i < 0) return;
    this.#entries.splice(i, 1);
    this.#bytes -= e.bytes;
    await rm(join(this.#dir, e.name), { force: true });
  }
}
