/**
 * A local OTLP receiver for the export tests: a real HTTP server taking
 * `POST /v1/traces` in OTLP/HTTP JSON and protobuf, and a real gRPC server (@grpc/grpc-js)
 * taking `TraceService/Export`. Every request is decoded into spans with their attributes
 * and resource, so the tests check what a backend would see.
 *
 * Protobuf is decoded here by a small reader of the wire format
 * (https://protobuf.dev/programming-guides/encoding/) over the fields of
 * opentelemetry/proto/collector/trace/v1/trace_service.proto and trace/v1/trace.proto the
 * tests look at; a field it does not know is skipped by its wire type, as any decoder does.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import * as grpc from '@grpc/grpc-js';

export type AttrValue = string | number | boolean | null | AttrValue[];

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  /** OTLP's SpanKind: 1 internal, 2 server, 3 client. */
  kind: number;
  attributes: Record<string, AttrValue>;
  resource: Record<string, AttrValue>;
  scope: string;
}

export interface ReceivedRequest {
  contentType: string;
  headers: Record<string, string>;
  spans: ReceivedSpan[];
}

// --- protobuf ---------------------------------------------------------------------------

interface Field {
  no: number;
  wire: number;
  /** Varints (wire 0) and fixed64 (wire 1) as bigint, fixed32 (wire 5) as number. */
  int: bigint;
  bytes: Buffer;
}

function fields(buf: Buffer): Field[] {
  const out: Field[] = [];
  let i = 0;
  const varint = (): bigint => {
    let v = 0n;
    let shift = 0n;
    for (;;) {
      if (i >= buf.length) throw new Error('protobuf: truncated varint');
      const b = buf[i++]!;
      v |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return v;
      shift += 7n;
    }
  };
  while (i < buf.length) {
    const key = Number(varint());
    const no = key >>> 3;
    const wire = key & 7;
    const empty = Buffer.alloc(0);
    switch (wire) {
      case 0:
        out.push({ no, wire, int: varint(), bytes: empty });
        break;
      case 1:
        out.push({ no, wire, int: buf.readBigUInt64LE(i), bytes: buf.subarray(i, i + 8) });
        i += 8;
        break;
      case 2: {
        const len = Number(varint());
        if (i + len > buf.length) throw new Error('protobuf: truncated field');
        out.push({ no, wire, int: 0n, bytes: buf.subarray(i, i + len) });
        i += len;
        break;
      }
      case 5:
        out.push({ no, wire, int: BigInt(buf.readUInt32LE(i)), bytes: buf.subarray(i, i + 4) });
        i += 4;
        break;
      default:
        throw new Error(`protobuf: wire type ${wire} not expected in OTLP`);
    }
  }
  return out;
}

function pbAnyValue(buf: Buffer): AttrValue {
  for (const f of fields(buf)) {
    switch (f.no) {
      case 1:
        return f.bytes.toString('utf8');
      case 2:
        return f.int !== 0n;
      case 3:
        return Number(BigInt.asIntN(64, f.int));
      case 4:
        return f.bytes.readDoubleLE(0);
      case 5:
        return fields(f.bytes).filter((v) => v.no === 1).map((v) => pbAnyValue(v.bytes));
      default:
        return null;
    }
  }
  return null;
}

function pbAttributes(kvs: Field[]): Record<string, AttrValue> {
  const out: Record<string, AttrValue> = {};
  for (const kv of kvs) {
    let key = '';
    let value: AttrValue = null;
    for (const f of fields(kv.bytes)) {
      if (f.no === 1) key = f.bytes.toString('utf8');
      if (f.no === 2) value = pbAnyValue(f.bytes);
    }
    out[key] = value;
  }
  return out;
}

/** The spans of an ExportTraceServiceRequest in protobuf. */
export function decodeProtobufRequest(buf: Buffer): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const rs of fields(buf).filter((f) => f.no === 1)) {
    let resource: Record<string, AttrValue> = {};
    const scopeSpans: Buffer[] = [];
    for (const f of fields(rs.bytes)) {
      if (f.no === 1) resource = pbAttributes(fields(f.bytes).filter((a) => a.no === 1));
      if (f.no === 2) scopeSpans.push(f.bytes);
    }
    for (const ss of scopeSpans) {
      let scope = '';
      for (const f of fields(ss)) {
        if (f.no === 1) scope = (fields(f.bytes).find((s) => s.no === 1)?.bytes ?? Buffer.alloc(0)).toString('utf8');
      }
      for (const sp of fields(ss).filter((f) => f.no === 2)) {
        const s: ReceivedSpan = { traceId: '', spanId: '', parentSpanId: '', name: '', kind: 0, attributes: {}, resource, scope };
        const attrs: Field[] = [];
        for (const f of fields(sp.bytes)) {
          if (f.no === 1) s.traceId = f.bytes.toString('hex');
          else if (f.no === 2) s.spanId = f.bytes.toString('hex');
          else if (f.no === 4) s.parentSpanId = f.bytes.toString('hex');
          else if (f.no === 5) s.name = f.bytes.toString('utf8');
          else if (f.no === 6) s.kind = Number(f.int);
          else if (f.no === 9) attrs.push(f);
        }
        s.attributes = pbAttributes(attrs);
        spans.push(s);
      }
    }
  }
  return spans;
}

// --- JSON -----------------------------------------------------------------------------------

interface JsonAnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: number | string;
  doubleValue?: number;
  arrayValue?: { values?: JsonAnyValue[] };
}
interface JsonKeyValue {
  key: string;
  value?: JsonAnyValue;
}
interface JsonRequest {
  resourceSpans?: {
    resource?: { attributes?: JsonKeyValue[] };
    scopeSpans?: { scope?: { name?: string }; spans?: { traceId: string; spanId: string; parentSpanId?: string; name: string; kind?: number; attributes?: JsonKeyValue[] }[] }[];
  }[];
}

function jsonAnyValue(v: JsonAnyValue | undefined): AttrValue {
  if (v === undefined) return null;
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.arrayValue !== undefined) return (v.arrayValue.values ?? []).map(jsonAnyValue);
  return null;
}

function jsonAttributes(kvs: JsonKeyValue[] | undefined): Record<string, AttrValue> {
  const out: Record<string, AttrValue> = {};
  for (const kv of kvs ?? []) out[kv.key] = jsonAnyValue(kv.value);
  return out;
}

/**
 * The spans of an ExportTraceServiceRequest in OTLP/JSON (ids as hex strings, per
 * https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding).
 */
export function decodeJsonRequest(body: string): ReceivedSpan[] {
  const req = JSON.parse(body) as JsonRequest;
  const spans: ReceivedSpan[] = [];
  for (const rs of req.resourceSpans ?? []) {
    const resource = jsonAttributes(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? []) {
      for (const sp of ss.spans ?? []) {
        spans.push({ traceId: sp.traceId, spanId: sp.spanId, parentSpanId: sp.parentSpanId ?? '', name: sp.name, kind: sp.kind ?? 0, attributes: jsonAttributes(sp.attributes), resource, scope: ss.scope?.name ?? '' });
      }
    }
  }
  return spans;
}

// --- servers --------------------------------------------------------------------------------

export interface Receiver {
  /** `http://127.0.0.1:PORT/v1/traces` for HTTP, `http://127.0.0.1:PORT` for gRPC. */
  url: string;
  requests: ReceivedRequest[];
  /** Every span received, by span id. */
  spans(): Map<string, ReceivedSpan>;
  close(): Promise<void>;
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function spanMap(requests: ReceivedRequest[]): Map<string, ReceivedSpan> {
  const m = new Map<string, ReceivedSpan>();
  for (const r of requests) for (const s of r.spans) m.set(s.spanId, s);
  return m;
}

/**
 * An OTLP/HTTP receiver. `onRequest` runs before the answer is sent (a test can look at
 * ClickHouse at the moment spans arrive); `mode: 'hang'` takes requests and never answers.
 */
export async function startHttpReceiver(opts: { onRequest?: (r: ReceivedRequest) => Promise<void>; mode?: 'ok' | 'hang' } = {}): Promise<Receiver> {
  const requests: ReceivedRequest[] = [];
  const server: Server = createServer((req, res) => {
    void (async () => {
      const body = await readBody(req);
      if (opts.mode === 'hang') return;
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      const contentType = String(req.headers['content-type'] ?? '');
      const spans = contentType.startsWith('application/json') ? decodeJsonRequest(body.toString('utf8')) : contentType.startsWith('application/x-protobuf') ? decodeProtobufRequest(body) : null;
      if (spans === null) {
        res.writeHead(415).end();
        return;
      }
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers[k] = v;
      const r = { contentType, headers, spans };
      await opts.onRequest?.(r);
      requests.push(r);
      // An empty ExportTraceServiceResponse: full success.
      if (contentType.startsWith('application/json')) res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      else res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    })().catch(() => res.writeHead(500).end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
  return {
    url: `http://127.0.0.1:${port}/v1/traces`,
    requests,
    spans: () => spanMap(requests),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const EXPORT_PATH = '/opentelemetry.proto.collector.trace.v1.TraceService/Export';

/** An OTLP/gRPC receiver: the TraceService's one method, messages decoded with the protobuf reader above. */
export async function startGrpcReceiver(): Promise<Receiver> {
  const requests: ReceivedRequest[] = [];
  const server = new grpc.Server();
  const same = (b: Buffer): Buffer => b;
  const definition: grpc.ServiceDefinition = {
    Export: { path: EXPORT_PATH, requestStream: false, responseStream: false, requestSerialize: same, requestDeserialize: same, responseSerialize: same, responseDeserialize: same },
  };
  server.addService(definition, {
    Export: (call: grpc.ServerUnaryCall<Buffer, Buffer>, done: grpc.sendUnaryData<Buffer>) => {
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(call.metadata.getMap())) headers[k] = String(v);
      requests.push({ contentType: 'application/grpc', headers, spans: decodeProtobufRequest(call.request) });
      done(null, Buffer.alloc(0));
    },
  });
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e === null ? resolve(p) : reject(e))));
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    spans: () => spanMap(requests),
    close: () => new Promise<void>((resolve) => server.tryShutdown(() => resolve())),
  };
}
