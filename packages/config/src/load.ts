import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml, YAMLParseError } from 'yaml';
import { ConfigError } from './errors.js';
import { expandEnv, MissingEnvError, type EnvLookup } from './env.js';
import type { PriceConfig, BreakerConfig, CaptureConfig, Config, ProviderConfig, ProviderType, RouteConfig, TargetConfig } from './types.js';

const PROVIDER_TYPES: readonly ProviderType[] = ['openai', 'anthropic', 'openai-compatible', 'azure'];

type Obj = Record<string, unknown>;

/** Walks the parsed YAML with the file and field path at hand for error messages. */
class Reader {
  constructor(
    readonly file: string,
    readonly env: EnvLookup,
  ) {}

  fail(field: string, problem: string): never {
    throw new ConfigError(this.file, field, problem);
  }

  obj(v: unknown, field: string): Obj {
    if (v === undefined || v === null) return {};
    if (typeof v !== 'object' || Array.isArray(v)) this.fail(field, `must be a mapping, got ${describe(v)}`);
    return v as Obj;
  }

  known(o: Obj, field: string, keys: readonly string[]): void {
    for (const k of Object.keys(o)) {
      if (!keys.includes(k)) this.fail(field === '' ? k : `${field}.${k}`, `unknown field (expected one of: ${keys.join(', ')})`);
    }
  }

  str(v: unknown, field: string, fallback?: string): string {
    if (v === undefined || v === null) {
      if (fallback !== undefined) return fallback;
      this.fail(field, 'is required');
    }
    if (typeof v === 'number' || typeof v === 'boolean') return String(v);
    if (typeof v !== 'string') this.fail(field, `must be a string, got ${describe(v)}`);
    try {
      return expandEnv(v, this.env);
    } catch (e) {
      if (e instanceof MissingEnvError) this.fail(field, e.message);
      throw e;
    }
  }

  int(v: unknown, field: string, fallback: number, min: number, max: number): number {
    if (v === undefined || v === null) return fallback;
    const s = typeof v === 'number' ? String(v) : this.str(v, field);
    if (s === '') return fallback;
    if (!/^-?\d+$/.test(s)) this.fail(field, `must be an integer, got "${s}"`);
    const n = Number(s);
    if (n < min || n > max) this.fail(field, `must be between ${min} and ${max}, got ${n}`);
    return n;
  }

  bool(v: unknown, field: string, fallback: boolean): boolean {
    if (v === undefined || v === null) return fallback;
    if (typeof v === 'boolean') return v;
    const s = this.str(v, field);
    if (s === 'true' || s === '1') return true;
    if (s === 'false' || s === '0') return false;
    if (s === '') return fallback;
    this.fail(field, `must be true or false, got "${s}"`);
  }

  /** A duration: `500ms`, `30s`, `10m`, `2h`, `1d`, or a number of seconds. Returns milliseconds. */
  duration(v: unknown, field: string, fallbackMs: number, maxMs: number): number {
    if (v === undefined || v === null) return fallbackMs;
    const s = (typeof v === 'number' ? String(v) : this.str(v, field)).trim().toLowerCase();
    if (s === '') return fallbackMs;
    const m = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?$/.exec(s);
    if (m === null) this.fail(field, `must be a duration such as 30s, 10m or 1h, got "${s}"`);
    const unit = m[2] ?? 's';
    const ms = Number(m[1]) * (unit === 'ms' ? 1 : unit === 's' ? 1000 : unit === 'm' ? 60_000 : unit === 'h' ? 3_600_000 : 86_400_000);
    if (ms < 1 || ms > maxMs) this.fail(field, `must be between 1 ms and ${maxMs / 1000} s, got ${ms} ms`);
    return Math.round(ms);
  }

  /** One of a fixed set of words. */
  oneOf<T extends string>(v: unknown, field: string, choices: readonly T[], fallback: T): T {
    if (v === undefined || v === null) return fallback;
    const s = this.str(v, field);
    if (s === '') return fallback;
    if (!(choices as readonly string[]).includes(s)) this.fail(field, `must be one of ${choices.join(', ')}, got "${s}"`);
    return s as T;
  }

  /** A non-negative decimal number. */
  num(v: unknown, field: string, fallback: number): number {
    if (v === undefined || v === null) return fallback;
    const s = typeof v === 'number' ? String(v) : this.str(v, field);
    if (s === '') return fallback;
    if (!/^\d+(\.\d+)?$/.test(s)) this.fail(field, `must be a non-negative number, got "${s}"`);
    return Number(s);
  }

  /** Sizes as bytes or with a unit: `512kb`, `10mb`. */
  bytes(v: unknown, field: string, fallback: number, max = 1024 ** 3): number {
    if (v === undefined || v === null) return fallback;
    const s = (typeof v === 'number' ? String(v) : this.str(v, field)).trim().toLowerCase();
    const m = /^(\d+)\s*(b|kb|kib|mb|mib|gb|gib|tb|tib)?$/.exec(s);
    if (m === null) this.fail(field, `must be a size such as 1048576, 512kb or 10mb, got "${s}"`);
    const unit = m[2] ?? 'b';
    const mult = unit === 'b' ? 1 : unit.startsWith('k') ? 1024 : unit.startsWith('m') ? 1024 ** 2 : unit.startsWith('g') ? 1024 ** 3 : 1024 ** 4;
    const n = Number(m[1]) * mult;
    if (n < 1 || n > max) this.fail(field, `must be between 1 byte and ${max} bytes, got ${n}`);
    return n;
  }
}

function nullIfEmpty(s: string, then: (s: string) => number): number | null {
  return s === '' ? null : then(s);
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  return typeof v === 'object' ? 'a mapping' : `${typeof v} ${JSON.stringify(v)}`;
}

export interface LoadOptions {
  /** Environment for `${NAME}` references. Default: process.env. */
  env?: EnvLookup;
}

/** Reads, expands and validates a configuration file. Throws ConfigError naming file and field. */
function responseCacheConfig(r: Reader, v: unknown): Config['cache'] {
  const o = v === undefined || v === null ? {} : r.obj(v, 'cache');
  r.known(o, 'cache', ['max_bytes', 'max_entry_bytes']);
  return {
    maxBytes: r.bytes(o.max_bytes, 'cache.max_bytes', 256 * 1024 ** 2, 64 * 1024 ** 3),
    maxEntryBytes: r.bytes(o.max_entry_bytes, 'cache.max_entry_bytes', 1000 * 1024, 64 * 1024 ** 2),
  };
}

/** A route's `cache: { ttl: 10m }`: the time-to-live of its cached answers in ms; 0: no cache. */
function routeCache(r: Reader, v: unknown, field: string): number {
  if (v === undefined || v === null || v === false) return 0;
  const o = r.obj(v, field);
  r.known(o, field, ['ttl']);
  if (o.ttl === undefined) r.fail(`${field}.ttl`, 'is required (e.g. 10m)');
  return r.duration(o.ttl, `${field}.ttl`, 0, 30 * 86_400_000);
}

export function loadConfigFile(path: string, opts: LoadOptions = {}): Config {
  const file = resolve(path);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new ConfigError(file, '', `cannot read the file (${(e as NodeJS.ErrnoException).code ?? String(e)})`);
  }
  return parseConfig(text, file, opts);
}

/** Parses and validates configuration text; `file` names it in errors. */
export function parseConfig(text: string, file: string, opts: LoadOptions = {}): Config {
  let doc: unknown;
  try {
    doc = parseYaml(text, { prettyErrors: true });
  } catch (e) {
    if (e instanceof YAMLParseError) {
      const pos = e.linePos?.[0];
      throw new ConfigError(file, pos === undefined ? '' : `line ${pos.line}, column ${pos.col}`, `invalid YAML: ${e.message.split('\n')[0]}`);
    }
    throw e;
  }
  const env: EnvLookup = opts.env ?? ((name) => process.env[name]);
  const r = new Reader(file, env);
  const root = r.obj(doc, '');
  r.known(root, '', ['gateway', 'query', 'providers', 'routes', 'capture', 'breaker', 'pricing', 'pricing_defaults', 'cache']);

  const gw = r.obj(root.gateway, 'gateway');
  r.known(gw, 'gateway', ['host', 'port', 'body_limit', 'team_header', 'h2c_port', 'upstream_body_limit', 'sse_event_limit', 'json_depth_limit', 'default_max_tokens']);
  const q = r.obj(root.query, 'query');
  r.known(q, 'query', ['host', 'port']);

  const providers = new Map<string, ProviderConfig>();
  const provs = r.obj(root.providers, 'providers');
  if (Object.keys(provs).length === 0) r.fail('providers', 'at least one provider is required');
  for (const [name, raw] of Object.entries(provs)) {
    providers.set(name, readProvider(r, name, raw));
  }

  const routes: RouteConfig[] = [];
  const rawRoutes: unknown = root.routes;
  if (!Array.isArray(rawRoutes) || rawRoutes.length === 0) r.fail('routes', 'must be a non-empty list');
  (rawRoutes as unknown[]).forEach((raw: unknown, i: number) => {
    const field = `routes[${i}]`;
    const o = r.obj(raw, field);
    r.known(o, field, ['match', 'provider', 'model', 'targets', 'strategy', 'retries', 'retry_backoff_ms', 'timeout_ms', 'cache']);
    const matchRaw = o.match;
    const list = Array.isArray(matchRaw) ? matchRaw : [matchRaw];
    const match = list.map((m: unknown, j: number) => {
      const s = r.str(m, Array.isArray(matchRaw) ? `${field}.match[${j}]` : `${field}.match`);
      if (s === '') r.fail(`${field}.match`, 'must not be empty');
      return s;
    });
    const targets: TargetConfig[] = [];
    const target = (t: Obj, tf: string): TargetConfig => {
      const providerName = r.str(t.provider, `${tf}.provider`);
      const provider = providers.get(providerName);
      if (provider === undefined) {
        return r.fail(`${tf}.provider`, `unknown provider "${providerName}" (defined: ${[...providers.keys()].join(', ')})`);
      }
      const model = t.model === undefined ? null : r.str(t.model, `${tf}.model`);
      if (provider.type === 'azure' && (model === null || model === '')) r.fail(`${tf}.model`, 'an azure target needs `model`: the deployment name');
      return { provider, model: model === '' ? null : model, weight: r.int(t.weight, `${tf}.weight`, 1, 0, 1_000_000) };
    };
    if (o.targets !== undefined) {
      if (o.provider !== undefined || o.model !== undefined) r.fail(field, 'give either `provider`/`model` or `targets`, not both');
      if (!Array.isArray(o.targets) || o.targets.length === 0) r.fail(`${field}.targets`, 'must be a non-empty list');
      (o.targets as unknown[]).forEach((t: unknown, j: number) => {
        const tf = `${field}.targets[${j}]`;
        const to = r.obj(t, tf);
        r.known(to, tf, ['provider', 'model', 'weight']);
        targets.push(target(to, tf));
      });
    } else {
      targets.push(target(o, field));
    }
    const strategy = r.str(o.strategy, `${field}.strategy`, 'ordered') as RouteConfig['strategy'];
    if (strategy !== 'ordered' && strategy !== 'weighted') r.fail(`${field}.strategy`, `must be ordered or weighted, got "${strategy}"`);
    if (strategy === 'weighted' && targets.every((t) => t.weight === 0)) r.fail(`${field}.targets`, 'at least one target needs a weight above 0');
    routes.push({
      match,
      targets,
      strategy,
      retries: r.int(o.retries, `${field}.retries`, 1, 0, 10),
      retryBackoffMs: r.int(o.retry_backoff_ms, `${field}.retry_backoff_ms`, 100, 0, 60_000),
      timeoutMs: r.int(o.timeout_ms, `${field}.timeout_ms`, 0, 0, 3_600_000),
      cacheTtlMs: routeCache(r, o.cache, `${field}.cache`),
    });
  });

  const pricing: PriceConfig[] = [];
  if (root.pricing !== undefined && root.pricing !== null) {
    if (!Array.isArray(root.pricing)) r.fail('pricing', 'must be a list');
    (root.pricing as unknown[]).forEach((raw: unknown, i: number) => {
      const f = `pricing[${i}]`;
      const o = r.obj(raw, f);
      r.known(o, f, ['match', 'input_per_mtok', 'output_per_mtok', 'cache_read_per_mtok', 'cache_write_per_mtok']);
      const list = Array.isArray(o.match) ? (o.match as unknown[]) : [o.match];
      const match = list.map((m, j) => {
        const mf = `${f}.match${Array.isArray(o.match) ? `[${j}]` : ''}`;
        const s = r.str(m, mf);
        if (s === '') r.fail(mf, 'must not be empty');
        return s;
      });
      if (match.length === 0) r.fail(`${f}.match`, 'must name at least one model');
      if (o.input_per_mtok === undefined || o.output_per_mtok === undefined) r.fail(f, 'needs input_per_mtok and output_per_mtok');
      const input = r.num(o.input_per_mtok, `${f}.input_per_mtok`, 0);
      pricing.push({
        match,
        inputPerMTok: input,
        outputPerMTok: r.num(o.output_per_mtok, `${f}.output_per_mtok`, 0),
        cacheReadPerMTok: r.num(o.cache_read_per_mtok, `${f}.cache_read_per_mtok`, input),
        cacheWritePerMTok: r.num(o.cache_write_per_mtok, `${f}.cache_write_per_mtok`, input),
      });
    });
  }

  const br = r.obj(root.breaker, 'breaker');
  r.known(br, 'breaker', ['failure_threshold', 'cooldown_ms']);
  const breaker: BreakerConfig = {
    failureThreshold: r.int(br.failure_threshold, 'breaker.failure_threshold', 5, 1, 1_000),
    cooldownMs: r.int(br.cooldown_ms, 'breaker.cooldown_ms', 30_000, 1, 3_600_000),
  };

  const cap = r.obj(root.capture, 'capture');
  r.known(cap, 'capture', ['enabled', 'batch_max_requests', 'batch_max_bytes', 'flush_interval_ms', 'queue_max_requests', 'max_in_flight', 'publish_timeout_ms', 'spool_dir', 'spool_max_bytes', 'content', 'content_max_bytes', 'content_keep_base64']);
  const spoolDir = cap.spool_dir === undefined || cap.spool_dir === null ? '' : r.str(cap.spool_dir, 'capture.spool_dir');
  const capture: CaptureConfig = {
    enabled: r.bool(cap.enabled, 'capture.enabled', true),
    batchMaxRequests: r.int(cap.batch_max_requests, 'capture.batch_max_requests', 256, 1, 100_000),
    batchMaxBytes: r.bytes(cap.batch_max_bytes, 'capture.batch_max_bytes', 512 * 1024, 64 * 1024 ** 2),
    flushIntervalMs: r.int(cap.flush_interval_ms, 'capture.flush_interval_ms', 50, 1, 60_000),
    queueMaxRequests: r.int(cap.queue_max_requests, 'capture.queue_max_requests', 20_000, 1, 10_000_000),
    maxInFlight: r.int(cap.max_in_flight, 'capture.max_in_flight', 4, 1, 1024),
    publishTimeoutMs: r.int(cap.publish_timeout_ms, 'capture.publish_timeout_ms', 5_000, 10, 600_000),
    spoolDir: spoolDir === '' ? null : resolve(spoolDir),
    spoolMaxBytes: r.bytes(cap.spool_max_bytes, 'capture.spool_max_bytes', 1024 ** 3, 16 * 1024 ** 4),
    content: r.oneOf(cap.content, 'capture.content', ['full', 'redacted', 'none'] as const, 'full'),
    contentMaxBytes: r.bytes(cap.content_max_bytes, 'capture.content_max_bytes', 256 * 1024, 64 * 1024 ** 2),
    contentKeepBase64: r.bool(cap.content_keep_base64, 'capture.content_keep_base64', false),
  };

  return {
    file,
    gateway: {
      host: r.str(gw.host, 'gateway.host', '127.0.0.1'),
      port: r.int(gw.port, 'gateway.port', 8080, 0, 65535),
      bodyLimitBytes: r.bytes(gw.body_limit, 'gateway.body_limit', 10 * 1024 * 1024),
      teamHeader: r.str(gw.team_header, 'gateway.team_header', 'x-sightline-team').toLowerCase(),
      upstreamBodyLimitBytes: r.bytes(gw.upstream_body_limit, 'gateway.upstream_body_limit', 8 * 1024 * 1024),
      sseEventLimitBytes: r.bytes(gw.sse_event_limit, 'gateway.sse_event_limit', 1024 * 1024),
      jsonDepthLimit: r.int(gw.json_depth_limit, 'gateway.json_depth_limit', 128, 8, 10_000),
      defaultMaxTokens: r.int(gw.default_max_tokens, 'gateway.default_max_tokens', 4096, 1, 1_000_000),
      h2cPort: gw.h2c_port === undefined || gw.h2c_port === null || gw.h2c_port === '' ? null : nullIfEmpty(r.str(gw.h2c_port, 'gateway.h2c_port'), (s) => r.int(s, 'gateway.h2c_port', 0, 0, 65535)),
    },
    query: {
      host: r.str(q.host, 'query.host', '127.0.0.1'),
      port: r.int(q.port, 'query.port', 8081, 0, 65535),
    },
    providers,
    routes,
    breaker,
    pricing,
    pricingDefaults: r.bool(root.pricing_defaults, 'pricing_defaults', true),
    capture,
    cache: responseCacheConfig(r, root.cache),
  };
}

function readProvider(r: Reader, name: string, raw: unknown): ProviderConfig {
  const field = `providers.${name}`;
  if (!/^[A-Za-z0-9_.-]+$/.test(name)) r.fail(field, 'provider names use letters, digits, ".", "_" and "-"');
  const o = r.obj(raw, field);
  r.known(o, field, ['type', 'base_url', 'api_key', 'headers', 'connect_timeout_ms', 'headers_timeout_ms', 'body_timeout_ms', 'api_version', 'http2']);
  const type = r.str(o.type, `${field}.type`) as ProviderType;
  if (!PROVIDER_TYPES.includes(type)) r.fail(`${field}.type`, `must be one of ${PROVIDER_TYPES.join(', ')}, got "${type}"`);
  const baseRaw = r.str(o.base_url, `${field}.base_url`);
  let url: URL;
  try {
    url = new URL(baseRaw);
  } catch {
    r.fail(`${field}.base_url`, `is not a URL: "${baseRaw}"`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') r.fail(`${field}.base_url`, `must be http or https, got "${url.protocol}"`);
  if (url.search !== '' || url.hash !== '') r.fail(`${field}.base_url`, 'must not have a query or fragment');
  const basePath = url.pathname.replace(/\/+$/, '');
  const headers: Record<string, string> = {};
  const h = r.obj(o.headers, `${field}.headers`);
  for (const [k, v] of Object.entries(h)) headers[k.toLowerCase()] = r.str(v, `${field}.headers.${k}`);
  return {
    name,
    type,
    baseUrl: url.origin + basePath,
    origin: url.origin,
    basePath,
    apiKey: r.str(o.api_key, `${field}.api_key`, ''),
    headers,
    connectTimeoutMs: r.int(o.connect_timeout_ms, `${field}.connect_timeout_ms`, 10_000, 1, 600_000),
    headersTimeoutMs: r.int(o.headers_timeout_ms, `${field}.headers_timeout_ms`, 600_000, 1, 3_600_000),
    bodyTimeoutMs: r.int(o.body_timeout_ms, `${field}.body_timeout_ms`, 300_000, 1, 3_600_000),
    apiVersion: r.str(o.api_version, `${field}.api_version`, '2024-10-21'),
    http2: r.bool(o.http2, `${field}.http2`, true),
  };
}

/** The shipped configuration file, `config/sightline.yaml` at the repository root. */
export const DEFAULT_CONFIG_PATH = fileURLToPath(new URL('../../../config/sightline.yaml', import.meta.url));

/** Loads the file named by `SIGHTLINE_CONFIG`, or the shipped default. */
export function loadConfigFromEnv(): Config {
  const p = process.env.SIGHTLINE_CONFIG;
  return loadConfigFile(p !== undefined && p !== '' ? p : DEFAULT_CONFIG_PATH);
}
