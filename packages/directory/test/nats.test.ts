/**
 * The NATS key-value directory against a real nats-server: propagation between replicas,
 * compare-and-set under contention, the snapshot served while NATS is down, a server restart
 * under a live watch, and what the bucket holds (hashes, never secrets).
 */
import { after, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { connectNats } from '@sightline/bus';
import {
  DIRECTORY_BUCKET,
  DirectoryError,
  KeyHasher,
  NatsDirectory,
  directoryFromEnv,
  hasherFromEnv,
  parseKeyInput,
  type Directory,
  type KeyRecord,
  type NatsDirectoryOptions,
} from '@sightline/directory';
import { NatsServer, freePort, waitFor } from '../../../test/support/servers.js';

const hasher = new KeyHasher('a-server-secret-of-enough-bytes');
const tmp = mkdtempSync(join(tmpdir(), 'sightline-dirnats-'));
const open: Directory[] = [];
const servers: NatsServer[] = [];
after(async () => {
  for (const d of open) await d.close();
  for (const s of servers) await s.dispose();
  rmSync(tmp, { recursive: true, force: true });
});

let seq = 0;
function directory(url: string, opts: Partial<NatsDirectoryOptions> = {}): NatsDirectory {
  const d = new NatsDirectory({ url, hasher, snapshotFile: join(tmp, `snapshot-${++seq}.json`), ...opts });
  open.push(d);
  return d;
}

async function server(auth: { user: string; pass: string } | null = null): Promise<NatsServer> {
  const s = await NatsServer.start(auth);
  servers.push(s);
  return s;
}

const input = (team: string, name: string) => parseKeyInput({ team, name, scopes: ['gateway', 'read'] }, Date.now());
const accepted = (d: Directory, secret: string) => d.check(secret, 'gateway', Date.now()).ok;
const reason = (d: Directory, secret: string) => {
  const c = d.check(secret, 'gateway', Date.now());
  return c.ok ? 'ok' : c.reason;
};

/** Milliseconds until `cond` holds, polled every millisecond; fails past `limitMs`. */
async function within(what: string, cond: () => boolean, limitMs: number): Promise<number> {
  const t0 = performance.now();
  await waitFor(what, cond, limitMs, 1);
  return performance.now() - t0;
}

test('two replicas: a key created on one works on the other within 2 s; revoked on one, refused by both within 2 s; rotation with grace; team settings', async (t: TestContext) => {
  const s = await server();
  const a = directory(s.url);
  const b = directory(s.url);
  await Promise.all([a.ready, b.ready]);
  assert.equal(a.status().synced, true);
  assert.equal(b.status().loadedFrom, 'store');

  const { record, secret } = await a.createKey(input('alpha', 'ci'), Date.now());
  assert.ok(accepted(a, secret), 'the writer sees its own key as soon as the write resolves');
  const acceptMs = await within('b accepts the new key', () => accepted(b, secret), 2000);
  assert.equal(b.team('alpha')?.name, 'alpha', 'the key brought its team');

  const revokedAt = performance.now();
  const revoked = await b.revokeKey(record.id, Date.now());
  assert.ok(revoked !== null && revoked.revoked_at !== null);
  assert.equal(reason(b, secret), 'revoked', 'the revoking replica refuses at once');
  await waitFor('a refuses the revoked key', () => reason(a, secret) === 'revoked', 2000, 1);
  const revokeMs = performance.now() - revokedAt;
  assert.ok(revokeMs < 2000, `revocation reached both replicas in ${revokeMs} ms`);
  assert.equal(await a.rotateKey(record.id, 60, Date.now()), null, 'a revoked key cannot be rotated');
  assert.deepEqual(await a.revokeKey(record.id, Date.now()), revoked, 'revoking again changes nothing');
  assert.equal(await a.revokeKey('key_doesnotexist00', Date.now()), null);

  const second = await a.createKey(input('alpha', 'dev'), Date.now());
  const rotated = await a.rotateKey(second.record.id, 3600, Date.now());
  assert.ok(rotated !== null);
  const rotateMs = await within('b accepts the rotated secret', () => accepted(b, rotated.secret), 2000);
  assert.ok(accepted(b, second.secret), 'the previous secret works during its grace period');
  assert.ok(b.key(second.record.id)?.previous !== null);
  const noGrace = await b.rotateKey(second.record.id, 0, Date.now());
  assert.ok(noGrace !== null);
  await waitFor('a refuses the secrets rotated out', () => reason(a, rotated.secret) === 'unknown' && reason(a, second.secret) === 'unknown' && accepted(a, noGrace.secret), 2000, 1);

  const team = await b.putTeam('alpha', { description: 'the alpha team' }, Date.now());
  assert.equal(team.created_at, a.team('alpha')?.created_at, 'replacing settings keeps the creation time');
  const teamMs = await within('a sees the team settings', () => a.team('alpha')?.settings.description === 'the alpha team', 2000);
  await b.putTeam('beta.ml', {}, Date.now());
  await waitFor('a sees a team with a dot in its name', () => a.teams().map((x) => x.name).includes('beta.ml'), 2000, 1);
  await assert.rejects(a.putTeam('no spaces', {}, Date.now()), (e: unknown) => e instanceof DirectoryError && e.code === 'SL_DIR_INVALID');

  t.diagnostic(`propagation to the other replica: create ${acceptMs.toFixed(1)} ms, revoke ${revokeMs.toFixed(1)} ms (write included), rotate ${rotateMs.toFixed(1)} ms, team ${teamMs.toFixed(1)} ms`);
});

test('10,000 keys created in a loop through one replica are all accepted by the other; lookups stay synchronous', async (t: TestContext) => {
  const s = await server();
  const a = directory(s.url);
  const b = directory(s.url);
  await Promise.all([a.ready, b.ready]);
  const N = 10_000;
  const secrets: string[] = [];
  const t0 = performance.now();
  for (let i = 0; i < N; i++) {
    const { secret } = await a.createKey(input(`team-${i % 10}`, `key-${i}`), Date.now());
    secrets.push(secret);
  }
  const createMs = performance.now() - t0;
  assert.ok(createMs < 60_000, `10,000 keys took ${createMs} ms`);
  assert.equal(a.status().keys, N);
  await waitFor('b holds every key', () => b.status().keys === N, 10_000);
  assert.equal(b.teams().length, 10);

  const t1 = performance.now();
  let ok = 0;
  for (const secret of secrets) {
    const c = b.check(secret, 'gateway', Date.now());
    // A plain result, not a promise: the gateway's auth stage never waits.
    assert.equal(typeof (c as { then?: unknown }).then, 'undefined');
    if (c.ok) ok++;
  }
  const checkUs = ((performance.now() - t1) * 1000) / N;
  assert.equal(ok, N);
  assert.ok(checkUs < 200, `a first lookup took ${checkUs} µs on average`);

  // A second replica starting now reads the whole bucket.
  const t2 = performance.now();
  const c = directory(s.url);
  await c.ready;
  const startMs = performance.now() - t2;
  assert.equal(c.status().keys, N);
  t.diagnostic(`10,000 keys created in ${(createMs / 1000).toFixed(2)} s (${(createMs / N).toFixed(3)} ms per key, each visible to its writer before the next); first lookups on the other replica ${checkUs.toFixed(1)} µs each (HMAC included); a new replica synced 10,000 keys in ${startMs.toFixed(0)} ms`);
});

test('started while NATS is down: serves the snapshot, says so, and syncs (with changes made meanwhile) once NATS is back', async () => {
  const s = await server();
  const snapshotFile = join(tmp, 'down.json');
  const a = directory(s.url, { snapshotFile });
  await a.ready;
  const first = await a.createKey(input('alpha', 'ci'), Date.now());
  await waitFor('the snapshot holds the key', () => existsSync(snapshotFile) && readFileSync(snapshotFile, 'utf8').includes(first.record.id), 5000);
  assert.equal(statSync(snapshotFile).mode & 0o777, 0o600);
  assert.ok(!readFileSync(snapshotFile, 'utf8').includes(first.secret.slice(3)), 'no secret in the snapshot');
  await a.close();
  await s.stop();

  const t0 = performance.now();
  const again = directory(s.url, { snapshotFile });
  await again.ready;
  const readyMs = performance.now() - t0;
  assert.ok(readyMs < 3000, `ready after ${readyMs} ms`);
  assert.deepEqual({ ...again.status(), updatedAt: null, error: null }, { source: 'nats', synced: false, loadedFrom: 'snapshot', keys: 1, teams: 1, updatedAt: null, error: null });
  assert.ok(accepted(again, first.secret), 'the key from the snapshot works');
  await assert.rejects(again.createKey(input('alpha', 'x'), Date.now()), (e: unknown) => e instanceof DirectoryError && e.code === 'SL_DIR_UNAVAILABLE');

  await s.start();
  const other = directory(s.url);
  await other.ready;
  const meanwhile = await other.createKey(input('beta', 'ci'), Date.now());
  await waitFor('the snapshot-started replica syncs', () => again.status().synced, 10_000);
  assert.equal(again.status().loadedFrom, 'store');
  assert.equal(again.status().error, null);
  await waitFor('the key created meanwhile arrives', () => accepted(again, meanwhile.secret), 2000);
  assert.ok(accepted(again, first.secret));
  const later = await again.createKey(input('alpha', 'later'), Date.now());
  await waitFor('writes work again', () => accepted(other, later.secret), 2000);
});

test('no NATS and no snapshot: empty, not synced, ready after the start timeout', async () => {
  const port = await freePort();
  const d = directory(`nats://127.0.0.1:${port}`, { snapshotFile: join(tmp, 'never-written.json'), startTimeoutMs: 300 });
  await d.ready;
  const st = d.status();
  assert.equal(st.synced, false);
  assert.equal(st.loadedFrom, 'empty');
  assert.equal(st.keys, 0);
  assert.notEqual(st.error, null, 'the connection error is reported');
  assert.equal(reason(d, 'sl-' + 'x'.repeat(43)), 'unknown');
});

test('a nats-server restart under a live watch: changes made after it arrive', async (t: TestContext) => {
  const s = await server();
  const a = directory(s.url);
  const b = directory(s.url);
  await Promise.all([a.ready, b.ready]);
  const k = await a.createKey(input('alpha', 'ci'), Date.now());
  await waitFor('b accepts', () => accepted(b, k.secret), 2000);

  await s.stop();
  await waitFor('both notice', () => !a.status().synced && !b.status().synced, 5000);
  assert.ok(accepted(b, k.secret), 'keys keep working while NATS is away');
  const restarted = performance.now();
  await s.start();
  await waitFor('both sync again', () => a.status().synced && b.status().synced, 15_000);
  t.diagnostic(`both replicas re-synced ${(performance.now() - restarted).toFixed(0)} ms after nats-server was started again (start-up included)`);

  const t0 = performance.now();
  await a.revokeKey(k.record.id, Date.now());
  await waitFor('b refuses the key revoked after the restart', () => reason(b, k.secret) === 'revoked', 2000, 1);
  assert.ok(performance.now() - t0 < 2000);
  const k2 = await b.createKey(input('alpha', 'after'), Date.now());
  await waitFor('a accepts a key created after the restart', () => accepted(a, k2.secret), 2000, 1);
});

test('concurrent writes to one key from two replicas: compare-and-set loses no update', async () => {
  const s = await server();
  const a = directory(s.url);
  const b = directory(s.url);
  await Promise.all([a.ready, b.ready]);

  // Rotations racing each other: each must build on the one before, so the `previous` links form one chain.
  const k = await a.createKey(input('alpha', 'ci'), Date.now());
  const results = await Promise.allSettled(Array.from({ length: 12 }, (_, i) => (i % 2 === 0 ? a : b).rotateKey(k.record.id, 3600, Date.now())));
  const done: KeyRecord[] = [];
  for (const r of results) {
    if (r.status === 'fulfilled') {
      assert.ok(r.value !== null);
      done.push(r.value.record);
    } else assert.ok(r.reason instanceof DirectoryError && r.reason.code === 'SL_DIR_CONFLICT', String(r.reason));
  }
  assert.ok(done.length >= 2, `${done.length} rotations succeeded`);
  const byPrevious = new Map(done.map((r) => [r.previous!.hash, r]));
  assert.equal(byPrevious.size, done.length, 'no two rotations started from the same secret (a lost update)');
  let hash = k.record.hash;
  for (let i = 0; i < done.length; i++) {
    const nextRecord = byPrevious.get(hash);
    assert.ok(nextRecord !== undefined, `the chain breaks after ${i} rotations`);
    hash = nextRecord.hash;
  }
  await waitFor('both replicas hold the last rotation', () => a.key(k.record.id)?.hash === hash && b.key(k.record.id)?.hash === hash, 2000);
  assert.deepEqual(a.key(k.record.id), b.key(k.record.id));

  // A revocation racing rotations: it must never be undone by a rotation that read the key before it.
  for (let round = 0; round < 10; round++) {
    const r = await b.createKey(input('alpha', `race-${round}`), Date.now());
    await waitFor('a has the key', () => a.key(r.record.id) !== null, 2000);
    const race = await Promise.allSettled([a.rotateKey(r.record.id, 60, Date.now()), b.revokeKey(r.record.id, Date.now()), a.rotateKey(r.record.id, 60, Date.now())]);
    for (const x of race) if (x.status === 'rejected') assert.ok(x.reason instanceof DirectoryError && x.reason.code === 'SL_DIR_CONFLICT', String(x.reason));
    await waitFor('both replicas agree', () => JSON.stringify(a.key(r.record.id)) === JSON.stringify(b.key(r.record.id)), 2000);
    if (race[1].status === 'fulfilled') assert.notEqual(a.key(r.record.id)?.revoked_at, null, `round ${round}: the revocation was lost`);
    // A secret a rotation handed out is refused: revoked, or already rotated out by the other rotation.
    for (const x of [race[0], race[2]]) if (x.status === 'fulfilled' && x.value !== null) assert.notEqual(reason(a, x.value.secret), 'ok');
  }
});

test('the bucket (and the snapshot) hold hashes only, never a secret; credentials in NATS_URL work', async () => {
  const s = await server({ user: 'sightline', pass: 's3cret-pass' });
  const snapshotFile = join(tmp, 'hashes.json');
  const d = directory(s.url, { snapshotFile });
  await d.ready;
  assert.equal(d.status().synced, true, 'connected with the credentials from the URL');
  const secrets: string[] = [];
  for (let i = 0; i < 5; i++) {
    const { record, secret } = await d.createKey(input('alpha', `k${i}`), Date.now());
    secrets.push(secret);
    const r = await d.rotateKey(record.id, 3600, Date.now());
    secrets.push(r!.secret);
  }
  await d.close(); // flushes the snapshot

  const nc = await connectNats(s.url, 'test-scan');
  try {
    const jsm = await nc.jetstreamManager();
    const info = await jsm.streams.info(`KV_${DIRECTORY_BUCKET}`);
    assert.equal(info.config.max_msgs_per_subject, 1, 'history 1');
    assert.equal(info.config.num_replicas, 1);
    let stored = '';
    for (let seqNo = info.state.first_seq; seqNo <= info.state.last_seq; seqNo++) {
      const m = await jsm.streams.getMessage(`KV_${DIRECTORY_BUCKET}`, { seq: seqNo }).catch(() => null);
      if (m !== null) stored += `${m.subject} ${new TextDecoder().decode(m.data)}\n`;
    }
    const snapshot = readFileSync(snapshotFile, 'utf8');
    for (const secret of secrets) {
      const body = secret.slice(3);
      assert.ok(!stored.includes(body), 'a secret is in the bucket');
      assert.ok(!snapshot.includes(body), 'a secret is in the snapshot');
    }
    // The scan saw the records: the current secrets' hashes are there.
    assert.ok(stored.includes(hasher.hash(secrets[1]!)) && stored.includes(hasher.hash(secrets[9]!)));
    assert.ok(snapshot.includes(hasher.hash(secrets[9]!)));
  } finally {
    await nc.close();
  }
});

test('directoryFromEnv: NATS when NATS_URL is set, the in-process directory otherwise; hasherFromEnv', async () => {
  const s = await server();
  const nats = directoryFromEnv({ natsUrl: s.url, snapshotFile: join(tmp, 'env-nats.json'), adminToken: 'admin-token', replicas: 1 });
  open.push(nats);
  await nats.ready;
  assert.equal(nats.status().source, 'nats');
  const mem = directoryFromEnv({ natsUrl: '', snapshotFile: join(tmp, 'env-mem.json'), adminToken: 'admin-token' });
  open.push(mem);
  assert.equal(mem.status().source, 'memory');
  const k = await mem.createKey(input('alpha', 'ci'), Date.now());
  assert.ok(existsSync(join(tmp, 'env-mem.json')), 'the in-process directory persists to the snapshot file');
  // The two agree on hashes: both derive the hashing secret from the same admin token.
  assert.equal(hasherFromEnv('admin-token').hash(k.secret), k.record.hash);
  assert.equal(hasherFromEnv('admin-token').hash('x'), KeyHasher.fromAdminToken('admin-token').hash('x'));
  assert.equal(hasherFromEnv('admin-token', 'sixteen-bytes-or-more').hash('x'), new KeyHasher('sixteen-bytes-or-more').hash('x'));
  assert.notEqual(hasherFromEnv('admin-token', 'sixteen-bytes-or-more').hash('x'), hasherFromEnv('admin-token').hash('x'));
  assert.throws(() => hasherFromEnv('admin-token', 'too-short'), (e: unknown) => e instanceof DirectoryError && e.field === 'SIGHTLINE_KEY_HASH_SECRET');
});
