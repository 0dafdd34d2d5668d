/**
 * What `GET /v1/models` and `GET /v1/models/{id}` answer (issue 13 item 6, issue 16): the
 * models each configured provider offers, read from its own models endpoint at start and
 * refreshed in the background, plus the exact names in the routes — only what the routes
 * send somewhere (docs/api.md, "GET /v1/models").
 *
 * The provider lists are fetched off the request path: every fetch has a timeout and a body
 * bound, a provider that fails keeps its last list (or none), and the failure is logged. The
 * gateway serves without any of them; a request never waits for a fetch.
 *
 * Which providers are asked: `openai-compatible` always (local servers often need no key),
 * `openai` and `anthropic` when a key is configured (their models endpoints need one, and the
 * gateway never lends a caller's key to a background fetch), `azure` never (its models
 * endpoint lists the models of the region, not the resource's deployments).
 */
import { request } from 'undici';
import type { Router } from '@sightline/config';
import type { Upstream } from './providers.js';

/** One model a provider offers, as its models endpoint describes it. */
export interface ProviderModel {
  id: string;
  /** Unix seconds (OpenAI `created`); 0 when unknown. */
  created: number;
  /** RFC 3339 (Anthropic `created_at`); '' when unknown. */
  createdAt: string;
  /** Anthropic `display_name`; '' when unknown. */
  displayName: string;
}

/** A model the gateway lists: its name, the provider of its route's first target, and what its provider says of it. */
export interface ListedModel extends ProviderModel {
  ownedBy: string;
}

export interface ModelCatalogueOptions {
  /** Milliseconds between background refreshes. Default 600 000 (10 minutes). */
  refreshMs?: number;
  /** Milliseconds for one provider's answer (all its pages). Default 5 000. */
  timeoutMs?: number;
  /** Bytes of one answer read at most. Default 4 MiB. */
  maxBytes?: number;
  /** Models kept per provider at most. Default 5 000. */
  maxModels?: number;
  /** Where failures (and first successes) are reported. Default: nowhere. */
  log?: (msg: string) => void;
}

/** Anthropic pages asked for at most (1 000 models each). */
const MAX_PAGES = 10;

/** Why a provider's list could not be read. */
class CatalogueError extends Error {
  override readonly name = 'CatalogueError';
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export class ModelCatalogue {
  /** Provider name → its models in the provider's order; absent: not known (never read, or not asked). */
  readonly #lists = new Map<string, Map<string, ProviderModel>>();
  #listing: { byId: Map<string, ListedModel>; all: ListedModel[] } | null = null;
  #timer: NodeJS.Timeout | null = null;
  #closed = false;
  /** Aborts the fetches in flight at close. */
  readonly #stop = new AbortController();
  #refreshMs = 600_000;
  #timeoutMs = 5_000;
  #maxBytes = 4 * 1024 * 1024;
  #maxModels = 5_000;
  #log: (msg: string) => void = () => {};

  constructor(
    readonly router: Router,
    readonly upstreams: ReadonlyMap<string, Upstream>,
  ) {}

  /** Whether the gateway asks this provider for its models (module comment). */
  static asks(up: Upstream): boolean {
    const c = up.config;
    return c.type === 'openai-compatible' || ((c.type === 'openai' || c.type === 'anthropic') && c.apiKey !== '');
  }

  /** Reads every provider's list once (each bounded by the timeout), then refreshes in the background. */
  async start(opts: ModelCatalogueOptions = {}): Promise<void> {
    this.#refreshMs = opts.refreshMs ?? this.#refreshMs;
    this.#timeoutMs = opts.timeoutMs ?? this.#timeoutMs;
    this.#maxBytes = opts.maxBytes ?? this.#maxBytes;
    this.#maxModels = opts.maxModels ?? this.#maxModels;
    this.#log = opts.log ?? this.#log;
    await this.refresh();
    this.#schedule();
  }

  /** The next refresh, `refreshMs` after the last one ended: rounds never overlap. */
  #schedule(): void {
    if (this.#closed || this.#refreshMs <= 0) return;
    this.#timer = setTimeout(() => {
      this.#timer = null;
      void this.refresh().then(() => this.#schedule());
    }, this.#refreshMs);
    this.#timer.unref();
  }

  close(): void {
    this.#closed = true;
    this.#stop.abort();
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
  }

  /** Reads every asked provider's list; a failure keeps the provider's last list. Never rejects. */
  async refresh(): Promise<void> {
    const asked = [...this.upstreams.values()].filter((u) => ModelCatalogue.asks(u));
    await Promise.all(
      asked.map(async (up) => {
        const name = up.config.name;
        try {
          const list = await this.#fetch(up);
          if (this.#closed) return;
          if (!this.#lists.has(name)) this.#log(`models: ${list.size} from provider ${name}`);
          this.#lists.set(name, list);
          this.#listing = null;
        } catch (e) {
          if (!this.#closed) this.#log(`models: could not read the models of provider ${name} (${e instanceof Error ? e.message : String(e)}); ${this.#lists.has(name) ? 'keeping its last list' : 'listing only the routes\' model names for it'}`);
        }
      }),
    );
  }

  /** The provider's models, or null when they are not known. */
  providerModels(provider: string): ReadonlyMap<string, ProviderModel> | null {
    return this.#lists.get(provider) ?? null;
  }

  /**
   * Every model the gateway lists, before any key's filter: the routes' exact names (in file
   * order), then each provider's models (in its order) that a route sends to that provider
   * under the same name. Computed again only when a list changed.
   */
  list(): readonly ListedModel[] {
    return this.#built().all;
  }

  /**
   * One model, consistent with `list()`: a listed model; else, for a name a route matches by
   * pattern, a minimal entry unless every provider the route sends it to has a known list
   * without it (and none renames it). null: not served.
   */
  lookup(id: string): ListedModel | null {
    const listed = this.#built().byId.get(id);
    if (listed !== undefined) return listed;
    const match = this.router.match(id);
    if (match === null) return null;
    const targets = match.route.targets;
    if (!targets.some((t) => t.model !== null || !this.#lists.has(t.provider.name))) return null;
    return { id, ownedBy: targets[0]?.provider.name ?? 'sightline', created: 0, createdAt: '', displayName: '' };
  }

  #built(): { byId: Map<string, ListedModel>; all: ListedModel[] } {
    if (this.#listing !== null) return this.#listing;
    const byId = new Map<string, ListedModel>();
    for (const id of this.router.exactModels()) {
      const first = this.router.match(id)?.route.targets[0];
      const owner = first?.provider.name ?? 'sightline';
      const known = this.#lists.get(owner)?.get(first?.model ?? id);
      byId.set(id, { id, ownedBy: owner, created: known?.created ?? 0, createdAt: known?.createdAt ?? '', displayName: known?.displayName ?? '' });
    }
    for (const [provider, models] of this.#lists) {
      for (const m of models.values()) {
        if (byId.has(m.id)) continue;
        const route = this.router.match(m.id)?.route;
        if (route === undefined || !route.targets.some((t) => t.provider.name === provider && t.model === null)) continue;
        byId.set(m.id, { ...m, ownedBy: route.targets[0]?.provider.name ?? provider });
      }
    }
    this.#listing = { byId, all: [...byId.values()] };
    return this.#listing;
  }

  async #fetch(up: Upstream): Promise<Map<string, ProviderModel>> {
    const deadline = AbortSignal.any([AbortSignal.timeout(this.#timeoutMs), this.#stop.signal]);
    const headers: Record<string, string> = { ...up.baseHeaders, accept: 'application/json' };
    delete headers['content-type'];
    const out = new Map<string, ProviderModel>();
    const anthropic = up.config.type === 'anthropic';
    let after = '';
    for (let page = 0; page < MAX_PAGES; page++) {
      let path = up.apiPath('models', '');
      if (anthropic) path += `?limit=1000${after === '' ? '' : `&after_id=${encodeURIComponent(after)}`}`;
      const body = await this.#get(up.config.origin + path, headers, deadline);
      const data = isObject(body) ? body.data : undefined;
      if (!Array.isArray(data)) throw new CatalogueError('the answer has no `data` list');
      for (const m of data) {
        if (!isObject(m) || typeof m.id !== 'string' || m.id === '' || m.id.length > 256) continue;
        if (out.size >= this.#maxModels) break;
        out.set(m.id, {
          id: m.id,
          created: typeof m.created === 'number' && Number.isFinite(m.created) ? Math.floor(m.created) : 0,
          createdAt: typeof m.created_at === 'string' ? m.created_at : '',
          displayName: typeof m.display_name === 'string' ? m.display_name : '',
        });
      }
      // Anthropic pages its list (has_more, last_id); OpenAI answers it whole.
      if (!anthropic || !isObject(body) || body.has_more !== true || typeof body.last_id !== 'string' || out.size >= this.#maxModels) break;
      after = body.last_id;
    }
    return out;
  }

  async #get(url: string, headers: Record<string, string>, signal: AbortSignal): Promise<unknown> {
    const res = await request(url, { method: 'GET', headers, signal, headersTimeout: this.#timeoutMs, bodyTimeout: this.#timeoutMs });
    if (res.statusCode !== 200) {
      await res.body.dump();
      throw new CatalogueError(`HTTP ${res.statusCode}`);
    }
    const chunks: Buffer[] = [];
    let bytes = 0;
    for await (const chunk of res.body) {
      const b = chunk as Buffer;
      bytes += b.length;
      if (bytes > this.#maxBytes) {
        res.body.destroy();
        throw new CatalogueError(`the answer is larger than ${this.#maxBytes} bytes`);
      }
      chunks.push(b);
    }
    try {
      return JSON.parse(Buffer.concat(chunks, bytes).toString('utf8'));
    } catch {
      throw new CatalogueError('the answer is not JSON');
    }
  }
}
