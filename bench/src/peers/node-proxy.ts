/**
 * The `node-proxy` arm: the least a Node.js proxy can do, so its added latency is the floor of
 * one Node hop. A node:http server forwards method, path, headers and body to one upstream
 * with undici and relays the response (status, headers, body chunks) as it arrives: no
 * parsing, no routing, no capture.
 *
 *   node --import tsx bench/src/peers/node-proxy.ts --port 9000 --upstream http://127.0.0.1:8090 [--client free-list|pool] [--read-body]
 *
 * `--read-body` (measurement aid, not a bench arm): the proxy first reads the whole body and
 * parses it as JSON for its `model`, as any hop that routes by model must, and forwards the bytes
 * it read; a body that is not a JSON object with a string `model` gets a 400. It is the floor of
 * a routing hop, against which a gateway's own work can be told from the wait for the body
 * (docs/benchmarks.md, "What the serving thread's time is made of").
 *
 * Upstream connections (--client):
 * - `free-list` (default): one undici Client (one socket) per connection, idle ones kept in a
 *   stack, so taking a connection is O(1) however many are busy.
 * - `pool`: one undici Pool. Pool.dispatch looks for a free client by walking its whole client
 *   list (undici lib/dispatcher/pool.js kGetDispatcher), so with thousands of requests in
 *   flight every request pays a walk over thousands of busy clients. Measured here: at 3,500
 *   req/s against a 1,500 ms mock (5,250 in flight) this proxy answered 23,227 of 35,000
 *   requests in time with `pool` and all of them with `free-list`; at 5,000 req/s, 24,158 of
 *   50,000 against 50,000. A floor must not have that ceiling, hence the default.
 *
 * Prints `node-proxy listening on URL` once ready; stops on SIGTERM/SIGINT. Loopback only.
 */
import { createServer } from 'node:http';
import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { parseArgs } from 'node:util';
import { Client, Pool } from 'undici';
import type { Dispatcher } from 'undici';

/** Hop-by-hop headers (RFC 9110 §7.6.1) are the connection's, not the message's: never forwarded. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'host']);

function forwardable(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(headers)) {
    if (v !== undefined && !HOP_BY_HOP.has(k)) out[k] = v;
  }
  return out;
}

/** Relays one upstream response to the client as undici delivers it. */
class Relay implements Dispatcher.DispatchHandler {
  private started = false;
  private finished = false;

  constructor(
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    /** Called once when the upstream exchange is over: its connection is free again. */
    private readonly done: () => void,
  ) {}

  private finish(): void {
    if (this.finished) return;
    this.finished = true;
    this.done();
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    // The client went away: stop the upstream exchange too.
    this.res.once('close', () => {
      if (!this.res.writableFinished) controller.abort(new Error('client closed'));
    });
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    this.started = true;
    this.res.writeHead(statusCode, forwardable(headers) as OutgoingHttpHeaders);
    // Client backpressure pauses the upstream read, as a real proxy must.
    this.res.on('drain', () => controller.resume());
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (!this.res.write(chunk)) controller.pause();
  }

  onResponseEnd(): void {
    this.finish();
    this.res.end();
  }

  onResponseError(_c: Dispatcher.DispatchController, err: Error): void {
    this.finish();
    if (this.started || this.res.headersSent) {
      this.res.destroy(err);
      return;
    }
    this.req.resume();
    const body = JSON.stringify({ error: { message: `node-proxy: upstream failed: ${err.message}`, type: 'proxy_error' } });
    this.res.writeHead(502, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    this.res.end(body);
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { port: { type: 'string' }, upstream: { type: 'string' }, connections: { type: 'string' }, client: { type: 'string' }, 'read-body': { type: 'boolean' } },
    strict: true,
  });
  const port = Number(values.port ?? '0');
  const upstream = values.upstream;
  if (upstream === undefined || !/^http:\/\/127\.0\.0\.1:\d+$/.test(upstream)) {
    throw new Error('--upstream http://127.0.0.1:PORT is required (loopback only)');
  }
  const mode = values.client ?? 'free-list';
  if (mode !== 'free-list' && mode !== 'pool') throw new Error(`--client must be free-list or pool, got ${mode}`);
  // Enough connections for the open-loop ladder (7,500 in flight at 5,000 req/s × 1.5 s);
  // undici opens them only as needed.
  const max = Number(values.connections ?? '10000');
  const clientOptions = {
    pipelining: 1,
    keepAliveTimeout: 60_000,
    keepAliveMaxTimeout: 600_000,
    headersTimeout: 60_000,
    bodyTimeout: 60_000,
  };
  const pool = mode === 'pool' ? new Pool(upstream, { ...clientOptions, connections: max }) : null;
  const idle: Client[] = [];
  const all: Client[] = [];

  /** Sends one request upstream on a connection of the chosen kind. */
  const forward = (opts: Dispatcher.DispatchOptions, req: IncomingMessage, res: ServerResponse): void => {
    if (pool !== null) {
      pool.dispatch(opts, new Relay(req, res, () => {}));
      return;
    }
    let client = idle.pop();
    if (client === undefined) {
      // Past `max` connections a new one is still opened: the bound is the descriptor limit.
      client = new Client(upstream, clientOptions);
      all.push(client);
    }
    const c = client;
    c.dispatch(opts, new Relay(req, res, () => idle.push(c)));
  };

  const readBody = values['read-body'] === true;
  /** `--read-body`: the whole body, parsed for its model, then forwarded as the bytes read. */
  const forwardRead = (req: IncomingMessage, res: ServerResponse): void => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      let model: unknown;
      try {
        model = (JSON.parse(body.toString('utf8')) as { model?: unknown } | null)?.model;
      } catch {
        model = undefined;
      }
      if (typeof model !== 'string') {
        const err = JSON.stringify({ error: { message: 'node-proxy: the body must be a JSON object with a string model', type: 'invalid_request_error' } });
        res.writeHead(400, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(err) });
        res.end(err);
        return;
      }
      forward({ path: req.url ?? '/', method: (req.method ?? 'POST') as Dispatcher.HttpMethod, headers: forwardable(req.headers), body }, req, res);
    });
  };

  const server = createServer((req, res) => {
    if (readBody && req.method !== 'GET' && req.method !== 'HEAD') {
      forwardRead(req, res);
      return;
    }
    forward(
      {
        path: req.url ?? '/',
        method: (req.method ?? 'GET') as Dispatcher.HttpMethod,
        headers: forwardable(req.headers),
        // The request body is streamed upstream as it arrives.
        body: req.method === 'GET' || req.method === 'HEAD' ? null : req,
      },
      req,
      res,
    );
  });
  // Longer than the driver's and the gateway's idle timeouts' floor: the proxy is never the side
  // that drops a keep-alive connection mid-run (same reasoning as bench/mock/server.ts).
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  server.requestTimeout = 0;
  server.maxRequestsPerSocket = 0;

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port, host: '127.0.0.1', backlog: 4096 }, () => resolve());
  });
  const addr = server.address();
  const actual = typeof addr === 'object' && addr !== null ? addr.port : port;
  process.stdout.write(`node-proxy listening on http://127.0.0.1:${actual} (upstream client: ${mode}${readBody ? ', reads the body first' : ''})\n`);

  let stopping = false;
  const stop = (): void => {
    if (stopping) process.exit(1);
    stopping = true;
    server.close();
    server.closeAllConnections();
    void Promise.all([pool?.destroy(), ...all.map((c) => c.destroy())]).finally(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((err: unknown) => {
  process.stderr.write(`node-proxy: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 2;
});
