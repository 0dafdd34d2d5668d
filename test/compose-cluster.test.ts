/**
 * docker-compose.cluster.yml, checked without Docker (issue 14, item 3): the file and the
 * configuration it mounts (deploy/cluster/) must describe one consistent cluster, and its apps
 * must take the same environment as docker-compose.yml (which test/compose.test.ts pins to
 * what the code reads), plus the two cluster variables. The clusters themselves run, as real
 * processes, in test/cluster/ (npm run test:cluster).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { ROOT } from './support/apps.js';

interface Service {
  image?: string;
  build?: string;
  command?: string[];
  entrypoint?: string[];
  hostname?: string;
  environment?: Record<string, string>;
  volumes?: string[];
  ports?: string[];
  healthcheck?: { test: string[] };
  depends_on?: Record<string, { condition: string }>;
}
interface Compose {
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
}

const read = (file: string) => readFileSync(join(ROOT, file), 'utf8');
const load = (file: string) => parse(read(file), { merge: true }) as Compose;
const single = load('docker-compose.yml');
const cluster = load('docker-compose.cluster.yml');
const services = cluster.services;
const named = (re: RegExp) => Object.keys(services).filter((n) => re.test(n)).sort();
const NATS = named(/^nats\d+$/);
const CLICKHOUSE = named(/^clickhouse\d+$/);
const GATEWAYS = named(/^gateway\d+$/);
const INGESTERS = named(/^ingester\d+$/);

/** Values of an XML element, e.g. all `<host>` texts. */
const xmlAll = (xml: string, tag: string) => [...xml.matchAll(new RegExp(`<${tag}>([^<]*)</${tag}>`, 'g'))].map((m) => m[1]!.trim());
const xml1 = (xml: string, tag: string) => {
  const all = xmlAll(xml, tag);
  assert.equal(all.length, 1, `one <${tag}>`);
  return all[0]!;
};
/** The host file a service mounts at `target`. */
function mounted(s: Service, target: string): string {
  const v = (s.volumes ?? []).find((x) => x.split(':')[1] === target);
  assert.ok(v !== undefined, `mounts ${target}`);
  const file = v.split(':')[0]!;
  assert.ok(file.startsWith('./'), `${file}: a file of the repository`);
  assert.ok(existsSync(join(ROOT, file)), `${file} exists`);
  return file.slice(2);
}

test('the services: three NATS servers, Keeper, two ClickHouse replicas, two gateways behind nginx, two ingesters, the query API', () => {
  assert.equal(NATS.length, 3);
  assert.equal(CLICKHOUSE.length, 2);
  assert.equal(GATEWAYS.length, 2);
  assert.equal(INGESTERS.length, 2);
  assert.deepEqual(Object.keys(services).sort(), [...NATS, 'keeper', ...CLICKHOUSE, ...GATEWAYS, ...INGESTERS, 'lb', 'query'].sort());
  for (const [name, s] of Object.entries(services)) {
    for (const dep of Object.keys(s.depends_on ?? {})) assert.ok(services[dep] !== undefined, `${name} depends on ${dep}, a service`);
    for (const v of s.volumes ?? []) {
      const src = v.split(':')[0]!;
      if (!src.startsWith('./')) assert.ok(cluster.volumes?.[src] !== undefined || src === '', `${name}: volume ${src} declared`);
    }
    // Healthchecks run tools their images have (test/compose.test.ts: nats:2.x is FROM scratch).
    const tool = s.healthcheck?.test[1];
    if (tool === 'wget') assert.match(s.image ?? '', /^(nats:2\.\d+-alpine|nginx:[\d.]+-alpine|clickhouse\/clickhouse-server:)/, `${name}: wget in ${s.image}`);
    else if (tool === 'node') assert.equal(s.build, '.', `${name}: node is in the app image`);
    else assert.fail(`${name}: healthcheck with ${String(tool)}`);
  }
  // Only the load balancer and the query API are published.
  assert.deepEqual(Object.entries(services).filter(([, s]) => (s.ports ?? []).length > 0).map(([n, s]) => `${n} ${s.ports!.join(' ')}`).sort(), ['lb 8080:8080', 'query 8081:8081']);
});

test('NATS: one cluster over routes, JetStream on every server, each with its own name and volume', () => {
  const names = new Set<string>();
  const clusters = new Set<string>();
  for (const n of NATS) {
    const cmd = services[n]!.command ?? [];
    const arg = (flag: string) => {
      const i = cmd.indexOf(flag);
      assert.ok(i >= 0 && i + 1 < cmd.length, `${n}: ${flag}`);
      return cmd[i + 1]!;
    };
    assert.ok(cmd.includes('-js'), `${n}: JetStream`);
    assert.equal(arg('-sd'), '/data');
    assert.ok((services[n]!.volumes ?? []).some((v) => v === `${n}-data:/data`), `${n}: its own volume`);
    assert.equal(arg('--server_name'), n);
    names.add(arg('--server_name'));
    clusters.add(arg('--cluster_name'));
    assert.equal(arg('--cluster'), 'nats://0.0.0.0:6222');
    assert.deepEqual(arg('--routes').split(',').sort(), NATS.map((x) => `nats://${x}:6222`));
  }
  assert.equal(names.size, 3);
  assert.equal(clusters.size, 1);
});

/** The single-node service an app service of the cluster file mirrors. */
const mirror = (name: string) => name.replace(/\d+$/, '');
const EXTRA: Record<string, string[]> = {
  gateway: ['SIGHTLINE_NATS_REPLICAS'],
  ingester: ['SIGHTLINE_NATS_REPLICAS', 'CLICKHOUSE_CLUSTER'],
  query: ['SIGHTLINE_NATS_REPLICAS', 'CLICKHOUSE_CLUSTER'],
};

test('the apps take the environment of docker-compose.yml, with every server listed and the two cluster variables', () => {
  for (const name of [...GATEWAYS, ...INGESTERS, 'query']) {
    const s = services[name]!;
    const base = single.services[mirror(name)]!;
    assert.deepEqual(s.command, base.command, `${name}: the image's command of ${mirror(name)}`);
    const env = s.environment ?? {};
    const want = [...Object.keys(base.environment ?? {}), ...EXTRA[mirror(name)]!].sort();
    assert.deepEqual(Object.keys(env).sort(), want, `${name}: the variables of ${mirror(name)} in docker-compose.yml, and ${EXTRA[mirror(name)]!.join(', ')}`);
    for (const [k, v] of Object.entries(base.environment ?? {})) {
      if (k === 'NATS_URL' || k === 'CLICKHOUSE_URL') continue;
      assert.equal(env[k], v, `${name}: ${k} as in docker-compose.yml`);
    }
    assert.deepEqual(env.NATS_URL!.split(',').sort(), NATS.map((n) => `nats://${n}:4222`), `${name}: NATS_URL lists every NATS server`);
    const replicas = Number(env.SIGHTLINE_NATS_REPLICAS);
    assert.ok(Number.isInteger(replicas) && replicas >= 1 && replicas <= NATS.length, `${name}: SIGHTLINE_NATS_REPLICAS within the cluster's size`);
    assert.equal(replicas, 3);
    if (env.CLICKHOUSE_URL !== undefined) assert.deepEqual(env.CLICKHOUSE_URL.split(',').sort(), CLICKHOUSE.map((c) => `http://${c}:8123`), `${name}: CLICKHOUSE_URL lists every replica`);
  }
});

test('ClickHouse: the cluster CLICKHOUSE_CLUSTER names holds exactly the replicas, over Keeper; each replica has its own macros', () => {
  const xmlFile = mounted(services[CLICKHOUSE[0]!]!, '/etc/clickhouse-server/config.d/cluster.xml');
  const xml = read(xmlFile);
  const name = /<remote_servers>\s*<([A-Za-z_][A-Za-z0-9_]*)>/.exec(xml)?.[1];
  for (const app of [...INGESTERS, 'query']) assert.equal(services[app]!.environment!.CLICKHOUSE_CLUSTER, name, `${app}: CLICKHOUSE_CLUSTER`);
  const remote = xml.slice(xml.indexOf('<remote_servers>'), xml.indexOf('</remote_servers>'));
  assert.equal((remote.match(/<shard>/g) ?? []).length, 1, 'one shard of two replicas');
  assert.equal(xml1(remote, 'internal_replication'), 'true', 'replicated tables copy their own data');
  assert.deepEqual(xmlAll(remote, 'host').sort(), CLICKHOUSE);
  assert.deepEqual(new Set(xmlAll(remote, 'port')), new Set(['9000']));
  const zk = xml.slice(xml.indexOf('<zookeeper>'), xml.indexOf('</zookeeper>'));
  assert.equal(xml1(zk, 'host'), 'keeper');
  const keeper = read(mounted(services.keeper!, '/etc/clickhouse-keeper/keeper.xml'));
  assert.equal(xml1(zk, 'port'), xml1(keeper, 'tcp_port'));
  assert.match(services.keeper!.healthcheck!.test.join(' '), new RegExp(`:${xml1(keeper.slice(keeper.indexOf('<http_control>')), 'port')}${xml1(keeper, 'endpoint')}$`));
  assert.ok(xml1(xml, 'path').length > 0, 'ON CLUSTER DDL queue (distributed_ddl)');
  const seen = new Set<string>();
  for (const c of CLICKHOUSE) {
    const s = services[c]!;
    assert.equal(mounted(s, '/etc/clickhouse-server/config.d/cluster.xml'), xmlFile, `${c}: the shared cluster file`);
    const macros = read(mounted(s, '/etc/clickhouse-server/config.d/macros.xml'));
    assert.equal(xml1(macros, 'shard'), '01');
    seen.add(xml1(macros, 'replica'));
    assert.equal(xml1(macros, 'interserver_http_host'), c, `${c}: the name its peer fetches parts from`);
    assert.equal(s.hostname, c);
    assert.equal(s.image, single.services.clickhouse!.image, `${c}: the image of docker-compose.yml`);
    assert.deepEqual(s.environment, single.services.clickhouse!.environment);
    assert.ok(s.depends_on?.keeper !== undefined, `${c} waits for Keeper`);
  }
  assert.equal(seen.size, CLICKHOUSE.length, 'replica macros are distinct');
});

test('nginx spreads requests over exactly the gateways, on the port they listen on', () => {
  const conf = read(mounted(services.lb!, '/etc/nginx/nginx.conf'));
  const upstream = /upstream gateways \{([^}]*)\}/.exec(conf)?.[1] ?? '';
  const port = services[GATEWAYS[0]!]!.environment!.GATEWAY_PORT;
  assert.deepEqual([...upstream.matchAll(/server ([^;\s]+);/g)].map((m) => m[1]).sort(), GATEWAYS.map((g) => `${g}:${port}`));
  assert.match(conf, /keepalive \d+;/);
  assert.match(conf, /proxy_buffering off;/, 'streams are relayed as they arrive');
  assert.match(conf, /listen 8080;/);
  for (const g of GATEWAYS) assert.ok(services.lb!.depends_on?.[g] !== undefined);
  // Each gateway keeps its own spool.
  assert.equal(new Set(GATEWAYS.map((g) => services[g]!.volumes?.[0])).size, GATEWAYS.length);
});
