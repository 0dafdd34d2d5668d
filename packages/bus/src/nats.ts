/**
 * NATS JetStream transport for capture batches.
 *
 * One stream (`SIGHTLINE_SPANS`) holds capture batches on `sightline.spans.v1`: finished
 * request records, not spans (@sightline/core wire.ts). The names predate the record
 * format and stay, since deployed streams and consumers carry them. Publishers set
 * `Nats-Msg-Id` to the batch id so a publish retried after a timeout is stored once
 * (JetStream dedup, https://docs.nats.io/using-nats/developer/develop_jetstream/model_deep_dive#message-deduplication).
 * Ingesters share one durable pull consumer and ack explicitly after ClickHouse confirmed.
 */
import {
  AckPolicy,
  connect,
  DeliverPolicy,
  DiscardPolicy,
  headers,
  nanos,
  RetentionPolicy,
  StorageType,
  type ConnectionOptions,
  type ConsumerMessages,
  type JetStreamClient,
  type JsMsg,
  type JetStreamManager,
  type NatsConnection,
  type StreamConfig,
} from 'nats';
import type { BusConsumer, BusMessage, BusPublisher } from './types.js';
import { redactUrlCredentials } from '@sightline/core';
import { writeWithoutCopy } from './writev.js';

export const STREAM_NAME = 'SIGHTLINE_SPANS';
export const SUBJECT = 'sightline.spans.v1';
export const DURABLE_NAME = 'sightline-ingester';
/** Batches the ingester could not write, kept for inspection (`nats stream view SIGHTLINE_DEADLETTER`). */
export const DEADLETTER_STREAM = 'SIGHTLINE_DEADLETTER';
export const DEADLETTER_SUBJECT = 'sightline.deadletter.v1';

export interface StreamOptions {
  /**
   * Bytes of batches not yet consumed the stream may hold before refusing new ones (the
   * gateway then spools to disk). Default 1 GiB. Consumed batches do not count: the stream
   * is a work queue, so a batch is removed once the ingester acknowledges it.
   */
  maxBytes?: number;
  /** Milliseconds a batch is kept if never consumed. Default 7 days. */
  maxAgeMs?: number;
  /** Dedup window for message ids, in milliseconds. Default 120 000. */
  duplicateWindowMs?: number;
  /**
   * Copies of the stream in a NATS cluster (SIGHTLINE_NATS_REPLICAS): 1 on a single server;
   * 3 in a cluster of three or more survives the loss of one server (docs/scaling.md).
   * An existing stream is updated to this count. Default 1.
   */
  replicas?: number;
}

/** JetStream allows 1 to 5 replicas of a stream (https://docs.nats.io/nats-concepts/jetstream/streams#configuration). */
export const MAX_NATS_REPLICAS = 5;

/**
 * SIGHTLINE_NATS_REPLICAS: the replica count of the capture stream, the dead-letter stream and
 * the key-value buckets (directory, limits, cache). Default 1; at most 5, and no more than the
 * cluster has servers (JetStream refuses the stream otherwise).
 */
export function natsReplicasFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const v = (env.SIGHTLINE_NATS_REPLICAS ?? '').trim();
  if (v === '') return 1;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > MAX_NATS_REPLICAS) {
    throw new Error(`SIGHTLINE_NATS_REPLICAS must be an integer from 1 to ${MAX_NATS_REPLICAS}, got "${v}"`);
  }
  return n;
}

/**
 * Brings an existing stream (or a key-value bucket's stream, `KV_<bucket>`) to `replicas`
 * copies: JetStream changes the replica count of a stream in place (stream update), keeping
 * its messages, so growing from R1 to R3 never recreates anything. Returns whether it changed.
 */
export async function ensureReplicas(jsm: JetStreamManager, stream: string, replicas: number): Promise<boolean> {
  const info = await jsm.streams.info(stream);
  if (info.config.num_replicas === replicas) return false;
  try {
    await jsm.streams.update(stream, { ...info.config, num_replicas: replicas });
  } catch (e) {
    // The answer to a scale-up can be lost, and the stream briefly reported missing, while
    // its raft group changes (seen with 2.9.10 in a three-server cluster): the update may
    // have been applied all the same. Look again for up to 10 s.
    for (let i = 0; i < 20; i++) {
      await new Promise((r) => setTimeout(r, 500));
      const now = await jsm.streams.info(stream).catch(() => null);
      if (now?.config.num_replicas === replicas) return true;
    }
    throw e;
  }
  return true;
}

/**
 * NATS_URL as the client takes it: a comma-separated server list whose credentials, when a
 * URL carries them (`nats://user:pass@host` or `nats://token@host`), become connect options —
 * the nats.js client ignores userinfo in server URLs. Throws when two URLs disagree.
 */
export function natsServers(url: string): { servers: string[]; user?: string; pass?: string; token?: string } {
  let auth: { user?: string; pass?: string; token?: string } | null = null;
  let authOf = '';
  const servers: string[] = [];
  for (const raw of url.split(',').map((s) => s.trim()).filter((s) => s !== '')) {
    const m = /^([a-z][a-z0-9+.-]*:\/\/)([^/@]*)@(.*)$/i.exec(raw);
    if (m === null) {
      servers.push(raw);
      continue;
    }
    const info = m[2]!;
    const colon = info.indexOf(':');
    const a = colon === -1 ? { token: decodeURIComponent(info) } : { user: decodeURIComponent(info.slice(0, colon)), pass: decodeURIComponent(info.slice(colon + 1)) };
    if (auth !== null && info !== authOf) throw new Error('NATS_URL: every server URL must carry the same credentials');
    auth = a;
    authOf = info;
    servers.push(m[1]! + m[3]!);
  }
  return { servers, ...auth };
}

/** Connects with unlimited reconnects: capture outlives NATS restarts. */
export async function connectNats(url: string, name: string, extra: Partial<ConnectionOptions> = {}): Promise<NatsConnection> {
  return connect({
    ...natsServers(url),
    name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 250,
    pingInterval: 10_000,
    // Without it nats.js captures a stack trace (new Error) per request it starts, for
    // nicer timeout messages: on the gateway that is every publish, on its serving thread
    // (issue 15's profile: about a quarter of the NATS client's time per publish).
    noAsyncTraces: true,
    ...extra,
  });
}

/** What ensureStream found. */
export interface StreamCheck {
  /**
   * The stream's retention: `workqueue` for streams this version creates; `limits` for one
   * created by an earlier version (NATS cannot change a stream's retention in place), whose
   * acknowledged batches the ingester then purges itself (NatsConsumer).
   */
  retention: 'workqueue' | 'limits' | 'interest';
}

/**
 * Creates the stream, or verifies and updates an existing one so it carries our subject
 * and a dedup window: the gateway calls this at start.
 *
 * Work-queue retention: a batch leaves the stream when the ingester acknowledges it, so
 * `max_bytes` bounds the backlog, not the traffic since the stream was made. (With limits
 * retention, acknowledged batches stayed until max_age: after 1 GiB of capture within 7
 * days the stream refused every new batch.) The one durable consumer takes everything, as
 * a work queue requires (https://docs.nats.io/nats-concepts/jetstream/streams#retentionpolicy).
 */
export async function ensureStream(jsm: JetStreamManager, opts: StreamOptions = {}): Promise<StreamCheck> {
  const want: Partial<StreamConfig> = {
    name: STREAM_NAME,
    subjects: [SUBJECT],
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
    discard: DiscardPolicy.New,
    max_bytes: opts.maxBytes ?? 1024 ** 3,
    max_age: nanos(opts.maxAgeMs ?? 7 * 24 * 3600 * 1000),
    duplicate_window: nanos(opts.duplicateWindowMs ?? 120_000),
    num_replicas: opts.replicas ?? 1,
  };
  let info;
  try {
    info = await jsm.streams.info(STREAM_NAME);
  } catch (e) {
    if (!isNotFound(e)) throw e;
    await jsm.streams.add(want);
    return { retention: 'workqueue' };
  }
  const cfg = info.config;
  if (!cfg.subjects.includes(SUBJECT) || cfg.duplicate_window !== want.duplicate_window || cfg.num_replicas !== want.num_replicas) {
    await jsm.streams.update(STREAM_NAME, { ...cfg, subjects: [...new Set([...cfg.subjects, SUBJECT])], duplicate_window: want.duplicate_window!, num_replicas: want.num_replicas! });
  }
  return { retention: cfg.retention === RetentionPolicy.Workqueue ? 'workqueue' : cfg.retention === RetentionPolicy.Interest ? 'interest' : 'limits' };
}

function isNotFound(e: unknown): boolean {
  const err = e as { api_error?: { err_code?: number }; code?: string; message?: string };
  return err.api_error?.err_code === 10059 || err.code === '404' || /stream not found/i.test(err.message ?? '');
}

export class NatsPublisher implements BusPublisher {
  readonly #js: JetStreamClient;
  /**
   * A message's bytes are written from the caller's memory (writeWithoutCopy) and JetStream
   * acknowledges it after the server read it whole, so the caller may reuse them once the
   * publish resolved (not after a failure: the client may still hold them, to send on
   * reconnection).
   */
  readonly releasesData = true;
  constructor(readonly nc: NatsConnection) {
    this.#js = nc.jetstream();
    writeWithoutCopy(nc);
  }

  async publish(data: Uint8Array, msgId: string, timeoutMs: number): Promise<void> {
    await this.#js.publish(SUBJECT, data, { msgID: msgId, timeout: timeoutMs });
  }

  async close(): Promise<void> {
    await this.nc.drain().catch(() => this.nc.close());
  }
}

export interface ConsumerOptions {
  /** Milliseconds before an unacked message is redelivered. Default 30 000. */
  ackWaitMs?: number;
  /** Unacknowledged messages outstanding across all ingesters, at most. Default 1 000. */
  maxAckPending?: number;
  /**
   * Replicas of the capture and dead-letter streams (StreamOptions.replicas); the durable
   * consumer follows its stream's count. Default 1.
   */
  replicas?: number;
  /**
   * Milliseconds between purges of acknowledged batches, for a stream with limits retention
   * (made by an earlier version; see ensureStream). Default 30 000; 0: never.
   */
  purgeEveryMs?: number;
}

export class NatsConsumer implements BusConsumer {
  #purgeTimer: NodeJS.Timeout | null = null;
  #purging = false;
  /** The long-lived pull (fetch), started by the first fetch; null before, and after it ended. */
  #pull: ConsumerMessages | null = null;
  /** Why the pull ended, thrown by the next fetch (which then starts a new one). */
  #pullError: unknown = null;
  /** Delivered messages not yet handed out by fetch. */
  readonly #ready: JsMsg[] = [];
  /** Fetches waiting for messages. */
  readonly #waiters = new Set<() => void>();
  /** Resumes the pump when a fetch made room. */
  #room: (() => void) | null = null;
  /** The pull being started, while it is. */
  #starting: Promise<void> | null = null;
  #closing = false;

  private constructor(
    readonly nc: NatsConnection,
    readonly js: JetStreamClient,
    /** The capture stream's retention, as ensureStream found it. */
    readonly retention: StreamCheck['retention'],
  ) {}

  /**
   * Removes every batch below the durable consumer's ack floor (all acknowledged: nothing
   * unconsumed is touched), so a limits-retention stream does not fill with batches already
   * in ClickHouse. Returns how many were removed. Needless for a work queue, which removes
   * each batch at its ack.
   */
  async purgeAcknowledged(): Promise<number> {
    if (this.#purging) return 0;
    this.#purging = true;
    try {
      const jsm = await this.nc.jetstreamManager();
      const floor = (await jsm.consumers.info(STREAM_NAME, DURABLE_NAME)).ack_floor.stream_seq;
      if (floor <= 0) return 0;
      const r = await jsm.streams.purge(STREAM_NAME, { seq: floor + 1 });
      return r.purged;
    } finally {
      this.#purging = false;
    }
  }

  /** Creates (or reuses) the durable consumer on the stream, creating the stream if needed. */
  static async open(nc: NatsConnection, opts: ConsumerOptions = {}): Promise<NatsConsumer> {
    const jsm = await nc.jetstreamManager();
    const replicas = opts.replicas ?? 1;
    const { retention } = await ensureStream(jsm, { replicas });
    try {
      await jsm.consumers.info(STREAM_NAME, DURABLE_NAME);
    } catch (e) {
      if (!/consumer not found/i.test((e as Error).message) && (e as { api_error?: { err_code?: number } }).api_error?.err_code !== 10014) throw e;
      await jsm.consumers.add(STREAM_NAME, {
        durable_name: DURABLE_NAME,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        ack_wait: nanos(opts.ackWaitMs ?? 30_000),
        max_deliver: -1,
        max_ack_pending: opts.maxAckPending ?? 1_000,
        filter_subject: SUBJECT,
      });
    }
    try {
      await ensureReplicas(jsm, DEADLETTER_STREAM, replicas);
    } catch (e) {
      if (!isNotFound(e)) throw e;
      await jsm.streams.add({
        name: DEADLETTER_STREAM,
        subjects: [DEADLETTER_SUBJECT],
        retention: RetentionPolicy.Limits,
        storage: StorageType.File,
        max_age: nanos(30 * 24 * 3600 * 1000),
        duplicate_window: nanos(120_000),
        num_replicas: replicas,
      });
    }
    const consumer = new NatsConsumer(nc, nc.jetstream(), retention);
    const every = opts.purgeEveryMs ?? 30_000;
    if (retention === 'limits' && every > 0) {
      // A failed purge (NATS away) is tried again at the next tick; the batches stay until then.
      consumer.#purgeTimer = setInterval(() => void consumer.purgeAcknowledged().catch(() => {}), every);
      consumer.#purgeTimer.unref();
    }
    return consumer;
  }

  async deadLetter(m: BusMessage, reason: string): Promise<void> {
    const h = headers();
    h.set('Sightline-Reason', reason.replace(/[\r\n]+/g, ' ').slice(0, 1000));
    h.set('Sightline-Original-Msg-Id', m.msgId);
    await this.js.publish(DEADLETTER_SUBJECT, m.data, { msgID: `dl/${m.msgId}`, headers: h, timeout: 5_000 });
    await m.ack();
  }

  /**
   * Up to `max` messages: resolves once `max` are in hand, or after `expiresMs` with what
   * arrived by then (possibly none), so ClickHouse gets inserts of many batches even at low
   * traffic, as a JetStream pull of `max` that expires after `expiresMs` would give.
   *
   * The messages come from one long-lived pull (`consume`), not a fresh pull per call. A
   * per-call pull (`fetch`) ends on a client-side timer (its expiry + 5 %): when the ingester's
   * event loop was busy (decoding the previous set, serialising an insert) past that moment,
   * the timer ran before the socket was read and the subscription closed under messages the
   * server had already delivered. Those stayed unacknowledged until `ack_wait` (30 s)
   * brought them back: capture stalled for 30 s under load (bench, 1 December). The
   * subscription of `consume` lives until close(), so nothing delivered is dropped.
   */
  async fetch(max: number, expiresMs: number): Promise<BusMessage[]> {
    if (this.#pullError !== null) {
      const e = this.#pullError;
      this.#pullError = null;
      throw e;
    }
    if (this.#pull === null && !this.#closing) {
      // One pull however many fetches wait for it to start.
      this.#starting ??= this.#startPull(max).finally(() => (this.#starting = null));
      await this.#starting;
    }
    const deadline = Date.now() + expiresMs;
    while (this.#ready.length < max && this.#pull !== null && !this.#closing) {
      const left = deadline - Date.now();
      if (left <= 0) break;
      await new Promise<void>((resolve) => {
        const t = setTimeout(wake, left);
        const waiters = this.#waiters;
        function wake(): void {
          clearTimeout(t);
          waiters.delete(wake);
          resolve();
        }
        waiters.add(wake);
      });
    }
    const out = this.#ready.splice(0, max);
    // Room again: the pump reads on (and the client pulls more).
    this.#room?.();
    return out.map(busMessage);
  }

  /** Starts the long-lived pull and the pump that moves its messages to #ready. */
  async #startPull(max: number): Promise<void> {
    const consumer = await this.js.consumers.get(STREAM_NAME, DURABLE_NAME);
    // The client asks for `max` messages and asks again when 75 % of them arrived; it sends
    // the next ask only when the pump reads past it, so unread messages stay bounded.
    // A consumer deleted from under it ends the pull with an error (the next fetch throws it),
    // as a fetch of a missing consumer did, instead of retrying out of sight.
    const pull = await consumer.consume({ max_messages: max, expires: 30_000, abort_on_missing_resource: true });
    this.#pull = pull;
    void this.#pump(pull, max);
  }

  async #pump(pull: ConsumerMessages, max: number): Promise<void> {
    try {
      for await (const m of pull) {
        this.#ready.push(m);
        for (const wake of [...this.#waiters]) wake();
        // At most two sets in hand (one being written while the next gathers): wait for a fetch.
        while (this.#ready.length >= 2 * max && !this.#closing) await new Promise<void>((resolve) => (this.#room = resolve));
        this.#room = null;
        if (this.#closing) break;
      }
    } catch (e) {
      if (!this.#closing) this.#pullError = e;
    } finally {
      if (this.#pull === pull) this.#pull = null;
      for (const wake of [...this.#waiters]) wake();
    }
  }

  async close(): Promise<void> {
    if (this.#purgeTimer !== null) clearInterval(this.#purgeTimer);
    this.#closing = true;
    this.#room?.();
    for (const wake of [...this.#waiters]) wake();
    await this.#pull?.close().catch(() => {});
    // Delivered to this ingester but never handed out: back to the stream at once, for the
    // next ingester, instead of after ack_wait.
    for (const m of this.#ready.splice(0)) m.nak();
    await this.nc.drain().catch(() => this.nc.close());
  }
}

function busMessage(m: JsMsg): BusMessage {
  return {
    data: m.data,
    msgId: m.headers?.get('Nats-Msg-Id') ?? `${m.info.stream}:${m.seq}`,
    deliveries: m.info.redeliveryCount,
    ack: async () => {
      // ackAck waits for the server's confirmation, so "acked" means it will not come back.
      const ok = await m.ackAck({ timeout: 5_000 });
      if (!ok) throw new Error('JetStream did not confirm the ack');
    },
    nak: (delayMs?: number) => m.nak(delayMs),
  };
}

/**
 * A publisher that is usable before NATS is: it connects (and creates or verifies the
 * stream) in the background, retrying for as long as it takes, and until then rejects
 * publishes at once so capture keeps the batches and retries them. A gateway therefore
 * starts and serves with NATS down, and its capture resumes when NATS comes up.
 */
export class ResilientNatsPublisher implements BusPublisher {
  #publisher: NatsPublisher | null = null;
  readonly releasesData = true;
  #closed = false;
  /** Tracks the client's connection events, so capture can spool at once while NATS is away. */
  #up = false;
  #lastError: unknown = null;
  readonly ready: Promise<void>;

  constructor(
    readonly url: string,
    readonly name: string,
    readonly stream: StreamOptions = {},
  ) {
    this.ready = this.#connectLoop();
  }

  async #watch(nc: NatsConnection): Promise<void> {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect') this.#up = false;
      else if (s.type === 'reconnect') this.#up = true;
    }
  }

  isConnected(): boolean {
    return this.#up && this.#publisher !== null && !this.#publisher.nc.isClosed();
  }

  get lastError(): unknown {
    return this.#lastError;
  }

  async #connectLoop(): Promise<void> {
    let delay = 250;
    while (!this.#closed) {
      try {
        const nc = await connectNats(this.url, this.name);
        await ensureStream(await nc.jetstreamManager(), this.stream);
        if (this.#closed) {
          await nc.close();
          return;
        }
        this.#publisher = new NatsPublisher(nc);
        this.#up = true;
        void this.#watch(nc);
        return;
      } catch (e) {
        this.#lastError = e;
        await new Promise((r) => setTimeout(r, delay).unref());
        delay = Math.min(5_000, delay * 2);
      }
    }
  }

  async publish(data: Uint8Array, msgId: string, timeoutMs: number): Promise<void> {
    const p = this.#publisher;
    if (p === null) throw new Error(`not connected to NATS at ${redactUrlCredentials(this.url)}`);
    await p.publish(data, msgId, timeoutMs);
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#publisher !== null) await this.#publisher.close();
  }
}
