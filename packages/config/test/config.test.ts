import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { loadConfigFile, parseConfig, ConfigError, Router, expandEnv, MissingEnvError } from '@sightline/config';

const shipped = fileURLToPath(new URL('../../../config/sightline.yaml', import.meta.url));

test('the shipped configuration loads with an empty environment and routes both vendors', () => {
  const cfg = loadConfigFile(shipped, { env: () => undefined });
  assert.equal(cfg.gateway.port, 8080);
  assert.equal(cfg.query.port, 8081);
  assert.equal(cfg.gateway.bodyLimitBytes, 10 * 1024 * 1024);
  const router = new Router(cfg.routes);
  assert.equal(router.match('gpt-4o-mini')?.route.targets[0]?.provider.baseUrl, 'https://api.openai.com/v1');
  assert.equal(router.match('claude-sonnet-4-5')?.route.targets[0]?.provider.baseUrl, 'https://api.anthropic.com');
  assert.equal(router.match('o3-mini')?.route.targets[0]?.provider.name, 'openai');
  assert.equal(router.match('llama-3'), null);
  assert.equal(router.match('gpt-4o')?.pattern, 'gpt-*');
  assert.equal(cfg.providers.get('openai')?.apiKey, '');
});

test('environment references fill ports, URLs and keys', () => {
  const env: Record<string, string> = { GATEWAY_PORT: '9999', OPENAI_BASE_URL: 'http://127.0.0.1:1234/v1/', OPENAI_API_KEY: 'sk-test' };
  const cfg = loadConfigFile(shipped, { env: (n) => env[n] });
  assert.equal(cfg.gateway.port, 9999);
  const p = cfg.providers.get('openai');
  assert.equal(p?.baseUrl, 'http://127.0.0.1:1234/v1');
  assert.equal(p?.origin, 'http://127.0.0.1:1234');
  assert.equal(p?.basePath, '/v1');
  assert.equal(p?.apiKey, 'sk-test');
});

test('expandEnv: defaults, required names, literal escapes', () => {
  const env = (n: string) => ({ A: 'x', EMPTY: '' })[n];
  assert.equal(expandEnv('a-${A}-b', env), 'a-x-b');
  assert.equal(expandEnv('${MISSING:-d}', env), 'd');
  assert.equal(expandEnv('${EMPTY:-d}', env), 'd');
  assert.equal(expandEnv('${EMPTY}', env), '');
  assert.equal(expandEnv('$${A}', env), '${A}');
  assert.throws(() => expandEnv('${MISSING}', env), MissingEnvError);
});

const base = `
providers:
  up: { type: openai-compatible, base_url: "http://127.0.0.1:1/v1" }
routes:
  - { match: "m-*", provider: up }
`;

function errorOf(text: string, env: Record<string, string> = {}): ConfigError {
  try {
    parseConfig(text, '/etc/sl.yaml', { env: (n) => env[n] });
  } catch (e) {
    assert.ok(e instanceof ConfigError, `expected ConfigError, got ${String(e)}`);
    return e;
  }
  assert.fail('configuration was accepted');
}

test('invalid configuration names the file, the field and the problem', () => {
  let e = errorOf(base.replace('provider: up', 'provider: nope'));
  assert.equal(e.field, 'routes[0].provider');
  assert.match(e.message, /^\/etc\/sl\.yaml: routes\[0\]\.provider: unknown provider "nope"/);

  e = errorOf(base.replace('openai-compatible', 'grpc'));
  assert.equal(e.field, 'providers.up.type');

  e = errorOf(base.replace('"http://127.0.0.1:1/v1"', '"not a url"'));
  assert.equal(e.field, 'providers.up.base_url');

  e = errorOf(base + 'gateway: { port: 70000 }\n');
  assert.equal(e.field, 'gateway.port');
  assert.match(e.message, /between 0 and 65535/);

  e = errorOf(base + 'gateway: { port: "${PORT}" }\n');
  assert.equal(e.field, 'gateway.port');
  assert.match(e.message, /PORT is not set/);

  e = errorOf(base + 'gatway: {}\n');
  assert.equal(e.field, 'gatway');
  assert.match(e.message, /unknown field/);

  e = errorOf('routes: [\n');
  assert.match(e.message, /invalid YAML/);

  e = errorOf('providers: {}\nroutes: []\n');
  assert.equal(e.field, 'providers');

  e = errorOf(base + 'gateway: { body_limit: lots }\n');
  assert.equal(e.field, 'gateway.body_limit');
});

test('a missing file is a ConfigError naming the file', () => {
  assert.throws(() => loadConfigFile('/nonexistent/sightline.yaml'), (e: unknown) => e instanceof ConfigError && e.message.startsWith('/nonexistent/sightline.yaml: cannot read'));
});

test('router: exact names win over patterns, upstream model rename', () => {
  const cfg = parseConfig(
    `
providers:
  a: { type: openai-compatible, base_url: "http://127.0.0.1:1" }
  b: { type: openai-compatible, base_url: "http://127.0.0.1:2" }
routes:
  - { match: "gpt-*", provider: a }
  - { match: ["gpt-4o", "fast"], provider: b, model: "gpt-4o-2024-08-06" }
`,
    'x.yaml',
  );
  const r = new Router(cfg.routes);
  assert.equal(r.match('gpt-4o')?.route.targets[0]?.provider.name, 'b');
  assert.equal(r.match('gpt-4o')?.route.targets[0]?.model, 'gpt-4o-2024-08-06');
  assert.equal(r.match('fast')?.route.targets[0]?.provider.name, 'b');
  assert.equal(r.match('gpt-4.1')?.route.targets[0]?.provider.name, 'a');
  assert.equal(r.match('gpt-4.1')?.route.targets[0]?.model, null);
  assert.equal(r.match('gpt-4.1')?.route.retries, 1);
  assert.equal(r.match('xgpt-4'), null);
});

test('targets, strategy, retries and breaker settings', () => {
  const cfg = parseConfig(
    `
providers:
  a: { type: openai-compatible, base_url: "http://127.0.0.1:1/v1" }
  az: { type: azure, base_url: "https://res.openai.azure.com/openai", api_key: k, api_version: "2024-06-01" }
routes:
  - match: "gpt-*"
    strategy: weighted
    retries: 2
    timeout_ms: 30000
    targets:
      - { provider: a, weight: 3 }
      - { provider: az, model: my-deployment, weight: 1 }
breaker: { failure_threshold: 3, cooldown_ms: 1000 }
`,
    'x.yaml',
  );
  const route = cfg.routes[0]!;
  assert.equal(route.strategy, 'weighted');
  assert.equal(route.retries, 2);
  assert.equal(route.timeoutMs, 30000);
  assert.deepEqual(route.targets.map((t) => [t.provider.name, t.model, t.weight]), [['a', null, 3], ['az', 'my-deployment', 1]]);
  assert.equal(cfg.providers.get('az')?.apiVersion, '2024-06-01');
  assert.deepEqual(cfg.breaker, { failureThreshold: 3, cooldownMs: 1000 });

  const e = errorOf(`
providers:
  az: { type: azure, base_url: "https://res.openai.azure.com/openai" }
routes:
  - { match: "x", targets: [ { provider: az } ] }
`);
  assert.equal(e.field, 'routes[0].targets[0].model');
  const e2 = errorOf(base.replace('provider: up }', 'provider: up, targets: [] }'));
  assert.equal(e2.field, 'routes[0]');
});
