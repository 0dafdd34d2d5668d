/**
 * Credentials out of printed text. NATS and ClickHouse URLs may carry `user:password@` or a
 * `token@` (https://docs.nats.io/using-nats/developer/connecting/userpass); a URL is printed at
 * start and inside connection errors, so every line that may hold one goes through here.
 */

/** `scheme://user:pass@host` → `scheme://***@host`, for every URL in `text` (lists too). */
export function redactUrlCredentials(text: string): string {
  return text.replace(/([a-z][a-z0-9+.-]*:\/\/)[^\s/@,]*@/gi, '$1***@');
}
