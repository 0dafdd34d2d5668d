/**
 * `npm run start:gateway`: the gateway alone, configured by environment.
 *   SIGHTLINE_CONFIG  configuration file (default config/sightline.yaml)
 *   NATS_URL          NATS server(s), comma-separated (required)
 *   GATEWAY_PORT      listening port (through the shipped file's ${GATEWAY_PORT})
 *   SIGHTLINE_BENCH_CAPTURE_OFF=1  benchmark-only: serve without capture
 */
import { ConfigError, loadConfigFromEnv } from '@sightline/config';
import { ResilientNatsPublisher } from '@sightline/bus';
import { instanceId, onShutdown } from '@sightline/core';
import { dataDir } from '@sightline/store';
import { join } from 'node:path';
import { startGateway } from './start.js';

function log(msg: string): void {
  process.stderr.write(`${new Date().toISOString()} gateway ${msg}\n`);
}

async function main(): Promise<void> {
  // The spool lives with the rest of the local data unless told otherwise.
  process.env.SIGHTLINE_SPOOL_DIR ||= join(dataDir(), 'spool');
  const config = loadConfigFromEnv();
  const natsUrl = process.env.NATS_URL;
  if (natsUrl === undefined || natsUrl === '') throw new Error('NATS_URL is required (e.g. nats://127.0.0.1:4222); `npm start` runs everything on one machine without it');
  const instance = instanceId('gw');
  const publisher = new ResilientNatsPublisher(natsUrl, instance);
  const gw = await startGateway({ config, publisher, instance, captureOff: process.env.SIGHTLINE_BENCH_CAPTURE_OFF === '1', log });
  log(`listening on ${gw.url} (instance ${instance}, config ${config.file})`);
  void publisher.ready.then(() => log(`connected to NATS at ${natsUrl}`));
  onShutdown(async () => {
    log('shutting down');
    await gw.close(10_000);
  });
}

main().catch((e: unknown) => {
  if (e instanceof ConfigError) console.error(`invalid configuration: ${e.message}`);
  else console.error(e);
  process.exit(1);
});
