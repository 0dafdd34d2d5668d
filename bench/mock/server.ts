/**
 * Mock LLM provider: a real node:http server speaking the OpenAI Chat Completions and
 * Anthropic Messages dialects (JSON and SSE), used as the upstream in tests and benchmarks.
 * It also serves, each with and without the `/v1` prefix:
 * - OpenAI Responses API: `POST /v1/responses` (JSON, and typed SSE events when `stream`),
 *   `GET` and `DELETE /v1/responses/{id}` for responses created with `store` not false (the
 *   last 100 are kept), and `previous_response_id` checked against them;
 * - OpenAI embeddings: `POST /v1/embeddings` (`encoding_format` float or base64, `dimensions`);
 * - model lookup: `GET /v1/models` and `GET /v1/models/{id}`, in Anthropic's shape when the
 *   request has an `anthropic-version` header and in OpenAI's otherwise, each from its own
 *   fixed catalogue (unknown ids: 404 in that API's shape);
 * - Anthropic token counting: `POST /v1/messages/count_tokens` -> `{input_tokens}`.
 * Every one of them is a provider request: counted, recorded, delayed by latencyMs and
 * subject to the forced status and failNext.
 *
 * Benchmarks drive it at thousands of requests per second, so everything that depends only
 * on the knobs (generated text, SSE delta events, error bodies) is prebuilt into a `Plan`
 * whenever the options change; a request only concatenates its own id, model and token
 * counts around those prebuilt strings. Nothing is logged per request.
 *
 * Token counting rule (deterministic, so consumers can assert exact usage):
 * - prompt/input tokens = ceil(UTF-8 bytes of all message text / 4), at least 1. Message text
 *   is a string `content`, the `text` of content parts, and nested `content` of parts such as
 *   Anthropic `tool_result`; the Anthropic `system` prompt counts too. Other parts count 0.
 * - completion/output tokens = number of words in the generated text (one word is at least
 *   one content chunk, see buildText); for tool calls, ceil(bytes of the arguments JSON / 4).
 * - Responses API input tokens: the same rule over `instructions`, the `input` string, the
 *   `content` of message items and the `output` of function_call_output items (what the
 *   Anthropic translation of the same request would count); function_call arguments count 0.
 * - count_tokens: exactly the input_tokens /v1/messages reports for the same body.
 * - embeddings: per input, ceil(UTF-8 bytes / 4) (at least 1) for a string, its length for
 *   a token array; prompt_tokens = total_tokens = their sum.
 *
 * Tool calls: a request with tools whose last message is a user message containing
 * "use tool" (case-insensitive) is answered with a call of the first tool (Chat, Messages and
 * Responses alike; a Responses `input` string counts as a user message).
 */
import { createServer } from 'node:http';
import type { IncomingHttpHeaders, IncomingMessage, Server, ServerResponse } from 'node:http';
import { randomFillSync } from 'node:crypto';
import { sendFault, type MockFault } from './faults.js';

export type { MockFault } from './faults.js';

export interface MockOptions {
  /** Default '127.0.0.1'. */
  host?: string;
  /** Default 0 (a free port). */
  port?: number;
  /** Delay before response headers (JSON) / before the first events (stream). Default 0. */
  latencyMs?: number;
  /** Streams: delay between the response headers and the first content chunk. Default 0. */
  ttftMs?: number;
  /** Streams: delay between content chunks. Default 0. */
  gapMs?: number;
  /** Streams: number of content delta chunks. Default 5. */
  chunks?: number;
  /** Approximate UTF-8 size of the assistant text (JSON and stream). Default 64. */
  responseBytes?: number;
  /** Force this HTTP status (400-599) with a dialect error body. `undefined` (or null over HTTP) clears it. */
  status?: number | undefined;
}

export interface MockStats {
  /** Provider requests of every endpoint (not the /_mock admin calls). */
  requests: number;
  /** Requests in the OpenAI API (chat, responses, embeddings, models without anthropic-version). */
  openai: number;
  /** Requests in the Anthropic API (messages, count_tokens, models with anthropic-version). */
  anthropic: number;
  /** Of those, by endpoint: /v1/responses (and /v1/responses/{id}). */
  responses: number;
  embeddings: number;
  /** /v1/models and /v1/models/{id}, either shape. */
  models: number;
  countTokens: number;
  /** Streamed answers (chat, messages, responses). */
  streams: number;
  aborted: number;
  completed: number;
  inFlight: number;
}

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

export interface RecordedRequest {
  method: string;
  headers: IncomingHttpHeaders;
  /** Request target as sent (path and query). */
  path: string;
  /** Parsed JSON, or the raw body text when it is not valid JSON (empty string when absent). */
  body: JsonValue;
}

export interface MockServer {
  /** e.g. 'http://127.0.0.1:PORT', no trailing slash. */
  url: string;
  port: number;
  stats(): MockStats;
  /** Zero the counters and clear recorded requests. */
  reset(): void;
  /** Change knobs at runtime; requests already in progress keep the knobs they started with. */
  configure(opts: Partial<MockOptions>): void;
  /** The last 100 provider (and unknown-path) requests, oldest first. */
  lastRequests(): RecordedRequest[];
  /** The next `count` provider requests fail with `status` (dialect error body), then normal service resumes. */
  failNext(count: number, status: number): void;
  /** The next `count` provider requests get `fault` (bench/mock/faults.ts), then normal service resumes. */
  misbehaveNext(count: number, fault: MockFault): void;
  /** Close the server, destroying open sockets; resolves when closed. */
  close(): Promise<void>;
}

type Dialect = 'openai' | 'anthropic';

/** Which API a provider path serves; `models` picks its dialect by the anthropic-version header. */
type Endpoint = 'chat' | 'messages' | 'count_tokens' | 'responses' | 'response' | 'embeddings' | 'models' | 'model';

interface Route {
  endpoint: Endpoint;
  /** The `{id}` of /v1/responses/{id} and /v1/models/{id}, URL-decoded. */
  id: string;
}

interface Knobs {
  latencyMs: number;
  ttftMs: number;
  gapMs: number;
  chunks: number;
  responseBytes: number;
  status: number | undefined;
}

const DEFAULT_KNOBS: Knobs = {
  latencyMs: 0,
  ttftMs: 0,
  gapMs: 0,
  chunks: 5,
  responseBytes: 64,
  status: undefined,
};

const MAX_RECORDED = 100;
/** Stored Responses API responses kept for GET /v1/responses/{id} (oldest dropped first). */
const MAX_STORED_RESPONSES = 100;

// ---------------------------------------------------------------------------------------------
// Random ids: read from a pooled CSPRNG buffer, so an id costs no crypto call per request.

const ID_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const ID_POOL_SIZE = 4096;
const idPool = Buffer.allocUnsafe(ID_POOL_SIZE);
let idOffset = ID_POOL_SIZE;

function randomId(length: number): string {
  if (idOffset + length > ID_POOL_SIZE) {
    randomFillSync(idPool);
    idOffset = 0;
  }
  let id = '';
  for (let i = 0; i < length; i++) id += ID_ALPHABET.charAt(idPool.readUInt8(idOffset + i) % 62);
  idOffset += length;
  return id;
}

// ---------------------------------------------------------------------------------------------
// Generated content.

// Multibyte words on purpose: consumers' SSE parsers must cope with characters split across
// TCP reads.
const WORDS = ['héllo', 'wörld', '你好', '🙂', 'sightline', 'mock', 'stream', 'café', 'naïve', '日本語', 'tokens', 'Ωmega'];

const TOOL_ARGUMENTS = '{"location":"Paris","unit":"celsius"}';
const TOOL_OUTPUT_TOKENS = Math.ceil(Buffer.byteLength(TOOL_ARGUMENTS) / 4);
const DEFAULT_TOOL_NAME = 'get_weather';

/** Words repeated until the text reaches `bytes`, with at least one word per chunk. */
function buildText(bytes: number, chunks: number): string[] {
  const words: string[] = [];
  let size = 0;
  while (size < bytes || words.length < chunks) {
    const word = WORDS[words.length % WORDS.length] ?? 'mock';
    size += Buffer.byteLength(word) + (words.length > 0 ? 1 : 0);
    words.push(word);
  }
  return words;
}

/** Split `words` into `chunks` pieces whose concatenation is `words.join(' ')`. */
function splitWords(words: string[], chunks: number): string[] {
  const pieces: string[] = [];
  for (let i = 0; i < chunks; i++) {
    const from = Math.floor((i * words.length) / chunks);
    const to = Math.floor(((i + 1) * words.length) / chunks);
    pieces.push((i > 0 ? ' ' : '') + words.slice(from, to).join(' '));
  }
  return pieces;
}

/** Split a string into at most `chunks` non-empty pieces. */
function splitString(text: string, chunks: number): string[] {
  const n = Math.max(1, Math.min(chunks, text.length));
  const pieces: string[] = [];
  for (let i = 0; i < n; i++) {
    pieces.push(text.slice(Math.floor((i * text.length) / n), Math.floor(((i + 1) * text.length) / n)));
  }
  return pieces;
}

// ---------------------------------------------------------------------------------------------
// Error bodies.

function openaiErrorBody(status: number, message: string, param: string | null = null, code?: string | null): string {
  // Mirrors what api.openai.com sends for these statuses.
  let type = 'invalid_request_error';
  let byStatus: string | null = null;
  if (status === 401) byStatus = 'invalid_api_key';
  else if (status === 404) byStatus = 'model_not_found';
  else if (status === 429) {
    type = 'requests';
    byStatus = 'rate_limit_exceeded';
  } else if (status >= 500) type = 'server_error';
  return JSON.stringify({ error: { message, type, param, code: code === undefined ? byStatus : code } });
}

const ANTHROPIC_ERROR_TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  529: 'overloaded_error',
};

function anthropicErrorBody(status: number, message: string): string {
  const type = ANTHROPIC_ERROR_TYPES[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error');
  return JSON.stringify({ type: 'error', error: { type, message } });
}

function errorBody(dialect: Dialect, status: number, message: string): string {
  return dialect === 'openai' ? openaiErrorBody(status, message) : anthropicErrorBody(status, message);
}

// ---------------------------------------------------------------------------------------------
// The plan: everything that depends only on the knobs, rebuilt by configure().

interface Plan extends Knobs {
  completionTokens: number;
  forcedError: { openai: string; anthropic: string } | undefined;
  /** OpenAI JSON `message` object for a text answer. */
  oaTextMessage: string;
  /** OpenAI chunk `choices` arrays (role, content pieces, finish, tool argument pieces). */
  oaRoleChoices: string;
  oaContentChoices: string[];
  oaStopChoices: string;
  oaToolStopChoices: string;
  oaToolArgChoices: string[];
  /** Anthropic JSON `content` array for a text answer. */
  anTextContent: string;
  anTextDeltaEvents: string[];
  anTextTail: string;
  anToolDeltaEvents: string[];
  anToolTail: string;
  /** Responses API: the text and its delta pieces as JSON strings, the tool arguments likewise. */
  rsTextJson: string;
  rsTextPieces: string[];
  rsArgsJson: string;
  rsArgPieces: string[];
}

function sse(event: string, data: string): string {
  return `event: ${event}\ndata: ${data}\n\n`;
}

function anthropicTail(stopReason: string, outputTokens: number): string {
  return (
    sse('content_block_stop', '{"type":"content_block_stop","index":0}') +
    sse(
      'message_delta',
      `{"type":"message_delta","delta":{"stop_reason":"${stopReason}","stop_sequence":null},"usage":{"output_tokens":${outputTokens}}}`,
    ) +
    sse('message_stop', '{"type":"message_stop"}')
  );
}

function choice(delta: string, finishReason: string | null): string {
  return `[{"index":0,"delta":${delta},"logprobs":null,"finish_reason":${finishReason === null ? 'null' : `"${finishReason}"`}}]`;
}

function buildPlan(knobs: Knobs): Plan {
  const words = buildText(knobs.responseBytes, knobs.chunks);
  const text = words.join(' ');
  const pieces = splitWords(words, knobs.chunks);
  const argPieces = splitString(TOOL_ARGUMENTS, knobs.chunks);
  const status = knobs.status;
  return {
    ...knobs,
    completionTokens: words.length,
    forcedError:
      status === undefined
        ? undefined
        : {
            openai: openaiErrorBody(status, `mock: forced status ${status}`),
            anthropic: anthropicErrorBody(status, `mock: forced status ${status}`),
          },
    oaTextMessage: `{"role":"assistant","content":${JSON.stringify(text)},"refusal":null}`,
    oaRoleChoices: choice('{"role":"assistant","content":"","refusal":null}', null),
    oaContentChoices: pieces.map((p) => choice(`{"content":${JSON.stringify(p)}}`, null)),
    oaStopChoices: choice('{}', 'stop'),
    oaToolStopChoices: choice('{}', 'tool_calls'),
    oaToolArgChoices: argPieces.map((p) =>
      choice(`{"tool_calls":[{"index":0,"function":{"arguments":${JSON.stringify(p)}}}]}`, null),
    ),
    anTextContent: `[{"type":"text","text":${JSON.stringify(text)}}]`,
    anTextDeltaEvents: pieces.map((p) =>
      sse(
        'content_block_delta',
        `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":${JSON.stringify(p)}}}`,
      ),
    ),
    anTextTail: anthropicTail('end_turn', words.length),
    anToolDeltaEvents: argPieces.map((p) =>
      sse(
        'content_block_delta',
        `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":${JSON.stringify(p)}}}`,
      ),
    ),
    anToolTail: anthropicTail('tool_use', TOOL_OUTPUT_TOKENS),
    rsTextJson: JSON.stringify(text),
    rsTextPieces: pieces.map((p) => JSON.stringify(p)),
    rsArgsJson: JSON.stringify(TOOL_ARGUMENTS),
    rsArgPieces: argPieces.map((p) => JSON.stringify(p)),
  };
}

// ---------------------------------------------------------------------------------------------
// Option validation.

const NUMBER_KNOBS = ['latencyMs', 'ttftMs', 'gapMs', 'chunks', 'responseBytes'] as const;

function checkCount(name: string, value: unknown, min: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min) {
    throw new RangeError(`mock option ${name} must be an integer >= ${min}, got ${String(value)}`);
  }
  return value;
}

function checkStatus(value: unknown): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 400 || value > 599) {
    throw new RangeError(`mock option status must be an integer in 400-599, got ${String(value)}`);
  }
  return value;
}

/** Applies a partial set of knobs; `status` is only touched when the key is present. */
function knobsOf(plan: Plan): Knobs {
  const { latencyMs, ttftMs, gapMs, chunks, responseBytes, status } = plan;
  return { latencyMs, ttftMs, gapMs, chunks, responseBytes, status };
}

function applyKnobs(base: Knobs, opts: Partial<Record<keyof Knobs, unknown>>): Knobs {
  const next: Knobs = { ...base };
  for (const key of NUMBER_KNOBS) {
    const value = opts[key];
    if (value !== undefined) next[key] = checkCount(key, value, key === 'chunks' ? 1 : 0);
  }
  if ('status' in opts) next.status = checkStatus(opts.status);
  return next;
}

// ---------------------------------------------------------------------------------------------
// Request inspection.

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function textBytes(content: unknown): number {
  if (typeof content === 'string') return Buffer.byteLength(content);
  if (!Array.isArray(content)) return 0;
  let bytes = 0;
  for (const part of content) {
    if (!isRecord(part)) continue;
    const text = part['text'];
    if (typeof text === 'string') bytes += Buffer.byteLength(text);
    else if (part['content'] !== undefined) bytes += textBytes(part['content']);
  }
  return bytes;
}

function promptTokens(messages: unknown[], system: unknown): number {
  let bytes = textBytes(system);
  for (const message of messages) if (isRecord(message)) bytes += textBytes(message['content']);
  return Math.max(1, Math.ceil(bytes / 4));
}

function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  let text = '';
  for (const part of content) {
    if (isRecord(part) && typeof part['text'] === 'string') text += part['text'];
  }
  return text;
}

/**
 * The tool name to call, or undefined when the request should get a text answer. `nested`:
 * the tool's name is in `function` (Chat Completions), else at the top (Messages, Responses).
 */
function toolToCall(body: Record<string, unknown>, messages: unknown[], nested: boolean): string | undefined {
  const tools = body['tools'];
  if (!Array.isArray(tools) || tools.length === 0) return undefined;
  const last: unknown = messages[messages.length - 1];
  if (!isRecord(last) || last['role'] !== 'user') return undefined;
  if (!contentText(last['content']).toLowerCase().includes('use tool')) return undefined;
  const first: unknown = tools[0];
  if (!isRecord(first)) return DEFAULT_TOOL_NAME;
  const holder = nested ? first['function'] : first;
  const name = isRecord(holder) ? holder['name'] : undefined;
  return typeof name === 'string' ? name : DEFAULT_TOOL_NAME;
}

// ---------------------------------------------------------------------------------------------
// Response writing.

const SSE_HEADERS = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' };

/** Per-request state: the abort flag and the one pending timer. */
interface Exchange {
  res: ServerResponse;
  plan: Plan;
  closed: boolean;
  timer: NodeJS.Timeout | undefined;
}

function later(ex: Exchange, ms: number, fn: () => void): void {
  if (ms <= 0) {
    fn();
    return;
  }
  ex.timer = setTimeout(() => {
    ex.timer = undefined;
    if (!ex.closed) fn();
  }, ms);
}

function sendJson(res: ServerResponse, status: number, body: string, extra?: Record<string, string>): void {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...extra });
  res.end(body);
}

/** Headers the real APIs send with a 429, so clients and gateways can be tested on them. */
const RATE_LIMITED_HEADERS: Record<string, string> = {
  'retry-after': '1',
  'x-ratelimit-limit-requests': '60',
  'x-ratelimit-remaining-requests': '0',
  'x-ratelimit-reset-requests': '1s',
};

/**
 * A forced or injected error as the provider would send it: a 429 with its rate-limit
 * headers; a 401 whose message echoes the key that was sent, as api.openai.com does (it
 * masks the middle; the mock does not, so a gateway's scrubbing is tested on the worst case).
 */
function sendError(req: IncomingMessage, res: ServerResponse, dialect: Dialect, status: number, body: string): void {
  if (status === 401) {
    const auth = req.headers.authorization ?? req.headers['x-api-key'] ?? '';
    const key = (Array.isArray(auth) ? auth[0] ?? '' : auth).replace(/^Bearer\s+/i, '');
    sendJson(res, status, errorBody(dialect, 401, `Incorrect API key provided: ${key}.`));
    return;
  }
  sendJson(res, status, body, status === 429 ? RATE_LIMITED_HEADERS : undefined);
}

/** head goes out with the headers; each part is one timed content event; tail follows the last. */
interface StreamScript {
  head: string;
  parts: string[];
  tail: string;
}

function sendStream(ex: Exchange, script: StreamScript): void {
  const { res, plan } = ex;
  const { head, parts, tail } = script;
  res.writeHead(200, SSE_HEADERS);
  if ((plan.ttftMs === 0 && plan.gapMs === 0) || parts.length === 0) {
    // Fast path: one write, still separate SSE events.
    res.end(head + parts.join('') + tail);
    return;
  }
  res.write(head);
  let i = 0;
  const step = (): void => {
    // Loop rather than recurse when gapMs is 0 (ttft-only configs with many chunks).
    for (;;) {
      res.write(parts[i] ?? '');
      i++;
      if (i >= parts.length) {
        res.end(tail);
        return;
      }
      if (plan.gapMs > 0) break;
    }
    later(ex, plan.gapMs, step);
  };
  later(ex, plan.ttftMs, step);
}

interface ParsedRequest {
  model: string;
  modelJson: string;
  messages: unknown[];
  body: Record<string, unknown>;
}

function respondOpenAI(ex: Exchange, req: ParsedRequest, stats: { streams: number }): void {
  const { plan } = ex;
  const { body, modelJson } = req;
  const id = randomId(29);
  const created = Math.floor(Date.now() / 1000);
  const prompt = promptTokens(req.messages, undefined);
  const tool = toolToCall(body, req.messages, true);
  const completion = tool === undefined ? plan.completionTokens : TOOL_OUTPUT_TOKENS;
  const usage = `{"prompt_tokens":${prompt},"completion_tokens":${completion},"total_tokens":${prompt + completion}}`;

  if (body['stream'] !== true) {
    const message =
      tool === undefined
        ? plan.oaTextMessage
        : `{"role":"assistant","content":null,"tool_calls":[{"id":"call_${randomId(24)}","type":"function","function":{"name":${JSON.stringify(tool)},"arguments":${JSON.stringify(TOOL_ARGUMENTS)}}}],"refusal":null}`;
    const finish = tool === undefined ? 'stop' : 'tool_calls';
    sendJson(
      ex.res,
      200,
      `{"id":"chatcmpl-${id}","object":"chat.completion","created":${created},"model":${modelJson},"choices":[{"index":0,"message":${message},"logprobs":null,"finish_reason":"${finish}"}],"usage":${usage},"system_fingerprint":null}`,
    );
    return;
  }

  stats.streams++;
  const options = body['stream_options'];
  const includeUsage = isRecord(options) && options['include_usage'] === true;
  const prefix = `data: {"id":"chatcmpl-${id}","object":"chat.completion.chunk","created":${created},"model":${modelJson},"system_fingerprint":null,"choices":`;
  const end = includeUsage ? ',"usage":null}\n\n' : '}\n\n';
  const event = (choices: string): string => prefix + choices + end;
  let parts: string[];
  let stop: string;
  if (tool === undefined) {
    parts = plan.oaContentChoices.map(event);
    stop = plan.oaStopChoices;
  } else {
    const header = choice(
      `{"tool_calls":[{"index":0,"id":"call_${randomId(24)}","type":"function","function":{"name":${JSON.stringify(tool)},"arguments":""}}]}`,
      null,
    );
    parts = [event(header), ...plan.oaToolArgChoices.map(event)];
    stop = plan.oaToolStopChoices;
  }
  let tail = event(stop);
  if (includeUsage) tail += `${prefix}[],"usage":${usage}}\n\n`;
  tail += 'data: [DONE]\n\n';
  sendStream(ex, { head: event(plan.oaRoleChoices), parts, tail });
}

function respondAnthropic(ex: Exchange, req: ParsedRequest, stats: { streams: number }): void {
  const { plan } = ex;
  const { body, modelJson } = req;
  const id = `msg_${randomId(24)}`;
  const input = promptTokens(req.messages, body['system']);
  const tool = toolToCall(body, req.messages, false);
  const toolId = tool === undefined ? '' : `toolu_${randomId(24)}`;
  const toolName = tool === undefined ? '' : JSON.stringify(tool);

  if (body['stream'] !== true) {
    const content =
      tool === undefined
        ? plan.anTextContent
        : `[{"type":"tool_use","id":"${toolId}","name":${toolName},"input":${TOOL_ARGUMENTS}}]`;
    const output = tool === undefined ? plan.completionTokens : TOOL_OUTPUT_TOKENS;
    sendJson(
      ex.res,
      200,
      `{"id":"${id}","type":"message","role":"assistant","model":${modelJson},"content":${content},"stop_reason":"${tool === undefined ? 'end_turn' : 'tool_use'}","stop_sequence":null,"usage":{"input_tokens":${input},"output_tokens":${output},"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}`,
    );
    return;
  }

  stats.streams++;
  const block = tool === undefined ? '{"type":"text","text":""}' : `{"type":"tool_use","id":"${toolId}","name":${toolName},"input":{}}`;
  const head =
    sse(
      'message_start',
      `{"type":"message_start","message":{"id":"${id}","type":"message","role":"assistant","model":${modelJson},"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":${input},"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}`,
    ) +
    sse('content_block_start', `{"type":"content_block_start","index":0,"content_block":${block}}`) +
    sse('ping', '{"type":"ping"}');
  sendStream(ex, {
    head,
    parts: tool === undefined ? plan.anTextDeltaEvents : plan.anToolDeltaEvents,
    tail: tool === undefined ? plan.anTextTail : plan.anToolTail,
  });
}

// ---------------------------------------------------------------------------------------------
// OpenAI Responses API.

/** What a Responses request needs besides the plan; the stored-responses map is the mock's. */
interface ResponsesContext {
  stats: { streams: number };
  stored: Map<string, string>;
}

function responsesInputTokens(body: Record<string, unknown>): number {
  let bytes = textBytes(body['instructions']);
  const input = body['input'];
  if (typeof input === 'string') bytes += Buffer.byteLength(input);
  else if (Array.isArray(input)) {
    for (const item of input) {
      if (!isRecord(item)) continue;
      bytes += textBytes(item['content']) + textBytes(item['output']);
    }
  }
  return Math.max(1, Math.ceil(bytes / 4));
}

/** The request's settings as the response object repeats them, in OpenAI's field order, around `output`. */
function responseEnvelope(id: string, created: number, body: Record<string, unknown>, modelJson: string): { head: string; mid: string; tail: string } {
  const echo = (key: string, fallback: JsonValue): string => JSON.stringify((body[key] as JsonValue | undefined) ?? fallback);
  const reasoning = isRecord(body['reasoning']) ? body['reasoning'] : {};
  const text = isRecord(body['text']) ? { format: { type: 'text' }, ...body['text'] } : { format: { type: 'text' } };
  const head = `{"id":"${id}","object":"response","created_at":${created},"status":`;
  const mid =
    `,"background":false,"error":null,"incomplete_details":null,"instructions":${echo('instructions', null)},` +
    `"max_output_tokens":${echo('max_output_tokens', null)},"model":${modelJson},"output":`;
  const tail =
    `,"parallel_tool_calls":${body['parallel_tool_calls'] === false ? 'false' : 'true'},"previous_response_id":${echo('previous_response_id', null)},` +
    `"reasoning":{"effort":${JSON.stringify((reasoning['effort'] as JsonValue | undefined) ?? null)},"summary":null},"store":${body['store'] === false ? 'false' : 'true'},` +
    `"temperature":${echo('temperature', 1)},"text":${JSON.stringify(text)},"tool_choice":${echo('tool_choice', 'auto')},"tools":${echo('tools', [])},` +
    `"top_p":${echo('top_p', 1)},"truncation":${echo('truncation', 'disabled')},"usage":`;
  return { head, mid, tail };
}

function respondResponses(ex: Exchange, body: Record<string, unknown>, modelJson: string, ctx: ResponsesContext): void {
  const { plan } = ex;
  const id = `resp_${randomId(32)}`;
  const created = Math.floor(Date.now() / 1000);
  const input = body['input'];
  const messages: unknown[] = typeof input === 'string' ? [{ role: 'user', content: input }] : Array.isArray(input) ? input : [];
  const tool = toolToCall(body, messages, false);
  const prompt = responsesInputTokens(body);
  const completion = tool === undefined ? plan.completionTokens : TOOL_OUTPUT_TOKENS;
  const usage = `{"input_tokens":${prompt},"input_tokens_details":{"cached_tokens":0,"cache_write_tokens":0},"output_tokens":${completion},"output_tokens_details":{"reasoning_tokens":0},"total_tokens":${prompt + completion}}`;
  const env = responseEnvelope(id, created, body, modelJson);
  const userJson = typeof body['user'] === 'string' ? JSON.stringify(body['user']) : 'null';
  const metadataJson = isRecord(body['metadata']) ? JSON.stringify(body['metadata']) : '{}';
  const response = (status: string, output: string, usageJson: string): string =>
    `${env.head}"${status}"${env.mid}${output}${env.tail}${usageJson},"user":${userJson},"metadata":${metadataJson}}`;

  const itemId = tool === undefined ? `msg_${randomId(32)}` : `fc_${randomId(32)}`;
  const callId = `call_${randomId(24)}`;
  const toolJson = tool === undefined ? '' : JSON.stringify(tool);
  const item = (status: string, content: string): string =>
    tool === undefined
      ? `{"id":"${itemId}","type":"message","status":"${status}","content":${content},"role":"assistant"}`
      : `{"id":"${itemId}","type":"function_call","status":"${status}","arguments":${content},"call_id":"${callId}","name":${toolJson}}`;
  const textPart = (textJson: string): string => `{"type":"output_text","annotations":[],"logprobs":[],"text":${textJson}}`;
  const finalItem = tool === undefined ? item('completed', `[${textPart(plan.rsTextJson)}]`) : item('completed', plan.rsArgsJson);
  const final = response('completed', `[${finalItem}]`, usage);
  if (body['store'] !== false) {
    if (ctx.stored.size >= MAX_STORED_RESPONSES) {
      const oldest = ctx.stored.keys().next();
      if (oldest.done !== true) ctx.stored.delete(oldest.value);
    }
    ctx.stored.set(id, final);
  }

  if (body['stream'] !== true) {
    sendJson(ex.res, 200, final);
    return;
  }

  ctx.stats.streams++;
  let seq = 0;
  const event = (type: string, fields: string): string => `event: ${type}\ndata: {"type":"${type}","sequence_number":${seq++},${fields}}\n\n`;
  const itemRef = `"item_id":"${itemId}","output_index":0`;
  const inProgress = response('in_progress', '[]', 'null');
  let head = event('response.created', `"response":${inProgress}`) + event('response.in_progress', `"response":${inProgress}`);
  let parts: string[];
  let tail: string;
  if (tool === undefined) {
    head +=
      event('response.output_item.added', `"output_index":0,"item":${item('in_progress', '[]')}`) +
      event('response.content_part.added', `${itemRef},"content_index":0,"part":${textPart('""')}`);
    parts = plan.rsTextPieces.map((p) => event('response.output_text.delta', `${itemRef},"content_index":0,"delta":${p},"logprobs":[]`));
    tail =
      event('response.output_text.done', `${itemRef},"content_index":0,"text":${plan.rsTextJson},"logprobs":[]`) +
      event('response.content_part.done', `${itemRef},"content_index":0,"part":${textPart(plan.rsTextJson)}`);
  } else {
    head += event('response.output_item.added', `"output_index":0,"item":${item('in_progress', '""')}`);
    parts = plan.rsArgPieces.map((p) => event('response.function_call_arguments.delta', `${itemRef},"delta":${p}`));
    tail = event('response.function_call_arguments.done', `${itemRef},"arguments":${plan.rsArgsJson}`);
  }
  tail += event('response.output_item.done', `"output_index":0,"item":${finalItem}`) + event('response.completed', `"response":${final}`);
  sendStream(ex, { head, parts, tail });
}

/** Validates a Responses request; returns an error (message and param) or null. */
function checkResponsesRequest(body: Record<string, unknown>, stored: Map<string, string>): { message: string; param: string | null } | null {
  const model = body['model'];
  if (typeof model !== 'string' || model === '') return { message: "Missing required parameter: 'model'.", param: 'model' };
  const input = body['input'];
  if (typeof input !== 'string' && !Array.isArray(input)) return { message: "Missing required parameter: 'input'.", param: 'input' };
  const previous = body['previous_response_id'];
  if (previous !== undefined && previous !== null && (typeof previous !== 'string' || !stored.has(previous))) {
    return { message: `Previous response with id '${String(previous)}' not found.`, param: 'previous_response_id' };
  }
  return null;
}

// ---------------------------------------------------------------------------------------------
// Embeddings.

/** Default vector length: that of text-embedding-3-small. */
const DEFAULT_DIMENSIONS = 1536;
const MAX_DIMENSIONS = 3072;

type EmbeddingInput = string | number[];

/** The request's inputs, or an error message for a shape OpenAI refuses. */
function embeddingInputs(input: unknown): EmbeddingInput[] | string {
  const bad = "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference.";
  const isTokens = (v: unknown): v is number[] => Array.isArray(v) && v.length > 0 && v.every((t) => typeof t === 'number' && Number.isInteger(t) && t >= 0);
  if (typeof input === 'string') return input === '' ? bad : [input];
  if (!Array.isArray(input) || input.length === 0) return bad;
  if (isTokens(input)) return [input];
  const out: EmbeddingInput[] = [];
  for (const item of input) {
    if (typeof item === 'string' && item !== '') out.push(item);
    else if (isTokens(item)) out.push(item);
    else return bad;
  }
  return out;
}

function embeddingTokens(input: EmbeddingInput): number {
  return typeof input === 'string' ? Math.max(1, Math.ceil(Buffer.byteLength(input) / 4)) : input.length;
}

/**
 * A deterministic unit vector for `input` (xorshift32 seeded by FNV-1a of the input), every
 * component a float32 value, so the float and base64 encodings carry the same numbers.
 */
function embeddingVector(input: EmbeddingInput, dimensions: number): Float32Array {
  let h = 0x811c9dc5;
  const key = typeof input === 'string' ? input : input.join(',');
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193) >>> 0;
  let x = h === 0 ? 1 : h;
  const v = new Float32Array(dimensions);
  let norm = 0;
  for (let i = 0; i < dimensions; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    const c = x / 0x80000000 - 1;
    v[i] = c;
    norm += c * c;
  }
  const scale = 1 / Math.sqrt(norm);
  for (let i = 0; i < dimensions; i++) v[i] = (v[i] ?? 0) * scale;
  return v;
}

function respondEmbeddings(ex: Exchange, body: Record<string, unknown>): void {
  const model = body['model'];
  if (typeof model !== 'string' || model === '') {
    sendJson(ex.res, 400, openaiErrorBody(400, 'you must provide a model parameter', 'model'));
    return;
  }
  const inputs = embeddingInputs(body['input']);
  if (typeof inputs === 'string') {
    sendJson(ex.res, 400, openaiErrorBody(400, inputs, 'input'));
    return;
  }
  const format = body['encoding_format'] ?? 'float';
  if (format !== 'float' && format !== 'base64') {
    sendJson(ex.res, 400, openaiErrorBody(400, `Invalid value for 'encoding_format': '${String(format)}'. Supported values are: 'float' and 'base64'.`, 'encoding_format'));
    return;
  }
  const dims = body['dimensions'] ?? DEFAULT_DIMENSIONS;
  if (typeof dims !== 'number' || !Number.isInteger(dims) || dims < 1 || dims > MAX_DIMENSIONS) {
    sendJson(ex.res, 400, openaiErrorBody(400, `Invalid 'dimensions': must be an integer between 1 and ${MAX_DIMENSIONS}.`, 'dimensions'));
    return;
  }
  let tokens = 0;
  const data: string[] = [];
  inputs.forEach((input, index) => {
    tokens += embeddingTokens(input);
    const v = embeddingVector(input, dims);
    let embedding: string;
    if (format === 'base64') {
      // Little-endian float32, as OpenAI encodes it.
      const bytes = Buffer.allocUnsafe(v.length * 4);
      for (let i = 0; i < v.length; i++) bytes.writeFloatLE(v[i] ?? 0, i * 4);
      embedding = `"${bytes.toString('base64')}"`;
    } else embedding = `[${v.join(',')}]`;
    data.push(`{"object":"embedding","index":${index},"embedding":${embedding}}`);
  });
  sendJson(ex.res, 200, `{"object":"list","data":[${data.join(',')}],"model":${JSON.stringify(model)},"usage":{"prompt_tokens":${tokens},"total_tokens":${tokens}}}`);
}

// ---------------------------------------------------------------------------------------------
// Models.

/** The OpenAI catalogue (`GET /v1/models` without anthropic-version). */
const OPENAI_MODELS = [
  { id: 'gpt-4o', object: 'model', created: 1715367049, owned_by: 'system' },
  { id: 'gpt-4o-mini', object: 'model', created: 1721172741, owned_by: 'system' },
  { id: 'gpt-4.1', object: 'model', created: 1744316542, owned_by: 'system' },
  { id: 'o4-mini', object: 'model', created: 1744225351, owned_by: 'system' },
  { id: 'text-embedding-3-small', object: 'model', created: 1705948997, owned_by: 'system' },
  { id: 'text-embedding-3-large', object: 'model', created: 1705953180, owned_by: 'system' },
  { id: 'gpt-test', object: 'model', created: 1700000000, owned_by: 'mock' },
];

/** The Anthropic catalogue (`GET /v1/models` with anthropic-version), newest first as Anthropic lists it. */
const ANTHROPIC_MODELS = [
  { type: 'model', id: 'claude-haiku-4-5', display_name: 'Claude Haiku 4.5', created_at: '2025-10-15T00:00:00Z' },
  { type: 'model', id: 'claude-sonnet-4-5', display_name: 'Claude Sonnet 4.5', created_at: '2025-09-29T00:00:00Z' },
  { type: 'model', id: 'claude-opus-4-1', display_name: 'Claude Opus 4.1', created_at: '2025-08-05T00:00:00Z' },
  { type: 'model', id: 'claude-test', display_name: 'Claude Test (mock)', created_at: '2024-01-01T00:00:00Z' },
];

const OPENAI_MODEL_LIST = JSON.stringify({ object: 'list', data: OPENAI_MODELS });
const ANTHROPIC_MODEL_LIST = JSON.stringify({
  data: ANTHROPIC_MODELS,
  has_more: false,
  first_id: ANTHROPIC_MODELS[0]?.id ?? null,
  last_id: ANTHROPIC_MODELS[ANTHROPIC_MODELS.length - 1]?.id ?? null,
});

function respondModels(ex: Exchange, dialect: Dialect, id: string | undefined): void {
  if (id === undefined) {
    sendJson(ex.res, 200, dialect === 'openai' ? OPENAI_MODEL_LIST : ANTHROPIC_MODEL_LIST);
    return;
  }
  const model = dialect === 'openai' ? OPENAI_MODELS.find((m) => m.id === id) : ANTHROPIC_MODELS.find((m) => m.id === id);
  if (model !== undefined) sendJson(ex.res, 200, JSON.stringify(model));
  else if (dialect === 'openai') sendJson(ex.res, 404, openaiErrorBody(404, `The model '${id}' does not exist or you do not have access to it.`, 'model'));
  else sendJson(ex.res, 404, anthropicErrorBody(404, `model: ${id}`));
}

/**
 * Validates the dialect's required fields; returns an error message or the parsed request.
 * `maxTokens`: whether an Anthropic body must have max_tokens (count_tokens does not).
 */
function parseProviderRequest(dialect: Dialect, parsed: unknown, ok: boolean, maxTokens = true): ParsedRequest | string {
  if (!ok || !isRecord(parsed)) {
    return dialect === 'openai'
      ? 'We could not parse the JSON body of your request. The body must be a JSON object.'
      : 'Request body must be a valid JSON object';
  }
  const model = parsed['model'];
  const messages = parsed['messages'];
  if (typeof model !== 'string' || model === '') {
    return dialect === 'openai' ? 'you must provide a model parameter' : 'model: Field required';
  }
  if (!Array.isArray(messages)) {
    return dialect === 'openai' ? "Missing required parameter: 'messages'." : 'messages: Field required';
  }
  if (dialect === 'anthropic' && maxTokens && typeof parsed['max_tokens'] !== 'number') {
    return 'max_tokens: Field required';
  }
  return { model, modelJson: JSON.stringify(model), messages, body: parsed };
}

// ---------------------------------------------------------------------------------------------
// Server.

const PROVIDER_ROUTES: Record<string, Endpoint> = {
  '/v1/chat/completions': 'chat',
  '/chat/completions': 'chat',
  '/v1/messages': 'messages',
  '/messages': 'messages',
  '/v1/messages/count_tokens': 'count_tokens',
  '/messages/count_tokens': 'count_tokens',
  '/v1/responses': 'responses',
  '/responses': 'responses',
  '/v1/embeddings': 'embeddings',
  '/embeddings': 'embeddings',
  '/v1/models': 'models',
  '/models': 'models',
};

/** Paths ending in an id: `<prefix><id>`. */
const ID_ROUTES: ReadonlyArray<readonly [string, Endpoint]> = [
  ['/v1/responses/', 'response'],
  ['/responses/', 'response'],
  ['/v1/models/', 'model'],
  ['/models/', 'model'],
];

const METHODS: Record<Endpoint, readonly string[]> = {
  chat: ['POST'],
  messages: ['POST'],
  count_tokens: ['POST'],
  responses: ['POST'],
  response: ['GET', 'DELETE'],
  embeddings: ['POST'],
  models: ['GET'],
  model: ['GET'],
};

const ENDPOINT_COUNTERS: Partial<Record<Endpoint, 'responses' | 'embeddings' | 'models' | 'countTokens'>> = {
  responses: 'responses',
  response: 'responses',
  embeddings: 'embeddings',
  models: 'models',
  model: 'models',
  count_tokens: 'countTokens',
};

function routeOf(path: string): Route | undefined {
  const endpoint = PROVIDER_ROUTES[path];
  if (endpoint !== undefined) return { endpoint, id: '' };
  for (const [prefix, idEndpoint] of ID_ROUTES) {
    if (path.length > prefix.length && path.startsWith(prefix)) {
      try {
        return { endpoint: idEndpoint, id: decodeURIComponent(path.slice(prefix.length)) };
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}

/** The API a request speaks: model lookup answers in Anthropic's shape when the client sent anthropic-version. */
function dialectOf(endpoint: Endpoint, headers: IncomingHttpHeaders): Dialect {
  switch (endpoint) {
    case 'messages':
    case 'count_tokens':
      return 'anthropic';
    case 'models':
    case 'model':
      return headers['anthropic-version'] !== undefined ? 'anthropic' : 'openai';
    default:
      return 'openai';
  }
}

const OPENAI_PARSE_ERROR = 'We could not parse the JSON body of your request. The body must be a JSON object.';

function readBody(req: IncomingMessage, done: (raw: string) => void): void {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => done(chunks.length === 1 ? (chunks[0] ?? Buffer.alloc(0)).toString() : Buffer.concat(chunks).toString()));
  // A client that disconnects mid-body is accounted for by the response 'close' handler.
  req.on('error', () => undefined);
}

function parseJson(raw: string): { ok: true; value: JsonValue } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(raw) as JsonValue };
  } catch {
    return { ok: false };
  }
}

function formatUrl(host: string, port: number): string {
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

export async function startMock(opts: MockOptions = {}): Promise<MockServer> {
  const host = opts.host ?? '127.0.0.1';
  const requestedPort = checkCount('port', opts.port ?? 0, 0);
  let plan = buildPlan(applyKnobs(DEFAULT_KNOBS, opts));

  const counters = { requests: 0, openai: 0, anthropic: 0, responses: 0, embeddings: 0, models: 0, countTokens: 0, streams: 0, aborted: 0, completed: 0 };
  /** Responses API responses created with `store` not false, by id (JSON text), oldest first. */
  const stored = new Map<string, string>();
  // inFlight is a live gauge, not reset by reset(): responses open across a reset still end.
  let inFlight = 0;
  // Responses that began before a reset() do not count into the fresh counters.
  let generation = 0;
  const recorded: RecordedRequest[] = [];
  let actualPort = requestedPort;

  const record = (req: IncomingMessage, body: JsonValue): void => {
    if (recorded.length >= MAX_RECORDED) recorded.shift();
    recorded.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers, body });
  };

  const stats = (): MockStats => ({ ...counters, inFlight });

  const reset = (): void => {
    generation++;
    counters.requests = 0;
    counters.openai = 0;
    counters.anthropic = 0;
    counters.responses = 0;
    counters.embeddings = 0;
    counters.models = 0;
    counters.countTokens = 0;
    counters.streams = 0;
    counters.aborted = 0;
    counters.completed = 0;
    recorded.length = 0;
  };

  let failQueue = 0;
  let failStatus = 500;
  const failNext = (count: number, status: number): void => {
    checkStatus(status);
    failQueue = count;
    failStatus = status;
  };

  let faultQueue = 0;
  let fault: MockFault | null = null;
  const misbehaveNext = (count: number, next: MockFault): void => {
    faultQueue = count;
    fault = next;
  };

  const configure = (next: Partial<MockOptions>): void => {
    if (next.host !== undefined && next.host !== host) throw new Error('mock: host cannot be changed at runtime');
    if (next.port !== undefined && next.port !== requestedPort && next.port !== actualPort) {
      throw new Error('mock: port cannot be changed at runtime');
    }
    plan = buildPlan(applyKnobs(knobsOf(plan), next));
  };

  const currentOptions = (): MockOptions => ({
    host,
    port: actualPort,
    latencyMs: plan.latencyMs,
    ttftMs: plan.ttftMs,
    gapMs: plan.gapMs,
    chunks: plan.chunks,
    responseBytes: plan.responseBytes,
    status: plan.status,
  });

  const handleProvider = (req: IncomingMessage, res: ServerResponse, route: Route): void => {
    const dialect = dialectOf(route.endpoint, req.headers);
    counters.requests++;
    counters[dialect]++;
    const counter = ENDPOINT_COUNTERS[route.endpoint];
    if (counter !== undefined) counters[counter]++;
    inFlight++;
    const gen = generation;
    const ex: Exchange = { res, plan, closed: false, timer: undefined };
    res.on('close', () => {
      ex.closed = true;
      if (ex.timer !== undefined) clearTimeout(ex.timer);
      inFlight--;
      if (gen !== generation) return;
      if (res.writableFinished) counters.completed++;
      else counters.aborted++;
    });

    readBody(req, (raw) => {
      if (ex.closed) return;
      const parsed = parseJson(raw);
      record(req, parsed.ok ? parsed.value : raw);
      const { forcedError, status } = ex.plan;
      if (faultQueue > 0 && fault !== null) {
        faultQueue--;
        sendFault(res, fault);
        return;
      }
      if (failQueue > 0) {
        failQueue--;
        const injected = failStatus;
        later(ex, ex.plan.latencyMs, () => sendError(req, res, dialect, injected, errorBody(dialect, injected, `mock: injected failure ${injected}`)));
        return;
      }
      later(ex, ex.plan.latencyMs, () => {
        if (forcedError !== undefined && status !== undefined) {
          sendError(req, res, dialect, status, forcedError[dialect]);
          return;
        }
        const methods = METHODS[route.endpoint];
        if (!methods.includes(req.method ?? '')) {
          sendJson(res, 405, errorBody(dialect, 405, `Method ${req.method ?? ''} not allowed; use ${methods.join(' or ')}`));
          return;
        }
        respond(ex, route, dialect, parsed.ok ? parsed.value : undefined, parsed.ok, req.method ?? '');
      });
    });
  };

  const respond = (ex: Exchange, route: Route, dialect: Dialect, value: JsonValue | undefined, ok: boolean, method: string): void => {
    const { res } = ex;
    switch (route.endpoint) {
      case 'chat':
      case 'messages':
      case 'count_tokens': {
        const request = parseProviderRequest(dialect, value, ok, route.endpoint !== 'count_tokens');
        if (typeof request === 'string') sendJson(res, 400, errorBody(dialect, 400, request));
        else if (route.endpoint === 'chat') respondOpenAI(ex, request, counters);
        else if (route.endpoint === 'messages') respondAnthropic(ex, request, counters);
        else sendJson(res, 200, `{"input_tokens":${promptTokens(request.messages, request.body['system'])}}`);
        return;
      }
      case 'responses': {
        if (!ok || !isRecord(value)) {
          sendJson(res, 400, openaiErrorBody(400, OPENAI_PARSE_ERROR, null, null));
          return;
        }
        const problem = checkResponsesRequest(value, stored);
        if (problem !== null) sendJson(res, 400, openaiErrorBody(400, problem.message, problem.param, null));
        else respondResponses(ex, value, JSON.stringify(value['model']), { stats: counters, stored });
        return;
      }
      case 'response': {
        const body = stored.get(route.id);
        if (body === undefined) sendJson(res, 404, openaiErrorBody(404, `Response with id '${route.id}' not found.`, null, null));
        else if (method === 'GET') sendJson(res, 200, body);
        else {
          stored.delete(route.id);
          sendJson(res, 200, JSON.stringify({ id: route.id, object: 'response', deleted: true }));
        }
        return;
      }
      case 'embeddings':
        if (!ok || !isRecord(value)) sendJson(res, 400, openaiErrorBody(400, OPENAI_PARSE_ERROR, null, null));
        else respondEmbeddings(ex, value);
        return;
      case 'models':
      case 'model':
        respondModels(ex, dialect, route.endpoint === 'model' ? route.id : undefined);
        return;
    }
  };

  const handleAdmin = (req: IncomingMessage, res: ServerResponse, path: string): boolean => {
    const method = req.method ?? '';
    const expect = (wanted: string): boolean => {
      if (method === wanted) return true;
      req.resume();
      sendJson(res, 405, JSON.stringify({ error: { message: `use ${wanted} for ${path}` } }));
      return false;
    };
    switch (path) {
      case '/healthz':
        if (expect('GET')) {
          req.resume();
          sendJson(res, 200, '{"ok":true}');
        }
        return true;
      case '/_mock/stats':
        if (expect('GET')) {
          req.resume();
          sendJson(res, 200, JSON.stringify(stats()));
        }
        return true;
      case '/_mock/requests':
        if (expect('GET')) {
          req.resume();
          sendJson(res, 200, JSON.stringify(recorded));
        }
        return true;
      case '/_mock/reset':
        if (expect('POST')) {
          req.resume();
          reset();
          sendJson(res, 200, '{"ok":true}');
        }
        return true;
      case '/_mock/config':
        if (expect('POST')) {
          readBody(req, (raw) => {
            const parsed = parseJson(raw);
            try {
              if (!parsed.ok || !isRecord(parsed.value)) throw new Error('body must be a JSON object of mock options');
              const body = parsed.value;
              for (const key of Object.keys(body)) {
                if (key !== 'status' && !(NUMBER_KNOBS as readonly string[]).includes(key)) {
                  throw new Error(`unknown or read-only mock option: ${key}`);
                }
              }
              plan = buildPlan(applyKnobs(knobsOf(plan), body));
            } catch (err) {
              sendJson(res, 400, JSON.stringify({ error: { message: err instanceof Error ? err.message : String(err) } }));
              return;
            }
            sendJson(res, 200, JSON.stringify({ ok: true, options: currentOptions() }));
          });
        }
        return true;
      default:
        return false;
    }
  };

  const server: Server = createServer((req, res) => {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    const route = routeOf(path);
    if (route !== undefined) {
      handleProvider(req, res, route);
      return;
    }
    if (handleAdmin(req, res, path)) return;
    readBody(req, (raw) => {
      const parsed = parseJson(raw);
      record(req, parsed.ok ? parsed.value : raw);
      sendJson(res, 404, JSON.stringify({ error: { message: `no route for ${req.method ?? ''} ${path}`, type: 'not_found' } }));
    });
  });
  // Longer than typical client pools' idle timeouts so the mock is never the side that drops
  // a keep-alive connection mid-benchmark; headersTimeout must exceed keepAliveTimeout.
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(requestedPort, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('mock: unexpected server address');
  actualPort = address.port;

  let closing: Promise<void> | undefined;
  return {
    url: formatUrl(host, actualPort),
    port: actualPort,
    stats,
    reset,
    configure,
    failNext,
    misbehaveNext,
    lastRequests: () => recorded.slice(),
    close: () => {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closing;
    },
  };
}
