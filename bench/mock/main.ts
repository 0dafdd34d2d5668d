/**
 * CLI for the mock provider: `npm run mock -- --port 8090 --latency-ms 20 --chunks 10`.
 * Prints one line with the URL, then serves until SIGINT/SIGTERM.
 */
import { parseArgs } from 'node:util';
import { startMock } from './server.js';
import type { MockOptions } from './server.js';

const USAGE = `usage: mock [--port N] [--host H] [--latency-ms N] [--ttft-ms N] [--gap-ms N]
            [--chunks N] [--response-bytes N] [--status N]
--port defaults to $MOCK_PORT or 8090; --status forces an error status (400-599) on every request.`;

function integer(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value)) throw new Error(`--${flag} must be a non-negative integer, got '${value}'`);
  return Number(value);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      port: { type: 'string' },
      host: { type: 'string' },
      'latency-ms': { type: 'string' },
      'ttft-ms': { type: 'string' },
      'gap-ms': { type: 'string' },
      chunks: { type: 'string' },
      'response-bytes': { type: 'string' },
      status: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help === true) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }

  const opts: MockOptions = { port: integer('port', values.port ?? process.env['MOCK_PORT'] ?? '8090') ?? 8090 };
  if (values.host !== undefined) opts.host = values.host;
  const knobs: [Exclude<keyof MockOptions, 'host' | 'port'>, string, string | undefined][] = [
    ['latencyMs', 'latency-ms', values['latency-ms']],
    ['ttftMs', 'ttft-ms', values['ttft-ms']],
    ['gapMs', 'gap-ms', values['gap-ms']],
    ['chunks', 'chunks', values.chunks],
    ['responseBytes', 'response-bytes', values['response-bytes']],
    ['status', 'status', values.status],
  ];
  for (const [key, flag, raw] of knobs) {
    const value = integer(flag, raw);
    if (value !== undefined) opts[key] = value;
  }

  const mock = await startMock(opts);
  process.stdout.write(`mock provider listening on ${mock.url}\n`);

  let stopping = false;
  const stop = (): void => {
    if (stopping) {
      // A second signal while closing: give up waiting.
      process.exit(1);
    }
    stopping = true;
    void mock.close().then(() => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
    });
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

main().catch((err: unknown) => {
  process.stderr.write(`mock: ${err instanceof Error ? err.message : String(err)}\n${USAGE}\n`);
  process.exitCode = 2;
});
