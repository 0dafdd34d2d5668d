/**
 * The dashboard's files, read once at start into memory: the single-page app under
 * `public/` (plain ES modules, no build step) and uPlot's distribution files from
 * node_modules (served as `vendor/…`, so nothing is copied or committed).
 *
 * The server answers only for paths in this map, so a request path can never reach a file
 * outside it (`../`, encoded or not, is simply not a key). The whole set is about 300 KB;
 * each file is also kept gzipped for clients that accept it.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { extname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { DashboardError } from './errors.js';

export interface Asset {
  /** Path under `/ui/`, with `/` separators: `app.js`, `pages/overview.js`, `vendor/uPlot.esm.js`. */
  path: string;
  contentType: string;
  body: Buffer;
  /** The body gzipped, or null when that would not be smaller. */
  gzip: Buffer | null;
  /** A strong validator: the body's SHA-256, quoted. */
  etag: string;
}

/** Content types by extension; a file of another type is not served. */
const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json; charset=utf-8',
};

/** uPlot's files, by the name they are served under (`vendor/…`). */
const VENDOR: Record<string, string> = {
  'vendor/uPlot.esm.js': 'uplot/dist/uPlot.esm.js',
  'vendor/uPlot.min.css': 'uplot/dist/uPlot.min.css',
};

/** The directory of the single-page app. */
export const PUBLIC_DIR = fileURLToPath(new URL('../public/', import.meta.url));

function asset(path: string, body: Buffer): Asset {
  const contentType = TYPES[extname(path)];
  if (contentType === undefined) throw new DashboardError('SL_DASHBOARD_ASSETS', `no content type for ${path}`);
  const gz = contentType.startsWith('image/png') ? null : gzipSync(body, { level: 9 });
  return { path, contentType, body, gzip: gz !== null && gz.length < body.length ? gz : null, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"` };
}

function walk(dir: string, out: string[]): void {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, out);
    else out.push(p);
  }
}

/**
 * Reads the dashboard's files. Type declarations and the type-checking configuration under
 * `public/` (`*.d.ts`, `tsconfig.json`) are for the compiler only and are not served.
 */
export function loadAssets(publicDir: string = PUBLIC_DIR): Map<string, Asset> {
  const out = new Map<string, Asset>();
  try {
    const files: string[] = [];
    walk(publicDir, files);
    for (const file of files) {
      const path = relative(publicDir, file).split(sep).join('/');
      if (path.endsWith('.d.ts') || path === 'tsconfig.json' || TYPES[extname(path)] === undefined) continue;
      out.set(path, asset(path, readFileSync(file)));
    }
    const require = createRequire(import.meta.url);
    for (const [path, module] of Object.entries(VENDOR)) out.set(path, asset(path, readFileSync(require.resolve(module))));
  } catch (e) {
    if (e instanceof DashboardError) throw e;
    throw new DashboardError('SL_DASHBOARD_ASSETS', `the dashboard's files could not be read (${e instanceof Error ? e.message : String(e)}); run npm ci`, { cause: e });
  }
  if (!out.has('index.html')) throw new DashboardError('SL_DASHBOARD_ASSETS', `no index.html in ${publicDir}`);
  return out;
}

/**
 * Headers of every dashboard answer. The page shows text captured from strangers (prompts
 * and answers), so it is rendered as text only, and the policy allows no script but the
 * dashboard's own files, no inline script and no other origin: a prompt that smuggles
 * markup can neither run nor call out.
 */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
};
