/**
 * What is measured: the scenarios of issue 5, the arms, and the request each arm is sent.
 *
 * Every arm of a scenario sends the same body with the same client headers; only the origin
 * and the arm's own headers differ (Portkey's provider headers; Sightline's team header, which
 * the completeness check counts by, and with authentication on the scenario's Sightline key in
 * place of the client's dummy provider key).
 */
import { padBody } from './stats.js';
import type { StreamDialect } from './sse.js';
import type { TeamSettings } from '../../packages/directory/src/index.js';
import { UNIQUE_MARKER } from './types.js';
import type { DriverMode, RequestTemplate } from './types.js';

export const ARMS = [
  'direct',
  'sightline',
  'sightline-nocapture',
  'sightline-noauth',
  'sightline-embedded',
  'node-proxy',
  'nginx',
  'portkey',
  'ctl-none',
  'ctl-limits',
  'ctl-budget',
  'ctl-cache-miss',
  'ctl-cache-hit',
  'ctl-all',
] as const;
export type ArmName = (typeof ARMS)[number];
/**
 * The controls matrix (issue 12, "How it is checked", bench): the capturing, authenticating
 * `sightline` gateway itself, sent requests under one team per control setting, so the arms
 * differ only in the controls their team has and the route their model takes. `ctl-none` is the
 * default (authentication, pricing, usage; no limits, budget or cache).
 */
export const CONTROL_ARMS = ['ctl-none', 'ctl-limits', 'ctl-budget', 'ctl-cache-miss', 'ctl-cache-hit', 'ctl-all'] as const;
export type ControlArm = (typeof CONTROL_ARMS)[number];
export function isControlArm(a: ArmName): a is ControlArm {
  return (CONTROL_ARMS as readonly string[]).includes(a);
}
/** What each control arm turns on (stack.ts sets the team; scenarios pick the route). */
export interface ControlVariant {
  /** Team rate limits, high enough never to refuse (CONTROL_LIMITS). */
  limits: boolean;
  /** Team budget, high enough never to refuse (CONTROL_BUDGET). */
  budget: boolean;
  /** The route's exact cache: off, on with a body new to the cache every request, on and hit. */
  cache: 'off' | 'miss' | 'hit';
}
export const CONTROL_VARIANTS: Readonly<Record<ControlArm, ControlVariant>> = {
  'ctl-none': { limits: false, budget: false, cache: 'off' },
  'ctl-limits': { limits: true, budget: false, cache: 'off' },
  'ctl-budget': { limits: false, budget: true, cache: 'off' },
  'ctl-cache-miss': { limits: false, budget: false, cache: 'miss' },
  'ctl-cache-hit': { limits: false, budget: false, cache: 'hit' },
  'ctl-all': { limits: true, budget: true, cache: 'miss' },
};
/**
 * Per-team limits of the limited arms: admission is checked and counted on every request, and
 * nothing is refused (the bench sends ~10⁵ requests an hour; a 1 KiB request reserves a few
 * thousand tokens with its output bound).
 */
export const CONTROL_LIMITS = { requests_per_minute: 100_000_000, tokens_per_minute: 100_000_000_000 } as const;
/** The budgeted arms' team budget: reserved and settled on every request, never spent. */
export const CONTROL_BUDGET = { usd: 1_000_000, period: 'day' } as const;
/** The scenario of the controls matrix (1 KiB JSON, sequential), and its arms' only one. */
export const CONTROLS_SCENARIO = 'controls-1k-seq';
/**
 * The controls matrix's scenarios: 1 KiB JSON in every run (the targets read it); full mode
 * adds the rest of issue 12's matrix, 16 and 64 KiB JSON and OpenAI SSE at 16 concurrent.
 */
export function isControlsScenario(name: string): boolean {
  return name.startsWith('controls-');
}
/**
 * The model the cached arms ask for: an exact route with `cache: { ttl: 12h }` in the bench's
 * gateway configuration (stack.ts benchConfig); exact names win over the `gpt-*` pattern the
 * other arms' `gpt-4o-mini` takes, and both have a price (budgets need one).
 */
export const CACHED_MODEL = 'gpt-4o-mini-2024-07-18';
/**
 * The embedded one-command mode (`npm start`: gateway, ingester, query API and chdb in one
 * process; issue 15) runs in this scenario only, against the separate-process `sightline`.
 */
export const EMBEDDED_SCENARIO = 'json-1k-seq';
/** The arms that put a hop between client and mock; `direct` is the control. */
export const PROXY_ARMS: readonly ArmName[] = ARMS.filter((a) => a !== 'direct');
/**
 * The Sightline gateways that capture: after each of their blocks the run waits for ClickHouse
 * to hold every request sent, and their rows are counted by instance and team.
 */
export const CAPTURING_ARMS: readonly ArmName[] = ['sightline', 'sightline-noauth', 'sightline-embedded', ...CONTROL_ARMS];
/** The Sightline gateways that run with authentication on (SIGHTLINE_ADMIN_TOKEN, one key per team). */
export const AUTH_ARMS: readonly ArmName[] = ['sightline', 'sightline-nocapture', 'sightline-embedded', ...CONTROL_ARMS];
/**
 * The scenario that measures the cost of authentication (issue 10): `sightline` against
 * `sightline-noauth`, the same gateway with capture on and authentication off. The
 * authentication-off arm runs in this scenario only, and not in the ladder.
 */
export const AUTH_COST_SCENARIO = 'json-1k-seq';
/**
 * Arm pairs compared round by round (blocks.ts comparisons): a − b per round, with a 95 %
 * interval, so "capture on is within the interval of capture off" (issue 15) reads off a run.
 */
export const COMPARISONS: readonly (readonly [ArmName, ArmName])[] = [
  ['sightline', 'sightline-nocapture'],
  ['sightline', 'sightline-noauth'],
  ['sightline', 'node-proxy'],
  ['sightline-embedded', 'sightline'],
  ['ctl-limits', 'ctl-none'],
  ['ctl-budget', 'ctl-none'],
  ['ctl-cache-miss', 'ctl-none'],
  ['ctl-cache-hit', 'ctl-none'],
  ['ctl-all', 'ctl-none'],
  ['ctl-cache-hit', 'ctl-cache-miss'],
];
/** The arms of the open-loop ladder. */
export const LADDER_ARMS: readonly ArmName[] = ARMS.filter((a) => a !== 'sightline-noauth' && a !== 'sightline-embedded' && !isControlArm(a));

/** Mock knobs (bench/mock/server.ts MockOptions), set over `POST /_mock/config` per scenario. */
export interface MockKnobs {
  latencyMs: number;
  ttftMs: number;
  gapMs: number;
  chunks: number;
  responseBytes: number;
}

const JSON_MOCK: MockKnobs = { latencyMs: 0, ttftMs: 0, gapMs: 0, chunks: 5, responseBytes: 256 };
/**
 * Streams: 20 content chunks, the first 5 ms after the head and then one every 2 ms, so a
 * stream lasts ~45 ms and TTFT and inter-chunk gaps are well above timer noise.
 */
const SSE_MOCK: MockKnobs = { latencyMs: 0, ttftMs: 5, gapMs: 2, chunks: 20, responseBytes: 400 };
/** The ladder's slow provider: 1,500 ms before the answer (BRIEF "Targets"). */
const LADDER_MOCK: MockKnobs = { latencyMs: 1_500, ttftMs: 0, gapMs: 0, chunks: 5, responseBytes: 256 };

export const OPENAI_MODEL = 'gpt-4o-mini';
export const CLAUDE_MODEL = 'claude-3-5-haiku-20241022';

const OPENAI_HEADERS: Record<string, string> = {
  'content-type': 'application/json',
  authorization: 'Bearer sk-bench-not-a-real-key',
};
const ANTHROPIC_HEADERS: Record<string, string> = {
  'content-type': 'application/json',
  'x-api-key': 'sk-ant-bench-not-a-real-key',
  'anthropic-version': '2023-06-01',
};

interface Dialectal {
  path: string;
  headers: Record<string, string>;
  body: string;
  stream?: StreamDialect;
  /** The driver makes every request's body new (types.ts UNIQUE_MARKER): cache misses. */
  unique?: boolean;
}

/**
 * An OpenAI chat completion request of exactly `bytes`. `maxTokens` is set for requests to a
 * Claude model: Anthropic requires max_tokens, so a translating gateway needs it from the client.
 */
function openaiRequest(model: string, bytes: number, stream: boolean, maxTokens?: number, marked = false): Dialectal {
  const head = `{"model":"${model}",${maxTokens === undefined ? '' : `"max_tokens":${maxTokens},`}${stream ? '"stream":true,' : ''}"messages":[{"role":"user","content":"${marked ? `${UNIQUE_MARKER} ` : ''}`;
  const req: Dialectal = { path: '/v1/chat/completions', headers: OPENAI_HEADERS, body: padBody(head, '"}]}', bytes) };
  if (stream) req.stream = 'openai';
  return req;
}

/**
 * An OpenAI Responses API request of exactly `bytes` (issue 16: passed through to an OpenAI-API
 * provider). `store: false`, so the mock keeps nothing per request and the gateway has no
 * stored response to track.
 */
function responsesRequest(model: string, bytes: number): Dialectal {
  const head = `{"model":"${model}","store":false,"input":"`;
  return { path: '/v1/responses', headers: OPENAI_HEADERS, body: padBody(head, '"}', bytes) };
}

function anthropicRequest(model: string, bytes: number, stream: boolean): Dialectal {
  const head = `{"model":"${model}","max_tokens":256,${stream ? '"stream":true,' : ''}"messages":[{"role":"user","content":"`;
  const req: Dialectal = { path: '/v1/messages', headers: ANTHROPIC_HEADERS, body: padBody(head, '"}]}', bytes) };
  if (stream) req.stream = 'anthropic';
  return req;
}

export interface Scenario {
  name: string;
  title: string;
  /** What a client sends to every proxy arm. */
  request: Dialectal;
  /** What the direct control sends to the mock, when not the same request. */
  directRequest?: Dialectal;
  /** Arms sent another request than `request` (the controls matrix: route and unique bodies). */
  armRequests?: Partial<Record<ArmName, Dialectal>>;
  /** Portkey's provider header for this request. */
  portkeyProvider: 'openai' | 'anthropic';
  mock: MockKnobs;
  mode: DriverMode;
  connections: number;
  prewarm: number;
  /** Arms that cannot take part at all, with the reason shown in their row. */
  notApplicable: Partial<Record<ArmName, string>>;
}

export interface LadderPlan {
  rates: number[];
  stepMs: number;
  request: Dialectal;
  mock: MockKnobs;
}

export interface Plan {
  mode: 'quick' | 'full';
  warmup: { sequential: number; concurrent: number; stream: number };
  /** Rounds of interleaved arm blocks per scenario, between the two direct control blocks. */
  rounds: number;
  scenarios: Scenario[];
  ladder: LadderPlan;
  /** Minimum prewarm time of every measured block, ms (BlockSpec.prewarmMs). */
  prewarmMs: number;
  /** Hard bound on one block, ms. */
  blockMaxMs: number;
  /** How long ingestion may take to catch up after a Sightline block, ms. */
  captureDeadlineMs: number;
}

export function buildPlan(quick: boolean): Plan {
  const n = (q: number, f: number): number => (quick ? q : f);
  const kib = 1024;
  const passThrough = 'pass-through proxies do not translate between dialects';
  const scenarios: Scenario[] = [
    {
      name: 'json-1k-seq',
      title: '1 KiB JSON, sequential',
      request: openaiRequest(OPENAI_MODEL, kib, false),
      portkeyProvider: 'openai',
      mock: JSON_MOCK,
      mode: { kind: 'sequential', requests: n(600, 1_250) },
      connections: 1,
      prewarm: 50,
      notApplicable: {},
    },
    {
      name: 'json-1k-c16',
      title: '1 KiB JSON, 16 concurrent',
      request: openaiRequest(OPENAI_MODEL, kib, false),
      portkeyProvider: 'openai',
      mock: JSON_MOCK,
      mode: { kind: 'concurrent', concurrency: 16, requests: n(1_200, 2_500) },
      connections: 16,
      prewarm: 64,
      notApplicable: {},
    },
    {
      name: 'json-16k-seq',
      title: '16 KiB JSON body, sequential',
      request: openaiRequest(OPENAI_MODEL, 16 * kib, false),
      portkeyProvider: 'openai',
      mock: JSON_MOCK,
      mode: { kind: 'sequential', requests: n(400, 750) },
      connections: 1,
      prewarm: 30,
      notApplicable: {},
    },
    {
      name: 'json-64k-seq',
      title: '64 KiB JSON body, sequential',
      request: openaiRequest(OPENAI_MODEL, 64 * kib, false),
      portkeyProvider: 'openai',
      mock: JSON_MOCK,
      mode: { kind: 'sequential', requests: n(400, 750) },
      connections: 1,
      prewarm: 30,
      notApplicable: {},
    },
    {
      name: 'sse-openai',
      title: 'OpenAI SSE, 20 chunks, 16 concurrent',
      request: openaiRequest(OPENAI_MODEL, kib, true),
      portkeyProvider: 'openai',
      mock: SSE_MOCK,
      mode: { kind: 'concurrent', concurrency: 16, requests: n(192, 400) },
      connections: 16,
      prewarm: 32,
      notApplicable: {},
    },
    {
      name: 'sse-anthropic',
      title: 'Anthropic SSE, 20 chunks, 16 concurrent',
      request: anthropicRequest(CLAUDE_MODEL, kib, true),
      portkeyProvider: 'anthropic',
      mock: SSE_MOCK,
      mode: { kind: 'concurrent', concurrency: 16, requests: n(192, 400) },
      connections: 16,
      prewarm: 32,
      notApplicable: {},
    },
    {
      name: 'sse-cross',
      title: 'OpenAI SSE client → Claude model (cross-dialect), 16 concurrent',
      request: openaiRequest(CLAUDE_MODEL, kib, true, 256),
      // The floor is what the client would see from a provider speaking its own dialect: the
      // same OpenAI stream straight from the mock (same chunk count and timing).
      directRequest: openaiRequest(CLAUDE_MODEL, kib, true, 256),
      portkeyProvider: 'anthropic',
      mock: SSE_MOCK,
      mode: { kind: 'concurrent', concurrency: 16, requests: n(192, 400) },
      connections: 16,
      prewarm: 32,
      notApplicable: { 'node-proxy': passThrough, nginx: passThrough },
    },
  ];
  scenarios.push({
    name: 'responses-1k-seq',
    title: '1 KiB JSON, Responses API (POST /v1/responses pass-through), sequential',
    request: responsesRequest(OPENAI_MODEL, kib),
    portkeyProvider: 'openai',
    mock: JSON_MOCK,
    mode: { kind: 'sequential', requests: n(400, 1_250) },
    connections: 1,
    prewarm: 50,
    notApplicable: {},
  });
  scenarios.push(controlsScenario(CONTROLS_SCENARIO, '1 KiB JSON, sequential', kib, false, { kind: 'sequential', requests: n(600, 1_250) }));
  if (!quick) {
    scenarios.push(controlsScenario('controls-16k-seq', '16 KiB JSON, sequential', 16 * kib, false, { kind: 'sequential', requests: 750 }));
    scenarios.push(controlsScenario('controls-64k-seq', '64 KiB JSON, sequential', 64 * kib, false, { kind: 'sequential', requests: 750 }));
    scenarios.push(controlsScenario('controls-sse', 'OpenAI SSE, 20 chunks, 16 concurrent', kib, true, { kind: 'concurrent', concurrency: 16, requests: 400 }));
  }
  for (const s of scenarios) {
    if (s.name !== AUTH_COST_SCENARIO) s.notApplicable['sightline-noauth'] = `authentication off: measured in ${AUTH_COST_SCENARIO} only (auth cost)`;
    if (s.name !== EMBEDDED_SCENARIO) s.notApplicable['sightline-embedded'] = `embedded mode: measured in ${EMBEDDED_SCENARIO} only`;
    if (!isControlsScenario(s.name)) for (const a of CONTROL_ARMS) s.notApplicable[a] = 'controls matrix: measured in the controls-* scenarios only';
  }
  return {
    mode: quick ? 'quick' : 'full',
    // ≥ 2,000 requests per arm even in quick mode (issue 5): JIT, connection pools and the
    // capture pipeline all reach steady state before anything is measured.
    warmup: { sequential: n(500, 2_000), concurrent: n(1_500, 8_000), stream: n(160, 800) },
    // More, shorter blocks (issue 15 item 3): the intervals are t-intervals over the rounds, so
    // 5 rounds (4 degrees of freedom, t = 2.78) in quick mode and 12 (t = 2.20) in full mode,
    // for about the same requests per arm as the 2 × and 3 × longer blocks before.
    rounds: n(5, 12),
    scenarios,
    ladder: {
      rates: quick ? [500, 1_000] : [1_000, 2_000, 3_500, 5_000],
      stepMs: n(3_000, 10_000),
      request: openaiRequest(OPENAI_MODEL, kib, false),
      mock: LADDER_MOCK,
    },
    prewarmMs: n(150, 500),
    blockMaxMs: n(60_000, 180_000),
    captureDeadlineMs: n(30_000, 120_000),
  };
}

/**
 * The controls matrix's scenario (issue 12): 1 KiB JSON, sequential, the direct control and the
 * control arms only. Every arm but the cache-hit one sends a body new to the cache each time
 * (the driver rewrites UNIQUE_MARKER), so the cached miss arms miss and store every request and
 * the others send the same kind of body; the cache-hit arm repeats one body, which its block's
 * prewarm has stored.
 */
function controlsScenario(name: string, title: string, bytes: number, stream: boolean, mode: DriverMode): Scenario {
  const plain = { ...openaiRequest(OPENAI_MODEL, bytes, stream, undefined, true), unique: true };
  const cachedMiss = { ...openaiRequest(CACHED_MODEL, bytes, stream, undefined, true), unique: true };
  const cachedHit = openaiRequest(CACHED_MODEL, bytes, stream, undefined, true);
  const armRequests: Partial<Record<ArmName, Dialectal>> = {};
  for (const a of CONTROL_ARMS) {
    const v = CONTROL_VARIANTS[a];
    armRequests[a] = v.cache === 'off' ? plain : v.cache === 'miss' ? cachedMiss : cachedHit;
  }
  const notApplicable: Partial<Record<ArmName, string>> = {};
  for (const a of ARMS) if (a !== 'direct' && !isControlArm(a)) notApplicable[a] = 'controls matrix: control arms only';
  return {
    name,
    title: `${title}: controls matrix (issue 12)`,
    request: openaiRequest(OPENAI_MODEL, bytes, stream, undefined, true),
    armRequests,
    portkeyProvider: 'openai',
    mock: stream ? SSE_MOCK : JSON_MOCK,
    mode,
    connections: mode.kind === 'concurrent' ? mode.concurrency : 1,
    prewarm: mode.kind === 'concurrent' ? 32 : 30,
    notApplicable,
  };
}

/** Where each arm listens and what it needs added to a request. */
export interface ArmTarget {
  origin: string;
  /**
   * Headers added to (and replacing, by name) the request's own: `scenario` names the team,
   * `requestHeaders` are the client headers they are merged over (which credential header the
   * client sends).
   */
  extraHeaders: (scenario: string, portkeyProvider: 'openai' | 'anthropic', requestHeaders: Readonly<Record<string, string>>) => Record<string, string>;
}

export function template(
  arm: ArmName,
  target: ArmTarget,
  scenarioName: string,
  request: Dialectal,
  directRequest: Dialectal | undefined,
  portkeyProvider: 'openai' | 'anthropic',
  armRequests?: Partial<Record<ArmName, Dialectal>>,
): RequestTemplate {
  const r = armRequests?.[arm] ?? (arm === 'direct' && directRequest !== undefined ? directRequest : request);
  const t: RequestTemplate = {
    origin: target.origin,
    path: r.path,
    headers: { ...r.headers, ...target.extraHeaders(scenarioName, portkeyProvider, r.headers) },
    body: r.body,
  };
  if (r.stream !== undefined) t.stream = r.stream;
  if (r.unique === true) t.unique = true;
  return t;
}

/**
 * The team of a scenario's requests: the team header without authentication, the team of the
 * scenario's key with it. The completeness check counts rows by it.
 */
export function teamOf(scenario: string, arm?: ArmName): string {
  // The control arms share the `sightline` gateway: each has its own team (its controls).
  return arm !== undefined && isControlArm(arm) ? `bench-${scenario}-${arm.slice('ctl-'.length)}` : `bench-${scenario}`;
}

/**
 * Every name a Sightline arm is sent traffic under (warmup.ts, blocks.ts, ladder.ts), so
 * the authenticated arms have a key for each before they start.
 */
export function benchScenarios(plan: Pick<Plan, 'scenarios' | 'ladder'>): string[] {
  return ['warmup', ...plan.scenarios.map((s) => s.name), ...plan.ladder.rates.map((r) => `ladder-${r}`)];
}

/**
 * The credential header carrying a Sightline key, replacing the dummy provider key the client
 * sends: `x-api-key` when that is how the client authenticates (the Anthropic SDK), else
 * `authorization: Bearer` (the OpenAI SDK). The gateway takes either.
 */
export function keyHeaders(secret: string, requestHeaders: Readonly<Record<string, string>>): Record<string, string> {
  const has = (name: string): boolean => Object.keys(requestHeaders).some((k) => k.toLowerCase() === name);
  return has('x-api-key') && !has('authorization') ? { 'x-api-key': secret } : { authorization: `Bearer ${secret}` };
}

/** A team the run makes a key for, with the settings the admin API's PUT /v1/admin/teams/{team} would give it. */
export interface BenchTeam {
  team: string;
  settings?: TeamSettings;
}

/**
 * Every team the authenticated arms are sent traffic under: one per scenario name, and for the
 * control arms (issue 12) one per control setting in the warm-up and the controls scenario,
 * with its limits and budget (scenarios.ts CONTROL_VARIANTS).
 */
export function benchTeams(scenarios: readonly string[]): BenchTeam[] {
  const out: BenchTeam[] = scenarios.map((s) => ({ team: teamOf(s) }));
  for (const scenario of scenarios) {
    if (scenario !== 'warmup' && !isControlsScenario(scenario)) continue;
    for (const arm of CONTROL_ARMS) {
      const v = CONTROL_VARIANTS[arm];
      const settings: TeamSettings = { description: `bench controls matrix: ${arm}` };
      if (v.limits) settings.limits = { ...CONTROL_LIMITS };
      if (v.budget) settings.budget = { ...CONTROL_BUDGET };
      out.push({ team: teamOf(scenario, arm), settings });
    }
  }
  return out;
}

/**
 * The gateways' configuration: the shipped config/sightline.yaml with one more route, an exact
 * match for CACHED_MODEL with the exact cache on (issue 12's cached arms). Exact names win over
 * patterns, so every other request takes the shipped routes unchanged.
 */
export function benchConfig(shipped: string): string {
  const marker = '\nroutes:\n';
  const at = shipped.indexOf(marker);
  if (at < 0) throw new Error('config/sightline.yaml has no top-level routes: list to add the cached route to');
  // 12 hours: the cache-hit arm's entry is stored by its probe and must outlive the whole
  // scenario (with 10 minutes it expired during a full-mode controls-sse run on a loaded
  // machine, and the last block's first requests missed). The bucket keeps entries 24 h.
  const route = `  # Added by the benchmark (bench/src/stack.ts benchConfig): the controls matrix's cached route.\n  - match: "${CACHED_MODEL}"\n    provider: openai\n    cache: { ttl: 12h }\n`;
  return shipped.slice(0, at + marker.length) + route + shipped.slice(at + marker.length);
}
