// Types of egress-client (egress_client.js): the client, its options, the response and
// the error, and the egress.v1 messages as @grpc/proto-loader gives them (field names as
// in egress.proto, 64-bit integers as numbers, enums as their names, bytes as Buffers).

/// <reference types="node" />

/** google.protobuf.Duration. */
export interface Duration { seconds: number; nanos: number; }

/** egress.v1.Header: `value_bytes` is set when the value is not UTF-8. */
export interface Header { name: string; value: string; value_bytes: Buffer; }

/** egress.v1.ConnectionInfo: the upstream connection a fetch went over. */
export interface ConnectionInfo {
  reused: boolean;
  was_idle: boolean;
  idle_time: Duration | null;
  connection_id: number;
  remote_address: string;
  protocol: string;
}

/** egress.v1.Timing. */
export interface Timing {
  dns: Duration | null;
  connect: Duration | null;
  tls_handshake: Duration | null;
  time_to_first_byte: Duration | null;
  total: Duration | null;
}

/** egress.v1.FetchResponse. */
export interface FetchResponse {
  status_code: number;
  headers: Header[];
  body: Buffer;
  body_truncated: boolean;
  connection: ConnectionInfo | null;
  timing: Timing | null;
  trace_id: string;
  span_id: string;
}

/** egress.v1.Config (see proto/egress/v1/egress.proto and docs/configuration.md). */
export interface Config { [field: string]: any; }

/** egress.v1.PoolStats: connections per origin by state. */
export interface PoolStats { origins: Array<{ [field: string]: any }>; }

/** TLS to one of egressd's listeners; every field optional. */
export interface Tls {
  /** PEM roots egressd's certificate must chain to (none: the system's). */
  caFile?: string;
  /** A client certificate and its key, for mTLS: both or neither. */
  certFile?: string;
  keyFile?: string;
  /** The name egressd's certificate carries when it is not the target's host. */
  serverName?: string;
}

export interface ClientOptions {
  /** egressd's Egress listener; default '127.0.0.1:50051'. 'dns:///name:port' spreads over every address. */
  target?: string;
  /** egressd's admin listener; default '127.0.0.1:50052'. */
  adminTarget?: string;
  /** The deadline of every call; default 30000. */
  timeoutMs?: number;
  tls?: Tls;
  adminTls?: Tls;
  /** Sent as "authorization: Bearer ..." on admin calls only. */
  adminToken?: string;
  /** [key, value] pairs sent on every fetch, e.g. the caller identity. */
  metadata?: Array<[string, string]>;
  /** gRPC channel options of the Egress channel; round robin unless they set a policy. */
  channelOptions?: { [option: string]: string | number };
  /** How often a fetch a stopping egressd turned away is sent again; default 3. */
  shutdownRetries?: number;
}

export interface FetchOptions {
  method?: string;
  /** [name, value] pairs; a Buffer value is sent byte for byte. */
  headers?: Array<[string, string | Buffer]>;
  body?: Buffer;
  /** Status and headers only: egressd drains the body. */
  headOnly?: boolean;
  /** The first `prefix` bytes of the body. */
  prefix?: number;
  maxBodyBytes?: number;
  timeoutMs?: number;
  followRedirects?: boolean;
}

export interface Response {
  statusCode: number;
  headers: Array<[string, string]>;
  /** The first value of header `name` (case-insensitive); not UTF-8: read as latin1. */
  header(name: string): string | undefined;
  /** The same value exactly as the upstream sent it. */
  headerBytes(name: string): Buffer | undefined;
  body: Buffer;
  bodyTruncated: boolean;
  /** The upstream connection had carried an earlier request. */
  reused: boolean;
  connectionId: number;
  /** Everything else: timing, remote address, idle time. */
  raw: FetchResponse;
}

/** egressd could not give an HTTP answer. */
export class EgressError extends Error {
  /** The gRPC code's name: 'INVALID_ARGUMENT', 'PERMISSION_DENIED', 'UNAVAILABLE', ... */
  code: string;
  /** egressd's message. */
  details: string;
  /** google.rpc.ErrorInfo's reason, e.g. 'POLICY_DENIED'; undefined without one. */
  reason?: string;
  /** 'egress.v1' with an ErrorInfo. */
  domain?: string;
  /** For POLICY_DENIED: rule, host, origin and, when an address rule decided, address. */
  metadata: { [key: string]: string };
  /** How long egressd asks the caller to wait before a retry (google.rpc.RetryInfo). */
  retryDelayMs?: number;
}

export class EgressClient {
  constructor(options?: ClientOptions);
  /** One HTTP request through egressd; rejects with EgressError when there is no HTTP answer. */
  fetch(url: string, options?: FetchOptions): Promise<Response>;
  getConfig(): Promise<Config>;
  /** Swaps in `config` whole; resolves with the config in force. */
  updateConfig(config: Config): Promise<Config>;
  poolStats(): Promise<PoolStats>;
  close(): void;
}

/** The service config every client defaults to: round robin over every address. */
export const DEFAULT_SERVICE_CONFIG: string;
