/**
 * `node --import tsx --import ./test/support/module-log.ts app.ts`: writes, when the
 * process exits, every module it loaded (one URL a line) to $SIGHTLINE_MODULE_LOG.
 * ES modules are seen by a resolve hook (module-log-hooks.ts), CommonJS modules in
 * require's cache: an ES import of a CommonJS package passes the hook, and what it
 * require()s lands in the cache.
 */
import { createRequire, register } from 'node:module';
import { writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { MessageChannel } from 'node:worker_threads';

const file = process.env.SIGHTLINE_MODULE_LOG;
if (file === undefined || file === '') throw new Error('module-log.ts needs SIGHTLINE_MODULE_LOG');
const urls = new Set<string>();
const { port1, port2 } = new MessageChannel();
port1.on('message', (url: string) => urls.add(url));
port1.unref();
register('./module-log-hooks.ts', import.meta.url, { data: { port: port2 }, transferList: [port2] });

process.on('exit', () => {
  for (const path of Object.keys(createRequire(import.meta.url).cache)) urls.add(pathToFileURL(path).href);
  writeFileSync(file, [...urls].sort().join('\n') + '\n');
});
