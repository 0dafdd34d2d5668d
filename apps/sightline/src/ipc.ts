/**
 * The channel between the two processes of the embedded mode (issue 15, item 2): the parent
 * serves requests (gateway, capture publisher, in-process bus, key directory, limits), the
 * child owns chdb (ingester, store, query API). They talk over Node's IPC channel
 * (`child_process.fork` with `serialization: 'advanced'`, so batches cross as bytes, not
 * JSON arrays).
 *
 * The child calls; the parent answers. Calls are few per batch (one fetch per group of
 * messages, one ack per message) and none per request.
 */
import type { KeyRecord, TeamRecord } from '@sightline/directory';

/** A directory's whole state, as the parent sends it to the child's mirror. */
export interface DirectoryDump {
  keys: KeyRecord[];
  teams: TeamRecord[];
}

/** A message of the in-process bus lent to the child; `tag` names it in ack, nak and deadLetter. */
export interface WireMessage {
  tag: number;
  data: Uint8Array;
  msgId: string;
  deliveries: number;
}

/** Directory writes the query API's admin endpoints make (Directory's write methods). */
export type DirectoryWrite =
  | { op: 'createKey'; args: [input: unknown, nowMs: number] }
  | { op: 'revokeKey'; args: [id: string, nowMs: number] }
  | { op: 'rotateKey'; args: [id: string, graceSeconds: number, nowMs: number] }
  | { op: 'putTeam'; args: [name: string, settings: unknown, nowMs: number] };

export type Call =
  | { op: 'fetch'; max: number; expiresMs: number }
  | { op: 'ack'; tag: number }
  | { op: 'deadLetter'; tag: number; reason: string }
  | { op: 'usage'; query: unknown; nowMs: number }
  | { op: 'directoryState' }
  | { op: 'directoryWrite'; write: DirectoryWrite };

/** Child to parent. */
export type ToParent =
  | { t: 'call'; id: number; call: Call }
  | { t: 'nak'; tag: number; delayMs: number }
  /** The child's ingester and query API are serving. */
  | { t: 'ready' };

/** A failure carried across: enough to rebuild a DirectoryError on the other side. */
export interface WireError {
  name: string;
  message: string;
  code?: string;
  field?: string | null;
}

/** Parent to child. */
export type ToChild =
  | { t: 'reply'; id: number; ok: true; value: unknown }
  | { t: 'reply'; id: number; ok: false; error: WireError }
  /** Close the ingester, the query API and the store, then exit 0. */
  | { t: 'shutdown' };

export function toWireError(e: unknown): WireError {
  if (e instanceof Error) {
    const x = e as Error & { code?: unknown; field?: unknown };
    return {
      name: e.name,
      message: e.message,
      ...(typeof x.code === 'string' ? { code: x.code } : {}),
      ...(typeof x.field === 'string' || x.field === null ? { field: x.field as string | null } : {}),
    };
  }
  return { name: 'Error', message: String(e) };
}
