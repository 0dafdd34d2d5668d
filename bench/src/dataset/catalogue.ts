/**
 * Who sends the synthetic dataset's requests, to which models, and when: teams, keys,
 * models and the hour-by-hour request counts, all derived from a seed so that two runs with
 * the same flags load the same data. Pure (no I/O); generate.ts turns it into SQL.
 *
 * The shapes follow what a gateway in front of a company sees: a few teams send most of the
 * traffic (Zipf), each team's keys are skewed the same way, each key mostly calls one model,
 * and traffic follows the working day (UTC afternoon peak, quieter weekends).
 */

/** mulberry32: a small seeded PRNG (the catalogue only; row values are hashes in SQL). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface Model {
  name: string;
  provider: 'openai' | 'anthropic' | 'together';
  /** Share of requests among the models (any unit). */
  weight: number;
  /** Median time to the provider's first byte, ms. */
  ttfbMs: number;
  /** Milliseconds per output token. */
  msPerToken: number;
  /** `response_model` as the provider reports it. */
  responseModel: string;
  /** US dollars per million tokens: input, output, cache read, cache write. */
  price: [number, number, number, number];
}

/** 15 models on 3 providers (the third an OpenAI-compatible host). */
export const MODELS: readonly Model[] = [
  { name: 'gpt-4o-mini', provider: 'openai', weight: 25, ttfbMs: 350, msPerToken: 9, responseModel: 'gpt-4o-mini-2024-07-18', price: [0.15, 0.6, 0.075, 0.15] },
  { name: 'gpt-4o', provider: 'openai', weight: 15, ttfbMs: 550, msPerToken: 14, responseModel: 'gpt-4o-2024-08-06', price: [2.5, 10, 1.25, 2.5] },
  { name: 'gpt-4.1-mini', provider: 'openai', weight: 8, ttfbMs: 400, msPerToken: 10, responseModel: 'gpt-4.1-mini-2025-04-14', price: [0.4, 1.6, 0.1, 0.4] },
  { name: 'gpt-4.1', provider: 'openai', weight: 6, ttfbMs: 600, msPerToken: 15, responseModel: 'gpt-4.1-2025-04-14', price: [2, 8, 0.5, 2] },
  { name: 'o3-mini', provider: 'openai', weight: 3, ttfbMs: 2500, msPerToken: 8, responseModel: 'o3-mini-2025-01-31', price: [1.1, 4.4, 0.55, 1.1] },
  { name: 'gpt-5-mini', provider: 'openai', weight: 3, ttfbMs: 1800, msPerToken: 7, responseModel: 'gpt-5-mini-2025-08-07', price: [0.25, 2, 0.025, 0.25] },
  { name: 'claude-sonnet-4-5', provider: 'anthropic', weight: 14, ttfbMs: 900, msPerToken: 16, responseModel: 'claude-sonnet-4-5-20250929', price: [3, 15, 0.3, 3.75] },
  { name: 'claude-haiku-4-5', provider: 'anthropic', weight: 10, ttfbMs: 450, msPerToken: 8, responseModel: 'claude-haiku-4-5-20251001', price: [1, 5, 0.1, 1.25] },
  { name: 'claude-opus-4-1', provider: 'anthropic', weight: 2, ttfbMs: 1600, msPerToken: 28, responseModel: 'claude-opus-4-1-20250805', price: [15, 75, 1.5, 18.75] },
  { name: 'claude-3-5-haiku', provider: 'anthropic', weight: 2, ttfbMs: 500, msPerToken: 11, responseModel: 'claude-3-5-haiku-20241022', price: [0.8, 4, 0.08, 1] },
  { name: 'llama-3.1-8b', provider: 'together', weight: 5, ttfbMs: 200, msPerToken: 4, responseModel: 'meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo', price: [0.18, 0.18, 0.18, 0.18] },
  { name: 'llama-3.3-70b', provider: 'together', weight: 4, ttfbMs: 380, msPerToken: 9, responseModel: 'meta-llama/Llama-3.3-70B-Instruct-Turbo', price: [0.88, 0.88, 0.88, 0.88] },
  { name: 'qwen-2.5-72b', provider: 'together', weight: 1.5, ttfbMs: 420, msPerToken: 10, responseModel: 'Qwen/Qwen2.5-72B-Instruct-Turbo', price: [1.2, 1.2, 1.2, 1.2] },
  { name: 'deepseek-v3', provider: 'together', weight: 1, ttfbMs: 700, msPerToken: 14, responseModel: 'deepseek-ai/DeepSeek-V3', price: [1.25, 1.25, 1.25, 1.25] },
  { name: 'mixtral-8x7b', provider: 'together', weight: 0.5, ttfbMs: 300, msPerToken: 7, responseModel: 'mistralai/Mixtral-8x7B-Instruct-v0.1', price: [0.6, 0.6, 0.6, 0.6] },
];

/** The upstream host of each provider (`server.address`). */
export const PROVIDER_HOSTS = { openai: 'api.openai.com', anthropic: 'api.anthropic.com', together: 'api.together.xyz' } as const;

export const TEAM_NAMES = [
  'assistant', 'search', 'support', 'growth', 'data-science', 'platform', 'sales', 'legal', 'mobile', 'payments',
  'risk', 'docs', 'research', 'marketing', 'ops', 'security', 'finance', 'hr', 'design', 'infra',
] as const;

export interface Key {
  id: string;
  /** Index into Catalogue.teams. */
  team: number;
  /** Index into MODELS: the model this key calls most (70 % of its requests). */
  primaryModel: number;
  /** Share of all requests. */
  share: number;
}

export interface Catalogue {
  teams: { name: string; share: number }[];
  keys: Key[];
  /** 1024 slots, each a team index: a uniform slot picks a team with its share. */
  teamTable: number[];
  /** KEY_SLOTS slots per team (team-major), each a key index: the team's keys with their shares. */
  keyTable: number[];
  /** 1024 slots of model indexes (the global model mix). */
  modelTable: number[];
}

export const TEAM_SLOTS = 1024;
export const KEY_SLOTS = 64;
export const MODEL_SLOTS = 1024;

/**
 * `slots` entries of indexes into `weights`, each index about weight/total of them and at
 * least one (largest remainder), so a uniform pick follows the weights to 1/slots.
 */
export function slotTable(weights: readonly number[], slots: number): number[] {
  if (weights.length > slots) throw new RangeError(`${weights.length} weights do not fit in ${slots} slots`);
  const total = weights.reduce((a, b) => a + b, 0);
  const free = slots - weights.length;
  const exact = weights.map((w) => (w / total) * free);
  const counts = exact.map((e) => 1 + Math.floor(e));
  let left = slots - counts.reduce((a, b) => a + b, 0);
  const order = exact.map((e, i) => [e - Math.floor(e), i] as const).sort((a, b) => b[0] - a[0]);
  for (const [, i] of order) {
    if (left <= 0) break;
    counts[i]!++;
    left--;
  }
  const out: number[] = [];
  counts.forEach((c, i) => {
    for (let k = 0; k < c; k++) out.push(i);
  });
  return out;
}

const ID_CHARS = 'abcdefghijklmnopqrstuvwxyz0123456789';

/** 20 teams (Zipf 1.1), `keyCount` keys spread over them (at least 2 each), each key's primary model. */
export function catalogue(seed: number, keyCount = 200): Catalogue {
  const rnd = prng(seed);
  const teamW = TEAM_NAMES.map((_, i) => 1 / (i + 1) ** 1.1);
  const teamTotal = teamW.reduce((a, b) => a + b, 0);
  const teams = TEAM_NAMES.map((name, i) => ({ name, share: teamW[i]! / teamTotal }));
  // Keys per team: more for bigger teams (share^0.7), at least 2, at most KEY_SLOTS.
  const kw = teamW.map((w) => w ** 0.7);
  const kwTotal = kw.reduce((a, b) => a + b, 0);
  const perTeam = kw.map((w) => Math.min(KEY_SLOTS, Math.max(2, Math.round((w / kwTotal) * keyCount))));
  let diff = keyCount - perTeam.reduce((a, b) => a + b, 0);
  for (let i = 0; diff !== 0; i = (i + 1) % perTeam.length) {
    if (diff > 0 && perTeam[i]! < KEY_SLOTS) (perTeam[i]!++, diff--);
    else if (diff < 0 && perTeam[i]! > 2) (perTeam[i]!--, diff++);
  }
  const modelTable = slotTable(MODELS.map((m) => m.weight), MODEL_SLOTS);
  const keys: Key[] = [];
  const keyTable: number[] = [];
  perTeam.forEach((n, team) => {
    const within = Array.from({ length: n }, (_, j) => 1 / (j + 1));
    const withinTotal = within.reduce((a, b) => a + b, 0);
    const first = keys.length;
    for (let j = 0; j < n; j++) {
      let id = 'key_';
      for (let c = 0; c < 16; c++) id += ID_CHARS[Math.floor(rnd() * ID_CHARS.length)];
      keys.push({ id, team, primaryModel: modelTable[Math.floor(rnd() * modelTable.length)]!, share: teams[team]!.share * (within[j]! / withinTotal) });
    }
    for (const k of slotTable(within, KEY_SLOTS)) keyTable.push(first + k);
  });
  return { teams, keys, teamTable: slotTable(teamW, TEAM_SLOTS), keyTable, modelTable };
}

/** One hour of the dataset: [startS, startS + 3600) with `count` requests, the first numbered `first`. */
export interface Hour {
  startS: number;
  count: number;
  first: number;
}

/** Relative request rate at Unix second `s`: a working-day cycle peaking 15:00 UTC, weekends at 40 %, +20 % growth over the range. */
export function rate(s: number, fromS: number, toS: number): number {
  const d = new Date(s * 1000);
  const hourOfDay = d.getUTCHours() + d.getUTCMinutes() / 60;
  const weekday = d.getUTCDay();
  const weekend = weekday === 0 || weekday === 6 ? 0.4 : 1;
  const cycle = 1 + 0.6 * Math.cos((2 * Math.PI * (hourOfDay - 15)) / 24);
  const growth = 1 + (0.2 * (s - fromS)) / Math.max(1, toS - fromS);
  return weekend * cycle * growth;
}

/**
 * The hours of [toS − days, toS) with `requests` requests spread by `rate` (largest
 * remainder, so the counts add up exactly). The last hour ends at `toS`.
 */
export function hours(requests: number, days: number, toS: number): Hour[] {
  const fromS = toS - days * 86_400;
  const n = days * 24;
  const w = Array.from({ length: n }, (_, h) => rate(fromS + h * 3600 + 1800, fromS, toS));
  const total = w.reduce((a, b) => a + b, 0);
  const exact = w.map((x) => (x / total) * requests);
  const counts = exact.map(Math.floor);
  let left = requests - counts.reduce((a, b) => a + b, 0);
  const order = exact.map((e, i) => [e - Math.floor(e), i] as const).sort((a, b) => b[0] - a[0]);
  for (const [, i] of order) {
    if (left <= 0) break;
    counts[i]!++;
    left--;
  }
  let first = 0;
  return counts.map((count, h) => {
    const hour = { startS: fromS + h * 3600, count, first };
    first += count;
    return hour;
  });
}
