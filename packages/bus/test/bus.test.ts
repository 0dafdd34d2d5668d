import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BusFullError, BusPayloadTooLargeError, MemoryBus, NatsPublisher, NatsConsumer, connectNats, ensureStream, writesWithoutCopy, writtenWithoutCopy, STREAM_NAME, type BusConsumer, type BusPublisher } from '@sightline/bus';
import { RetentionPolicy, StorageType } from 'nats';
import { NatsServer } from '../../../test/support/servers.js';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as delay } from 'node:timers/promises';

const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);

function contract(name: string, open: () => Promise<{ pub: BusPublisher; con: BusConsumer; done: () => Promise<void> }>, redeliverMs: number) {
  describe(name, () => {
    let pub: BusPublisher;
    let con: BusConsumer;
    let done: () => Promise<void>;
    before(async () => {
      ({ pub, con, done } = await open());
    });
    after(async () => done());

    test('publishes, dedups by message id, delivers in order, acks', async () => {
      await pub.publish(enc('a'), 'm-1', 2000);
      await pub.publish(enc('a-again'), 'm-1', 2000);
      await pub.publish(enc('b'), 'm-2', 2000);
      const got = await con.fetch(10, 1000);
      assert.deepEqual(got.map((m) => [m.msgId, dec(m.data), m.deliveries]), [['m-1', 'a', 1], ['m-2', 'b', 1]]);
      for (const m of got) await m.ack();
      const none = await con.fetch(10, 1000);
      assert.equal(none.length, 0);
    });

    test('a nak brings the message back as a redelivery', async () => {
      await pub.publish(enc('c'), 'm-3', 2000);
      const [m] = await con.fetch(1, 1000);
      assert.equal(m?.msgId, 'm-3');
      m!.nak(10);
      let again: Awaited<ReturnType<BusConsumer['fetch']>> = [];
      const deadline = Date.now() + redeliverMs;
      while (again.length === 0 && Date.now() < deadline) again = await con.fetch(1, 1000);
      assert.equal(again[0]?.msgId, 'm-3');
      assert.equal(again[0]?.deliveries, 2);
      await again[0]!.ack();
    });
  });
}

contract(
  'in-process bus',
  async () => {
    const bus = new MemoryBus();
    return { pub: bus, con: bus, done: () => bus.close() };
  },
  2000,
);

test('the in-process bus holds a bounded number of bytes, not only of messages; what does not fit is refused and counted', async () => {
  const bus = new MemoryBus({ maxBytes: 1000, maxMessages: 3 });
  const bytes = (n: number) => new Uint8Array(n);
  await bus.publish(bytes(600), 'a');
  await bus.publish(bytes(600), 'a'); // a duplicate stores nothing, and takes no room
  assert.equal(bus.pendingBytes, 600);
  await assert.rejects(bus.publish(bytes(401), 'b'), (e: unknown) => e instanceof BusFullError && e.code === 'SL_BUS_FULL');
  await assert.rejects(bus.publish(bytes(1001), 'huge'), (e: unknown) => e instanceof BusPayloadTooLargeError && e.code === 'MAX_PAYLOAD_EXCEEDED');
  assert.equal(bus.refused, 2);
  await bus.publish(bytes(400), 'c');
  assert.deepEqual([bus.pending, bus.pendingBytes], [2, 1000]);
  // Delivered but not acknowledged still holds its bytes (it may come back); an ack or a dead letter frees them.
  const [a, c] = await bus.fetch(10, 100);
  assert.equal(bus.pendingBytes, 1000);
  await a!.ack();
  await bus.deadLetter(c!, 'test');
  assert.deepEqual([bus.pending, bus.pendingBytes], [0, 0]);
  // The message bound still holds.
  for (const id of ['d', 'e', 'f']) await bus.publish(bytes(1), id);
  await assert.rejects(bus.publish(bytes(1), 'g'), BusFullError);
  assert.equal(bus.refused, 3);
  await bus.close();
});

test('the in-process bus answers a fetch with at most maxBytes of data, and always with one message when one is ready', async () => {
  const bus = new MemoryBus();
  for (const [id, n] of [['a', 300], ['b', 300], ['c', 500], ['d', 100]] as const) await bus.publish(new Uint8Array(n), id);
  assert.deepEqual((await bus.fetch(10, 100, 700)).map((m) => m.msgId), ['a', 'b']);
  assert.deepEqual((await bus.fetch(10, 100, 100)).map((m) => m.msgId), ['c'], 'larger than maxBytes alone: still delivered');
  assert.deepEqual((await bus.fetch(10, 100, 100)).map((m) => m.msgId), ['d']);
  await bus.close();
});

let nats: NatsServer;
contract(
  'NATS JetStream',
  async () => {
    nats = await NatsServer.start();
    const pubConn = await connectNats(nats.url, 'test-pub');
    await ensureStream(await pubConn.jetstreamManager());
    const pub = new NatsPublisher(pubConn);
    const con = await NatsConsumer.open(await connectNats(nats.url, 'test-con'));
    return {
      pub,
      con,
      done: async () => {
        await pub.close();
        await con.close();
        await nats.dispose();
      },
    };
  },
  10_000,
);

test('ensureStream is idempotent and verifies an existing stream', async () => {
  const server = await NatsServer.start();
  try {
    const nc = await connectNats(server.url, 'test');
    const jsm = await nc.jetstreamManager();
    await ensureStream(jsm);
    await ensureStream(jsm);
    const info = await jsm.streams.info(STREAM_NAME);
    assert.deepEqual(info.config.subjects, ['sightline.spans.v1']);
    assert.equal(info.config.duplicate_window, 120_000 * 1e6);
    await nc.close();
  } finally {
    await server.dispose();
  }
});

test('the capture stream is a work queue: acknowledged batches leave it, so max_bytes bounds the backlog, not all traffic', async () => {
  const server = await NatsServer.start();
  try {
    const pubConn = await connectNats(server.url, 'test-pub');
    const jsm = await pubConn.jetstreamManager();
    // 64 KiB of room; 40 rounds of 8 batches of 4 KiB = 1.25 MiB go through it.
    assert.deepEqual(await ensureStream(jsm, { maxBytes: 64 * 1024 }), { retention: 'workqueue' });
    assert.equal((await jsm.streams.info(STREAM_NAME)).config.retention, RetentionPolicy.Workqueue);
    const pub = new NatsPublisher(pubConn);
    const con = await NatsConsumer.open(await connectNats(server.url, 'test-con'));
    let delivered = 0;
    for (let round = 0; round < 40; round++) {
      for (let i = 0; i < 8; i++) await pub.publish(new Uint8Array(4096), `r${round}-${i}`, 2000);
      const got = await con.fetch(8, 1000);
      for (const m of got) await m.ack();
      delivered += got.length;
    }
    assert.equal(delivered, 320);
    const state = (await jsm.streams.info(STREAM_NAME)).state;
    assert.deepEqual([state.messages, state.last_seq], [0, 320]);
    // Still full means refused: the bound holds for what is not consumed.
    let refused = 0;
    for (let i = 0; i < 40 && refused === 0; i++) await pub.publish(new Uint8Array(4096), `backlog-${i}`, 2000).catch(() => refused++);
    assert.equal(refused, 1);
    await pub.close();
    await con.close();
  } finally {
    await server.dispose();
  }
});

test('NatsPublisher writes a batch from the caller\'s memory (no copy by the client): every byte arrives, for many batches in one tick, for views into shared memory, and after NATS restarted', async () => {
  const server = await NatsServer.start();
  try {
    const pubConn = await connectNats(server.url, 'test-pub');
    await ensureStream(await pubConn.jetstreamManager());
    const pub = new NatsPublisher(pubConn);
    // Installed with the nats.js version we ship: if an upgrade changed its internals, this says so.
    assert.equal(writesWithoutCopy(pubConn), true);
    const con = await NatsConsumer.open(await connectNats(server.url, 'test-con'));
    // Batches as capture hands them over: views at an offset into one shared area, of sizes
    // around the client's inline-flush threshold (32 KiB) and up to 512 KiB.
    const area = new SharedArrayBuffer(2 * 1024 * 1024);
    const bytes = new Uint8Array(area);
    for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7 + (i >> 11)) & 0xff;
    const sizes = [1, 100, 32 * 1024 - 1, 32 * 1024, 40_000, 200 * 1024, 512 * 1024];
    const views: Uint8Array[] = [];
    let at = 3;
    for (const n of sizes) {
      views.push(new Uint8Array(area, at, n));
      at += n + 5;
    }
    // All in one tick: the client queues them together and flushes them in one write.
    await Promise.all(views.map((v, i) => pub.publish(v, `tick-${i}`, 5000)));
    const expect = new Map(views.map((v, i) => [`tick-${i}`, Buffer.from(v).toString('base64')]));
    const got = new Map<string, string>();
    for (let i = 0; i < 10 && got.size < expect.size; i++) {
      for (const m of await con.fetch(20, 1000)) {
        got.set(m.msgId, Buffer.from(m.data).toString('base64'));
        await m.ack();
      }
    }
    assert.deepEqual(got, expect);
    // They went the copy-free way (the HPUB lines and headers are written too).
    const total = (vs: Uint8Array[]): number => vs.reduce((n, v) => n + v.length, 0);
    const first = writtenWithoutCopy(pubConn);
    assert.ok(first > total(views), `${first} bytes written without a copy, fewer than the ${total(views)} published`);

    // After NATS restarted, the client writes on its new socket (a new transport object).
    await server.stop();
    await server.start();
    const again = [views[5]!, views[2]!, views[6]!];
    for (let i = 0; i < again.length; i++) {
      for (let tries = 0; ; tries++) {
        try {
          await pub.publish(again[i]!, `again-${i}`, 2000);
          break;
        } catch (e) {
          // Until the client has reconnected and JetStream is up again.
          if (tries >= 20) throw e;
          await delay(250);
        }
      }
    }
    const back = new Map<string, string>();
    for (let i = 0; i < 20 && back.size < again.length; i++) {
      for (const m of await con.fetch(20, 1000)) {
        back.set(m.msgId, Buffer.from(m.data).toString('base64'));
        await m.ack();
      }
    }
    assert.deepEqual(back, new Map(again.map((v, i) => [`again-${i}`, Buffer.from(v).toString('base64')])));
    assert.ok(writtenWithoutCopy(pubConn) - first > total(again), 'after the restart too');
    await pub.close();
    await con.close();
  } finally {
    await server.dispose();
  }
});

test('a capture stream made with limits retention by an earlier version: the ingester purges what it acknowledged, and nothing else', async () => {
  const server = await NatsServer.start();
  try {
    const pubConn = await connectNats(server.url, 'test-pub');
    const jsm = await pubConn.jetstreamManager();
    await jsm.streams.add({ name: STREAM_NAME, subjects: ['sightline.spans.v1'], retention: RetentionPolicy.Limits, storage: StorageType.File, duplicate_window: 120_000 * 1e6 });
    assert.deepEqual(await ensureStream(jsm), { retention: 'limits' });
    const pub = new NatsPublisher(pubConn);
    const con = await NatsConsumer.open(await connectNats(server.url, 'test-con'), { purgeEveryMs: 0 });
    assert.equal(con.retention, 'limits');
    for (let i = 0; i < 20; i++) await pub.publish(enc(`b${i}`), `b${i}`, 2000);
    const first = await con.fetch(15, 1000);
    assert.equal(first.length, 15);
    for (const m of first) await m.ack();
    assert.equal(await con.purgeAcknowledged(), 15);
    assert.equal(await con.purgeAcknowledged(), 0);
    assert.equal((await jsm.streams.info(STREAM_NAME)).state.messages, 5);
    const rest = await con.fetch(10, 1000);
    assert.deepEqual(rest.map((m) => dec(m.data)), ['b15', 'b16', 'b17', 'b18', 'b19']);
    for (const m of rest) await m.ack();
    assert.equal(await con.purgeAcknowledged(), 5);
    await pub.close();
    await con.close();
  } finally {
    await server.dispose();
  }
});

test('batches delivered while the ingester\'s event loop is busy past a fetch\'s expiry are not lost to ack_wait: the next fetch has them', async () => {
  // A per-call JetStream pull ends on a client-side timer; when the loop was busy past it,
  // the timer closed the subscription before the delivered messages were read, and they
  // came back only after ack_wait (30 s here). Another process publishes while this one is
  // busy, so the messages are on this process's socket when its loop resumes.
  const server = await NatsServer.start();
  const con = await NatsConsumer.open(await connectNats(server.url, 'test-con'));
  const script = `
    import { connect } from 'nats';
    const nc = await connect({ servers: ${JSON.stringify(server.url)} });
    const js = nc.jetstream();
    process.stdout.write('ready\\n');
    process.stdin.once('data', async () => {
      await new Promise((r) => setTimeout(r, 300));
      for (let i = 0; i < 3; i++) await js.publish('sightline.spans.v1', new TextEncoder().encode('late' + i), { msgID: 'late-' + i });
      process.stdout.write('published\\n');
      await nc.close();
    });
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['pipe', 'pipe', 'inherit'] });
  try {
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    const deadline = Date.now() + 20_000;
    while (!out.includes('ready') && Date.now() < deadline) await delay(20);
    assert.ok(out.includes('ready'), 'the publishing process connected');
    const first = con.fetch(10, 1000);
    await delay(600);
    child.stdin.write('go\n');
    // Busy from 0.6 to 1.6 s: the other process publishes at ~0.9 s, into the waiting pull.
    // In a callback of the loop's check phase, as the ingester's work runs in its callbacks:
    // the loop's next turn runs its due timers before it reads the sockets.
    await new Promise<void>((resolve) =>
      setImmediate(() => {
        const until = Date.now() + 1000;
        while (Date.now() < until) {
          // blocked, as decoding a large set of batches blocks the ingester
        }
        resolve();
      }),
    );
    const got = [...(await first)];
    const stop = Date.now() + 6_000;
    while (got.length < 3 && Date.now() < stop) got.push(...(await con.fetch(10, 1000)));
    assert.ok(out.includes('published'), 'the other process published while this one was busy');
    assert.deepEqual(got.map((m) => dec(m.data)), ['late0', 'late1', 'late2']);
    for (const m of got) await m.ack();
  } finally {
    if (child.exitCode === null) {
      child.kill();
      await once(child, 'exit');
    }
    await con.close();
    await server.dispose();
  }
});

test('NATS_URL credentials become connect options; servers lose them', async () => {
  const { natsServers } = await import('@sightline/bus');
  assert.deepEqual(natsServers('nats://a:4222'), { servers: ['nats://a:4222'] });
  assert.deepEqual(natsServers('nats://u:p%40ss@a:4222, nats://u:p%40ss@b:4222'), { servers: ['nats://a:4222', 'nats://b:4222'], user: 'u', pass: 'p@ss' });
  assert.deepEqual(natsServers('tls://t0ken@a:4222,nats://b:4222'), { servers: ['tls://a:4222', 'nats://b:4222'], token: 't0ken' });
  assert.throws(() => natsServers('nats://u:p@a:4222,nats://v:q@b:4222'), /same credentials/);
});

test('SIGHTLINE_NATS_REPLICAS: default 1, 1 to 5 accepted, anything else refused', async () => {
  const { natsReplicasFromEnv } = await import('@sightline/bus');
  assert.equal(natsReplicasFromEnv({}), 1);
  assert.equal(natsReplicasFromEnv({ SIGHTLINE_NATS_REPLICAS: '' }), 1);
  assert.equal(natsReplicasFromEnv({ SIGHTLINE_NATS_REPLICAS: '3' }), 3);
  assert.equal(natsReplicasFromEnv({ SIGHTLINE_NATS_REPLICAS: ' 5 ' }), 5);
  for (const bad of ['0', '6', '2.5', 'three', '-1']) assert.throws(() => natsReplicasFromEnv({ SIGHTLINE_NATS_REPLICAS: bad }), /SIGHTLINE_NATS_REPLICAS/);
});
